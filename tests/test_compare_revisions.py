"""``benchmarks/compare_revisions.py``: each path measures the given tree's benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import import_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cr():
    return import_benchmark("compare_revisions")


@pytest.mark.parametrize(
    ("path", "copies"),
    [("array", 0), ("dict", 0), ("batched", 4), ("central", 0), ("reset", 4)],
)
def test_measure_runs_the_trees_benchmark(cr, path, copies):
    rate = cr.measure(ROOT, path, "edge10", seconds=0.2, windows=1, copies=copies)
    assert rate > 0


def test_measure_rejects_an_unknown_path(cr):
    with pytest.raises(ValueError, match="path='vector' is not allowed"):
        cr.measure(ROOT, "vector", "edge10", seconds=0.2, windows=1)


def test_measure_training_runs_the_trees_runner(cr):
    rate = cr.measure_training(ROOT, "mappo", "none", "edge10", updates=1)
    assert rate > 0


def test_training_mode_rejects_zero_updates(cr, capsys):
    with pytest.raises(SystemExit):
        cr.main(["--rev", "HEAD", "--train", "mappo", "--updates", "0"])
    assert "--updates=0 is not allowed" in capsys.readouterr().err


def test_a_scenario_item_names_each_sides_scenario(cr):
    # a revision from before scenario versions knows edge50-v0 only as "edge50"
    old = Path("/old")
    assert cr._names("edge50-v0=edge50", old) == {cr.ROOT: "edge50-v0", old: "edge50"}
    assert cr._names("edge10", old) == {cr.ROOT: "edge10", old: "edge10"}


def test_each_side_runs_its_own_name(cr, monkeypatch):
    seen = []

    def fake(tree, algo, shield, name, updates):
        seen.append((tree == cr.ROOT, name))
        return 1.0

    monkeypatch.setattr(cr, "measure_training", fake)
    args = type("A", (), {"rev": "x", "updates": 1, "rounds": 1, "train": "mappo"})()
    args.scenarios = "edge50-v0=edge50"
    rep = type("R", (), {"print": lambda self, line: None})()
    cr._compare_training(rep, args, Path("/old"))
    assert seen == [(False, "edge50"), (True, "edge50-v0")]


def test_whole_runs_times_each_trees_train_py(cr, tmp_path):
    wall = cr.whole_runs({ROOT: ("mappo", None, "edge10")}, tmp_path, ("experiment=smoke",))
    assert set(wall) == {ROOT} and wall[ROOT] > 0
    # the run wrote its files where it was told, and its output went to the log
    assert list((tmp_path / "0" / "runs" / "edge10").glob("mappo_none/seed0/*/eval.json"))
    assert "held-out evaluation" in (tmp_path / "0.log").read_text()


def test_whole_runs_reports_a_failed_run(cr, tmp_path):
    with pytest.raises(RuntimeError, match=r"exited with .*no such algo option"):
        cr.whole_runs({ROOT: ("mapo", None, "edge10")}, tmp_path, ("experiment=smoke",))


def test_whole_run_needs_train(cr, capsys):
    with pytest.raises(SystemExit):
        cr.main(["--rev", "HEAD", "--whole-run"])
    assert "--whole-run needs --train" in capsys.readouterr().err


def test_rounds_alternate_which_side_goes_first(cr):
    order = []

    def rate(tree):
        order.append("new" if tree == cr.ROOT else "old")
        return 2.0 if tree == cr.ROOT else 1.0

    olds, news = cr._rounds(4, Path("/old"), rate)
    assert order == ["old", "new", "new", "old", "old", "new", "new", "old"]
    assert olds == [1.0] * 4 and news == [2.0] * 4


def test_the_paired_ratio_is_the_geometric_mean_of_the_rounds_ratios(cr):
    value, low, high = cr.paired_ratio([1.0, 2.0, 4.0], [2.0, 2.0, 2.0])
    # ratios 2, 1, 0.5: their geometric mean is 1
    assert value == pytest.approx(1.0)
    assert 0.5 <= low < 1.0 < high <= 2.0
    # reproducible (a seeded bootstrap)
    assert cr.paired_ratio([1.0, 2.0, 4.0], [2.0, 2.0, 2.0]) == (value, low, high)
    # identical ratios: a zero-width interval; one round: no interval
    assert cr.paired_ratio([1.0, 2.0], [0.9, 1.8]) == pytest.approx((0.9, 0.9, 0.9))
    one = cr.paired_ratio([1.0], [1.1])
    assert one[0] == pytest.approx(1.1) and np.isnan(one[1]) and np.isnan(one[2])


def test_each_row_reports_the_best_and_the_paired_ratio(cr, monkeypatch):
    lines = []
    rates = iter([100.0, 90.0, 96.0, 100.0, 100.0, 95.0])  # old, new, new, old, old, new

    monkeypatch.setattr(cr, "measure", lambda *a, **k: next(rates))
    args = type("A", (), {})()
    args.rev, args.scenarios, args.paths, args.rounds = "x", "edge10", "dict", 3
    args.seconds, args.windows, args.copies = 0.1, 1, 0
    rep = type("R", (), {"print": lambda self, line: lines.append(line)})()
    cr._compare_envs(rep, args, Path("/old"))
    row = lines[-1].split()
    assert row[:5] == ["edge10", "dict", "100", "96", "0.960"]
    # rounds' ratios 0.90, 0.96, 0.95
    assert float(row[5]) == pytest.approx((0.90 * 0.96 * 0.95) ** (1 / 3), abs=5e-4)
