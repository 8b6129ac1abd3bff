"""Held-out evaluation and the common per-seed record.

Every scheduler, learned or heuristic, is evaluated the same way: full episodes on workload
seeds never used in training, one record per run with the scenario's versioned id, the
algorithm, shield, seeds, git commit and config hash, per-episode metrics and their means.

Evaluation is strict: every environment it builds raises on an invalid (masked or
out-of-range) action, whatever the scenario's or the run's ``invalid_action`` setting, and
a shielded policy's masked proposals raise too. A policy that emits one fails its evaluation
instead of getting a record whose numbers hide it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import edgesched
from edgesched.algos import config_from_dict, get_algorithm, make_trainer
from edgesched.envs.core import EdgeClusterSim, InvalidActionError
from edgesched.envs.handle import ScenarioHandle, resolve_scenario
from edgesched.envs.topology import build_cluster
from edgesched.policy import EnvSpec, Scheduler

# the metric names live in edgesched.protocol (the algorithms need them too); re-exported
from edgesched.protocol import (
    COLOCATION_METRICS,
    EXTRA_METRICS,
    SCALAR_METRICS,
    SHIELD_METRICS,
    cluster_reward,
    eval_workload_seed,
)

from .io import config_hash, git_commit

STRICT_OVERRIDES: dict[str, Any] = {"invalid_action": "raise"}
"""Scenario parameters every evaluation environment is built with, on top of the record's
``env_overrides``. They are not recorded in ``env_overrides`` (nor in the baselines' config
hash): they hold for every record, so they cannot tell records apart."""


def strict_overrides(env_overrides: dict[str, Any]) -> dict[str, Any]:
    """The scenario parameters an evaluation environment is built with.

    Args:
        env_overrides: the scenario overrides of the run or baseline being evaluated.

    Returns:
        A new dict: ``env_overrides`` with :data:`STRICT_OVERRIDES` applied over it (a run
        trained with ``invalid_action='defer'`` is still evaluated strictly).
    """
    return {**env_overrides, **STRICT_OVERRIDES}


def recorded_overrides(env_overrides: dict[str, Any]) -> dict[str, Any]:
    """``env_overrides`` without the strict-evaluation keys, as records store them.

    Records evaluated strictly all share :data:`STRICT_OVERRIDES`; keeping a training-time
    ``invalid_action`` would claim a setting the evaluation did not use and split tables
    whose evaluations were identical.
    """
    return {k: v for k, v in env_overrides.items() if k not in STRICT_OVERRIDES}


def make_eval_sim(
    scenario: str | ScenarioHandle, env_overrides: dict[str, Any] | None = None
) -> EdgeClusterSim:
    """A simulator of ``scenario`` for evaluation (strict: invalid actions raise).

    Args:
        scenario: the run's or baseline's scenario handle, or a registered name.
        env_overrides: scenario parameters, with a name only (a handle carries its own).
    """
    handle = _handle(scenario, env_overrides)
    cfg = handle.config_with(**STRICT_OVERRIDES)
    return EdgeClusterSim(cfg, build_cluster(cfg), handle.id)


def _handle(scenario: str | ScenarioHandle, env_overrides: dict[str, Any] | None) -> ScenarioHandle:
    """``scenario`` as a handle; a name is resolved (once) with ``env_overrides``."""
    if isinstance(scenario, ScenarioHandle):
        if env_overrides and dict(env_overrides) != dict(scenario.overrides):
            raise ValueError(
                f"env_overrides={env_overrides!r} given with the handle of {scenario.id!r}, "
                f"whose overrides are {dict(scenario.overrides)!r}; pass only the handle"
            )
        return scenario
    return resolve_scenario(scenario, **recorded_overrides(env_overrides or {}))


__all__ = [
    "EXTRA_METRICS",
    "SCALAR_METRICS",
    "SHIELD_METRICS",
    "STRICT_OVERRIDES",
    "LearnedScheduler",
    "cluster_reward",
    "evaluate_scheduler",
    "evaluate_trainer",
    "load_policy",
    "make_eval_sim",
    "make_record",
    "reallocate_once_per_slot",
    "recorded_overrides",
    "run_episode",
    "strict_overrides",
]


def reallocate_once_per_slot(policy: Scheduler, sim: EdgeClusterSim, last_slot: int) -> int:
    """Let a preemptive ``policy`` re-allocate running jobs if a new slot has begun.

    Calls :meth:`~edgesched.policy.Scheduler.reallocate` (schedulers that set
    ``reallocates``) when the clock differs from ``last_slot`` and applies its changes with
    ``sim.resize``; a lone simulator's local job ids are its own.

    Returns:
        The slot seen now: pass it back as ``last_slot`` before the next decision round.
    """
    if not policy.reallocates:
        return last_slot
    view = sim.view()
    if view.clock == last_slot:
        return last_slot
    jobs, delta = policy.reallocate(view)
    if len(jobs):
        sim.resize(jobs, delta)
    return view.clock


def run_episode(
    policy: Scheduler,
    sim: EdgeClusterSim,
    workload_seed: int,
    shield: Any = None,
    observer: Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None = None,
) -> dict[str, Any]:
    """Play one full episode with ``policy`` through the array fast path.

    With a ``shield`` (bound to ``sim``), the policy's actions are proposals and the shield's
    joint action is executed; ``collisions_proposed`` then counts the proposals' collisions
    (before the shield) and the shield's own metrics are added.

    ``observer``, if given, is called after every step with the mask the decision saw, the
    proposed joint action and the executed one (the same without a shield), so an analysis
    can follow the episode (``benchmarks/jct_decomposition.py``) without a copy of this loop.

    Raises:
        InvalidActionError: the policy emitted an invalid action while ``sim`` raises on
            them (evaluation simulators do, see :func:`make_eval_sim`); behind a shield,
            which would defer a masked proposal silently, the proposal itself raises.
    """
    sim.reset(workload_seed)
    policy.reset(workload_seed)
    stats = None
    if shield is not None:
        from edgesched.shields import ShieldStats

        stats = ShieldStats()
    slot = -1
    while not (sim.terminated or sim.truncated):
        slot = reallocate_once_per_slot(policy, sim, slot)
        graph = sim.graph() if policy.needs_graph else None
        mask = sim.mask
        if shield is None:
            a = executed = policy.act(sim.obs, mask, sim.state(), graph=graph)
        else:
            a, prefs = policy.act_with_preferences(sim.obs, mask, sim.state(), graph=graph)
            res = shield(a, prefs)
            if res.invalid and sim.cfg.invalid_action == "raise":
                _raise_invalid_proposal(sim, np.asarray(a))
            stats.add(res)
            executed = res.actions
        sim.step(executed)
        if observer is not None:
            observer(mask, np.asarray(a), np.asarray(executed))
    m = sim.episode_metrics()
    out = {k: m[k] for k in SCALAR_METRICS + EXTRA_METRICS}
    out.update({k: m[k] for k in COLOCATION_METRICS if k in m})
    if stats is not None:
        out["collisions_proposed"] = int(stats.totals["proposed_collisions"])
        out.update(stats.summary())
    out["jct_by_priority"] = m["jct_by_priority"]
    out["slots"] = m["slots"]
    out["truncated"] = bool(sim.truncated)
    return out


def _raise_invalid_proposal(sim: EdgeClusterSim, a: np.ndarray) -> None:
    """Raise for the first invalid proposal of joint action ``a`` (the shield deferred it)."""
    ok = (a >= 0) & (a < sim.num_actions)
    ok[ok] = sim.mask[np.flatnonzero(ok), a[ok]]
    ag = int(np.flatnonzero(~ok)[0])
    why = "masked" if 0 <= a[ag] < sim.num_actions else "out of range"
    raise InvalidActionError(
        f"proposed action {int(a[ag])} of agent node_{ag} is {why} at slot {sim.t}; allowed "
        f"actions now: {np.flatnonzero(sim.mask[ag]).tolist()[:20]} (evaluation is strict: "
        "the shield would have deferred it)"
    )


def evaluate_scheduler(
    policy: Scheduler,
    env_name: str | ScenarioHandle,
    env_overrides: dict[str, Any] | None,
    eval_seeds: list[int],
    episodes: int,
    shield: str = "none",
    shield_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate ``policy`` on held-out seeds; return per-episode metrics and their means.

    The simulator is strict (:func:`make_eval_sim`): an invalid action raises.

    Args:
        policy: the scheduler.
        env_name: the scenario's handle (``env_overrides`` then ``None``), or a registered
            name, resolved here once with ``env_overrides``.
        env_overrides: scenario parameters of a name.
        eval_seeds: held-out seeds.
        episodes: episodes per seed.
        shield: registered shield run around the policy (``none``: unshielded).
        shield_kwargs: the shield's options.

    Raises:
        InvalidActionError: the policy emitted an invalid action.
    """
    from edgesched.shields import make_shield

    sim = make_eval_sim(_handle(env_name, env_overrides))
    sh = make_shield(shield, sim, **(shield_kwargs or {}))
    rows = []
    for s in eval_seeds:
        for k in range(episodes):
            row = run_episode(policy, sim, eval_workload_seed(int(s), k), shield=sh)
            rows.append({"eval_seed": int(s), "episode": k, **row})
    keys = SCALAR_METRICS + EXTRA_METRICS + (SHIELD_METRICS if sh is not None else ())
    keys += tuple(k for k in COLOCATION_METRICS if rows and k in rows[0])
    summary = {k: float(np.nanmean([r[k] for r in rows], dtype=np.float64)) for k in keys}
    return {"per_episode": rows, "summary": summary}


def make_record(
    *,
    scenario: ScenarioHandle | None = None,
    env_name: str | None = None,
    env_overrides: dict[str, Any] | None = None,
    algo: str,
    shield: str,
    train_seed: int | None,
    eval_seeds: list[int],
    episodes: int,
    result: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """The common per-run record written to ``eval.json`` and read by the leaderboards.

    The scenario is its ``scenario`` handle, or ``env_name`` with ``env_overrides``. The
    overrides are recorded without the strict-evaluation keys (:func:`recorded_overrides`);
    ``config`` is hashed as given.
    """
    if scenario is None:
        if env_name is None:
            raise TypeError("make_record: give scenario=<ScenarioHandle> or env_name=<name>")
        scenario = _handle(env_name, env_overrides)
    return {
        "scenario": scenario.id,
        "env_overrides": recorded_overrides(dict(scenario.overrides)),
        "algo": algo,
        "shield": shield,
        "train_seed": train_seed,
        "eval_seeds": [int(s) for s in eval_seeds],
        "episodes_per_seed": episodes,
        "git_commit": git_commit(),
        "config_hash": config_hash(config),
        "edgesched_version": edgesched.__version__,
        **result,
    }


class LearnedScheduler(Scheduler):
    """Adapter: a trained actor behind the policy interface.

    Greedy at evaluation, unless the algorithm's registry entry sets ``eval_sampled`` (then
    its draws restart from each episode's workload seed, so the evaluation is reproducible).
    The graph view is passed when the entry sets ``needs_graph_view``.

    Args:
        spec: the scenario's static facts.
        trainer: a :class:`~edgesched.algos.base.SharedViewTrainer` of algorithm ``name``.
        name: the registered algorithm (its entry's flags decide the above).
        shield: the shield it was trained with (``none`` for unshielded learners); evaluate
            it with the same one.
        shield_kwargs: that shield's options.
    """

    def __init__(
        self,
        spec: EnvSpec,
        trainer: Any,
        name: str,
        shield: str = "none",
        shield_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(spec)
        entry = get_algorithm(name)
        if entry.own_view:
            raise ValueError(
                f"name={name!r}: that algorithm evaluates itself (own_view); call its "
                "trainer's evaluate() instead of wrapping it in a LearnedScheduler"
            )
        self.trainer = trainer
        self.name = name
        self.shield = shield
        self.shield_kwargs = dict(shield_kwargs or {})
        self.needs_graph = entry.needs_graph_view
        self.greedy = not entry.eval_sampled

    def reset(self, seed: int | None = None) -> None:
        """Seed a sampled policy's draws from the episode's workload seed (reproducible)."""
        if not self.greedy:
            self.trainer.seed_sampling(0 if seed is None else int(seed))

    def _graph_kw(self, graph: dict | None) -> dict[str, Any]:
        return {"graphs": [graph]} if self.needs_graph else {}

    def act(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        state: np.ndarray | None,
        graph: dict | None = None,
    ) -> np.ndarray:
        """Most likely feasible action of each agent (or a seeded sample, see ``greedy``)."""
        return self.trainer.act(obs, mask, greedy=self.greedy, **self._graph_kw(graph))[0]

    def act_with_preferences(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        state: np.ndarray | None,
        graph: dict | None = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Greedy (or sampled) actions and the actor's probabilities as shield preferences."""
        a, _, probs = self.trainer.act(
            obs, mask, greedy=self.greedy, with_probs=True, **self._graph_kw(graph)
        )
        return a, probs


def evaluate_trainer(
    trainer: Any,
    name: str,
    scenario: ScenarioHandle,
    eval_seeds: list[int],
    episodes: int,
    shield: str = "none",
    shield_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate a trained learner of algorithm ``name`` on held-out seeds of ``scenario``.

    Its registry entry decides how: ``own_view`` learners evaluate themselves
    (:class:`~edgesched.algos.base.OwnViewTrainer`), the others play through the shared
    multi-agent view behind the run's shield (:class:`LearnedScheduler`).
    """
    if get_algorithm(name).own_view:
        # the handle keeps the run's version and overrides; the strict keys go on top
        return trainer.evaluate(scenario, dict(STRICT_OVERRIDES), eval_seeds, episodes)
    policy = LearnedScheduler(scenario.spec, trainer, name, shield, shield_kwargs)
    return evaluate_scheduler(
        policy, scenario, None, eval_seeds, episodes, shield=shield, shield_kwargs=shield_kwargs
    )


def load_policy(path: str, scenario_id: str | None = None) -> tuple[Any, str, dict[str, Any]]:
    """Load a run's ``policy.pt`` (the trained actor) behind the policy interface.

    The scheduler's ``shield`` and ``shield_kwargs`` attributes name the shield it was
    trained with (``none`` for unshielded learners); evaluate it with the same shield.
    Learners that evaluate themselves (registry flag ``own_view``) come back as their
    trainer.

    Args:
        path: the ``policy.pt`` file.
        scenario_id: the versioned scenario it was trained on (a record's ``scenario``);
            by default the file's own entry, which policies written before scenarios were
            versioned hold as a bare name (it resolves to the latest version).

    Returns:
        The scheduler, its scenario name or id and the overrides it was trained with.
    """
    import torch

    blob = torch.load(path, weights_only=False)
    if scenario_id is not None:
        blob["env"] = scenario_id
    scenario = resolve_scenario(blob["env"], **blob["overrides"])
    # policy files written before each algorithm had its own config class hold every
    # algorithm's keys; config_from_dict keeps the ones this algorithm has
    algo = config_from_dict(blob["algo"])
    shield = blob.get("shield", "none")
    kwargs = blob.get("shield_kwargs", {})
    trainer = make_trainer(algo.name, algo, scenario.spec, 0, shield, kwargs)
    trainer.actor.load_state_dict(blob["actor"])
    if get_algorithm(algo.name).own_view:
        return trainer, blob["env"], blob["overrides"]
    policy = LearnedScheduler(scenario.spec, trainer, algo.name, shield, kwargs)
    return policy, blob["env"], blob["overrides"]
