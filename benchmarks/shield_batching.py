"""Batched shields: one call over B copies against a lone shield per copy, in one run.

A batched simulator with ``B`` copies runs random feasible proposals (placements strongly
preferred, so simultaneous proposals collide) with random preferences. Each round, the same
proposals are shielded two ways: by one shield bound to all copies (``shield_batch``,
untimed: the phases of all shields are one array call) and by ``B`` shields bound to one
copy each, called in a Python loop (what SROLE's trainer did before). The two must agree
copy by copy (checked every round); the batched shield's joint action is executed. The
script reports copy-decisions per second (shielded joint actions of one copy) of each way,
alternating the two within each round so that their ratio is measured under the same load.

Usage::

    python benchmarks/shield_batching.py                       # edge50, B = 4, 16, 64
    python benchmarks/shield_batching.py --scenarios edge50 edge100 --copies 4 32
    python benchmarks/shield_batching.py --out benchmarks/results   # + shield_batching.md
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

import edgesched
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.scenarios import get_scenario
from edgesched.shields import make_shield

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report, cpu_name  # benchmarks/ is a folder of scripts, not a package

VARIANTS = {"central": {}, "regional": {"rounds": 2}}


def _proposals(mask: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random feasible actions, placements preferred, and random preferences (B, N, A)."""
    score = rng.random(mask.shape) + mask
    score[..., 0] = 0.5 + 0.1 * rng.random(mask.shape[:2])
    prefs = np.where(mask, rng.random(mask.shape), -np.inf)
    prefs[..., 0] = 0.3 * rng.random(mask.shape[:2])
    return score.argmax(-1), prefs


def measure(name: str, shield: str, copies: int, rounds: int, seed: int = 0) -> dict[str, float]:
    """Seconds of the batched call and of the per-copy loop over ``rounds`` rounds.

    Returns:
        ``batched_s``, ``loop_s`` (summed over rounds), ``interventions`` per round and copy.

    Raises:
        AssertionError: the two ways disagree on some copy's joint action.
    """
    sc = get_scenario(name)
    sim = EdgeClusterSim(sc.config(), copies=copies)
    sim.reset(seeds=[seed * 1000 + b for b in range(copies)])
    batch = make_shield(shield, sim.batch_view(), **VARIANTS[shield])
    lone = [make_shield(shield, sim.view(b), **VARIANTS[shield]) for b in range(copies)]
    rng = np.random.default_rng(seed)
    t_batch = t_loop = 0.0
    moved = 0
    for r in range(rounds):
        a, prefs = _proposals(sim.mask_batched, rng)
        order = (0, 1) if r % 2 == 0 else (1, 0)  # alternate which way runs first
        for way in order:
            t0 = time.perf_counter()
            if way == 0:
                res = batch.shield_batch(a, prefs, timed=False)
                t_batch += time.perf_counter() - t0
            else:
                loop = [sh.shield(a[b], prefs[b]).actions for b, sh in enumerate(lone)]
                t_loop += time.perf_counter() - t0
        if not np.array_equal(np.stack(loop), res.actions):
            raise AssertionError(f"{name} {shield} B={copies}: the two ways disagree")
        moved += int(res.interventions.sum())
        sim.step(res.actions)
        done = np.flatnonzero(sim.terminated | sim.truncated)
        if len(done):
            sim.reset_copies(done.tolist(), [seed * 1000 + copies + r + int(d) for d in done])
    return {
        "batched_s": t_batch,
        "loop_s": t_loop,
        "interventions": moved / (rounds * copies),
    }


def main() -> None:
    """Measure and print the table (and with ``--out``, write it)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", nargs="+", default=["edge50"])
    p.add_argument("--shields", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--copies", nargs="+", type=int, default=[4, 16, 64])
    p.add_argument("--rounds", type=int, default=200, help="decision rounds per measurement")
    p.add_argument("--out", default="", help="also write <out>/<name>.md")
    p.add_argument("--name", default="shield_batching", help="results file name without .md")
    args = p.parse_args()
    rep = Report(args.name, args.out)
    rep.print(
        f"edgesched {edgesched.__version__}, Python {platform.python_version()}, {cpu_name()}; "
        f"{args.rounds} rounds per row; regional: {VARIANTS['regional']}"
    )
    rep.print(
        "| scenario | shield | copies | per-copy loop copy-decisions/s | batched "
        "copy-decisions/s | batched / loop | interventions per copy-round |"
    )
    rep.print("|---|---|---|---|---|---|---|")
    for name in args.scenarios:
        for shield in args.shields:
            for b in args.copies:
                m = measure(name, shield, b, args.rounds)
                loop = args.rounds * b / m["loop_s"]
                batched = args.rounds * b / m["batched_s"]
                rep.print(
                    f"| {name} | {shield} | {b} | {loop:,.0f} | {batched:,.0f} | "
                    f"{batched / loop:.2f}x | {m['interventions']:.2f} |"
                )
    rep.save()


if __name__ == "__main__":
    main()
