"""``benchmarks/srole_shield_training.py``: SROLE policies with the shield on and off."""

from __future__ import annotations

import json

import pytest
from conftest import import_benchmark
from test_training import make_cfg

pytest.importorskip("torch")

from edgesched.experiment import run


@pytest.fixture(scope="module")
def study():
    return import_benchmark("srole_shield_training")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny preemptive srole run, laid out as ``output_dir=<root>/pre`` lays it out."""
    root = tmp_path_factory.mktemp("srolestudy")
    run_dir = root / "pre" / "runs" / "edge10" / "srole_central" / "seed0" / "20260101-000000"
    cfg = make_cfg(run_dir, algo="srole", total_env_steps=64)
    cfg.shield.name = "central"
    run(cfg)
    return root, run_dir


def test_runs_are_found_by_variant_and_evaluated_both_ways(study, trained):
    root, run_dir = trained
    assert study.runs_of(root) == {"pre": [run_dir]}
    record = json.loads((run_dir / "eval.json").read_text())
    res = study.evaluate(run_dir)
    assert res["shield"] == "central" and res["train_seed"] == 0
    # behind its shield, the policy scores what the run's own evaluation recorded
    assert res["on"]["jct_mean"] == pytest.approx(record["summary"]["jct_mean"])
    assert res["on"]["collisions_executed"] == 0
    # without one, every proposed collision is executed
    assert res["off"]["collisions_executed"] == res["off"]["collisions_proposed"]


def test_records_name_their_policy_files(study, trained, tmp_path):
    _, run_dir = trained
    record = json.loads((run_dir / "eval.json").read_text())
    record["policy"] = str(run_dir / "policy.pt")  # absolute: joined to the checkout as is
    path = tmp_path / "edge10_srole.jsonl"
    path.write_text(json.dumps(record) + "\n")
    found = study.records_of([path])
    assert list(found) == ["edge10_srole"]
    ((rec, policy),) = found["edge10_srole"]
    assert policy == run_dir / "policy.pt"
    assert study.evaluate_policy(rec, policy) == study.evaluate(run_dir)
