"""The EdgeGossip study's measurement (``benchmarks/edgegossip_study.py``) on one cell each.

Balancing's bound is a job's mean worker speed over its slowest: exactly 1 on a cluster of
one tier, above 1 on edge50's mixed tiers; and without the stop, EdgeGossip on one tier is
plain gossip (the same training times).
"""

from __future__ import annotations

import pytest
from conftest import import_benchmark


@pytest.fixture(scope="module")
def study():
    return import_benchmark("edgegossip_study")


def test_balancing_bound_and_the_one_tier_control(study):
    uniform = {"tier_mix": study.TIER_MIXES["uniform"], "max_slots": 150}
    gossip = study.run_cell({**uniform, "sync_mix": (("gossip", 1.0),)}, seeds=1)
    balanced = study.run_cell({**uniform, "edgegossip_min_gain": 0.0}, seeds=1)
    assert gossip["bound"] == pytest.approx(1.0)
    assert balanced["train"] == pytest.approx(gossip["train"])  # nothing to balance
    mixed = study.run_cell(
        {"tier_mix": study.TIER_MIXES["edge50"], "max_slots": 150, "sync_mix": (("gossip", 1.0),)},
        seeds=1,
    )
    assert mixed["bound"] > 1.2 and mixed["jobs"] > 0
