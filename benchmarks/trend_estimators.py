"""Has each curve flattened? The boards' Theil-Sen trend against a least-squares one.

For every learned entry with a sample-efficiency curve in the committed records (the boards'
``leaderboards/results`` and the budget study's ``leaderboards/studies/budget``), prints the
change of held-out JCT over the second half of the budget under both line fits of
:func:`edgesched.leaderboard.curves.late_trend` (``theil-sen``, which the boards use, and
``least-squares`` with the window's mean as scale, which they used before) with each fit's
verdict, and marks the entries whose verdict differs.

Usage::

    python benchmarks/trend_estimators.py
    python benchmarks/trend_estimators.py --out benchmarks/results   # + trend_estimators.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _report import Report

from edgesched.leaderboard.curves import curve_series, late_trend, trend_text, trend_verdict
from edgesched.leaderboard.records import load_records

FOLDERS = ("leaderboards/results", "leaderboards/studies/budget")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=".", help="the repository (default: here)")
    p.add_argument("--name", default="trend_estimators", help="results file name (no .md)")
    p.add_argument("--out", default="")
    args = p.parse_args()
    t0 = time.perf_counter()
    root = Path(args.root)
    rep = Report(args.name, args.out)
    groups: dict[tuple[str, str, str], list] = {}
    for rec in load_records([root / f for f in FOLDERS], []):
        if rec.learned:
            key = (rec.data["scenario"], rec.data["algo"], rec.data["shield"])
            groups.setdefault(key, []).append(rec)
    lines, changed = [], 0
    for (scenario, algo, shield), recs in sorted(groups.items()):
        series = curve_series(sorted(recs, key=lambda r: r.data["train_seed"]))
        if series is None:
            continue
        steps, jct = series
        trends = [late_trend(steps, jct, fit=fit) for fit in ("theil-sen", "least-squares")]
        cells = [(trend_text(t), trend_verdict(t)) for t in trends]
        differs = cells[0][1] != cells[1][1]
        changed += differs
        lines.append(
            f"| {scenario} | {algo} | {shield} | {len(recs)} | {steps[-1]:,} | "
            f"{cells[0][0]} | {cells[0][1]} | {cells[1][0]} | {cells[1][1]} | "
            f"{'yes' if differs else ''} |"
        )
    rep.print(
        "Change of held-out JCT over the second half of each learned entry's budget, mean over "
        "training seeds with a 95% stratified bootstrap CI, under the boards' Theil-Sen fit "
        "(relative to the window's median) and a least-squares fit (relative to the window's "
        "mean), with each fit's verdict (still improving: the whole CI below zero and the "
        "change beyond 2%)."
    )
    rep.print()
    rep.print(
        "| scenario | entry | shield | training seeds | budget | Theil-Sen [95% CI] | verdict "
        "| least squares [95% CI] | verdict | verdicts differ |"
    )
    rep.print("|---|---|---|---|---|---|---|---|---|---|")
    for line in lines:
        rep.print(line)
    rep.print()
    rep.print(
        f"{changed} of {len(lines)} entries change verdict. {time.perf_counter() - t0:.0f} s."
    )
    rep.save()


if __name__ == "__main__":
    main()
