r"""SROLE trained with its shield three ways, evaluated with the shield on and off (issue 22).

The variants (``algo.shield_training`` / ``algo.penalize``, see ``SROLEConfig``):

* ``col``: post-posed, every agent whose proposal collided pays ``collision_penalty`` (the
  v0 leaderboard form; ``algo.shield_training=postposed algo.penalize=collided``);
* ``chg``: post-posed, only agents whose action the shield changed pay
  (``algo.shield_training=postposed algo.penalize=changed``, the post-posed default now);
* ``pre``: preemptive, agents commit in a random order with masks that exclude what the
  earlier commitments took, so the central shield has nothing left to correct;
* ``chgw025``, ``chgw4``: ``chg`` with ``collision_penalty`` 0.25 and 4 instead of 1 (the
  penalty weight's sweep);
* ``prereg``, ``chgreg``: ``pre`` and ``chg`` with the regional shield (``shield=regional``:
  one shield per region, so preemptive masks exclude only the commitments of the agent's own
  region, and the post-posed correction is the regional protocol's).

The central variants train with ``shield=central`` (srole's default), the regional ones
with ``shield=regional``; each run is evaluated behind the shield it trained with.

Train them first (one output folder per variant, so runs of one second cannot share a
directory), e.g. for seeds 0, 1, 2::

    python train.py algo=srole env=edge50 seed=S algo.variant=pre \
        algo.shield_training=preemptive output_dir=outputs/srolestudy/pre \
        'experiment.eval_seeds=[10000,...,10009]'
    python train.py algo=srole env=edge50 shield=regional seed=S algo.variant=prereg \
        algo.shield_training=preemptive output_dir=outputs/srolestudy/prereg \
        'experiment.eval_seeds=[10000,...,10009]'

then ``python benchmarks/srole_shield_training.py --runs outputs/srolestudy --out
benchmarks/results``. Each trained policy (``policy.pt``) is evaluated on the runs' held-out
seeds behind its shield and without one; the table gives the mean over training seeds of
the mean JCT, the proposed and executed collisions per episode, with the per-seed values.

``--records FILE ...`` does the same for the leaderboards' records instead (one row per
file, its label the file's name), e.g. the boards' ``srole`` entries, whose pages show them
behind their shield only::

    python benchmarks/srole_shield_training.py --records \
        leaderboards/results/edge50_srole.jsonl leaderboards/results/edge50-highload_srole.jsonl \
        leaderboards/results/edge100_srole.jsonl --name srole_shield_off_boards \
        --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _report import Report, cpu_name

from edgesched.experiment.evaluation import evaluate_scheduler, load_policy
from edgesched.leaderboard.records import load_results


def runs_of(root: Path) -> dict[str, list[Path]]:
    """Variant label -> its finished run directories (those with ``eval.json``)."""
    out: dict[str, list[Path]] = {}
    for ev in sorted(root.glob("*/runs/*/*/seed*/*/eval.json")):
        variant = ev.relative_to(root).parts[0]
        out.setdefault(variant, []).append(ev.parent)
    return out


def records_of(files: list[Path]) -> dict[str, list[tuple[dict, Path]]]:
    """File name -> its records with their policy files (paths relative to the checkout)."""
    root = Path(__file__).resolve().parents[1]
    return {
        Path(f).stem: [(r.data, root / r.data["policy"]) for r in load_results([f])] for f in files
    }


def evaluate(run: Path) -> dict[str, dict[str, float]]:
    """The run's policy behind its shield and without one, on the run's held-out seeds."""
    return evaluate_policy(json.loads((run / "eval.json").read_text()), run / "policy.pt")


def evaluate_policy(record: dict, policy_file: Path) -> dict[str, dict[str, float]]:
    """A policy behind its shield and without one, on its record's held-out seeds.

    Args:
        record: the run's ``eval.json`` or a leaderboard record (scenario, seeds, episodes,
            training seed).
        policy_file: its ``policy.pt``.
    """
    policy, _, overrides = load_policy(str(policy_file), record["scenario"])
    seeds, eps = record["eval_seeds"], record["episodes_per_seed"]
    out = {}
    for label, shield in (("on", policy.shield), ("off", "none")):
        res = evaluate_scheduler(
            policy,
            record["scenario"],
            overrides,
            seeds,
            eps,
            shield=shield,
            shield_kwargs=policy.shield_kwargs if shield != "none" else None,
        )["summary"]
        out[label] = {
            k: float(res[k]) for k in ("jct_mean", "collisions_proposed", "collisions_executed")
        }
    out["train_seed"] = record["train_seed"]
    out["shield"] = policy.shield
    return out


def main() -> None:
    """Evaluate every variant's runs; print (and optionally write) the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default="outputs/srolestudy", help="folder of the variants' runs")
    p.add_argument(
        "--records", nargs="+", type=Path, default=[], help="leaderboard records instead of runs"
    )
    p.add_argument("--out", default="", help="directory for the results file")
    p.add_argument("--name", default="srole_shield_training", help="results file's name")
    args = p.parse_args()
    t0 = time.perf_counter()
    rows = []
    if args.records:
        found = records_of(args.records)
        for label, recs in sorted(found.items()):
            rows.append((label, [evaluate_policy(r, f) for r, f in recs]))
        scen = ", ".join(sorted({f"`{r['scenario']}`" for recs in found.values() for r, _ in recs}))
        what = "the leaderboard records named in column *variant*, at their training budgets"
    else:
        runs = runs_of(Path(args.runs))
        if not runs:
            p.error(f"--runs {args.runs}: no finished runs (*/runs/*/*/seed*/*/eval.json)")
        for variant, dirs in sorted(runs.items()):
            rows.append((variant, [evaluate(d) for d in dirs]))
        first = next(iter(runs.values()))[0] / "eval.json"
        scen = f"`{json.loads(first.read_text())['scenario']}`"
        what = "`srole` at the default budget, each variant"
    rep = Report(args.name, args.out)
    rep.print(
        f"Machine: {cpu_name()}. Scenario {scen}, {what} evaluated behind the shield it "
        "trained with (column *shield*) and without one; "
        f"{time.perf_counter() - t0:.0f} s to evaluate. Mean over training seeds (per-seed "
        "values in brackets) of each run's mean over its held-out seeds."
    )
    rep.print()
    rep.print(
        "| variant | shield | training seeds | shield on: mean JCT | on: collisions proposed / "
        "executed | shield off: mean JCT | off: collisions executed |"
    )
    rep.print("|---|---|---|---|---|---|---|")
    for variant, res in rows:

        def cell(side: str, key: str, res: list = res) -> str:
            vals = [r[side][key] for r in res]
            return f"{np.mean(vals):.2f} ({', '.join(f'{v:.2f}' for v in vals)})"

        seeds = ",".join(str(r["train_seed"]) for r in res)
        on_prop = np.mean([r["on"]["collisions_proposed"] for r in res])
        on_exec = np.mean([r["on"]["collisions_executed"] for r in res])
        shields = "/".join(sorted({r["shield"] for r in res}))
        rep.print(
            f"| {variant} | {shields} | {seeds} | {cell('on', 'jct_mean')} | "
            f"{on_prop:.1f} / {on_exec:.1f} | "
            f"{cell('off', 'jct_mean')} | {cell('off', 'collisions_executed')} |"
        )
    rep.save()


if __name__ == "__main__":
    main()
