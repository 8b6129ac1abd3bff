"""``benchmarks/shield_batching.py``: both ways shield the same rounds, and a disagreement
between them stops the benchmark."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import import_benchmark


@pytest.fixture(scope="module")
def sb():
    return import_benchmark("shield_batching")


def test_report_rows_and_results_file(sb, monkeypatch, capsys, tmp_path):
    argv = ["shield_batching.py", "--scenarios", "edge10", "--copies", "3", "--rounds", "6"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path)])
    sb.main()
    out = capsys.readouterr().out
    assert "| edge10 | central | 3 |" in out and "| edge10 | regional | 3 |" in out
    assert "| edge10 | regional | 3 |" in (tmp_path / "shield_batching.md").read_text()


def test_a_batched_shield_that_disagrees_is_caught(sb, monkeypatch):
    from edgesched.shields.central import CentralShield

    real = CentralShield.shield_batch

    def wrong(self, actions, prefs=None, timed=None):
        res = real(self, actions, prefs, timed)
        if self.num_copies > 1:  # the batched shield defers everyone; lone ones do not
            res.actions = np.zeros_like(res.actions)
        return res

    monkeypatch.setattr(CentralShield, "shield_batch", wrong)
    with pytest.raises(AssertionError, match="disagree"):
        sb.measure("edge10", "central", 2, 20)
