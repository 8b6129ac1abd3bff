r"""TapFinger's work-conserving pointer applied at evaluation to trained policies (issue 22).

``algo.work_conserving=true`` lets TapFinger's pointer defer only when no task of the agent's
window fits (the original code can always skip). This script takes trained policy files
(by default the ``tapfinger-hetero6`` leaderboard's three) and evaluates each one twice on
the same held-out seeds, as trained and with the work-conserving pointer, next to the four
baselines of TapFinger's paper::

    python benchmarks/tapfinger_work_conserving.py --out benchmarks/results

Only the pointer's mask changes between the two columns; the evaluation protocol (seeded
workloads, one episode per seed) is the leaderboard's.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _report import Report, cpu_name, replay_on_one_thread
from tapfinger_budget import baseline_jct

from edgesched.experiment.evaluation import evaluate_scheduler, load_policy

BOARD_POLICIES = [
    f"leaderboards/policies/tapfinger-hetero6/tapfinger_seed{s}.pt" for s in (0, 1, 2)
]


def per_seed_jct(path: str, scenario: str, seeds: list[int], wc: bool | None) -> dict[int, float]:
    """Mean JCT per evaluation seed of a policy file (``wc=None``: as it was trained)."""
    policy, env, overrides = load_policy(path, scenario)
    if wc is not None:
        policy.trainer.work_conserving = wc
    rows = evaluate_scheduler(policy, env, overrides, seeds, 1)["per_episode"]
    return {s: float(np.mean([r["jct_mean"] for r in rows if r["eval_seed"] == s])) for s in seeds}


def main() -> None:
    """Evaluate the policies both ways and the baselines; print (and write) the table."""
    replay_on_one_thread()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policies", nargs="+", default=BOARD_POLICIES, help="policy.pt files")
    p.add_argument("--scenario", default="tapfinger-hetero6", help="scenario (its latest version)")
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10000, 10010)))
    p.add_argument("--out", default="", help="directory for the results file <name>.md")
    p.add_argument("--name", default="tapfinger_work_conserving", help="results file's name")
    args = p.parse_args()
    t0 = time.perf_counter()
    cols: dict[str, dict[int, float]] = {}
    for path in args.policies:
        name = path.rsplit("/", 1)[-1].removesuffix(".pt")
        cols[f"{name} as trained"] = per_seed_jct(path, args.scenario, args.seeds, None)
        cols[f"{name} work-conserving"] = per_seed_jct(path, args.scenario, args.seeds, True)
    base = baseline_jct(args.scenario, {}, args.seeds, 1)
    names = sorted(base, key=lambda k: np.mean(list(base[k].values())))
    rep = Report(args.name, args.out)
    rep.print(
        f"Machine: {cpu_name()}. `{args.scenario}`, held-out seeds {args.seeds[0]}.."
        f"{args.seeds[-1]} (one episode each): mean JCT per seed of each policy as trained and "
        f"with the work-conserving pointer at evaluation, and of the paper's baselines. "
        f"{time.perf_counter() - t0:.0f} s."
    )
    rep.print()
    rep.print(f"| eval seed | {' | '.join(cols)} | {' | '.join(names)} |")
    rep.print("|---" * (1 + len(cols) + len(names)) + "|")
    for s in args.seeds:
        cells = [f"{c[s]:.2f}" for c in cols.values()] + [f"{base[k][s]:.2f}" for k in names]
        rep.print(f"| {s} | {' | '.join(cells)} |")
    means = {k: float(np.mean(list(v.values()))) for k, v in {**cols, **base}.items()}
    rep.print(f"| mean | {' | '.join(f'{means[k]:.2f}' for k in [*cols, *names])} |")
    rep.print()
    top = names[0]
    for c, per in cols.items():
        won = sum(per[s] < base[top][s] for s in args.seeds)
        change = 100 * (1 - means[c] / means[top])
        rep.print(
            f"{c}: mean {means[c]:.2f}, {abs(change):.1f}% {'lower' if change >= 0 else 'higher'} "
            f"than {top}'s {means[top]:.2f}; lower on {won} of {len(args.seeds)} seeds."
        )
    rep.save()


if __name__ == "__main__":
    main()
