"""The algorithm contract (edgesched/algos/base.py): every registry entry, its config class,
its Hydra group file and its trainer agree; the shield rules derive from the flags."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from edgesched.algos import algo_config, config_from_dict, get_algorithm, list_algorithms
from edgesched.algos.base import AlgorithmConfig, AlgorithmEntry, Trainer, missing_members
from edgesched.shields import list_shields

CONF = Path(__file__).resolve().parents[1] / "conf"
ALGOS = list_algorithms()


@pytest.mark.parametrize("name", ALGOS)
def test_entry_config_class_and_group_file_agree(name):
    entry = get_algorithm(name)
    assert entry.name == name and issubclass(entry.config_class, AlgorithmConfig)
    assert algo_config(name).name == name  # the class defaults to its own name
    text = (CONF / "algo" / f"{name}.yaml").read_text()
    assert f"- /schema/algo/{name}@_here_" in text
    keys = set(OmegaConf.load(CONF / "algo" / f"{name}.yaml")) - {"defaults"}
    assert keys | {"variant"} == set(entry.keys), "the group file sets every hyperparameter"


@pytest.mark.parametrize("name", ALGOS)
def test_shield_rules_follow_the_flags(name):
    entry = get_algorithm(name)
    allowed = entry.shields(list_shields())
    assert ("none" in allowed) == (not entry.needs_shield)
    assert (set(allowed) - {"none"} != set()) == entry.accepts_shield
    for shield in list_shields():
        msg = entry.shield_error(shield, list_shields())
        assert (msg is None) == (shield in allowed)
        if msg:
            assert name in msg and "shield=" in msg


def test_entries_validate_their_flags():
    with pytest.raises(ValueError, match="needs_shield"):
        AlgorithmEntry(
            "x", lambda *a: None, AlgorithmConfig, needs_shield=True, accepts_shield=False
        )
    with pytest.raises(TypeError, match="config_class"):
        AlgorithmEntry("x", lambda *a: None, dict)  # type: ignore[arg-type]


def test_stored_configs_of_older_runs_load():
    """Before each algorithm had its own class, a run stored every algorithm's keys."""
    legacy = {"name": "mappo", "lr": 1e-3, "buffer_size": 5, "gnn_hidden": 8, "variant": ""}
    cfg = config_from_dict(legacy)
    assert type(cfg).__name__ == "MAPPOConfig" and cfg.lr == 1e-3
    assert not hasattr(cfg, "buffer_size")


@pytest.mark.parametrize("name", ALGOS)
def test_trainers_implement_the_protocols_their_flags_promise(name):
    pytest.importorskip("torch")
    from edgesched.algos import make_trainer
    from edgesched.envs.handle import resolve_scenario

    entry = get_algorithm(name)
    scenario = resolve_scenario("tapfinger-hetero6" if entry.needs_graph_view else "edge10")
    shield = entry.shields(list_shields())[0]
    cfg = OmegaConf.structured(algo_config(name))
    trainer = make_trainer(name, cfg, scenario.spec, 0, shield)
    assert not missing_members(trainer, Trainer, *entry.protocols)
    fields = {f.name for f in dataclasses.fields(entry.config_class)}
    assert {"name", "variant"} <= fields
