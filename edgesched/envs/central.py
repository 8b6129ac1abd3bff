"""Gymnasium central view: one cluster head decides for every queued task, one at a time."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .central_core import CentralHeads
from .config import SimConfig
from .core import OBS_BOUND, STEP_INFO_KEYS, InvalidActionError
from .render import check_render_mode, render_sim
from .scenarios import Scenario, scenario_config
from .view import ClusterView

INFO_KEYS = STEP_INFO_KEYS
"""Keys of ``info`` at ``reset`` and at every step (all ints; see the class docstring)."""


class EdgeSchedCentralEnv(gym.Env):
    """Centralized edge-cluster scheduling: the cluster head (SROLE's "centralized RL").

    Description:
        The same simulator as the multi-agent view, driven by one decision-maker
        that sees every node. Each slot the head walks through all queued jobs in priority
        order (priority class, aged by ``priority_aging_slots`` if set, then arrival) and
        decides for each job's next worker: place it on any node with an allocation level,
        or pass over the job until the next slot. When
        every queued job has been visited the clock advances one slot. A single head cannot
        collide with itself, so ``collision_mode`` never triggers here.

    Agents:
        One (the cluster head).

    Observation:
        ``Box(float32, (F + N*(NODE_FEATURES+1) + 3,))``: the current job's features (as in
        the multi-agent view), every node's features plus its log bandwidth to the job's home
        node, and (queued jobs / 10, position in the round / 10, time-of-day sine). The
        nodes' queue-length feature is counted when the head's slot began (before that
        slot's arrivals, or after them under ``pending_refill='on_advance'``), not after
        each placement: that lag is how every head so far was trained and evaluated, so it
        is kept (the other node features are current).

    Action:
        ``Discrete(1 + N*L)``: 0 passes over the job; ``1 + n*L + l`` places its next worker
        on node ``n`` at allocation level ``l``. ``action_masks()`` returns the feasible
        actions (for maskable learners). An infeasible choice is an out-of-range action or
        a placement on a node where the job's next worker does not fit now (action 0, pass,
        is always feasible). By default (``invalid_action='defer'``, as in the multi-agent
        view; stable-baselines3's DQN cannot mask) it passes over the job and is counted in
        ``info['invalid_actions']`` and the episode metric ``invalid_actions``. Under
        ``invalid_action='raise'`` it raises :class:`InvalidActionError` and the step is
        refused without changing anything. Actions must be integers (Python or numpy, or a
        0-d integer array); anything else, bools included, raises in both modes.

    Info:
        The same flat integer keys at ``reset`` (all 0 but ``slot``) and every step
        (:data:`INFO_KEYS`): ``slot``, ``advanced`` (slots the clock moved in this step),
        ``proposals``, ``placements``, ``collisions`` (always 0), ``rejected``,
        ``task_conflicts``, ``invalid_actions``. Nothing is written under ``'episode'``,
        the key stable-baselines3's ``Monitor`` uses for its own summary.

    Reward:
        -(jobs in the system) per slot summed over the slots the step advanced (0 for steps
        within a slot), plus the optional terms of the scenario; an episode's return is minus
        the total job completion time.

    Episode end:
        Terminated when every job has arrived and finished; truncated after ``max_slots``.
        Slots in which nothing is queued are skipped within a step; only the first decision
        after ``reset`` may be such a "wait" (action 0 alone is allowed).
        :attr:`last_episode_metrics` then holds the episode metrics
        (:data:`edgesched.protocol.SCALAR_METRICS`; ``None`` until an episode ends, cleared by
        ``reset``).

    Batched:
        :attr:`heads` is the central view's core
        (:class:`~edgesched.envs.central_core.CentralHeads`) for one copy; trainers step
        ``CentralHeads(config, copies=B)`` to run B heads as one array program, each copy
        bit for bit this view on the same workload and actions.

    Arguments:
        scenario: registered scenario name or a :class:`SimConfig`.
        render_mode: ``None``, ``"ansi"`` or ``"rgb_array"``.
        **overrides: any :class:`SimConfig` parameter, validated.

    Version history:
        v0: first release.
        v0, later: options that leave every existing scenario's dynamics unchanged were
            added: trace-driven workloads (``trace_path``) and Topology Zoo link capacities
            (``link_bandwidth_graph``); melbourne125 moved to v1 with the latter.
        v0, fix: with ``priority_aging_slots`` set, the head now visits jobs in their aged
            class order, as the multi-agent queues do (it used the static class). No
            registered scenario sets it.
        v0, API: bools are refused as actions, and a refused strict step no longer counts an
            invalid action; ``info`` holds one fixed set of flat keys (:data:`INFO_KEYS`) from
            ``reset`` on, and the episode metrics moved from ``info['episode']`` to
            :attr:`last_episode_metrics`. The ``invalid_action`` default (``'defer'``) is
            unchanged here; it is now also the simulator's. No dynamics change.
        v1 (edge scenarios; melbourne125 v2): measured co-location and four pending slots
            (:class:`~edgesched.envs.parallel.EdgeSchedParallelEnv` has the details). The
            head places a task only where it fits, so this view never overloads a node and
            the measured costs do not arise; its episode metrics gain the co-location
            counters (zero here).
        v1, later: scenario options and ``edge50-trace`` v2 (per-job replay windows,
            records that never ran dropped); :class:`~edgesched.envs.parallel.EdgeSchedParallelEnv`
            has the details.
        v1, API: the head's dynamics moved into the batched
            :class:`~edgesched.envs.central_core.CentralHeads` (this view is its one-copy
            case); trajectories unchanged (``scripts/trajectory_hash.py``'s ``central:``
            cases). A view pickled by an earlier version is refused when unpickled.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self, scenario: str | SimConfig = "edge10", render_mode: str | None = None, **overrides: Any
    ) -> None:
        self.scenario: Scenario | None
        self.scenario, cfg = scenario_config(scenario, overrides)
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self.heads = CentralHeads(cfg)
        self.sim = self.heads.sim
        self.num_levels = self.heads.num_levels
        self.observation_space = spaces.Box(
            -OBS_BOUND, OBS_BOUND, (self.heads.obs_size,), np.float32
        )
        self.action_space = spaces.Discrete(self.heads.num_actions)
        self._last_metrics: dict[str, Any] | None = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "heads" not in state:
            # pickled before the head's dynamics moved into CentralHeads (a dqn_central
            # checkpoint's environment): it cannot continue its episode
            raise ValueError(
                "this EdgeSchedCentralEnv was pickled by an edgesched version before the "
                "batched central view (CentralHeads); it cannot be restored. Start the run "
                "again, or resume it with the edgesched version that wrote it"
            )
        self.__dict__.update(state)

    @property
    def view(self) -> ClusterView:
        """The read-only view of the simulator.

        The head's decisions run through :attr:`heads`, the central view's core for one copy.
        """
        return self.sim.view()

    @property
    def last_episode_metrics(self) -> dict[str, Any] | None:
        """Metrics of the episode that just ended; ``None`` while one runs.

        Set by the ``step`` that ends an episode and cleared by ``reset``; as
        ``sim.episode_metrics()`` with ``episode_return_mean`` the head's return.
        """
        return self._last_metrics

    def action_masks(self) -> np.ndarray:
        """Feasible actions for the current decision (for maskable learners)."""
        return self.heads.masks()[0].copy()

    # ------------------------------------------------------------------ API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode; ``seed`` fixes the workload and all randomness.

        ``options={"workload_seed": s}`` instead runs exactly the workload that the
        multi-agent views draw from ``reset(seed=s)`` (used to evaluate the head on the same
        held-out workloads as every other scheduler).
        """
        super().reset(seed=seed)
        ws = (options or {}).get("workload_seed")
        if ws is not None:
            if not isinstance(ws, int | np.integer) or ws < 0:
                raise ValueError(f"options['workload_seed'] must be an integer >= 0; got {ws!r}")
            self.heads.reset([int(ws)])
        else:
            # derive the simulator seed from the env's seeded generator so reset(seed=None)
            # continues a reproducible stream
            self.heads.reset([int(self.np_random.integers(2**63 - 1))])
        self._last_metrics = None
        info = dict.fromkeys(INFO_KEYS, 0)
        info["slot"] = self.view.clock
        return self.heads.observations()[0], info

    def _action_int(self, action: Any) -> int:
        """``action`` as a Python int; non-integers (bools included) raise."""
        a = action
        if isinstance(a, np.ndarray) and a.shape == ():
            a = a[()]  # a 0-d array, as SB3's predict returns for one observation
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise InvalidActionError(
                f"action must be an integer in [0, {self.action_space.n - 1}] (Discrete), not "
                f"a bool or another type; got {action!r} ({type(action).__name__})"
            )
        return int(a)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Decide for the current job's next worker (see class docstring)."""
        a = self._action_int(action)
        rewards, _ = self.heads.step([a])  # a finished episode raises there
        info = dict(zip(INFO_KEYS, self.heads.info_rows[:, 0].tolist(), strict=True))
        reward = float(rewards[0])
        terminated, truncated = self.sim.terminated, self.sim.truncated
        if terminated or truncated:
            self._last_metrics = self.heads.episode_metrics(0)
        return self.heads.observations()[0], reward, terminated, truncated, info

    def render(self) -> str | np.ndarray | None:
        """Render per ``render_mode`` (text table or load heatmap)."""
        return render_sim(self.sim, self.render_mode)
