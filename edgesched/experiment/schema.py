"""Typed experiment configuration (Hydra structured configs) and its validation.

The dataclasses are registered in Hydra's ConfigStore by :func:`store_schemas`, so a
misspelled key fails at composition, naming the key. Value ranges are checked by
:func:`validate` before anything is written, naming the key, the value and what is allowed;
it also rejects keys that no schema declares (Hydra's ``+key=value`` adds them regardless).

Each algorithm's hyperparameters are its own config dataclass, named by its registry entry
(:mod:`edgesched.algos`); :func:`store_schemas` stores each as ``schema/algo/<name>``,
which ``conf/algo/<name>.yaml`` extends, so Hydra rejects a key the chosen algorithm does not
have. :func:`algo_params` and :func:`algo_users` read the keys from those classes for
``train.py --help`` and for its friendlier command-line errors.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from edgesched.algos import POLICY_ROWS, RLPTO_PLACEMENTS, TAPFINGER_CONFLICT_WINNERS
from edgesched.algos.base import AlgorithmConfig
from edgesched.protocol import MAX_ENV_COPIES, MAX_EVAL_EPISODES, MAX_EVAL_SEED


def AlgoConfig(name: str, **values: Any) -> AlgorithmConfig:
    """The config dataclass of algorithm ``name`` (alias of :func:`edgesched.algos.algo_config`).

    The name is that of the one class that held every algorithm's hyperparameters. Each
    algorithm has its own config class now (``edgesched.algos.<Name>Config``, listed
    by its registry entry); this keeps ``AlgoConfig(name="mappo", lr=1e-3)`` working.

    Raises:
        KeyError: unknown algorithm.
        TypeError: a key the algorithm does not have.
    """
    from edgesched.algos import algo_config

    return algo_config(name, **values)


def algo_params(name: str) -> tuple[str, ...]:
    """The hyperparameter keys of algorithm ``name``, ``name`` first and ``variant`` last.

    Derived from the algorithm's config class (its registry entry).

    Args:
        name: registered algorithm; an unknown one gets every registered algorithm's keys
            (nothing to filter by).
    """
    from edgesched.algos import get_algorithm, list_algorithms

    if name in list_algorithms():
        return get_algorithm(name).keys
    every: dict[str, None] = {}
    for algo in list_algorithms():
        every |= dict.fromkeys(get_algorithm(algo).keys)
    return tuple(every)


def algo_users(key: str) -> list[str]:
    """The registered algorithms that have hyperparameter ``key``."""
    from edgesched.algos import get_algorithm, list_algorithms

    return [a for a in list_algorithms() if key in get_algorithm(a).keys]


@dataclass
class TraceConfig:
    """Job trace of a trace-driven scenario (``edgesched.envs.workloads``).

    ``None`` keeps the scenario's own setting.

    Attributes:
        path: CSV trace file (absolute, relative to the working directory, or relative to the
            real-data folder), e.g. ``env.trace.path=/data/philly.csv``.
        format: ``auto``, ``philly``, ``pollux`` or ``alibaba``.
        window_start_hours: replay window start in trace hours; negative: drawn per episode.
    """

    path: str | None = None
    format: str | None = None
    window_start_hours: float | None = None


TRACE_PARAMS = {
    "path": "trace_path",
    "format": "trace_format",
    "window_start_hours": "trace_window_start_hours",
}
"""``env.trace.<key>`` -> simulator parameter."""


@dataclass
class EnvConfig:
    """Scenario selection.

    Attributes:
        name: registered scenario (``edgesched.list_scenarios()``).
        overrides: scenario parameters to change (validated by the simulator).
        trace: the job trace of trace-driven scenarios (``edge50-trace``, ``edge50-philly``).
    """

    name: str = MISSING
    overrides: dict[str, Any] = field(default_factory=dict)
    trace: TraceConfig = field(default_factory=TraceConfig)


def scenario_overrides(env_cfg: Any) -> dict[str, Any]:
    """Simulator parameters of an ``env`` config: ``overrides`` plus the ``trace`` settings.

    A relative trace path that exists under the working directory is made absolute, so the
    run's record and checkpoint point at the same file wherever they are re-evaluated.

    Raises:
        ValueError: ``env.trace.<key>`` and ``env.overrides.<param>`` both set, differently.
    """
    raw = env_cfg.overrides
    if isinstance(raw, DictConfig):
        raw = OmegaConf.to_container(raw, resolve=True)
    overrides = dict(raw)
    trace = env_cfg.get("trace") or {}
    for key, param in TRACE_PARAMS.items():
        value = trace.get(key)
        if value is None:
            continue
        if key == "path":
            local = Path(value).expanduser()
            value = str(local.resolve()) if local.is_file() else str(value)
        if param in overrides and overrides[param] != value:
            raise ValueError(
                f"env.trace.{key}={value!r} conflicts with env.overrides.{param}="
                f"{overrides[param]!r}; set only one"
            )
        overrides[param] = value
    return overrides


@dataclass
class ShieldConfig:
    """Collision shield in the loop (``edgesched.shields``).

    Attributes:
        name: ``none``, ``central`` or ``regional``.
        rounds: regional shields' coordination rounds per decision.
        boundary: regional shields' rule for unconfirmed boundary claims when the rounds are
            used up: ``optimistic`` or ``conservative``.
    """

    name: str = "none"
    rounds: int = 2
    boundary: str = "optimistic"


def whole_updates(total_env_steps: int, per_update: int) -> int:
    """Updates a run trains: as many whole updates as fit in the budget, at least one."""
    return max(int(total_env_steps) // int(per_update), 1)


def algo_label(algo_cfg: Any) -> str:
    """The entry name of a run in records and leaderboards: ``name`` or ``name-variant``."""
    variant = str(algo_cfg.get("variant", "") or "")
    return f"{algo_cfg.name}-{variant}" if variant else str(algo_cfg.name)


def shield_kwargs(shield_cfg: Any) -> dict[str, Any]:
    """Options of the configured shield for :func:`edgesched.shields.make_shield`."""
    if shield_cfg.name == "regional":
        return {"rounds": int(shield_cfg.rounds), "boundary": str(shield_cfg.boundary)}
    return {}


@dataclass
class LoggerConfig:
    """External logger; local files are always written.

    Attributes:
        name: ``none`` or ``wandb``.
        mode: wandb mode, ``offline`` (default) or ``online``.
        project: wandb project.
        entity: wandb entity (team), empty for the default.
    """

    name: str = "none"
    mode: str = "offline"
    project: str = "edgesched"
    entity: str = ""


@dataclass
class ExperimentConfig:
    """Budgets and evaluation protocol.

    Attributes:
        name: ``default``, ``smoke`` or ``paper``.
        total_env_steps: decision rounds to collect, summed over the env copies.
        num_envs: environment copies stepped together.
        rollout_steps: decision rounds per copy per update.
        checkpoint_every: updates between checkpoints.
        checkpoint_min_seconds: wall-clock seconds that must pass after a checkpoint (or the
            start) before the next periodic one is written: a checkpoint is written at the
            first multiple of ``checkpoint_every`` updates that far apart, and always after
            the last update. A checkpoint with a replay buffer (``dqn_central``) is hundreds
            of megabytes, and writing one every ``checkpoint_every`` updates took about a
            third of a run's time. A killed run loses at most about this much training
            (plus up to ``checkpoint_every`` updates); the results never depend on it
            (resuming is exact from any checkpoint).
        eval_seeds: held-out workload seeds (disjoint from training seeds).
        eval_episodes: episodes per evaluation seed.
        env_max_slots: cap on slots per training episode (0 = the scenario's own).
        threads: torch CPU threads.
        log_every: updates between two progress lines when the output is not a terminal
            (logs, CI, SLURM, nohup); 0 prints about 20 lines per run. A terminal shows a
            progress bar instead. Console output never changes the results.
        curve_every: updates between two held-out evaluations of the learning curve (0: none);
            the points (and the final evaluation) go to ``eval.json``'s ``curve`` block,
            which the leaderboards aggregate into sample-efficiency curves. Evaluating saves
            and restores every random generator, so the training itself is unchanged.
        curve_seeds: how many of ``eval_seeds`` (the first ones) each curve point uses (0:
            all).
    """

    name: str = "default"
    total_env_steps: int = 150_000
    num_envs: int = 4
    rollout_steps: int = 128
    checkpoint_every: int = 10
    checkpoint_min_seconds: float = 120.0
    eval_seeds: list[int] = field(default_factory=lambda: [10_000, 10_001, 10_002])
    eval_episodes: int = 1
    env_max_slots: int = 0
    threads: int = 1
    log_every: int = 0
    curve_every: int = 0
    curve_seeds: int = 0


@dataclass
class TrainConfig:
    """Top-level configuration composed by ``train.py``.

    Attributes:
        algo: learned scheduler: the config dataclass of the chosen algorithm
            (``edgesched.algos.get_algorithm(name).config_class``), composed from
            ``conf/algo/<name>.yaml``.
        env: scenario.
        shield: collision shield.
        logger: external logger.
        experiment: budgets and evaluation.
        seed: training seed (workloads use seeds derived from it, never the eval seeds).
        resume: ``false``, ``true`` (latest unfinished run of this config) or a run path.
        output_dir: root of run directories.
        run_dir: this run's directory (set from Hydra's output directory).
    """

    # typed by the group file's schema (schema/algo/<name>): one class per algorithm
    algo: Any = MISSING
    env: EnvConfig = MISSING
    shield: ShieldConfig = field(default_factory=ShieldConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    experiment: ExperimentConfig = field(default_factory=ExperimentConfig)
    seed: int = 0
    resume: Any = False
    output_dir: str = "outputs"
    run_dir: str = ""


SCHEMA_GROUP = "schema"
"""ConfigStore group of the typed schemas. Group files extend theirs with
``- /schema/<group>@_here_``; kept apart from the groups themselves so that ``algo=<typo>``
never offers a schema as an option."""

SCHEMAS: dict[str, type] = {
    "algo": AlgorithmConfig,
    "env": EnvConfig,
    "shield": ShieldConfig,
    "logger": LoggerConfig,
    "experiment": ExperimentConfig,
}
"""Config group -> its schema. ``algo`` lists the keys every algorithm has; each algorithm's
own class is stored as ``schema/algo/<name>`` (:func:`algo_schema`)."""


def algo_schema(name: str) -> type:
    """The config class of algorithm ``name``, or :class:`AlgorithmConfig` if unknown."""
    from edgesched.algos import get_algorithm, list_algorithms

    return get_algorithm(name).config_class if name in list_algorithms() else AlgorithmConfig


def store_schemas() -> None:
    """Store the schemas in Hydra's ConfigStore (group files are validated against them).

    ``schema/<group>`` for the groups but ``algo``, and ``schema/algo/<name>`` for each
    registered algorithm's config class. ``train.py`` calls
    :func:`edgesched.experiment.register_configs`, which also registers the ``--help``
    resolvers.
    """
    from hydra.core.config_store import ConfigStore

    from edgesched.algos import get_algorithm, list_algorithms

    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    for group, node in SCHEMAS.items():
        if group != "algo":
            cs.store(group=SCHEMA_GROUP, name=group, node=node)
    for name in list_algorithms():
        cs.store(group=f"{SCHEMA_GROUP}/algo", name=name, node=get_algorithm(name).config_class)


def closest(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The one of ``choices`` closest to ``word`` (a likely typo of it), or ``None``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def field_docs(cls: type) -> dict[str, str]:
    """Field -> description from the ``Attributes:`` sections of ``cls``'s docstrings.

    A subclass's description of a field wins over its bases' (``SROLEConfig`` redescribes
    ``collision_penalty``).
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        docs |= _own_field_docs(klass)
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    docs: dict[str, str] = {}
    lines = (cls.__dict__.get("__doc__") or "").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return docs
    key = None
    for line in lines[start + 1 :]:
        m = re.match(r"\s{8}(\w+): (.*)", line)
        if m:
            key = m.group(1)
            docs[key] = m.group(2).strip()
        elif key and line.startswith(" " * 12) and line.strip():
            docs[key] += " " + line.strip()
        elif line.strip():
            break
    return docs


def check_keys(cfg: DictConfig) -> None:
    """Reject keys that no schema declares (``+algo.lrr=0.1`` adds one past Hydra's check).

    Raises:
        ExperimentConfigError: naming the key, the closest allowed one and all allowed ones.
    """
    top = [f.name for f in fields(TrainConfig)]
    nodes: list[tuple[str, Any, list[str]]] = [("", cfg, [*top, "hydra"])]
    for group, schema in SCHEMAS.items():
        if group in cfg and isinstance(cfg[group], DictConfig):
            allowed = [f.name for f in fields(schema)]
            if group == "algo":
                allowed = list(algo_params(str(cfg.algo.get("name", ""))))
            nodes.append((f"{group}.", cfg[group], allowed))
    trace = cfg.get("env", {}).get("trace") if isinstance(cfg.get("env"), DictConfig) else None
    if isinstance(trace, DictConfig):
        nodes.append(("env.trace.", trace, [f.name for f in fields(TraceConfig)]))
    every_algo_field = list(algo_params(""))
    for prefix, node, allowed in nodes:
        for key in node:
            if key in allowed:
                continue
            guess = closest(str(key), allowed)
            owner = f"{prefix.rstrip('.')}" if prefix else "the top level"
            if prefix == "algo.":
                owner = f"algo={cfg.algo.name}"
                users = algo_users(str(key))
                if users:  # a real hyperparameter, of other algorithms
                    raise ExperimentConfigError(
                        f"algo.{key}: {owner} does not use algo.{key} (a hyperparameter of "
                        f"{', '.join(users)}); the keys of {owner} are {', '.join(allowed)}"
                    )
                guess = guess or closest(str(key), every_algo_field)
            hint = f" did you mean {prefix}{guess}?" if guess else ""
            raise ExperimentConfigError(
                f"{prefix}{key} is not a configuration key;{hint} the keys of {owner} are "
                f"{', '.join(allowed)}"
            )


class ExperimentConfigError(ValueError):
    """A configuration value is out of range or names something unregistered."""


def _check(cond: bool, key: str, value: Any, allowed: str) -> None:
    if not cond:
        raise ExperimentConfigError(f"{key}={value!r} is not allowed; {allowed}")


# Ranges of hyperparameters, by key: each applies to the algorithms whose config class has
# the key, so a new algorithm reusing a key gets its check for free.
_OPEN_CLOSED = {
    "lr": (0.0, 1.0),
    "gamma": (0.0, 1.0),
    "gae_lambda": (0.0, 1.0),
    "clip": (0.0, 10.0),
    "vf_coef": (0.0, 1e3),
    "max_grad_norm": (0.0, 1e6),
}
_POSITIVE = (
    "copies",
    "epochs",
    "minibatches",
    "buffer_size",
    "batch_size",
    "train_freq",
    "target_update_interval",
    "forecast_window",
    "forecast_refit",
)
_UNIT = ("exploration_fraction", "exploration_final_eps")
_NON_NEGATIVE = {
    "target_kl": "need a number >= 0 (0: never stop an update's epochs early)",
    "queue_shaping": "need a non-negative weight (0 turns the shaping off)",
    "pointer_clip": "need a number >= 0 (0: unbounded pointer logits) or null (the scenario's)",
}


def _check_algo(a: DictConfig, shield: str) -> None:
    """Check the ranges of the hyperparameters algorithm config ``a`` has."""
    for key, (lo, hi) in _OPEN_CLOSED.items():
        if key in a:
            _check(
                lo < float(a[key]) <= hi, f"algo.{key}", a[key], f"need a number in ({lo}, {hi}]"
            )
    for key in _POSITIVE:
        if key in a:
            _check(int(a[key]) > 0, f"algo.{key}", a[key], "need a positive integer")
    if "learning_starts" in a:
        _check(int(a.learning_starts) >= 0, "algo.learning_starts", a.learning_starts, "need >= 0")
    for key in _UNIT:
        if key in a:
            _check(0.0 <= float(a[key]) <= 1.0, f"algo.{key}", a[key], "need a number in [0, 1]")
    for key, what in _NON_NEGATIVE.items():
        # None: a default that follows the scenario (pointer_clip)
        if key in a and a[key] is not None:
            _check(float(a[key]) >= 0.0, f"algo.{key}", a[key], what)
    if "ent_coef_start" in a:
        _check(
            float(a.ent_coef_start) >= 0 and float(a.ent_coef_end) >= 0,
            "algo.ent_coef_*",
            (a.ent_coef_start, a.ent_coef_end),
            "need non-negative entropy coefficients",
        )
    if "hidden" in a:
        _check(
            len(a.hidden) > 0 and all(int(h) > 0 for h in a.hidden),
            "algo.hidden",
            list(a.hidden),
            "need one or more positive layer sizes",
        )
    for key in ("gnn_hidden", "gnn_layers", "gnn_heads"):
        if key in a:
            low = 0 if key == "gnn_layers" else 1
            _check(
                low <= int(a[key]) <= 1024,
                f"algo.{key}",
                a[key],
                f"need an integer in [{low}, 1024]",
            )
    if "gnn_hidden" in a and "gnn_heads" in a:
        _check(
            int(a.gnn_hidden) % int(a.gnn_heads) == 0,
            "algo.gnn_hidden",
            a.gnn_hidden,
            f"must be divisible by algo.gnn_heads={a.gnn_heads} (HGTConv splits it by head)",
        )
    for key, allowed in (
        ("shield_training", ("postposed", "preemptive")),
        ("penalize", ("collided", "changed")),
        ("discount_unit", ("decision", "slot")),
        ("credit", ("team", "job")),
        ("placement", RLPTO_PLACEMENTS),
        ("conflict_winner", TAPFINGER_CONFLICT_WINNERS),
        ("policy_rows", POLICY_ROWS),
    ):
        if key in a:
            _check(a[key] in allowed, f"algo.{key}", a[key], f"use {'|'.join(allowed)}")
    # (dqn_central's head; TapFinger's pointer has its own mask and needs no key)
    if "action_masking" in a and bool(a.get("work_conserving", False)):
        _check(
            bool(a.get("action_masking", False)),
            "algo.work_conserving",
            a.work_conserving,
            "a work-conserving head needs algo.action_masking=true (the mask is what removes "
            "the pass action while a placement fits)",
        )
    if "collision_penalty" in a:
        _check(
            float(a.collision_penalty) == 0.0 or shield != "none",
            "algo.collision_penalty",
            a.collision_penalty,
            "it penalizes proposals a shield corrected, so it needs shield=central|regional "
            "(without a shield use env.overrides.collision_penalty)",
        )
        _check(
            float(a.collision_penalty) >= 0.0,
            "algo.collision_penalty",
            a.collision_penalty,
            "need a non-negative penalty",
        )


def validate(cfg: DictConfig | TrainConfig) -> None:
    """Check ranges and registry names; raise :class:`ExperimentConfigError` naming the key.

    Args:
        cfg: the composed configuration.
    """
    from edgesched.algos import get_algorithm, list_algorithms
    from edgesched.envs.scenarios import list_scenarios, make_config, scenario_versions
    from edgesched.shields import list_shields

    c = cfg if isinstance(cfg, DictConfig) else OmegaConf.structured(cfg)
    check_keys(c)
    algos, scen, shields = list_algorithms(), list_scenarios(), list_shields()
    _check(c.algo.name in algos, "algo.name", c.algo.name, f"registered algorithms: {algos}")
    # a name runs the latest version; a versioned id (edge50-v0) an earlier one
    ids = {v.id for name in scen for v in scenario_versions(name)}
    _check(
        c.env.name in scen or c.env.name in ids,
        "env.name",
        c.env.name,
        f"registered scenarios: {scen}, or a versioned id such as {scen[0]}-v0",
    )
    _check(c.shield.name in shields, "shield.name", c.shield.name, f"registered: {shields}")
    _check(int(c.shield.rounds) >= 1, "shield.rounds", c.shield.rounds, "need an integer >= 1")
    _check(
        c.shield.boundary in ("optimistic", "conservative"),
        "shield.boundary",
        c.shield.boundary,
        "use optimistic|conservative",
    )
    # the shield rules live in the registry entries' capability flags, nowhere else
    problem = get_algorithm(str(c.algo.name)).shield_error(str(c.shield.name), shields)
    _check(problem is None, "shield.name", c.shield.name, str(problem))
    _check(
        # '-' only between labels: a budget study of a variant entry ('noptr-b300k') must
        # read as a variant of that entry ('tapfinger-noptr'), its name up to the last '-'
        re.fullmatch(r"(?:[a-z0-9_]+(?:-[a-z0-9_]+)*)?", str(c.algo.variant)) is not None,
        "algo.variant",
        c.algo.variant,
        "use lower-case letters, digits and '_', and '-' only between them (it becomes part "
        "of the entry name; 'noptr-b300k' is entry tapfinger-noptr's b300k variant)",
    )
    _check(c.logger.name in ("none", "wandb"), "logger.name", c.logger.name, "use none|wandb")
    _check(
        c.logger.mode in ("offline", "online", "disabled"),
        "logger.mode",
        c.logger.mode,
        "use offline|online|disabled",
    )
    e = c.experiment
    for key in (
        "total_env_steps",
        "num_envs",
        "rollout_steps",
        "checkpoint_every",
        "eval_episodes",
        "threads",
    ):
        _check(int(e[key]) > 0, f"experiment.{key}", e[key], "need a positive integer")
    for key in ("curve_every", "curve_seeds"):  # configs written before the keys lack them
        _check(
            int(e.get(key, 0)) >= 0,
            f"experiment.{key}",
            e.get(key, 0),
            "need an integer >= 0 (0: " + ("no curve)" if key == "curve_every" else "all)"),
        )
    min_s = e.get("checkpoint_min_seconds", 0)  # configs written before the key lack it
    _check(
        float(min_s) >= 0,
        "experiment.checkpoint_min_seconds",
        min_s,
        "need a number of seconds >= 0 (0: a checkpoint every checkpoint_every updates)",
    )
    log_every = e.get("log_every", 0)  # configs written before the key existed lack it
    _check(
        int(log_every) >= 0,
        "experiment.log_every",
        log_every,
        "need an integer >= 0 (0 prints about 20 progress lines per run)",
    )
    _check(
        int(e.env_max_slots) >= 0,
        "experiment.env_max_slots",
        e.env_max_slots,
        "need >= 0 (0 keeps the scenario's own)",
    )
    _check(
        len(e.eval_seeds) > 0,
        "experiment.eval_seeds",
        list(e.eval_seeds),
        "need at least one held-out seed",
    )
    _check(
        all(10_000 <= int(s) < MAX_EVAL_SEED for s in e.eval_seeds),
        "experiment.eval_seeds",
        list(e.eval_seeds),
        f"held-out seeds lie in [10000, {MAX_EVAL_SEED}) so their workloads stay disjoint "
        "from training's (edgesched.protocol)",
    )
    _check(
        int(e.num_envs) <= MAX_ENV_COPIES,
        "experiment.num_envs",
        e.num_envs,
        f"need at most {MAX_ENV_COPIES} copies (edgesched.protocol)",
    )
    _check(
        int(e.eval_episodes) <= MAX_EVAL_EPISODES,
        "experiment.eval_episodes",
        e.eval_episodes,
        f"need at most {MAX_EVAL_EPISODES} episodes per held-out seed",
    )
    if "copies" in c.algo:
        # dqn_central trains rollout_steps x num_envs decisions per update, in vector steps of
        # algo.copies decisions: a chunk that is not whole vector steps would overshoot it
        chunk = int(e.rollout_steps) * int(e.num_envs)
        _check(
            int(c.algo.copies) <= MAX_ENV_COPIES and chunk % max(int(c.algo.copies), 1) == 0,
            "algo.copies",
            c.algo.copies,
            f"need at most {MAX_ENV_COPIES} copies that divide experiment.rollout_steps x "
            f"experiment.num_envs = {chunk} (the decisions of one update)",
        )
    _check_algo(c.algo, str(c.shield.name))
    _check(
        0 <= int(c.seed) < 10_000,
        "seed",
        c.seed,
        "need 0 <= seed < 10000 (training workloads derive from it, see edgesched.protocol)",
    )
    # the simulator validates the scenario overrides itself, naming the parameter
    try:
        overrides = scenario_overrides(c.env)
    except ValueError as exc:
        raise ExperimentConfigError(str(exc)) from None
    if e.env_max_slots:
        overrides = {**overrides, "max_slots": int(e.env_max_slots)}
    make_config(c.env.name, **overrides)
