"""Bad input gets a clear error naming the thing, the value and what is allowed (DESIGN §8).

Covers scenario names, scenario parameters, actions on the array fast path, the PettingZoo
dict API and the central view, episode end, render modes, and the EUA site files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgesched.envs import (
    ConfigError,
    EdgeClusterSim,
    EdgeSchedCentralEnv,
    InvalidActionError,
    SimConfig,
    list_scenarios,
    make_config,
    make_parallel,
)
from edgesched.envs.topology import load_eua_sites


def _msg(exc: pytest.ExceptionInfo[BaseException]) -> str:
    # KeyError's str() adds quotes; the message itself is its first argument
    return str(exc.value.args[0]) if exc.value.args else str(exc.value)


# ---------------------------------------------------------------------------- scenarios
@pytest.mark.parametrize("factory", [make_config, make_parallel, EdgeSchedCentralEnv])
def test_unknown_scenario_lists_registered_and_suggests(factory: Any) -> None:
    with pytest.raises(KeyError) as exc:
        factory("edge5O")
    msg = _msg(exc)
    assert "unknown scenario 'edge5O'" in msg
    assert "Did you mean ['edge50'" in msg  # the closest match comes first
    assert "Registered scenarios:" in msg
    for name in list_scenarios():
        assert repr(name) in msg


def test_unknown_scenario_without_close_match_still_lists_all() -> None:
    with pytest.raises(KeyError) as exc:
        make_config("zzzzzzzz")
    msg = _msg(exc)
    assert "'zzzzzzzz'" in msg
    assert "Did you mean" not in msg
    assert str(sorted(list_scenarios())) in msg


# ---------------------------------------------------------------------------- parameters
@pytest.mark.parametrize(
    "factory",
    [
        lambda **kw: make_config("edge10", **kw),
        lambda **kw: make_parallel("edge10", **kw),
        lambda **kw: EdgeSchedCentralEnv("edge10", **kw),
        lambda **kw: SimConfig.from_dict(kw),
        lambda **kw: SimConfig().replace(**kw),
    ],
)
def test_unknown_parameter_named_with_suggestion(factory: Any) -> None:
    with pytest.raises(ConfigError) as exc:
        factory(arival_rate=0.1)
    msg = str(exc.value)
    assert "unknown scenario parameter 'arival_rate'" in msg
    assert "(value 0.1)" in msg
    assert "Did you mean ['arrival_rate'" in msg
    assert "Allowed parameters:" in msg
    for name in ("num_nodes", "collision_mode", "arrival_rate", "data_dir"):
        assert name in msg


BAD_VALUES = [
    ({"num_nodes": 0}, ["num_nodes=0", "out of range", "integer in [1, 2000]"]),
    ({"num_nodes": 2.5}, ["num_nodes=2.5", "integer in [1, 2000]"]),
    ({"arrival_rate": -1}, ["arrival_rate=-1", "out of range", "[0.0, 1000000.0]"]),
    ({"arrival_rate": float("nan")}, ["arrival_rate=nan", "out of range"]),
    (
        {"collision_mode": "explode"},
        [
            "collision_mode='explode'",
            "not allowed",
            "['overload', 'timeshare', 'reject', 'measured']",
        ],
    ),
    ({"advance": "sometimes"}, ["advance='sometimes'", "['every_step', 'when_idle']"]),
    ({"invalid_action": "ignore"}, ["invalid_action='ignore'", "['raise', 'defer']"]),
    (
        {"target_quality": (0.9, 0.5)},
        ["target_quality=(0.9, 0.5)", "(low, high)", "0.01 <= low <= high <= 0.999"],
    ),
    ({"target_quality": [0.5, 1.5]}, ["target_quality=(0.5, 1.5)", "<= 0.999"]),
    ({"pending_slots": 0}, ["pending_slots=0", "integer in [1, 1024]"]),
    ({"neighbors_k": 10}, ["neighbors_k=10", "integer in [0, 9]"]),
    ({"alloc_scales": (0.5, 1.0)}, ["alloc_scales=(0.5, 1.0)", ">= 1.0"]),
    ({"priority_probs": (0.5, 0.2)}, ["priority_probs=(0.5, 0.2)", "sum to 1"]),
    ({"tier_mix": ()}, ["tier_mix=()", "(name, weight) pairs"]),
    ({"obs_delay": -1}, ["obs_delay=-1", "integer in [0, 1000]"]),
]


@pytest.mark.parametrize(("overrides", "parts"), BAD_VALUES, ids=lambda v: str(v)[:40])
def test_out_of_range_values(overrides: dict[str, Any], parts: list[str]) -> None:
    with pytest.raises(ConfigError) as exc:
        make_config("edge10", **overrides)
    msg = str(exc.value)
    for part in parts:
        assert part in msg, (part, msg)


def test_custom_capacities_length_mismatch() -> None:
    caps = ((4, 4, 1),) * 5
    with pytest.raises(ConfigError) as exc:
        make_config("tapfinger-hetero6", custom_capacities=caps)
    msg = str(exc.value)
    assert "custom_capacities has 5 entries" in msg
    assert "num_nodes=6 requires exactly that many" in msg


def test_custom_capacities_bad_entry() -> None:
    caps = ((4, 4, 1),) * 5 + ((8, 0, 1),)
    with pytest.raises(ConfigError) as exc:
        make_config("tapfinger-hetero6", custom_capacities=caps)
    msg = str(exc.value)
    assert "custom_capacities entry (8, 0, 1)" in msg
    assert "all > 0" in msg


def test_unknown_tier_in_tier_mix() -> None:
    with pytest.raises(ConfigError) as exc:
        make_parallel("edge10", tier_mix=(("quantum", 1.0), ("jetson", 1.0)))
    msg = str(exc.value)
    assert "tier_mix" in msg
    assert "unknown tier 'quantum'" in msg
    for tier in ("jetson", "small_server", "gpu_server"):
        assert tier in msg


def test_unknown_model_in_models() -> None:
    with pytest.raises(ConfigError) as exc:
        make_parallel("edge10", models=(("resnet9000", 1.0),))
    msg = str(exc.value)
    assert "'resnet9000'" in msg
    assert "cifar10" in msg


# ---------------------------------------------------------------------------- array path
def _sim(**overrides: Any) -> EdgeClusterSim:
    sim = EdgeClusterSim(make_config("edge10", **overrides))
    sim.reset(0)
    return sim


def _masked_choice(sim: EdgeClusterSim) -> tuple[int, int]:
    """An (agent, action) whose action is in range but masked, for an agent with a job."""
    for i in range(sim.num_agents):
        if sim.head[i, 0] >= 0:
            off = np.flatnonzero(~sim.mask[i])
            if len(off):
                return i, int(off[0])
    raise AssertionError("no masked action available in this state")


def _allowed(sim: EdgeClusterSim, agent: int) -> str:
    return str(np.flatnonzero(sim.mask[agent]).tolist()[:20])


@pytest.mark.parametrize(
    ("actions", "parts"),
    [
        (np.zeros(11, dtype=np.int64), ["shape (10,)", "got shape (11,)"]),
        (np.zeros((10, 1), dtype=np.int64), ["shape (10,)", "got shape (10, 1)"]),
        (np.zeros(10, dtype=np.float64), ["integer array", "dtype float64"]),
        (np.zeros(10, dtype=bool), ["integer array", "dtype bool"]),
        ([0] * 9, ["shape (10,)", "got shape (9,)"]),
    ],
)
def test_array_path_wrong_shape_or_dtype(actions: Any, parts: list[str]) -> None:
    sim = _sim()  # the default (defer) mode: a wrong shape or dtype is bad input, not a choice
    with pytest.raises(InvalidActionError) as exc:
        sim.step(actions)
    for part in parts:
        assert part in str(exc.value)
    assert sim.t == 0 and sim.counters.steps == 0


@pytest.mark.parametrize("bad", ["too_big", "negative"])
def test_array_path_out_of_range(bad: str) -> None:
    sim = _sim(invalid_action="raise")
    a = np.zeros(sim.num_agents, dtype=np.int64)
    a[3] = sim.num_actions if bad == "too_big" else -1
    with pytest.raises(InvalidActionError) as exc:
        sim.step(a)
    msg = str(exc.value)
    assert f"action {a[3]} of agent node_3 is out of range" in msg
    assert f"allowed actions now: {_allowed(sim, 3)}" in msg
    assert f"0..{sim.num_actions - 1}" in msg
    assert "invalid_action='defer'" in msg
    assert sim.t == 0 and sim.counters.steps == 0  # nothing was applied
    assert sim.counters.invalid_actions == 0  # a refused step counts nothing


def test_array_path_masked_action() -> None:
    sim = _sim(invalid_action="raise")
    i, act = _masked_choice(sim)
    a = np.zeros(sim.num_agents, dtype=np.int64)
    a[i] = act
    used = sim.used.copy()
    with pytest.raises(InvalidActionError) as exc:
        sim.step(a)
    msg = str(exc.value)
    assert f"action {act} of agent node_{i} is masked" in msg
    assert f"allowed actions now: {_allowed(sim, i)}" in msg
    assert sim.t == 0
    np.testing.assert_array_equal(sim.used, used)
    assert sim.counters.invalid_actions == 0  # a refused step leaves the simulator untouched
    # the sim is still usable after the rejected step
    sim.step(np.zeros(sim.num_agents, dtype=np.int64))
    assert sim.t == 1


def test_array_path_defer_is_the_default() -> None:
    sim = _sim()
    assert sim.cfg.invalid_action == "defer"
    i, act = _masked_choice(sim)
    a = np.zeros(sim.num_agents, dtype=np.int64)
    a[i] = act
    _, info = sim.step(a)
    assert info["invalid_actions"] == 1 and sim.counters.invalid_actions == 1
    assert sim.invalid_mask.tolist() == [j == i for j in range(sim.num_agents)]
    _, info = sim.step(np.zeros(sim.num_agents, dtype=np.int64))
    assert info["invalid_actions"] == 0 and sim.invalid_mask is None


def test_array_path_defer_mode_defers_and_counts() -> None:
    sim, twin = _sim(invalid_action="defer"), _sim(invalid_action="defer")
    i, act = _masked_choice(sim)
    a = np.zeros(sim.num_agents, dtype=np.int64)
    a[i] = act
    j = (i + 1) % sim.num_agents
    a[j] = sim.num_actions + 7  # out of range
    k = (i + 2) % sim.num_agents
    a[k] = -3
    rewards, info = sim.step(a)
    t_rewards, _ = twin.step(np.zeros(sim.num_agents, dtype=np.int64))
    assert sim.counters.invalid_actions == 3
    assert twin.counters.invalid_actions == 0
    assert info["invalid_actions"] == 3
    assert info["proposals"] == 0 and info["placements"] == 0
    # exactly as if those agents had deferred
    np.testing.assert_array_equal(rewards, t_rewards)
    np.testing.assert_array_equal(sim.obs, twin.obs)
    np.testing.assert_array_equal(sim.used, twin.used)
    assert sim.t == twin.t == 1
    assert sim.episode_metrics()["invalid_actions"] == 3


def test_array_path_step_after_end() -> None:
    sim = _sim(max_slots=2)
    zero = np.zeros(sim.num_agents, dtype=np.int64)
    sim.step(zero)
    sim.step(zero)
    assert sim.truncated
    with pytest.raises(RuntimeError, match=r"finished episode; call reset\(\) first"):
        sim.step(zero)
    sim.reset(0)
    sim.step(zero)  # usable again after reset


# ---------------------------------------------------------------------------- PettingZoo
def _env(**overrides: Any):
    env = make_parallel("edge10", **overrides)
    env.reset(seed=0)
    return env


def _defer_all(env) -> dict[str, int]:
    return dict.fromkeys(env.agents, 0)


def test_pettingzoo_masked_action_names_agent_and_allowed() -> None:
    env = _env(invalid_action="raise")
    i, act = _masked_choice(env.sim)
    acts = _defer_all(env)
    acts[f"node_{i}"] = act
    with pytest.raises(InvalidActionError) as exc:
        env.step(acts)
    msg = str(exc.value)
    assert f"action {act} of agent node_{i} is masked" in msg
    assert f"allowed actions now: {_allowed(env.sim, i)}" in msg
    assert env.sim.counters.invalid_actions == 0 and env.sim.t == 0  # refused untouched


def test_pettingzoo_out_of_range_action() -> None:
    env = _env(invalid_action="raise")
    acts = _defer_all(env)
    acts["node_4"] = env.action_space("node_4").n
    with pytest.raises(InvalidActionError) as exc:
        env.step(acts)
    msg = str(exc.value)
    assert f"action {acts['node_4']} of agent node_4 is out of range" in msg
    assert f"allowed actions now: {_allowed(env.sim, 4)}" in msg


@pytest.mark.parametrize("value", ["two", None, [1, 2]])
def test_pettingzoo_non_integer_action(value: Any) -> None:
    env = _env()
    acts: dict[str, Any] = _defer_all(env)
    acts["node_2"] = value
    with pytest.raises(ValueError, match="actions must be integers") as exc:
        env.step(acts)
    assert "node_2" in str(exc.value)
    assert repr(value) in str(exc.value)


def test_pettingzoo_fractional_action_is_rejected_not_truncated() -> None:
    """A non-integral action (1.7) is bad input: Discrete actions are integers. It must not be
    silently truncated to 1 (the array path rejects float dtypes for the same reason)."""
    env = _env()
    i = int(np.flatnonzero(env.sim.mask[:, 1])[0])  # action 1 is feasible for node_i
    acts: dict[str, Any] = _defer_all(env)
    acts[f"node_{i}"] = 1.7
    with pytest.raises(ValueError, match="integer") as exc:
        env.step(acts)
    assert f"node_{i}" in str(exc.value)
    assert "1.7" in str(exc.value)


def test_pettingzoo_numpy_integer_actions_accepted() -> None:
    env = _env()
    acts = {a: np.int64(0) for a in env.agents}
    env.step(acts)
    assert env.sim.t == 1


def test_pettingzoo_defer_mode() -> None:
    env, twin = _env(invalid_action="defer"), _env(invalid_action="defer")
    i, act = _masked_choice(env.sim)
    acts = _defer_all(env)
    acts[f"node_{i}"] = act
    acts["node_0" if i != 0 else "node_1"] = 10_000
    obs, rew, _, _, infos = env.step(acts)
    t_obs, t_rew, _, _, _ = twin.step(_defer_all(twin))
    assert env.sim.counters.invalid_actions == 2
    assert infos[f"node_{i}"]["placements"] == 0
    assert infos[f"node_{i}"]["invalid_action"] == 1
    assert infos[f"node_{i}"]["invalid_actions"] == 2
    assert sum(info["invalid_action"] for info in infos.values()) == 2
    assert rew == t_rew
    for a in env.possible_agents:
        np.testing.assert_array_equal(obs[a]["observation"], t_obs[a]["observation"])
        np.testing.assert_array_equal(obs[a]["action_mask"], t_obs[a]["action_mask"])


def test_pettingzoo_default_defers_and_counts() -> None:
    env = _env()
    i, act = _masked_choice(env.sim)
    acts = _defer_all(env)
    acts[f"node_{i}"] = act
    _, _, _, _, infos = env.step(acts)
    assert env.sim.t == 1 and env.sim.counters.invalid_actions == 1
    assert infos[f"node_{i}"]["invalid_action"] == 1
    assert all(infos[a]["invalid_actions"] == 1 for a in env.possible_agents)


@pytest.mark.parametrize("value", [True, False, np.True_, np.False_])
@pytest.mark.parametrize("mode", ["raise", "defer"])
def test_pettingzoo_bool_actions_are_rejected_in_both_modes(value: Any, mode: str) -> None:
    """A Discrete action is an index: Python and numpy bools are refused alike (True was
    taken as action 1 while np.True_ was refused), whatever ``invalid_action`` says."""
    env = _env(invalid_action=mode)
    acts: dict[str, Any] = _defer_all(env)
    acts["node_5"] = value
    with pytest.raises(InvalidActionError) as exc:
        env.step(acts)
    msg = str(exc.value)
    assert "node_5" in msg and repr(value) in msg and "bool" in msg
    assert env.sim.t == 0 and env.sim.counters.invalid_actions == 0


@pytest.mark.parametrize("value", [2**70, -(2**70), 2**63, np.uint64(2**64 - 1)])
def test_pettingzoo_huge_integer_strict(value: Any) -> None:
    env = _env(invalid_action="raise")
    acts: dict[str, Any] = _defer_all(env)
    acts["node_6"] = value
    with pytest.raises(InvalidActionError) as exc:
        env.step(acts)
    msg = str(exc.value)
    assert f"action {int(value)} of agent node_6 is out of range" in msg
    assert f"[0, {env.sim.num_actions - 1}]" in msg
    assert env.sim.t == 0 and env.sim.counters.invalid_actions == 0


@pytest.mark.parametrize("value", [2**70, -(2**70), np.uint64(2**64 - 1), -1, 10_000])
def test_pettingzoo_huge_or_out_of_range_integer_defers_by_default(value: Any) -> None:
    env, twin = _env(), _env()
    acts: dict[str, Any] = _defer_all(env)
    acts["node_6"] = value
    obs, rew, _, _, infos = env.step(acts)
    t_obs, t_rew, _, _, _ = twin.step(_defer_all(twin))
    assert env.sim.counters.invalid_actions == 1
    assert infos["node_6"]["invalid_action"] == 1 and infos["node_0"]["invalid_action"] == 0
    assert rew == t_rew
    np.testing.assert_array_equal(obs["node_6"]["observation"], t_obs["node_6"]["observation"])


def test_pettingzoo_missing_agent() -> None:
    env = _env()
    acts = _defer_all(env)
    del acts["node_3"]
    with pytest.raises(ValueError) as exc:
        env.step(acts)
    msg = str(exc.value)
    assert "one action per live agent" in msg
    assert "missing ['node_3']" in msg


def test_pettingzoo_unknown_agent() -> None:
    env = _env()
    acts = _defer_all(env)
    acts["node_99"] = 0
    with pytest.raises(ValueError) as exc:
        env.step(acts)
    msg = str(exc.value)
    assert "unknown ['node_99']" in msg
    assert "missing []" in msg


def test_pettingzoo_step_after_end() -> None:
    env = _env(max_slots=2)
    env.step(_defer_all(env))
    _, _, term, trunc, _ = env.step(_defer_all(env))
    assert all(trunc.values()) or all(term.values())
    assert env.last_episode_metrics["slots"] == 2
    assert env.agents == []
    with pytest.raises(RuntimeError, match=r"after the episode ended; call reset\(\) first"):
        env.step(dict.fromkeys(env.possible_agents, 0))
    env.reset(seed=1)
    env.step(_defer_all(env))


def test_pettingzoo_step_before_reset() -> None:
    env = make_parallel("edge10")
    with pytest.raises(RuntimeError, match=r"reset\(\)"):
        env.step(dict.fromkeys(env.possible_agents, 0))


# ---------------------------------------------------------------------------- central view
def test_central_invalid_action_raise_and_defer() -> None:
    env = EdgeSchedCentralEnv("edge10", invalid_action="raise")
    env.reset(seed=0)
    n = env.action_space.n
    with pytest.raises(InvalidActionError) as exc:
        env.step(n)
    msg = str(exc.value)
    assert f"action {n} is out of range" in msg
    assert f"allowed now: {np.flatnonzero(env.action_masks()).tolist()[:20]}" in msg
    with pytest.raises(InvalidActionError, match="must be an integer in"):
        env.step("x")
    assert env.sim.counters.invalid_actions == 0  # refused steps count nothing
    d = EdgeSchedCentralEnv("edge10")  # default: defer
    d.reset(seed=0)
    _, _, _, _, info = d.step(n)
    assert info["invalid_actions"] == 1
    assert d.sim.counters.invalid_actions == 1


def test_central_step_after_end() -> None:
    env = EdgeSchedCentralEnv("edge10", max_slots=3, arrival_rate=0.5)
    env.reset(seed=0)
    assert not (env.sim.terminated or env.sim.truncated)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(0)
        done = term or trunc
    with pytest.raises(RuntimeError, match=r"finished episode; call reset\(\) first"):
        env.step(0)


# ---------------------------------------------------------------------------- render
@pytest.mark.parametrize("factory", [make_parallel, EdgeSchedCentralEnv])
def test_invalid_render_mode(factory: Any) -> None:
    with pytest.raises(ValueError) as exc:
        factory("edge10", render_mode="human")
    msg = str(exc.value)
    assert "render_mode='human' is not supported" in msg
    assert "'ansi'" in msg and "'rgb_array'" in msg


# ---------------------------------------------------------------------------- EUA sites
HEADER = "SITE_ID,LATITUDE,LONGITUDE,NAME\n"


def _site_rows(n: int) -> str:
    return "".join(
        f"{i},{-37.81 + 0.001 * i:.4f},{144.96 + 0.0013 * (i % 7):.4f},site{i}\n" for i in range(n)
    )


def test_eua_malformed_row_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "sites.csv"
    f.write_text(HEADER + "1,-37.81,144.96,a\n2,abc,144.97,b\n")
    with pytest.raises(ValueError) as exc:
        load_eua_sites(f)
    msg = str(exc.value)
    assert f"{f}:3:" in msg
    assert "malformed site row" in msg
    assert "'abc'" in msg
    assert "LATITUDE" in msg and "LONGITUDE" in msg


def test_eua_short_row_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "sites.csv"
    f.write_text(HEADER + "1,-37.81,144.96,a\n2,-37.82,144.97,b\n3,-37.83\n")
    with pytest.raises(ValueError, match=re.escape(f"{f}:4: malformed site row")):
        load_eua_sites(f)


def test_eua_coordinates_out_of_range(tmp_path: Path) -> None:
    f = tmp_path / "sites.csv"
    f.write_text(HEADER + "1,95.0,144.96,a\n")
    with pytest.raises(ValueError) as exc:
        load_eua_sites(f)
    msg = str(exc.value)
    assert f"{f}:2:" in msg
    assert "(95.0, 144.96) out of range" in msg


@pytest.mark.parametrize("content", ["1,-37.81,144.96,a\n", "", "SITE_ID,LAT,LON\n1,2,3\n"])
def test_eua_missing_header(tmp_path: Path, content: str) -> None:
    f = tmp_path / "sites.csv"
    f.write_text(content)
    with pytest.raises(ValueError) as exc:
        load_eua_sites(f)
    msg = str(exc.value)
    assert f"{f}:1:" in msg
    assert "header with LATITUDE and LONGITUDE" in msg


def test_eua_no_sites(tmp_path: Path) -> None:
    f = tmp_path / "sites.csv"
    f.write_text(HEADER)
    with pytest.raises(ValueError, match=re.escape(f"{f}: no sites")):
        load_eua_sites(f)


# A two-link stand-in for the Topology Zoo archive: one link with a raw speed, one labelled.
ZOO_GML = """graph [
  edge [ source 0 target 1 LinkSpeedRaw 2500000000.0 ]
  edge [ source 1 target 2 LinkLabel "< 155 Mbps" ]
  edge [ source 0 target 2 ]
]
"""


def _data_dir_with_sites(root: Path, content: str) -> Path:
    import io
    import tarfile

    (root / "eua").mkdir(parents=True)
    (root / "eua" / "site-optus-melbCBD.csv").write_text(content)
    (root / "topology-zoo").mkdir()
    with tarfile.open(root / "topology-zoo" / "gml.tar.gz", "w:gz") as tf:
        blob = ZOO_GML.encode()
        info = tarfile.TarInfo("gml/Aarnet.gml")
        info.size = len(blob)
        tf.addfile(info, io.BytesIO(blob))
    return root


EUA_SMALL = {"num_nodes": 8, "neighbors_k": 3, "region_size": 4}


def test_eua_topology_loads_from_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Positive control for the failure tests below."""
    monkeypatch.delenv("EDGESCHED_DATA_DIR", raising=False)
    data = _data_dir_with_sites(tmp_path / "data", HEADER + _site_rows(12))
    env = make_parallel("melbourne125", data_dir=str(data), **EUA_SMALL)
    env.reset(seed=0)
    assert env.sim.cluster.pos.shape == (8, 2)
    # link bandwidths come from the archive's two links with a capacity (Gbit/s)
    assert set(np.unique(env.sim.cluster.link_bw)) <= {2.5, 0.155}


def test_eua_malformed_row_surfaces_through_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data_dir_with_sites(tmp_path / "data", HEADER + _site_rows(3) + "x,y\n")
    monkeypatch.setenv("EDGESCHED_DATA_DIR", str(data))
    with pytest.raises(ValueError) as exc:
        make_parallel("melbourne125", **EUA_SMALL)
    msg = str(exc.value)
    assert "site-optus-melbCBD.csv:5:" in msg
    assert str(data) in msg


def test_eua_too_few_sites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _data_dir_with_sites(tmp_path / "data", HEADER + _site_rows(5))
    monkeypatch.setenv("EDGESCHED_DATA_DIR", str(data))
    with pytest.raises(ConfigError) as exc:
        make_parallel("melbourne125", **EUA_SMALL)
    msg = str(exc.value)
    assert "num_nodes=8 exceeds the 5 EUA sites" in msg
    assert "site-optus-melbCBD.csv" in msg


def test_eua_data_dir_without_site_file_mentions_env_var(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EDGESCHED_DATA_DIR", raising=False)
    empty = tmp_path / "empty-data"
    empty.mkdir()
    with pytest.raises(ConfigError) as exc:
        make_parallel("melbourne125", data_dir=str(empty), **EUA_SMALL)
    msg = str(exc.value)
    assert "topology='eua'" in msg
    assert "eua/site-optus-melbCBD.csv" in msg
    assert "data_dir" in msg
    assert "EDGESCHED_DATA_DIR" in msg
    assert str(empty) in msg  # where it looked


@pytest.mark.parametrize("fallback", ["env_var", "checkout"])
def test_eua_nonexistent_data_dir_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fallback: str
) -> None:
    """An explicit data_dir that does not exist is bad input: it must fail with a ConfigError
    naming that value and EDGESCHED_DATA_DIR, not silently fall back to $EDGESCHED_DATA_DIR
    (``env_var``) or to ../shared/data next to the source checkout (``checkout``)."""
    if fallback == "env_var":
        other = _data_dir_with_sites(tmp_path / "fallback", HEADER + _site_rows(12))
        monkeypatch.setenv("EDGESCHED_DATA_DIR", str(other))
    else:
        monkeypatch.delenv("EDGESCHED_DATA_DIR", raising=False)
    bad = tmp_path / "does-not-exist"
    with pytest.raises(ConfigError) as exc:
        make_parallel("melbourne125", data_dir=str(bad), **EUA_SMALL)
    msg = str(exc.value)
    assert str(bad) in msg
    assert "data_dir" in msg
    assert "EDGESCHED_DATA_DIR" in msg


@pytest.mark.parametrize("value", [True, np.True_, np.array(True), 1.0, np.float32(1)])
def test_central_bools_and_floats_are_rejected(value: Any) -> None:
    env = EdgeSchedCentralEnv("edge10")
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="must be an integer in") as exc:
        env.step(value)
    assert type(value).__name__ in str(exc.value)
    assert env.sim.counters.invalid_actions == 0


@pytest.mark.parametrize("value", [np.int64(0), np.array(0), 0])
def test_central_accepts_integer_scalars_and_0d_arrays(value: Any) -> None:
    env = EdgeSchedCentralEnv("edge10", invalid_action="raise")
    env.reset(seed=0)
    _, _, _, _, info = env.step(value)
    assert info["invalid_actions"] == 0


def test_central_huge_integer() -> None:
    strict = EdgeSchedCentralEnv("edge10", invalid_action="raise")
    strict.reset(seed=0)
    with pytest.raises(InvalidActionError, match=f"action {2**70} is out of range"):
        strict.step(2**70)
    assert strict.sim.counters.invalid_actions == 0
    d = EdgeSchedCentralEnv("edge10")
    d.reset(seed=0)
    _, _, _, _, info = d.step(2**70)
    assert info["invalid_actions"] == 1


# ---------------------------------------------------------------------------- shield wrapper
def _shielded(**overrides: Any):
    from edgesched.shields import ShieldedParallelEnv

    env = ShieldedParallelEnv(make_parallel("edge10", **overrides), "central")
    env.reset(seed=0)
    return env


def test_shield_wrapper_strict_refuses_invalid_proposals_untouched() -> None:
    """The shield must not turn an invalid proposal into a defer unseen under strict mode."""
    env = _shielded(invalid_action="raise")
    sim = env.unwrapped.sim
    i, act = _masked_choice(sim)
    acts = _defer_all(env)
    acts[f"node_{i}"] = act
    with pytest.raises(InvalidActionError, match=f"action {act} of agent node_{i} is masked"):
        env.step(acts)
    assert sim.t == 0 and sim.counters.invalid_actions == 0 and env.stats.steps == 0


def test_shield_wrapper_counts_invalid_proposals_by_default() -> None:
    from edgesched.envs.parallel import INFO_KEYS
    from edgesched.shields.wrapper import SHIELD_INFO_KEYS

    env = _shielded(max_slots=2)
    sim = env.unwrapped.sim
    _, infos = env.reset(seed=0)
    assert set(infos["node_0"]) == {*INFO_KEYS, *SHIELD_INFO_KEYS}
    i, act = _masked_choice(sim)
    acts = _defer_all(env)
    acts[f"node_{i}"] = act
    acts["node_0" if i else "node_1"] = 2**70
    _, _, _, _, infos = env.step(acts)
    assert set(infos["node_0"]) == {*INFO_KEYS, *SHIELD_INFO_KEYS}
    assert sim.counters.invalid_actions == 2
    assert infos[f"node_{i}"]["invalid_action"] == 1 and infos[f"node_{i}"]["invalid_actions"] == 2
    assert infos[f"node_{i}"]["executed_action"] == 0
    assert env.last_episode_metrics is None
    env.step(_defer_all(env))
    ep = env.last_episode_metrics
    assert ep["invalid_actions"] == 2 and "shield_interventions" in ep
    env.reset(seed=1)
    assert env.last_episode_metrics is None
