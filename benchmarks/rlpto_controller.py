r"""What trained RLPTO controllers decide, and whether they use the forecast and the queues.

For every finished RLPTO run under ``--runs`` (folders with ``policy.pt`` and ``eval.json``),
the controller is rolled out greedily on the first ``--seeds`` held-out seeds of its record
(:func:`edgesched.algos.rlpto.diagnostics.controller_diagnostics`) and the run's held-out
figures are read from its record. One row per run, labelled by the first folder below
``--runs`` (a variant) and the training seed. ``--results`` reads committed records instead
(a board's or a study's ``.jsonl``), each rolled out from the policy its record names, so a
board entry can be analysed without its run folders; those rows are labelled
``<algo>_<shield>``::

    python train.py algo=rlpto env=edge10 seed=S output_dir=outputs/rlptostudy/<variant> ...
    python benchmarks/rlpto_controller.py --runs outputs/rlptostudy --out benchmarks/results
    python benchmarks/rlpto_controller.py --runs outputs/hl/runs/edge50-highload \
        --out benchmarks/results --name rlpto_controller_edge50-highload   # a board's runs
    python benchmarks/rlpto_controller.py \
        --results leaderboards/results/edge50-highload_rlpto.jsonl --out benchmarks/results

Columns: ``dec/call`` the share of controller calls that were decisions (two or more
feasible actions); ``grow`` / ``keep`` / ``shrink`` the greedy choice on decisions;
``always-grow`` how often that choice equals "grow whenever feasible"; ``H`` the policy's
entropy on decisions (nats); ``fc`` / ``queue`` the share of decisions whose choice flips when
only the forecast input moves from 0 to 2, or only the queue inputs from empty to one job per
agent and class (0: the input is ignored); then the record's held-out mean JCT and RLPTO's
cluster reward (higher is better). With ``--rules``, fixed controllers in the learned one's
place (``RuleController``: grow whenever feasible, never grow, grow only when no job is
queued) are evaluated on held-out seeds 10000.. (``--rule-seeds``, 10) of each scenario, as
reference points, with the default reward weights; a run's JCT and reward are on its own
record's held-out seeds, the reward with the run's own weights.
With ``--signal S ...``, a freshly initialized controller's rollouts on scenario ``S`` give
the mean advantage PPO assigns to grow and to keep where both were feasible, with the
standard error of the difference (is there a learning signal to follow?), under team and
under per-job credit (``algo.credit``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _report import Report, cpu_name, replay_on_one_thread

from edgesched.algos import algo_config, make_trainer
from edgesched.algos.rlpto.diagnostics import (
    RuleController,
    advantage_by_choice,
    controller_diagnostics,
    evaluate_rule,
)
from edgesched.envs.handle import resolve_scenario
from edgesched.experiment.evaluation import load_policy
from edgesched.leaderboard.records import load_results


def main() -> None:
    replay_on_one_thread()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="", help="folder holding RLPTO run folders")
    parser.add_argument(
        "--results",
        nargs="+",
        default=[],
        help="committed records (.jsonl) of RLPTO entries, rolled out from the policies they name",
    )
    parser.add_argument("--seeds", type=int, default=2, help="held-out seeds rolled out per run")
    parser.add_argument(
        "--rules",
        action="store_true",
        help="also evaluate the fixed rules grow / keep / grow_if_idle on each scenario",
    )
    parser.add_argument(
        "--rule-seeds", type=int, default=10, help="held-out seeds 10000.. of the rules"
    )
    parser.add_argument(
        "--signal",
        nargs="*",
        default=[],
        metavar="SCENARIO",
        help="for a freshly initialized controller on these scenarios, the mean advantage of "
        "grow and of keep where both were feasible (8 rollouts of 4 copies x 128 slots)",
    )
    parser.add_argument("--out", default="", help="directory for <name>.md")
    parser.add_argument(
        "--name",
        default="rlpto_controller",
        help="results file name without .md (one per set of runs, e.g. one per board)",
    )
    args = parser.parse_args()
    root = Path(args.runs)
    report = Report(args.name, args.out)
    sources = [f"runs under {root.as_posix()}"] if args.runs else []
    sources += [f"records in {f}" for f in args.results]
    report.print(f"machine: {cpu_name()}; {', '.join(sources) or 'no trained controllers'}")
    report.print(
        f"{'run':<28}{'dec/call':>9}{'grow':>7}{'keep':>7}{'shrink':>8}{'always-grow':>13}"
        f"{'H':>7}{'fc':>7}{'queue':>7}{'JCT':>8}{'reward':>9}"
    )
    # (source, record, its policy file, row label): run folders first, then committed records
    controllers: list[tuple[str, dict, str, str]] = []
    if args.runs:
        for ev in sorted(p for p in root.rglob("eval.json") if (p.parent / "policy.pt").exists()):
            record = json.loads(ev.read_text())
            folder = ev.relative_to(root).parts[0]
            controllers.append(("runs", record, str(ev.parent / "policy.pt"), folder))
    for rec in load_results(args.results):
        label = f"{rec.data['algo']}_{rec.data['shield']}"
        controllers.append(("results", rec.data, rec.data.get("policy") or "", label))
    rules_done: set[str] = set()
    found = {"runs": 0, "results": 0}
    for source, record, policy_file, row in controllers:
        # a variant run (algo.variant=<label>) is recorded as rlpto-<label>
        if record["algo"] != "rlpto" and not record["algo"].startswith("rlpto-"):
            continue
        if not policy_file or not Path(policy_file).exists():
            raise SystemExit(
                f"--results: the record of {record['algo']} seed {record['train_seed']} names "
                f"policy {policy_file!r}, which is not there (run from the repository root)"
            )
        found[source] += 1
        policy, env_name, overrides = load_policy(policy_file, record["scenario"])
        d = controller_diagnostics(policy, env_name, overrides, record["eval_seeds"][: args.seeds])
        label = f"{row} seed {record['train_seed']}"
        s = record["summary"]
        report.print(
            f"{label:<28}{d['decisions'] / max(d['calls'], 1):>9.3f}{d['grow']:>7.2f}"
            f"{d['keep']:>7.2f}{d['shrink']:>8.2f}{d['always_grow']:>13.2f}{d['entropy']:>7.3f}"
            f"{d['forecast_sensitivity']:>7.3f}{d['queue_sensitivity']:>7.3f}"
            f"{s['jct_mean']:>8.2f}{s['rlpto_reward']:>9.1f}"
        )
        if args.rules and record["scenario"] not in rules_done:
            # the fixed rules on the same held-out seeds, with the same placement and rule
            # shrinks (reference points for the learned controllers of this scenario)
            rules_done.add(record["scenario"])
            for rule in RuleController.RULES:
                seeds = list(range(10_000, 10_000 + args.rule_seeds))
                # a fresh trainer: the default reward weights, whatever the run's were
                fresh = make_trainer(
                    "rlpto", algo_config("rlpto"), resolve_scenario(env_name).spec, seed=0
                )
                r = evaluate_rule(fresh, rule, env_name, overrides, seeds)
                name = f"rule {rule} ({record['scenario']})"
                report.print(f"{name:<28}{'':>74}{r['jct_mean']:>8.2f}{r['rlpto_reward']:>9.1f}")
    if args.runs and not found["runs"]:
        raise SystemExit(
            f"--runs {root.as_posix()}: no finished RLPTO run under it (a folder with "
            "policy.pt and an eval.json whose algo is rlpto or rlpto-<variant>); nothing written"
        )
    if args.results and not found["results"]:
        raise SystemExit(
            f"--results {' '.join(args.results)}: no record of rlpto or rlpto-<variant> in "
            "them; nothing written"
        )
    for name in args.signal:
        spec = resolve_scenario(name).spec
        for credit in ("team", "job"):
            trainer = make_trainer("rlpto", algo_config("rlpto", credit=credit), spec, seed=0)
            a = advantage_by_choice(trainer, name, batches=8)
            report.print(
                f"signal at initialization, {name}, {credit} credit: advantage of grow "
                f"{a['adv_grow']:.3f} (n={a['n_grow']:.0f}), of keep {a['adv_keep']:.3f} "
                f"(n={a['n_keep']:.0f}); difference {a['adv_grow'] - a['adv_keep']:+.3f} "
                f"+- {a['se_diff']:.3f} (1 s.e.)"
            )
    report.save()


if __name__ == "__main__":
    main()
