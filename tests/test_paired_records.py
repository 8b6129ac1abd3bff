"""``benchmarks/paired_records.py``: two record sets of one entry each, paired by board."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import import_benchmark
from test_leaderboard import _fixture_rows, _write


@pytest.fixture(scope="module")
def study():
    return import_benchmark("paired_records")


def _entry(rows: list[dict], algo: str, factor: float = 1.0, steps: int | None = None):
    """``algo``'s records, JCT scaled by ``factor`` (and its budget set to ``steps``)."""
    out = [json.loads(json.dumps(r)) for r in rows if r["algo"] == algo]
    for r in out:
        for e in r["per_episode"]:
            e["jct_mean"] *= factor
        if steps is not None:
            r["train"] = {**r["train"], "env_steps": steps}
    return out


def test_pairs_two_runs_of_one_entry_at_two_budgets(study, tmp_path):
    rows = _fixture_rows()
    # the same name on both sides: one table could not hold them (one budget per row)
    longer = _write(tmp_path / "a.jsonl", _entry(rows, "mappo", 0.8, steps=128))
    shorter = _write(tmp_path / "b.jsonl", _entry(rows, "mappo"))
    study.main(["--a", str(longer), "--b", str(shorter), "--name", "p", "--out", str(tmp_path)])
    text = (tmp_path / "p.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("| edge10 |"))
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[1] == "mappo" and cells[3] == "mappo"
    assert cells[2].startswith("128 (") and not cells[4].startswith("128 (")
    assert cells[5] == "3 vs 3"
    # each run of a is 0.8 of a run of b, but the runs differ among themselves: the interval
    # resamples them (studies.paired_reduction), so it brackets 20% without being a point
    value, low, high = (float(x) for x in re.findall(r"-?[0-9.]+", cells[8]))
    assert cells[8].startswith("20.0% lower [") and low < value == 20.0 < high


def test_refuses_a_side_with_several_entries_or_nothing_comparable(study, tmp_path):
    rows = _fixture_rows()
    both = _write(tmp_path / "both.jsonl", _entry(rows, "mappo") + _entry(rows, "ippo"))
    one = _write(tmp_path / "one.jsonl", _entry(rows, "mappo"))
    with pytest.raises(SystemExit, match=r"--a: board 'edge10' holds 2 entries \(ippo, mappo\)"):
        study.main(["--a", str(both), "--b", str(one)])
    other = _entry(rows, "ippo")
    for r in other:
        r["eval_seeds"] = [s + 1 for s in r["eval_seeds"]]
        for e in r["per_episode"]:
            e["eval_seed"] += 1
    moved = _write(tmp_path / "moved.jsonl", other)
    with pytest.raises(SystemExit, match="other seeds: edge10"):
        study.main(["--a", str(moved), "--b", str(one)])
    with pytest.raises(SystemExit, match=r"--b: .*nowhere"):
        study.main(["--a", str(one), "--b", str(tmp_path / "nowhere.jsonl")])


def test_a_side_may_name_a_file_at_a_commit(study, tmp_path):
    """``REV:path`` reads records a board has since replaced from the commit that held them."""
    root = Path(__file__).resolve().parents[1]
    rel = "leaderboards/results/tapfinger-hetero6-lam2_tapfinger-noclip.jsonl"
    rev = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    study.main(
        ["--a", str(root / rel), "--b", f"{rev}:{rel}", "--name", "p", "--out", str(tmp_path)]
    )
    line = next(x for x in (tmp_path / "p.md").read_text().splitlines() if x.startswith("| tap"))
    # the same records on both sides, drawn as two trainings: no difference
    assert "| 0.0% lower [" in line
    with pytest.raises(SystemExit, match=r"--b: .*no \*\.jsonl records at revision"):
        study.main(["--a", str(root / rel), "--b", f"{rev}:no/such/file.jsonl"])
