r"""A learner variant against its board entry: the same protocol, compared on the same workloads.

A variant is a training run with ``algo.variant=<label>`` and some non-default setting, for
example MAPPO's input normalization::

    for a in mappo ippo srole; do for s in 0 1 2; do
      python train.py +benchmark=edge10 algo=$a algo.feature_norm=true algo.variant=fnorm \
          seed=$s output_dir=outputs/fnorm
    done; done
    python benchmarks/variant_study.py --runs outputs/fnorm --name feature_norm \
        --out benchmarks/results

Variants already collected into records (``--variant-results
leaderboards/studies/budget/<board>_<entry>.jsonl``) join the comparison, so a budget study
can plot earlier tiers whose run directories are gone.

Its records name the entry ``<algo>-<label>``. Each such entry is compared with the board's
``<algo>`` entry (same shield) from the committed records (``--results``): both trained by
the leaderboard protocol (``+benchmark=<board>``: the default budget, the board's held-out
seeds), so the comparison is the paired reduction of mean JCT over the evaluation seeds
(``studies.paired_reduction``; each entry's training runs resampled too),
which the spread between workloads does not blur. Variant runs stay out of the boards unless
collected into a board's results (leaderboards/README.md, *Variants*).

A variant may also be a longer budget (``experiment.total_env_steps=300000
algo.variant=b300k``). Where both entries recorded learning curves (``+benchmark=<board>``
does), a second table gives each one's budget (its curve's last step) and the change of its
held-out JCT over the second half of that budget, with the leaderboard's verdict
(``curves.Curve.verdict``): the evidence a board's benchmark budget is chosen from. A third
table sets a longer variant's curve beside its board entry's at the same steps (the last
quarter of the board entry's budget): a longer run stretches its schedules over its budget,
so whether it gains from more steps or only from where its schedule ends shows there. A
fourth table applies the leaderboard target's test (``coverage.md``: the learned 95% CI
wholly below the heuristic's) to each variant against the board's best heuristic, with the
paired reduction beside it.

``--results-rev REV`` reads the board records as git revision ``REV`` held them, to compare
a variant with a board entry that a later commit replaced (for example one trained at the
budget the variant uses, before the board was retrained at a longer one)::

    python benchmarks/variant_study.py \
        --variant-results leaderboards/studies/variants/edge50_tapfinger-own-b150k.jsonl \
        --results-rev e77e399 --name tapfinger_own_reward_edge50_b150k --out benchmarks/results
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _report import Report, cpu_name

from edgesched.experiment.io import atomic_write_bytes
from edgesched.leaderboard.build import compute_rows
from edgesched.leaderboard.curves import Curve, render_curves_png
from edgesched.leaderboard.records import RecordError, group_tables, load_records, load_records_at
from edgesched.leaderboard.studies import (
    ci_below,
    mean_on_seeds,
    paired_reduction,
    reduction_text,
)
from edgesched.leaderboard.table import Row, _ci, entry_name, varied_entry


def pairs(rows: list[Row], variants: set[tuple[str, str]]) -> list[tuple[Row, Row]]:
    """(board entry, variant) for every ``variants`` row whose base entry is on the board.

    Only pairs evaluated on the same seeds and episodes count: the comparison is paired.
    """
    by_key = {(r.algo, r.shield): r for r in rows}
    out = []
    for r in rows:
        if (r.algo, r.shield) not in variants or varied_entry(r.algo) is None:
            continue
        base = by_key.get((varied_entry(r.algo), r.shield))
        if base is not None and base.eval_seeds == r.eval_seeds and base.episodes == r.episodes:
            out.append((base, r))
    return out


def curve_groups(board: str, found: list[tuple[Row, Row]]) -> dict[str, list[Row]]:
    """Per board entry with variants, the rows to plot together: the entry, then its variants.

    Keys are file-name stems, ``<board>_<entry>``; only rows with a learning curve are kept,
    and a group needs two of them (a curve to compare with).
    """
    groups: dict[str, list[Row]] = {}
    for base, var in found:
        key = f"{board}_{entry_name(base.algo, base.shield)}".replace(" ", "").replace("/", "-")
        group = groups.setdefault(key, [base] if base.curve is not None else [])
        if var.curve is not None:
            group.append(var)
    return {k: g for k, g in groups.items() if len(g) >= 2}


def curve_cell(curve: Curve | None) -> str:
    """``150,000: -10.5% [-18.9%, -0.9%] still improving`` (budget, trend, verdict)."""
    if curve is None:
        return "no curve"
    return f"{curve.points[-1][0]:,}: {curve.trend_text} {curve.verdict}"


LAST_QUARTER = 0.75
"""Where a budget's last quarter starts, as a fraction of it (:func:`same_steps_cells`)."""


def window_mean(curve: Curve, low: float, high: int) -> float | None:
    """Mean held-out JCT of ``curve``'s points with ``low < env_steps <= high``."""
    values = [e.value for steps, e in curve.points if low < steps <= high]
    return float(np.mean(values)) if values else None


def same_steps_cells(base: Curve | None, var: Curve | None) -> str | None:
    """A longer variant's curve beside its board entry's at the same environment steps.

    Cells: the last quarter of the board entry's budget (env steps), the board entry's
    mean curve point there, the variant's over the same steps, and the variant's over the
    last quarter of its own budget. ``None`` unless both have a curve and the variant's
    budget is longer. A longer run is a new run: its schedules (the PPO learners' entropy
    coefficient, ``dqn_central``'s exploration) stretch over its budget, so at the board
    entry's budget it need not be where the board entry was.
    """
    if base is None or var is None:
        return None
    end, var_end = base.points[-1][0], var.points[-1][0]
    if var_end <= end:
        return None
    start = LAST_QUARTER * end
    means = (
        window_mean(base, start, end),
        window_mean(var, start, end),
        window_mean(var, LAST_QUARTER * var_end, var_end),
    )
    if any(m is None for m in means):
        return None
    return f"{round(start):,} to {end:,} | " + " | ".join(f"{m:.2f}" for m in means)


def ci_cell(row: Row) -> str:
    """``35.80 [35.02, 36.56]``: a row's mean JCT with its 95% CI (``[n/a]``: one run)."""
    return _ci(row.mean)


def heuristic_cells(var: Row, top: Row | None) -> str | None:
    """A variant against the board's best heuristic: the cells after the variant's name.

    The heuristic's mean JCT with its 95% CI; whether the variant's CI lies wholly below it
    (the leaderboard target's test, ``coverage.md``: disjoint CIs, the learned one lower);
    and the variant's reduction paired over the evaluation seeds, which removes the
    workload-to-workload spread that dominates a heuristic's own interval. ``None`` when the
    board has no heuristic.
    """
    if top is None:
        return None
    return (
        f"{ci_cell(var)} | {entry_name(top.algo, top.shield)} | {ci_cell(top)} | "
        f"{'yes' if ci_below(var, top) else 'no'} | {reduction_text(paired_reduction(var, top))}"
    )


def print_table(rep: Report, header: str, lines: list[str]) -> None:
    """A Markdown table (``header``: its ``| a | b |`` line) and a blank line after it."""
    rep.print(header)
    rep.print("|" + "---|" * header.count(" | ") + "---|")
    for line in lines:
        rep.print(line)
    rep.print()


def curve_reference(top: Row | None, group: list[Row]) -> dict[str, float]:
    """The board's best heuristic as a reference line for a plot of ``group``'s curves.

    Its mean JCT over the curves' evaluation seeds, not over all the board's: the curves
    are held-out JCT on those few seeds (the first ``experiment.curve_seeds``), which may be
    easier or harder than the rest. No line when the curves' seeds differ or the heuristic
    lacks one of them.
    """
    seeds = {r.curve.seeds for r in group if r.curve is not None}
    if top is None or len(seeds) != 1:
        return {}
    (curve_seeds,) = seeds
    value = mean_on_seeds(top, curve_seeds)
    if value is None:
        return {}
    return {f"best heuristic: {top.algo} (on the curve seeds)": value}


def main(argv: list[str] | None = None) -> None:
    """Compare every variant with its board entry; print (and write) the tables and plots."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", default=[], help="variant run or sweep directories")
    p.add_argument(
        "--variant-results",
        nargs="+",
        default=[],
        help="collected variant records (.jsonl) to compare as well, e.g. an earlier budget "
        "tier whose run directories are gone",
    )
    p.add_argument(
        "--results",
        nargs="+",
        default=["leaderboards/results"],
        help="the board records the variants are compared with (files or folders)",
    )
    p.add_argument(
        "--results-rev",
        default="",
        help="read --results as this git revision held them: compare with board entries "
        "that a later commit replaced (e.g. an entry since retrained at another budget)",
    )
    p.add_argument("--name", default="variant_study", help="results file name (no .md)")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    if not args.runs and not args.variant_results:
        p.error("give the variants: --runs (run directories) and/or --variant-results (records)")
    rep = Report(args.name, args.out)
    t0 = time.perf_counter()
    variants = load_records(args.variant_results, args.runs)
    # per board: a variant given for one board must not pair a variant of the same name that
    # another board's results hold (edge10's tapfinger-own given, edge50's on the board)
    ours = {(r.scenario_name, r.data["algo"], r.data["shield"]) for r in variants}
    # a variant already on a board (collected into its results) is read from the runs given,
    # not twice: its records on that board are left out. Only variants: a default entry
    # given again is still refused as a duplicate (it is what the variants are compared to)
    given = {
        (r.data["scenario"], r.data["algo"], r.data["shield"])
        for r in variants
        if varied_entry(str(r.data["algo"])) is not None
    }
    try:
        board_records = (
            load_records_at(args.results_rev, args.results)
            if args.results_rev
            else load_records(args.results)
        )
    except RecordError as exc:
        raise SystemExit(str(exc)) from None
    committed = [
        r
        for r in board_records
        if (r.data["scenario"], r.data["algo"], r.data["shield"]) not in given
    ]
    tables = group_tables(committed + variants)
    lines, curve_lines, same_lines, heuristic_lines = [], [], [], []
    # per plot: its rows and the board's best heuristic as a reference line
    plots: dict[str, tuple[list[Row], dict[str, float]]] = {}
    for board, recs in tables.items():
        rows = compute_rows(recs)
        found = pairs(rows, {(a, sh) for b, a, sh in ours if b == board})
        heuristics = [r for r in rows if not r.learned]
        top = min(heuristics, key=lambda r: r.mean.value) if heuristics else None
        for stem, group in curve_groups(board, found).items():
            plots[stem] = (group, curve_reference(top, group))
        for base, var in found:
            if base.curve is not None or var.curve is not None:
                curve_lines.append(
                    f"| {board} | {entry_name(base.algo, base.shield)} | {var.algo} | "
                    f"{curve_cell(base.curve)} | {curve_cell(var.curve)} |"
                )
            vs_heuristic = heuristic_cells(var, top)
            if vs_heuristic is not None:
                heuristic_lines.append(f"| {board} | {var.algo} | {vs_heuristic} |")
            same = same_steps_cells(base.curve, var.curve)
            if same is not None:
                same_lines.append(
                    f"| {board} | {entry_name(base.algo, base.shield)} | {var.algo} | {same} |"
                )
            lines.append(
                f"| {board} | {entry_name(base.algo, base.shield)} | {var.algo} | "
                f"{len(var.train_seeds)} vs {len(base.train_seeds)} | "
                f"{ci_cell(base)} | {ci_cell(var)} | "
                f"{reduction_text(paired_reduction(var, base))} | "
                f"{base.metrics['collisions_executed']:.1f} / "
                f"{var.metrics['collisions_executed']:.1f} |"
            )
    if not lines:
        raise SystemExit(
            f"no variant entry under {[*args.runs, *args.variant_results]} has its base entry "
            f"in {args.results}"
        )
    rep.print(
        f"Machine: {cpu_name()}. Each variant (records under "
        f"{' '.join([*args.runs, *args.variant_results])}) against its "
        "board entry: mean JCT over the held-out seeds with each entry's own 95% CI, and the "
        "variant's mean JCT relative to the board entry's, paired over the evaluation seeds "
        "(95% percentile bootstrap CI)."
    )
    rep.print()
    print_table(
        rep,
        "| board | board entry | variant | training seeds | board mean JCT [95% CI] | "
        "variant mean JCT [95% CI] | variant vs board, paired [95% CI] | "
        "executed collisions board / variant |",
        lines,
    )
    if curve_lines:
        rep.print(
            "Learning curves: each entry's budget (env steps of its last point) and the change "
            "of its held-out JCT over the second half of that budget (Theil-Sen line per run "
            "and curve seed, relative to the window's median; mean over training seeds, 95% "
            "stratified bootstrap CI), with the leaderboards' verdict."
        )
        rep.print()
        print_table(
            rep,
            "| board | board entry | variant | board: budget, trend | variant: budget, trend |",
            curve_lines,
        )
    if same_lines:
        rep.print(
            "The same steps: where a variant trains longer than its board entry, the mean of "
            "each curve's points (held-out JCT on the curve seeds, mean over training seeds) "
            "over the last quarter of the board entry's budget, and the variant's over the "
            "last quarter of its own. A longer run stretches every schedule over its budget "
            "(entropy coefficient, exploration), so at the board entry's budget it need not "
            "be where the board entry was."
        )
        rep.print()
        print_table(
            rep,
            "| board | board entry | variant | board entry's last quarter (env steps) | "
            "board entry there | variant there | variant, its own last quarter |",
            same_lines,
        )
    if heuristic_lines:
        rep.print(
            "Against the board's best heuristic (lowest mean JCT; its own 95% CI resamples the "
            "evaluation seeds, so it carries the spread between workloads): whether the "
            "variant's CI lies wholly below the heuristic's, the leaderboard target's test, "
            "and the variant's mean JCT relative to the heuristic's, paired over the "
            "evaluation seeds. Variants are not candidates for that target (coverage.md "
            "counts default entries only), whether or not a board shows them."
        )
        rep.print()
        print_table(
            rep,
            "| board | variant | variant mean JCT [95% CI] | best heuristic | "
            "heuristic mean JCT [95% CI] | CI below the heuristic's | "
            "variant vs heuristic, paired [95% CI] |",
            heuristic_lines,
        )
    if args.out and plots:
        # the curves side by side (the variants' budgets end further right)
        rep.print("Plots of each entry's curve with its variants':")
        for stem, (group, ref) in plots.items():
            png = render_curves_png(stem.replace("_", ": ", 1), group, ref)
            if png is not None:  # every group has curves (curve_groups)
                path = Path(args.out) / f"{args.name}_{stem}.png"
                atomic_write_bytes(path, png)
                rep.print(f"- {path.name}")
        rep.print()
    rep.print(f"{time.perf_counter() - t0:.0f} s.")
    rep.save()


if __name__ == "__main__":
    main()
