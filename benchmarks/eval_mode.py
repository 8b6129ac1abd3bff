r"""Greedy or sampled: how much of a learner's held-out JCT is the way it acts at evaluation.

The boards evaluate the shared-view learners (``mappo``, ``ippo``, ``srole``) greedily, the
most likely feasible action of each agent, while they train by sampling; ``tapfinger`` is
evaluated sampled (its registry entry's ``eval_sampled``). A greedy policy can fail where its
sampled form does not: it repeats the same choice in a state it does not leave (for example
deferring a job forever), while a draw eventually takes another action. This script
re-evaluates every record of the given results files from its policy file both ways on the
record's own held-out seeds and episodes, behind the record's shield:

* ``greedy``: the most likely feasible action of each agent;
* ``sampled``: each episode's draws restart from its workload seed, so it is reproducible.

The mode the boards use for the entry must reproduce its record (checked per record).

Per entry (a results file's records of one scenario, algorithm and shield; a file may hold
several entries, as ``edge10_learned.jsonl`` does), the mean JCT of each mode over the
training seeds with a 95% stratified bootstrap CI (training seeds resampled within each
evaluation seed, as the boards aggregate), the sampled mode's mean relative to the greedy
one's, paired over the evaluation seeds, and each training seed's pair of means. Learners
that evaluate themselves (``dqn_central``, ``rlpto``) have no shared-view policy and are
refused. Usage::

    python benchmarks/eval_mode.py --results \
        leaderboards/studies/budget/tapfinger-hetero6_mappo-b2400k.jsonl \
        leaderboards/studies/budget/tapfinger-hetero6_mappo-b4800k.jsonl \
        --out benchmarks/results --name eval_mode_tfh6_team
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _report import Report, cpu_name, replay_on_one_thread

from edgesched.experiment.evaluation import LearnedScheduler, evaluate_scheduler, load_policy
from edgesched.leaderboard.records import Record, load_records
from edgesched.leaderboard.stats import relative_reduction, stratified_bootstrap
from edgesched.leaderboard.studies import reduction_text
from edgesched.leaderboard.table import _ci


def evaluate_both(rec: Record, root: Path) -> tuple[np.ndarray, np.ndarray]:
    """(greedy, sampled) mean JCT per evaluation seed of one record's policy.

    Raises:
        ValueError: the record's algorithm evaluates itself (no shared-view policy), or the
            mode the boards use does not reproduce the record (then the comparison would
            not be about the record's policy).
    """
    d = rec.data
    policy, scenario, _ = load_policy(str(root / d["policy"]), d["scenario"])
    if not isinstance(policy, LearnedScheduler):
        raise ValueError(
            f"{rec.where}: algo={d['algo']!r} evaluates itself (own_view); only shared-view "
            "learners (mappo, ippo, srole, tapfinger) have a greedy and a sampled form here"
        )
    boards_greedy = policy.greedy
    seeds, episodes = list(d["eval_seeds"]), int(d["episodes_per_seed"])
    out = []
    for greedy in (True, False):
        policy.greedy = greedy
        res = evaluate_scheduler(
            policy, scenario, None, seeds, episodes, policy.shield, policy.shield_kwargs
        )
        jct = np.array([r["jct_mean"] for r in res["per_episode"]]).reshape(len(seeds), -1)
        out.append(jct.mean(axis=1))
    recorded = np.array([r["jct_mean"] for r in d["per_episode"]]).reshape(len(seeds), -1)
    mine = out[0] if boards_greedy else out[1]
    if not np.allclose(mine, recorded.mean(axis=1), rtol=0, atol=1e-9):
        raise ValueError(
            f"{rec.where}: evaluating {d['policy']} as the boards do gives mean JCT "
            f"{mine.mean():.4f}, the record {recorded.mean():.4f}: not the record's policy"
        )
    return out[0], out[1]


def entries(paths: list[str]) -> list[list[Record]]:
    """The learned records of ``paths``, one list per entry, in file order.

    An entry is a scenario, algorithm and shield; its records are sorted by training seed.

    Raises:
        ValueError: a file holds no learned record, or two files hold the same entry (its
            training seeds would be pooled from runs that may differ).
    """
    out: dict[tuple, list[Record]] = {}
    origin: dict[tuple, str] = {}
    for path in paths:
        recs = [r for r in load_records([path]) if r.learned]
        if not recs:
            raise ValueError(f"--results {path!r}: no learned records")
        for r in recs:
            key = r.run_key[:3]
            if origin.setdefault(key, path) != path:
                raise ValueError(
                    f"--results: entry {key} is in both {origin[key]!r} and {path!r}; "
                    "give each entry's records in one file"
                )
            out.setdefault(key, []).append(r)
    return [sorted(v, key=lambda r: r.data["train_seed"]) for v in out.values()]


def main(argv: list[str] | None = None) -> None:
    replay_on_one_thread()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", nargs="+", required=True, help="results files (JSON lines)")
    p.add_argument("--root", default=".", help="the repository (policy paths are relative)")
    p.add_argument("--out", default="")
    p.add_argument("--name", default="eval_mode", help="results page: <out>/<name>.md")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    rep = Report(args.name, args.out)
    rep.print(
        f"Machine: {cpu_name()}. Each record's policy evaluated on the record's held-out seeds "
        "behind its shield, greedy and sampled (draws seeded by each episode's workload seed), "
        "the mode the boards use reproducing the record; mean JCT over training seeds with 95% "
        "stratified bootstrap CIs, sampled vs greedy paired over evaluation seeds."
    )
    rep.print()
    head = [
        "scenario",
        "entry",
        "env steps",
        "training seeds",
        "greedy mean JCT [95% CI]",
        "sampled mean JCT [95% CI]",
        "sampled vs greedy, paired [95% CI]",
        "per seed: greedy / sampled",
    ]
    rep.print("| " + " | ".join(head) + " |")
    rep.print("|" + "---|" * len(head))
    groups = entries(args.results)
    for i, recs in enumerate(groups):
        pairs = [evaluate_both(r, Path(args.root)) for r in recs]
        g = np.stack([a for a, _ in pairs])  # (training seeds, evaluation seeds)
        s = np.stack([b for _, b in pairs])
        red = relative_reduction(s.mean(axis=0), g.mean(axis=0))
        per = ", ".join(
            f"s{r.data['train_seed']} {a.mean():.2f} / {b.mean():.2f}"
            for r, (a, b) in zip(recs, pairs, strict=True)
        )
        d = recs[0].data
        steps = {r.train_budget[0] for r in recs if r.train_budget}
        rep.print(
            f"| {d['scenario']} | {d['algo']} ({d['shield']}) | "
            f"{', '.join(f'{x:,}' for x in sorted(steps))} | {len(recs)} | "
            f"{_ci(stratified_bootstrap(list(g.T)))} | "
            f"{_ci(stratified_bootstrap(list(s.T)))} | {reduction_text(red)} | {per} |"
        )
        if i + 1 < len(groups):
            # an entry takes minutes (every record twice over all held-out seeds): save the
            # rows so far, marked as such, so a stopped run keeps what it measured
            rep.save(trailer=f"Incomplete: {i + 1} of {len(groups)} entries.")
    rep.print(f"Took {time.perf_counter() - t0:.0f} s.")
    rep.save()


if __name__ == "__main__":
    main()
