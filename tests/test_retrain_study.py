"""``benchmarks/retrain_study.py``: retrained entries against their records at a git revision."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import import_benchmark
from test_leaderboard import _fixture_rows, _write


@pytest.fixture(scope="module")
def study():
    return import_benchmark("retrain_study")


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def test_compares_changed_entries_with_their_records_at_a_revision(study, tmp_path, monkeypatch):
    results = tmp_path / "leaderboards" / "results"
    results.mkdir(parents=True)
    rows = _fixture_rows()
    _write(results / "edge10.jsonl", rows)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "old")
    # mappo retrained: twice the budget, half the JCT on every workload; ippo unchanged
    new = json.loads(json.dumps(rows))
    for r in new:
        if r["algo"] == "mappo":
            r["train"] = {**r["train"], "env_steps": 128, "updates": 4}
            for e in r["per_episode"]:
                e["jct_mean"] *= 0.5
    _write(results / "edge10.jsonl", new)
    out = tmp_path / "out"
    argv = ["retrain_study", "--rev", "HEAD", "--boards", "edge10", "--root", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", [*argv, "--name", "r", "--out", str(out)])
    study.main()
    text = (out / "r.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("| edge10 | mappo |"))
    assert line.startswith("| edge10 | mappo | 64 (2 updates) | 128 (4 updates) | 3 / 3 |")
    # half of every run's JCT; the runs differ among themselves, and the interval resamples
    # them (studies.paired_reduction), so it brackets 50% without being a point
    low, high = (
        float(x) for x in re.search(r"50\.0% lower \[([0-9.]+)%, ([0-9.]+)%\]", line).groups()
    )
    assert low < 50.0 < high
    assert "| edge10 | ippo |" not in text  # unchanged records are left out
    # nothing changed: nothing to compare
    _write(results / "edge10.jsonl", rows)
    with pytest.raises(SystemExit, match="no learned entry"):
        study.main()
    monkeypatch.setattr(sys, "argv", [*argv[:4], "edge99", *argv[5:]])
    with pytest.raises(SystemExit, match="--boards: 'edge99'"):
        study.main()
