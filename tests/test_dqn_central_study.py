"""``benchmarks/dqn_central_study.py``: one row per variant from its runs' records."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from conftest import import_benchmark


@pytest.fixture(scope="module")
def study():
    return import_benchmark("dqn_central_study")


def _run(folder, seed: int, jct: float, unfinished: float, algo: dict, name="dqn_central"):
    d = folder / f"seed{seed}" / "stamp"
    d.mkdir(parents=True)
    rec = {
        "algo": name,
        "train_seed": seed,
        "scenario": "edge10-v1",
        "summary": {"jct_mean": jct, "jobs_unfinished": unfinished},
    }
    (d / "eval.json").write_text(json.dumps(rec))
    (d / "config.yaml").write_text(yaml.safe_dump({"algo": {"name": name, **algo}}))


def _table(study, monkeypatch, capsys, *runs: str) -> list[str]:
    monkeypatch.setattr(sys, "argv", ["dqn_central_study.py", "--runs", *runs])
    study.main()
    return capsys.readouterr().out.splitlines()


def test_a_variant_row_gives_each_seed_the_mean_and_the_worst(study, tmp_path, monkeypatch, capsys):
    masked = {"discount_unit": "decision", "queue_shaping": 0.0, "action_masking": True,
              "work_conserving": True}  # fmt: skip
    _run(tmp_path / "wc", 1, 30.0, 2.0, masked)
    _run(tmp_path / "wc", 0, 20.0, 4.0, masked)
    _run(tmp_path / "wc", 2, 99.0, 0.0, masked, name="mappo")  # not dqn_central: left out
    _run(tmp_path / "old", 0, 50.0, 8.0, {})  # trained before the options existed
    lines = _table(study, monkeypatch, capsys, f"wc={tmp_path / 'wc'}", f"old={tmp_path / 'old'}")
    wc = next(x for x in lines if x.startswith("wc "))
    assert wc.split()[1:5] == ["decision", "0.0", "yes", "yes"]
    assert "0: 20.00, 1: 30.00" in wc and wc.split()[-3:] == ["25.00", "30.00", "3.0"]
    old = next(x for x in lines if x.startswith("old "))
    assert old.split()[1:5] == ["decision*", "0*", "no", "no"]


def test_a_folder_without_runs_and_a_bad_argument_are_said(study, tmp_path, monkeypatch, capsys):
    lines = _table(study, monkeypatch, capsys, f"none={tmp_path}")
    assert any(x.startswith("none") and "no dqn_central runs" in x for x in lines)
    with pytest.raises(SystemExit):
        _table(study, monkeypatch, capsys, "nolabel")


def test_name_sets_the_results_file(study, tmp_path, monkeypatch, capsys):
    _run(tmp_path / "r", 0, 20.0, 0.0, {"queue_shaping": 1.0})
    out = tmp_path / "out"
    argv = ["dqn_central_study.py", "--runs", f"s={tmp_path / 'r'}", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", [*argv, "--name", "shaping_again"])
    study.main()
    assert (out / "shaping_again.md").is_file() and not (out / "dqn_central_study.md").exists()
