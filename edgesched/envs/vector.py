"""Gymnasium vector view: B copies of a scenario as one batched single-agent environment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from .config import SimConfig
from .core import OBS_BOUND, STEP_INFO_KEYS, EdgeClusterSim, InvalidActionError
from .scenarios import Scenario, scenario_config

REWARD_MODES = ("sum", "mean")
"""How a sub-environment's reward aggregates its agents' rewards."""

_SEED_HIGH = 2**63 - 1


class CopiesVectorEnv(VectorEnv):
    """What the batched vector views share: seeding, reset masks, NEXT_STEP autoreset, infos.

    A subclass holds ``num_envs`` copies of a scenario in one batched simulator, calls
    :meth:`_init_copies` and provides the hooks: :meth:`_reset_copies` (all copies, or some),
    :meth:`_obs`, :meth:`_episode_metrics`, :meth:`_checked_actions`, :meth:`_step_copies`
    and :meth:`_end_flags`. ``reset`` and ``step`` (with the autoreset replay) are here.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def _init_copies(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.render_mode = None
        self._rng: np.random.Generator | None = None
        self._autoreset = np.zeros(num_envs, dtype=bool)
        self._next_seeds: list[int | None] = [None] * num_envs

    # ------------------------------------------------------------------ hooks
    def _reset_copies(self, copies: np.ndarray | None, seeds: list[Any]) -> None:
        """Start episodes: every copy (``copies=None``) or the given ones, with ``seeds``."""
        raise NotImplementedError

    def _obs(self) -> Any:
        raise NotImplementedError

    def _episode_metrics(self, b: int) -> dict[str, Any]:
        raise NotImplementedError

    def _checked_actions(self, actions: Any) -> np.ndarray:
        """``actions`` as a fresh int64 array of the step's shape; raise naming it."""
        raise NotImplementedError

    def _step_copies(self, actions: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """Step every copy: (B,) float64 rewards (a fresh array) and the step counters."""
        raise NotImplementedError

    def _end_flags(self) -> tuple[np.ndarray, np.ndarray]:
        """(B,) terminated and (B,) truncated, fresh."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    def _counter_infos(self, values: dict[str, Any] | None = None) -> dict[str, Any]:
        b = self.num_envs
        infos: dict[str, Any] = {}
        for k in STEP_INFO_KEYS:
            infos[k] = (
                np.zeros(b, dtype=np.int64) if values is None else np.array(values[k], copy=True)
            )
            infos[f"_{k}"] = np.ones(b, dtype=bool)
        return infos

    def _draw_seed(self) -> int:
        assert self._rng is not None
        return int(self._rng.integers(0, _SEED_HIGH))

    @property
    def autoreset_seeds(self) -> list[int | None]:
        """Per sub-environment: the seed of its next auto-reset (drawn when its episode ends).

        Valid for the sub-environments that ended in the last step; kept for logging and
        for replaying a sub-environment with a lone simulator.
        """
        return list(self._next_seeds)

    # ------------------------------------------------------------------ API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode in every sub-environment (or those of ``options["reset_mask"]``).

        Args:
            seed: ``None`` (fresh entropy), an int ``s`` (sub-environment ``b`` gets
                ``s + b``) or one seed per sub-environment. The auto-resets that follow draw
                their seeds from a generator seeded by it.
            options: optional ``{"reset_mask": (num_envs,) bool array}`` to reset only some
                sub-environments (the others keep running); other keys are ignored.

        Returns:
            ``(observations, infos)``, batched; every counter of ``infos`` is 0.
        """
        b = self.num_envs
        if seed is None:
            seeds: list[int | None] = [None] * b
        elif isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            seeds = [int(seed) + i for i in range(b)]
        else:
            seeds = [None if s is None else int(s) for s in seed]
            if len(seeds) != b:
                raise ValueError(
                    f"seed has {len(seeds)} entries; need one per sub-environment (num_envs={b})"
                )
        mask = None if options is None else options.get("reset_mask")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (b,) or mask.dtype != np.bool_ or not mask.any():
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({b},) with at least "
                    f"one True; got shape {mask.shape} dtype {mask.dtype}"
                )
        if seed is not None or self._rng is None:
            known = [s for s in seeds if s is not None]
            if seed is None or len(known) < b:
                self._rng = np.random.default_rng()
            else:
                self._rng = np.random.default_rng(np.random.SeedSequence(known))
            self._np_random = self._rng
            self._np_random_seed = int(seed) if isinstance(seed, int | np.integer) else -1
        if seed is None:
            seeds = [self._draw_seed() for _ in range(b)]
        if mask is None:
            self._reset_copies(None, seeds)
            self._autoreset[:] = False
        else:
            idx = np.flatnonzero(mask)
            self._reset_copies(idx, [seeds[i] for i in idx])
            self._autoreset[idx] = False
        return self._obs(), self._counter_infos()

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One decision of every sub-environment (NEXT_STEP autoreset; see the class doc).

        Args:
            actions: integer array, one action per sub-environment (its shape: the class
                docstring's Action).

        Returns:
            ``(observations, rewards, terminated, truncated, infos)``, batched.

        Raises:
            RuntimeError: ``step`` before ``reset``.
            InvalidActionError: ``actions`` of another shape or a non-integer dtype; or (with
                ``invalid_action='raise'``) a masked or out-of-range action.
        """
        self._require_reset()
        a = self._checked_actions(actions)
        redo, seeds = self._begin_autoreset()
        if len(redo) == self.num_envs:
            rewards, infos = np.zeros(self.num_envs), self._counter_infos()
        else:
            if len(redo):
                # the sub-environments that autoreset take no step: they pass (always
                # allowed) and are reset again with the same seed (which replays the reset)
                a[redo] = 0
            rewards, step_info = self._step_copies(a)
            if len(redo):
                self._reset_copies(redo, seeds)
            infos = self._counter_infos(step_info)
        term, trunc = self._end_flags()
        return self._end_step(rewards, term, trunc, infos, redo)

    def _int_actions(self, actions: Any, shape: tuple[int, ...], what: str) -> np.ndarray:
        """``actions`` as a fresh int64 array of ``shape``; else raise saying ``what`` is due."""
        a = np.asarray(actions)
        if a.shape != shape or a.dtype.kind not in "iu":
            raise InvalidActionError(
                f"actions must be an integer array of shape {what}; got shape {a.shape} "
                f"dtype {a.dtype}"
            )
        return a.astype(np.int64, copy=True)

    def _require_reset(self) -> None:
        """Raise ``RuntimeError`` for a ``step`` before the first ``reset``."""
        if self._rng is None:
            raise RuntimeError("step() called before reset(); call reset() first")

    def _begin_autoreset(self) -> tuple[np.ndarray, list[int | None]]:
        """Reset the sub-environments whose episode ended in the last step (NEXT_STEP).

        Returns:
            Their indices and seeds: they take no step now; the caller makes them pass and
            resets them again with the same seeds after the step (which replays the reset).
        """
        redo = np.flatnonzero(self._autoreset)
        seeds = [self._next_seeds[i] for i in redo]
        if len(redo):
            self._reset_copies(redo, seeds)
        return redo, seeds

    def _end_step(
        self,
        rewards: np.ndarray,
        term: np.ndarray,
        trunc: np.ndarray,
        infos: dict[str, Any],
        redo: np.ndarray,
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Zero the autoreset copies' rewards and counters, note episode ends; the 5-tuple."""
        if len(redo):
            rewards[redo] = 0.0
            for k in STEP_INFO_KEYS:
                infos[k][redo] = 0
        self._autoreset[redo] = False
        done = term | trunc
        ended = np.flatnonzero(done)
        if len(ended):
            infos["episode_metrics"] = self._metrics_info(ended)
            infos["_episode_metrics"] = done.copy()
            for i in ended:
                self._next_seeds[i] = self._draw_seed()
        self._autoreset = done
        return self._obs(), rewards, term, trunc, infos

    def _metrics_info(self, ended: np.ndarray) -> dict[str, np.ndarray]:
        """The scalar episode metrics of the copies ``ended``, as masked (B,) arrays."""
        b = self.num_envs
        per_copy = {int(i): self._episode_metrics(int(i)) for i in ended}
        keys: list[str] = []
        for m in per_copy.values():
            keys.extend(k for k, v in m.items() if k not in keys and _is_scalar(v))
        out: dict[str, np.ndarray] = {}
        for k in keys:
            vals = {i: m[k] for i, m in per_copy.items() if _is_scalar(m.get(k))}
            integral = all(isinstance(v, int | np.integer) for v in vals.values())
            arr = np.zeros(b, dtype=np.int64 if integral else np.float64)
            has = np.zeros(b, dtype=bool)
            for i, v in vals.items():
                arr[i] = v
                has[i] = True
            out[k], out[f"_{k}"] = arr, has
        return out

    def close_extras(self, **kwargs: Any) -> None:
        """Nothing to release (numpy only)."""


class EdgeSchedVectorEnv(CopiesVectorEnv):
    """Batched joint-action edge-cluster scheduling (Gymnasium ``VectorEnv``).

    Description:
        The multi-agent problem of :class:`~edgesched.envs.parallel.EdgeSchedParallelEnv`
        seen by one single-agent learner that chooses the joint action of all N agents,
        batched over ``num_envs`` independent sub-environments. Sub-environment ``b`` is copy
        ``b`` of one :class:`~edgesched.envs.core.EdgeClusterSim` with ``copies=num_envs``,
        so all copies step as one array program (numpy only) and copy ``b`` follows, bit for
        bit, a lone simulator reset with the same seed and given the same actions.

    Observation:
        Per sub-environment ``Dict(observation=Box(float32, (N, D)), action_mask=Box(int8 0/1,
        (N, A)), state=Box(float32, (S,)))``: row ``n`` of ``observation`` and
        ``action_mask`` is agent ``n``'s observation and mask as in the PettingZoo view, and
        ``state`` is the global state for centralized critics. :attr:`observation_space` is
        the batched space (a leading ``num_envs`` axis, ``gymnasium.vector.utils.batch_space``).
        :meth:`action_masks` gives the masks as a (B, N, A) bool array.

    Action:
        Per sub-environment ``MultiDiscrete([A] * N)``, the joint action: one action per
        agent, as in the PettingZoo view (0 defers). ``step`` takes an integer array of shape
        ``(num_envs, N)``; another shape or a non-integer dtype raises
        :class:`~edgesched.envs.core.InvalidActionError` naming the expected shape. A masked
        or out-of-range action defers and is counted (``info["invalid_actions"]``) under the
        default ``invalid_action='defer'``; ``invalid_action='raise'`` raises instead.

    Reward:
        Per sub-environment the sum of its agents' rewards (``reward_mode='sum'``, the
        default; summed over an episode this is minus the total job completion time under
        ``reward_mode='local'`` of the scenario) or their mean (``reward_mode='mean'``).
        float64 array of shape ``(num_envs,)``.

    Episode end:
        A sub-environment is terminated when all its jobs arrived and finished, truncated
        after ``max_slots`` slots or ``max_steps`` decision rounds. Autoreset follows
        Gymnasium's ``AutoresetMode.NEXT_STEP`` (``metadata["autoreset_mode"]``), as its
        ``SyncVectorEnv`` does: the step that ends an episode returns its last observation;
        the next ``step`` ignores that sub-environment's action, resets it and returns its
        first observation with reward 0 and terminated/truncated False, while the other
        sub-environments step as usual. Auto-resets draw their seeds from a generator seeded
        by the ``reset`` seed (no global randomness).

    Info:
        Gymnasium's vector convention, a dict of ``(num_envs,)`` arrays each with a ``_key``
        bool mask: the step counters :data:`~edgesched.envs.core.STEP_INFO_KEYS` of every
        sub-environment (0 at reset and on the autoreset step). For the sub-environments
        whose episode ended in this step, ``info["episode_metrics"]`` holds the scalar
        episode metrics (``jct_mean``, ``jobs_done``, ``makespan``, ...) as a dict
        of arrays with their own ``_key`` masks, and ``info["_episode_metrics"]`` marks those
        sub-environments. (The key is not ``"episode"``, which
        ``gymnasium.wrappers.vector.RecordEpisodeStatistics`` writes.)

    Arguments:
        scenario: registered scenario name (``edgesched.list_scenarios()``) or a
            :class:`SimConfig`.
        num_envs: number of sub-environments (copies) ``B >= 1``.
        reward_mode: ``"sum"`` or ``"mean"`` over a sub-environment's agents.
        **overrides: any :class:`SimConfig` parameter, validated.

    Version history:
        v0: first release (scenario versions are listed in :mod:`edgesched.envs.scenarios`).
        v1 (edge scenarios; melbourne125 v2): measured co-location and four pending slots
            (:class:`~edgesched.envs.parallel.EdgeSchedParallelEnv` has the details); the
            joint action space widens with the pending slots (edge50: 85 actions per agent
            instead of 22).
        v1, later: scenario options and ``edge50-trace`` v2 (per-job replay windows,
            records that never ran dropped); :class:`~edgesched.envs.parallel.EdgeSchedParallelEnv`
            has the details.
    """

    def __init__(
        self,
        scenario: str | SimConfig = "edge10",
        num_envs: int = 1,
        reward_mode: str = "sum",
        **overrides: Any,
    ) -> None:
        self.scenario: Scenario | None
        self.scenario, cfg = scenario_config(scenario, overrides)
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode={reward_mode!r}: choose one of {list(REWARD_MODES)}")
        self.reward_mode = reward_mode
        self.sim = EdgeClusterSim(
            cfg, scenario_id=self.scenario.id if self.scenario else "", copies=num_envs
        )
        self._init_copies(self.sim.copies)
        b = self.num_envs
        n, a = self.sim.agents_per_copy, self.sim.num_actions
        self.single_observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-OBS_BOUND, OBS_BOUND, (n, self.sim.obs_dim), np.float32),
                "action_mask": spaces.Box(0, 1, (n, a), np.int8),
                "state": spaces.Box(-OBS_BOUND, OBS_BOUND, (self.sim.state_dim,), np.float32),
            }
        )
        self.single_action_space = spaces.MultiDiscrete(np.full(n, a, dtype=np.int64))
        self.observation_space = batch_space(self.single_observation_space, b)
        self.action_space = batch_space(self.single_action_space, b)

    @property
    def config(self) -> SimConfig:
        """The validated scenario configuration."""
        return self.sim.cfg

    # ------------------------------------------------------------------ helpers
    def _obs(self) -> dict[str, np.ndarray]:
        sim = self.sim
        return {
            "observation": sim.obs_batched,
            "action_mask": sim.mask_batched.astype(np.int8),
            "state": sim.state(),
        }

    def _reset_copies(self, copies: np.ndarray | None, seeds: list[Any]) -> None:
        if copies is None:
            self.sim.reset(seeds=seeds)
        else:
            self.sim.reset_copies(copies.tolist(), seeds)

    def _episode_metrics(self, b: int) -> dict[str, Any]:
        return self.sim.episode_metrics(b)

    def action_masks(self) -> np.ndarray:
        """(B, N, A) bool: the feasible actions of every agent of every sub-environment."""
        return self.sim.mask_batched

    # ------------------------------------------------------------------ API
    def _checked_actions(self, actions: Any) -> np.ndarray:
        sim = self.sim
        shape = (self.num_envs, sim.agents_per_copy)
        what = (
            f"(num_envs, agents) = {shape}: one joint action (MultiDiscrete("
            f"[{sim.num_actions}] * {shape[1]})) per sub-environment"
        )
        return self._int_actions(actions, shape, what)

    def _step_copies(self, actions: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        agent_rewards, step_info = self.sim.step(actions)
        if self.reward_mode == "sum":
            return agent_rewards.sum(axis=1, dtype=np.float64), step_info
        return agent_rewards.mean(axis=1, dtype=np.float64), step_info

    def _end_flags(self) -> tuple[np.ndarray, np.ndarray]:
        sim = self.sim
        return (
            np.array(sim.terminated, dtype=bool, copy=True),
            np.array(sim.truncated, dtype=bool, copy=True),
        )


def _is_scalar(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(
        v, bool | np.bool_
    )


def make_vector(name: str, num_envs: int, **overrides: Any) -> EdgeSchedVectorEnv:
    """``num_envs`` copies of scenario ``name`` (with ``overrides``) as a Gymnasium VectorEnv.

    ``reward_mode`` may be passed among ``overrides``; everything else is a
    :class:`SimConfig` parameter.

    Raises:
        KeyError: unknown scenario.
        ConfigError: unknown or out-of-range parameter, or ``num_envs`` < 1.
    """
    return EdgeSchedVectorEnv(name, num_envs, **overrides)


__all__ = ["REWARD_MODES", "CopiesVectorEnv", "EdgeSchedVectorEnv", "make_vector"]
