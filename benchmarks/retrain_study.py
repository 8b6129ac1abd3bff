r"""Board entries retrained against the same entries at an earlier revision of the records.

When a board's entries are retrained (for example at a benchmark budget set from the budget
study, ``edgesched/experiment/budgets.py``), the committed records replace the old ones. This
script compares each retrained learned entry with its records at an earlier git revision,
on the same held-out workloads: the paired reduction of mean JCT over the evaluation seeds
(``studies.paired_reduction``), each entry's budget and the change of its held-out JCT over
the second half of that budget (its learning curve)::

    python benchmarks/retrain_study.py --rev 0818d97 --boards edge50 --name edge50_retrain \
        --out benchmarks/results

Entries whose records are unchanged since ``--rev`` are left out, as are entries evaluated
on other seeds (no paired comparison).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _report import Report, cpu_name
from variant_study import ci_cell, curve_cell, print_table

from edgesched.leaderboard.build import compute_rows
from edgesched.leaderboard.records import RecordError, group_tables, load_records, load_records_at
from edgesched.leaderboard.studies import paired_reduction, reduction_text
from edgesched.leaderboard.table import Row, entry_name

RESULTS = "leaderboards/results"


def retrained(before: list[Row], after: list[Row]) -> list[tuple[Row, Row]]:
    """``(before, after)`` for every learned entry whose records changed, evaluated alike."""
    old = {(r.algo, r.shield): r for r in before if r.learned}
    out = []
    for r in after:
        b = old.get((r.algo, r.shield))
        if b is None or not r.learned or b.fingerprint == r.fingerprint:
            continue
        if (b.eval_seeds, b.episodes) == (r.eval_seeds, r.episodes):
            out.append((b, r))
    return out


def budget_cell(row: Row) -> str:
    """``299,520 (585 updates)``, or ``-`` for records without a training budget."""
    if row.train_budget is None:
        return "-"
    steps, updates = row.train_budget
    return f"{steps:,} ({updates} updates)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rev", required=True, help="git revision holding the earlier records")
    p.add_argument("--boards", nargs="+", required=True, help="scenario names, e.g. edge50")
    p.add_argument("--root", default=".", help="the repository (default: here)")
    p.add_argument("--name", default="retrain_study", help="results file name (no .md)")
    p.add_argument("--out", default="")
    args = p.parse_args()
    root = Path(args.root)
    rep = Report(args.name, args.out)
    t0 = time.perf_counter()
    try:
        then = group_tables(load_records_at(args.rev, [RESULTS], root), superseded=True)
    except RecordError as exc:
        raise SystemExit(str(exc)) from None
    now = group_tables(load_records([root / RESULTS], []))
    lines, curve_lines = [], []
    for board in args.boards:
        if board not in now or board not in then:
            raise SystemExit(f"--boards: {board!r} has no records now or at {args.rev}")
        for b, a in retrained(compute_rows(then[board]), compute_rows(now[board])):
            name = entry_name(a.algo, a.shield)
            lines.append(
                f"| {board} | {name} | {budget_cell(b)} | {budget_cell(a)} | "
                f"{len(b.train_seeds)} / {len(a.train_seeds)} | "
                f"{ci_cell(b)} | {ci_cell(a)} | "
                f"{reduction_text(paired_reduction(a, b))} | "
                f"{b.metrics['collisions_executed']:.1f} / {a.metrics['collisions_executed']:.1f} |"
            )
            curve_lines.append(
                f"| {board} | {name} | {curve_cell(b.curve)} | {curve_cell(a.curve)} |"
            )
    if not lines:
        raise SystemExit(f"no learned entry of {args.boards} changed since {args.rev}")
    rep.print(
        f"Machine: {cpu_name()}. Learned entries whose records changed since {args.rev}: the "
        "entry then and now, mean JCT over the held-out seeds with its own 95% CI, and the "
        "change of the new records' mean JCT relative to the old, paired over the evaluation "
        "seeds (95% percentile bootstrap CI)."
    )
    rep.print()
    print_table(
        rep,
        "| board | entry | budget then | budget now | training seeds then / now | "
        "mean JCT then [95% CI] | mean JCT now [95% CI] | now vs then, paired [95% CI] | "
        "executed collisions then / now |",
        lines,
    )
    rep.print(
        "Learning curves: each entry's budget (env steps of its last point) and the change of "
        "its held-out JCT over the second half of that budget, with the leaderboards' verdict."
    )
    rep.print()
    print_table(rep, "| board | entry | then: budget, trend | now: budget, trend |", curve_lines)
    rep.print(f"{time.perf_counter() - t0:.0f} s.")
    rep.save()


if __name__ == "__main__":
    main()
