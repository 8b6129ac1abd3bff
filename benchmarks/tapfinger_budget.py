r"""TapFinger's sample-efficiency curve beyond the default budget (issue 22, item 2).

Does ``tapfinger`` lose to Optimus and Tiresias on ``tapfinger-hetero6`` because it sees too
little experience? Train it past the default budget (150k environment steps) with a
learning curve, e.g. four times the default on seeds 0 and 1::

    python train.py algo=tapfinger env=tapfinger-hetero6 seed=S \
        experiment.total_env_steps=600000 experiment.curve_every=60 \
        experiment.curve_seeds=3 'experiment.eval_seeds=[10000,...,10009]' \
        output_dir=outputs/tfbudget

then ``python benchmarks/tapfinger_budget.py --runs outputs/tfbudget --out
benchmarks/results``. Runs trained with ``algo.work_conserving=true`` (several ``--runs``
folders may be given) get a curve of their own; ``--wc-eval`` also evaluates each final
policy trained without it with the work-conserving pointer (defer only when no task fits).
Every run's ``eval.json`` holds its held-out mean JCT every
``curve_every`` updates on the curve seeds (the first ``curve_seeds`` evaluation seeds). The
table aggregates the runs' points the way the leaderboards do (mean over training seeds,
95% stratified bootstrap CI over training seeds within each curve seed); the paper's
baselines are evaluated here on the same curve seeds, so each point can be read against
them. The figure is the same curve with the baselines as horizontal lines.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _report import Report, cpu_name

from edgesched.baselines import make_baseline
from edgesched.envs.handle import resolve_scenario
from edgesched.experiment.evaluation import evaluate_scheduler
from edgesched.leaderboard import stats

BASELINES = ("optimus", "tiresias", "optimus_preemptive", "tiresias_preemptive")


def load_runs(root: Path) -> list[dict]:
    """The ``eval.json`` of every finished run under ``root`` that recorded a curve.

    Each gets ``_dir`` and ``_wc`` (trained with ``algo.work_conserving``, from the run's
    ``config.yaml``).
    """
    from omegaconf import OmegaConf

    out = []
    for ev in sorted(root.glob("**/eval.json")):
        rec = json.loads(ev.read_text())
        if rec.get("curve"):
            rec["_dir"] = str(ev.parent)
            cfg = OmegaConf.load(ev.parent / "config.yaml")
            rec["_wc"] = bool(cfg.algo.get("work_conserving", False))
            out.append(rec)
    return out


def label(run: dict) -> str:
    """A run's column name: its training seed, and how it was trained."""
    return f"seed {run['train_seed']}" + (" (trained work-conserving)" if run["_wc"] else "")


def policy_pair(
    path: str, scenario: str, seeds: list[int], episodes: int
) -> tuple[float, float, bool]:
    """A policy file's mean JCT as trained and with the work-conserving pointer.

    Returns:
        ``(as trained, work-conserving, whether it was trained work-conserving)``.
    """
    from edgesched.experiment.evaluation import load_policy

    policy, env, overrides = load_policy(path, scenario)
    trained = bool(policy.trainer.work_conserving)
    out = []
    for wc in (trained, True):
        policy.trainer.work_conserving = wc
        rows = evaluate_scheduler(policy, env, overrides, seeds, episodes)["per_episode"]
        out.append(float(np.mean([r["jct_mean"] for r in rows])))
    return out[0], out[1], trained


def work_conserving_eval(run: dict, seeds: list[int], episodes: int) -> dict[int, float]:
    """The run's final policy evaluated with the work-conserving pointer, per seed.

    The policy is the run's ``policy.pt``; only the pointer's mask changes (defer allowed
    only when no task of the window fits), with the same seeded evaluation protocol.
    """
    from edgesched.experiment.evaluation import load_policy

    policy, env, overrides = load_policy(str(Path(run["_dir"]) / "policy.pt"), run["scenario"])
    policy.trainer.work_conserving = True
    rows = evaluate_scheduler(policy, env, overrides, seeds, episodes)["per_episode"]
    return {s: float(np.mean([r["jct_mean"] for r in rows if r["eval_seed"] == s])) for s in seeds}


def aggregate(runs: list[dict]) -> tuple[list[int], list[tuple[int, stats.Estimate, list[float]]]]:
    """Curve points shared by all runs: ``(steps, estimate, per-run means)`` in step order.

    Raises:
        SystemExit: the runs' curves differ in interval or seeds, or in scenario.
    """
    first = runs[0]["curve"]
    for r in runs:
        c = r["curve"]
        if (c["every"], c["seeds"], r["scenario"]) != (
            first["every"],
            first["seeds"],
            runs[0]["scenario"],
        ):
            raise SystemExit(
                f"{r['_dir']}: curve every={c['every']} seeds={c['seeds']} on {r['scenario']} "
                f"differs from {runs[0]['_dir']}'s; aggregate runs of one protocol only"
            )
    steps = sorted(
        set.intersection(*({int(p["env_steps"]) for p in r["curve"]["points"]} for r in runs))
    )
    points = []
    for step in steps:
        at = [next(p for p in r["curve"]["points"] if int(p["env_steps"]) == step) for r in runs]
        mat = np.array([p["per_seed"] for p in at], dtype=np.float64)  # (runs, curve seeds)
        est = stats.stratified_bootstrap([mat[:, j] for j in range(mat.shape[1])], "mean")
        points.append((step, est, mat.mean(axis=1).tolist()))
    return [int(s) for s in first["seeds"]], points


def baseline_jct(scenario: str, overrides: dict, seeds: list[int], episodes: int) -> dict:
    """Each paper baseline's mean JCT per evaluation seed (the runs' evaluation protocol)."""
    handle = resolve_scenario(scenario, **overrides)
    out = {}
    for name in BASELINES:
        policy = make_baseline(name, handle.spec, seed=0)
        rows = evaluate_scheduler(policy, handle, None, seeds, episodes)["per_episode"]
        out[name] = {
            s: float(np.mean([r["jct_mean"] for r in rows if r["eval_seed"] == s])) for s in seeds
        }
    return out


def per_seed(run: dict) -> dict[int, float]:
    """A run's final held-out mean JCT per evaluation seed."""
    seeds = sorted({int(e["eval_seed"]) for e in run["per_episode"]})
    return {
        s: float(np.mean([e["jct_mean"] for e in run["per_episode"] if e["eval_seed"] == s]))
        for s in seeds
    }


def plot(path: Path, curves: dict[str, list], refs: dict[str, float], title: str) -> None:
    """The aggregated curves with their CI bands and the baselines as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (name, points) in enumerate(curves.items()):
        x = np.array([s for s, _, _ in points], dtype=np.float64)
        ax.plot(x, [e.value for _, e, _ in points], "o-", ms=3, color=f"C{i}", label=name)
        lo, hi = [e.low for _, e, _ in points], [e.high for _, e, _ in points]
        ax.fill_between(x, lo, hi, alpha=0.2, color=f"C{i}")
    for i, (name, v) in enumerate(sorted(refs.items(), key=lambda kv: kv[1])):
        ax.axhline(v, ls="--", lw=1, color=f"C{i + len(curves)}", label=f"{name} {v:.2f}")
    ax.axvline(150_000, color="grey", lw=0.8, ls=":", label="default budget")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("held-out mean JCT (slots)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    """Aggregate the runs' curves, evaluate the baselines, print (and write) the study."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--runs", nargs="+", default=["outputs/tfbudget"], help="folders of the budget runs"
    )
    p.add_argument("--out", default="", help="directory for tapfinger_budget.md and .png")
    p.add_argument(
        "--wc-eval",
        action="store_true",
        help="also evaluate each run trained without it with the work-conserving pointer",
    )
    p.add_argument(
        "--policies",
        nargs="*",
        default=[],
        help="further policy.pt files (e.g. the board's) evaluated as trained and with the "
        "work-conserving pointer on the same held-out seeds",
    )
    args = p.parse_args()
    t0 = time.perf_counter()
    runs = [r for root in args.runs for r in load_runs(Path(root))]
    if not runs:
        raise SystemExit(f"--runs {' '.join(args.runs)}: no finished run with a curve (eval.json)")
    groups = {wc: [r for r in runs if r["_wc"] == wc] for wc in (False, True)}
    groups = {wc: g for wc, g in groups.items() if g}
    curves = {wc: aggregate(g) for wc, g in groups.items()}
    seeds = next(iter(curves.values()))[0]
    scen = runs[0]["scenario"]
    finals = {label(r): per_seed(r) for r in runs}
    eval_seeds = sorted(next(iter(finals.values())))
    episodes = runs[0]["episodes_per_seed"]
    if args.wc_eval:
        for r in groups.get(False, []):
            finals[label(r) + ", work-conserving at evaluation"] = work_conserving_eval(
                r, eval_seeds, episodes
            )
    base = baseline_jct(scen, runs[0].get("env_overrides") or {}, eval_seeds, episodes)
    refs = {k: float(np.mean([v[s] for s in seeds])) for k, v in base.items()}
    rep = Report("tapfinger_budget", args.out)
    walls = [r["train"]["wall_time"] / 60 for r in runs]
    rep.print(
        f"Machine: {cpu_name()}. `{scen}`, `tapfinger` with its defaults (and, where named, "
        f"`algo.work_conserving=true`), {len(runs)} training run(s) of "
        f"{runs[0]['train']['env_steps']:,} environment steps (default budget: 150,000), "
        f"{min(walls):.0f}-{max(walls):.0f} min each (evaluations included); held-out mean "
        f"JCT every {runs[0]['curve']['every']} updates on curve seeds {seeds}; mean over "
        "training seeds with a 95% stratified bootstrap CI. The baselines on the same seeds: "
        + ", ".join(f"{k} {v:.2f}" for k, v in sorted(refs.items(), key=lambda kv: kv[1]))
        + f". {time.perf_counter() - t0:.0f} s to build."
    )
    best = min(refs.values())
    for wc, (_, points) in curves.items():
        rep.print()
        rep.print(
            f"Trained {'with' if wc else 'without'} the work-conserving pointer, training seeds "
            + ", ".join(str(r["train_seed"]) for r in groups[wc])
            + ":"
        )
        rep.print()
        rep.print(
            "| env steps | mean held-out JCT [95% CI] | per training seed | vs best baseline |"
        )
        rep.print("|---|---|---|---|")
        for step, est, per_run in points:
            rep.print(
                f"| {step:,} | {est.value:.2f} [{est.low:.2f}, {est.high:.2f}] | "
                f"{', '.join(f'{v:.2f}' for v in per_run)} | "
                f"{100 * (est.value / best - 1):+.1f}% |"
            )
        rep.print()
        tail = [e.value for st, e, _ in points if st > 150_000]
        if len(tail) >= 2:
            at_default = [e.value for st, e, _ in points if st <= 150_000]
            rep.print(
                f"At or below the default budget the best point is {min(at_default):.2f}; "
                f"beyond it {min(tail):.2f} (last point {tail[-1]:.2f}). The best baseline on "
                f"the curve seeds is {best:.2f}."
            )
    rep.print()
    rep.print(
        "Final evaluation on every held-out seed (one episode each): each run's mean JCT "
        "per seed, and the baselines'."
    )
    rep.print()
    names = sorted(base, key=lambda k: np.mean(list(base[k].values())))
    cols = list(finals)
    rep.print(f"| eval seed | {' | '.join(f'tapfinger {c}' for c in cols)} | {' | '.join(names)} |")
    rep.print("|---" * (1 + len(cols) + len(names)) + "|")
    for s in eval_seeds:
        cells = [f"{finals[c][s]:.2f}" for c in cols] + [f"{base[k][s]:.2f}" for k in names]
        rep.print(f"| {s} | {' | '.join(cells)} |")
    for name, fn in (("mean", np.mean), ("median", np.median)):
        cells = [f"{fn(list(finals[c].values())):.2f}" for c in cols]
        cells += [f"{fn(list(base[k].values())):.2f}" for k in names]
        rep.print(f"| {name} | {' | '.join(cells)} |")
    top = names[0]
    top_mean = float(np.mean(list(base[top].values())))
    for c in cols:
        wins = {k: sum(finals[c][s] < base[k][s] for s in eval_seeds) for k in names}
        mean = float(np.mean(list(finals[c].values())))
        change = 100 * (1 - mean / top_mean)
        rep.print()
        rep.print(
            f"tapfinger {c}: mean {mean:.2f}, {abs(change):.1f}% "
            f"{'lower' if change >= 0 else 'higher'} than {top}'s {top_mean:.2f}; lower JCT than "
            + ", ".join(f"{k} on {v} of {len(eval_seeds)} seeds" for k, v in wins.items())
            + "."
        )
    if args.policies:
        rep.print()
        rep.print(
            "Further policies on the same held-out seeds: mean JCT as trained and with the "
            "work-conserving pointer at evaluation."
        )
        rep.print()
        rep.print(
            "| policy | trained work-conserving | as trained | work-conserving at evaluation |"
        )
        rep.print("|---|---|---|---|")
        for path in args.policies:
            as_is, wc, trained_wc = policy_pair(path, scen, eval_seeds, episodes)
            rep.print(f"| `{path}` | {'yes' if trained_wc else 'no'} | {as_is:.2f} | {wc:.2f} |")
    rep.save()
    if args.out:
        plot(
            Path(args.out) / "tapfinger_budget.png",
            {
                ("trained work-conserving" if wc else "tapfinger"): pts
                for wc, (_, pts) in curves.items()
            },
            refs,
            f"{scen}: tapfinger vs environment steps (95% CI over training seeds)",
        )


if __name__ == "__main__":
    main()
