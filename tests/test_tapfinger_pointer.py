"""``benchmarks/tapfinger_pointer.py``: a trained TapFinger pointer's sharpness and conflicts."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import import_benchmark

POLICIES = Path(__file__).resolve().parents[1] / "leaderboards" / "policies" / "tapfinger-hetero6"


@pytest.fixture(scope="module")
def tp():
    return import_benchmark("tapfinger_pointer")


def test_a_committed_policy_gives_bounded_figures(tp):
    stats = tp.pointer_stats(
        POLICIES / "tapfinger-noclip-b150k_seed0.pt", steps=6, copies=2, seed=3
    )
    assert all(math.isfinite(v) for v in stats.values()), stats
    assert 0.0 <= stats["entropy"] <= stats["entropy_max"] + 1e-6
    assert 0.0 <= stats["lost"] <= 1.0 and stats["contested"] >= 0.0
    assert stats["logit_max"] >= stats["logit_std"] > 0.0
    again = tp.pointer_stats(
        POLICIES / "tapfinger-noclip-b150k_seed0.pt", steps=6, copies=2, seed=3
    )
    assert again == stats  # seeded: the same rollout


def test_table_averages_each_entry_and_other_policies_are_refused(tp, capsys):
    rows = [
        ("x/tapfinger-b1_seed0.pt", dict.fromkeys(("logit_std", "logit_max"), 1.0)),
        ("x/tapfinger-b1_seed1.pt", dict.fromkeys(("logit_std", "logit_max"), 3.0)),
    ]
    for _, r in rows:
        r.update(entropy=0.5, entropy_max=1.0, lost=0.25, contested=0.1)
    lines = tp.table(rows)
    assert tp.entry_of("x/tapfinger-b1_seed1.pt") == "tapfinger-b1"
    assert any(line.startswith("| tapfinger-b1 (2) | 2.00 | 2.0 |") for line in lines)
    with pytest.raises(ValueError, match="'mappo' policy"):
        tp.pointer_stats(POLICIES / "mappo_seed0.pt", steps=2, copies=1, seed=0)
    with pytest.raises(SystemExit):
        tp.main(["--policies", "a.pt", "--steps", "0"])
