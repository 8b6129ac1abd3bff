"""``benchmarks/train_throughput.py``: one short run through the real runner, its report."""

from __future__ import annotations

import sys

import pytest
from conftest import import_benchmark


@pytest.fixture(scope="module")
def tt():
    return import_benchmark("train_throughput")


@pytest.fixture
def torch_threads_kept():
    """The runner sets torch's global thread count; give the next test the one it had."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def run_configs(tt, monkeypatch):
    """The configs of the runs the benchmark starts (each still runs)."""
    seen = []
    real_run = tt.run

    def run(cfg):
        seen.append(cfg)
        return real_run(cfg)

    monkeypatch.setattr(tt, "run", run)
    return seen


def test_reports_rates_and_the_threads_used(tt, monkeypatch, capsys, tmp_path, torch_threads_kept):
    argv = ["train_throughput.py", "--env", "edge10", "--updates", "1", "--threads", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path)])
    tt.main()
    out = capsys.readouterr().out
    assert "mappo on edge10, 1 updates of" in out and "2 torch thread(s)" in out
    assert "agent-decisions/s:" in out
    assert (tmp_path / "train_throughput_mappo_edge10_threads2.md").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threads", "0"], "--threads=0 is not allowed"),
        (["--collision-mode", "perfect"], "perfect"),
    ],
)
def test_rejects_bad_arguments(tt, monkeypatch, capsys, args, message):
    monkeypatch.setattr(sys, "argv", ["train_throughput.py", *args])
    with pytest.raises(SystemExit):
        tt.main()
    assert message in capsys.readouterr().err


def test_collision_mode_reaches_the_run_and_names_the_file(
    tt, monkeypatch, capsys, tmp_path, torch_threads_kept, run_configs
):
    argv = ["train_throughput.py", "--env", "edge10", "--updates", "1"]
    monkeypatch.setattr(
        sys, "argv", [*argv, "--collision-mode", "timeshare", "--out", str(tmp_path)]
    )
    tt.main()
    assert [dict(c.env.overrides) for c in run_configs] == [{"collision_mode": "timeshare"}]
    assert "collision_mode=timeshare" in capsys.readouterr().out
    assert (tmp_path / "train_throughput_mappo_edge10_timeshare.md").is_file()


def test_srole_runs_with_its_shield_and_names_the_file(
    tt, monkeypatch, capsys, tmp_path, torch_threads_kept, run_configs
):
    argv = ["train_throughput.py", "--algo", "srole", "--env", "edge10", "--updates", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path)])
    tt.main()
    # srole's default shield and its conf/algo settings (preemptive training)
    seen = [(c.algo.name, c.shield.name, c.algo.shield_training) for c in run_configs]
    assert seen == [("srole", "central", "preemptive")]
    assert "shield=central" in capsys.readouterr().out
    assert (tmp_path / "train_throughput_srole_edge10_central.md").is_file()


def test_algo_settings_read_the_default_shield_from_conf(tt, tmp_path):
    own, shield = tt.algo_settings("srole")
    assert shield == "central" and own.shield_training == "preemptive"
    assert tt.algo_settings("mappo")[1] == "none"
    # another checkout's conf/algo (compare_revisions --train): its own default
    (tmp_path / "conf" / "algo").mkdir(parents=True)
    (tmp_path / "conf" / "algo" / "srole.yaml").write_text(
        "defaults:\n  - override /shield@_global_.shield: regional\n  - _self_\nlr: 0.1\n"
    )
    own, shield = tt.algo_settings("srole", tmp_path)
    assert shield == "regional" and own.lr == 0.1 and "defaults" not in own


def test_sweep_measures_each_value_in_alternating_rounds(
    tt, monkeypatch, capsys, tmp_path, torch_threads_kept, run_configs
):
    argv = ["train_throughput.py", "--algo", "dqn_central", "--env", "edge10", "--updates", "1"]
    monkeypatch.setattr(
        sys, "argv", [*argv, "--sweep", "copies=1,2", "--rounds", "2", "--out", str(tmp_path)]
    )
    tt.main()
    assert [int(c.algo.copies) for c in run_configs] == [1, 2, 1, 2]
    out = capsys.readouterr().out
    assert "algo.copies in [1, 2], 2 alternating round(s)" in out
    assert "1.00x" in out  # the first value's ratio to itself
    assert (tmp_path / "train_throughput_dqn_central_edge10_sweep_copies.md").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--sweep", "copies=4"], "need KEY=V1,V2"), (["--rounds", "0"], "--rounds=0")],
)
def test_rejects_a_bad_sweep(tt, monkeypatch, capsys, args, message):
    monkeypatch.setattr(sys, "argv", ["train_throughput.py", *args])
    with pytest.raises(SystemExit):
        tt.main()
    assert message in capsys.readouterr().err
