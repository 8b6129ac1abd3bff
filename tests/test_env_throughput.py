"""``benchmarks/env_throughput.py``: its report lines and its argument checks."""

from __future__ import annotations

import sys

import pytest
from conftest import import_benchmark


@pytest.fixture(scope="module")
def et():
    return import_benchmark("env_throughput")


def test_default_copies_is_a_power_of_two_within_the_caps(et):
    assert et.default_copies(50) == 32
    assert et.default_copies(6) == 64
    assert et.default_copies(500) == 4
    assert et.default_copies(5000) == 1


def test_report_has_each_path_and_the_extra_copy_counts(et, monkeypatch, capsys):
    argv = ["env_throughput.py", "--scenarios", "edge10", "--seconds", "0.2", "--windows", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--copies", "4", "--extra-copies", "2"])
    et.main()
    out = capsys.readouterr().out
    assert "edge10: batched / one copy (array)" in out
    assert "edge10: batched at 2 copies" in out


def test_rejects_zero_extra_copies(et, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["env_throughput.py", "--extra-copies", "0"])
    with pytest.raises(SystemExit):
        et.main()
    assert "--extra-copies=0 is not allowed" in capsys.readouterr().err


def test_the_mean_rate_counts_the_windows_a_best_window_leaves_out(et):
    # a burst of resets makes one slow window: the best window drops it, the mean keeps it
    windows = [(100, 1.0), (100, 1.0), (100, 3.0)]
    assert et._best_rate(windows, agents=2) == (100.0, 200.0)
    assert et._mean_rate(windows, agents=2) == (60.0, 120.0)


def test_the_mean_flag_is_reported(et, monkeypatch, capsys):
    argv = ["env_throughput.py", "--scenarios", "edge10", "--seconds", "0.2", "--windows", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--copies", "2", "--mean"])
    et.main()
    assert "rates over all 2 windows of each path (--mean)" in capsys.readouterr().out
