"""The simulator's dynamics are pinned: trajectory hashes match the stored fixture.

``scripts/trajectory_hash.py`` hashes a fixed random-policy run of every registered
scenario and option variant (observations, masks, states, rewards, counters, graph view,
resizes, episode metrics). A refactor that changes no dynamic keeps every hash; a change to
the dynamics must bump the scenario's version and regenerate the fixture
(``python scripts/trajectory_hash.py --write tests/fixtures/trajectory_hashes.json``).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import edgesched

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "trajectory_hash", ROOT / "scripts/trajectory_hash.py"
)
th = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(th)
EXPECTED = json.loads((ROOT / "tests/fixtures/trajectory_hashes.json").read_text())


def test_every_case_has_a_stored_hash() -> None:
    assert sorted(th.all_cases()) == sorted(EXPECTED)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_trajectory_is_unchanged(case: str) -> None:
    name = th.all_cases()[case][0]
    missing = [r.name for r in edgesched.data_requirements(name) if not r.available]
    if missing:
        pytest.skip(f"data missing: {missing}")
    assert th.case_hash(case) == EXPECTED[case]
