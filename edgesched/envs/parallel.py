"""PettingZoo views: the multi-agent ``ParallelEnv`` and its AEC conversion."""

from __future__ import annotations

from itertools import repeat
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from .config import SimConfig
from .core import OBS_BOUND, STEP_INFO_KEYS, EdgeClusterSim, InvalidActionError
from .render import check_render_mode, render_sim
from .scenarios import Scenario, scenario_config

INFO_KEYS = (*STEP_INFO_KEYS, "invalid_action")
"""Keys of every agent's info at ``reset`` (all 0) and at every step (all ints)."""

# the types the fast path accepts as actions as they are (bool deliberately absent)
_INT_TYPES = frozenset(
    {int, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64}
    | {np.intc, np.uintc, np.intp, np.uintp, np.longlong, np.ulonglong}
)


class EdgeSchedParallelEnv(ParallelEnv):
    """Multi-agent edge-cluster scheduling (PettingZoo ``ParallelEnv``).

    Description:
        DL training jobs arrive at the nodes of an edge cluster. Every node is an agent that
        schedules the jobs queued at it: each decision round it places the next worker
        ("task") of a queued job on itself or one of its K nearest nodes, with an allocation
        level, or defers. Placements of several agents that together exceed a node's free
        capacity collide (``collision_mode``). Running jobs progress at a rate set by measured
        throughput profiles, node speed, contention and heavy-tailed stragglers, plus
        synchronization time; they finish at their target accuracy or epoch limit.
        The README's "The model in one page" gives the full model;
        :class:`edgesched.envs.core.EdgeClusterSim` documents each formula.

    Agents:
        ``node_0 .. node_{N-1}``, one per edge node; all act simultaneously every step.

    Observation:
        ``Dict(observation=Box(float32, (D,)), action_mask=Box(int8 0/1, (A,)))``.
        ``observation`` concatenates: own node features (free fraction of cpu/gpu/mem,
        capacity, speed, running workers, queue length); time of day (sin, cos) and queue
        length; for each of ``pending_slots`` head-of-queue jobs: present, minimum demand
        (3), workers, log size, priority one-hot, model one-hot, placed workers, waiting time
        (:meth:`EdgeClusterSim._job_features` gives the scales); for each of the K+1
        targets: its node features (``obs_delay`` slots old), link present, log bandwidth
        and latency. ``state()`` gives all nodes' current features, all agents' pending-job
        features and the time of day (sin, cos) for centralized critics.

    Action:
        ``Discrete(1 + pending_slots * (K+1) * L)``. 0 defers; ``1 + ((slot*(K+1)) + k)*L
        + l`` places the next worker of pending job ``slot`` on target ``k`` with allocation
        level ``l``. The mask marks exactly the feasible actions, from the current state even
        when ``obs_delay`` makes the load features stale. A masked or out-of-range action
        (also an integer too large for int64) defers by default (``invalid_action='defer'``),
        as PettingZoo environments report illegal moves instead of failing, and is counted:
        ``infos[agent]["invalid_action"]`` (that agent's), ``["invalid_actions"]`` (the
        step's) and the episode metric ``invalid_actions``. ``invalid_action='raise'`` is
        the strict mode: such an action raises :class:`InvalidActionError` naming the agent,
        its action and the allowed ones, and the step is refused without changing anything.
        In both modes an action that is not an integer (a float, a string, ``None``, or a
        bool: ``True`` and ``np.True_`` alike, since a Discrete action is an index, not a
        flag) raises :class:`InvalidActionError`.

    Reward:
        Per agent and slot: -(its jobs in the system) (``reward_mode='local'``) or the mean of
        that over agents (``'team'``); summed over an episode this is minus the total job
        completion time (Little's law). Under ``visibility='shared'`` a queued job is charged
        once, to its home agent (the first that saw it), not to every agent that sees it, so
        the sum stays exact; TapFinger's original counts it for each. Optional terms:
        ``collision_penalty`` per collision an agent took part in, ``resource_cost_weight``
        x the resources its running jobs hold (per worker, CPUs over the largest node's CPUs
        plus GPUs over the largest node's GPUs, summed), and ``accuracy_gain_weight`` x gain
        in normalized quality. Steps in which the clock does not advance
        (``advance='when_idle'``) carry no time cost.

    Info:
        Every agent's info holds the same flat numeric keys at ``reset`` (all 0) and at every
        step, so array-based clients (TorchRL) can stack them: :data:`INFO_KEYS`, i.e. the
        step's cluster-wide counters ``slot``, ``advanced``, ``proposals``, ``placements``,
        ``collisions``, ``rejected``, ``task_conflicts``, ``invalid_actions``, plus the
        agent's own ``invalid_action`` (1 if its action was invalid and deferred). Each agent
        gets a dict of its own, so a client may write into it.

    Episode end:
        Terminated when every job has arrived and finished; truncated after ``max_slots``
        slots or ``max_steps`` decision rounds. Then :attr:`last_episode_metrics` holds the
        metrics summary (``None`` until an episode ends; cleared by ``reset``).

    Arguments:
        scenario: registered scenario name (``edgesched.list_scenarios()``) or a
            :class:`SimConfig`.
        render_mode: ``None``, ``"ansi"`` or ``"rgb_array"``.
        **overrides: any :class:`SimConfig` parameter, validated.

    Version history:
        v0: first release (scenario versions are listed in :mod:`edgesched.envs.scenarios`).
        v0, later: options that leave every existing scenario's dynamics unchanged were
            added: trace-driven workloads (``trace_path``) and Topology Zoo link capacities
            (``link_bandwidth_graph``); melbourne125 moved to v1 with the latter.
        v0, fix: with ``alloc_mode='grid'`` the mask now also checks the job's memory demand
            against the target's free memory (it was ignored). No registered scenario
            changes: the grid scenarios (tapfinger-hetero6*) have no memory demand.
        v0, API: the default ``invalid_action`` is now ``'defer'`` (counted) instead of
            ``'raise'``, so generic PettingZoo tools that sample without the mask work; pass
            ``invalid_action='raise'`` for the old strict behaviour. Bools are refused as
            actions. ``infos`` hold one fixed set of flat keys (:data:`INFO_KEYS`) from
            ``reset`` on; the episode metrics moved from ``infos[agent]["episode"]`` to
            :attr:`last_episode_metrics`. No scenario's dynamics under valid actions change.
        v1 (edge scenarios; melbourne125 v2): every edge scenario now defaults to
            ``collision_mode='measured'``: workers sharing a GPU run at Gavel's measured
            pair throughputs on the node's GPU class or, for a pair whose shared run failed,
            crash the newer job (it loses the work since its last checkpoint and pays Muri's
            restart overhead); three or more on a GPU use Muri's interleaving multipliers;
            CPU-starved workers follow Synergy's CPU curves; host memory over capacity
            crashes the newest job. ``pending_slots=4``: agents choose among the first four
            jobs of their queue, which widens observations and the action space (edge50: 164
            features and 85 actions per agent instead of 113 and 22). Episode metrics gain
            ``crashes``, ``crash_slots_lost``, ``restart_seconds``, ``shared_gpu_slots`` and
            ``cpu_starved_slots``. The v0 dynamics stay available by versioned id
            (``edge50-v0``) or as ``collision_mode='timeshare', pending_slots=1``. The
            TapFinger scenarios stay at v0.
        v1, later: options that leave every registered scenario's dynamics unchanged were
            added: re-allocation of running jobs in every allocation mode (``resize``, one
            GPU at a time in grid mode, with ``switch_weight``), the original TapFinger
            code's rules (``pending_refill``, ``waiting_charge``, ``tapfinger_min_demand``,
            ``conflict_rule='fit_argmax'``), trace replay rules (``trace_window_rule``,
            ``trace_drop_never_ran``, ``trace_fractional_gpus``) and the measured model's
            sensitivity knobs (``tier_gpu_classes``, the measured GPU class of a hardware
            tier; ``cpu_starvation_weight``; ``gavel_model_map``, which Gavel jobs the
            catalog's unmatched models read; ``restart_seconds_scale``, a multiplier of the
            measured restart seconds) and the victim rules of a crash (``crash_order``,
            which of one round's placements counts as newer; ``crash_victim``, whose job a
            failing pair on a GPU of three or more workers crashes). ``edge50-trace`` v1
            also turns on ``trace_fractional_gpus``.
        edge50-trace v2: a change of dynamics, so a new version: each episode's window is
            drawn around a uniformly drawn job (``trace_window_rule='per_job'``) and records
            that never ran are dropped.
    """

    metadata = {
        "render_modes": ["ansi", "rgb_array"],
        "name": "edgesched_v0",
        "is_parallelizable": True,
        "render_fps": 4,
    }

    def __init__(
        self,
        scenario: str | SimConfig = "edge10",
        render_mode: str | None = None,
        **overrides: Any,
    ) -> None:
        self.scenario: Scenario | None
        self.scenario, cfg = scenario_config(scenario, overrides)
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self.sim = EdgeClusterSim(cfg, scenario_id=self.scenario.id if self.scenario else "")
        self.possible_agents = [f"node_{i}" for i in range(cfg.num_nodes)]
        self.agents: list[str] = []
        self._obs_space = spaces.Dict(
            {
                "observation": spaces.Box(-OBS_BOUND, OBS_BOUND, (self.sim.obs_dim,), np.float32),
                "action_mask": spaces.Box(0, 1, (self.sim.num_actions,), np.int8),
            }
        )
        self._act_spaces = {a: spaces.Discrete(self.sim.num_actions) for a in self.possible_agents}
        self._obs_spaces = {a: self._obs_space for a in self.possible_agents}
        self.state_space = spaces.Box(-OBS_BOUND, OBS_BOUND, (self.sim.state_dim,), np.float32)
        self._last_metrics: dict[str, Any] | None = None

    @property
    def last_episode_metrics(self) -> dict[str, Any] | None:
        """Metrics of the episode that just ended; ``None`` while one runs.

        Set by the ``step`` that ends an episode and cleared by ``reset``. The same as
        ``env.sim.episode_metrics()`` at that moment.
        """
        return self._last_metrics

    @property
    def config(self) -> SimConfig:
        """The validated scenario configuration."""
        return self.sim.cfg

    def observation_space(self, agent: str) -> spaces.Space:
        """Observation space of ``agent`` (identical for all agents)."""
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """Action space of ``agent`` (identical for all agents)."""
        return self._act_spaces[agent]

    def _obs_dict(self) -> dict[str, dict[str, np.ndarray]]:
        obs, mask = self.sim.obs, self.sim.mask.astype(np.int8)
        return {
            a: {"observation": obs[i], "action_mask": mask[i]}
            for i, a in enumerate(self.possible_agents)
        }

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode; ``seed`` fixes the workload and all randomness."""
        self.sim.reset(seed)
        self.agents = self.possible_agents[:]
        self._last_metrics = None
        return self._obs_dict(), self._infos(dict.fromkeys(INFO_KEYS, 0))

    def _infos(self, info: dict[str, Any]) -> dict[str, dict[str, Any]]:
        # one dict per agent, never shared: clients write into them (SuperSuit's vector env
        # adds each agent's terminal_observation), which must not leak to other agents
        agents = self.possible_agents
        return dict(zip(agents, map(dict.copy, repeat(info, len(agents))), strict=True))

    def _action_array(self, actions: dict[str, Any]) -> np.ndarray:
        """The actions as an int64 array in agent order; bad types raise (see Action).

        An integer beyond int64 becomes -1, which the simulator then treats as any other
        out-of-range action; in strict mode it raises here, naming its true value.
        """
        vals = list(map(actions.__getitem__, self.possible_agents))
        # one C-level pass over the types; bools (int subclasses) fail it on purpose
        if set(map(type, vals)) <= _INT_TYPES:
            try:
                return np.array(vals, np.int64)
            except OverflowError:
                pass
        out = np.empty(len(vals), np.int64)
        hi = self.sim.num_actions - 1
        for i, v in enumerate(vals):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise InvalidActionError(
                    f"actions must be integers in [0, {hi}] (Discrete), not bools or other "
                    f"types; got {v!r} ({type(v).__name__}) for agent {self.possible_agents[i]}"
                )
            v = int(v)
            if -(2**63) <= v < 2**63:
                out[i] = v
            elif self.sim.cfg.invalid_action == "raise":
                raise InvalidActionError(
                    f"action {v} of agent {self.possible_agents[i]} is out of range; allowed "
                    f"actions are in [0, {hi}] (invalid_action='defer' would defer it instead)"
                )
            else:
                out[i] = -1
        return out

    def step(self, actions: dict[str, int]):
        """One decision round; ``actions`` maps every live agent to its action."""
        if not self.agents:
            raise RuntimeError("step() called after the episode ended; call reset() first")
        sim = self.sim
        if len(actions) != sim.num_agents or set(actions) != set(self.agents):
            missing = sorted(set(self.agents) - set(actions))
            extra = sorted(set(actions) - set(self.agents))
            raise ValueError(
                f"actions must hold exactly one action per live agent; missing {missing[:5]}, "
                f"unknown {extra[:5]}"
            )
        rewards, info = sim.step(self._action_array(actions))
        info["advanced"] = int(info["advanced"])
        agents = self.possible_agents
        bad = sim.invalid_mask
        if bad is None:
            info["invalid_action"] = 0
            infos = self._infos(info)
        else:
            flags = bad.tolist()
            infos = {
                a: {**info, "invalid_action": int(f)} for a, f in zip(agents, flags, strict=True)
            }
        done = sim.terminated or sim.truncated
        if done:
            self._last_metrics = sim.episode_metrics()
            self.agents = []
        obs = self._obs_dict()
        rew = dict(zip(agents, rewards.tolist(), strict=True))
        term = dict.fromkeys(agents, sim.terminated)
        trunc = dict.fromkeys(agents, sim.truncated)
        return obs, rew, term, trunc, infos

    def state(self) -> np.ndarray:
        """Global state for centralized critics (see class docstring)."""
        return self.sim.state()

    def graph(self) -> dict[str, Any]:
        """Heterogeneous graph view (see :meth:`EdgeClusterSim.graph`)."""
        return self.sim.graph()

    def render(self) -> str | np.ndarray | None:
        """Render per ``render_mode``: a text table (``ansi``) or a load heatmap image."""
        return render_sim(self.sim, self.render_mode)

    def close(self) -> None:
        """Nothing to release; present for API completeness."""


def make_parallel(
    name: str | SimConfig, render_mode: str | None = None, **overrides: Any
) -> EdgeSchedParallelEnv:
    """Create the multi-agent (PettingZoo parallel) view of a scenario.

    Args:
        name: registered scenario name, e.g. ``"edge50"``, or a :class:`SimConfig`.
        render_mode: ``None``, ``"ansi"`` or ``"rgb_array"``.
        **overrides: scenario parameters to change (validated).
    """
    return EdgeSchedParallelEnv(name, render_mode=render_mode, **overrides)


def make_aec(name: str | SimConfig, render_mode: str | None = None, **overrides: Any):
    """Create the AEC view of a scenario via PettingZoo's ``parallel_to_aec`` conversion."""
    return parallel_to_aec(make_parallel(name, render_mode=render_mode, **overrides))
