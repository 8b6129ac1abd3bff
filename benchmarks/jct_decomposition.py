r"""Where a scheduler's job completion time goes: waiting, running, and what each job got.

A job's completion time is its wait in a queue (arrival to first start) plus its execution
(first start to finish). This script replays heuristics and committed policy files
(``leaderboards/policies/<board>/<entry>_seed<S>.pt``) on held-out seeds exactly as the
leaderboard evaluates them (strict simulator, the policy's own shield in front, one episode
per seed, through :func:`edgesched.experiment.evaluation.run_episode`) and logs, per job, its
arrival, first start, finish, model, and the GPUs and CPU cores its workers held when it
first started. It prints:

* per entry: mean JCT = mean wait + mean execution, GPUs and CPU cores per job, and
  ``defer %``, the share of agent-decisions in which the scheduler deferred although a
  placement fitted (after the shield, so what ran), and ``proposed defer %``, the share in
  which the policy itself proposed to defer (the difference is the shield's doing);
* per entry and model: the share of jobs, their GPUs, execution and wait.

Learned entries are the mean over their training seeds' policies, each policy also on a line
of its own. Jobs still running at the episode's end count with their time so far and jobs
never started wait until then, as the leaderboard's mean JCT counts them; each episode's
logged mean JCT is checked against the simulator's own. The allocation is the one at the
first start (a later re-allocation or a restart after a crash is not followed); execution
includes any time back in a queue after a crash. Learners that evaluate themselves through
their own view (``dqn_central``, ``rlpto``) are not supported. Usage::

    python benchmarks/jct_decomposition.py --out benchmarks/results     # tapfinger-hetero6
    python benchmarks/jct_decomposition.py --board edge50 --entries mappo srole_central \
        --baselines least_loaded --seeds 10000 10001
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _report import Report, cpu_name, replay_on_one_thread

from edgesched.baselines import make_baseline
from edgesched.envs.core import DONE, NOT_ARRIVED
from edgesched.envs.handle import resolve_scenario
from edgesched.experiment.evaluation import load_policy, make_eval_sim, run_episode
from edgesched.policy import Scheduler
from edgesched.protocol import eval_workload_seed
from edgesched.shields import make_shield

ROOT = Path(__file__).resolve().parents[1]
#: tapfinger-hetero6's board entries of TapFinger (with and without message passing), and the
#: longest budget studies of TapFinger and of mappo and srole on the agents' mean reward (their
#: default there; named mappo-team-b2400k and srole-team-b2400k when results/jct_decomposition.md
#: was generated)
DEFAULT_ENTRIES = (
    "tapfinger",
    "tapfinger-noattn",
    "tapfinger-b1200k",
    "mappo-b2400k",
    "srole-b2400k_central",
)
#: the paper's baselines that issue #22's TapFinger target names
DEFAULT_BASELINES = ("optimus", "tiresias")


@dataclass
class EpisodeLog:
    """Per-job log of one episode (arrived jobs only) and its decision counts.

    Attributes:
        wait: (J,) slots from arrival to first start (to the episode's end if never started).
        run: (J,) slots from first start to finish (to the end if unfinished; 0 if never
            started).
        gpus: (J,) GPUs the job's workers held at its first start (NaN if never started).
        cpus: (J,) CPU cores likewise.
        model: (J,) model index (the scenario's ``models`` order).
        fit_decisions: agent-decisions in which some placement fitted.
        defers_with_fit: those in which the executed action deferred.
        proposed_defers_with_fit: those in which the policy itself proposed to defer (equal
            to ``defers_with_fit`` without a shield; with one, the rest are the shield's).
        jct_mean: the simulator's own mean JCT of the episode.
    """

    wait: np.ndarray
    run: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    model: np.ndarray
    fit_decisions: int
    defers_with_fit: int
    proposed_defers_with_fit: int
    jct_mean: float


def play_logged(policy: Any, sim: Any, workload_seed: int, shield: Any = None) -> EpisodeLog:
    """Play one episode through :func:`~edgesched.experiment.evaluation.run_episode`, logging.

    Args:
        policy: a scheduler (heuristic or :class:`LearnedScheduler`).
        sim: a strict lone simulator (:func:`make_eval_sim`).
        workload_seed: the episode's workload seed.
        shield: a shield bound to ``sim``, or ``None``.

    Raises:
        RuntimeError: the logged mean JCT differs from the simulator's (a logging bug).
    """
    view = sim.view()
    state: dict[str, Any] = {}
    counts = {"fit": 0, "defer": 0, "proposed": 0}

    def observe(mask: np.ndarray, proposal: np.ndarray, action: np.ndarray) -> None:
        # the first call of an episode sees its workload (run_episode resets sim itself)
        if not state:
            n_jobs = view.num_jobs
            state["start"] = np.full(n_jobs, -1, dtype=np.int64)
            state["finish"] = np.full(n_jobs, -1, dtype=np.int64)
            state["gpus"] = np.full(n_jobs, np.nan)
            state["cpus"] = np.full(n_jobs, np.nan)
        fits = mask[:, 1:].any(axis=1)
        counts["fit"] += int(fits.sum())
        counts["defer"] += int((fits & (action == 0)).sum())
        counts["proposed"] += int((fits & (proposal == 0)).sum())
        first_start, finish = state["start"], state["finish"]
        started = (view.job_start_slot >= 0) & (first_start < 0)
        if started.any():
            first_start[started] = view.job_start_slot[started]
            held = view.worker_alloc[started]  # (j, W, 3): cpu, gpu, memory
            state["cpus"][started] = held[..., 0].sum(axis=-1)
            state["gpus"][started] = held[..., 1].sum(axis=-1)
        done = (view.job_status == DONE) & (finish < 0)
        finish[done] = view.clock

    jct_sim = float(run_episode(policy, sim, workload_seed, shield, observer=observe)["jct_mean"])
    first_start, finish = state["start"], state["finish"]
    gpus, cpus = state["gpus"], state["cpus"]
    end = view.clock
    arrived = np.asarray(view.job_status) != NOT_ARRIVED
    arrival = np.asarray(view.job_arrival, dtype=np.int64)
    stop = np.where(finish >= 0, finish, end)
    begun = first_start >= 0
    wait = np.where(begun, first_start, stop) - arrival
    run = np.where(begun, stop - first_start, 0)
    log = EpisodeLog(
        wait=wait[arrived].astype(np.float64),
        run=run[arrived].astype(np.float64),
        gpus=gpus[arrived],
        cpus=cpus[arrived],
        model=np.asarray(view.job_model)[arrived].astype(np.int64),
        fit_decisions=counts["fit"],
        defers_with_fit=counts["defer"],
        proposed_defers_with_fit=counts["proposed"],
        jct_mean=jct_sim,
    )
    logged = float(np.mean(log.wait + log.run)) if len(log.wait) else float("nan")
    if not np.isclose(logged, jct_sim, rtol=0, atol=1e-9, equal_nan=True):
        raise RuntimeError(f"logged mean JCT {logged} differs from the simulator's {jct_sim}")
    return log


def summarize(logs: list[EpisodeLog], num_models: int) -> dict[str, Any]:
    """Means over episodes (each episode weighs equally, as on the leaderboards).

    Returns:
        ``jct``, ``wait``, ``run``, ``gpus``, ``cpus`` (per started job), ``defer``
        (percent) and ``models``: per model index, ``share`` (percent of jobs), ``gpus``,
        ``run`` and ``wait`` (NaN where an episode had no such job; means skip them).
    """

    def per_episode(fn) -> float:
        vals = [fn(lg) for lg in logs]
        vals = [v for v in vals if np.isfinite(v)]
        return float(np.mean(vals)) if vals else float("nan")

    def mean(a: np.ndarray) -> float:
        a = a[np.isfinite(a)]
        return float(a.mean()) if len(a) else float("nan")

    out: dict[str, Any] = {
        "jct": per_episode(lambda lg: lg.jct_mean),
        "wait": per_episode(lambda lg: mean(lg.wait)),
        "run": per_episode(lambda lg: mean(lg.run)),
        "gpus": per_episode(lambda lg: mean(lg.gpus)),
        "cpus": per_episode(lambda lg: mean(lg.cpus)),
        "defer": 100.0
        * sum(lg.defers_with_fit for lg in logs)
        / max(sum(lg.fit_decisions for lg in logs), 1),
        "proposed_defer": 100.0
        * sum(lg.proposed_defers_with_fit for lg in logs)
        / max(sum(lg.fit_decisions for lg in logs), 1),
        "models": {},
    }
    for m in range(num_models):
        out["models"][m] = {
            "share": per_episode(lambda lg, m=m: 100.0 * float(np.mean(lg.model == m))),
            "gpus": per_episode(lambda lg, m=m: mean(lg.gpus[lg.model == m])),
            "run": per_episode(lambda lg, m=m: mean(lg.run[lg.model == m])),
            "wait": per_episode(lambda lg, m=m: mean(lg.wait[lg.model == m])),
        }
    return out


def mean_of(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean of several policies' summaries (an entry over its training seeds)."""
    keys = ("jct", "wait", "run", "gpus", "cpus", "defer", "proposed_defer")
    out: dict[str, Any] = {k: float(np.nanmean([s[k] for s in summaries])) for k in keys}
    out["models"] = {
        m: {
            k: float(np.nanmean([s["models"][m][k] for s in summaries]))
            for k in ("share", "gpus", "run", "wait")
        }
        for m in summaries[0]["models"]
    }
    return out


def policy_files(board: str, entry: str, root: Path = ROOT) -> list[Path]:
    """An entry's committed policy files, by training seed.

    Raises:
        FileNotFoundError: none exists; the message lists the board's entries.
    """
    folder = root / "leaderboards" / "policies" / board
    files = sorted(folder.glob(f"{entry}_seed*.pt"), key=lambda p: int(p.stem.rsplit("seed", 1)[1]))
    if not files:
        have = sorted({p.stem.rsplit("_seed", 1)[0] for p in folder.glob("*_seed*.pt")})
        raise FileNotFoundError(f"entry={entry!r}: no {folder}/{entry}_seed*.pt; entries: {have}")
    return files


def evaluate(policy: Any, handle: Any, seeds: list[int], shield: str, kwargs: dict) -> dict:
    """Summary of one scheduler over the held-out seeds (one episode each)."""
    sim = make_eval_sim(handle)
    sh = make_shield(shield, sim, **kwargs)
    logs = [play_logged(policy, sim, eval_workload_seed(s, 0), shield=sh) for s in seeds]
    return summarize(logs, sim.view().num_models)


def main() -> None:
    """Replay the heuristics and policy files; print (and write) the two tables."""
    replay_on_one_thread()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--board", default="tapfinger-hetero6", help="scenario (latest version)")
    p.add_argument("--entries", nargs="+", default=list(DEFAULT_ENTRIES), help="policy stems")
    p.add_argument("--baselines", nargs="*", default=list(DEFAULT_BASELINES))
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(10000, 10010)))
    p.add_argument("--out", default="", help="directory for the results file <name>.md")
    p.add_argument("--name", default="jct_decomposition", help="results file's name")
    args = p.parse_args()
    t0 = time.perf_counter()
    rep = Report(args.name, args.out)
    handle = resolve_scenario(args.board)
    names = [name for name, _ in make_eval_sim(handle).view().config.models]
    rows: list[tuple[str, dict[str, Any]]] = []
    per_policy: list[tuple[str, dict[str, Any]]] = []
    for name in args.baselines:
        rows.append(
            (
                f"{name} (heuristic)",
                evaluate(make_baseline(name, handle.spec, seed=0), handle, args.seeds, "none", {}),
            )
        )
    for entry in args.entries:
        sums = []
        for path in policy_files(args.board, entry):
            policy, env, overrides = load_policy(str(path), handle.id)
            if not isinstance(policy, Scheduler):
                raise ValueError(
                    f"entry={entry!r}: a learner that evaluates itself through its own view "
                    "has no per-agent decisions to log; use a shared-view entry"
                )
            h = resolve_scenario(env, **overrides)
            s = evaluate(policy, h, args.seeds, policy.shield, policy.shield_kwargs)
            sums.append(s)
            per_policy.append((path.stem, s))
        rows.append((f"{entry} ({len(sums)} seeds)", mean_of(sums)))

    rep.print(
        f"Machine: {cpu_name()}. Scenario {handle.id}, held-out seeds "
        f"{args.seeds[0]}..{args.seeds[-1]} ({len(args.seeds)}, episode 0 each); "
        "JCT, wait and execution in slots; GPUs and CPU cores per job at its first start."
    )
    rep.print()
    rep.print(
        "| scheduler | mean JCT | wait | execution | GPUs/job | CPUs/job | defer % "
        "| proposed defer % |"
    )
    rep.print("|---|---|---|---|---|---|---|---|")
    for label, s in rows + per_policy:
        rep.print(
            f"| {label} | {s['jct']:.2f} | {s['wait']:.2f} | {s['run']:.2f} | {s['gpus']:.2f} "
            f"| {s['cpus']:.2f} | {s['defer']:.1f} | {s['proposed_defer']:.1f} |"
        )
    rep.print()
    rep.print("Per model: share of jobs %, GPUs/job, execution, wait.")
    rep.print()
    rep.print("| scheduler | " + " | ".join(names) + " |")
    rep.print("|---|" + "---|" * len(names))
    for label, s in rows:
        cells = [
            f"{c['share']:.0f}%, {c['gpus']:.2f} GPUs, run {c['run']:.2f}, wait {c['wait']:.2f}"
            for c in (s["models"][m] for m in range(len(names)))
        ]
        rep.print(f"| {label} | " + " | ".join(cells) + " |")
    rep.print()
    rep.print(f"{time.perf_counter() - t0:.0f} s.")
    rep.save()


if __name__ == "__main__":
    main()
