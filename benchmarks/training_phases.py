r"""What a PPO run's own training log shows across phases of its budget.

For every run folder under ``--runs`` (a ``metrics.jsonl`` beside an ``eval.json`` or a
``config.yaml``), the updates are cut into windows of training progress (``--windows``,
fractions of the run's updates) and, per window, the log's means are printed: the JCT of
the training episodes that finished (on training workloads, under the sampling policy), the
policy's entropy, PPO's approximate KL per update and clip fraction, the entropy
coefficient at the window's end and, for a run with ``algo.target_kl``, the epochs an update
ran before the KL stopped it. Read beside the held-out curve: a late rise of held-out
JCT with training JCT still falling points to overfitting the training workloads; both
rising, with the update's KL growing as entropy falls, to instability::

    python benchmarks/training_phases.py --runs outputs/tforig12 \
        --out benchmarks/results --name training_phases_tfh6_orig1200k
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report  # benchmarks/ is a folder of scripts, not a package

KEYS = ("train_jct_mean", "entropy", "approx_kl", "clip_frac", "ppo_epochs")
"""Logged means per window; ``ppo_epochs`` (epochs an update ran) only with ``algo.target_kl``."""


def read_log(path: Path) -> list[dict]:
    """The rows of one ``metrics.jsonl`` (a torn last line, from a killed run, is dropped)."""
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def phases(rows: list[dict], windows: list[float]) -> list[dict[str, float]]:
    """Per window ``[windows[i], windows[i+1])`` of the updates, the means of :data:`KEYS`.

    A key logged as ``null`` (no training episode finished in that update) or missing is
    left out of its mean; a window with no value of a key gets NaN.
    """
    n = len(rows)
    out = []
    for lo, hi in itertools.pairwise(windows):
        sel = rows[round(lo * n) : round(hi * n)]
        row: dict[str, float] = {"from": lo, "to": hi, "updates": float(len(sel))}
        for k in KEYS:
            vals = [r[k] for r in sel if r.get(k) is not None]
            row[k] = float(np.mean(vals)) if vals else float("nan")
        row["ent_coef"] = float(sel[-1].get("ent_coef", np.nan)) if sel else float("nan")
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> None:
    """Print one table per run (and with ``--out``, write them)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", nargs="+", required=True, help="folders searched for run logs")
    p.add_argument(
        "--windows",
        default="0,0.25,0.5,0.75,0.9,1",
        help="comma-separated window edges, fractions of a run's updates (from 0 to 1)",
    )
    p.add_argument("--out", default="", help="also write <out>/<name>.md")
    p.add_argument("--name", default="training_phases", help="results file name without .md")
    args = p.parse_args(argv)
    edges = [float(x) for x in args.windows.split(",")]
    if len(edges) < 2 or edges != sorted(edges) or edges[0] < 0 or edges[-1] > 1:
        p.error(f"--windows={args.windows!r}: need increasing fractions within [0, 1]")
    logs = sorted(
        m
        for root in args.runs
        for m in Path(root).rglob("metrics.jsonl")
        if (m.parent / "eval.json").exists() or (m.parent / "config.yaml").exists()
    )
    if not logs:
        p.error(f"--runs {args.runs}: no run folder (metrics.jsonl with eval.json or config.yaml)")
    rep = Report(args.name, args.out)
    for log in logs:
        rows = read_log(log)
        last = rows[-1] if rows else {}
        rep.print(
            f"{log.parent.as_posix()}: {len(rows)} updates, {last.get('env_steps', 0):,} env steps"
        )
        # a run with a target KL logs how many epochs each update ran before stopping
        stops = any("ppo_epochs" in r for r in rows)
        head = "| progress | updates | train JCT | entropy | approx KL | clip frac | ent_coef |"
        rep.print(head + (" PPO epochs |" if stops else ""))
        rep.print("|---|---|---|---|---|---|---|" + ("---|" if stops else ""))
        for ph in phases(rows, edges):
            rep.print(
                f"| {ph['from']:.2f}-{ph['to']:.2f} | {ph['updates']:.0f} | "
                f"{ph['train_jct_mean']:.2f} | {ph['entropy']:.3f} | {ph['approx_kl']:.4f} | "
                f"{ph['clip_frac']:.3f} | {ph['ent_coef']:.4f} |"
                + (f" {ph['ppo_epochs']:.2f} |" if stops else "")
            )
        rep.print("")
    rep.save()


if __name__ == "__main__":
    main()
