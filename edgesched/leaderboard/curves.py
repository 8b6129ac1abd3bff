"""Sample-efficiency curves of learned entries, aggregated over training seeds.

A run trained with ``experiment.curve_every = K`` records, in its ``eval.json``'s ``curve``
block, its held-out mean JCT every ``K`` updates (and at the end) on the curve's evaluation
seeds. For one leaderboard entry (an algorithm with a shield) the points of its training
seeds are aggregated the way rliable and marl-eval report learning curves: at every
environment-step count the runs share, the mean over training seeds of each run's mean JCT,
with a 95% stratified bootstrap CI (training seeds resampled within each evaluation seed,
as for the board's own columns).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import stats
from .records import Record
from .table import Row, _ci, png_bytes


@dataclass(frozen=True)
class Curve:
    """An entry's aggregated learning curve.

    Attributes:
        every: updates between two points (``experiment.curve_every``).
        seeds: the evaluation seeds of every point.
        points: ``(env_steps, estimate)`` per point, in step order (the last is the final
            evaluation).
        runs: training seeds aggregated.
    """

    every: int
    seeds: tuple[int, ...]
    points: tuple[tuple[int, stats.Estimate], ...]
    runs: int


def entry_curve(recs: list[Record]) -> Curve | None:
    """The curve of one learned entry's records, or ``None`` when some run has none.

    Raises:
        RecordError: the runs' curves differ in interval or seeds (not aggregable).
    """
    blocks = [rec.data.get("curve") for rec in recs]
    if not blocks or any(b is None for b in blocks):
        return None
    first = blocks[0]
    for rec, b in zip(recs, blocks, strict=True):
        if (b["every"], list(b["seeds"])) != (first["every"], list(first["seeds"])):
            raise rec.error(
                f"curve every={b['every']} seeds={b['seeds']} differs from {recs[0].where}'s "
                f"(every={first['every']} seeds={first['seeds']}): the training seeds of one "
                "entry must share the curve protocol"
            )
    steps = sorted(set.intersection(*({int(p["env_steps"]) for p in b["points"]} for b in blocks)))
    points = []
    for step in steps:
        # (training seeds, curve seeds) per-seed mean JCT at this step
        at_step = [next(p for p in b["points"] if int(p["env_steps"]) == step) for b in blocks]
        mat = np.array([p["per_seed"] for p in at_step], dtype=np.float64)
        strata = [mat[:, j] for j in range(mat.shape[1])]
        points.append((step, stats.stratified_bootstrap(strata, "mean")))
    seeds = tuple(int(s) for s in first["seeds"])
    return Curve(int(first["every"]), seeds, tuple(points), len(recs))


def render_curves_md(rows: list[Row]) -> list[str]:
    """The board's "Sample efficiency" section (empty when no row has a curve)."""
    with_curve = [r for r in rows if r.curve is not None]
    if not with_curve:
        return []
    lines = [
        "## Sample efficiency",
        "",
        "Held-out mean JCT of each learned entry against the environment steps it had trained "
        "on, evaluated every K updates (`experiment.curve_every`) on the seeds listed; the "
        "last point is the final evaluation. Mean over training seeds with 95% stratified "
        "bootstrap CIs (training seeds resampled within each evaluation seed).",
        "",
        "| entry | training seeds | K | curve seeds | env steps | mean held-out JCT [95% CI] |",
        "|---|---|---|---|---|---|",
    ]
    for r in with_curve:
        c = r.curve
        name = r.algo if r.shield == "none" else f"{r.algo} ({r.shield})"
        seeds = ",".join(map(str, c.seeds))
        for step, est in c.points:
            lines.append(f"| {name} | {c.runs} | {c.every} | {seeds} | {step:,} | {_ci(est)} |")
    lines.append("")
    return lines


def render_curves_png(scenario_id: str, rows: list[Row]) -> bytes | None:
    """Learning curves with CI bands, one line per entry; ``None`` without curves."""
    with_curve = [r for r in rows if r.curve is not None]
    if not with_curve:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for r in with_curve:
        x = np.array([s for s, _ in r.curve.points], dtype=np.float64)
        y = np.array([e.value for _, e in r.curve.points])
        lo = np.array([e.low for _, e in r.curve.points])
        hi = np.array([e.high for _, e in r.curve.points])
        label = r.algo if r.shield == "none" else f"{r.algo}+{r.shield}"
        ax.plot(x, y, "o-", ms=3, label=label)
        if np.isfinite(lo).all() and np.isfinite(hi).all():
            ax.fill_between(x, lo, hi, alpha=0.2)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("held-out mean JCT (slots)")
    ax.set_title(f"{scenario_id}: sample efficiency (95% CI over training seeds)", fontsize=10)
    ax.legend(fontsize=8)
    return png_bytes(fig, dpi=100)


__all__ = ["Curve", "entry_curve", "render_curves_md", "render_curves_png"]
