"""Environment throughput of this checkout against another git revision, measured in one run.

Checks out ``--rev`` into a temporary git worktree, then alternates between the two trees
(old, new, old, new ...), each time running ``env_throughput``'s array, dict or batched
benchmark of that tree in a fresh subprocess (batched: ``default_copies`` of the scenario
unless ``--copies``). Alternating in one run is what makes the ratio meaningful
on a shared machine whose speed drifts between minutes; each side's best round is reported
(as ``timeit`` does), and the ratio new / old.

Usage::

    python benchmarks/compare_revisions.py --rev ef6c34d
    python benchmarks/compare_revisions.py --rev ef6c34d --scenarios edge50 --rounds 5
    python benchmarks/compare_revisions.py --rev ef6c34d --out benchmarks/results
    python benchmarks/compare_revisions.py --rev 9842e12 --paths array,batched
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report  # benchmarks/ is a folder of scripts, not a package

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
        path: ``"array"``, ``"dict"`` or ``"batched"``.
        name: the scenario.
        seconds: measuring time, split into ``windows`` windows (the best one counts).
        windows: see ``seconds``.
        copies: the batched path's copies (0: ``env_throughput.default_copies``).
    """
    if path not in ("array", "dict", "batched"):
        raise ValueError(f"path={path!r} is not allowed; use array, dict or batched")
    code = _SNIPPET.format(
        tree=str(tree), path=path, name=name, seconds=seconds, windows=windows, copies=copies
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, check=True, capture_output=True, text=True
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])[1])


def main(argv: list[str] | None = None) -> int:
    """Print (and optionally write) the new/old agent-decisions/s per scenario and path."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rev", required=True, help="the git revision to compare against")
    p.add_argument("--scenarios", default="edge10,edge50,edge100,edge500,tapfinger-hetero6")
    p.add_argument("--paths", default="array,dict", help="comma-separated: array, dict, batched")
    p.add_argument("--copies", type=int, default=0, help="batched copies (0: the default)")
    p.add_argument("--rounds", type=int, default=3, help="alternations per measurement")
    p.add_argument("--seconds", type=float, default=2.0, help="per round and side")
    p.add_argument("--windows", type=int, default=4)
    p.add_argument("--out", type=Path, help="also write the results file in this folder")
    p.add_argument("--name", default="compare_revisions", help="results file name without .md")
    args = p.parse_args(argv)
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
            rep.print(f"old: {args.rev}  new: this checkout (agent-decisions/s, best of rounds)")
            rep.print(f"{'scenario':20s} {'path':6s} {'old':>12s} {'new':>12s} {'new/old':>8s}")
            for name in args.scenarios.split(","):
                for path in args.paths.split(","):
                    best = {"old": 0.0, "new": 0.0}
                    for _ in range(args.rounds):
                        for side, tree in (("old", old), ("new", ROOT)):
                            rate = measure(
                                tree, path, name, args.seconds, args.windows, args.copies
                            )
                            best[side] = max(best[side], rate)
                    rep.print(
                        f"{name:20s} {path:6s} {best['old']:12,.0f} {best['new']:12,.0f} "
                        f"{best['new'] / best['old']:8.3f}"
                    )
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, capture_output=True
            )
    rep.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
