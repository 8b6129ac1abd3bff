"""Sample-efficiency curves: held-out evaluations during training (``experiment.curve_every``)
leave training unchanged, land in ``eval.json`` and aggregate on the leaderboards."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_training import make_cfg, read_metrics, without_time

from edgesched.experiment.runner import run


def _train(tmp_path, name, algo, curve_every, **exp):
    cfg = make_cfg(tmp_path / name, algo=algo, total_env_steps=128, **exp)
    cfg.experiment.eval_seeds = [10_000, 10_001]
    cfg.experiment.curve_every = curve_every
    if "learning_starts" in cfg.algo:
        cfg.algo.learning_starts = 16
    if algo == "tapfinger":
        cfg.env.name = "tapfinger-hetero6"
        cfg.env.overrides = {"max_slots": 20, "max_steps": 200}
    summary = run(cfg)
    return summary, tmp_path / name


@pytest.mark.parametrize("algo", ["mappo", "tapfinger", "dqn_central"])
def test_a_curve_does_not_change_training(tmp_path, algo):
    plain, a = _train(tmp_path, "plain", algo, 0)
    curved, b = _train(tmp_path, "curved", algo, 1, curve_seeds=1)

    def results(rows):  # timings (wall time, decisions/s) differ between any two runs
        return [
            {k: v for k, v in r.items() if not k.endswith("_per_s") and k != "heldout_jct_mean"}
            for r in without_time(rows)
        ]

    assert results(read_metrics(b)) == results(read_metrics(a))
    timed = {k for k in plain if "_ms" in k}  # measured latencies differ between runs
    assert {k: v for k, v in curved.items() if k not in timed} == pytest.approx(
        {k: v for k, v in plain.items() if k not in timed}, nan_ok=True
    )
    record = json.loads((b / "eval.json").read_text())
    curve = record["curve"]
    assert curve["every"] == 1 and curve["seeds"] == [10_000] and curve["episodes"] == 1
    updates = [p["update"] for p in curve["points"]]
    assert updates == list(range(1, len(read_metrics(b)) + 1))
    assert [p["env_steps"] for p in curve["points"]] == [r["env_steps"] for r in read_metrics(b)]
    # each point's held-out JCT is logged with its update; the last is the final evaluation
    logged = [r.get("heldout_jct_mean") for r in read_metrics(b)]
    assert logged[:-1] == [p["jct_mean"] for p in curve["points"][:-1]]
    final = [e["jct_mean"] for e in record["per_episode"] if e["eval_seed"] == 10_000]
    assert curve["points"][-1]["per_seed"] == [pytest.approx(np.mean(final))]
    assert "curve" not in json.loads((a / "eval.json").read_text())


def test_curve_settings_are_checked(tmp_path):
    from edgesched.experiment.schema import ExperimentConfigError

    cfg = make_cfg(tmp_path / "bad")
    cfg.experiment.curve_every = -1
    with pytest.raises(ExperimentConfigError, match=r"experiment\.curve_every"):
        run(cfg)


# --------------------------------------------------------------------- leaderboards
def _with_curves(rows, every=2, seeds=(10_000, 10_001)):
    """Fixture records with a curve block: run k's JCT at step s is 100 / s + k + seed."""
    out = []
    for r in rows:
        r = dict(r)
        if r["train_seed"] is not None:
            k = r["train_seed"]
            r["curve"] = {
                "every": every,
                "seeds": list(seeds),
                "episodes": 1,
                "points": [
                    {
                        "update": u,
                        "env_steps": 32 * u,
                        "jct_mean": 0.0,
                        "per_seed": [100.0 / (32 * u) + k + (s - 10_000) for s in seeds],
                    }
                    for u in (2, 4, 6)
                ],
            }
        out.append(r)
    return out


def test_curves_aggregate_over_training_seeds_into_the_board(tmp_path):
    from test_leaderboard import _fixture_rows, _write

    from edgesched.leaderboard.build import build, compute_rows
    from edgesched.leaderboard.records import load_records

    path = _write(tmp_path / "c.jsonl", _with_curves(_fixture_rows()))
    rows = {r.algo: r for r in compute_rows(load_records([path]))}
    c = rows["mappo"].curve
    assert c.every == 2 and c.seeds == (10_000, 10_001) and c.runs == 3
    assert [s for s, _ in c.points] == [64, 128, 192]
    # mean over training seeds 0, 1, 2 and the two curve seeds: 100/s + 1 + 0.5
    for step, est in c.points:
        assert est.value == pytest.approx(100.0 / step + 1.5)
        assert est.low <= est.value <= est.high
    assert rows["random"].curve is None  # heuristics have none
    written = build([path], [], tmp_path / "out")
    md = (tmp_path / "out" / "edge10.md").read_text()
    assert "## Sample efficiency" in md and "| mappo | 3 | 2 | 10000,10001 | 64 |" in md
    assert (tmp_path / "out" / "edge10_curves.png") in written
    # a board without curves has no such section
    build([_write(tmp_path / "p.jsonl", _fixture_rows())], [], tmp_path / "plain", plots=False)
    assert "Sample efficiency" not in (tmp_path / "plain" / "edge10.md").read_text()


def test_training_seeds_with_different_curve_protocols_are_rejected(tmp_path):
    from test_leaderboard import _fixture_rows, _write

    from edgesched.leaderboard.build import build
    from edgesched.leaderboard.records import RecordError

    rows = _with_curves(_fixture_rows())
    mappo = [r for r in rows if r["algo"] == "mappo"]
    mappo[1]["curve"] = {**mappo[1]["curve"], "every": 3}
    with pytest.raises(RecordError, match="must share the curve protocol"):
        build([_write(tmp_path / "x.jsonl", rows)], [], tmp_path / "o", plots=False)
