"""Sample-efficiency curves of learned entries, aggregated over training seeds.

A run trained with ``experiment.curve_every = K`` records, in its ``eval.json``'s ``curve``
block, its held-out mean JCT every ``K`` updates (and at the end) on the curve's evaluation
seeds. For one leaderboard entry (an algorithm with a shield) the points of its training
seeds are aggregated the way rliable and marl-eval report learning curves: at every
environment-step count the runs share, the mean over training seeds of each run's mean JCT,
with a 95% stratified bootstrap CI (training seeds resampled within each evaluation seed,
as for the board's own columns).

Whether a curve has flattened is measured, not eyeballed: over the points in the second half
of the budget (:data:`TREND_FROM`), each run's held-out JCT on each curve seed is fitted with a
Theil-Sen line (the median of the slopes between every pair of points), and the line's change
across that window, relative to the window's median JCT, is aggregated like the points (mean
over training seeds, stratified bootstrap CI). An entry whose whole interval lies below zero
was still improving when its budget ran out; that is the evidence the benchmark budget tier
(``leaderboards/README.md``) is chosen from.

The fit is robust because a curve point is one episode per curve seed: an evaluation in which
the policy stalls (jobs left waiting until the episode's end) can put a point 100 times above
its neighbours, and a least-squares line through such a spike (with the window's mean as its
scale) turns one evaluation into the verdict. Theil-Sen ignores up to about 29% of the points
as outliers; ``benchmarks/trend_estimators.py`` compares both fits on every committed curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from . import stats
from .records import Record
from .studies import paired_reduction, reduction_text
from .table import NA, Row, _ci, entry_name, png_bytes, varied_entry

TREND_FROM = 0.5
"""The trend is fitted to the points at or after this fraction of the entry's last step."""
TREND_MIN_POINTS = 3
TREND_MATERIAL = 0.02
"""A change smaller than this (2% of the JCT over half the budget) counts as flat even when
its interval excludes zero. Assumed: about the spread between two evaluations of one policy
on three seeds, not derived from data."""


@dataclass(frozen=True)
class Curve:
    """An entry's aggregated learning curve.

    Attributes:
        every: updates between two points (``experiment.curve_every``).
        seeds: the evaluation seeds of every point.
        points: ``(env_steps, estimate)`` per point, in step order (the last is the final
            evaluation).
        runs: training seeds aggregated.
        trend: relative change of held-out JCT over the second half of the budget
            (:func:`late_trend`; negative: still improving), ``None`` with fewer than
            :data:`TREND_MIN_POINTS` points there.
    """

    every: int
    seeds: tuple[int, ...]
    points: tuple[tuple[int, stats.Estimate], ...]
    runs: int
    trend: stats.Estimate | None = None

    @property
    def trend_text(self) -> str:
        """:attr:`trend` as :func:`trend_text` writes it."""
        return trend_text(self.trend)

    @property
    def verdict(self) -> str:
        """:func:`trend_verdict` of :attr:`trend`."""
        return trend_verdict(self.trend)


def trend_text(trend: stats.Estimate | None) -> str:
    """``-10.5% [-18.9%, -0.9%]``: a trend with its CI (``n/a`` without one).

    A trend of one run has no interval (its bounds are not finite): ``+11.2% [n/a]``, as
    the boards write a mean without one.
    """
    if trend is None:
        return NA
    if not (np.isfinite(trend.low) and np.isfinite(trend.high)):
        return f"{trend.value:+.1%} [{NA}]"
    return f"{trend.value:+.1%} [{trend.low:+.1%}, {trend.high:+.1%}]"


def trend_verdict(trend: stats.Estimate | None) -> str:
    """``still improving``, ``flat``, ``worsening`` or ``n/a`` for a :func:`late_trend`.

    Improving (worsening): the whole 95% CI is below (above) zero and the estimate exceeds
    :data:`TREND_MATERIAL` in size; anything else is flat.
    """
    t = trend
    if t is None or not (np.isfinite(t.low) and np.isfinite(t.high)):
        return "n/a"
    if t.high < 0 and t.value < -TREND_MATERIAL:
        return "still improving"
    if t.low > 0 and t.value > TREND_MATERIAL:
        return "worsening"
    return "flat"


TREND_FITS = ("theil-sen", "least-squares")
"""Line fits :func:`late_trend` offers; the boards use the first (``least-squares`` with the
window's mean as scale is the fit the boards used before, kept for comparison)."""


def late_trend(steps: list[int], jct: np.ndarray, fit: str = "theil-sen") -> stats.Estimate | None:
    """Relative change of held-out JCT over the second half of the budget, with its CI.

    Args:
        steps: the env-step count of every point, ascending.
        jct: per-seed mean JCT, shape ``(training runs, points, curve seeds)``.
        fit: ``theil-sen`` (the boards' fit: median pairwise slope, scaled by the window's
            median JCT) or ``least-squares`` (ordinary least squares, scaled by the window's
            mean JCT), one of :data:`TREND_FITS`.

    Returns:
        Mean over training seeds of each (run, curve seed)'s line's change between the
        window's first and last point divided by its JCT scale in the window, with a 95%
        bootstrap CI stratified by curve seed; ``None`` when fewer than
        :data:`TREND_MIN_POINTS` points lie at or after :data:`TREND_FROM` of the last step.

    Raises:
        ValueError: ``fit`` is not one of :data:`TREND_FITS`.
    """
    if fit not in TREND_FITS:
        raise ValueError(f"fit={fit!r} is not a trend fit; allowed: {', '.join(TREND_FITS)}")
    x_all = np.asarray(steps, dtype=np.float64)
    keep = x_all >= TREND_FROM * x_all[-1]
    if keep.sum() < TREND_MIN_POINTS:
        return None
    x, y = x_all[keep], np.asarray(jct, dtype=np.float64)[:, keep, :]
    if fit == "least-squares":
        xc = x - x.mean()
        # every (run, seed) series at once: shape (runs, seeds)
        slope = np.tensordot(xc, y - y.mean(axis=1, keepdims=True), axes=([0], [1])) / (xc @ xc)
        scale = y.mean(axis=1)
    else:
        # scipy's Theil-Sen takes one series at a time; a window holds a few dozen points
        slope = np.array(
            [
                [scipy_stats.theilslopes(y[i, :, j], x).slope for j in range(y.shape[2])]
                for i in range(y.shape[0])
            ]
        )
        scale = np.median(y, axis=1)
    rel = slope * (x[-1] - x[0]) / scale
    return stats.stratified_bootstrap([rel[:, j] for j in range(rel.shape[1])], "mean")


def curve_series(recs: list[Record]) -> tuple[list[int], np.ndarray] | None:
    """The points one learned entry's runs share, as one array.

    Returns:
        ``(steps, jct)``: the env-step counts every run has a point at, ascending, and the
        per-seed mean JCT there, shape ``(training runs, points, curve seeds)``; ``None``
        when some run has no curve.

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
    mats = []
    for step in steps:
        # (training seeds, curve seeds) per-seed mean JCT at this step
        at_step = [next(p for p in b["points"] if int(p["env_steps"]) == step) for b in blocks]
        mats.append(np.array([p["per_seed"] for p in at_step], dtype=np.float64))
    return steps, np.stack(mats, axis=1)


def entry_curve(recs: list[Record]) -> Curve | None:
    """The curve of one learned entry's records, or ``None`` when some run has none.

    Raises:
        RecordError: the runs' curves differ in interval or seeds (not aggregable).
    """
    series = curve_series(recs)
    if series is None:
        return None
    steps, jct = series
    points = tuple(
        (step, stats.stratified_bootstrap([jct[:, k, j] for j in range(jct.shape[2])], "mean"))
        for k, step in enumerate(steps)
    )
    first = recs[0].data["curve"]
    seeds = tuple(int(s) for s in first["seeds"])
    return Curve(int(first["every"]), seeds, points, len(recs), late_trend(steps, jct))


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
        name = entry_name(r.algo, r.shield)
        seeds = ",".join(map(str, c.seeds))
        for step, est in c.points:
            lines.append(f"| {name} | {c.runs} | {c.every} | {seeds} | {step:,} | {_ci(est)} |")
    lines += [
        "",
        "Has each curve flattened? Change of held-out JCT over the second half of the budget "
        "(a Theil-Sen line, robust to a single stalled evaluation, through each run's points "
        "from half the last step on, per curve seed; its change across the window relative to "
        "the window's median JCT; mean over "
        "training seeds, 95% stratified bootstrap CI). *Still improving*: the whole interval "
        f"is below zero and the change exceeds {TREND_MATERIAL:.0%}, so a larger budget would "
        "likely lower the entry's JCT.",
        "",
        "| entry | change over the second half [95% CI] | verdict |",
        "|---|---|---|",
    ]
    for r in with_curve:
        c = r.curve
        lines.append(f"| {entry_name(r.algo, r.shield)} | {c.trend_text} | {c.verdict} |")
    lines.append("")
    return lines


def longer_budgets(entry: Row, longer: list[Row]) -> list[tuple[Row, stats.Estimate | None]]:
    """Every longer-budget variant of ``entry`` in ``longer`` with its paired reduction.

    Shortest budget first. A variant is a row of the budget study
    (``leaderboards/studies/budget/``) whose algorithm is ``<entry's algorithm>-<label>``
    with the same shield and whose curve ends past the entry's. The reduction is how much
    lower the variant's mean JCT is than the entry's, paired over the evaluation seeds
    (``None`` when their seeds differ). All of them count, not only the longest: a longer
    study on 3 seeds can be noisier than a shorter one.
    """
    if entry.curve is None:
        return []
    budget = entry.curve.points[-1][0]
    found = [
        r
        for r in longer
        if r.learned
        and r.shield == entry.shield
        and varied_entry(r.algo) == entry.algo
        and r.curve is not None
        and r.curve.points[-1][0] > budget
    ]
    found.sort(key=lambda r: r.curve.points[-1][0])
    return [(r, paired_reduction(r, entry)) for r in found]


def settling_budget(gaining: list[Row], runs: list[Row]) -> tuple[int, str] | None:
    """The budget a budget study settles an entry at, and why; ``None``: still open.

    Args:
        gaining: the entry's longer runs whose mean JCT is lower than its board entry's
            (paired 95% CI excluding zero), shortest first.
        runs: all its longer runs comparable paired with the board entry, shortest first.

    Returns:
        The shortest gaining budget that no still longer run beats (lower mean JCT, paired
        95% CI excluding zero): with ``"no longer run is lower (...)"`` and each longer
        run's paired change against it where a still longer run exists, so the longer
        budgets gain nothing more; where it is the longest run, with
        ``"is no longer improving there"`` if its curve is not still improving at its end,
        else ``None``. ``None`` too when a still longer run beats every gaining budget.

    A run's curve falls near its own end because its schedules end there (a longer run is a
    new run, :func:`render_budget_tiers`), so the last points of the longest curve cannot
    tell a plateau from an annealing schedule; two budgets compared paired on the held-out
    seeds can.
    """
    for var in gaining:
        steps = var.curve.points[-1][0]
        after = [r for r in runs if r.curve.points[-1][0] > steps]
        reductions = [paired_reduction(r, var) for r in after]
        if any(red is not None and red.low > 0 for red in reductions):
            continue  # a still longer run is lower: this budget does not settle it
        if after:
            # the comparisons that settle it, so the page shows its evidence
            vs = ", ".join(
                f"{r.curve.points[-1][0]:,} steps: {reduction_text(red)}"
                for r, red in zip(after, reductions, strict=True)
            )
            return steps, f"no longer run is lower ({vs})"
        if var.curve.verdict != "still improving":
            return steps, "is no longer improving there"
        return None
    return None


def render_budget_tiers(
    tables: dict[str, list[Row]],
    default_steps: int,
    longer: dict[str, list[Row]] | None = None,
    budgets: dict[str, int] | None = None,
    *,
    min_seeds: int,
) -> list[str]:
    """``coverage.md``'s budget-tier table: per board, is the default budget enough?

    Args:
        tables: every board's rows (``build``'s tables).
        default_steps: the default ``experiment.total_env_steps``.
        longer: per board, the budget study's rows (entries trained past the default,
            :func:`longer_budgets`); an entry still improving at the default none of whose
            longer runs is lower with a paired 95% CI gains nothing from a longer budget;
            otherwise the shortest budget that is lower and that no still longer run beats
            (:func:`settling_budget`) is the entry's, and if it is the longest run, only
            if its curve is no longer improving there.
        budgets: the boards whose benchmark budget is set to other than the default
            (:data:`edgesched.experiment.budgets.BENCHMARK_BUDGETS`, requested env steps);
            such a board's row says which entries are trained at it, which are still to be
            retrained, and which are still improving there.
        min_seeds: training seeds a longer run needs before the rule counts it (the
            protocol's); a run with fewer is listed as incomplete and decides nothing.
    """
    longer, budgets = longer or {}, budgets or {}
    lines = [
        "## Budget tiers",
        "",
        f"The default budget is {default_steps:,} env steps (`experiment.total_env_steps`, the "
        "README's first command). A board's *benchmark* budget is chosen from its learned "
        "entries' sample-efficiency curves: where no entry with a curve is still improving "
        "at the end of the default budget (each board's *Has each curve flattened?* table), "
        "the default is that board's benchmark budget. An entry still improving there is "
        "trained longer (the budget study, `leaderboards/studies/budget/`, same protocol "
        "and held-out seeds, possibly at several budgets): if none of its longer runs has a "
        "mean JCT lower than its board entry's with a paired 95% CI excluding zero (the "
        "held-out seeds resampled paired and each side's training runs resampled), the extra "
        "budget gains nothing and the default stands for it; otherwise the shortest budget "
        "that is lower and that no still longer run beats (paired, the same test) decides: "
        "if a still longer run exists, that budget is the entry's (the longer runs gain "
        "nothing more); if it is the longest run, it is the entry's only where its curve is "
        "no longer improving at its end; if that curve is still improving, or no longer run "
        "exists, the benchmark budget is not determined. A board with an entry without a "
        "curve stays undetermined too: that entry may be the one still improving. A budget "
        "so determined is set in `edgesched/experiment/budgets.py`, which the board's sweep "
        "reads, and the board's entries are retrained at it. The "
        "same rule applies past a set budget: an entry trained at it and still improving "
        "there is trained longer still, and the board's row says what that run found. A "
        "longer run is a new run, not the shorter one continued: every schedule stretches "
        "over its budget (the PPO learners' entropy coefficient, `dqn_central`'s "
        "exploration), so its curve at a shorter run's budget is not that run's curve, and "
        "a curve still falls near its end, where its schedules end: runs at several "
        "budgets, compared paired, can show that more steps gain nothing where one curve's "
        "last points cannot. A longer run counts once it has the protocol's "
        f"{min_seeds} training seeds; one with fewer is listed as incomplete and decides "
        "nothing.",
        "",
        "| board | entries with a curve | still improving at their last step | longer budget "
        "(vs the board entry, paired) | without a curve | benchmark budget |",
        "|---|---|---|---|---|---|",
    ]
    for name, rows in tables.items():
        learned = [r for r in rows if r.learned]
        if not learned:
            continue
        curved = [r for r in learned if r.curve is not None]
        with_curve = sorted(entry_name(r.algo, r.shield) for r in curved)
        improving = sorted(
            (r for r in curved if r.curve.verdict == "still improving"),
            key=lambda r: entry_name(r.algo, r.shield),
        )
        without = [entry_name(r.algo, r.shield) for r in learned if r.curve is None]
        studied, gains, settled, untested, nothing = [], [], {}, [], []
        for r in improving:
            who = entry_name(r.algo, r.shield)
            # variants on other evaluation seeds cannot be compared paired
            paired = [
                (v, red) for v, red in longer_budgets(r, longer.get(name, [])) if red is not None
            ]
            for var, red in paired:
                n = len(var.train_seeds)
                seeds = f"{n} seeds" if n >= min_seeds else f"{n} of {min_seeds} seeds, incomplete"
                studied.append(
                    f"{who}: {var.curve.points[-1][0]:,} steps, {seeds}, "
                    f"{reduction_text(red)}, curve there {var.curve.verdict}"
                )
            # a run short of the protocol's seeds is shown but decides nothing
            paired = [(v, red) for v, red in paired if len(v.train_seeds) >= min_seeds]
            if not paired:
                untested.append(who)
                continue
            gaining = [var for var, red in paired if red.low > 0]
            if not gaining:
                nothing.append(who)
                continue
            found = settling_budget(gaining, [var for var, _ in paired])
            if found is None:
                gains.append(who)
            else:
                settled[who] = found
        if name in budgets:
            budget = _set_budget(budgets[name], learned, gains, settled, nothing)
        elif not curved:
            budget = "not determined: no curve on this board"
        elif untested:
            budget = "not determined: longer curves needed" + _settled_text(settled, "; ")
        elif gains:
            verb = "gains" if len(gains) == 1 else "gain"
            budget = f"not determined: {', '.join(gains)} {verb} from a longer budget still"
            budget += _settled_text(settled, "; ")
        elif without:
            # an entry without a curve may be the one still improving (tapfinger's own board)
            budget = "not determined: the default if the entries without a curve are flat too"
        else:
            last = max(r.curve.points[-1][0] for r in curved)
            if last > default_steps:
                budget = "not determined: the curves ran past the default"
            elif settled:
                top = max(steps for steps, _ in settled.values())
                budget = f"{top:,} ({_settled_text(settled)}; not yet set for the board)"
            elif improving:
                budget = f"{default_steps:,} (the default: a longer budget gains nothing)"
            else:
                budget = f"{default_steps:,} (the default: the curves are flat)"
        lines.append(
            f"| {name} | {', '.join(with_curve) or '-'} | "
            f"{', '.join(entry_name(r.algo, r.shield) for r in improving) or 'none'} | "
            f"{'; '.join(studied) or '-'} | {', '.join(sorted(without)) or '-'} | {budget} |"
        )
    return [*lines, ""]


def _settled_text(settled: dict[str, tuple[int, str]], lead: str = "") -> str:
    """The settled entries as ``mappo gains from 768 and <why>; ...``, after ``lead``.

    Empty when no entry is settled.
    """
    if not settled:
        return ""
    return lead + "; ".join(
        f"{who} gains from {steps:,} and {reason}"
        for who, (steps, reason) in sorted(settled.items())
    )


def _set_budget(
    requested: int,
    learned: list[Row],
    gains: Sequence[str],
    settled: dict[str, tuple[int, str]],
    nothing: Sequence[str],
) -> str:
    """The budget-tier cell of a board with a set benchmark budget.

    The same rule as at the default applies past the set budget: an entry trained at it and
    still improving there is trained longer still, and the cell says what that study found
    for it (``gains``: lower and still improving, ``settled``: the budget that settles it,
    with why (:func:`settling_budget`), which the board's budget is then to be raised to,
    ``nothing``: no longer run lower), each as :func:`render_budget_tiers` computed it.
    """
    from edgesched.experiment.budgets import trained_at

    at, behind = [], []
    for r in learned:
        ok = r.train_budget is not None and trained_at(*r.train_budget, requested)
        (at if ok else behind).append(r)
    steps = {r.train_budget[0] for r in at}
    shown = f"{max(steps):,}" if len(steps) == 1 else f"{requested:,} requested"
    parts = [f"{shown} (set: `edgesched/experiment/budgets.py`)"]
    parts.append(
        "trained at it: " + (", ".join(sorted(entry_name(r.algo, r.shield) for r in at)) or "none")
    )
    if behind:
        names = ", ".join(sorted(entry_name(r.algo, r.shield) for r in behind))
        parts.append(f"still to retrain at it: {names}")
    still = sorted(
        entry_name(r.algo, r.shield)
        for r in at
        if r.curve is not None and r.curve.verdict == "still improving"
    )
    if still:
        parts.append(f"still improving there: {', '.join(still)}")
    for who in still:
        # studies of an entry not yet retrained at the set budget compare against its old
        # board entry, so only the retrained entries' longer runs speak for this budget
        if who in settled:
            steps, reason = settled[who]
            parts.append(
                f"{who} gains from {steps:,} and {reason}: the budget to raise the board to"
            )
        elif who in gains:
            parts.append(f"{who} gains from a longer budget still: longer curves needed")
        elif who in nothing:
            parts.append(f"{who}: a longer budget gains nothing")
        else:
            parts.append(f"{who}: no longer run yet, longer curves needed")
    return "; ".join(parts)


def render_curves_png(
    scenario_id: str, rows: list[Row], references: dict[str, float] | None = None
) -> bytes | None:
    """Learning curves with CI bands, one line per entry; ``None`` without curves.

    Args:
        scenario_id: the plot's title.
        rows: entries; those with a curve are drawn.
        references: horizontal dashed lines by label (for example the best heuristic's mean
            JCT), to read the curves against.
    """
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
    for label, y in (references or {}).items():
        ax.axhline(y, ls="--", lw=1, color="0.4")
        ax.annotate(label, (0.01, y), xycoords=("axes fraction", "data"), fontsize=8, va="bottom")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("held-out mean JCT (slots)")
    ax.set_title(f"{scenario_id}: sample efficiency (95% CI over training seeds)", fontsize=10)
    ax.legend(fontsize=8)
    return png_bytes(fig, dpi=100)


__all__ = [
    "TREND_FROM",
    "Curve",
    "entry_curve",
    "late_trend",
    "longer_budgets",
    "render_budget_tiers",
    "render_curves_md",
    "render_curves_png",
]
