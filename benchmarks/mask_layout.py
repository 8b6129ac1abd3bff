"""The two layouts of the scale-level action mask, timed on the same states in one run.

Scale-level scenarios (the edge family) compute the mask either agent-axis-first (one 4-D
comparison, few numpy calls) or agent-axis-last (more calls, each a long inner loop over
the agents). Which is faster depends on the number of (agent, pending slot, target) cells;
``edgesched.envs.observe.SMALL_MASK_CELLS`` is the crossing point. For each scenario and
number of copies, two simulators are built, one with the threshold forced to each layout;
they are stepped together with the same random feasible actions (their states stay
identical, checked through the masks), and ``refresh()``, which recomputes observations and
masks, is timed on each in alternation. Reported: microseconds per refresh of each layout
(best of ``--rounds`` windows, as ``timeit`` does), their ratio and which layout the
threshold picks.

Usage::

    python benchmarks/mask_layout.py
    python benchmarks/mask_layout.py --cases edge10-v0:1 edge100-v0:1 edge50:4
    python benchmarks/mask_layout.py --out benchmarks/results   # + mask_layout.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import edgesched
from edgesched.envs import observe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report, cpu_name  # benchmarks/ is a folder of scripts, not a package

CASES = ("edge10-v0:1", "edge50-v0:1", "edge100-v0:1", "edge10:1", "edge50:1", "edge10:4")


def _build(name: str, copies: int, cells_limit: int):
    """A simulator of ``name`` built while the layout threshold is ``cells_limit``."""
    kept = observe.SMALL_MASK_CELLS
    observe.SMALL_MASK_CELLS = cells_limit
    try:
        if copies == 1:
            return edgesched.make_parallel(name).sim
        return edgesched.make_batched(name, copies)
    finally:
        observe.SMALL_MASK_CELLS = kept


def measure(name: str, copies: int, rounds: int, refreshes: int) -> dict[str, float]:
    """Microseconds per ``refresh()`` of each layout on the same sequence of states."""
    sims = {"first": _build(name, copies, 1 << 62), "last": _build(name, copies, 0)}
    seeds = list(range(copies))
    for sim in sims.values():
        if copies == 1:
            sim.reset(seed=0)
        else:
            sim.reset(seeds=seeds)
    rng = np.random.default_rng(0)
    best = {k: float("inf") for k in sims}
    ref = sims["first"]
    for r in range(rounds):
        # a new state each round: a few random feasible steps (restarting ended episodes)
        for _ in range(5):
            m = ref.mask if copies == 1 else ref.mask_batched
            act = (rng.random(m.shape) * m).argmax(axis=-1)
            for sim in sims.values():
                sim.step(act)
            if np.any(ref.terminated) or np.any(ref.truncated):
                for sim in sims.values():
                    if copies == 1:
                        sim.reset(seed=r + 1)
                    else:
                        sim.reset(seeds=[s + r + 1 for s in seeds])
        np.testing.assert_array_equal(sims["first"].mask, sims["last"].mask)
        order = ("first", "last") if r % 2 == 0 else ("last", "first")
        for key in order:
            sim = sims[key]
            t0 = time.perf_counter()
            for _ in range(refreshes):
                sim.refresh()
            best[key] = min(best[key], (time.perf_counter() - t0) / refreshes * 1e6)
    cells = ref.num_agents * ref.pending_slots * ref.k1
    return {"cells": cells, **best}


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, measure each case, print (and save) the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), help="SCENARIO:COPIES each")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--refreshes", type=int, default=500, help="timed refresh() per round")
    ap.add_argument("--out", default="", help="folder for mask_layout.md")
    ap.add_argument("--name", default="mask_layout")
    args = ap.parse_args(argv)
    rep = Report(args.name, args.out)
    rep.print(f"Machine: {cpu_name()}; SMALL_MASK_CELLS = {observe.SMALL_MASK_CELLS}")
    rep.print()
    rep.print("| scenario | copies | cells | agent-first us | agent-last us | first/last | used |")
    rep.print("|---|---|---|---|---|---|---|")
    for case in args.cases:
        name, _, copies = case.partition(":")
        r = measure(name, int(copies or 1), args.rounds, args.refreshes)
        used = "first" if r["cells"] <= observe.SMALL_MASK_CELLS else "last"
        rep.print(
            f"| {name} | {copies or 1} | {r['cells']:.0f} | {r['first']:.1f} | "
            f"{r['last']:.1f} | {r['first'] / r['last']:.2f} | {used} |"
        )
    rep.save()


if __name__ == "__main__":
    main()
