"""coverage.md's check of learned entries against today's defaults (leaderboard/provenance.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from edgesched.algos import algo_config
from edgesched.leaderboard.build import build
from edgesched.leaderboard.provenance import (
    algo_changes,
    budget_change,
    departures,
    render_departures,
    shield_changes,
)
from edgesched.leaderboard.records import Record, load_records

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "tests" / "fixtures" / "leaderboard" / "records.jsonl"


def _default(name: str) -> dict:
    return dataclasses.asdict(algo_config(name))


def test_todays_defaults_have_no_change_and_a_changed_key_is_named():
    for name in ("mappo", "srole", "rlpto", "dqn_central", "tapfinger"):
        assert algo_changes(_default(name)) == [], name
    assert algo_changes({**_default("mappo"), "lr": 1e-3}) == [("lr", "`0.001`", "`0.0005`")]


def test_a_key_missing_from_an_old_config_is_what_that_run_trained_with():
    # stored before per-job credit / preemptive shielding existed: the stored defaults apply
    old_rlpto = {k: v for k, v in _default("rlpto").items() if k != "credit"}
    assert algo_changes(old_rlpto) == [("credit", "`'team'`", "`'job'`")]
    older = {k: v for k, v in old_rlpto.items() if k != "placement"}
    assert algo_changes(older) == [
        ("credit", "`'team'`", "`'job'`"),
        ("placement", "`'least_loaded'`", "`'min_alloc'`"),
    ]
    old_srole = {k: v for k, v in _default("srole").items() if k != "shield_training"}
    assert algo_changes(old_srole) == [("shield_training", "`'postposed'`", "`'preemptive'`")]


def test_a_default_that_follows_the_scenario_is_compared_as_it_resolves_there():
    from edgesched.envs.handle import resolve_scenario

    edge, tfh6 = (resolve_scenario(n).config for n in ("edge50", "tapfinger-hetero6"))
    own, mean = ({**_default("tapfinger"), "team_reward": v} for v in (False, True))
    # TapFinger's team_reward=None: each agent's own reward on an edge board, the mean on
    # tapfinger-hetero6; a stored value is compared with what the default is there
    assert algo_changes(own, "none", edge) == []
    assert algo_changes(mean, "none", edge) == [("team_reward", "`True`", "`False`")]
    assert algo_changes(mean, "none", tfh6) == []
    assert algo_changes(own, "none", tfh6) == [("team_reward", "`False`", "`True`")]
    # a stored None trained with what it resolved to: no change where it resolves alike
    assert algo_changes(_default("tapfinger"), "none", edge) == []
    # without the scenario the default cannot be resolved: any stored value differs
    assert algo_changes(own) == [("team_reward", "`False`", "`None`")]


def test_a_key_the_stored_settings_make_inert_is_no_change():
    from edgesched.algos import config_from_dict

    # srole stored before penalize existed (or with the v0 rule): collided agents paid
    before = {k: v for k, v in _default("srole").items() if k != "penalize"}
    assert config_from_dict(before).penalize == "collided"
    # preemptive behind the central shield, nobody is ever charged: not a departure
    assert algo_changes(before, "central") == []
    # behind the regional shield, a boundary placement can collide: the rule matters
    assert algo_changes(before, "regional") == [("penalize", "`'collided'`", "`'changed'`")]
    postposed = {**before, "shield_training": "postposed"}
    assert algo_changes(postposed, "central") == [
        ("penalize", "`'collided'`", "`'changed'`"),
        ("shield_training", "`'postposed'`", "`'preemptive'`"),
    ]


def test_shield_options_and_budget():
    assert shield_changes("none", {}) == []
    assert shield_changes("central", {}) == []
    assert shield_changes("regional", {"rounds": 2, "boundary": "optimistic"}) == []
    assert shield_changes("regional", {"rounds": 3, "boundary": "optimistic"}) == [
        ("shield.rounds", "`3`", "`2`")
    ]

    def rec(steps: int, updates: int, board: str = "edge10") -> Record:
        data = {"scenario": f"{board}-v1", "train": {"env_steps": steps, "updates": updates}}
        return Record(data, Path("x"))

    assert budget_change(rec(149_504, 292)) == []  # 292 whole updates of 512 fit in 150,000
    assert budget_change(rec(599_552, 1171))[0][0] == "experiment.total_env_steps"
    assert budget_change(rec(512, 1))[0][1] == "512 env steps"
    # a board with a longer benchmark budget: the default is the departure there
    assert budget_change(rec(299_520, 585, "edge50")) == []
    assert budget_change(rec(149_504, 292, "edge50")) == [
        ("experiment.total_env_steps", "149,504 env steps", "300,000")
    ]


def _learned(tmp_path: Path, algo: dict | None, seed: int) -> dict:
    row = next(
        json.loads(line)
        for line in RECORDS.read_text().splitlines()
        if json.loads(line)["algo"] == "mappo"
    )
    row = {**row, "train_seed": seed, "train": {"env_steps": 149_504, "updates": 292}}
    if algo is not None:
        path = tmp_path / f"mappo_seed{seed}.pt"
        torch.save({"actor": {}, "algo": algo, "shield": "none", "shield_kwargs": {}}, path)
        row["policy"] = path.name
    return row


def test_departures_list_changed_and_unknown_entries_only(tmp_path):
    rows = [
        _learned(tmp_path, _default("mappo"), 0),
        _learned(tmp_path, {**_default("mappo"), "epochs": 8}, 1),
        _learned(tmp_path, None, 2),
    ]
    recs = [Record(r, tmp_path / "r.jsonl", i + 1) for i, r in enumerate(rows)]
    found = departures(recs, tmp_path)
    assert [d.record.data["train_seed"] for d in found] == [1, 2]
    assert found[0].changes == (("epochs", "`8`", "`4`"),)
    assert found[1].unknown == "no policy file in the record"
    text = "\n".join(render_departures(found))
    assert "| edge10 | mappo | 1, 2 | epochs `8` (`4`) / no policy file in the record |" in text
    assert "None: every learned entry" in "\n".join(render_departures([]))


@pytest.mark.parametrize("stale", [False, True])
def test_coverage_page_shows_the_section(tmp_path, stale):
    algo = {**_default("mappo"), "epochs": 8} if stale else _default("mappo")
    rows = [json.loads(line) for line in RECORDS.read_text().splitlines()]
    rows = [r for r in rows if r["train_seed"] is None]  # the fixture's heuristics
    rows += [_learned(tmp_path, algo, s) for s in (0, 1, 2)]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build([path], [], tmp_path / "out", plots=False, root=tmp_path)
    page = (tmp_path / "out" / "coverage.md").read_text()
    assert "## Entries trained with other than today's defaults" in page
    assert ("| edge10 | mappo | 0, 1, 2 | epochs `8` (`4`) |" in page) == stale
    assert ("None: every learned entry" in page) == (not stale)


def test_the_committed_records_say_which_entries_are_not_todays_defaults():
    """Every entry of the current boards has a policy file whose settings can be compared."""
    recs = load_records([ROOT / "leaderboards" / "results"])
    assert all(not d.unknown for d in departures(recs, ROOT))


def test_an_ablation_is_matched_with_the_entry_trained_with_its_other_settings(tmp_path):
    """When a default moved after an ablation trained, its base is the entry that kept the
    old setting (TapFinger's ``pointer_clip``), not the board's default entry."""
    from edgesched.leaderboard.provenance import matched_bases

    def rec(entry: str, algo: dict, i: int) -> Record:
        row = dict(_learned(tmp_path, None, 0))
        row.update(scenario="tapfinger-hetero6-v0", algo=entry, env_overrides={})
        path = tmp_path / f"{entry}.pt"
        torch.save({"actor": {}, "algo": algo, "shield": "none", "shield_kwargs": {}}, path)
        row["policy"] = path.name
        return Record(row, tmp_path / "r.jsonl", i)

    today = {**_default("tapfinger"), "pointer_clip": 10.0}
    before = {**_default("tapfinger"), "pointer_clip": 0.0}
    recs = [
        rec("tapfinger", today, 1),
        rec("tapfinger-noclip", before, 2),
        rec("tapfinger-noattn", {**before, "graph_attention": False}, 3),
        rec("tapfinger-noptr", {**today, "pointer": False}, 4),
    ]
    bases = matched_bases(recs, ("tapfinger-noattn", "tapfinger-noptr"), tmp_path)
    assert bases[("tapfinger-hetero6", "tapfinger-noattn")] == (
        "tapfinger-noclip",
        ("graph_attention",),
    )
    # trained with today's settings: the default entry, which differs in the component only
    assert bases[("tapfinger-hetero6", "tapfinger-noptr")] == ("tapfinger", ("pointer",))
    # without a candidate that differs in the component alone, the closest one, named
    only = matched_bases(recs[:1] + recs[2:3], ("tapfinger-noattn",), tmp_path)
    assert only[("tapfinger-hetero6", "tapfinger-noattn")] == (
        "tapfinger",
        ("graph_attention", "pointer_clip"),
    )
