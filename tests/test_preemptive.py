"""Preemptive baselines: the re-allocation channel and the rules of tiresias/optimus_preemptive.

The evaluation loop lets a scheduler that sets ``reallocates`` resize running jobs once per
slot (``reallocate_once_per_slot``). The rules are checked against the cluster state each
call saw: at most one job per node, a shrink only where the agent is blocked (queued work,
nothing placeable) and only of a job that can give a GPU step, a growth only where the
agent's queue is empty and its node has a free GPU, and the job each rule names (most or
least attained service; least loss or most gain) chosen among its node's running jobs.
"""

from __future__ import annotations

import numpy as np
import pytest

from edgesched.baselines import list_baselines, make_baseline
from edgesched.baselines.preemptive import OptimusPreemptiveScheduler
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.scenarios import get_scenario
from edgesched.experiment.evaluation import evaluate_scheduler, reallocate_once_per_slot
from edgesched.policy import EnvSpec, Scheduler

PREEMPTIVE = ("tiresias_preemptive", "optimus_preemptive")


def _sim(name: str, **overrides) -> EdgeClusterSim:
    sc = get_scenario(name)
    return EdgeClusterSim(sc.config(**overrides), scenario_id=sc.id)


class _Recorder:
    """Wraps a preemptive scheduler; keeps what each ``reallocate`` call saw and returned."""

    def __init__(self, inner: Scheduler) -> None:
        self.inner = inner
        self.calls: list[dict] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def reallocate(self, view):
        service = getattr(self.inner, "service", np.zeros(0)).copy()
        jobs, delta = self.inner.reallocate(view)
        running = np.asarray(view.running)
        self.calls.append(
            dict(
                clock=view.clock,
                jobs=jobs,
                delta=delta,
                running=running.copy(),
                node=view.worker_nodes[running, 0].copy(),
                gpus=view.worker_alloc[running, 0, 1].copy(),
                levels=view.worker_levels[running, 0].copy(),
                qlen=view.queue_lengths.copy(),
                placeable=view.mask[:, 1:].any(axis=1),
                free_gpu=view.free[:, 1].copy(),
                service_before=service,
                service_after=getattr(self.inner, "service", np.zeros(0)).copy(),
            )
        )
        return jobs, delta


def _episode(name: str, scenario: str, seed: int = 3, **overrides) -> tuple[_Recorder, dict]:
    sim = _sim(scenario, **overrides)
    rec = _Recorder(make_baseline(name, EnvSpec.of(sim), seed=0))
    sim.reset(seed)
    rec.inner.reset(seed)
    slot = -1
    while not (sim.terminated or sim.truncated):
        slot = reallocate_once_per_slot(rec, sim, slot)
        graph = sim.graph() if rec.inner.needs_graph else None
        sim.step(rec.inner.act(sim.obs, sim.mask, sim.state(), graph=graph))
    return rec, sim.episode_metrics()


def test_preemptive_baselines_are_registered_and_flagged():
    assert set(PREEMPTIVE) <= set(list_baselines())
    spec = EnvSpec.of(_sim("tapfinger-hetero6"))
    for name in list_baselines():
        assert make_baseline(name, spec).reallocates == (name in PREEMPTIVE), name


@pytest.mark.parametrize("name", PREEMPTIVE)
def test_reallocate_is_called_once_per_slot_and_resizes(name):
    rec, m = _episode(name, "tapfinger-hetero6", max_slots=60)
    clocks = [c["clock"] for c in rec.calls]
    assert clocks == sorted(set(clocks)), "one call per slot, in order"
    assert clocks[0] == 0 and len(clocks) == m["slots"] + (m["slots"] < 60)
    # the channel has an effect: jobs grew and shrank
    assert m["resized_up"] > 0 and m["resized_down"] > 0, name


@pytest.mark.parametrize("scenario", ["tapfinger-hetero6", "edge10"])
@pytest.mark.parametrize("name", PREEMPTIVE)
def test_each_step_follows_the_rule(name, scenario):
    rec, _ = _episode(name, scenario, max_slots=60)
    grid = get_scenario(scenario).config().alloc_mode == "grid"
    checked = 0
    for c in rec.calls:
        nodes_changed = []
        for j, d in zip(c["jobs"].tolist(), c["delta"].tolist(), strict=True):
            i = int(np.flatnonzero(c["running"] == j)[0])
            n = int(c["node"][i])
            nodes_changed.append(n)
            on = np.flatnonzero(c["node"] == n)
            if d < 0:
                assert c["qlen"][n] > 0 and not c["placeable"][n]
                if grid:
                    assert c["gpus"][i] >= 2
            else:
                assert d == 1 and c["qlen"][n] == 0 and c["free_gpu"][n] >= 1 - 1e-9
            if name == "tiresias_preemptive":
                # grow the least, shrink the most attained service among the node's jobs
                # that can take or give the step
                give = c["gpus"][on] >= 2 if grid else c["levels"][on] > 0
                pool = on if d > 0 else on[give]
                s = c["service_after"][c["running"][pool]]
                assert c["service_after"][j] == (s.min() if d > 0 else s.max())
            checked += 1
        assert len(nodes_changed) == len(set(nodes_changed)), "one job per node and slot"
    assert checked > 0


def test_tiresias_service_accrues_the_gpus_held_each_slot():
    rec, _ = _episode("tiresias_preemptive", "tapfinger-hetero6", max_slots=30)
    for c in rec.calls:
        before = np.zeros(len(c["service_after"]))
        before[: len(c["service_before"])] = c["service_before"]
        got = (c["service_after"] - before)[c["running"]]
        np.testing.assert_allclose(got, c["gpus"])  # one worker per task in this setting


def test_optimus_preemptive_gives_a_step_to_the_largest_predicted_gain():
    """On an idle node with a free GPU, the job whose predicted rate gains most grows."""
    sim = _sim("tapfinger-hetero6", max_slots=40)
    pol = OptimusPreemptiveScheduler(EnvSpec.of(sim))
    pol.reset(0)
    sim.reset(5)

    def gains(view, on, n):
        g = view.worker_alloc[on, 0, 1] * view.cluster.speed[n]
        q = np.clip(view.job_quality[on], 0.0, 1.0)
        a, b, c = pol.coef()[view.job_model[on]].T
        return np.exp(a) * ((g + view.cluster.speed[n]) ** b - g**b) * (1.2 - q) ** c

    found = None
    for _ in range(400):  # until an idle node with a free GPU holds jobs of unequal gains
        view = sim.view()
        run = np.asarray(view.running)
        node = view.worker_nodes[run, 0]
        for n in np.unique(node):
            on = run[node == n]
            if view.queue_lengths[n] == 0 and view.free[n, 1] >= 1 and len(on) >= 2:
                gain = gains(view, on, n)
                if np.ptp(gain) > 1e-9:
                    found = (n, on, gain)
                    break
        if found or sim.terminated or sim.truncated:
            break
        sim.step(pol.act(sim.obs, sim.mask, sim.state(), graph=sim.graph()))
    assert found is not None, "no idle node with jobs of unequal predicted gains"
    n, on, gain = found
    jobs, delta = pol.reallocate(view)
    here = np.isin(jobs, on)
    assert here.sum() == 1 and delta[here][0] == 1
    assert jobs[here][0] == on[np.argmax(gain)]


def test_switching_costs_progress_for_preemptive_schedulers():
    """``switch_weight`` < 1 slows the slots in which a job was resized."""
    from edgesched.envs.handle import resolve_scenario

    res = {}
    for w in (1.0, 0.25):
        h = resolve_scenario("tapfinger-hetero6", switch_weight=w, max_slots=80)
        pol = make_baseline("tiresias_preemptive", h.spec, seed=0)
        res[w] = evaluate_scheduler(pol, h, None, [10000, 10001], 1)["summary"]["jct_mean"]
    assert res[0.25] > res[1.0]
