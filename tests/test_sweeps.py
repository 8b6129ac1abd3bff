"""Sweeps (DESIGN §5): ``train.py -m`` through the joblib launcher (default suite) and the Ray
launcher on a local Ray instance (slow; needs the ``ray`` extra, which lives in its own
environment because of its cloudpickle pin: ``.ci/run_ray``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["algo=mappo,ippo", "env=edge10", "experiment=smoke", "seed=0"]


def _sweep(python: str, extra: list[str], out: Path, timeout: float) -> None:
    proc = subprocess.run(
        [python, str(ROOT / "train.py"), "-m", *extra, *SWEEP, f"output_dir={out}"],
        capture_output=True,
        text=True,
        cwd=out.parent,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    evals = sorted((out / "multirun").rglob("eval.json"))
    assert len(evals) == 2, sorted(out.rglob("*"))
    algos = set()
    for path in evals:
        run_dir = path.parent
        assert (run_dir / "config.yaml").is_file() and (run_dir / "metrics.jsonl").is_file()
        json.loads(path.read_text())
        algos.add(run_dir.parent.parent.name)
    assert algos == {"mappo_none", "ippo_none"}


def test_joblib_sweep_runs_two_jobs(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    _sweep(sys.executable, [], tmp_path / "results", timeout=300)


def _ray_python() -> tuple[str | None, str]:
    """A python with the Ray launcher and edgesched: this one, else $EDGESCHED_RAY_PYTHON."""
    candidates = [sys.executable]
    if os.environ.get("EDGESCHED_RAY_PYTHON"):
        candidates.append(os.environ["EDGESCHED_RAY_PYTHON"])
    for python in candidates:
        probe = subprocess.run(
            [python, "-c", "import hydra_plugins.hydra_ray_launcher, ray, edgesched"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0:
            return python, ""
    return None, (
        f"hydra-ray-launcher not importable in {candidates} (install the `ray` extra in its "
        "own environment, see .ci/run_ray, or set EDGESCHED_RAY_PYTHON)"
    )


@pytest.mark.slow
def test_ray_sweep_runs_two_jobs(tmp_path):
    python, reason = _ray_python()
    if python is None:
        print(f"SKIP ray sweep: {reason}")
        pytest.skip(reason)
    ray_init = [
        "hydra/launcher=ray",
        "+hydra.launcher.ray.init.num_cpus=2",
        "+hydra.launcher.ray.init.include_dashboard=false",
    ]
    _sweep(python, ray_init, tmp_path / "results", timeout=600)
