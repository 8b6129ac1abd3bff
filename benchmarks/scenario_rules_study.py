r"""Learners and heuristics under a scenario's optional rules, against its registered rules.

A scenario option can change what the same workload asks of a scheduler (for example the
original TapFinger code's rules on ``tapfinger-hetero6``: pending slots that refill only
when the clock advances, a queued task charged to every agent that sees it, the contested
task going to the largest pointer x fit). Records made under such options carry them
(``env_overrides``) and form a table of their own: a learner trained under the rules is
compared with the heuristics evaluated under the same rules, and, entry by entry, with its
counterpart under the registered rules on the same workloads (evaluation seeds)::

    python -m edgesched.leaderboard baselines --scenarios tapfinger-hetero6 \
        --seeds 10000..10009 --override pending_refill=on_advance \
        waiting_charge=every_viewer conflict_rule=fit_argmax \
        --out leaderboards/studies/original_rules/tapfinger-hetero6_baselines.jsonl
    for s in 0 1 2; do
      python train.py +benchmark=tapfinger-hetero6 algo=tapfinger algo.team_reward=false \
          algo.variant=orig experiment.total_env_steps=150000 \
          +env.overrides.pending_refill=on_advance +env.overrides.waiting_charge=every_viewer \
          +env.overrides.conflict_rule=fit_argmax seed=$s output_dir=outputs/tforig
    done
    python -m edgesched.leaderboard collect \
        --runs outputs/tforig/runs/tapfinger-hetero6/tapfinger-orig_none \
        --out leaderboards/studies/original_rules/tapfinger-hetero6_tapfinger-orig.jsonl
    python benchmarks/scenario_rules_study.py \
        --rules leaderboards/studies/original_rules/tapfinger-hetero6_baselines.jsonl \
            leaderboards/studies/original_rules/tapfinger-hetero6_tapfinger-orig.jsonl \
        --reference leaderboards/results \
            leaderboards/studies/budget/tapfinger-hetero6_tapfinger-noclip-b150k.jsonl \
        --pair tapfinger-orig=tapfinger-noclip-b150k \
        --name original_rules_tfh6 --out benchmarks/results

``--versus a=b`` compares two entries under the same rules (a learner setting or a longer
budget, e.g. ``tapfinger-orig-b600k=tapfinger-orig-b300k``). A table of single runs (one
training seed on one workload, against the best baseline's mean on that workload) gives
the spread a one-workload figure such as the original code's can take.

Every comparison is the reduction of mean JCT paired over the evaluation seeds (95%
percentile bootstrap CI, ``studies.paired_reduction``). A pair across the two tables
compares two systems on the same workloads under different rules: it says what the rules
change for that scheduler, not which scheduler is better.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _report import Report, cpu_name
from variant_study import ci_cell

from edgesched.leaderboard.build import compute_rows, merge_identical
from edgesched.leaderboard.records import group_tables, load_records
from edgesched.leaderboard.studies import (
    TAPFINGER_PAPER_REDUCTION,
    TAPFINGER_TARGET_BASELINES,
    TAPFINGER_TARGET_JCT,
    paired_reduction,
    reduction_text,
)
from edgesched.leaderboard.table import Row


def parse_pairs(
    items: list[str],
    flag: str = "--pair",
    form: str = "<entry under the rules>=<reference entry>, e.g. tapfinger-orig=tapfinger-b150k",
) -> dict[str, str]:
    """``["a=b", ...]`` as ``{a: b}``.

    For ``--pair``, the rules table's entry ``a`` against reference ``b``; for ``--versus``,
    two entries under the rules.

    Raises:
        ValueError: an item without exactly one ``=`` or with an empty side; the message
            names ``flag``, the item and ``form``.
    """
    out = {}
    for item in items:
        parts = item.split("=")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"{flag} {item!r}: expected {form}")
        out[parts[0]] = parts[1]
    return out


def one_table(records: list, what: str) -> tuple[str, list[Row]]:
    """The only table (scenario, rows) among ``records``.

    Raises:
        SystemExit: none or several scenarios (the study compares one scenario's rules).
    """
    tables = group_tables(records)
    if len(tables) != 1:
        raise SystemExit(f"{what}: expected the records of one scenario, got {sorted(tables)}")
    ((name, recs),) = tables.items()
    return name, compute_rows(recs)


def overrides_of(records: list) -> dict:
    """The scenario overrides the records share (``group_tables`` checked they agree)."""
    return dict(records[0].data.get("env_overrides") or {})


def rules_text(overrides: dict) -> str:
    """``pending_refill=on_advance, ...`` (``registered rules`` for none)."""
    return ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())) or "registered rules"


def kind_cell(row: Row) -> str:
    """``learned, 3 training seeds`` (``1 training seed``) or ``heuristic``."""
    if not row.learned:
        return "heuristic"
    n = len(row.train_seeds)
    return f"learned, {n} training seed{'' if n == 1 else 's'}"


def target_text(learned: Row, best: Row) -> str:
    """Whether ``learned`` is at least issue #22's TapFinger target below ``best``.

    The test of ``leaderboards/tapfinger.md`` (``TAPFINGER_TARGET_JCT``): met when the
    reduction's point estimate reaches it; the paired CI is given beside it.
    """
    e = paired_reduction(learned, best)
    if e is None:
        return f"{learned.algo} vs {best.algo}: not comparable (different evaluation seeds)"
    verdict = "met" if e.value >= TAPFINGER_TARGET_JCT else "missed"
    return (
        f"{learned.algo} vs {best.algo}: {reduction_text(e)}; target (at least "
        f"{TAPFINGER_TARGET_JCT:.0%} lower): {verdict}"
    )


def single_workload_reductions(learned: Row, best: Row) -> np.ndarray:
    """(T, S) reduction of ``learned``'s mean JCT below ``best``'s, per single run.

    A single run is one training seed on one evaluation seed (workload), against ``best``'s
    mean on that workload. The original TapFinger code reports one workload (its
    evaluation script plays one seeded episode) with one trained policy, so this is the
    spread such a figure can take here.

    Raises:
        ValueError: the rows were evaluated on different seeds.
    """
    if learned.eval_seeds != best.eval_seeds:
        raise ValueError(
            f"{learned.algo} and {best.algo} were evaluated on different seeds: "
            f"{learned.eval_seeds} vs {best.eval_seeds}"
        )
    ref = np.asarray(best.seed_scores, np.float64).mean(axis=0)
    return 1.0 - np.asarray(learned.seed_scores, np.float64) / ref[None, :]


def single_workload_line(learned: Row, best: Row) -> str:
    """One table row: the spread of :func:`single_workload_reductions`.

    With the number of single runs at issue #22's target and at the paper's reduction.
    """
    red = single_workload_reductions(learned, best).ravel()
    n = red.size

    def share(x: float) -> str:
        return f"{int((red >= x - 1e-12).sum())} of {n}"

    return (
        f"| {learned.algo} | {n} | {red.min():.1%} | {np.median(red):.1%} | {red.max():.1%} "
        f"| {share(TAPFINGER_TARGET_JCT)} | {share(TAPFINGER_PAPER_REDUCTION)} |"
    )


def main(argv: list[str] | None = None) -> None:
    """Print (and write) the study's tables."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--rules", nargs="+", required=True, help="records (files or run dirs) under the rules"
    )
    p.add_argument(
        "--reference",
        nargs="+",
        default=["leaderboards/results"],
        help="records under the registered rules (the board, study files)",
    )
    p.add_argument(
        "--pair",
        nargs="*",
        default=[],
        help="<entry under the rules>=<reference entry> for entries whose names differ "
        "(others are paired by name)",
    )
    p.add_argument(
        "--versus",
        nargs="*",
        default=[],
        help="<entry>=<other entry>, both under the rules: a change of learner or budget "
        "measured under the same rules, paired",
    )
    p.add_argument(
        "--baselines",
        nargs="+",
        default=list(TAPFINGER_TARGET_BASELINES),
        help="heuristics each learned entry under the rules is compared with",
    )
    p.add_argument("--name", default="scenario_rules_study", help="results file name (no .md)")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    try:
        pairs = parse_pairs(args.pair)
        versus = parse_pairs(
            args.versus, "--versus", "<entry>=<other entry>, e.g. tapfinger-orig-g1=tapfinger-orig"
        )
    except ValueError as e:
        p.error(str(e))
    rep = Report(args.name, args.out)
    t0 = time.perf_counter()

    rule_recs = load_records(args.rules)
    if not rule_recs:
        p.error(f"--rules {args.rules}: no records found")
    overrides = overrides_of(rule_recs)
    if not overrides:
        p.error("--rules: these records carry no scenario overrides; nothing to compare")
    scenario, rows = one_table(rule_recs, "--rules")
    all_ref = group_tables(load_records(args.reference))
    if scenario not in all_ref:
        p.error(f"--reference {args.reference}: no records of {scenario!r}")
    ref_all = compute_rows(all_ref[scenario])
    ref_rows = {r.algo: r for r in ref_all if r.shield == "none"}
    # as on the boards, heuristics with identical records on every episode are one row
    ref_label = {
        name: r.label
        for r in merge_identical(ref_all)
        if r.shield == "none"
        for name in (r.algo, *r.aliases)
    }
    by_name = {r.algo: r for r in rows if r.shield == "none"}
    rows = merge_identical(rows)
    missing = [b for b in args.baselines if b not in by_name]
    if missing:
        p.error(f"--baselines {missing}: not among the records under the rules")
    unpaired = [a for a in pairs if a not in by_name]
    if unpaired:
        p.error(f"--pair names {unpaired}, not among the records under the rules")
    unknown = [n for kv in versus.items() for n in kv if n not in by_name]
    if unknown:
        p.error(f"--versus names {unknown}, not among the records under the rules")
    absent = [b for b in pairs.values() if b not in ref_rows]
    if absent:
        p.error(f"--pair names {absent}, not among the reference records of {scenario!r}")

    rule_text = rules_text(overrides)
    rep.print(
        f"Machine: {cpu_name()}. Scenario {scenario} under {rule_text}; evaluation seeds "
        f"{rows[0].eval_seeds[0]}..{rows[0].eval_seeds[-1]} ({len(rows[0].eval_seeds)}). Mean "
        "JCT in slots with each entry's own 95% CI; comparisons paired over the evaluation "
        "seeds (95% percentile bootstrap CI)."
    )
    rep.print()
    rep.print("Under the rules:")
    rep.print()
    rep.print("| entry | kind | mean JCT [95% CI] | learning curve: budget, second half |")
    rep.print("|---|---|---|---|")
    for r in rows:
        curve = (
            f"{r.curve.points[-1][0]:,}: {r.curve.trend_text} {r.curve.verdict}"
            if r.curve is not None
            else "-"
        )
        rep.print(f"| {r.label} | {kind_cell(r)} | {ci_cell(r)} | {curve} |")
    rep.print()

    learned = [r for r in rows if r.learned]
    if learned:
        best = min((by_name[b] for b in args.baselines), key=lambda r: r.mean.value)
        rep.print(
            f"Each learned entry against {', '.join(args.baselines)} under the same rules "
            f"(best of them: {best.algo}, {best.mean.value:.2f}):"
        )
        rep.print()
        rep.print(
            "| learned entry | heuristic | heuristic mean JCT | learned vs heuristic, paired |"
        )
        rep.print("|---|---|---|---|")
        for r in learned:
            for b in args.baselines:
                h = by_name[b]
                red = reduction_text(paired_reduction(r, h))
                rep.print(f"| {r.algo} | {b} | {h.mean.value:.2f} | {red} |")
        rep.print()
        for r in learned:
            rep.print(f"- {target_text(r, best)}")
        rep.print()
        rep.print(
            f"Single runs (one training seed on one workload) against {best.algo}'s mean on "
            "that workload, as the original code reports (one seeded episode, one policy); "
            "positive is lower JCT:"
        )
        rep.print()
        rep.print(
            "| learned entry | single runs | lowest reduction | median | highest | at least "
            f"{TAPFINGER_TARGET_JCT:.0%} lower | at least {TAPFINGER_PAPER_REDUCTION:.0%} lower "
            "(paper) |"
        )
        rep.print("|---|---|---|---|---|---|---|")
        for r in learned:
            rep.print(single_workload_line(r, best))
        rep.print()

    if versus:
        rep.print("Under the rules, entry against entry on the same workloads:")
        rep.print()
        rep.print("| entry | mean JCT [95% CI] | against | its mean JCT | entry vs it, paired |")
        rep.print("|---|---|---|---|---|")
        for a, b in versus.items():
            ra, rb = by_name[a], by_name[b]
            rep.print(
                f"| {a} | {ci_cell(ra)} | {b} | {ci_cell(rb)} | "
                f"{reduction_text(paired_reduction(ra, rb))} |"
            )
        rep.print()

    lines = []
    for r in rows:
        if r.shield != "none":
            continue
        ref = ref_rows.get(pairs.get(r.algo, r.algo))
        if ref is None:
            continue
        lines.append(
            f"| {r.label} | {ref_label[ref.algo]} | {ci_cell(ref)} | {ci_cell(r)} | "
            f"{reduction_text(paired_reduction(r, ref))} |"
        )
    if lines:
        rep.print(
            "What the rules change, scheduler by scheduler, on the same workloads (reference: "
            "the registered rules):"
        )
        rep.print()
        rep.print(
            "| entry under the rules | reference entry | reference mean JCT | under the rules "
            "| under the rules vs reference, paired |"
        )
        rep.print("|---|---|---|---|---|")
        for line in lines:
            rep.print(line)
        rep.print()
    rep.print(f"{time.perf_counter() - t0:.0f} s.")
    rep.save()


if __name__ == "__main__":
    main()
