"""Held-out evaluation and the common per-seed record (DESIGN §6).

Every scheduler, learned or heuristic, is evaluated the same way: full episodes on workload
seeds never used in training, one record per run with the scenario's versioned id, the
algorithm, shield, seeds, git commit and config hash, per-episode metrics and their means.

Evaluation is strict: every environment it builds raises on an invalid (masked or
out-of-range) action, whatever the scenario's or the run's ``invalid_action`` setting, and
a shielded policy's masked proposals raise too. A policy that emits one fails its evaluation
instead of getting a record whose numbers hide it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import edgesched
from edgesched.envs.core import EdgeClusterSim, InvalidActionError
from edgesched.envs.scenarios import get_scenario
from edgesched.envs.topology import build_cluster
from edgesched.policy import EnvSpec, Scheduler

from .io import config_hash, git_commit
from .seeds import eval_workload_seed

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


def make_eval_sim(env_name: str, env_overrides: dict[str, Any]) -> EdgeClusterSim:
    """A simulator of scenario ``env_name`` for evaluation (strict: invalid actions raise).

    Args:
        env_name: registered scenario.
        env_overrides: scenario parameters of the run or baseline.
    """
    scenario = get_scenario(env_name)
    cfg = scenario.config(**strict_overrides(env_overrides))
    return EdgeClusterSim(cfg, build_cluster(cfg), scenario.id)


SCALAR_METRICS = (
    "jct_mean",
    "jct_mean_completed",
    "jct_p95",
    "makespan",
    "median_node_utilization",
    "collisions_proposed",
    "collisions_executed",
    "overload_node_slots",
    "final_quality_mean",
    "episode_return_mean",
    "jct_lower_bound_mean",
    "jobs_done",
    "jobs_unfinished",
)


EXTRA_METRICS = ("occupied_share_mean", "quality_total")
"""Per-episode metrics recorded since RLPTO (resources held, quality gained); optional in
records so older records stay valid."""


def cluster_reward(m: dict[str, Any], resource_weight: float = 1.0, accuracy_weight: float = 1.0):
    """RLPTO's cluster reward of an episode from its metrics, for any scheduler.

    ``sum over slots of -(jobs in system)/N - resource_weight * occupied share +
    accuracy_weight * quality gained`` = ``episode_return_mean - resource_weight *
    occupied_share_mean * slots + accuracy_weight * quality_total`` (default reward, local
    mode: an agent's mean return is minus the jobs in system per agent, summed over slots).
    NaN when the metrics are missing (records from before they existed).
    """
    try:
        return float(
            m["episode_return_mean"]
            - resource_weight * m["occupied_share_mean"] * m["slots"]
            + accuracy_weight * m["quality_total"]
        )
    except (KeyError, TypeError):
        return float("nan")


SHIELD_METRICS = (
    "shield_interventions",
    "shield_residual_collisions",
    "shield_latency_ms",
    "shield_compute_total_ms",
    "shield_network_ms",
    "shield_messages_per_step",
    "shield_inter_messages_per_step",
    "shield_max_messages_per_shield",
    "shield_rounds_per_step",
)
"""Extra per-episode metrics of shielded runs (:meth:`ShieldStats.summary`)."""


def run_episode(
    policy: Scheduler, sim: EdgeClusterSim, workload_seed: int, shield: Any = None
) -> dict[str, Any]:
    """Play one full episode with ``policy`` through the array fast path.

    With a ``shield`` (bound to ``sim``), the policy's actions are proposals and the shield's
    joint action is executed; ``collisions_proposed`` then counts the proposals' collisions
    (before the shield) and the shield's own metrics are added.

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
    while not (sim.terminated or sim.truncated):
        graph = sim.graph() if policy.needs_graph else None
        if shield is None:
            sim.step(policy.act(sim.obs, sim.mask, sim.state(), graph=graph))
        else:
            a, prefs = policy.act_with_preferences(sim.obs, sim.mask, sim.state(), graph=graph)
            res = shield(a, prefs)
            if res.invalid and sim.cfg.invalid_action == "raise":
                _raise_invalid_proposal(sim, np.asarray(a))
            stats.add(res)
            sim.step(res.actions)
    m = sim.episode_metrics()
    out = {k: m[k] for k in SCALAR_METRICS + EXTRA_METRICS}
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
    env_name: str,
    env_overrides: dict[str, Any],
    eval_seeds: list[int],
    episodes: int,
    shield: str = "none",
    shield_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate ``policy`` on held-out seeds; return per-episode metrics and their means.

    The simulator is strict (:func:`make_eval_sim`): an invalid action raises.

    Args:
        policy: the scheduler.
        env_name: registered scenario.
        env_overrides: scenario parameters.
        eval_seeds: held-out seeds.
        episodes: episodes per seed.
        shield: registered shield run around the policy (``none``: unshielded).
        shield_kwargs: the shield's options.

    Raises:
        InvalidActionError: the policy emitted an invalid action.
    """
    from edgesched.shields import make_shield

    sim = make_eval_sim(env_name, env_overrides)
    sh = make_shield(shield, sim, **(shield_kwargs or {}))
    rows = []
    for s in eval_seeds:
        for k in range(episodes):
            row = run_episode(policy, sim, eval_workload_seed(int(s), k), shield=sh)
            rows.append({"eval_seed": int(s), "episode": k, **row})
    keys = SCALAR_METRICS + EXTRA_METRICS + (SHIELD_METRICS if sh is not None else ())
    summary = {k: float(np.nanmean([r[k] for r in rows], dtype=np.float64)) for k in keys}
    return {"per_episode": rows, "summary": summary}


def make_record(
    *,
    env_name: str,
    env_overrides: dict[str, Any],
    algo: str,
    shield: str,
    train_seed: int | None,
    eval_seeds: list[int],
    episodes: int,
    result: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """The common per-run record written to ``eval.json`` and read by the leaderboards.

    ``env_overrides`` is recorded without the strict-evaluation keys
    (:func:`recorded_overrides`); ``config`` is hashed as given.
    """
    return {
        "scenario": get_scenario(env_name).id,
        "env_overrides": recorded_overrides(env_overrides),
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

    Greedy at evaluation, unless the trainer sets ``eval_sampled`` (then its draws restart
    from each episode's workload seed, so the evaluation is reproducible).
    """

    def __init__(self, spec: EnvSpec, trainer: Any, name: str) -> None:
        super().__init__(spec)
        self.trainer = trainer
        self.name = name
        self.shield = getattr(trainer, "shield_name", "none")
        self.shield_kwargs = dict(getattr(trainer, "shield_kwargs", {}))
        # learners that read the graph view (tapfinger) get it from run_episode
        self.needs_graph = bool(getattr(trainer, "needs_graph", False))
        # learners evaluated with their sampled policy (tapfinger: see its ``eval_sampled``)
        self.greedy = not bool(getattr(trainer, "eval_sampled", False))

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


def load_policy(path: str) -> tuple[LearnedScheduler, str, dict[str, Any]]:
    """Load a run's ``policy.pt`` (the trained actor) behind the policy interface.

    The scheduler's ``shield`` and ``shield_kwargs`` attributes name the shield it was
    trained with (``none`` for unshielded learners); evaluate it with the same shield.

    Returns:
        The scheduler, its scenario name and the scenario overrides it was trained with.
    """
    import torch
    from omegaconf import OmegaConf

    from edgesched.algos import make_trainer

    blob = torch.load(path, weights_only=False)
    scenario = get_scenario(blob["env"])
    sim = EdgeClusterSim(scenario.config(**blob["overrides"]), scenario_id=scenario.id)
    spec = EnvSpec.of(sim)
    algo = OmegaConf.create(blob["algo"])
    shield = blob.get("shield", "none")
    kwargs = blob.get("shield_kwargs", {})
    trainer = make_trainer(algo.name, algo, spec, 0, shield, kwargs)
    trainer.actor.load_state_dict(blob["actor"])
    if hasattr(trainer, "evaluate"):  # learners with their own view (dqn_central)
        return trainer, blob["env"], blob["overrides"]
    policy = LearnedScheduler(spec, trainer, algo.name)
    policy.shield, policy.shield_kwargs = shield, kwargs
    return policy, blob["env"], blob["overrides"]
