r"""How sharp a trained TapFinger pointer is, and how often its agents lose task conflicts.

For each policy file, the policy runs as it trains (sampled choices and conflict winners) on
its own scenario and overrides for ``--steps`` decision rounds in ``--copies`` copies
(workload seeds from ``--seed``), and the script reports, per policy and as means over the
policies of one entry (its file name without ``_seedN``):

* the pointer's logits over the feasible pending slots: standard deviation and largest
  magnitude (``q(h_agent) . k(h_task) / sqrt(d)``, unbounded unless the policy was trained
  with ``algo.pointer_clip``);
* the pointer's entropy on rows where some task is feasible (with "defer"), and the most it
  could be there (``log`` of the choices, mean over those rows);
* the fraction of placement attempts that lost a task conflict (the agent chose a task
  another agent also chose and the other won: it defers in the environment), and the
  contested tasks per decision round.

Read across budgets (``tapfinger-noclip-b150k`` .. ``-b1200k``, the unbounded pointer's
budget studies) it shows whether the pointer sharpens and its agents collide on tasks as
training goes on::

    python benchmarks/tapfinger_pointer.py --policies \
        leaderboards/policies/tapfinger-hetero6/tapfinger-noclip-b{150k,300k,600k,1200k}_seed*.pt \
        --out benchmarks/results --name tapfinger_pointer
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edgesched.algos import config_from_dict, make_trainer
from edgesched.algos.common import VecSim, probs_of
from edgesched.algos.graph import pad_graphs
from edgesched.algos.tapfinger import _masks
from edgesched.envs.handle import resolve_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent))
# benchmarks/ is a folder of scripts, not a package
from _report import Report, cpu_name, replay_on_one_thread


def pointer_stats(path: str | Path, steps: int, copies: int, seed: int) -> dict[str, float]:
    """One policy's pointer and conflict figures over a sampled rollout (see the module doc).

    Raises:
        ValueError: the file is not a TapFinger policy.
    """
    blob = torch.load(path, weights_only=False)
    algo = config_from_dict(blob["algo"])
    if algo.name != "tapfinger":
        raise ValueError(f"{path}: a {algo.name!r} policy; this script reads tapfinger ones")
    scenario = resolve_scenario(blob["env"], **blob["overrides"])
    vec = VecSim(scenario.config, copies, seed, scenario.id)
    trainer = make_trainer("tapfinger", algo, scenario.spec, seed, "none", {})
    trainer.actor.load_state_dict(blob["actor"])
    batch = trainer.collect(vec, steps)
    t, e, n = batch["choice"].shape
    graphs = [g for step in batch["graphs"] for g in step]
    mask = batch["mask"].reshape(t * e, n, -1)
    with torch.no_grad():
        logits = trainer.actor(pad_graphs(graphs))[0]
    pmask, _ = _masks(trainer.spec, mask, trainer.work_conserving)
    pm = torch.from_numpy(pmask)
    feasible = logits[..., 1:][pm[..., 1:]]
    logp = trainer._pointer_logp(logits, pmask)
    entropy = -(probs_of(logp) * logp.clamp_min(-1e4)).sum(-1)
    has = pm[..., 1:].any(-1)
    placing = batch["choice"] > 0
    lost = placing & ~batch["keep"]
    return {
        "logit_std": float(feasible.std()) if feasible.numel() > 1 else float("nan"),
        "logit_max": float(feasible.abs().max()) if feasible.numel() else float("nan"),
        "entropy": float(entropy[has].mean()) if bool(has.any()) else float("nan"),
        "entropy_max": float(torch.log(pm[has].sum(-1).float()).mean())
        if bool(has.any())
        else float("nan"),
        "lost": float(lost.sum() / max(placing.sum(), 1)),
        "contested": float(batch["log"]["task_conflicts_per_step"]),
    }


COLUMNS = (
    ("logit_std", "logit std", "{:.2f}"),
    ("logit_max", "max abs logit", "{:.1f}"),
    ("entropy", "entropy", "{:.3f}"),
    ("entropy_max", "max entropy", "{:.3f}"),
    ("lost", "lost conflicts", "{:.3f}"),
    ("contested", "contested/round", "{:.3f}"),
)


def entry_of(path: str | Path) -> str:
    """A policy file's entry: its name without ``_seedN`` and the suffix."""
    return re.sub(r"_seed\d+$", "", Path(path).stem)


def table(rows: list[tuple[str, dict[str, float]]]) -> list[str]:
    """Markdown lines: one row per policy, then one per entry with the means."""
    head = "| policy | " + " | ".join(c[1] for c in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 1)]
    by_entry: dict[str, list[dict[str, float]]] = defaultdict(list)
    for name, stats in rows:
        by_entry[entry_of(name)].append(stats)
        cells = [fmt.format(stats[k]) for k, _, fmt in COLUMNS]
        lines.append(f"| {Path(name).stem} | " + " | ".join(cells) + " |")
    lines += ["", "| entry (mean over its policies) | " + head[len("| policy | ") :]]
    lines.append("|" + "---|" * (len(COLUMNS) + 1))
    for entry, stats in by_entry.items():
        cells = [fmt.format(np.mean([s[k] for s in stats])) for k, _, fmt in COLUMNS]
        lines.append(f"| {entry} ({len(stats)}) | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    """Print the table (and with ``--out``, write it)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policies", nargs="+", required=True, help="tapfinger policy files")
    p.add_argument("--steps", type=int, default=128, help="decision rounds per copy")
    p.add_argument("--copies", type=int, default=4, help="environment copies")
    p.add_argument("--seed", type=int, default=7, help="workload and sampling seed")
    p.add_argument("--out", default="", help="also write <out>/<name>.md")
    p.add_argument("--name", default="tapfinger_pointer", help="results file name (no .md)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.copies < 1:
        p.error(f"--steps={args.steps} --copies={args.copies}: need positive integers")
    replay_on_one_thread()
    t0 = time.perf_counter()
    rows: list[tuple[str, Any]] = []
    for path in args.policies:
        rows.append((path, pointer_stats(path, args.steps, args.copies, args.seed)))
    report = Report(args.name, args.out)
    report.print(
        f"Machine: {cpu_name()}. Each policy sampled as in training for {args.steps} decision "
        f"rounds in {args.copies} copies (workload seed {args.seed}) on its own scenario and "
        "overrides. Pointer logits: raw, over the feasible pending slots; entropy: the "
        "pointer's (with defer) on rows where some task is feasible, beside its maximum there; "
        "lost conflicts: placement attempts that lost a task to another agent; contested: "
        "tasks chosen by two or more agents per decision round."
    )
    report.print()
    for line in table(rows):
        report.print(line)
    report.print()
    report.print(f"{time.perf_counter() - t0:.0f} s.")
    report.save()


if __name__ == "__main__":
    main()
