r"""Do a learner's curves at different budgets line up by experience or by schedule?

A PPO learner here anneals its entropy coefficient over its whole budget, so two budgets of
the same learner differ in two ways at any environment-step count: how much experience the
runs have seen, and how far their schedule has moved. Given one results file per budget
(JSON lines of the same learner and scenario, each run with a held-out curve), this reads
every curve and reports the held-out mean JCT on the curve seeds

* at the same environment steps (each budget's end, for every longer budget),
* at the same fraction of the budget (training progress 0.25, 0.5, 0.75, 1),
* over the last quarter of each budget (the mean of a run's points there: one curve point
  is one episode per curve seed, so a single point swings), with the typical swing between
  consecutive points in that window.

Each figure is the mean over training seeds with a 95% stratified bootstrap CI (training
seeds resampled within each curve seed), as the leaderboards aggregate curves
(:func:`edgesched.leaderboard.curves.curve_series`). If the budgets agree at equal steps the
schedule does not matter; if they agree at equal progress, the schedule decides::

    python benchmarks/curve_alignment.py --records \
        leaderboards/studies/original_rules/tapfinger-hetero6_tapfinger-orig-b300k.jsonl \
        leaderboards/studies/original_rules/tapfinger-hetero6_tapfinger-orig-b600k.jsonl \
        leaderboards/studies/original_rules/tapfinger-hetero6_tapfinger-orig-b1200k.jsonl \
        --out benchmarks/results --name curve_alignment_tfh6_orig
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report  # benchmarks/ is a folder of scripts, not a package

from edgesched.leaderboard import stats
from edgesched.leaderboard.curves import curve_series
from edgesched.leaderboard.records import RecordError, load_results

PROGRESS = (0.25, 0.5, 0.75, 1.0)
LATE_FROM = 0.75
"""The late window: points at or past this fraction of the budget."""


@dataclass
class Group:
    """The runs of one budget: their shared curve points (runs, points, curve seeds)."""

    name: str
    budget: int
    steps: np.ndarray
    jct: np.ndarray

    def at(self, k: int) -> stats.Estimate:
        """Mean over training seeds at point ``k`` (stratified over curve seeds)."""
        return stats.stratified_bootstrap(
            [self.jct[:, k, j] for j in range(self.jct.shape[2])], "mean"
        )

    def nearest(self, step: float) -> int | None:
        """Index of the point nearest ``step``, if within one curve interval of it."""
        k = int(np.argmin(np.abs(self.steps - step)))
        gap = np.diff(self.steps).max() if len(self.steps) > 1 else 0
        return k if abs(self.steps[k] - step) <= gap else None

    def late(self) -> tuple[stats.Estimate, float]:
        """Late-window mean (per run and curve seed, then aggregated) and median swing.

        The swing is the median over runs and curve seeds of the absolute change between
        consecutive late points, relative to the window's mean.
        """
        sel = self.steps >= LATE_FROM * self.budget
        win = self.jct[:, sel, :]  # (runs, late points, curve seeds)
        per_run = win.mean(axis=1)
        est = stats.stratified_bootstrap([per_run[:, j] for j in range(win.shape[2])], "mean")
        swing = np.abs(np.diff(win, axis=1)) / per_run[:, None, :] if win.shape[1] > 1 else None
        return est, float(np.median(swing)) if swing is not None else float("nan")


def load_group(path: str) -> Group:
    """The runs of one results file as a :class:`Group`.

    Raises:
        RecordError: no learned runs with curves, runs of different budgets, algorithms or
            scenarios, or curves of different protocols.
    """
    recs = [r for r in load_results([path]) if r.learned]
    if not recs:
        raise RecordError(f"{path}: no learned runs")
    keys = {(r.data["scenario"], r.data["algo"], r.data["train"]["env_steps"]) for r in recs}
    if len(keys) != 1:
        raise RecordError(
            f"{path}: one budget of one learner per file; found (scenario, algo, env_steps) "
            f"{sorted(keys)}"
        )
    series = curve_series(recs)
    if series is None:
        raise RecordError(f"{path}: some run has no curve (train with experiment.curve_every)")
    steps, jct = series
    (_, _, budget) = keys.pop()
    return Group(Path(path).stem, int(budget), np.asarray(steps), jct)


def _common_prefix(names: list[str]) -> str:
    """The longest common prefix of ``names`` that ends at a ``-`` or ``_``."""
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    cut = max(first.rfind("-", 0, n), first.rfind("_", 0, n))
    return first[: cut + 1]


def _fmt(e: stats.Estimate | None) -> str:
    if e is None:
        return "—"
    if np.isnan(e.low):
        return f"{e.value:.2f}"
    return f"{e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"


def main(argv: list[str] | None = None) -> None:
    """Read the files and print the three tables (and with ``--out``, write them)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", nargs="+", required=True, help="one results file per budget")
    p.add_argument("--out", default="", help="also write <out>/<name>.md")
    p.add_argument("--name", default="curve_alignment", help="results file name without .md")
    args = p.parse_args(argv)
    groups = sorted((load_group(f) for f in args.records), key=lambda g: g.budget)
    # the files' common stem prefix (scenario and learner) is said once, not in every column
    prefix = _common_prefix([g.name for g in groups]) if len(groups) > 1 else ""
    for g in groups:
        g.name = g.name[len(prefix) :] or g.name
    rep = Report(args.name, args.out)
    rep.print(
        "held-out mean JCT on the curve seeds: mean over training seeds [95% stratified "
        "bootstrap CI]"
    )
    for g in groups:
        rep.print(
            f"{prefix}{g.name}: budget {g.budget:,} env steps, {g.jct.shape[0]} training seeds"
        )
    rep.print("")
    rep.print("At the same environment steps (each budget's end):")
    rep.print("| steps | " + " | ".join(g.name for g in groups) + " |")
    rep.print("|---|" + "---|" * len(groups))
    for anchor in sorted({g.budget for g in groups}):  # two variants may share a budget
        cells = []
        for g in groups:
            k = g.nearest(anchor) if anchor <= g.budget + 1 else None
            cells.append(
                "—"
                if k is None
                else f"{_fmt(g.at(k))} (at {g.steps[k]:,}, progress {g.steps[k] / g.budget:.2f})"
            )
        rep.print(f"| {anchor:,} | " + " | ".join(cells) + " |")
    rep.print("")
    rep.print("At the same training progress (fraction of each budget):")
    rep.print("| progress | " + " | ".join(g.name for g in groups) + " |")
    rep.print("|---|" + "---|" * len(groups))
    for frac in PROGRESS:
        cells = []
        for g in groups:
            k = g.nearest(frac * g.budget)
            cells.append("—" if k is None else f"{_fmt(g.at(k))} (at {g.steps[k]:,})")
        rep.print(f"| {frac:.2f} | " + " | ".join(cells) + " |")
    rep.print("")
    rep.print(f"Late window (progress >= {LATE_FROM}): mean of each run's points there")
    rep.print("| budget | late mean | median swing between consecutive points |")
    rep.print("|---|---|---|")
    for g in groups:
        est, swing = g.late()
        rep.print(f"| {g.name} | {_fmt(est)} | {swing:.1%} |")
    rep.save()


if __name__ == "__main__":
    main()
