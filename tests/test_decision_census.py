"""The decision census (``benchmarks/decision_census.py``): its counting, and its scale rows.

A rule agrees with itself on every decision where a placement fits; two rules with the same
target rule (``fifo`` and ``least_loaded``) agree on targets.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import import_benchmark

from edgesched.policy import EnvSpec


@pytest.fixture(scope="module")
def census():
    return import_benchmark("decision_census")


def test_tally_counts_fits_choices_defers_and_agreement(census):
    import edgesched

    sim = edgesched.make_parallel("edge10").sim
    spec = EnvSpec.of(sim)
    a_len = spec.num_actions
    mask = np.zeros((3, a_len), dtype=bool)
    mask[:, 0] = True
    mask[0, [1, 2, 3]] = True  # agent 0: three placements fit
    mask[1, 5] = True  # agent 1: one
    # agent 2: only defer
    same_target = spec.action(np.array(0), np.array(1), np.array(0))
    other_level = spec.action(np.array(0), np.array(1), np.array(1))
    t = census.Tally(("r",))
    a = np.array([0, same_target, 0])  # agent 0 defers although three placements fit
    r = np.array([1, other_level, 0])
    t.add(sim.view().decode, mask, a, {"r": r})
    row = t.row()
    assert row["decisions"] == 3
    assert row["fits"] == pytest.approx(100 * 2 / 3)
    assert row["choices"] == pytest.approx(2.0)  # (3 + 1) / 2
    assert row["defer"] == pytest.approx(50.0)
    assert row["=r"] == 0.0  # neither proposal equals the rule's
    assert row["tgt=r"] == 100.0  # agent 1: same target, other level


def test_heuristic_rows_agree_with_themselves(census):
    rows = census.heuristic_rows("edge10", [10000], max_slots=80)
    for name, row in rows.items():
        assert row[f"={name}"] == pytest.approx(100.0)
        assert 0 < row["fits"] <= 100
        assert row["defer"] == 0.0  # every heuristic places when something fits
        assert row["jct"] > 0
    # the same target rule (most free GPU); only a different slot's feasibility can differ
    assert rows["fifo"]["tgt=least_loaded"] >= 90.0


def test_policy_files_map_to_their_entries(census):
    """Default entries always; a variant's files only with ``variants``; view-less learners
    and other files never."""
    entry = census.entry_of
    assert entry("mappo_seed0.pt") == "mappo"
    assert entry("srole_central_seed2.pt") == "srole_central"
    assert entry("tapfinger-b300k_seed1.pt") is None
    assert entry("tapfinger-b300k_seed1.pt", variants=True) == "tapfinger-b300k"
    assert entry("srole-b300k_central_seed0.pt", variants=True) == "srole-b300k_central"
    assert entry("mappo-crashrandom_seed0.pt", variants=True) == "mappo-crashrandom"
    for other in ("dqn_central_seed0.pt", "rlpto_seed1.pt", "tapfinger_seed0.json"):
        assert entry(other, variants=True) is None
