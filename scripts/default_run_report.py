r"""Summarize one training run directory into a Markdown results file the README quotes.

Usage::

    python scripts/default_run_report.py outputs/runs/edge50/srole_central/seed0/<stamp> \\
        --out benchmarks/results/default_run.md [--setup-seconds S] [--command-seconds S] \\
        [--baselines leaderboards/results/baselines_edge_v1.jsonl]

Reads the run's ``eval.json`` (held-out evaluation summary and training totals) and
``metrics.jsonl`` (per-update counters) and writes the figures the README's "Measured: the
default run" section quotes, so that they come from a real run and cannot drift from it.
``--setup-seconds`` and ``--command-seconds`` record wall times measured outside the run
(the install step and the whole README command on a fresh machine). ``--baselines`` adds
the mean JCT of ``random`` and ``least_loaded`` (unshielded, stock scenario) on the run's
held-out seeds, read from those heuristics' leaderboard records (issue #22 asks the default
run to beat both).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

# The summary keys quoted, in order, with the label the README uses.
SUMMARY = (
    ("jct_mean", "mean JCT (slots)"),
    ("jct_p95", "p95 JCT (slots)"),
    ("jobs_unfinished", "unfinished jobs"),
    ("collisions_proposed", "collisions proposed"),
    ("collisions_executed", "collisions executed"),
)


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        return platform.machine()


COMPARED = ("random", "least_loaded")
"""The heuristics the default run is compared with (``--baselines``)."""


def baseline_means(path: Path, scenario: str, seeds: list[int]) -> dict[str, float]:
    """Mean JCT of each of :data:`COMPARED` on ``seeds`` from the records in ``path``.

    Only unshielded records of the stock ``scenario`` (no overrides) that hold every seed
    count; a heuristic without one is left out.
    """
    from edgesched.leaderboard.records import load_results

    out: dict[str, float] = {}
    for rec in load_results([path]):
        r = rec.data
        if (
            r["algo"] not in COMPARED
            or r["scenario"] != scenario
            or r["shield"] != "none"
            or r["env_overrides"]
        ):
            continue
        by_seed = {e["eval_seed"]: e["jct_mean"] for e in r["per_episode"] if e["episode"] == 0}
        if all(s in by_seed for s in seeds):
            out[r["algo"]] = sum(by_seed[s] for s in seeds) / len(seeds)
    return out


def report(
    run_dir: Path,
    setup_s: float | None,
    command_s: float | None,
    baselines: Path | None = None,
) -> str:
    """The Markdown summary of ``run_dir`` (and the recorded heuristics' JCT, if given)."""
    record = json.loads((run_dir / "eval.json").read_text())
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x]
    last = rows[-1]
    wall = float(last["wall_time"])
    summary = record["summary"]
    lines = [
        f"Run: `{record['algo']}` with shield `{record['shield']}` on `{record['scenario']}`, "
        f"training seed {record['train_seed']}, git commit {record['git_commit']}.",
        f"Machine: {_cpu()}, {os.cpu_count()} CPUs, Python {platform.python_version()}.",
        "",
        "| quantity | value |",
        "|---|---|",
    ]
    if setup_s is not None:
        lines.append(f"| install (fresh virtual environment), s | {setup_s:.0f} |")
    if command_s is not None:
        lines.append(f"| whole command (install, train, evaluate), s | {command_s:.0f} |")
    lines += [
        f"| training loop wall time, s | {wall:.0f} |",
        f"| updates | {len(rows)} |",
        f"| env steps | {int(last['env_steps']):,} |",
        f"| agent decisions | {int(last['agent_decisions']):,} |",
        f"| agent-decisions/s | {int(last['agent_decisions']) / wall:,.0f} |",
        f"| env-steps/s | {int(last['env_steps']) / wall:,.0f} |",
        f"| updates/s | {len(rows) / wall:.3f} |",
        f"| held-out seeds | {', '.join(str(s) for s in record['eval_seeds'])} |",
    ]
    for key, label in SUMMARY:
        if key in summary and summary[key] is not None:
            lines.append(f"| {label} | {float(summary[key]):.2f} |")
    if baselines is not None:
        means = baseline_means(baselines, record["scenario"], list(record["eval_seeds"]))
        for algo in COMPARED:
            if algo in means:
                lines.append(
                    f"| `{algo}` on the same seeds (its record), mean JCT | {means[algo]:.2f} |"
                )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--setup-seconds", type=float, default=None)
    ap.add_argument("--command-seconds", type=float, default=None)
    ap.add_argument("--baselines", type=Path, default=None, help="heuristics' records (jsonl)")
    args = ap.parse_args()
    if not (args.run_dir / "eval.json").is_file():
        print(
            f"run_dir={str(args.run_dir)!r} holds no eval.json (an unfinished run?)",
            file=sys.stderr,
        )
        return 2
    # The run's path from its outputs/ folder on: no absolute path of this machine in the file.
    parts = args.run_dir.resolve().parts
    rel = Path(*parts[parts.index("outputs") :]) if "outputs" in parts else args.run_dir.name
    extra = "".join(
        f" --{k.replace('_', '-')} {v:g}"
        for k, v in (
            ("setup_seconds", args.setup_seconds),
            ("command_seconds", args.command_seconds),
        )
        if v is not None
    )
    if args.baselines is not None:
        extra += f" --baselines {args.baselines}"
    text = f"Generated by `python scripts/default_run_report.py {rel} --out {args.out}{extra}`.\n\n"
    text += report(args.run_dir, args.setup_seconds, args.command_seconds, args.baselines)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(f".{args.out.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
