"""``benchmarks/tapfinger_budget.py``: reading runs and aggregating their curves."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import import_benchmark


@pytest.fixture(scope="module")
def study():
    return import_benchmark("tapfinger_budget")


def _curve(points: dict[int, list[float]], every: int = 30, seeds=(10000, 10001)) -> dict:
    return {
        "every": every,
        "seeds": list(seeds),
        "points": [{"env_steps": s, "per_seed": v} for s, v in points.items()],
    }


def _run(seed: int, curve: dict, scenario: str = "tapfinger-hetero6-v0") -> dict:
    return {"train_seed": seed, "scenario": scenario, "curve": curve, "_dir": f"r{seed}"}


def test_runs_with_a_curve_are_read_with_how_they_trained(study, tmp_path):
    for name, curve, wc in (("a", _curve({10: [1.0, 2.0]}), True), ("b", None, False)):
        d = tmp_path / name
        d.mkdir()
        rec = {"train_seed": 0, "curve": curve}
        (d / "eval.json").write_text(json.dumps(rec))
        (d / "config.yaml").write_text(yaml.safe_dump({"algo": {"work_conserving": wc}}))
    (run,) = study.load_runs(tmp_path)  # b recorded no curve
    assert run["_dir"] == str(tmp_path / "a") and run["_wc"] is True
    assert study.label(run) == "seed 0 (trained work-conserving)"
    assert study.label({**run, "_wc": False}) == "seed 0"


def test_aggregate_keeps_the_shared_points_and_averages_over_runs(study):
    a = _run(0, _curve({10: [4.0, 6.0], 20: [2.0, 2.0], 30: [1.0, 1.0]}))
    b = _run(1, _curve({10: [6.0, 8.0], 20: [4.0, 4.0]}))  # stopped earlier
    seeds, points = study.aggregate([a, b])
    assert seeds == [10000, 10001]
    assert [s for s, _, _ in points] == [10, 20]
    _, est, per_run = points[0]
    assert per_run == [5.0, 7.0]
    assert est.value == pytest.approx(6.0) and est.low <= 6.0 <= est.high
    assert points[1][1].value == pytest.approx(3.0)


@pytest.mark.parametrize(
    "other",
    [
        {"curve": _curve({10: [1.0, 1.0]}, every=60)},
        {"curve": _curve({10: [1.0, 1.0]}, seeds=(10000, 10002))},
        {"scenario": "tapfinger-hetero6-lam2-v0"},
    ],
)
def test_runs_of_another_protocol_are_refused(study, other):
    a = _run(0, _curve({10: [1.0, 1.0]}))
    b = {**_run(1, _curve({10: [1.0, 1.0]})), **other}
    with pytest.raises(SystemExit, match="aggregate runs of one protocol only"):
        study.aggregate([a, b])


def test_per_seed_means_over_a_seeds_episodes(study):
    rows = [
        {"eval_seed": 10000, "jct_mean": 2.0},
        {"eval_seed": 10000, "jct_mean": 4.0},
        {"eval_seed": 10001, "jct_mean": 5.0},
    ]
    got = study.per_seed({"per_episode": rows})
    assert got == {10000: 3.0, 10001: 5.0}
