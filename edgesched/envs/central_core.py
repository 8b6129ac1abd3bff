"""The cluster head's dynamics on B copies of a scenario at once (the central view's core).

:class:`~edgesched.envs.central.EdgeSchedCentralEnv` (Gymnasium) is the case B = 1 of
:class:`CentralHeads`; trainers that want many heads' experience per call (``dqn_central``)
step B copies as one array program: one placement call and one clock call per step for all
copies, observations and masks computed for all copies together. What stays per copy in
Python is the start of a head's round (sorting that copy's queued jobs), once per slot.

Each copy runs the same rule as a lone head: every slot the head walks through the queued
jobs in priority order and decides for each job's next worker (place it on a node at a
level, or pass over the job until the next slot); when every queued job has been visited,
that copy's clock advances. Copy ``b`` reset with workload seed ``s`` is bit-identical to a
lone head reset with ``s`` under the same actions (``tests/test_central_batched.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .config import SimConfig
from .core import NODE_FEATURES, QUEUED, STEP_INFO_KEYS, EdgeClusterSim, InvalidActionError
from .observe import QLEN_FEATURE
from .placement import CAPACITY_EPS

__all__ = ["LONE_ROWS", "CentralHeads"]

LONE_ROWS = 16
"""Most jobs of its round whose observations and masks a lone head computes at once."""

FITS_AT_ONCE = 128
"""Largest (jobs x nodes x levels) fit test done as one broadcast: one comparison and its
reduction over the 3 resources beat three per-resource comparisons at 30 entries (4.4 against
6.0 us), are even near 120 and lose at 240 (9.8 against 7.7 us), measured on this project's
2-core AMD EPYC machine with numpy 2.4."""


class CentralHeads:
    """B cluster heads, one per copy of a scenario, stepped together.

    Args:
        config: the scenario's parameters (validated).
        copies: B; ``1`` runs a lone simulator (the Gymnasium view's case).

    Attributes:
        sim: the simulator (lone for one copy, batched otherwise).
        copies: B.
        num_actions: ``1 + N * L`` per head.
        obs_size: features per head's observation.
    """

    def __init__(self, config: SimConfig, copies: int = 1) -> None:
        if isinstance(copies, bool) or not isinstance(copies, int | np.integer) or copies < 1:
            raise ValueError(f"copies={copies!r}: need an integer >= 1")
        self.copies = int(copies)
        # one copy runs a lone simulator (its Python-scalar fast paths)
        self.sim = EdgeClusterSim(config, copies=None if self.copies == 1 else self.copies)
        self.view = self.sim.batch_view()
        n, lv = self.view.num_agents, self.view.num_levels
        self.num_nodes, self.num_levels = n, lv
        self.num_actions = 1 + n * lv
        self.obs_size = self.sim.job_features + n * (NODE_FEATURES + 1) + 3
        self._log_bw = np.log10(self.view.cluster.pair_bw + 1.0).astype(np.float32) / 2.0
        self._rounds: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * self.copies
        self._cursor = np.zeros(self.copies, dtype=np.int64)
        self._lens = np.zeros(self.copies, dtype=np.int64)  # len(self._rounds[b])
        # each copy's current job (local id; -1 once its round is through), kept in step
        # with the cursors: read several times per decision
        self._jobs = np.full(self.copies, -1, dtype=np.int64)
        # the queue-length node feature as a lone head has always seen it: counted when
        # its slot began (see observations), kept per copy
        self._qlen_seen = np.zeros((self.copies, n), dtype=np.int64)
        self._refill_on_advance = config.pending_refill == "on_advance"
        # the node features change only when this core places, runs a clock or resets: kept
        # between those (most decisions pass over a job and change nothing)
        self._node_block: np.ndarray | None = None
        self._mask_memo: np.ndarray | None = None
        # a lone head's observations and masks of the next jobs of its round, computed as
        # one array program (see _lone_rows); valid while the node block is
        self._chunk: tuple[np.ndarray, np.ndarray, int] | None = None
        self._all = np.arange(self.copies)
        self.info_rows = np.zeros((len(STEP_INFO_KEYS), self.copies), np.int64)
        """The last step's counters, (K, B), one row per key of :data:`STEP_INFO_KEYS`."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickled before the lone head kept its round's rows (a dqn_central checkpoint's
        # environment): none kept, so the next decision computes them
        state.setdefault("_chunk", None)
        self.__dict__.update(state)

    # ------------------------------------------------------------------ episode state
    def end_flags(self) -> tuple[np.ndarray, np.ndarray]:
        """(B,) terminated and (B,) truncated, fresh."""
        sim = self.sim
        if self.copies == 1:  # a lone simulator's flags are Python bools
            return np.array([sim.terminated]), np.array([sim.truncated])
        return sim.terminated.copy(), sim.truncated.copy()

    @property
    def ended(self) -> np.ndarray:
        """(B,) bool, copies whose episode terminated or was truncated."""
        term, trunc = self.end_flags()
        return term | trunc

    def round_of(self, b: int) -> np.ndarray:
        """Copy ``b``'s current round: its queued jobs (local ids) in visiting order."""
        return self._rounds[b].copy()

    def reset(self, seeds: list[int]) -> None:
        """Start an episode in every copy, copy ``b`` on workload seed ``seeds[b]``."""
        if len(seeds) != self.copies:
            raise ValueError(f"seeds has {len(seeds)} entries; need copies={self.copies}")
        self.sim.reset(seeds=[int(s) for s in seeds])
        self._restart(self._all)

    def reset_copies(self, copies: np.ndarray, seeds: list[int]) -> None:
        """Start a new episode in each of ``copies`` (workload ``seeds``); others keep going."""
        copies = np.asarray(copies, dtype=np.int64)
        self.sim.reset_copies(copies.tolist(), [int(s) for s in seeds])
        self._restart(copies)

    def _restart(self, copies: np.ndarray) -> None:
        self._mask_memo = self._node_block = self._chunk = None
        self._qlen_seen[copies] = self.view.queue_lengths()[copies]
        for b in copies.tolist():
            self._new_round(b)
        # No clock advance here: if nothing is queued yet, the first decision is a "wait"
        # (only action 0 allowed), so a reset never returns an already-finished episode.

    def _new_round(self, b: int) -> None:
        view = self.view.view(b)
        queued = np.flatnonzero(view.queued)
        key = view.queue_key(queued)
        every = view.config.priority_aging_slots
        if every:
            # the aged class the multi-agent queues use (queues.py's aging)
            waited = view.clock - view.job_arrival[queued]
            eff = np.maximum(view.job_priority[queued] - waited // every, 0)
            key = eff * (view.num_jobs + 1) + queued
        self._rounds[b] = r = queued[np.argsort(key, kind="stable")]
        self._cursor[b] = 0
        self._lens[b] = len(r)
        self._jobs[b] = r[0] if len(r) else -1

    def _move_on(self, b: int) -> None:
        """Advance copy ``b``'s cursor to its round's next job."""
        self._cursor[b] = c = self._cursor[b] + 1
        self._jobs[b] = self._rounds[b][c] if c < self._lens[b] else -1

    def queued_counts(self) -> np.ndarray:
        """(B,) jobs waiting in a queue in each copy."""
        return np.array([np.count_nonzero(self.view.view(b).queued) for b in range(self.copies)])

    # ------------------------------------------------------------------ observations, masks
    def masks(self) -> np.ndarray:
        """(B, 1 + N*L) feasible actions of each head's current decision, read-only.

        Memoized until the next step or reset: a learner reads the masks and the step
        checks the same ones, each decision.
        """
        if self._mask_memo is None:
            if self.copies == 1 and self._jobs[0] >= 0:
                masks, _, i = self._lone_rows()
                self._mask_memo = masks[i : i + 1]  # a view of a read-only array
            else:
                self._mask_memo = self._compute_masks()
                self._mask_memo.flags.writeable = False
        return self._mask_memo

    def _deciding(self) -> tuple[Any, np.ndarray, np.ndarray] | None:
        """The copies whose head has a job now: ``(rows, copies, jobs)``, or ``None``.

        ``rows`` indexes (B, ...) arrays (a slice when every copy has one: no gather).
        """
        jobs = self._jobs
        if self.copies == 1:
            return None if jobs[0] < 0 else (slice(None), self._all, jobs)
        has = jobs >= 0
        if has.all():
            return slice(None), self._all, jobs
        cp = np.flatnonzero(has)
        return (cp, cp, jobs[cp]) if len(cp) else None

    def _compute_masks(self) -> np.ndarray:
        mask = np.zeros((self.copies, self.num_actions), dtype=bool)
        mask[:, 0] = True
        deciding = self._deciding()
        if deciding is None:
            return mask
        rows, cp, j = deciding
        free = self.view.free[rows]  # (C, N, 3), fresh
        mask[rows, 1:] = self._fits(cp, j, free).reshape(len(cp), -1)
        return mask

    def _fits(self, cp: np.ndarray, j: np.ndarray, free: np.ndarray) -> np.ndarray:
        """(C, N, L) whether job ``j[c]``'s next worker fits on each node at each level.

        Args:
            cp: (C,) copies.
            j: (C,) their jobs (local ids, valid).
            free: (C, N, 3) or (1, N, 3) (one copy's, for all C jobs) free capacity, fresh
                (the simulator's fit tolerance is added to it in place).
        """
        table, allowed = self.view.alloc_options(cp, j)  # (C, L, 3), (C, L)
        free += CAPACITY_EPS  # the simulator's fit tolerance
        if len(j) * self.num_nodes * self.num_levels > FITS_AT_ONCE:
            # per resource on larger tables (TapFinger's 288-level grid, many nodes, several
            # jobs): a (C, N, L, 3) temporary and its reduction over 3 cost up to 4.7x as
            # much; on a few (node, level) pairs the one broadcast is the cheaper (fewer
            # numpy calls). The same booleans either way.
            t, f = table[:, None], free[:, :, None]  # (C, 1, L, 3), (C|1, N, 1, 3)
            fits = t[..., 0] <= f[..., 0]
            fits &= t[..., 1] <= f[..., 1]
            fits &= t[..., 2] <= f[..., 2]
        else:
            fits = (table[:, None, :, :] <= free[:, :, None, :]).all(-1)  # (C, N, L)
        fits &= allowed[:, None, :]
        return fits

    def _nodes(self) -> np.ndarray:
        """(B, N, NODE_FEATURES) the node features every head observes now (kept)."""
        if self._node_block is None:
            block = self.view.node_feature_rows()
            block[..., QLEN_FEATURE] = np.minimum(self._qlen_seen, 1e4) / 10.0
            self._node_block = block
        return self._node_block

    def _lone_rows(self) -> tuple[np.ndarray, np.ndarray, int]:
        """A lone head's ``(masks, observations, i)`` for the next jobs of its round.

        Row ``i`` is the current job's. A decision that passes over a job changes nothing
        the head observes, so the rows of the jobs after it hold until a placement, a clock
        run or a reset (under a random feasible policy about 9 decisions in 10 pass on
        edge10, 17 in 20 on edge100). After such a change one row is computed; each time
        the head reads past the rows it has, it computes four times as many (at most
        :data:`LONE_ROWS`), since numpy's fixed cost per call makes a few jobs' rows cost
        about what one job's does. Each row is the same elementwise computation as the
        batched path's, so the values are the same to the bit
        (``tests/test_central_batched.py``).
        """
        c = int(self._cursor[0])
        ch = self._chunk
        if ch is None:
            # after a change: one row first (placements come in runs, each recomputing)
            ch = self._chunk = self._compute_rows(c, 1)
        elif not ch[2] <= c < ch[2] + len(ch[0]):
            # the rows held: more of the round is likely to hold too
            ch = self._chunk = self._compute_rows(c, min(4 * len(ch[0]), LONE_ROWS))
        return ch[0], ch[1], c - ch[2]

    def _compute_rows(self, c: int, rows: int) -> tuple[np.ndarray, np.ndarray, int]:
        view = self.view
        jobs = self._rounds[0][c : c + rows]
        k, n, f = len(jobs), self.num_nodes, self.sim.job_features
        cp = np.zeros(k, dtype=np.int64)
        masks = np.zeros((k, self.num_actions), dtype=bool)
        masks[:, 0] = True
        masks[:, 1:] = self._fits(cp, jobs, view.free).reshape(k, -1)
        masks.flags.writeable = False
        obs = np.empty((k, self.obs_size), np.float32)
        obs[:, :f] = view.job_feature_rows(cp, jobs)
        nodes = obs[:, f : f + n * (NODE_FEATURES + 1)].reshape(k, n, NODE_FEATURES + 1)
        nodes[..., :NODE_FEATURES] = self._nodes()
        nodes[..., NODE_FEATURES] = self._log_bw[view.job_home(cp, jobs)]
        # float64 then float32, as the one-job path's Python floats
        obs[:, -3] = min(int(self._lens[0]), 1e4) / 10.0
        obs[:, -2] = np.minimum(np.arange(c, c + k), 1e4) / 10.0
        obs[:, -1] = view.time_features()[0, 0]
        return masks, obs, c

    def observations(self) -> np.ndarray:
        """(B, obs_size) float32 each head's observation (see the Gymnasium view's docstring)."""
        if self.copies == 1 and self._jobs[0] >= 0:
            _, obs, i = self._lone_rows()
            return obs[i : i + 1].copy()
        view = self.view
        b, n, f = self.copies, self.num_nodes, self.sim.job_features
        obs = np.empty((b, self.obs_size), np.float32)
        obs[:, :f] = view.job_feature_rows(self._all, self._jobs)  # -1: the all-zero row
        nodes = obs[:, f : f + n * (NODE_FEATURES + 1)].reshape(b, n, NODE_FEATURES + 1)
        nodes[..., :NODE_FEATURES] = self._nodes()
        # log bandwidth of each node to the current job's home node (0 without a job)
        deciding = self._deciding()
        if deciding is None or not isinstance(deciding[0], slice):
            nodes[..., NODE_FEATURES] = 0.0
        if deciding is not None:
            rows, cp, j = deciding
            nodes[rows, :, NODE_FEATURES] = self._log_bw[view.job_home(cp, j)]
        if b == 1:
            # the same values on Python scalars (float64, then float32 as numpy's cast): six
            # (1,)-array operations were a tenth of a lone head's decision
            obs[0, -3] = min(int(self._lens[0]), 1e4) / 10.0
            obs[0, -2] = min(int(self._cursor[0]), 1e4) / 10.0
        else:
            obs[:, -3] = np.minimum(self._lens, 1e4) / 10.0
            obs[:, -2] = np.minimum(self._cursor, 1e4) / 10.0
        obs[:, -1] = view.time_features()[:, 0]
        return obs

    # ------------------------------------------------------------------ step
    def check_actions(self, actions: Any) -> list[int]:
        """``actions`` as B Python ints (range is checked by :meth:`step`).

        Args:
            actions: a (B,) integer array, or a list of B Python or numpy integers (any
                size: an out-of-range one is then reported as given).

        Raises:
            InvalidActionError: not B integers (bools are refused).
        """
        if isinstance(actions, list):
            if len(actions) == self.copies and all(type(x) is int for x in actions):
                return actions  # the common case (the Gymnasium view's), checked cheaply
            if len(actions) == self.copies and all(
                isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)
                for x in actions
            ):
                return [int(x) for x in actions]
            raise InvalidActionError(
                f"actions must be {self.copies} integers, one per head in "
                f"[0, {self.num_actions - 1}]; got {actions!r:.200}"
            )
        a = np.asarray(actions)
        if a.shape != (self.copies,) or a.dtype.kind not in "iu":
            raise InvalidActionError(
                f"actions must be an integer array of shape ({self.copies},), one per head "
                f"in [0, {self.num_actions - 1}]; got shape {a.shape} dtype {a.dtype}"
            )
        return a.tolist()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Decide for every head's current job's next worker; run clocks whose rounds ended.

        Args:
            actions: B int actions (:meth:`check_actions`); 0 passes over the job, ``1 +
                n*L + l`` places its next worker on node ``n`` at level ``l``.

        Returns:
            ``(rewards, info)``: (B,) float64 rewards (the slots each copy's clock ran),
            and (B,) int arrays under the keys of :data:`STEP_INFO_KEYS` (``advanced``: slots
            run in this step), which are the rows of :attr:`info_rows`, (K, B) in that order.

        Raises:
            RuntimeError: some copy's episode has ended and was not reset.
            InvalidActionError: an out-of-range or masked action while
                ``invalid_action='raise'`` (nothing is changed then); under ``'defer'`` such
                an action passes over the job and is counted.
        """
        if self.copies == 1:
            if self.sim.terminated or self.sim.truncated:
                raise RuntimeError("step() called on a finished episode; call reset() first")
        elif self.ended.any():
            raise RuntimeError(
                f"copies {np.flatnonzero(self.ended).tolist()} have finished their episode; "
                "reset them first"
            )
        # the per-copy bookkeeping is Python scalars (a few per copy): numpy's per-call cost
        # on (B,) arrays is larger for the few copies a trainer runs
        acts = self.check_actions(actions)
        mask = self.masks()
        self._mask_memo = None  # the decisions below change the state
        n_act = self.num_actions
        bad = [b for b, x in enumerate(acts) if not (0 <= x < n_act and mask[b, x])]
        self.info_rows = rows = np.zeros((len(STEP_INFO_KEYS), self.copies), np.int64)
        info = dict(zip(STEP_INFO_KEYS, rows, strict=True))
        if bad:
            if self.sim.cfg.invalid_action == "raise":
                # refuse before counting: a refused step leaves the simulator as it was
                b0, a0 = bad[0], acts[bad[0]]
                where = "" if self.copies == 1 else f" (copy {b0})"
                raise InvalidActionError(
                    f"action {a0}{where} is {'masked' if 0 <= a0 < n_act else 'out of range'}; "
                    f"allowed now: {np.flatnonzero(mask[b0]).tolist()[:20]} (action space "
                    f"0..{n_act - 1}; invalid_action='defer' would pass over the job)"
                )
            self.sim.count_invalid(np.array(bad) * self.num_nodes)
            info["invalid_actions"][bad] = 1
            for b in bad:
                acts[b] = 0
        t0 = self.sim.tc.copy()  # every copy's clock (the view's, without its wrapper)
        place = [b for b, x in enumerate(acts) if x > 0]
        for b, x in enumerate(acts):
            if x == 0:
                self._move_on(b)
        if place:
            pl = np.array(place)
            j = self._jobs[pl]
            node, level = np.divmod(np.array([acts[b] for b in place]) - 1, self.num_levels)
            n, jc = self.num_nodes, self.sim.job_capacity
            self._node_block = self._chunk = None
            pinfo = self.sim.place(
                self.view.job_home(pl, j) + pl * n, j + pl * jc, node + pl * n, level
            )
            # one proposal per head, each fitting alone, and copies share no node: a head's
            # proposal cannot conflict, collide or be rejected, so it is placed
            if pinfo["placements"] != len(place) or pinfo["collisions"] or pinfo["rejected"]:
                raise AssertionError(f"central heads: a proposal was not placed ({pinfo})")
            info["proposals"][place] = info["placements"][place] = 1
            for b, status in zip(place, self.view.job_status(pl, j).tolist(), strict=True):
                if status != QUEUED:
                    self._move_on(b)
        rewards = self._advance_until_decision()
        # written into the rows: info's arrays are info_rows's rows
        info["slot"][:] = self.sim.tc
        info["advanced"][:] = info["slot"] - t0
        return rewards, info

    def _advance_until_decision(self) -> np.ndarray:
        """Run the clock of each copy whose round ended until a job waits; (B,) rewards."""
        rewards = np.zeros(self.copies)
        if (self._jobs[0] if self.copies == 1 else self._jobs.min()) >= 0:
            return rewards  # every head still has a job in its round
        need = (self._jobs < 0) & ~self.ended
        while need.any():
            self._qlen_seen[need] = self.view.queue_lengths()[need]
            self._node_block = self._chunk = None
            rewards += self.sim.advance_copies(need)
            if self._refill_on_advance:
                self._qlen_seen[need] = self.view.queue_lengths()[need]
            for b in np.flatnonzero(need).tolist():
                self._new_round(b)
            need &= (self._jobs < 0) & ~self.ended
        self.sim.return_sum[self._all * self.num_nodes] += rewards
        return rewards

    def episode_metrics(self, b: int) -> dict[str, Any]:
        """Copy ``b``'s episode metrics, ``episode_return_mean`` the head's return."""
        m = self.sim.episode_metrics() if self.copies == 1 else self.sim.episode_metrics(b)
        m["episode_return_mean"] = float(self.sim.return_sum[b * self.num_nodes])
        return m
