"""Each board's benchmark budget (leaderboard/budgets.py): one source, used by the sweeps,
the coherence check of the records, the provenance section and the budget tiers."""

from __future__ import annotations

import functools
import json

import pytest
from test_config import CONF, _compose  # skips this module without hydra, as test_config
from test_leaderboard import _fixture_rows, _write

from edgesched.envs.scenarios import get_scenario
from edgesched.experiment import budgets
from edgesched.experiment.budgets import (
    BENCHMARK_BUDGETS,
    benchmark_budget,
    default_budget,
    trained_at,
)
from edgesched.leaderboard.build import build
from edgesched.leaderboard.records import RecordError, split_scenario_id


def test_trained_at_counts_whole_updates():
    assert trained_at(299_520, 585, 300_000)  # 585 whole updates of 512
    assert trained_at(149_504, 292, 150_000)
    assert not trained_at(149_504, 292, 300_000)
    assert not trained_at(299_520, 585, 150_000)
    assert trained_at(64, 2, 64) and not trained_at(64, 2, 96)


def test_set_budgets_are_registered_boards_longer_than_the_default():
    assert default_budget() == 150_000
    for scenario_id, steps in BENCHMARK_BUDGETS.items():
        # a budget is measured on one version: a version bump must redo the budget study
        name = split_scenario_id(scenario_id)[0]
        assert get_scenario(name).id == scenario_id, f"{scenario_id}: not the registered version"
        assert steps > default_budget(), scenario_id
        assert name in SWEPT, f"{scenario_id}: no sweep trains this board"
    assert benchmark_budget("edge10") == default_budget()
    assert benchmark_budget("edge50") == benchmark_budget("edge50-v1") == 300_000
    assert benchmark_budget("edge50-v0") == default_budget()  # the archived version
    assert benchmark_budget("tapfinger-hetero6-lam2") == 300_000
    assert benchmark_budget("tapfinger-hetero6") == 600_000
    assert benchmark_budget("edge100") == default_budget()


SWEEPS = [
    ("edge10", []),
    ("edge50", []),
    ("edge100", []),
    ("tapfinger-hetero6", []),
    ("srole", ["env=edge50", "algo=srole"]),
    ("srole", ["env=edge50-highload", "algo=mappo"]),
    ("rlpto", ["env=edge50"]),
    ("rlpto", ["env=edge50-highload"]),
    # the lambda = 2 board is trained by tapfinger-hetero6's sweep (leaderboards/README.md)
    ("tapfinger-hetero6", ["env=tapfinger-hetero6-lam2"]),
]
# the boards the sweeps train: each config's own, and those its env= override selects
SWEPT = {name for name, _ in SWEEPS} | {
    e.split("=", 1)[1] for _, extra in SWEEPS for e in extra if e.startswith("env=")
}


@pytest.mark.parametrize(("sweep", "extra"), SWEEPS)
def test_every_sweep_trains_at_its_boards_budget(sweep, extra):
    cfg = _compose([f"+benchmark={sweep}", *extra])
    assert cfg.experiment.total_env_steps == benchmark_budget(cfg.env.name)
    # an explicit budget on the command line still wins (the budget study's longer runs)
    cfg = _compose([f"+benchmark={sweep}", *extra, "experiment.total_env_steps=1000"])
    assert cfg.experiment.total_env_steps == 1000


def test_every_sweep_config_sets_the_budget():
    names = sorted(p.stem for p in (CONF / "benchmark").glob("*.yaml"))
    assert {name for name, _ in SWEEPS} == set(names)
    for name in names:
        text = (CONF / "benchmark" / f"{name}.yaml").read_text()
        assert "total_env_steps: ${edgesched_benchmark_budget:${env.name}}" in text, name


def _trained(rows: list[dict], algo: str, steps: int, updates: int, seeds=(0, 1, 2)) -> None:
    for r in rows:
        if r["algo"] == algo and r["train_seed"] in seeds:
            r["train"] = {**r["train"], "env_steps": steps, "updates": updates}


def test_seeds_of_one_entry_trained_for_different_budgets_are_rejected(tmp_path):
    rows = _fixture_rows()
    _trained(rows, "mappo", 128, 4, seeds=(1,))
    with pytest.raises(RecordError, match="must share the budget") as err:
        build([_write(tmp_path / "x.jsonl", rows)], [], tmp_path / "o", plots=False)
    assert "env_steps=128 in updates=4" in str(err.value)


def _tier(tmp_path, rows: list[dict], name: str) -> str:
    build([_write(tmp_path / f"{name}.jsonl", rows)], [], tmp_path / name, plots=False)
    cov = (tmp_path / name / "coverage.md").read_text()
    return next(x for x in cov.splitlines() if x.startswith("| edge10 |"))


def test_a_set_budget_lists_the_entries_at_it_and_those_to_retrain(tmp_path, monkeypatch):
    from test_curves import _with_curves

    monkeypatch.setitem(budgets.BENCHMARK_BUDGETS, "edge10-v1", 128)  # 4 updates of 32
    rows = _with_curves(_fixture_rows(), updates=range(2, 13, 2))  # both still improving
    _trained(rows, "mappo", 128, 4)
    row = _tier(tmp_path, json.loads(json.dumps(rows)), "half")
    assert row.endswith(
        "| 128 (set: `edgesched/experiment/budgets.py`); trained at it: mappo; still to "
        "retrain at it: ippo; still improving there: mappo; mappo: no longer run yet, longer "
        "curves needed |"
    )
    # every entry at it and flat there
    _trained(rows, "ippo", 128, 4)
    for r in rows:
        for p in r.get("curve", {"points": []})["points"]:
            p["per_seed"] = [5.0 for _ in p["per_seed"]]
    row = _tier(tmp_path, rows, "all")
    assert row.endswith(
        "| 128 (set: `edgesched/experiment/budgets.py`); trained at it: ippo, mappo |"
    )


def test_a_set_budget_reports_the_longer_study_of_entries_still_improving_there(
    tmp_path, monkeypatch
):
    from test_curves import _longer_study, _tier_with_study, _with_curves

    monkeypatch.setitem(budgets.BENCHMARK_BUDGETS, "edge10-v1", 128)
    rows = _with_curves(_fixture_rows(), updates=range(2, 13, 2))  # both still improving
    _trained(rows, "mappo", 128, 4)
    _trained(rows, "ippo", 128, 4)
    longer = functools.partial(_longer_study, rows)
    tier = functools.partial(_tier_with_study, tmp_path, _write(tmp_path / "b.jsonl", rows))

    set_cell = (
        "| 128 (set: `edgesched/experiment/budgets.py`); trained at it: ippo, mappo; still "
        "improving there: ippo, mappo; "
    )
    row = tier("mixed", longer("mappo", 0.5, flat=True) + longer("ippo", 1.0, flat=False))
    assert "mappo: 768 steps, 3 seeds, 50.0% lower" in row
    assert row.endswith(
        set_cell + "ippo: a longer budget gains nothing; mappo gains from 768 and is no longer "
        "improving there: the budget to raise the board to |"
    )
    row = tier("still", longer("mappo", 0.5, flat=False))
    assert row.endswith(
        set_cell + "ippo: no longer run yet, longer curves needed; mappo gains from a longer "
        "budget still: longer curves needed |"
    )
    # without a longer run the cell says so for each entry still improving
    assert tier("none", []).endswith(
        "still improving there: ippo, mappo; ippo: no longer run yet, longer curves needed; "
        "mappo: no longer run yet, longer curves needed |"
    )
