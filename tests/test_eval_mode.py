"""``benchmarks/eval_mode.py``: a committed policy evaluated greedy and sampled.

The mode the boards use reproduces the record; the sampled mode is seeded (the same twice),
and differs from the greedy one; a record its policy does not reproduce, and a learner that
evaluates itself, are refused.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import import_benchmark

from edgesched.leaderboard.records import Record

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def em():
    return import_benchmark("eval_mode")


def _record(file: str, algo: str, shield: str, seed: int, n_seeds: int = 1) -> Record:
    """A committed edge10 record cut to its first ``n_seeds`` evaluation seeds (fast)."""
    for i, line in enumerate((ROOT / "leaderboards" / "results" / file).open(), 1):
        d = json.loads(line)
        if (d["algo"], d["shield"], d["train_seed"]) == (algo, shield, seed):
            d["eval_seeds"] = d["eval_seeds"][:n_seeds]
            d["per_episode"] = d["per_episode"][: n_seeds * d["episodes_per_seed"]]
            return Record(d, ROOT / "leaderboards" / "results" / file, i)
    raise LookupError((file, algo, shield, seed))


def test_greedy_reproduces_a_shielded_record_and_sampling_is_seeded(em):
    rec = _record("edge10_learned.jsonl", "srole", "central", 0)
    greedy, sampled = em.evaluate_both(rec, ROOT)
    assert greedy[0] == pytest.approx(rec.data["per_episode"][0]["jct_mean"], abs=1e-9)
    assert np.isfinite(sampled).all() and sampled[0] != greedy[0]
    again = em.evaluate_both(rec, ROOT)
    np.testing.assert_array_equal(again[1], sampled)  # seeded by the workload seed


def test_a_sampled_entry_reproduces_its_record_in_the_sampled_mode(em):
    rec = _record("edge10_tapfinger.jsonl", "tapfinger", "none", 0)
    greedy, sampled = em.evaluate_both(rec, ROOT)
    assert sampled[0] == pytest.approx(rec.data["per_episode"][0]["jct_mean"], abs=1e-9)
    assert np.isfinite(greedy).all()


def test_a_record_its_policy_does_not_reproduce_and_own_view_learners_are_refused(em):
    rec = _record("edge10_learned.jsonl", "mappo", "none", 0)
    wrong = Record(copy.deepcopy(rec.data), rec.source, rec.line)
    wrong.data["per_episode"][0]["jct_mean"] += 1.0
    with pytest.raises(ValueError, match="not the record's policy"):
        em.evaluate_both(wrong, ROOT)
    dqn = _record("edge10_dqn_central.jsonl", "dqn_central", "none", 0)
    with pytest.raises(ValueError, match="own_view"):
        em.evaluate_both(dqn, ROOT)


def test_seed_sampling_restarts_a_ppo_learners_draws():
    from edgesched.algos import algo_config, make_trainer
    from edgesched.envs.handle import resolve_scenario

    spec = resolve_scenario("edge10").spec
    trainer = make_trainer("mappo", algo_config("mappo"), spec, seed=0)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, spec.obs_dim)).astype(np.float32)
    mask = np.ones((64, spec.num_actions), dtype=bool)
    trainer.seed_sampling(7)
    a = trainer.act(obs, mask)[0]
    b = trainer.act(obs, mask)[0]
    trainer.seed_sampling(7)
    np.testing.assert_array_equal(trainer.act(obs, mask)[0], a)
    assert not np.array_equal(a, b)  # the draws go on between restarts


def test_the_table_has_one_row_per_entry_of_a_mixed_file(em, tmp_path):
    recs = [_record("edge10_learned.jsonl", "mappo", "none", s, n_seeds=2) for s in (1, 0)]
    recs.append(_record("edge10_learned.jsonl", "ippo", "none", 0))
    f = tmp_path / "learned.jsonl"
    f.write_text("".join(json.dumps(r.data) + "\n" for r in recs))
    em.main(["--results", str(f), "--root", str(ROOT), "--out", str(tmp_path), "--name", "t"])
    text = (tmp_path / "t.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| edge10")]
    assert len(rows) == 2
    assert "| mappo (none) |" in rows[0] and "| 2 |" in rows[0]
    assert rows[0].index("s0 ") < rows[0].index("s1 ")  # sorted by training seed
    assert ("lower [" in rows[0]) or ("higher [" in rows[0])
    assert "| ippo (none) |" in rows[1] and "| 1 |" in rows[1]


def test_an_entry_split_over_two_files_is_refused(em, tmp_path):
    files = []
    for s in (0, 1):
        f = tmp_path / f"mappo{s}.jsonl"
        f.write_text(json.dumps(_record("edge10_learned.jsonl", "mappo", "none", s).data) + "\n")
        files.append(str(f))
    with pytest.raises(ValueError, match="is in both"):
        em.entries(files)


def test_a_stopped_run_keeps_the_rows_it_finished(em, tmp_path):
    good = tmp_path / "mappo.jsonl"
    good.write_text(json.dumps(_record("edge10_learned.jsonl", "mappo", "none", 0).data) + "\n")
    bad = tmp_path / "dqn.jsonl"
    dqn = _record("edge10_dqn_central.jsonl", "dqn_central", "none", 0)
    bad.write_text(json.dumps(dqn.data) + "\n")
    argv = ["--results", str(good), str(bad), "--root", str(ROOT), "--out", str(tmp_path)]
    with pytest.raises(ValueError, match="own_view"):
        em.main([*argv, "--name", "t"])
    text = (tmp_path / "t.md").read_text()
    assert "| mappo (none) |" in text
    assert "Incomplete: 1 of 2 entries." in text and "Took" not in text
