"""``benchmarks/mask_layout.py``: both layouts built, compared on equal states, reported."""

from __future__ import annotations

import pytest
from conftest import import_benchmark

from edgesched.envs import observe


@pytest.fixture(scope="module")
def ml():
    return import_benchmark("mask_layout")


def test_each_simulator_gets_the_layout_it_was_built_for(ml):
    kept = observe.SMALL_MASK_CELLS
    assert ml._build("edge10-v0", 1, 1 << 62)._mask_small
    assert not ml._build("edge10-v0", 1, 0)._mask_small
    assert not ml._build("edge10-v0", 2, 0)._mask_small
    assert kept == observe.SMALL_MASK_CELLS  # the module's threshold is restored


def test_report_rows_name_the_cells_and_the_layout_used(ml, capsys, tmp_path):
    ml.main(["--cases", "edge10-v0:1", "edge10:4", "--rounds", "2", "--refreshes", "3"])
    out = capsys.readouterr().out
    assert "| edge10-v0 | 1 | 50 |" in out and out.count("| first |") == 1
    assert "| edge10 | 4 | 800 |" in out
    rows = [r for r in out.splitlines() if r.startswith("| edge")]
    assert all(float(r.split("|")[6]) > 0 for r in rows)  # first / last ratio
