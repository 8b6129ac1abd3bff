r"""Policies trained under one set of scenario rules, evaluated under another.

``benchmarks/scenario_rules_study.py`` compares a learner trained *and* evaluated under a
scenario option with its counterpart under the registered rules: the difference mixes what
the option does to the episodes with what it does to training. This study separates the
two. Every learned record given is re-evaluated, from its committed policy, under the other
side's rules, so each pair of entries (trained under rules A, trained under rules B) has
all four cells of train rules x evaluation rules on the same workloads (evaluation seeds):

* evaluated under the same rules, B-trained against A-trained: what training under B
  changed in the policy (a policy that exploited a bias of A loses its edge under B);
* the same policies evaluated under B instead of A: what the rules change for a fixed
  policy, which heuristics given on both sides show for schedulers that never trained.

For example, the crash order on edge50 (``crash_order``: which job of a same-round overload
is the "newer" one that crashes; ``agent`` numbers one round's placements in agent order,
so the higher-numbered agent's job always loses, ``random`` draws the order)::

    python -m edgesched.leaderboard baselines --scenarios edge50 --seeds 10000..10009 \
        --override crash_order=random \
        --out leaderboards/studies/crash_order/edge50_baselines.jsonl
    for a in ippo mappo; do for s in 0 1 2; do
      python train.py +benchmark=edge50 algo=$a algo.variant=crashrandom \
          +env.overrides.crash_order=random seed=$s experiment.threads=1 \
          output_dir=outputs/crashorder
    done; done
    python -m edgesched.leaderboard collect --runs outputs/crashorder \
        --out leaderboards/studies/crash_order/edge50_learned.jsonl
    python benchmarks/rules_transfer.py \
        --a leaderboards/results/edge50_ippo.jsonl leaderboards/results/edge50_mappo.jsonl \
            leaderboards/results/baselines_edge_v1.jsonl \
            leaderboards/results/baselines_preemptive.jsonl \
        --b leaderboards/studies/crash_order/edge50_learned.jsonl \
            leaderboards/studies/crash_order/edge50_baselines.jsonl \
        --pair ippo-crashrandom=ippo mappo-crashrandom=mappo \
        --name crash_order_transfer_edge50 --out benchmarks/results

Comparisons are reductions of mean JCT paired over the evaluation seeds (95% percentile
bootstrap CI, ``studies.paired_reduction``) that resample the training runs too: the same
policies under the two rules draw their runs together, and a B-trained entry against an
A-trained one draws each side's runs on its own, so that comparison carries the spread
between training seeds (results files generated before that change held the runs fixed,
each learned cell averaged over its training seeds first).
"""

from __future__ import annotations

import argparse
import copy
import time
from pathlib import Path
from typing import Any

import numpy as np
from _report import Report, cpu_name
from scenario_rules_study import overrides_of, parse_pairs, rules_text
from variant_study import ci_cell

from edgesched.leaderboard.build import compute_rows
from edgesched.leaderboard.records import Record, group_tables, load_records
from edgesched.leaderboard.studies import paired_reduction, reduction_text
from edgesched.leaderboard.table import Row
from edgesched.leaderboard.validate import rerun_learned


def side(
    paths: list[str], what: str, scenario: str | None = None
) -> tuple[str, dict[str, Any], list[Record]]:
    """The one scenario, the shared overrides and the unshielded records of one side.

    Args:
        paths: record files or run directories.
        what: the option's name, for messages.
        scenario: keep only this scenario's records (a board's baselines file holds several).

    Raises:
        SystemExit: no records, several scenarios, or records under different overrides
            (``group_tables`` keeps a scenario's records under one set of overrides).
    """
    recs = [
        r
        for r in load_records(paths)
        if r.data["shield"] == "none" and scenario in (None, r.data["scenario"])
    ]
    if not recs:
        where = f" of {scenario}" if scenario else ""
        raise SystemExit(f"{what} {paths}: no unshielded records{where} found")
    tables = group_tables(recs)
    if len(tables) != 1:
        raise SystemExit(f"{what}: expected the records of one scenario, got {sorted(tables)}")
    ((_, group),) = tables.items()
    return group[0].data["scenario"], overrides_of(group), group


def evaluated_under(rec: Record, overrides: dict[str, Any], root: Path) -> Record:
    """``rec`` with its per-episode numbers from its policy evaluated under ``overrides``.

    The copy keeps the record's training fields (seed, budget, configuration), so rows
    built from it name the same entry; only the episodes and their rules change.
    """
    result = rerun_learned(rec, root, overrides)
    data = copy.deepcopy(rec.data)
    data.update(env_overrides=dict(overrides), **result)
    return Record(data, rec.source, rec.line)


def row_of(recs: list[Record], algo: str) -> Row:
    """The (unshielded) row of entry ``algo`` among ``recs``."""
    (row,) = compute_rows([x for x in recs if x.data["algo"] == algo])
    return row


def crashes_cell(row: Row) -> str:
    """Crashes per episode of ``row`` (``-`` where its scenario counts none)."""
    value = row.metrics.get("crashes", float("nan"))
    return "-" if np.isnan(value) else f"{value:.1f}"


def main(argv: list[str] | None = None) -> None:
    """Print (and write) the study's tables."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", nargs="+", required=True, help="records (files or run dirs), rules A")
    p.add_argument("--b", nargs="+", required=True, help="records (files or run dirs), rules B")
    p.add_argument(
        "--pair",
        nargs="+",
        required=True,
        help="<learned entry trained under B>=<learned entry trained under A>",
    )
    p.add_argument("--root", default=".", help="directory the records' policy paths are under")
    p.add_argument("--name", default="rules_transfer", help="results file name (no .md)")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    try:
        pairs = parse_pairs(args.pair, form="<entry under B>=<entry under A>")
    except ValueError as e:
        p.error(str(e))
    scen_b, rules_b, recs_b = side(args.b, "--b")
    scen_a, rules_a, recs_a = side(args.a, "--a", scen_b)
    if rules_a == rules_b:
        p.error(f"--a and --b are under the same rules ({rules_text(rules_a)})")
    learned_a = {r.data["algo"] for r in recs_a if r.learned}
    learned_b = {r.data["algo"] for r in recs_b if r.learned}
    for b_name, a_name in pairs.items():
        if b_name not in learned_b:
            p.error(f"--pair {b_name}: no learned records under B; have {sorted(learned_b)}")
        if a_name not in learned_a:
            p.error(f"--pair {a_name}: no learned records under A; have {sorted(learned_a)}")
    rep = Report(args.name, args.out)
    t0 = time.perf_counter()
    root = Path(args.root)
    ta, tb = rules_text(rules_a), rules_text(rules_b)
    rep.print(
        f"Machine: {cpu_name()}. Scenario {scen_a}; rules A: {ta}; rules B: {tb}. Mean JCT "
        "in slots with each entry's own 95% CI (learned: over training seeds); comparisons "
        "paired over the evaluation seeds (95% percentile bootstrap CI), a learned cell's "
        "training seeds averaged first, so a paired CI leaves out the spread between training "
        "seeds that each entry's own CI holds; crashes per episode."
    )
    rep.print()

    rep.print("Each policy under both rules (train rules x evaluation rules):")
    rep.print()
    rep.print(
        "| entry | trained under | evaluated under A | crashes | evaluated under B | crashes "
        "| under B vs under A, paired |"
    )
    rep.print("|---|---|---|---|---|---|---|")
    cells: dict[tuple[str, str], Row] = {}
    for b_name, a_name in pairs.items():
        for name, own, other_rules, trained in (
            (a_name, recs_a, rules_b, "A"),
            (b_name, recs_b, rules_a, "B"),
        ):
            mine = [r for r in own if r.data["algo"] == name]
            moved = [evaluated_under(r, other_rules, root) for r in mine]
            at_a, at_b = (mine, moved) if trained == "A" else (moved, mine)
            ra, rb = row_of(at_a, name), row_of(at_b, name)
            cells[name, "A"], cells[name, "B"] = ra, rb
            rep.print(
                f"| {name} | {trained} | {ci_cell(ra)} | {crashes_cell(ra)} | "
                f"{ci_cell(rb)} | {crashes_cell(rb)} | "
                # the same policies under two rules: their runs are drawn together
                f"{reduction_text(paired_reduction(rb, ra, same_runs=True))} |"
            )
    heur_a = {r.data["algo"] for r in recs_a if not r.learned}
    heur_b = {r.data["algo"] for r in recs_b if not r.learned}
    for name in sorted(heur_a & heur_b):
        ra, rb = row_of(recs_a, name), row_of(recs_b, name)
        rep.print(
            f"| {name} | (heuristic) | {ci_cell(ra)} | {crashes_cell(ra)} | "
            f"{ci_cell(rb)} | {crashes_cell(rb)} | "
            f"{reduction_text(paired_reduction(rb, ra))} |"
        )
    rep.print()

    rep.print(
        "Each training seed (mean JCT over the evaluation seeds): the spread a three-seed "
        "comparison of two trainings carries:"
    )
    rep.print()
    rep.print("| entry | trained under | training seed | evaluated under A | evaluated under B |")
    rep.print("|---|---|---|---|---|")
    for b_name, a_name in pairs.items():
        for name, trained in ((a_name, "A"), (b_name, "B")):
            ra, rb = cells[name, "A"], cells[name, "B"]
            by_seed_b = dict(zip(rb.train_seeds, rb.seed_scores, strict=True))
            for seed, scores in zip(ra.train_seeds, ra.seed_scores, strict=True):
                rep.print(
                    f"| {name} | {trained} | {seed} | {np.mean(scores):.2f} | "
                    f"{np.mean(by_seed_b[seed]):.2f} |"
                )
    rep.print()

    rep.print(
        "What training under B instead of A changes, evaluated under the same rules (B-trained "
        "vs A-trained, paired):"
    )
    rep.print()
    rep.print("| B-trained | A-trained | evaluated under A | evaluated under B |")
    rep.print("|---|---|---|---|")
    for b_name, a_name in pairs.items():
        under = [
            reduction_text(paired_reduction(cells[b_name, ev], cells[a_name, ev]))
            for ev in ("A", "B")
        ]
        rep.print(f"| {b_name} | {a_name} | {under[0]} | {under[1]} |")
    rep.print()
    rep.print(f"{time.perf_counter() - t0:.0f} s.")
    rep.save()


if __name__ == "__main__":
    main()
