r"""Peak memory of writing a ``dqn_central`` checkpoint: the replay buffer's two formats.

Each measurement runs in a fresh process: it builds the DQN head of a scenario with the
buffer its budget allocates, writes ``--fill`` transitions, then writes one checkpoint
(the trainer's whole state) the way the runner does, and reports the process's peak
resident memory before and after the write (``ru_maxrss``) and the file's size.

* ``pickled``: the format before ``replay_rows`` (the buffer object pickled to one
  ``bytes``, the checkpoint assembled in a ``BytesIO`` and copied out with ``getvalue``);
* ``rows``: today's (the written rows as tensors sharing the buffer's memory, streamed by
  ``torch.save`` into the temporary file).

::

    python benchmarks/checkpoint_memory.py --env tapfinger-hetero6 --budget 1200000 \
        --fill 50000 --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import Report, cpu_name

FORMATS = ("pickled", "rows")


def measure(env: str, budget: int, fill: int, fmt: str) -> dict[str, float]:
    """One measurement in this process (see the module docstring)."""
    import io

    import numpy as np
    import torch

    from edgesched.algos import algo_config, make_trainer
    from edgesched.envs.handle import resolve_scenario
    from edgesched.experiment.io import atomic_write_bytes, atomic_write_with

    handle = resolve_scenario(env)
    tr = make_trainer("dqn_central", algo_config("dqn_central"), handle.spec, seed=0)
    tr.set_budget(budget)
    tr._build(handle.config)
    buf = tr.model.replay_buffer
    rng = np.random.default_rng(0)
    obs = rng.random((1, *tr.model.observation_space.shape), np.float32)
    for i in range(fill):
        buf.add(obs, obs, np.array([[i % 2]]), np.zeros(1), np.zeros(1), [{"advanced": 1}])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    state = tr.state_dict()
    path = Path(tempfile.mkdtemp()) / "last.pt"
    t0 = time.perf_counter()
    if fmt == "pickled":
        del state["replay_rows"]
        state["replay"] = pickle.dumps(buf)
        f = io.BytesIO()
        torch.save({"trainer": state}, f)
        atomic_write_bytes(path, f.getvalue())
    else:
        atomic_write_with(path, lambda f: torch.save({"trainer": state}, f))
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    size = path.stat().st_size / 2**30
    path.unlink()
    return {
        "buffer_gb": sum(a.nbytes for a in vars(buf).values() if hasattr(a, "nbytes")) / 2**30,
        "peak_before_gb": before,
        "peak_after_gb": after,
        "file_gb": size,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> None:
    """Measure each format in its own process; print (and write) the table."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="tapfinger-hetero6")
    p.add_argument("--budget", type=int, default=1_200_000, help="env steps (sizes the buffer)")
    p.add_argument("--fill", type=int, default=50_000, help="transitions written before saving")
    p.add_argument("--one", choices=FORMATS, help=argparse.SUPPRESS)  # the child's job
    p.add_argument("--name", default="checkpoint_memory", help="results file name (no .md)")
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    if args.budget < 1 or args.fill < 0:
        p.error(f"--budget={args.budget} must be >= 1 and --fill={args.fill} >= 0")
    if args.one:
        print(json.dumps(measure(args.env, args.budget, args.fill, args.one)))
        return
    rep = Report(args.name, args.out)
    rep.print(
        f"Machine: {cpu_name()}. dqn_central on {args.env}, buffer sized by a budget of "
        f"{args.budget:,} env steps, {args.fill:,} transitions written; one checkpoint per "
        "format, each in a fresh process. Peak resident memory (ru_maxrss) in GiB."
    )
    rep.print()
    rep.print("| format | buffer allocated | peak before the write | peak after | file | write s |")
    rep.print("|---|---|---|---|---|---|")
    here = Path(__file__).resolve()
    for fmt in FORMATS:
        cmd = [sys.executable, str(here), "--env", args.env, "--budget", str(args.budget)]
        cmd += ["--fill", str(args.fill), "--one", fmt]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        m = json.loads(out.strip().splitlines()[-1])
        rep.print(
            f"| {fmt} | {m['buffer_gb']:.2f} | {m['peak_before_gb']:.2f} | "
            f"{m['peak_after_gb']:.2f} | {m['file_gb']:.2f} | {m['seconds']:.1f} |"
        )
    rep.save()


if __name__ == "__main__":
    main()
