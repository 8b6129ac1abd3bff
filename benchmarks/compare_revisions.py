"""Environment or training throughput of this checkout against another git revision, in one run.

Checks out ``--rev`` into a temporary git worktree, then alternates between the two trees
(each round measures both back to back, old first in even rounds and new first in odd ones),
each time running ``env_throughput``'s array, dict or batched
benchmark of that tree in a fresh subprocess (batched: ``default_copies`` of the scenario
unless ``--copies``). Alternating in one run is what makes the ratio meaningful
on a shared machine whose speed drifts between minutes; each side's best round is reported
(as ``timeit`` does) with the ratio of the two bests, and the rounds' paired ratio: the
geometric mean of each round's new / old with a 95% bootstrap CI over rounds, which says
whether the run settles a question such as "within 5%" (more rounds narrow it).

With ``--train`` it compares training instead: each round is a short run of
``train_throughput.measure`` (``--updates`` PPO updates through the runner, one torch
thread) with the tree's package and ``conf/algo`` settings, and reports env-steps/s of the
training loop (collection and learning together).

With ``--train`` and ``--whole-run`` each round runs the default job of each tree end to
end instead, ``python train.py algo=<algo> env=<scenario>`` (its default budget, held-out
evaluation and files; one torch thread, the default), the two trees' runs at the same
time, one per core (a 2-core machine otherwise idle: both see the same machine for the
same minutes), and reports each run's wall time from start to exit and old / new.

Usage::

    python benchmarks/compare_revisions.py --rev ef6c34d
    python benchmarks/compare_revisions.py --rev ef6c34d --scenarios edge50 --rounds 5
    python benchmarks/compare_revisions.py --rev ef6c34d --out benchmarks/results
    python benchmarks/compare_revisions.py --rev 9842e12 --paths array,batched
    python benchmarks/compare_revisions.py --rev 6504d10 --paths central --scenarios edge50
    python benchmarks/compare_revisions.py --rev 1c573a3~1 --paths reset
    python benchmarks/compare_revisions.py --rev ce4d875 --scenarios edge50 \
        --train mappo,srole:central
    python benchmarks/compare_revisions.py --rev d0c9a3e --scenarios edge50-v0=edge50 \
        --train mappo --updates 30   # NEW=OLD: each side's name for the same scenario
    python benchmarks/compare_revisions.py --rev d0c9a3e --scenarios tapfinger-hetero6 \
        --train tapfinger --whole-run --rounds 1   # the default run, end to end
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report, paired_ratio  # benchmarks/ is a folder of scripts, not a package

ROOT = Path(__file__).resolve().parents[1]
_SNIPPET = """
import json, sys
sys.path.insert(0, {tree!r} + "/benchmarks")
sys.path.insert(0, {tree!r})
import env_throughput as e
if {path!r} == "batched":
    import edgesched
    agents = edgesched.make_batched({name!r}, 1).agents_per_copy
    copies = {copies!r} or e.default_copies(agents)
    print(json.dumps(e.bench_batched({name!r}, {seconds!r}, {windows!r}, copies)))
elif {path!r} == "central":
    # written here, not in env_throughput.py, so that revisions without it run it too
    import time
    import numpy as np
    from edgesched.envs.central import EdgeSchedCentralEnv
    env, rng, ep = EdgeSchedCentralEnv({name!r}), np.random.default_rng(0), 0
    env.reset(options={{"workload_seed": ep}})
    best = 0.0
    for _ in range({windows!r}):
        n, busy, wall = 0, 0.0, time.perf_counter()
        while time.perf_counter() - wall < {seconds!r} / {windows!r}:
            t0 = time.perf_counter()
            mask = env.action_masks()
            busy += time.perf_counter() - t0
            a = int(rng.choice(np.flatnonzero(mask)))  # the policy: not timed
            t0 = time.perf_counter()
            _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                ep += 1
                env.reset(options={{"workload_seed": ep}})
            busy += time.perf_counter() - t0
            n += 1
        best = max(best, n / busy)
    print(json.dumps([best, best]))  # one decision per step
elif {path!r} == "reset":
    # copy resets per second of a batched simulator (each draws and installs a workload);
    # written here, not in env_throughput.py, so that revisions without it run it too
    import time
    import edgesched
    agents = edgesched.make_batched({name!r}, 1).agents_per_copy
    copies = {copies!r} or e.default_copies(agents)
    sim = edgesched.make_batched({name!r}, copies)
    sim.reset(seeds=list(range(copies)))
    seed, best = copies, 0.0
    for _ in range({windows!r}):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < {seconds!r} / {windows!r}:
            sim.reset_copies([n % copies], [seed])
            seed, n = seed + 1, n + 1
        best = max(best, n / (time.perf_counter() - t0))
    print(json.dumps([best, best]))
else:
    fn = e.bench_array if {path!r} == "array" else e.bench_dict
    print(json.dumps(fn({name!r}, {seconds!r}, {windows!r})))
"""


def measure(
    tree: Path, path: str, name: str, seconds: float, windows: int, copies: int = 0
) -> float:
    """Agent-decisions/s of ``tree``'s ``path`` benchmark on ``name``.

    Args:
        tree: the checkout whose ``benchmarks/env_throughput.py`` and package run.
        path: ``"array"``, ``"dict"``, ``"batched"`` or ``"central"`` (the Gymnasium central
            view, one head decision per step: masks and steps timed, a random feasible
            policy), or ``"reset"`` (copy resets per second of a batched simulator of
            ``copies`` copies, one copy at a time: the figure is resets, not decisions).
        name: the scenario.
        seconds: measuring time, split into ``windows`` windows (the best one counts).
        windows: see ``seconds``.
        copies: the batched path's copies (0: ``env_throughput.default_copies``).
    """
    if path not in ("array", "dict", "batched", "central", "reset"):
        raise ValueError(
            f"path={path!r} is not allowed; use array, dict, batched, central or reset"
        )
    code = _SNIPPET.format(
        tree=str(tree), path=path, name=name, seconds=seconds, windows=windows, copies=copies
    )
    return float(_run_in(tree, code)[1])


def _run_in(tree: Path, code: str) -> Any:
    """Run ``code`` in a fresh interpreter in ``tree``; the JSON its last line printed."""
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


_TRAIN_SNIPPET = """
import json, sys
sys.path.insert(0, {bench!r})
sys.path.insert(0, {tree!r})
import train_throughput as t
from pathlib import Path
m = t.measure({algo!r}, {name!r}, {updates!r}, 1, {shield!r}, root=Path({tree!r}))
print(json.dumps(m["steps"] / m["wall"]))
"""


def measure_training(tree: Path, algo: str, shield: str | None, name: str, updates: int) -> float:
    """Env-steps/s of ``tree``'s training loop: ``updates`` updates of ``algo`` on ``name``.

    The harness is this checkout's ``train_throughput.measure``; the package and the
    algorithm's ``conf/algo`` settings (its default shield, for ``shield=None``) are
    ``tree``'s.
    """
    code = _TRAIN_SNIPPET.format(
        bench=str(ROOT / "benchmarks"),
        tree=str(tree),
        algo=algo,
        shield=shield,
        name=name,
        updates=updates,
    )
    return float(_run_in(tree, code))


def whole_runs(
    runs: dict[Path, tuple[str, str | None, str]],
    out: Path,
    overrides: tuple[str, ...] = (),
    timeout: float | None = None,
) -> dict[Path, float]:
    """Wall seconds of each tree's ``train.py`` run, all started at once.

    Args:
        runs: per tree, ``(algo, shield, scenario)``: the command ``python train.py
            algo=<algo> [shield=<shield>] env=<scenario> output_dir=<out>/<i>`` run in the
            tree (its package first on the path, its ``conf``), i the tree's position.
        out: folder for the runs' files and logs (``<i>.log``).
        overrides: more Hydra overrides for every run (the tests' ``experiment=smoke``).
        timeout: seconds to wait for each run (None: no limit).

    Raises:
        RuntimeError: a run failed (its exit status and last output lines in the message).
    """
    started = []
    for i, (tree, (algo, shield, name)) in enumerate(runs.items()):
        cmd = [sys.executable, "train.py", f"algo={algo}", f"env={name}"]
        cmd += [f"shield={shield}"] if shield else []
        cmd += [f"output_dir={out / str(i)}", *overrides]
        env = {**os.environ, "PYTHONPATH": str(tree)}  # the tree's package, not this one
        log = out / f"{i}.log"
        with log.open("w") as fh:  # the child keeps its own handle
            proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=fh, stderr=subprocess.STDOUT)
        started.append((tree, proc, log, time.perf_counter()))
    wall: dict[Path, float] = {}
    deadline = None if timeout is None else time.perf_counter() + timeout
    while len(wall) < len(started):
        # poll rather than wait on each in turn: a run that ends while another is waited
        # on must get its own end time
        for tree, proc, log, t0 in started:
            if tree in wall or proc.poll() is None:
                continue
            wall[tree] = time.perf_counter() - t0
            if proc.returncode != 0:
                _stop(started)
                tail = " | ".join(log.read_text().splitlines()[-5:])
                raise RuntimeError(f"train.py in {tree} exited with {proc.returncode}: {tail}")
        if deadline is not None and time.perf_counter() > deadline:
            _stop(started)
            raise RuntimeError(f"the runs took more than timeout={timeout} s")
        time.sleep(0.1)
    return wall


def _stop(started: list[tuple]) -> None:
    """Kill and reap every run of :func:`whole_runs` (no orphan keeps a core busy)."""
    for _, proc, _, _ in started:
        proc.kill()
        proc.wait()


def _names(item: str, old: Path) -> dict[Path, str]:
    """A ``--scenarios`` item as the scenario name of each tree (``old`` and this checkout).

    ``edge50-v0=edge50`` runs ``edge50-v0`` in this checkout and ``edge50`` in the old one: a
    revision from before scenario versions knows a scenario by its bare name only, which
    today names a later version.
    """
    new_name, _, old_name = item.partition("=")
    return {ROOT: new_name, old: old_name or new_name}


def _rounds(
    rounds: int, old: Path, rate: Callable[[Path], float]
) -> tuple[list[float], list[float]]:
    """Each side's ``rate(tree)`` in each of ``rounds`` rounds, old and new back to back.

    The order within a round alternates (old first in even rounds, new first in odd ones),
    so that a machine that speeds up or slows down over the run does not favour the side
    that always runs second.
    """
    olds, news = [], []
    for r in range(rounds):
        first, second = (old, ROOT) if r % 2 == 0 else (ROOT, old)
        got = {first: rate(first)}
        got[second] = rate(second)
        olds.append(got[old])
        news.append(got[ROOT])
    return olds, news


def _ratio_text(olds: list[float], news: list[float]) -> str:
    """``paired [low, high]`` for a results row."""
    value, low, high = paired_ratio(olds, news)
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def _compare_envs(rep: Report, args: argparse.Namespace, old: Path) -> None:
    rep.print(
        f"old: {args.rev}  new: this checkout (agent-decisions/s; the reset path: copy "
        "resets/s; best of rounds, and the rounds' paired new/old ratio: geometric mean "
        "[95% CI])"
    )
    rep.print(
        f"{'scenario':20s} {'path':6s} {'old':>12s} {'new':>12s} {'new/old':>8s}  paired [95% CI]"
    )
    for name in args.scenarios.split(","):
        names = _names(name, old)
        for path in args.paths.split(","):
            olds, news = _rounds(
                args.rounds,
                old,
                lambda tree, path=path, names=names: measure(
                    tree, path, names[tree], args.seconds, args.windows, args.copies
                ),
            )
            o, n = max(olds), max(news)
            rep.print(
                f"{name:20s} {path:6s} {o:12,.0f} {n:12,.0f} {n / o:8.3f}  "
                + _ratio_text(olds, news)
            )


def _compare_training(rep: Report, args: argparse.Namespace, old: Path) -> None:
    rep.print(
        f"old: {args.rev}  new: this checkout (training env-steps/s, {args.updates} updates, "
        "1 torch thread, best of rounds, and the rounds' paired new/old ratio: geometric mean "
        "[95% CI])"
    )
    rep.print(
        f"{'scenario':20s} {'algo':16s} {'old':>10s} {'new':>10s} {'new/old':>8s}  paired [95% CI]"
    )
    for name, item, algo, shield, names in _train_items(args, old):
        olds, news = _rounds(
            args.rounds,
            old,
            lambda tree, algo=algo, shield=shield, names=names: measure_training(
                tree, algo, shield, names[tree], args.updates
            ),
        )
        o, n = max(olds), max(news)
        rep.print(
            f"{name:20s} {item:16s} {o:10,.0f} {n:10,.0f} {n / o:8.3f}  " + _ratio_text(olds, news)
        )


def _train_items(args: argparse.Namespace, old: Path):
    """``(scenario item, --train item, algo, shield or None, each tree's scenario name)``."""
    for name in args.scenarios.split(","):
        names = _names(name, old)
        for item in args.train.split(","):
            algo, _, shield = item.partition(":")
            yield name, item, algo, shield or None, names


def _compare_whole_runs(rep: Report, args: argparse.Namespace, old: Path) -> None:
    rep.print(
        f"old: {args.rev}  new: this checkout (wall seconds of the default run, end to end, "
        "both trees' runs at once, 1 torch thread each; best of rounds)"
    )
    rep.print(f"{'scenario':20s} {'algo':16s} {'old s':>9s} {'new s':>9s} {'old/new':>8s}")
    for name, item, algo, shield, names in _train_items(args, old):
        best = {old: float("inf"), ROOT: float("inf")}
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                wall = whole_runs({t: (algo, shield, names[t]) for t in (old, ROOT)}, Path(tmp))
            for tree, sec in wall.items():
                best[tree] = min(best[tree], sec)
            rep.print(f"  round {r + 1}: old {wall[old]:.1f} s, new {wall[ROOT]:.1f} s")
        o, n = best[old], best[ROOT]
        rep.print(f"{name:20s} {item:16s} {o:9.1f} {n:9.1f} {o / n:8.3f}")


def main(argv: list[str] | None = None) -> int:
    """Print (and optionally write) the new/old agent-decisions/s per scenario and path."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rev", required=True, help="the git revision to compare against")
    p.add_argument(
        "--scenarios",
        default="edge10,edge50,edge100,edge500,tapfinger-hetero6",
        help="comma-separated; NEW=OLD names one scenario on each side (edge50-v0=edge50)",
    )
    p.add_argument(
        "--paths",
        default="array,dict",
        help="comma-separated: array, dict, batched, central, reset (copy resets/s)",
    )
    p.add_argument("--copies", type=int, default=0, help="batched copies (0: the default)")
    p.add_argument("--rounds", type=int, default=3, help="alternations per measurement")
    p.add_argument("--seconds", type=float, default=2.0, help="per round and side")
    p.add_argument("--windows", type=int, default=4)
    p.add_argument("--out", type=Path, help="also write the results file in this folder")
    p.add_argument("--name", default="compare_revisions", help="results file name without .md")
    p.add_argument(
        "--train",
        default="",
        help="compare training instead: comma-separated algo or algo:shield (e.g. mappo,"
        "srole:regional; without a shield, the algorithm's default)",
    )
    p.add_argument("--updates", type=int, default=10, help="PPO updates per training round")
    p.add_argument(
        "--whole-run",
        action="store_true",
        help="with --train: time each tree's default train.py run end to end, both at once",
    )
    args = p.parse_args(argv)
    if args.train and args.updates < 1:
        p.error(f"--updates={args.updates} is not allowed; use 1 or more")
    if args.whole_run and not args.train:
        p.error("--whole-run needs --train (the algorithms whose default runs to time)")
    rep = Report(args.name, str(args.out or ""))
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(old), args.rev],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            if args.whole_run:
                _compare_whole_runs(rep, args, old)
            elif args.train:
                _compare_training(rep, args, old)
            else:
                _compare_envs(rep, args, old)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, capture_output=True
            )
    rep.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
