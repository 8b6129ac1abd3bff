"""``benchmarks/measured_cost.py``: each mode's row, the comparison line, argument checks."""

from __future__ import annotations

import sys

import pytest
from conftest import import_benchmark


@pytest.fixture(scope="module")
def mc():
    return import_benchmark("measured_cost")


def test_only_the_measured_mode_spends_time_in_the_models_modules(mc):
    t = mc.run("edge10", "timeshare", 30)
    m = mc.run("edge10", "measured", 30)
    assert m["model_share"] > 0.0
    # timeshare reaches colocation.py only through a call that returns at once
    assert t["model_share"] < m["model_share"]
    assert t["steps_s"] > 0 and t["running"] >= 0 and m["queued"] >= 0


def test_report_has_both_modes_and_the_ratio_line(mc, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["measured_cost.py", "--scenarios", "edge10", "--steps", "9"])
    mc.main()
    out = capsys.readouterr().out
    assert "edge10     timeshare" in out and "edge10     measured" in out
    assert "edge10: measured / timeshare steps/s" in out


def test_rejects_too_few_steps(mc, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["measured_cost.py", "--steps", "2"])
    with pytest.raises(SystemExit):
        mc.main()
    assert "--steps=2 is not allowed" in capsys.readouterr().err
