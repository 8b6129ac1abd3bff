"""``benchmarks/jct_decomposition.py``: the per-job log adds up to the leaderboard's JCT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import import_benchmark

from edgesched.baselines import make_baseline
from edgesched.experiment.evaluation import evaluate_scheduler, load_policy, make_eval_sim
from edgesched.policy import EnvSpec
from edgesched.protocol import eval_workload_seed
from edgesched.shields import make_shield

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def jd():
    return import_benchmark("jct_decomposition")


def _log(jd, wait, run, gpus, model, fit=10, defer=0):
    wait, run = np.asarray(wait, float), np.asarray(run, float)
    return jd.EpisodeLog(
        wait=wait,
        run=run,
        gpus=np.asarray(gpus, float),
        cpus=np.asarray(gpus, float) * 2,
        model=np.asarray(model),
        fit_decisions=fit,
        defers_with_fit=defer,
        proposed_defers_with_fit=defer,
        jct_mean=float(np.mean(wait + run)),
    )


def test_heuristic_log_matches_the_leaderboard_evaluation(jd):
    """Same episode as evaluate_scheduler: its JCT, and each job's wait + run sums to it."""
    sim = make_eval_sim("edge10")
    policy = make_baseline("least_loaded", EnvSpec.of(sim))
    log = jd.play_logged(policy, sim, eval_workload_seed(10000, 0))
    ref = evaluate_scheduler(policy, "edge10", None, [10000], 1)["per_episode"][0]
    assert log.jct_mean == pytest.approx(ref["jct_mean"], abs=1e-12)
    assert np.mean(log.wait + log.run) == pytest.approx(ref["jct_mean"], abs=1e-9)
    assert len(log.wait) == ref["jobs_done"] + ref["jobs_unfinished"]
    assert (log.wait >= 0).all() and (log.run >= 0).all()
    started = np.isfinite(log.gpus)
    assert started.any() and (log.cpus[started] > 0).all()
    # least_loaded places whenever a placement fits: it never defers with one available
    assert log.fit_decisions > 0 and log.defers_with_fit == 0
    assert log.proposed_defers_with_fit == 0  # no shield: the proposal is what ran


def test_random_defers_with_a_fit_sometimes(jd):
    sim = make_eval_sim("edge10")
    log = jd.play_logged(
        make_baseline("random", EnvSpec.of(sim), seed=0), sim, eval_workload_seed(10000, 0)
    )
    assert 0 < log.defers_with_fit < log.fit_decisions
    assert log.proposed_defers_with_fit == log.defers_with_fit


def test_shielded_policy_file_replays_as_recorded(jd):
    """A committed srole policy behind its central shield: the record's JCT, reproduced."""
    path = ROOT / "leaderboards" / "policies" / "edge10" / "srole_central_seed0.pt"
    policy, env, overrides = load_policy(str(path))
    assert policy.shield == "central"
    sim = make_eval_sim(env, overrides)
    sh = make_shield(policy.shield, sim, **policy.shield_kwargs)
    log = jd.play_logged(policy, sim, eval_workload_seed(10000, 0), shield=sh)
    ref = evaluate_scheduler(policy, env, overrides, [10000], 1, "central", policy.shield_kwargs)
    assert log.jct_mean == pytest.approx(ref["per_episode"][0]["jct_mean"], abs=1e-12)
    # the shield keeps every proposed deferral and may defer colliding placements
    assert log.proposed_defers_with_fit <= log.defers_with_fit


def test_summarize_weighs_episodes_equally_and_skips_missing_models(jd):
    a = _log(jd, [1, 3], [2, 2], [1, 3], [0, 1], fit=10, defer=5)
    b = _log(jd, [0, 0, 0, 0], [4, 4, 4, 4], [2, 2, 2, 2], [0, 0, 0, 0], fit=30, defer=0)
    s = jd.summarize([a, b], num_models=2)
    assert s["jct"] == pytest.approx((4.0 + 4.0) / 2)
    assert s["wait"] == pytest.approx((2.0 + 0.0) / 2)
    assert s["run"] == pytest.approx((2.0 + 4.0) / 2)
    assert s["gpus"] == pytest.approx((2.0 + 2.0) / 2)
    assert s["defer"] == pytest.approx(100 * 5 / 40)
    assert s["proposed_defer"] == pytest.approx(100 * 5 / 40)
    # model 1 appears only in episode a: its means come from a alone, its share from both
    assert s["models"][1]["gpus"] == pytest.approx(3.0)
    assert s["models"][1]["wait"] == pytest.approx(3.0)
    assert s["models"][1]["share"] == pytest.approx((50.0 + 0.0) / 2)
    assert s["models"][0]["share"] == pytest.approx((50.0 + 100.0) / 2)
    m = jd.mean_of([s, jd.summarize([b], num_models=2)])
    assert m["run"] == pytest.approx((3.0 + 4.0) / 2)
    assert m["models"][1]["gpus"] == pytest.approx(3.0)  # NaN of the second is skipped


def test_unstarted_jobs_are_excluded_from_allocation_means(jd):
    log = _log(jd, [5, 1], [0, 3], [np.nan, 4], [0, 0])
    s = jd.summarize([log], num_models=1)
    assert s["gpus"] == pytest.approx(4.0)
    assert s["jct"] == pytest.approx(4.5)


def test_policy_files_names_the_entries_there(jd, tmp_path):
    folder = tmp_path / "leaderboards" / "policies" / "b"
    folder.mkdir(parents=True)
    for s in (10, 2):
        (folder / f"x_seed{s}.pt").write_bytes(b"")
    assert [p.name for p in jd.policy_files("b", "x", tmp_path)] == ["x_seed2.pt", "x_seed10.pt"]
    with pytest.raises(FileNotFoundError, match=r"entry='y'.*entries: \['x'\]"):
        jd.policy_files("b", "y", tmp_path)
