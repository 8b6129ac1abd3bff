"""``benchmarks/curve_alignment.py``: budgets compared at equal steps, equal progress and over
their late windows, from the committed TapFinger study records; mixed files refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import BENCHMARKS, import_benchmark

from edgesched.leaderboard.records import RecordError

STUDY = "leaderboards/studies/original_rules/tapfinger-hetero6_tapfinger-orig-{}.jsonl"


@pytest.fixture(scope="module")
def ca():
    return import_benchmark("curve_alignment")


def _files():
    return [str(BENCHMARKS.parent / STUDY.format(b)) for b in ("b1200k", "b600k")]


def _point_means(path: str, k: int) -> float:
    """The mean over a file's runs of their per-seed JCT at curve point ``k``."""
    rows = [json.loads(x) for x in Path(path).read_text().splitlines()]
    return float(np.mean([np.mean(r["curve"]["points"][k]["per_seed"]) for r in rows]))


def test_tables_from_the_committed_study(ca, capsys, tmp_path):
    files = _files()
    ca.main(["--records", *files, "--out", str(tmp_path), "--name", "t"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    # shortest budget first, the files' shared stem said once
    assert lines[1].startswith("tapfinger-hetero6_tapfinger-orig-b600k: budget 599,552")
    assert "| steps | b600k | b1200k |" in out
    # at 599,552 steps: the 600k runs' last point, the 1.2M runs' point nearest it
    row = next(x for x in lines if x.startswith("| 599,552 |"))
    assert row.split(" | ")[1].startswith(f"{_point_means(files[1], -1):.2f} [")
    assert "(at 599,040, progress 0.50)" in row
    late = next(x for x in lines if x.startswith("| b1200k |") and "%" in x)
    g = ca.load_group(files[0])
    sel = g.steps >= 0.75 * g.budget
    assert late.split(" | ")[1].startswith(f"{g.jct[:, sel, :].mean():.2f} [")
    written = (tmp_path / "t.md").read_text().splitlines()
    assert sum(x.startswith("| b600k |") for x in written) == 1  # its late-window row


def test_a_file_mixing_budgets_or_without_curves_is_refused(ca, tmp_path):
    rows = [json.loads(x) for f in _files() for x in Path(f).read_text().splitlines()]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(RecordError, match="one budget of one learner per file"):
        ca.load_group(str(mixed))
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({**rows[0], "curve": None}) + "\n")
    with pytest.raises(RecordError, match="no curve"):
        ca.load_group(str(bare))
