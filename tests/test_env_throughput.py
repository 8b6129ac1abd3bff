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


def _windows(log, label, rates):
    """A set-up whose windows log their order and yield (rate steps, 1 s)."""

    def make():
        for r in rates:
            log.append(label)
            yield r, 1.0

    return make


def test_interleaved_windows_alternate_the_order_after_one_unkept_window(et):
    log = []
    got = et.interleaved_windows(
        [_windows(log, "a", [99, 1, 2, 3]), _windows(log, "b", [9, 4, 5, 6])], 3
    )
    # one warm-up window each, then a b, b a, a b
    assert log == ["a", "b", "a", "b", "b", "a", "a", "b"]
    assert got == [[(1, 1.0), (2, 1.0), (3, 1.0)], [(4, 1.0), (5, 1.0), (6, 1.0)]]


def test_window_ratio_pairs_the_windows(et):
    first = [(100, 1.0), (200, 1.0), (50, 1.0)]
    # each window of the other set-up at 0.9x its partner, whatever the drift between pairs
    other = [(90, 1.0), (180, 1.0), (45, 1.0)]
    assert et.window_ratio(first, other) == "0.900 [0.900, 0.900]"
    # the best windows' ratio would hide a pair in which the other side is slower
    text = et.window_ratio(first, [(100, 1.0), (100, 1.0), (50, 1.0)])
    value, low, high = (
        float(x) for x in text.replace("[", "").replace("]", "").replace(",", "").split()
    )
    assert value < 1.0 and low < value < high <= 1.0


def test_collision_modes_report_the_paired_ratio(et, monkeypatch, capsys):
    argv = ["env_throughput.py", "--scenarios", "edge10", "--seconds", "0.2", "--windows", "2"]
    monkeypatch.setattr(
        sys, "argv", [*argv, "--copies", "2", "--collision-modes", "timeshare", "measured"]
    )
    et.main()
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "paired over windows" in x)
    assert "edge10[measured] / timeshare" in line
    assert "array " in line and "dict " in line and "batched " in line
