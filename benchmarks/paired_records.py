r"""One set of records against another, paired over the evaluation seeds, whatever their names.

``variant_study.py`` pairs a variant ``<algo>-<label>`` with its board entry ``<algo>``;
``retrain_study.py`` an entry with its own records at an earlier revision. Two runs of the
same variant at two budgets (both named ``tapfinger-own``, say, one kept in a study folder)
fit neither, since one table cannot hold one entry at two budgets. This script loads each
side on its own and compares them entry by entry: for every board, each side must hold
exactly one entry (name and shield) there, evaluated on the same seeds and episodes::

    python benchmarks/paired_records.py \
        --a leaderboards/results/edge50_tapfinger-own.jsonl \
        --b leaderboards/studies/variants/edge50_tapfinger-own-b150k.jsonl \
        --name tapfinger_own_reward_edge50_budget --out benchmarks/results

The comparison is the reduction of ``a``'s mean JCT relative to ``b``'s, paired over the
evaluation seeds, each side's training runs resampled too (95% percentile bootstrap CI,
``studies.paired_reduction``), with each side's budget and its learning curve's trend over
the second half of its budget. A side may name a file as it stood at a commit,
``REV:path`` (``records.load_records_at``), so that records a board has since replaced (an
entry retrained at a longer budget) can still be compared::

    python benchmarks/paired_records.py \
        --a leaderboards/studies/budget/edge50_dqn_central-b300k.jsonl \
        --b a05ef26:leaderboards/results/edge50_dqn_central.jsonl --name N --out DIR
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

from _report import Report, cpu_name
from retrain_study import budget_cell
from variant_study import ci_cell, curve_cell, print_table

from edgesched.leaderboard.build import compute_rows
from edgesched.leaderboard.records import (
    RecordError,
    group_tables,
    load_records,
    load_records_at,
)
from edgesched.leaderboard.studies import paired_reduction, reduction_text
from edgesched.leaderboard.table import Row, entry_name

_AT_REV = re.compile(r"^([0-9A-Fa-f]{7,40}):(.+)$")
ROOT = Path(__file__).resolve().parents[1]


def _load(paths: list[str]) -> list:
    """The records of ``paths``, a ``REV:path`` read at commit ``REV`` of this checkout.

    (:func:`~edgesched.leaderboard.records.load_records_at`: a file or a folder.)
    """
    plain, records = [], []
    for path in paths:
        m = _AT_REV.match(path)
        if m is None or Path(path).exists():
            plain.append(path)
        else:
            records += load_records_at(m.group(1), [m.group(2)], ROOT)
    return (load_records(plain) if plain else []) + records


def one_entry_per_board(paths: list[str], side: str) -> dict[str, Row]:
    """Per board, the one entry the records of ``paths`` hold there.

    Raises:
        SystemExit: a board with more than one entry (naming them), or no records.
    """
    try:
        tables = group_tables(_load(paths))
    except RecordError as exc:
        raise SystemExit(f"--{side}: {exc}") from None
    out = {}
    for board, recs in tables.items():
        rows = compute_rows(recs)
        if len(rows) != 1:
            names = ", ".join(sorted(entry_name(r.algo, r.shield) for r in rows))
            raise SystemExit(
                f"--{side}: board {board!r} holds {len(rows)} entries ({names}); give the "
                "records of one entry per board"
            )
        out[board] = rows[0]
    return out


def main(argv: list[str] | None = None) -> None:
    """Compare the two sides board by board; print (and write) the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", nargs="+", required=True, help="records (files, folders) of side a")
    p.add_argument("--b", nargs="+", required=True, help="records of side b, compared with")
    p.add_argument("--name", default="paired_records", help="results file name (no .md)")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    side_a = one_entry_per_board(args.a, "a")
    side_b = one_entry_per_board(args.b, "b")
    lines, skipped = [], []
    for board in sorted(side_a.keys() & side_b.keys()):
        a, b = side_a[board], side_b[board]
        red = paired_reduction(a, b)
        if red is None:
            skipped.append(board)
            continue
        lines.append(
            f"| {board} | {entry_name(a.algo, a.shield)} | {budget_cell(a)} | "
            f"{entry_name(b.algo, b.shield)} | {budget_cell(b)} | "
            f"{len(a.train_seeds)} vs {len(b.train_seeds)} | {ci_cell(a)} | {ci_cell(b)} | "
            f"{reduction_text(red)} | {curve_cell(a.curve)} | {curve_cell(b.curve)} |"
        )
    if not lines:
        raise SystemExit(
            "no board where both sides hold an entry evaluated on the same seeds and episodes"
            + (f" (other seeds: {', '.join(skipped)})" if skipped else "")
        )
    rep = Report(args.name, args.out)
    rep.print(
        f"Machine: {cpu_name()}. Records of {' '.join(args.a)} (a) against those of "
        f"{' '.join(args.b)} (b): each entry's budget, mean JCT over the held-out seeds with "
        "its own 95% CI, a's mean JCT relative to b's paired over the evaluation seeds, each "
        "side's training runs resampled too (95% percentile bootstrap CI), and each learning "
        "curve's trend over the second half of its budget (Theil-Sen, with the leaderboards' "
        "verdict)."
    )
    rep.print()
    print_table(
        rep,
        "| board | a | a's budget | b | b's budget | training seeds | a's mean JCT [95% CI] | "
        "b's mean JCT [95% CI] | a vs b, paired [95% CI] | a's curve: budget, trend | "
        "b's curve: budget, trend |",
        lines,
    )
    rep.print(f"{time.perf_counter() - t0:.0f} s.")
    rep.save()


if __name__ == "__main__":
    main()
