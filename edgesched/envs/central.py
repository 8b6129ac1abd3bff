"""Gymnasium central view: one cluster head decides for every queued task, one at a time."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .config import SimConfig
from .core import (
    NODE_FEATURES,
    OBS_BOUND,
    QUEUED,
    STEP_INFO_KEYS,
    EdgeClusterSim,
    InvalidActionError,
)
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
        node, and (queued jobs / 10, position in the round / 10, time-of-day sine).

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
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    # class-level defaults: views pickled in checkpoints before these existed still step
    _mask_memo: np.ndarray | None = None
    _view: ClusterView | None = None

    @property
    def view(self) -> ClusterView:
        """The read-only view of the simulator: everything the head reads goes through it.

        The head drives the simulator through its public steps (``place``, ``advance``,
        ``reset``).
        """
        if self._view is None:
            self._view = self.sim.view()
        return self._view

    def __init__(
        self, scenario: str | SimConfig = "edge10", render_mode: str | None = None, **overrides: Any
    ) -> None:
        self.scenario: Scenario | None
        self.scenario, cfg = scenario_config(scenario, overrides)
        self.render_mode = check_render_mode(render_mode, self.metadata["render_modes"])
        self.sim = EdgeClusterSim(cfg)
        view = self.view
        n, lv = cfg.num_nodes, view.num_levels
        self.num_levels = lv
        self.observation_space = spaces.Box(
            -OBS_BOUND,
            OBS_BOUND,
            (view.job_features + n * (NODE_FEATURES + 1) + 3,),
            np.float32,
        )
        self.action_space = spaces.Discrete(1 + n * lv)
        self._log_bw = np.log10(view.cluster.pair_bw + 1.0).astype(np.float32) / 2.0
        self._last_metrics: dict[str, Any] | None = None

    @property
    def last_episode_metrics(self) -> dict[str, Any] | None:
        """Metrics of the episode that just ended; ``None`` while one runs.

        Set by the ``step`` that ends an episode and cleared by ``reset``; as
        ``sim.episode_metrics()`` with ``episode_return_mean`` the head's return.
        """
        return self._last_metrics

    # ------------------------------------------------------------------ helpers
    def _new_round(self) -> None:
        view = self.view
        queued = np.flatnonzero(view.queued)
        key = view.queue_key(queued)
        every = view.config.priority_aging_slots
        if every:
            # the aged class the multi-agent queues use (EdgeClusterSim._age_queues)
            waited = view.clock - view.job_arrival[queued]
            eff = np.maximum(view.job_priority[queued] - waited // every, 0)
            key = eff * (view.num_jobs + 1) + queued
        self._round = queued[np.argsort(key, kind="stable")]
        self._cursor = 0

    def _current_job(self) -> int:
        return int(self._round[self._cursor])

    def _mask(self) -> np.ndarray:
        # memoized until the next step or reset: a learner reads action_masks() and step()
        # checks the same mask, each decision
        if self._mask_memo is not None:
            return self._mask_memo
        self._mask_memo = mask = self._compute_mask()
        return mask

    def _compute_mask(self) -> np.ndarray:
        view = self.view
        mask = np.zeros(self.action_space.n, dtype=bool)
        mask[0] = True
        if self._cursor < len(self._round):
            j = self._current_job()
            free = view.free
            fits = (view.alloc_table[j][None, :, :] <= free[:, None, :] + 1e-9).all(-1)
            mask[1:] = (fits & view.alloc_allowed[j][None, :]).ravel()
        return mask

    def _obs(self) -> np.ndarray:
        view = self.view
        has_job = self._cursor < len(self._round)
        j = self._current_job() if has_job else -1
        jf = view.job_feature_rows(np.array([j]))[0]
        home = view.job_home[j] if has_job else 0
        bw = self._log_bw[home] * has_job
        nf = view.node_feature_rows()
        extra = np.array(
            [
                min(len(self._round), 1e4) / 10.0,
                min(self._cursor, 1e4) / 10.0,
                view.time_features()[0],
            ],
            np.float32,
        )
        return np.concatenate([jf, np.concatenate([nf, bw[:, None]], 1).ravel(), extra])

    def action_masks(self) -> np.ndarray:
        """Feasible actions for the current decision (for maskable learners)."""
        return self._mask().copy()

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
        self._mask_memo = None
        ws = (options or {}).get("workload_seed")
        if ws is not None:
            if not isinstance(ws, int | np.integer) or ws < 0:
                raise ValueError(f"options['workload_seed'] must be an integer >= 0; got {ws!r}")
            self.sim.reset(int(ws))
        else:
            # derive the simulator seed from the env's seeded generator so reset(seed=None)
            # continues a reproducible stream
            self.sim.reset(int(self.np_random.integers(2**63 - 1)))
        self._new_round()
        self._last_metrics = None
        # No clock advance here: if nothing is queued yet, the first decision is a "wait"
        # (only action 0 allowed), so reset never returns an already-finished episode.
        info = dict.fromkeys(INFO_KEYS, 0)
        info["slot"] = self.view.clock
        return self._obs(), info

    def _advance_until_decision(self) -> float:
        """Advance the clock while no job is waiting for a decision; return the reward."""
        sim = self.sim
        reward = 0.0
        while self._cursor >= len(self._round) and not (sim.terminated or sim.truncated):
            reward += sim.advance()
            self._new_round()
        return reward

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
        sim = self.sim
        if sim.terminated or sim.truncated:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        a = self._action_int(action)
        info = dict.fromkeys(INFO_KEYS, 0)
        mask = self._mask()
        self._mask_memo = None  # the decision below changes the state
        if not 0 <= a < len(mask) or not mask[a]:
            if self.view.config.invalid_action == "raise":
                # refuse before counting: a refused step leaves the simulator as it was
                raise InvalidActionError(
                    f"action {a} is {'masked' if 0 <= a < len(mask) else 'out of range'}; "
                    f"allowed now: {np.flatnonzero(mask).tolist()[:20]} (action space "
                    f"0..{len(mask) - 1}; invalid_action='defer' would pass over the job)"
                )
            sim.count_invalid(np.array([0]))
            info["invalid_actions"] = 1
            a = 0
        t0 = self.view.clock
        if a == 0:
            self._cursor += 1
        else:
            j = self._current_job()
            node, level = divmod(a - 1, self.num_levels)
            pinfo = sim.place(
                np.array([self.view.job_home[j]]),
                np.array([j]),
                np.array([node]),
                np.array([level]),
            )
            for k in ("proposals", "placements", "collisions", "rejected", "task_conflicts"):
                info[k] = int(pinfo[k])
            if self.view.job_status[j] != QUEUED:
                self._cursor += 1
        reward = self._advance_until_decision()
        sim.return_sum[0] += reward
        terminated, truncated = sim.terminated, sim.truncated
        info["slot"] = self.view.clock
        info["advanced"] = info["slot"] - t0
        if terminated or truncated:
            m = sim.episode_metrics()
            m["episode_return_mean"] = float(sim.return_sum[0])
            self._last_metrics = m
        return self._obs(), reward, terminated, truncated, info

    def render(self) -> str | np.ndarray | None:
        """Render per ``render_mode`` (text table or load heatmap)."""
        return render_sim(self.sim, self.render_mode)
