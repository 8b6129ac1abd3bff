r"""dqn_central's training variants side by side, from their runs' held-out records (issue 22).

Each ``--runs LABEL=DIR`` names a variant and a folder holding its finished runs (every
``eval.json`` below it with ``algo == "dqn_central"``). For each variant the table gives the
held-out mean JCT of every training seed, their mean, the worst seed, and the mean number
of jobs left unfinished (the signature of the collapse to passing over every job). The
study behind ``algo=dqn_central``'s options, on edge10-v1 and edge50-v1 with 3 training
seeds and the held-out seeds 10000..10009 (its ``*_shape1`` rows were trained with a queue
potential that did not move, a defect since fixed; ``--name dqn_central_shaping_fixed``
holds the shaping measured again, unmasked and work-conserving)::

    EV='experiment.eval_seeds=[10000,10001,10002,10003,10004,10005,10006,10007,10008,10009]'
    python train.py algo=dqn_central env=edge10 seed=S algo.discount_unit=slot \
        algo.queue_shaping=1 "$EV" output_dir=outputs/dqnstudy/slot_shape1
    python train.py algo=dqn_central env=edge10 seed=S algo.action_masking=true \
        algo.work_conserving=true "$EV" output_dir=outputs/dqnstudy/conserving
    ...
    python train.py algo=dqn_central env=edge10 seed=S algo.queue_shaping=1 "$EV" \
        output_dir=outputs/dqnstudy/conserving_shape1
    python benchmarks/dqn_central_study.py --runs decision=outputs/dqnstudy/decision \
        decision_shape1=outputs/dqnstudy/decision_shape1 \
        slot_shape1=outputs/dqnstudy/slot_shape1 ... --out benchmarks/results

A label may repeat (one folder per scenario); rows keep the order given.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import yaml
from _report import Report, cpu_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, metavar="LABEL=DIR")
    parser.add_argument("--out", default="", help="directory for the results file")
    parser.add_argument("--name", default="dqn_central_study", help="results file name")
    args = parser.parse_args()
    report = Report(args.name, args.out)
    report.print(f"machine: {cpu_name()}")
    report.print(
        f"{'variant':<18}{'discount':>10}{'shaping':>9}{'mask':>6}{'wc':>4}{'scenario':>12}"
        f"{'  mean JCT per training seed':<40}{'mean':>8}{'worst':>8}{'unfinished':>12}"
    )
    for item in args.runs:
        label, _, folder = item.partition("=")
        if not folder:
            parser.error(f"--runs {item!r}: use LABEL=DIR")
        records = []
        for ev in sorted(Path(folder).rglob("eval.json")):
            rec = json.loads(ev.read_text())
            if rec["algo"] == "dqn_central":
                # the run's resolved configuration (written by the runner beside eval.json)
                rec["algo_config"] = yaml.safe_load((ev.parent / "config.yaml").read_text())["algo"]
                records.append(rec)
        if not records:
            report.print(f"{label:<18} no dqn_central runs under {folder}")
            continue
        records.sort(key=lambda r: r["train_seed"])
        jct = np.array([r["summary"]["jct_mean"] for r in records])
        unfinished = np.mean([r["summary"]["jobs_unfinished"] for r in records])
        seeds = ", ".join(f"{r['train_seed']}: {j:.2f}" for r, j in zip(records, jct, strict=True))
        algo = records[0]["algo_config"]
        # runs from before the options existed lack the keys: they trained per decision,
        # without shaping (marked *)
        report.print(
            f"{label:<18}{algo.get('discount_unit', 'decision*'):>10}"
            f"{algo.get('queue_shaping', '0*')!s:>9}"
            f"{'yes' if algo.get('action_masking') else 'no':>6}"
            f"{'yes' if algo.get('work_conserving') else 'no':>4}{records[0]['scenario']:>12}  "
            f"{seeds:<38}{jct.mean():>8.2f}{jct.max():>8.2f}{unfinished:>12.1f}"
        )
    report.print("* key absent: trained before the option existed (per decision, no shaping)")
    report.print("mask: algo.action_masking; wc: algo.work_conserving (pass only if nothing fits)")
    report.save()


if __name__ == "__main__":
    main()
