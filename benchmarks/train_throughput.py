"""PPO training throughput: experience collected and learned from, per second.

Runs a PPO learner (MAPPO by default; IPPO, tapfinger, ...) with its ``conf/algo`` settings
on a scenario for a fixed number of updates through the real runner and reports env-steps/s
(decision rounds of all agents), agent-decisions/s and updates/s, each over the whole loop
(collection + learning), and the training time of the default budget at that rate.

Usage::

    python benchmarks/train_throughput.py                       # mappo on edge50
    python benchmarks/train_throughput.py --algo ippo --env edge10 --updates 10
    python benchmarks/train_throughput.py --algo tapfinger --env tapfinger-hetero6 --updates 30
    python benchmarks/train_throughput.py --algo srole --shield central   # the README's main job
    python benchmarks/train_throughput.py --updates 30 --out benchmarks/results  # + .md file
    python benchmarks/train_throughput.py --threads 2   # torch threads (default: the runs' 1)
    python benchmarks/train_throughput.py --collision-mode timeshare   # the scenario's dynamics
        # under another collision mode (file suffix _timeshare), to compare with its own mode
    python benchmarks/train_throughput.py --algo dqn_central --sweep copies=1,4,8 --rounds 2
        # one algorithm key at several values, alternating in one run (ratios to the first)

Training runs use one torch thread (``experiment.threads``), so that two runs share a
2-core machine; ``--threads`` measures what a lone run gains from more.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

import edgesched
from edgesched.envs.config import COLLISION_MODES
from edgesched.experiment import run
from edgesched.experiment.schema import AlgoConfig, EnvConfig, TrainConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report  # benchmarks/ is a folder of scripts, not a package


def algo_settings(algo: str, root: Path | None = None) -> tuple[Any, str]:
    """An algorithm's ``conf/algo`` settings and its default shield, as ``train.py`` composes.

    Args:
        algo: registered algorithm.
        root: the checkout whose ``conf/algo`` applies (default: this one).

    Returns:
        ``(settings, shield)``: the file's keys (empty if it has none) and the shield its
        defaults list selects (``override /shield@...: central`` for srole), else ``none``.
    """
    path = (root or Path(__file__).resolve().parents[1]) / "conf" / "algo" / f"{algo}.yaml"
    own = OmegaConf.load(path) if path.is_file() else OmegaConf.create({})
    shield = "none"
    for item in own.pop("defaults", []):
        if isinstance(item, str):
            continue
        for key, value in item.items():
            if key.split("@")[0] == "override /shield":
                shield = str(value)
    return own, shield


def measure(
    algo: str,
    env: str,
    updates: int,
    threads: int = 1,
    shield: str | None = None,
    collision_mode: str = "",
    root: Path | None = None,
    algo_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One short training run through the real runner, timed from its ``metrics.jsonl``.

    Args:
        algo: registered algorithm, with its ``conf/algo`` settings.
        env: registered scenario.
        updates: PPO updates (collect + learn) at the default rollout shape.
        threads: torch CPU threads.
        shield: shield in the loop (``None``: the algorithm's default, see
            :func:`algo_settings`).
        collision_mode: override of the scenario's collision mode ("" keeps its own).
        root: the checkout whose ``conf/algo`` settings apply (default: this one; another
            revision's in ``compare_revisions.py --train``).
        algo_overrides: algorithm keys set on top of ``conf/algo`` (``--sweep``).

    Returns:
        ``wall`` (seconds of the training loop), ``steps`` (env steps), ``agents`` (per
        step), ``updates``, ``per_update`` (env steps), ``default_steps`` (the default
        budget), ``total`` (seconds of the whole run, setup and evaluation included) and
        ``shield`` (the one used).
    """
    cfg = OmegaConf.structured(TrainConfig(algo=AlgoConfig(name=algo), env=EnvConfig(name=env)))
    own, default_shield = algo_settings(algo, root)
    cfg.algo = OmegaConf.merge(cfg.algo, own, algo_overrides or {})
    cfg.shield.name = default_shield if shield is None else shield
    if collision_mode:
        cfg.env.overrides = {"collision_mode": collision_mode}
    default_steps = cfg.experiment.total_env_steps
    # the default experiment's rollout shape; a single short evaluation episode
    per_update = cfg.experiment.num_envs * cfg.experiment.rollout_steps
    cfg.experiment.total_env_steps = updates * per_update
    cfg.experiment.checkpoint_every = updates
    # one held-out episode at the end; the figures below come from metrics.jsonl, which
    # times the training loop only (overriding max_slots would shorten training episodes
    # too and time workload generation instead of learning)
    cfg.experiment.eval_seeds = [10_000]
    cfg.experiment.threads = threads
    with tempfile.TemporaryDirectory() as tmp:
        cfg.run_dir = str(Path(tmp) / "run")
        t0 = time.perf_counter()
        run(cfg)
        total = time.perf_counter() - t0
        rows = [json.loads(x) for x in (Path(cfg.run_dir) / "metrics.jsonl").open()]
    steps = rows[-1]["env_steps"]
    return {
        "wall": rows[-1]["wall_time"],
        "steps": steps,
        "agents": rows[-1]["agent_decisions"] // steps,
        "updates": len(rows),
        "per_update": per_update,
        "default_steps": default_steps,
        "total": total,
        "shield": str(cfg.shield.name),
    }


def _sweep(text: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` as the key and its values (YAML-typed, as on Hydra's command line)."""
    key, sep, values = text.partition("=")
    items = [yaml.safe_load(v) for v in values.split(",") if v]
    if not sep or not key or len(items) < 2:
        raise argparse.ArgumentTypeError(f"--sweep={text!r}: need KEY=V1,V2[,...]")
    return key, items


def sweep(
    algo: str, env: str, updates: int, key: str, values: list[Any], rounds: int, threads: int = 1
) -> list[tuple[Any, float, float]]:
    """Measure one algorithm key at each of ``values``, alternating for ``rounds`` rounds.

    Returns:
        ``(value, best env-steps/s, ratio to the first value's best)`` per value: the best
        of its rounds, because this shared machine's speed drifts (as ``timeit`` reports).
    """
    best: dict[int, float] = {}
    for _ in range(rounds):
        for i, v in enumerate(values):
            m = measure(algo, env, updates, threads, algo_overrides={key: v})
            best[i] = max(best.get(i, 0.0), m["steps"] / m["wall"])
    return [(v, best[i], best[i] / best[0]) for i, v in enumerate(values)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="mappo")
    parser.add_argument("--env", default="edge50")
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument(
        "--shield",
        default=None,
        help="shield in the loop (default: the one conf/algo/<algo>.yaml selects, srole's "
        "central; none for the others)",
    )
    parser.add_argument(
        "--collision-mode",
        default="",
        choices=["", *COLLISION_MODES],
        help="override the scenario's collision_mode (default: the scenario's own)",
    )
    parser.add_argument(
        "--sweep",
        type=_sweep,
        default=None,
        help="KEY=V1,V2,...: measure algo.KEY at each value, alternating (file suffix "
        "_sweep_KEY); ratios are to the first value",
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of a --sweep")
    parser.add_argument("--out", default="", help="directory for train_throughput_<algo>_<env>.md")
    args = parser.parse_args()
    if args.threads < 1:
        parser.error(f"--threads={args.threads} is not allowed; use 1 or more")
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds} is not allowed; use 1 or more")
    suffix = f"_threads{args.threads}" if args.threads != 1 else ""
    if args.sweep:
        key, values = args.sweep
        report = Report(f"train_throughput_{args.algo}_{args.env}_sweep_{key}", args.out)
        report.print(
            f"edgesched {edgesched.__version__}, python {platform.python_version()}, "
            f"{args.algo} on {args.env}, {args.updates} updates at the default rollout shape, "
            f"{args.threads} torch thread(s), algo.{key} in {values}, {args.rounds} "
            "alternating round(s), best round per value"
        )
        report.print(f"{'algo.' + key:>16}{'env-steps/s':>14}{'ratio':>8}")
        for v, rate, ratio in sweep(
            args.algo, args.env, args.updates, key, values, args.rounds, args.threads
        ):
            report.print(f"{v!s:>16}{rate:>14,.0f}{ratio:>7.2f}x")
        report.save()
        return
    if args.collision_mode:
        suffix += f"_{args.collision_mode}"
    m = measure(args.algo, args.env, args.updates, args.threads, args.shield, args.collision_mode)
    wall, steps, agents, updates = m["wall"], m["steps"], m["agents"], m["updates"]
    per_update, default_steps, shield = m["per_update"], m["default_steps"], m["shield"]
    if shield != "none":
        suffix += f"_{shield}"
    report = Report(f"train_throughput_{args.algo}_{args.env}{suffix}", args.out)
    report.print(
        f"edgesched {edgesched.__version__}, python {platform.python_version()}, "
        f"{args.algo} on {args.env}, {args.updates} updates of {per_update} env steps, "
        f"{args.threads} torch thread(s)"
        + (f", shield={shield}" if shield != "none" else "")
        + (f", collision_mode={args.collision_mode}" if args.collision_mode else "")
    )
    report.print(f"env-steps/s (collect + learn): {steps / wall:,.0f}")
    report.print(f"agent-decisions/s:             {steps * agents / wall:,.0f}")
    report.print(f"updates/s:                     {updates / wall:.3f}")
    report.print(
        f"wall time of the loop: {wall:.1f} s (whole run incl. setup and eval: {m['total']:.1f} s)"
    )
    default_updates = -(-default_steps // per_update)
    report.print(
        f"default budget ({default_steps:,} env steps = {default_updates} updates) at this "
        f"rate: {default_updates * wall / updates / 60:.1f} min of training"
    )
    report.save()


if __name__ == "__main__":
    main()
