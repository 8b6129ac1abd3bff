"""``benchmarks/compare_revisions.py``: each path measures the given tree's benchmark."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import import_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cr():
    return import_benchmark("compare_revisions")


@pytest.mark.parametrize(("path", "copies"), [("array", 0), ("dict", 0), ("batched", 4)])
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
