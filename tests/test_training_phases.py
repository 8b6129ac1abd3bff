"""``benchmarks/training_phases.py``: window means of a run's training log."""

from __future__ import annotations

import json
import math

import pytest
from conftest import import_benchmark


@pytest.fixture(scope="module")
def tp():
    return import_benchmark("training_phases")


def _run(folder, n=20):
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("algo: {name: tapfinger}\n")
    rows = [
        {
            "update": u + 1,
            "env_steps": 512 * (u + 1),
            "train_jct_mean": None if u % 4 == 0 else float(u),
            "entropy": 1.0 - u / n,
            "approx_kl": 0.001 * u,
            "clip_frac": 0.5,
            "ent_coef": 0.02 - 0.001 * u,
        }
        for u in range(n)
    ]
    text = "\n".join(json.dumps(r) for r in rows) + '\n{"update": 21, "env_st'  # torn line
    (folder / "metrics.jsonl").write_text(text)
    return rows


def test_window_means_skip_nulls_and_a_torn_last_line(tp, tmp_path):
    _run(tmp_path / "r" / "seed0")
    rows = tp.read_log(tmp_path / "r" / "seed0" / "metrics.jsonl")
    assert len(rows) == 20
    first, last = tp.phases(rows, [0.0, 0.5, 1.0])
    assert first["updates"] == last["updates"] == 10
    # updates 0..9: JCT logged on the ones not divisible by 4 (1,2,3,5,6,7,9)
    assert first["train_jct_mean"] == pytest.approx((1 + 2 + 3 + 5 + 6 + 7 + 9) / 7)
    assert last["approx_kl"] == pytest.approx(0.001 * 14.5)
    assert last["ent_coef"] == pytest.approx(0.02 - 0.019)
    empty = tp.phases(rows, [0.0, 0.01])[0]
    assert empty["updates"] == 0 and math.isnan(empty["entropy"])


def test_report_per_run_and_argument_errors(tp, tmp_path, capsys):
    _run(tmp_path / "runs" / "a" / "seed0")
    (tmp_path / "runs" / "stray").mkdir()
    (tmp_path / "runs" / "stray" / "metrics.jsonl").write_text("{}\n")  # not a run folder
    tp.main(["--runs", str(tmp_path / "runs"), "--windows", "0,0.5,1"])
    out = capsys.readouterr().out
    assert out.count("updates, ") == 1 and "| 0.50-1.00 | 10 |" in out
    with pytest.raises(SystemExit):
        tp.main(["--runs", str(tmp_path / "runs"), "--windows", "0.5,0.2"])
    with pytest.raises(SystemExit):
        tp.main(["--runs", str(tmp_path / "none")])


def test_a_target_kl_run_shows_its_epochs(tp, tmp_path, capsys):
    rows = _run(tmp_path / "runs" / "k" / "seed0", n=8)
    log = tmp_path / "runs" / "k" / "seed0" / "metrics.jsonl"
    log.write_text("\n".join(json.dumps({**r, "ppo_epochs": 4 - (r["update"] > 4)}) for r in rows))
    tp.main(["--runs", str(tmp_path / "runs"), "--windows", "0,0.5,1"])
    out = capsys.readouterr().out
    assert "| PPO epochs |" in out
    assert out.rstrip().splitlines()[-1].endswith("| 3.00 |")  # updates 5..8 stopped early
