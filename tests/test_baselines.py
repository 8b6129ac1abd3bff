"""Heuristic baselines (DESIGN §4.3): registry-driven feasibility, determinism, sanity orderings.

Sanity orderings use 10 held-out evaluation seeds (10000..10009) through
``evaluate_scheduler`` and a paired 95% BCa bootstrap confidence interval of the mean JCT
difference per seed (``scipy.stats.bootstrap``, fixed ``random_state``).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scenario_params
from scipy import stats

from edgesched.baselines import list_baselines, make_baseline
from edgesched.envs.central import EdgeSchedCentralEnv
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.scenarios import get_scenario
from edgesched.experiment.evaluation import evaluate_scheduler, reallocate_once_per_slot
from edgesched.policy import EnvSpec

EVAL_SEEDS = list(range(10000, 10010))
SHORT = {"max_slots": 40}


def _sim(name: str, **overrides) -> EdgeClusterSim:
    sc = get_scenario(name)
    return EdgeClusterSim(sc.config(**overrides), scenario_id=sc.id)


def _play(policy, sim: EdgeClusterSim, seed: int) -> list[np.ndarray]:
    """One episode; every action is checked against the mask before the (raising) step."""
    sim.reset(seed)
    policy.reset(seed)
    actions = []
    rows = np.arange(sim.num_agents)
    slot = -1
    while not (sim.terminated or sim.truncated):
        slot = reallocate_once_per_slot(policy, sim, slot)  # preemptive baselines only
        graph = sim.graph() if policy.needs_graph else None
        a = policy.act(sim.obs, sim.mask, sim.state(), graph=graph)
        assert a.shape == (sim.num_agents,) and a.dtype.kind in "iu"
        assert sim.mask[rows, a].all(), f"{policy.name} took a masked action"
        sim.step(a)  # under invalid_action='raise' the step would also catch it
        actions.append(a.copy())
    return actions


@pytest.mark.parametrize("scenario", scenario_params())
def test_every_baseline_runs_and_respects_the_mask(scenario):
    sim = _sim(scenario, invalid_action="raise", **SHORT)
    assert sim.cfg.invalid_action == "raise"
    spec = EnvSpec.of(sim)
    for name in list_baselines():
        policy = make_baseline(name, spec, seed=0)
        actions = _play(policy, sim, seed=3)
        assert sim.terminated or sim.truncated
        m = sim.episode_metrics()
        assert m["invalid_actions"] == 0
        if name != "local_only" and m["jobs_arrived"]:
            assert m["placements"] > 0, f"{name} never placed anything on {scenario}"
        assert len(actions) > 0


@pytest.mark.parametrize("scenario", ["edge10", "tapfinger-hetero6"])
def test_baselines_are_deterministic_given_seed(scenario):
    sim = _sim(scenario, max_slots=20)
    spec = EnvSpec.of(sim)
    for name in list_baselines():
        runs = [_play(make_baseline(name, spec, seed=7), sim, seed=11) for _ in range(2)]
        assert len(runs[0]) == len(runs[1])
        for a, b in zip(*runs, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)


def test_registered_baselines_document_rule_and_source():
    spec = EnvSpec.of(_sim("edge10"))
    for name in list_baselines():
        doc = type(make_baseline(name, spec)).__doc__ or ""
        assert len(doc.split()) >= 15, f"{name} needs a docstring stating its rule and source"


def test_orderings_reduce_to_head_with_one_pending_slot():
    """Documented: with pending_slots == 1, FIFO and SJF are least-loaded on the head."""
    sim = _sim("edge10", pending_slots=1, **SHORT)
    assert sim.pending_slots == 1
    spec = EnvSpec.of(sim)
    ref = _play(make_baseline("least_loaded", spec), sim, seed=5)
    for name in ("fifo", "sjf"):
        got = _play(make_baseline(name, spec), sim, seed=5)
        np.testing.assert_array_equal(np.array(got), np.array(ref), err_msg=name)


@pytest.mark.parametrize("scenario", ["edge10", "tapfinger-hetero6"])
def test_central_view_methods_respect_the_mask(scenario):
    env = EdgeSchedCentralEnv(scenario, invalid_action="raise", max_slots=15)
    spec = EnvSpec.of(env.sim)
    names = [n for n in list_baselines() if hasattr(make_baseline(n, spec), "act_central")]
    assert {"random", "least_loaded", "best_fit", "min_alloc"} <= set(names)
    for name in names:
        policy = make_baseline(name, spec, seed=0)
        obs, _ = env.reset(seed=2)
        placements, done = 0, False
        while not done:
            mask = env.action_masks()
            a = policy.act_central(obs, mask)
            assert mask[a], f"{name} took a masked central action"
            obs, _, term, trunc, info = env.step(a)
            placements += info["placements"]
            done = term or trunc
        assert placements > 0, name


def _per_seed_jct(name: str, scenario: str) -> np.ndarray:
    sim = _sim(scenario)
    policy = make_baseline(name, EnvSpec.of(sim), seed=0)
    res = evaluate_scheduler(policy, scenario, {}, EVAL_SEEDS, episodes=1)
    return np.array([row["jct_mean"] for row in res["per_episode"]])


def _paired_ci(worse: np.ndarray, better: np.ndarray):
    """95% BCa bootstrap CI of mean(worse - better) over paired evaluation seeds."""
    diff = worse - better
    return stats.bootstrap(
        (diff,), np.mean, confidence_level=0.95, method="BCa", random_state=0
    ).confidence_interval


def test_least_loaded_beats_random_on_edge50():
    ll = _per_seed_jct("least_loaded", "edge50")
    rnd = _per_seed_jct("random", "edge50")
    ci = _paired_ci(rnd, ll)
    assert ci.low > 0, f"least_loaded {ll.mean():.2f} vs random {rnd.mean():.2f}: CI {ci}"


def test_min_alloc_no_better_than_optimus_on_tapfinger():
    mn = _per_seed_jct("min_alloc", "tapfinger-hetero6")
    opt = _per_seed_jct("optimus", "tapfinger-hetero6")
    ci = _paired_ci(mn, opt)
    # the requirement: min_alloc is not significantly better (CI not entirely below 0) ...
    assert ci.high >= 0, f"min_alloc {mn.mean():.2f} vs optimus {opt.mean():.2f}: CI {ci}"
    # ... and in fact Optimus is significantly better (large margin: about 28 vs 7.5 slots)
    assert ci.low > 0, f"min_alloc {mn.mean():.2f} vs optimus {opt.mean():.2f}: CI {ci}"


def test_every_baseline_finishes_the_episode_under_on_advance_refill():
    """Under the original TapFinger refill, slot 0 can stay empty while later slots hold
    jobs; a baseline that served slot 0 alone (``local_only`` did) left jobs unfinished."""
    sim = _sim("tapfinger-hetero6", invalid_action="raise", pending_refill="on_advance")
    spec = EnvSpec.of(sim)
    for name in list_baselines():
        _play(make_baseline(name, spec, seed=0), sim, seed=10000)
        m = sim.episode_metrics()
        assert sim.terminated and m["jobs_unfinished"] == 0, (name, m["jobs_unfinished"])


def _two_feasible_slots(**overrides):
    """A decision round where some agent has two feasible pending jobs, and its parts.

    Returns ``(sim, spec, agent, s0, s1, obs, mask, rows, lay)``: ``rows(slot)`` is a
    writable view of that agent's job block for the slot in ``obs`` (copies of the round's
    arrays); ``lay`` is the observation layout.
    """
    from edgesched.baselines.heuristics import _View, obs_layout

    sim = _sim("edge10", arrival_rate=0.3, **SHORT, **overrides)
    spec = EnvSpec.of(sim)
    sim.reset(0)
    for _ in range(20):  # defer until some agent has two feasible pending jobs
        view = _View(spec, sim.obs, sim.mask)
        if (view.slot_ok.sum(-1) >= 2).any():
            break
        sim.step(np.zeros(sim.num_agents, dtype=np.int64))
    agent = int(np.flatnonzero(view.slot_ok.sum(-1) >= 2)[0])
    s0, s1 = (int(s) for s in np.flatnonzero(view.slot_ok[agent])[:2])
    obs, mask = sim.obs.copy(), sim.mask.copy()
    lay, f = obs_layout(spec), spec.job_features

    def rows(slot: int) -> np.ndarray:
        return obs[agent, lay.jobs.start + slot * f : lay.jobs.start + (slot + 1) * f]

    return sim, spec, agent, s0, s1, obs, mask, rows, lay


def test_sjf_serves_the_shortest_expected_job_across_models():
    """A job of more samples but a much faster model is shorter: SJF serves it first."""
    from edgesched.baselines.heuristics import SJFScheduler, _View

    sim, spec, agent, s0, s1, obs, mask, rows, lay = _two_feasible_slots()
    assert len(spec.model_rates) == sim.num_models and min(spec.model_rates) > 0
    rates = np.array(spec.model_rates)
    slow, fast = int(rates.argmin()), int(rates.argmax())
    sjf = make_baseline("sjf", spec)
    assert isinstance(sjf, SJFScheduler)
    model_cols = np.arange(spec.job_features)[lay.job_model]
    for slot, model, samples in ((s0, slow, 1e6), (s1, fast, 1e8)):
        row = rows(slot)
        row[model_cols] = 0.0
        row[model_cols[model]] = 1.0
        row[lay.job_size] = np.log1p(samples) / 20.0
        row[lay.job_workers] = 0.25
    # the slow model's job has fewer samples but takes far longer: seconds = samples / rate
    assert 1e6 / rates[slow] > 1e8 / rates[fast]
    view = _View(spec, obs, mask)
    assert sjf._slot(view)[agent] == s1
    # by samples alone (the rule before model rates) the slow model's job came first
    assert np.argmin(view.size[agent, [s0, s1]]) == 0


def _slot_of(spec: EnvSpec, action: int) -> int:
    """The pending slot a placement action serves."""
    return (int(action) - 1) // (spec.num_targets * spec.num_levels)


def test_fifo_serves_the_longest_waiting_job_not_the_queue_head():
    _, spec, agent, s0, s1, obs, mask, rows, lay = _two_feasible_slots()
    rows(s0)[lay.job_wait] = 0.1
    rows(s1)[lay.job_wait] = 0.5  # later in the queue (a lower class), but waited longer
    act = make_baseline("fifo", spec).act(obs, mask, None)
    assert _slot_of(spec, act[agent]) == s1
    rows(s0)[lay.job_wait] = 0.9
    act = make_baseline("fifo", spec).act(obs, mask, None)
    assert _slot_of(spec, act[agent]) == s0


def test_tiresias_serves_the_least_attained_service_before_the_longest_waiting():
    _, spec, agent, s0, s1, obs, mask, rows, lay = _two_feasible_slots()
    rows(s0)[lay.job_placed] = 0.5  # half its gang placed: it has attained service
    rows(s0)[lay.job_wait] = 0.9
    rows(s1)[lay.job_placed] = 0.0
    rows(s1)[lay.job_wait] = 0.1
    act = make_baseline("tiresias", spec).act(obs, mask, None)
    assert _slot_of(spec, act[agent]) == s1
    rows(s1)[lay.job_placed] = 0.5  # equal service: the longer waiting goes first
    act = make_baseline("tiresias", spec).act(obs, mask, None)
    assert _slot_of(spec, act[agent]) == s0


def test_optimus_takes_the_largest_predicted_gain_per_bottleneck_share():
    """Two pending jobs alike but for their gang size: at the same per-worker cost the
    larger gang's predicted progress rate is higher (the fitted speed-up grows with the
    compute ``workers x allocation x speed``), so Optimus places it."""
    _, spec, agent, s0, s1, obs, mask, rows, lay = _two_feasible_slots()
    rows(s1)[:] = rows(s0)  # the same job ...
    pm = spec.placement_mask(mask)
    assert np.shares_memory(pm, mask)
    pm[agent, s1] = pm[agent, s0]  # ... with the same feasible placements
    for big in (s0, s1):
        rows(s0)[lay.job_workers] = 1.0 if big == s0 else 0.25
        rows(s1)[lay.job_workers] = 1.0 if big == s1 else 0.25
        policy = make_baseline("optimus", spec)
        policy.reset(0)
        act = policy.act(obs, mask, None)
        assert _slot_of(spec, act[agent]) == big


TAPFINGER_ONE_RULE = (
    "best_fit",
    "fifo",
    "least_loaded",
    "local_only",
    "min_alloc",
    "round_robin",
    "sjf",
)
"""The heuristics that are one rule on tapfinger-hetero6 (leaderboards/README.md, "Rows
that coincide"): one target per agent, the grid's minimum allocation, one declared size and
priority class."""


@pytest.mark.parametrize("seed", [10000, 10001])
def test_the_aliased_tapfinger_heuristics_make_the_same_decisions(seed):
    sim = _sim("tapfinger-hetero6", max_slots=30)
    assert sim.cfg.neighbors_k == 0
    spec = EnvSpec.of(sim)
    ref = _play(make_baseline(TAPFINGER_ONE_RULE[0], spec, seed=0), sim, seed=seed)
    for name in TAPFINGER_ONE_RULE[1:]:
        got = _play(make_baseline(name, spec, seed=0), sim, seed=seed)
        assert len(got) == len(ref), name
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)
    # the heuristics the board keeps apart do decide differently
    for name in ("tiresias", "drf"):
        got = _play(make_baseline(name, spec, seed=0), sim, seed=seed)
        assert len(got) != len(ref) or any(
            not np.array_equal(a, b) for a, b in zip(got, ref, strict=True)
        ), name
