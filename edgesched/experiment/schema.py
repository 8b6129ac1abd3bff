"""Typed experiment configuration (Hydra structured configs) and its validation.

The dataclasses are registered in Hydra's ConfigStore by :func:`register_configs`, so a
misspelled key fails at composition, naming the key. Value ranges are checked by
:func:`validate` before anything is written, naming the key, the value and what is allowed;
it also rejects keys that no schema declares (Hydra's ``+key=value`` adds them regardless).

:class:`AlgoConfig` holds the hyperparameters of every algorithm (one type, so records and
checkpoints of all algorithms share one layout); :data:`ALGO_PARAMS` says which of them each
algorithm reads, for ``train.py --help`` and for rejecting a command-line setting that the
chosen algorithm would ignore.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from .seeds import MAX_ENV_COPIES, MAX_EVAL_EPISODES, MAX_EVAL_SEED


@dataclass
class AlgoConfig:
    """A learned scheduler's hyperparameters (PPO family; other algorithms add fields).

    Attributes:
        name: registry key (``edgesched.algos.list_algorithms()``); ``mappo`` has a
            centralized critic on ``state()``, ``ippo`` a local one.
        lr: Adam learning rate.
        gamma: discount per slot.
        gae_lambda: GAE lambda.
        clip: PPO ratio clip.
        epochs: optimisation epochs per update.
        minibatches: minibatches per epoch.
        vf_coef: value-loss weight.
        ent_coef_start: entropy bonus at the first update.
        ent_coef_end: entropy bonus at the last update (linear schedule).
        max_grad_norm: gradient clipping norm.
        hidden: MLP hidden sizes of actor and critic.
        value_norm: normalize value targets with running statistics (PopArt-style).
        collision_penalty: reward penalty per agent whose *proposed* placement took part in
            an action collision (SROLE's learner signal; needs a shield in the loop).
        buffer_size: DQN replay buffer size (``dqn_central``).
        learning_starts: DQN decisions before learning starts.
        batch_size: DQN minibatch size.
        train_freq: DQN decisions between gradient steps.
        target_update_interval: DQN decisions between target-network updates.
        exploration_fraction: DQN share of the budget over which epsilon decays.
        exploration_final_eps: DQN final epsilon.
        gnn_hidden: TapFinger embedding width.
        gnn_layers: TapFinger HGTConv layers.
        gnn_heads: TapFinger attention heads.
        graph_attention: TapFinger message passing (false: the no-attention ablation).
        pointer: TapFinger learned task selection (false: uniform task choice ablation).
        team_reward: TapFinger learns from the mean of the agents' rewards (cooperative
            agents) instead of each agent's own reward.
        resource_weight: RLPTO reward weight of the occupied share of CPU and GPU.
        accuracy_weight: RLPTO reward weight of the quality gained per slot.
        shrink_gain: RLPTO's convergence rule: shrink a job (past half its quality) whose
            quality gain in the last slot fell below this fraction of its own mean gain per
            slot since it started (its curve has flattened).
        forecast_window: RLPTO forecaster's window in slots.
        forecast_refit: RLPTO refits its forecaster every this many updates.
        variant: label of a configuration variant (an ablation, a tuned setting): records
            name the entry ``<name>-<variant>`` so it gets its own leaderboard row.
    """

    name: str = MISSING
    lr: float = 5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    epochs: int = 4
    minibatches: int = 4
    vf_coef: float = 0.5
    ent_coef_start: float = 0.02
    ent_coef_end: float = 0.002
    max_grad_norm: float = 0.5
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    value_norm: bool = True
    collision_penalty: float = 0.0
    buffer_size: int = 100_000
    learning_starts: int = 1_000
    batch_size: int = 64
    train_freq: int = 4
    target_update_interval: int = 2_000
    exploration_fraction: float = 0.3
    exploration_final_eps: float = 0.05
    gnn_hidden: int = 64
    gnn_layers: int = 2
    gnn_heads: int = 2
    graph_attention: bool = True
    pointer: bool = True
    team_reward: bool = False
    resource_weight: float = 1.0
    accuracy_weight: float = 1.0
    shrink_gain: float = 0.5
    forecast_window: int = 10
    forecast_refit: int = 50
    variant: str = ""


_PPO_PARAMS = (
    "lr",
    "gamma",
    "gae_lambda",
    "clip",
    "epochs",
    "minibatches",
    "vf_coef",
    "ent_coef_start",
    "ent_coef_end",
    "max_grad_norm",
    "hidden",
    "value_norm",
    "collision_penalty",
)

ALGO_PARAMS: dict[str, tuple[str, ...]] = {
    "dqn_central": (
        "lr",
        "gamma",
        "max_grad_norm",
        "hidden",
        "buffer_size",
        "learning_starts",
        "batch_size",
        "train_freq",
        "target_update_interval",
        "exploration_fraction",
        "exploration_final_eps",
    ),
    "ippo": _PPO_PARAMS,
    "mappo": _PPO_PARAMS,
    "rlpto": (
        *_PPO_PARAMS,
        "resource_weight",
        "accuracy_weight",
        "shrink_gain",
        "forecast_window",
        "forecast_refit",
    ),
    "srole": _PPO_PARAMS,
    "tapfinger": (
        *_PPO_PARAMS,
        "gnn_hidden",
        "gnn_layers",
        "gnn_heads",
        "graph_attention",
        "pointer",
        "team_reward",
    ),
}
"""The :class:`AlgoConfig` fields each algorithm reads, besides ``name`` and ``variant``
(``conf/algo/<name>.yaml`` sets exactly these)."""


def algo_params(name: str) -> tuple[str, ...]:
    """The :class:`AlgoConfig` keys that algorithm ``name`` uses, ``name`` first.

    Args:
        name: registered algorithm; an unknown one gets every field (nothing to filter by).
    """
    if name not in ALGO_PARAMS:
        return tuple(f.name for f in fields(AlgoConfig))
    return ("name", *ALGO_PARAMS[name], "variant")


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
        eval_seeds: held-out workload seeds (disjoint from training seeds).
        eval_episodes: episodes per evaluation seed.
        env_max_slots: cap on slots per training episode (0 = the scenario's own).
        threads: torch CPU threads.
        log_every: updates between two progress lines when the output is not a terminal
            (logs, CI, SLURM, nohup); 0 prints about 20 lines per run. A terminal shows a
            progress bar instead. Console output never changes the results.
    """

    name: str = "default"
    total_env_steps: int = 150_000
    num_envs: int = 4
    rollout_steps: int = 128
    checkpoint_every: int = 10
    eval_seeds: list[int] = field(default_factory=lambda: [10_000, 10_001, 10_002])
    eval_episodes: int = 1
    env_max_slots: int = 0
    threads: int = 1
    log_every: int = 0


@dataclass
class TrainConfig:
    """Top-level configuration composed by ``train.py``.

    Attributes:
        algo: learned scheduler.
        env: scenario.
        shield: collision shield.
        logger: external logger.
        experiment: budgets and evaluation.
        seed: training seed (workloads use seeds derived from it, never the eval seeds).
        resume: ``false``, ``true`` (latest unfinished run of this config) or a run path.
        output_dir: root of run directories.
        run_dir: this run's directory (set from Hydra's output directory).
    """

    algo: AlgoConfig = MISSING
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
    "algo": AlgoConfig,
    "env": EnvConfig,
    "shield": ShieldConfig,
    "logger": LoggerConfig,
    "experiment": ExperimentConfig,
}
"""Config group -> its schema."""


def register_configs() -> None:
    """Register the schemas in Hydra's ConfigStore (group files are validated against them).

    Also registers the resolvers that render ``train.py --help`` (``conf/hydra/help``).
    """
    from hydra.core.config_store import ConfigStore

    from .cli import register_help_resolvers

    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    for group, node in SCHEMAS.items():
        cs.store(group=SCHEMA_GROUP, name=group, node=node)
    register_help_resolvers()


def closest(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The one of ``choices`` closest to ``word`` (a likely typo of it), or ``None``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def field_docs(cls: type) -> dict[str, str]:
    """Field -> description, read from the ``Attributes:`` section of ``cls``'s docstring."""
    docs: dict[str, str] = {}
    lines = (cls.__doc__ or "").splitlines()
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
    every_algo_field = [f.name for f in fields(AlgoConfig)]
    for prefix, node, allowed in nodes:
        for key in node:
            if key in allowed or (prefix == "algo." and key in every_algo_field):
                continue
            guess = closest(str(key), allowed)
            if guess is None and prefix == "algo.":
                guess = closest(str(key), every_algo_field)
            hint = f" did you mean {prefix}{guess}?" if guess else ""
            owner = f"{prefix.rstrip('.')}" if prefix else "the top level"
            if prefix == "algo.":
                owner = f"algo={cfg.algo.name}"
            raise ExperimentConfigError(
                f"{prefix}{key} is not a configuration key;{hint} the keys of {owner} are "
                f"{', '.join(allowed)}"
            )


class ExperimentConfigError(ValueError):
    """A configuration value is out of range or names something unregistered."""


def _check(cond: bool, key: str, value: Any, allowed: str) -> None:
    if not cond:
        raise ExperimentConfigError(f"{key}={value!r} is not allowed; {allowed}")


def validate(cfg: DictConfig | TrainConfig) -> None:
    """Check ranges and registry names; raise :class:`ExperimentConfigError` naming the key.

    Args:
        cfg: the composed configuration.
    """
    from edgesched.algos import list_algorithms
    from edgesched.envs.scenarios import list_scenarios, make_config
    from edgesched.shields import list_shields

    c = cfg if isinstance(cfg, DictConfig) else OmegaConf.structured(cfg)
    check_keys(c)
    algos, scen, shields = list_algorithms(), list_scenarios(), list_shields()
    _check(c.algo.name in algos, "algo.name", c.algo.name, f"registered algorithms: {algos}")
    _check(c.env.name in scen, "env.name", c.env.name, f"registered scenarios: {scen}")
    _check(c.shield.name in shields, "shield.name", c.shield.name, f"registered: {shields}")
    _check(int(c.shield.rounds) >= 1, "shield.rounds", c.shield.rounds, "need an integer >= 1")
    _check(
        c.shield.boundary in ("optimistic", "conservative"),
        "shield.boundary",
        c.shield.boundary,
        "use optimistic|conservative",
    )
    _check(
        not (c.algo.name == "srole" and c.shield.name == "none"),
        "shield.name",
        c.shield.name,
        "srole is MAPPO with a shield in the loop; use shield=central or shield=regional",
    )
    _check(
        not (c.algo.name == "dqn_central" and c.shield.name != "none"),
        "shield.name",
        c.shield.name,
        "dqn_central is one cluster head deciding one task at a time, which cannot collide; "
        "use shield=none",
    )
    _check(
        re.fullmatch(r"[a-z0-9_]*", str(c.algo.variant)) is not None,
        "algo.variant",
        c.algo.variant,
        "use lower-case letters, digits and '_' (it becomes part of the entry name)",
    )
    _check(
        not (c.algo.name == "rlpto" and c.shield.name != "none"),
        "shield.name",
        c.shield.name,
        "rlpto places with its priority-queue rule, which a shield cannot rank; use shield=none",
    )
    _check(
        int(c.algo.forecast_window) >= 1 and int(c.algo.forecast_refit) >= 1,
        "algo.forecast_window",
        (c.algo.forecast_window, c.algo.forecast_refit),
        "forecast_window and forecast_refit must be >= 1",
    )
    _check(
        not (c.algo.name == "tapfinger" and c.shield.name != "none"),
        "shield.name",
        c.shield.name,
        "tapfinger resolves task conflicts itself (pointer probability x fit); use shield=none",
    )
    for key in ("gnn_hidden", "gnn_layers", "gnn_heads"):
        low = 0 if key == "gnn_layers" else 1
        _check(
            low <= int(c.algo[key]) <= 1024,
            f"algo.{key}",
            c.algo[key],
            f"need an integer in [{low}, 1024]",
        )
    _check(
        int(c.algo.gnn_hidden) % int(c.algo.gnn_heads) == 0,
        "algo.gnn_hidden",
        c.algo.gnn_hidden,
        f"must be divisible by algo.gnn_heads={c.algo.gnn_heads} (HGTConv splits it by head)",
    )
    _check(
        float(c.algo.collision_penalty) == 0.0 or c.shield.name != "none",
        "algo.collision_penalty",
        c.algo.collision_penalty,
        "it penalizes proposals a shield corrected, so it needs shield=central|regional "
        "(without a shield use env.overrides.collision_penalty)",
    )
    _check(
        float(c.algo.collision_penalty) >= 0.0,
        "algo.collision_penalty",
        c.algo.collision_penalty,
        "need a non-negative penalty",
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
        "from training's (edgesched.experiment.seeds)",
    )
    _check(
        int(e.num_envs) <= MAX_ENV_COPIES,
        "experiment.num_envs",
        e.num_envs,
        f"need at most {MAX_ENV_COPIES} copies (edgesched.experiment.seeds)",
    )
    _check(
        int(e.eval_episodes) <= MAX_EVAL_EPISODES,
        "experiment.eval_episodes",
        e.eval_episodes,
        f"need at most {MAX_EVAL_EPISODES} episodes per held-out seed",
    )
    a = c.algo
    for key, lo, hi in (
        ("lr", 0.0, 1.0),
        ("gamma", 0.0, 1.0),
        ("gae_lambda", 0.0, 1.0),
        ("clip", 0.0, 10.0),
        ("vf_coef", 0.0, 1e3),
        ("max_grad_norm", 0.0, 1e6),
    ):
        _check(lo < float(a[key]) <= hi, f"algo.{key}", a[key], f"need a number in ({lo}, {hi}]")
    for key in (
        "epochs",
        "minibatches",
        "buffer_size",
        "batch_size",
        "train_freq",
        "target_update_interval",
    ):
        _check(int(a[key]) > 0, f"algo.{key}", a[key], "need a positive integer")
    _check(int(a.learning_starts) >= 0, "algo.learning_starts", a.learning_starts, "need >= 0")
    for key in ("exploration_fraction", "exploration_final_eps"):
        _check(0.0 <= float(a[key]) <= 1.0, f"algo.{key}", a[key], "need a number in [0, 1]")
    _check(
        float(a.ent_coef_start) >= 0 and float(a.ent_coef_end) >= 0,
        "algo.ent_coef_*",
        (a.ent_coef_start, a.ent_coef_end),
        "need non-negative entropy coefficients",
    )
    _check(
        len(a.hidden) > 0 and all(int(h) > 0 for h in a.hidden),
        "algo.hidden",
        list(a.hidden),
        "need one or more positive layer sizes",
    )
    _check(
        0 <= int(c.seed) < 10_000,
        "seed",
        c.seed,
        "need 0 <= seed < 10000 (training workloads derive from it, see "
        "edgesched.experiment.seeds)",
    )
    # the simulator validates the scenario overrides itself, naming the parameter
    try:
        overrides = scenario_overrides(c.env)
    except ValueError as exc:
        raise ExperimentConfigError(str(exc)) from None
    if e.env_max_slots:
        overrides = {**overrides, "max_slots": int(e.env_max_slots)}
    make_config(c.env.name, **overrides)
