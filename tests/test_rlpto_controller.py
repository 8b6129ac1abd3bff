"""``benchmarks/rlpto_controller.py``: one row per RLPTO run from a real (tiny) trained
policy and its record, the fixed rules once per scenario, other algorithms' runs skipped."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import import_benchmark
from test_training import make_cfg

pytest.importorskip("torch")

from edgesched.experiment import run


@pytest.fixture(scope="module")
def rc():
    return import_benchmark("rlpto_controller")


def _train(folder, algo: str, seed: int, variant: str = "") -> dict:
    cfg = make_cfg(folder, algo=algo, env="edge10", seed=seed)
    cfg.algo.variant = variant
    cfg.env.overrides = {"max_slots": 20, "max_steps": 200}
    run(cfg)
    return json.loads((folder / "eval.json").read_text())


def test_rows_per_run_and_rules_once_per_scenario(rc, tmp_path, monkeypatch, capsys):
    root = tmp_path / "runs"
    recs = [_train(root / "variant" / f"seed{s}", "rlpto", s) for s in (0, 1)]
    _train(root / "other" / "seed0", "mappo", 0)  # not an RLPTO run: no row
    argv = ["rlpto_controller.py", "--runs", str(root), "--seeds", "1", "--rules"]
    monkeypatch.setattr(sys, "argv", [*argv, "--rule-seeds", "1", "--out", str(tmp_path)])
    rc.main()
    lines = capsys.readouterr().out.splitlines()
    rows = [x for x in lines if x.startswith("variant seed")]
    assert [r.split()[:3] for r in rows] == [["variant", "seed", "0"], ["variant", "seed", "1"]]
    for row, rec in zip(rows, recs, strict=True):
        cells = row.split()
        # the record's held-out JCT and cluster reward close the row
        assert float(cells[-2]) == pytest.approx(rec["summary"]["jct_mean"], abs=0.006)
        assert float(cells[-1]) == pytest.approx(rec["summary"]["rlpto_reward"], abs=0.06)
        shares = [float(c) for c in cells[3:8]]  # dec/call, grow, keep, shrink, always-grow
        assert all(0.0 <= v <= 1.0 for v in shares)
    rules = [x for x in lines if x.startswith("rule ")]
    assert len(rules) == 3 and all("(edge10-v" in x for x in rules)  # one scenario: once
    assert not any(x.startswith("other") for x in lines)
    assert "variant seed 1" in (tmp_path / "rlpto_controller.md").read_text()


def test_variant_runs_count_and_no_run_is_refused(rc, tmp_path, monkeypatch, capsys):
    root = tmp_path / "runs"
    rec = _train(root / "b2400k" / "seed0", "rlpto", 0, variant="b2400k")
    assert rec["algo"] == "rlpto-b2400k"
    monkeypatch.setattr(
        sys,
        "argv",
        ["rlpto_controller.py", "--runs", str(root), "--seeds", "1", "--out", str(tmp_path)],
    )
    rc.main()
    assert any(x.startswith("b2400k seed 0") for x in capsys.readouterr().out.splitlines())
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "none"
    monkeypatch.setattr(
        sys, "argv", ["rlpto_controller.py", "--runs", str(empty), "--out", str(out)]
    )
    with pytest.raises(SystemExit, match="no finished RLPTO run"):
        rc.main()
    assert not (out / "rlpto_controller.md").exists()


def test_committed_records_are_rolled_out_from_the_policies_they_name(
    rc, tmp_path, monkeypatch, capsys
):
    folder = tmp_path / "run" / "seed3"
    rec = _train(folder, "rlpto", 3)
    # as `leaderboard collect` writes it: the record names its policy file
    results = tmp_path / "edge10_rlpto.jsonl"
    other = {**rec, "algo": "mappo", "policy": "elsewhere.pt"}  # not RLPTO: skipped, unread
    lines = [{**rec, "policy": str(folder / "policy.pt")}, other]
    results.write_text("".join(json.dumps(r) + "\n" for r in lines))
    argv = ["rlpto_controller.py", "--results", str(results), "--seeds", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path)])
    rc.main()
    out = capsys.readouterr().out.splitlines()
    rows = [x for x in out if x.startswith("rlpto_none seed 3")]
    assert len(rows) == 1
    assert float(rows[0].split()[-2]) == pytest.approx(rec["summary"]["jct_mean"], abs=0.006)
    assert any(x.startswith("machine:") and f"records in {results}" in x for x in out)
    # a record whose policy file is missing is refused before anything is written
    results.write_text(json.dumps({**rec, "policy": str(tmp_path / "gone.pt")}) + "\n")
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path / "missing")])
    with pytest.raises(SystemExit, match=r"gone\.pt"):
        rc.main()
    assert not (tmp_path / "missing" / "rlpto_controller.md").exists()
    results.write_text(json.dumps(other) + "\n")  # no RLPTO record at all
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path / "none")])
    with pytest.raises(SystemExit, match="no record of rlpto"):
        rc.main()
