"""Training loop glue: run directories, checkpoints, resume, logging, final evaluation.

A run directory holds:

* ``config.yaml``: the resolved configuration;
* ``metrics.jsonl``: one line per update (env steps, agent decisions, wall time, mean JCT of
  the episodes finished so far in training, collisions, return, losses);
* ``checkpoints/last.pt``: learner, optimizer, value statistics, all RNG states and the
  simulator copies, written atomically every ``checkpoint_every`` updates (at least
  ``checkpoint_min_seconds`` apart);
* ``eval.json``: the held-out evaluation record, written last.

``resume=true`` (or a run path) continues from ``checkpoints/last.pt``; because the
checkpoint carries every RNG and the environments themselves, the resumed run produces the
same learning curve as an uninterrupted one, under the same code. The record's
``train.commits`` says which code trained which updates, since a run resumed after the
code changed differs from an uninterrupted run of either version (``git_commit``, the
record's top-level key, is the commit that evaluated it). A run stopped before its first
checkpoint (``config.yaml`` but no checkpoint, no ``eval.json``) is started afresh in its
own directory.
A checkpoint that cannot be read stops the run with a message naming the file.

Nothing is written before the configuration, the workload (a trace file, say) and, when
resuming, the checkpoint have been read: a configuration error leaves no file behind. The
console shows the run's progress and result (:mod:`edgesched.experiment.console`).
"""

from __future__ import annotations

import dataclasses
import pickle
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from edgesched.algos import AlgorithmEntry, config_from_dict, get_algorithm, make_trainer
from edgesched.algos.common import OutdatedCheckpointError, VecSim
from edgesched.baselines import make_baseline
from edgesched.envs.handle import ScenarioHandle, resolve_scenario

from .console import TrainingConsole
from .evaluation import evaluate_scheduler, evaluate_trainer, make_record
from .io import (
    atomic_write_json,
    atomic_write_text,
    atomic_write_with,
    create_text_exclusive,
    git_commit,
    write_jsonl,
)
from .schema import (
    ExperimentConfigError,
    algo_label,
    scenario_overrides,
    shield_kwargs,
    validate,
    whole_updates,
)

CHECKPOINT = Path("checkpoints") / "last.pt"
# keys that may differ between a run and its resumption
_RESUME_FREE = ("resume", "run_dir", "output_dir")
# experiment keys that never change the results: what the console shows, and when
# checkpoints are written (a resumed run is exact from any of them)
_RESULT_FREE_KEYS = ("log_every", "checkpoint_min_seconds")
# what save_checkpoint writes; a checkpoint without one of these is not a train.py checkpoint
_CHECKPOINT_KEYS = ("config", "trainer", "vec", "metrics", "env_steps", "wall_time", "finished")


def _resolve(cfg: DictConfig) -> ScenarioHandle:
    """The run's scenario, resolved once: what records, trainers and evaluation receive."""
    return resolve_scenario(str(cfg.env.name), **scenario_overrides(cfg.env))


def _train_config(cfg: DictConfig, scenario: ScenarioHandle) -> Any:
    """The training simulators' config: the scenario's, with the run's slot cap."""
    cap = int(cfg.experiment.env_max_slots)
    return scenario.config_with(max_slots=cap) if cap else scenario.config


def _algo(cfg: DictConfig) -> tuple[AlgorithmEntry, Any]:
    """The run's registry entry and its typed config.

    ``config.yaml`` files written before each algorithm had its own config class hold
    every algorithm's keys; :func:`edgesched.algos.config_from_dict` keeps its own.
    """
    algo = cfg.algo
    if isinstance(algo, DictConfig) and OmegaConf.get_type(algo) is dict:
        algo = OmegaConf.structured(config_from_dict(OmegaConf.to_container(algo, resolve=True)))
    return get_algorithm(str(algo.name)), algo


def _hydra_output_dir() -> Path | None:
    try:
        from hydra.core.hydra_config import HydraConfig

        return Path(HydraConfig.get().runtime.output_dir)
    except (ImportError, ValueError):
        return None


def _hydra_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except (ImportError, ValueError):
        return False


# Until each algorithm had its own config class, one class held every algorithm's
# hyperparameters, and a run's config (so its record's config_hash and its checkpoint's
# resume check) listed them all. These are that class's defaults: the algorithms of that
# time get them back for the keys their own class lacks, so the hash of a configuration and
# the resumption of an older checkpoint do not change. Frozen: a new key or algorithm
# never goes here.
_LEGACY_ALGO_KEYS: dict[str, Any] = {
    "lr": 5e-4,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip": 0.2,
    "epochs": 4,
    "minibatches": 4,
    "vf_coef": 0.5,
    "ent_coef_start": 0.02,
    "ent_coef_end": 0.002,
    "max_grad_norm": 0.5,
    "hidden": [64, 64],
    "value_norm": True,
    "collision_penalty": 0.0,
    "buffer_size": 100_000,
    "learning_starts": 1_000,
    "batch_size": 64,
    "train_freq": 4,
    "target_update_interval": 2_000,
    "exploration_fraction": 0.3,
    "exploration_final_eps": 0.05,
    "gnn_hidden": 64,
    "gnn_layers": 2,
    "gnn_heads": 2,
    "graph_attention": True,
    "pointer": True,
    "team_reward": False,
    "resource_weight": 1.0,
    "accuracy_weight": 1.0,
    "shrink_gain": 0.5,
    "forecast_window": 10,
    "forecast_refit": 50,
    "variant": "",
}
_LEGACY_ALGOS = frozenset({"dqn_central", "ippo", "mappo", "rlpto", "srole", "tapfinger"})


def _comparable(cfg: DictConfig) -> dict[str, Any]:
    """The configuration that determines the results (record hash, resume check)."""
    c = OmegaConf.to_container(cfg, resolve=True)
    for k in _RESUME_FREE:
        c.pop(k, None)
    for k in _RESULT_FREE_KEYS:
        c.get("experiment", {}).pop(k, None)
    algo = c.get("algo")
    if isinstance(algo, dict) and algo.get("name") in _LEGACY_ALGOS:
        c["algo"] = {"name": algo["name"], **_LEGACY_ALGO_KEYS, **algo}
    return c


def _typed_algo(c: dict[str, Any]) -> dict[str, Any]:
    """``c`` with its ``algo`` node read through the algorithm's config class.

    A key the class gained after ``c`` was written takes its default there, which keeps
    the stored behaviour (:func:`edgesched.algos.config_from_dict`), so a run started before
    an option existed still resumes when the option is left at its default.
    """
    algo = c.get("algo")
    if not isinstance(algo, dict):
        return c
    try:
        typed = dataclasses.asdict(config_from_dict(algo))
    except (KeyError, TypeError, ValueError):
        return c  # an unknown algorithm or a bad value: compare as written
    return {**c, "algo": typed}


def _config_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    old, new = _typed_algo(old), _typed_algo(new)
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def _written_config_diff(run_dir: Path, cfg: DictConfig) -> list[str] | None:
    """Top-level keys where ``run_dir/config.yaml`` differs from ``cfg``; None: unreadable."""
    try:
        written = OmegaConf.load(run_dir / "config.yaml")
        return _config_diff(_comparable(written), _comparable(cfg))
    except Exception:  # a damaged or foreign file is not a run of this configuration
        return None


def _stopped_early(path: Path) -> bool:
    """A run that wrote its config but neither a checkpoint nor its evaluation."""
    return (
        (path / "config.yaml").is_file()
        and not (path / CHECKPOINT).exists()
        and not (path / "eval.json").exists()
    )


def _resolve_run_dir(cfg: DictConfig) -> tuple[Path, str]:
    """Pick the run directory and how to start: ``new``, ``resume`` or ``restart``.

    ``restart`` is a run of the same configuration stopped before its first checkpoint: it
    starts afresh in its own directory.
    """
    hydra_dir = _hydra_output_dir()
    base = Path(cfg.run_dir) if cfg.run_dir else hydra_dir
    if base is None:
        raise ExperimentConfigError(
            "run_dir is empty and no Hydra output directory exists; pass run_dir=<path>"
        )
    resume = cfg.resume
    if resume in (False, None, "false", "False", ""):
        return base, "new"
    if resume in (True, "true", "True"):
        if (base / CHECKPOINT).exists():
            return base, "resume"
        if _stopped_early(base) and _written_config_diff(base, cfg) == []:
            return base, "restart"
        # Hydra made a fresh timestamped folder; continue the newest unfinished sibling
        siblings = sorted(
            p
            for p in base.parent.glob("*")
            if p != base
            and not (p / "eval.json").exists()
            and (
                (p / CHECKPOINT).exists()
                or (_stopped_early(p) and _written_config_diff(p, cfg) == [])
            )
        )
        if not siblings:
            raise ExperimentConfigError(
                f"resume=true: no unfinished run of this configuration under {base.parent} "
                f"(none with a {CHECKPOINT}, none stopped before its first one); start a new "
                "run without resume=true, or pass resume=<run directory>"
            )
        return siblings[-1], "resume" if (siblings[-1] / CHECKPOINT).exists() else "restart"
    path = Path(str(resume))
    if (path / CHECKPOINT).exists():
        return path, "resume"
    if _stopped_early(path):
        diff = _written_config_diff(path, cfg)
        if diff:
            raise ExperimentConfigError(
                f"resume={resume!r}: that run stopped before its first checkpoint and its "
                f"config.yaml differs from this configuration in {diff}; resume with the "
                "same configuration or start a new run"
            )
        if diff == []:
            return path, "restart"
    what = "does not exist" if not path.exists() else f"holds no {CHECKPOINT} and no config.yaml"
    raise ExperimentConfigError(
        f"resume={resume!r}: {path} {what}, so it is not a run directory; pass the directory "
        "of a run (the one holding config.yaml), resume=true for the latest unfinished run of "
        "this configuration, or resume=false for a new run"
    )


def _claim_new_run_dir(run_dir: Path, config_yaml: str, explicit: bool) -> Path:
    """Claim a directory for a new run by creating its ``config.yaml`` exclusively.

    Two runs must never share a directory: their metrics, checkpoints and results would
    interleave. Hydra names a run's directory by the second it started, so two runs of one
    entry and seed started in the same second get the same one; the second to claim it takes
    ``<stamp>-1`` (then ``-2``, ...). An explicit ``run_dir`` that already holds a run is
    refused rather than overwritten.

    Raises:
        ExperimentConfigError: ``run_dir`` was given and already holds a run.
    """
    for k in range(1 if explicit else 1000):
        path = run_dir.with_name(f"{run_dir.name}-{k}") if k else run_dir
        if create_text_exclusive(path / "config.yaml", config_yaml):
            return path
    if explicit:
        raise ExperimentConfigError(
            f"run_dir={str(run_dir)!r}: that directory already holds a run (its config.yaml); "
            "resume it with resume=<run directory>, or pass another run_dir to train anew"
        )
    raise ExperimentConfigError(f"no free run directory next to {run_dir} after 1000 tries")


def _remove_if_empty(path: Path | None) -> None:
    if path is not None and path.is_dir() and not any(path.iterdir()):
        path.rmdir()


def _bad_checkpoint(path: Path, problem: str) -> ExperimentConfigError:
    if (path.parent.parent / "eval.json").exists():
        todo = (
            "This run has finished (its eval.json holds the results); start a new run with "
            "resume=false to train it again"
        )
    else:
        todo = (
            "Delete it and resume again to restart this run from its first update in the same "
            "directory, or start a new run with resume=false"
        )
    return ExperimentConfigError(
        f"resume: the checkpoint {path} {problem}. It is damaged (a truncated copy, a full "
        f"disk) or was not written by train.py for this run. {todo}"
    )


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint, or raise :class:`ExperimentConfigError` naming the file."""
    import torch

    try:
        ckpt = torch.load(path, weights_only=False)
    except Exception as exc:  # torch, zipfile and pickle each raise their own kind
        raise _bad_checkpoint(path, f"cannot be read ({_short(exc)})") from None
    if not isinstance(ckpt, dict):
        raise _bad_checkpoint(path, f"holds a {type(ckpt).__name__}, not a checkpoint")
    missing = [k for k in _CHECKPOINT_KEYS if k not in ckpt]
    if missing or not isinstance(ckpt["config"], dict):
        raise _bad_checkpoint(path, f"lacks {missing or ['a valid config']}")
    return ckpt


class _Logger:
    """Local files always; wandb (offline by default) when ``logger=wandb``."""

    def __init__(
        self, cfg: DictConfig, scenario: ScenarioHandle, run_dir: Path, commit: str
    ) -> None:
        self.run = None
        if cfg.logger.name != "wandb":
            return
        import wandb

        id_file = run_dir / "wandb_id.txt"
        # a stable id per run directory lets a resumed run continue the same wandb run
        run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:12]
        atomic_write_text(id_file, run_id)
        self.run = wandb.init(
            project=cfg.logger.project,
            entity=cfg.logger.entity or None,
            mode=cfg.logger.mode,
            dir=str(run_dir),
            id=run_id,
            resume="allow",
            group=scenario.id,
            name=f"{cfg.algo.name}-{cfg.shield.name}-s{cfg.seed}",
            tags=[
                cfg.algo.name,
                f"shield:{cfg.shield.name}",
                f"seed:{cfg.seed}",
                f"commit:{commit[:12]}",
            ],
            config=OmegaConf.to_container(cfg, resolve=True),
        )

    def log(self, row: dict[str, Any]) -> None:
        if self.run is not None:
            self.run.log({k: v for k, v in row.items() if v is not None}, step=row["update"])

    def finish(self, summary: dict[str, Any]) -> None:
        if self.run is not None:
            # one update message rather than one per key: fewer chances for the service to
            # reach the exit record before a late summary item
            self.run.summary.update({f"eval/{k}": v for k, v in summary.items()})
            self.run.finish()


def _commits_of(ckpt: dict[str, Any], updates: int) -> list[dict[str, Any]]:
    """The ``train.commits`` a checkpoint at ``updates`` carries.

    A checkpoint from before they were recorded names only the commit of the process that
    wrote it, which may itself have resumed an earlier one: its updates get commit ``None``
    (not known).
    """
    stored = ckpt.get("commits")
    if stored is None:
        return [{"commit": None, "updates": [0, int(updates)]}]
    return [{"commit": c["commit"], "updates": list(c["updates"])} for c in stored]


def _add_commit(
    commits: list[dict[str, Any]], commit: str, start: int, end: int
) -> list[dict[str, Any]]:
    """``commits`` followed by updates ``start`` to ``end`` under ``commit``.

    Merged into the last entry where the code is the same (a run resumed by the same code).
    """
    if commits and commits[-1]["commit"] == commit and commits[-1]["updates"][1] == start:
        return [*commits[:-1], {"commit": commit, "updates": [commits[-1]["updates"][0], end]}]
    return [*commits, {"commit": commit, "updates": [start, end]}]


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train ``cfg.algo`` on ``cfg.env``, evaluate on held-out seeds, write the run files.

    Prints the run directory, the progress (a bar on a terminal, plain lines every
    ``experiment.log_every`` updates otherwise) and the held-out evaluation summary.

    Args:
        cfg: composed configuration (:class:`edgesched.experiment.schema.TrainConfig`).

    Returns:
        The evaluation summary (mean metrics over held-out episodes).

    Raises:
        ExperimentConfigError: a value is out of range or unregistered, nothing to resume, or
            an unreadable checkpoint (nothing written).
        TrainingDivergedError: a loss became NaN/inf (last good checkpoint kept).
    """
    import torch

    hydra_dir = _hydra_output_dir()
    try:
        validate(cfg)
        run_dir, mode = _resolve_run_dir(cfg)
    except Exception:
        _remove_if_empty(hydra_dir)  # bad config: leave nothing behind
        raise
    if mode != "new" and run_dir != hydra_dir:
        _remove_if_empty(hydra_dir)
    exp = cfg.experiment
    ckpt_path = run_dir / CHECKPOINT
    try:
        # Everything that can reject the configuration (the workload's trace file, the
        # checkpoint) is read before the first file is written.
        torch.set_num_threads(int(exp.threads))
        scenario = _resolve(cfg)
        entry, algo = _algo(cfg)
        vec = VecSim(_train_config(cfg, scenario), int(exp.num_envs), int(cfg.seed), scenario.id)
        trainer = make_trainer(
            entry.name,
            algo,
            scenario.spec,
            int(cfg.seed),
            cfg.shield.name,
            shield_kwargs(cfg.shield),
        )
        metrics: list[dict[str, Any]] = []
        env_steps, wall_offset = 0, 0.0
        finished: list[dict[str, Any]] = []
        curve: list[dict[str, Any]] = []
        earlier: list[dict[str, Any]] = []  # train.commits before this process
        if mode == "resume":
            ckpt = _load_checkpoint(ckpt_path)
            diff = _config_diff(ckpt["config"], _comparable(cfg))
            if diff:
                raise ExperimentConfigError(
                    f"resume: the configuration differs from the checkpoint's in {diff}; resume "
                    "with the same config or start a new run"
                )
            try:
                trainer.load_state_dict(ckpt["trainer"])
                vec = pickle.loads(ckpt["vec"])
            except OutdatedCheckpointError as exc:
                wrote = str(ckpt.get("commit") or "unknown")[:12]
                raise ExperimentConfigError(
                    f"resume: the checkpoint {ckpt_path} was written by an earlier edgesched "
                    f"(commit {wrote}): {exc}. Start a new run with resume=false, or finish "
                    "this one with the version that wrote it"
                ) from None
            except Exception as exc:
                raise _bad_checkpoint(
                    ckpt_path, f"does not fit this run's learner ({_short(exc)})"
                ) from None
            metrics = list(ckpt["metrics"])
            env_steps, wall_offset = int(ckpt["env_steps"]), float(ckpt["wall_time"])
            finished = list(ckpt["finished"])
            curve = list(ckpt.get("curve", []))
            earlier = _commits_of(ckpt, trainer.updates)
    except Exception:
        if mode == "new":
            _remove_if_empty(run_dir)  # an explicit run_dir that nothing went into
        raise
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    if mode == "new":
        run_dir = _claim_new_run_dir(run_dir, config_yaml, explicit=bool(cfg.run_dir))
        ckpt_path = run_dir / CHECKPOINT

    per_update = int(exp.num_envs) * int(exp.rollout_steps)
    n_updates = whole_updates(int(exp.total_env_steps), per_update)
    label = f"{algo_label(cfg.algo)}@{scenario.id} seed {int(cfg.seed)}"
    console = TrainingConsole(
        label,
        n_updates,
        per_update,
        int(exp.get("log_every", 0)),
        bar=False if _hydra_multirun() else None,  # parallel jobs would garble one terminal
    )
    if mode == "resume":
        console.say(
            f"{label}: resuming {run_dir.resolve()} at update {trainer.updates}/{n_updates}"
        )
    elif mode == "restart":
        console.say(
            f"{label}: {run_dir.resolve()} stopped before its first checkpoint; starting it "
            "afresh in the same directory"
        )
    else:
        console.say(f"{label}: training {n_updates} updates -> {run_dir.resolve()}")

    run_dir.mkdir(parents=True, exist_ok=True)
    if mode != "new":
        # a kill during an atomic write leaves only its hidden temp file behind
        for tmp in run_dir.rglob(".*.tmp"):
            tmp.unlink()
    if mode == "resume":
        write_jsonl(run_dir / "metrics.jsonl", metrics)  # drop lines after the checkpoint
    elif mode == "restart":
        (run_dir / "metrics.jsonl").unlink(missing_ok=True)  # the earlier attempt's
        atomic_write_text(run_dir / "config.yaml", config_yaml)
    commit = git_commit()
    first_update = trainer.updates
    if earlier and earlier[-1]["commit"] != commit:
        before = sorted({str(c["commit"] or "unknown")[:12] for c in earlier})
        console.say(
            f"{label}: updates 1-{first_update} were trained by commit"
            f"{'s' if len(before) > 1 else ''} {', '.join(before)}, the rest will be by "
            f"{commit[:12]}; the record lists each (train.commits)"
        )

    def commits() -> list[dict[str, Any]]:
        return _add_commit(earlier, commit, first_update, trainer.updates)

    if entry.uses_budget:
        trainer.set_budget(n_updates * per_update)
    # decisions per env step: every agent (multi-agent learners) or one (the central head)
    per_step = 1 if entry.central_head else scenario.spec.num_agents
    logger = _Logger(cfg, scenario, run_dir, commit)
    t0 = time.perf_counter() - wall_offset
    console.start(trainer.updates, env_steps, wall_offset)

    def save_checkpoint() -> None:
        state = {
            "config": _comparable(cfg),
            "trainer": trainer.state_dict(),
            "vec": pickle.dumps(vec),
            "metrics": metrics,
            "env_steps": env_steps,
            "wall_time": time.perf_counter() - t0,
            "finished": finished,
            "curve": curve,
            "commit": commit,
            "commits": commits(),
        }
        # streamed to the file: a replay buffer of GBs is not copied in memory on the way
        atomic_write_with(ckpt_path, lambda f: torch.save(state, f))

    curve_every = int(exp.get("curve_every", 0))
    curve_seeds = _curve_seeds(exp)
    ckpt_min_s = float(exp.get("checkpoint_min_seconds", 0))
    last_ckpt = time.perf_counter()

    try:
        while trainer.updates < n_updates:
            batch = trainer.collect(vec, int(exp.rollout_steps))
            stats = trainer.update(batch, progress=trainer.updates / n_updates)
            env_steps += per_update
            if curve_every and trainer.updates % curve_every == 0 and trainer.updates < n_updates:
                point = _curve_point(cfg, scenario, trainer, curve_seeds, int(exp.eval_episodes))
                curve.append({"update": trainer.updates, "env_steps": env_steps, **point})
                stats = {**stats, "heldout_jct_mean": point["jct_mean"]}
            finished += [
                {k: e[k] for k in ("jct_mean", "collisions_proposed", "episode_return_mean")}
                for e in batch["episodes"]
            ]
            recent = finished[-8:]
            row = {
                "update": trainer.updates,
                "env_steps": env_steps,
                "agent_decisions": env_steps * per_step,
                "wall_time": round(time.perf_counter() - t0, 3),
                "episodes": len(finished),
                "train_jct_mean": float(np.mean([e["jct_mean"] for e in recent]))
                if recent
                else None,
                "train_return": float(np.mean([e["episode_return_mean"] for e in recent]))
                if recent
                else None,
                "collisions_per_step": batch["collisions"] / per_update,
                "reward_mean": float(batch["rewards"].mean()),
                **batch.get("log", {}),
                **stats,
            }
            metrics.append(row)
            write_jsonl(run_dir / "metrics.jsonl", metrics)
            logger.log(row)
            console.update(row)
            periodic = trainer.updates % int(exp.checkpoint_every) == 0
            if (
                periodic and time.perf_counter() - last_ckpt >= ckpt_min_s
            ) or trainer.updates == n_updates:
                save_checkpoint()
                last_ckpt = time.perf_counter()
    finally:
        console.close()
    console.say(
        f"{label}: trained {trainer.updates} updates ({env_steps:,} env steps); evaluating on "
        f"{len(exp.eval_seeds)} held-out seed(s)"
    )

    # the trained actor alone (kilobytes, unlike the resumable checkpoint): what leaderboard
    # validation reloads to re-evaluate this entry
    # stored as trained: a default that follows the scenario (None) as it resolved there, so
    # the policy file says what the actor learned with (provenance resolves it the same way)
    algo_node = OmegaConf.to_container(cfg.algo)
    resolved = dataclasses.asdict(config_from_dict(algo_node).for_scenario(scenario.config))
    algo_node.update({k: resolved[k] for k, v in algo_node.items() if v is None and k in resolved})
    policy = {
        "actor": trainer.actor.state_dict(),
        "algo": algo_node,
        # the versioned id: the policy keeps its version after the scenario moves on
        "env": scenario.id,
        "overrides": scenario.overrides_dict(),
        "shield": cfg.shield.name,
        "shield_kwargs": shield_kwargs(cfg.shield),
    }
    atomic_write_with(run_dir / "policy.pt", lambda f: torch.save(policy, f))
    record = _evaluate_and_record(
        cfg, scenario, trainer, list(exp.eval_seeds), int(exp.eval_episodes), _comparable(cfg)
    )
    record["train"] = {
        "updates": trainer.updates,
        "env_steps": env_steps,
        "wall_time": metrics[-1]["wall_time"] if metrics else 0.0,
        "commits": commits(),
    }
    if curve_every:
        # the final evaluation is the curve's last point (on the curve's seeds)
        rows = [r for r in record["per_episode"] if r["eval_seed"] in curve_seeds]
        final = _curve_summary(rows, curve_seeds)
        record["curve"] = {
            "every": curve_every,
            "seeds": curve_seeds,
            "episodes": int(exp.eval_episodes),
            "points": [*curve, {"update": trainer.updates, "env_steps": env_steps, **final}],
        }
    atomic_write_json(run_dir / "eval.json", record)
    logger.finish(record["summary"])
    console.finish(record["summary"], len(exp.eval_seeds), int(exp.eval_episodes), run_dir)
    return record["summary"]


def _heldout(
    cfg: DictConfig, scenario: ScenarioHandle, trainer: Any, seeds: list[int], episodes: int
) -> dict[str, Any]:
    """The run's trainer evaluated on held-out ``seeds`` behind the run's shield."""
    return evaluate_trainer(
        trainer,
        str(cfg.algo.name),
        scenario,
        seeds,
        episodes,
        shield=cfg.shield.name,
        shield_kwargs=shield_kwargs(cfg.shield),
    )


def _curve_seeds(exp: DictConfig) -> list[int]:
    """The evaluation seeds of the learning curve's points (the first ``curve_seeds``)."""
    k = int(exp.get("curve_seeds", 0))
    seeds = [int(s) for s in exp.eval_seeds]
    return seeds[:k] if k else seeds


def _curve_summary(rows: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Mean JCT per curve seed (over its episodes) and over all."""
    per_seed = [float(np.mean([r["jct_mean"] for r in rows if r["eval_seed"] == s])) for s in seeds]
    return {"jct_mean": float(np.mean(per_seed)), "per_seed": per_seed}


def _curve_point(
    cfg: DictConfig, scenario: ScenarioHandle, trainer: Any, seeds: list[int], episodes: int
) -> dict[str, Any]:
    """A held-out evaluation during training that leaves every random generator as it was.

    Evaluation draws from torch's, numpy's and Python's global generators (sampled
    policies, SB3's exploration) and may reseed the trainer's own (TapFinger seeds its
    sampling per evaluation episode), so all of them are saved and restored: a run with a
    curve trains exactly as one without.
    """
    import random

    import torch

    states = (torch.get_rng_state(), np.random.get_state(), random.getstate())  # noqa: NPY002
    own = _trainer_generators(trainer)
    try:
        result = _heldout(cfg, scenario, trainer, seeds, episodes)
    finally:
        torch.set_rng_state(states[0])
        np.random.set_state(states[1])  # noqa: NPY002
        random.setstate(states[2])
        for holder, attr, gen, state in own:
            setattr(holder, attr, gen)  # a reseed may have bound a new generator
            if isinstance(gen, np.random.Generator):
                gen.bit_generator.state = state
            else:
                gen.set_state(state)
    return _curve_summary(result["per_episode"], seeds)


def _trainer_generators(trainer: Any) -> list[tuple[Any, str, Any, Any]]:
    """``(holder, attribute, generator, its state)`` of the random generators a trainer holds.

    Looks at the trainer's attributes and one level into the objects they hold (adapters
    wrap the learner), for numpy and torch generators.
    """
    import torch

    out = []
    holders = [trainer, *(v for v in vars(trainer).values() if hasattr(v, "__dict__"))]
    for holder in holders:
        for attr, value in list(vars(holder).items()):
            if isinstance(value, np.random.Generator):
                out.append((holder, attr, value, value.bit_generator.state))
            elif isinstance(value, torch.Generator):
                out.append((holder, attr, value, value.get_state()))
    return out


def _evaluate_and_record(
    cfg: DictConfig,
    scenario: ScenarioHandle,
    trainer: Any,
    seeds: list[int],
    episodes: int,
    config: dict[str, Any],
) -> dict[str, Any]:
    """Evaluate a trained actor on held-out seeds and wrap the result in the common record."""
    result = _heldout(cfg, scenario, trainer, seeds, episodes)
    return make_record(
        scenario=scenario,
        algo=algo_label(cfg.algo),
        shield=cfg.shield.name,
        train_seed=int(cfg.seed),
        eval_seeds=seeds,
        episodes=episodes,
        result=result,
        config=config,
    )


def evaluate_run(
    run_dir: str, eval_seeds: list[int] | None = None, episodes: int | None = None
) -> dict[str, Any]:
    """Re-evaluate a run directory's last checkpoint; return the new record.

    Writes nothing: the run's own ``eval.json`` (with its ``train`` block) stays as training
    wrote it, and the caller (``evaluate.py``) decides where the new record goes. Runs
    written before each algorithm had its own config class load too.
    """
    import torch

    path = Path(run_dir)
    if not (path / CHECKPOINT).exists():
        raise FileNotFoundError(f"run_dir={run_dir!r} holds no {CHECKPOINT}")
    cfg = OmegaConf.load(path / "config.yaml")
    ckpt = torch.load(path / CHECKPOINT, weights_only=False)
    scenario = _resolve(cfg)
    entry, algo = _algo(cfg)
    trainer = make_trainer(
        entry.name, algo, scenario.spec, int(cfg.seed), cfg.shield.name, shield_kwargs(cfg.shield)
    )
    trainer.load_state_dict(ckpt["trainer"])
    seeds = list(eval_seeds) if eval_seeds is not None else list(cfg.experiment.eval_seeds)
    eps = int(episodes) if episodes is not None else int(cfg.experiment.eval_episodes)
    return _evaluate_and_record(cfg, scenario, trainer, seeds, eps, ckpt["config"])


def evaluate_baseline(
    name: str,
    env_name: str,
    env_overrides: dict[str, Any],
    eval_seeds: list[int],
    episodes: int,
    out_path: str,
    shield: str = "none",
) -> dict[str, Any]:
    """Evaluate a registered heuristic on held-out seeds and write its record to ``out_path``.

    ``shield`` runs it behind a registered collision shield (default options).
    """
    from edgesched.shields import list_shields

    if shield not in list_shields():
        raise KeyError(f"unknown shield {shield!r}; registered shields: {list_shields()}")
    scenario = resolve_scenario(env_name, **env_overrides)
    policy = make_baseline(name, scenario.spec, seed=0)
    result = evaluate_scheduler(policy, scenario, None, eval_seeds, episodes, shield)
    record = make_record(
        scenario=scenario,
        algo=name,
        shield=shield,
        train_seed=None,
        eval_seeds=eval_seeds,
        episodes=episodes,
        result=result,
        config={"baseline": name, "env": env_name, "overrides": env_overrides}
        | ({"shield": shield} if shield != "none" else {}),
    )
    atomic_write_json(out_path, record)
    return result["summary"]


__all__ = ["evaluate_baseline", "evaluate_run", "run"]
