"""The scenario handle: resolved once, and the evaluation configuration built from it."""

from __future__ import annotations

import pickle

import pytest

from edgesched import ConfigError
from edgesched.envs.handle import ScenarioHandle, evaluation_config, resolve_scenario


def test_a_handle_keeps_its_version_and_overrides():
    h = resolve_scenario("edge10-v0", arrival_rate=0.3)
    assert (h.name, h.id) == ("edge10", "edge10-v0")
    assert h.config.arrival_rate == 0.3 and h.overrides_dict() == {"arrival_rate": 0.3}
    assert resolve_scenario(h) is h
    with pytest.raises(ValueError, match="already the handle"):
        resolve_scenario(h, max_slots=3)
    again = pickle.loads(pickle.dumps(h))
    assert isinstance(again, ScenarioHandle) and again.config == h.config


def test_the_evaluation_config_puts_settings_on_top_of_a_handles_identity():
    h = resolve_scenario("edge10-v0", arrival_rate=0.3)
    sid, cfg = evaluation_config(h, {"invalid_action": "raise"})
    assert sid == "edge10-v0"
    assert cfg.arrival_rate == 0.3 and cfg.invalid_action == "raise"
    assert h.overrides_dict() == {"arrival_rate": 0.3}  # the handle is unchanged
    assert evaluation_config(h) == ("edge10-v0", h.config)


def test_a_name_is_resolved_with_the_settings_as_its_overrides():
    sid, cfg = evaluation_config("edge10", {"arrival_rate": 0.3, "invalid_action": "raise"})
    assert sid == resolve_scenario("edge10").id
    assert cfg.arrival_rate == 0.3 and cfg.invalid_action == "raise"
    with pytest.raises(ConfigError, match="arrival_rate"):
        evaluation_config("edge10", {"arrival_rate": -1.0})
    with pytest.raises(KeyError, match="unknown scenario"):
        evaluation_config("edge11")
