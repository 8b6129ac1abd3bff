"""``dqn_central``: stable-baselines3 DQN as the cluster head (SROLE's "centralized RL").

One decision-maker sees every node and decides for every queued task, one at a time, on the
Gymnasium central view (:class:`edgesched.envs.central.EdgeSchedCentralEnv`). This is the
comparator SROLE argues against: it cannot collide with itself, but every decision of the
cluster passes through one head, so its per-slot work grows with the cluster.

Choices (documented because the paper gives no details):

* Budget: ``experiment.total_env_steps`` counts the head's decisions (one task each), the
  same number of ``env.step`` calls as the multi-agent learners' decision rounds.
* A work-conserving, masked head (``work_conserving`` and ``action_masking``, both on by
  default). SB3's DQN has no action masks, so the head sees the central view's
  action mask appended to its observation (:class:`~.central_vec.CentralVecEnv`); the
  Q-network drops
  those columns from its input and sets the Q-values of infeasible actions to ``-1e9``, so
  the greedy choice, the bootstrap target's max over next actions and the epsilon-greedy
  exploration all range over feasible actions only. Work-conserving, the mask also removes
  passing over a job while one of its placements fits (:func:`~.central_vec.work_conserving`), in
  training and at evaluation: the head decides where and how large, like the heuristics,
  not whether to wait. Without masking (``action_masking=false``, the form of the v0 and
  earlier v1 leaderboard entries) training runs the central view with
  ``invalid_action='defer'``: an infeasible choice passes over the task, which costs time.
  At evaluation the greedy choice is taken over the feasible actions in every form, and the
  view runs strict (``invalid_action='raise'``): an infeasible choice there is a bug and
  raises instead of being hidden in a record. Each evaluation row also reports
  ``invalid_actions`` (0 by construction).
* Why work-conserving: the collapse to passing over every job (issue 22). A single
  decision's effect on the return is small against the return itself: a trained head's
  Q-values of passing and of its best placement differed by 0.1-0.2 on values near -43
  (edge10-v1), so the greedy choice follows approximation noise, and some training seeds
  ended passing over nearly everything (edge10-v1: held-out mean JCT 219.9, 13 jobs
  unfinished per episode), their curves showing heads falling into and out of that state.
  Measured (3 training seeds, held-out seeds 10000..10009;
  ``benchmarks/results/dqn_central_study.md``), per training seed: the unmasked head 26.5,
  219.9, 33.3 on edge10-v1 and 50.3, 52.7, 107.6 on edge50-v1; masking alone 86.3, 204.7,
  239.5 (edge10-v1); the work-conserving head 32.2, 36.1, 34.7 (edge10-v1) and 34.5, 36.4,
  36.5 (edge50-v1). It gives up the unmasked head's best edge10 seed (26.5) for no
  collapse. Two other options stay available, off by default: the potential-based shaping
  ``phi(s) = -k * (queued jobs)`` (``queue_shaping``) charges leaving a job queued to the
  decision that leaves it without changing the optimal policy, and ``discount_unit='slot'``
  (:class:`SlotDiscountReplayBuffer`) discounts by ``gamma`` per slot the decision ended
  instead of per decision. The study's shaping rows (unmasked: edge10-v1 24.4, 50.6, 33.9,
  per slot 36.4, 39.4, 37.1; edge50-v1 71.5, 133.2, 286.4, per slot 207.5 and 57.6) were
  measured with a defect: the potential counted every job of the workload, not the queued
  ones, so it never moved within an episode and the "shaping" was a constant bonus per
  decision (``k * J * (1 - gamma)``) plus ``k * J`` at the end. They do not measure queue
  shaping; the potential now counts the queued jobs. Measured again with it (k = 1, 3
  training seeds, held-out seeds 10000..10009; ``benchmarks/results/dqn_central_shaping_fixed.md``):
  unmasked, edge10-v1 27.39 mean (29.09, 27.81, 25.26; no collapse) and edge50-v1 65.50
  (57.71, 81.74, 57.06); with the work-conserving default, 31.48 (28.09, 38.18, 28.17) and
  34.58 (35.14, 39.52, 29.08), against 34.34 and 35.80 without shaping, seed for seed
  better on some and worse on others: three seeds do not separate them, so the default
  stays without shaping. Reward scaling (x0.1) and a dueling Q-network, tried on the
  collapsing edge10 seed, did not prevent the collapse either.
* Training workloads: episode ``k`` runs ``train_episode_seed(seed, 0, k)``, disjoint from
  the held-out evaluation workloads like every other learner's.
* Exploration decays linearly over the whole budget although training runs in chunks (one
  chunk per logged update), by reading the global decision count.
* Heads side by side (``copies``, default 1): the training environment is
  :class:`~.central_vec.CentralVecEnv`, ``copies`` heads on one batched simulator stepped as
  one array program (one Q-network forward pass for all of them per vector step). SB3 counts
  ``train_freq`` in vector steps, so the trainer runs ``copies`` gradient steps each time:
  one per ``train_freq`` decisions, as with one head. The k-th training episode, whichever
  copy runs it, is workload ``train_episode_seed(seed, 0, k)``. With one copy the
  transitions are those of the earlier per-environment wrappers, bit for bit. On edge50-v1
  at the default budget (3 training seeds, held-out seeds 10000..10009;
  ``benchmarks/results/dqn_central_copies.md``) 4 and 8 heads ended at 34.58 and 35.71 mean
  JCT against one head's 35.80, training in about 1.5 minutes instead of 2.5.

The head's bottleneck is reported at evaluation: decisions per slot (the head's queue),
measured latency per decision (one Q-network forward pass) and the busy time per slot.
"""

from __future__ import annotations

import pickle
import random
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.buffers import ReplayBuffer

from edgesched.envs.central import EdgeSchedCentralEnv
from edgesched.envs.handle import ScenarioHandle, evaluation_config
from edgesched.envs.scenarios import get_scenario
from edgesched.policy import EnvSpec
from edgesched.protocol import eval_workload_seed

from .central_vec import CentralVecEnv, work_conserving
from .common import OutdatedCheckpointError

HEAD_METRICS = (
    "head_decisions_per_slot",
    "head_decisions_per_slot_max",
    "head_latency_ms",
    "head_busy_ms_per_slot",
)
"""Extra per-episode metrics of the cluster head (evaluation)."""


def _scenario_name(spec: EnvSpec) -> str:
    """The spec's versioned scenario id (a run of an earlier version stays on it)."""
    return spec.scenario


MASKED_Q = -1e9
"""Q-value of an infeasible action under ``action_masking`` (finite, so a target's max stays
finite: some action is always feasible, passing or, for a work-conserving head, a
placement)."""


def _layer_ops(seq: torch.nn.Sequential) -> list[tuple[Any, tuple]]:
    """``(function, extra arguments)`` per layer of ``seq``, applied as ``f(x, *args)``.

    Linear layers become ``F.linear`` on detached views of their parameters (the optimizer
    and ``load_state_dict`` update those in place, so the views stay current, and no
    autograd graph is built without a ``no_grad`` context); ReLU becomes ``torch.relu``, the
    op ``nn.ReLU`` runs. Any other layer is called as a module under ``no_grad``.
    """
    import torch.nn.functional as F

    def module_call(x: torch.Tensor, layer: torch.nn.Module) -> torch.Tensor:
        with torch.no_grad():
            return layer(x)

    ops: list[tuple[Any, tuple]] = []
    for layer in seq:
        if isinstance(layer, torch.nn.Linear):
            bias = None if layer.bias is None else layer.bias.detach()
            ops.append((F.linear, (layer.weight.detach(), bias)))
        elif type(layer) is torch.nn.ReLU:
            ops.append((torch.relu, ()))
        else:
            ops.append((module_call, (layer,)))
    return ops


def _masked_parts():
    """SB3 classes of the masked head, built on first use (SB3 imports torch lazily here)."""
    from stable_baselines3 import DQN
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from stable_baselines3.dqn.policies import DQNPolicy, QNetwork

    class DropMask(BaseFeaturesExtractor):
        """Features: the observation without the appended mask columns."""

        def __init__(self, observation_space: gym.spaces.Box, n_mask: int) -> None:
            super().__init__(observation_space, int(observation_space.shape[0]) - n_mask)
            self.n_mask = n_mask

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return obs[:, : -self.n_mask]

    class MaskedQNetwork(QNetwork):
        """Q-values with infeasible actions at :data:`MASKED_Q`."""

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            q = super().forward(obs)
            feasible = obs[:, -q.shape[1] :] > 0.5
            return q.masked_fill(~feasible, MASKED_Q)

    class MaskedDQNPolicy(DQNPolicy):
        """DQN policy whose online and target networks mask infeasible actions."""

        def make_q_net(self) -> MaskedQNetwork:
            net_args = self._update_features_extractor(self.net_args, features_extractor=None)
            return MaskedQNetwork(**net_args).to(self.device)

    class MaskedDQN(DQN):
        """Epsilon-greedy exploration among the feasible actions only."""

        def predict(self, observation, state=None, episode_start=None, deterministic=False):
            # the same draws as SB3's DQN.predict (numpy's global generator, which SB3 seeds),
            # restricted to the mask at the end of the observation
            if not deterministic and np.random.rand() < self.exploration_rate:  # noqa: NPY002
                obs = np.asarray(observation)
                n = int(self.action_space.n)
                masks = obs.reshape(-1, obs.shape[-1])[:, -n:] > 0.5
                picks = [int(np.random.choice(np.flatnonzero(m))) for m in masks]  # noqa: NPY002
                action = np.array(picks if obs.ndim > 1 else picks[0])
                return action, state
            return super().predict(observation, state, episode_start, deterministic)

    return MaskedDQN, MaskedDQNPolicy, DropMask


class SlotDiscountReplayBuffer(ReplayBuffer):
    """SB3 replay buffer whose TD target discounts per slot, not per head decision.

    Stores ``gamma ** info['advanced']`` per transition and returns it with each sample:
    SB3 (>= 2.6) uses a sample's ``discounts`` in place of ``gamma`` in the TD target (the
    hook of its n-step buffer), so a decision within a slot is not discounted and one that
    ends ``k`` slots is discounted ``gamma ** k``.

    Args:
        *args: :class:`~stable_baselines3.common.buffers.ReplayBuffer`'s arguments.
        gamma: discount per slot.
        **kwargs: its keyword arguments.
    """

    def __init__(self, *args: Any, gamma: float = 0.99, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gamma = float(gamma)
        self.discount = np.ones((self.buffer_size, self.n_envs), dtype=np.float32)

    def add(self, obs, next_obs, action, reward, done, infos) -> None:
        # before super().add, which moves self.pos
        advanced = np.array([int(i.get("advanced", 0)) for i in infos])
        self.discount[self.pos] = self.gamma**advanced
        super().add(obs, next_obs, action, reward, done, infos)

    def _get_samples(self, batch_inds: np.ndarray, env: Any = None) -> Any:
        # SB3 draws each sample's environment column inside _get_samples from numpy's global
        # generator; draw the same columns first (same state), to read their discounts
        state = np.random.get_state()  # noqa: NPY002
        cols = np.random.randint(0, high=self.n_envs, size=(len(batch_inds),))  # noqa: NPY002
        np.random.set_state(state)  # noqa: NPY002
        samples = super()._get_samples(batch_inds, env)
        disc = self.discount[batch_inds, cols].reshape(-1, 1)
        return samples._replace(discounts=self.to_torch(disc))


def _buffer_arrays(buf: ReplayBuffer) -> dict[str, np.ndarray]:
    """The buffer's per-transition arrays (first axis ``buffer_size``), by attribute name."""
    return {
        k: v
        for k, v in vars(buf).items()
        if isinstance(v, np.ndarray) and v.ndim and v.shape[0] == buf.buffer_size
    }


def replay_state(buf: ReplayBuffer) -> dict[str, Any]:
    """What a checkpoint keeps of a replay buffer: its filled rows and write position.

    The rows are tensors sharing the buffer's memory, which ``torch.save`` writes as they
    are. Pickling the buffer object instead serialized its whole allocation, rows never
    written included, as one ``bytes`` copy, which ``torch.save`` copied again: on
    ``tapfinger-hetero6`` a checkpoint of a 1.35 GiB buffer peaked at 9.97 GiB and the
    kernel killed a run (``benchmarks/checkpoint_memory.py``).
    """
    rows = buf.buffer_size if buf.full else buf.pos
    arrays = {k: torch.from_numpy(v[:rows]) for k, v in _buffer_arrays(buf).items()}
    return {"pos": int(buf.pos), "full": bool(buf.full), "arrays": arrays}


def restore_replay(buf: ReplayBuffer, state: dict[str, Any]) -> None:
    """Write :func:`replay_state` back into ``buf``, a fresh buffer of the same shape.

    Raises:
        ValueError: the state's arrays are not the buffer's (another buffer class or shape).
    """
    own = _buffer_arrays(buf)
    saved = state["arrays"]
    if set(saved) != set(own) or any(
        tuple(t.shape[1:]) != own[k].shape[1:] or len(t) > len(own[k]) for k, t in saved.items()
    ):
        raise ValueError(
            "checkpoint's replay buffer does not fit this trainer's: arrays "
            f"{ {k: tuple(t.shape) for k, t in saved.items()} } against "
            f"{ {k: v.shape for k, v in own.items()} }"
        )
    for k, t in saved.items():
        own[k][: len(t)] = t.numpy()
    buf.pos, buf.full = int(state["pos"]), bool(state["full"])


class DQNCentralTrainer:
    """Train and evaluate the DQN cluster head behind the runner's trainer interface.

    Args:
        cfg: hyperparameters (``lr``, ``gamma``, ``hidden`` and the DQN fields of
            :class:`edgesched.experiment.schema.AlgoConfig`).
        spec: the scenario's multi-agent spec (its scenario names the central view).
        seed: training seed.
        shield: must be ``none`` (one head cannot collide with itself).
        shield_kwargs: unused.
    """

    shield_name = "none"
    shield_kwargs: dict[str, Any] = {}
    decisions_per_step = 1

    def __init__(
        self,
        cfg: Any,
        spec: EnvSpec,
        seed: int,
        shield: str = "none",
        shield_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if shield != "none":
            raise ValueError("dqn_central takes no shield (one head cannot collide)")
        if getattr(cfg, "work_conserving", False) and not getattr(cfg, "action_masking", False):
            # the Hydra schema says the same; this covers configs built in code
            raise ValueError(
                "work_conserving=True with action_masking=False: a work-conserving head needs "
                "the mask (it is what removes passing while a placement fits); set both"
            )
        self.cfg = cfg
        self.spec = spec
        self.seed = int(seed)
        self.updates = 0
        self.budget = 0
        self.model: Any = None
        self.env: CentralVecEnv | None = None
        self._seen = 0

    # ------------------------------------------------------------------ model
    def _build(self, sim_cfg: Any = None) -> None:
        from stable_baselines3 import DQN
        from stable_baselines3.common.logger import Logger
        from stable_baselines3.common.utils import LinearSchedule

        if sim_cfg is None:
            # evaluation only: the run's configuration, overrides included, sets the
            # network's shapes (a spec written by hand has none: the registered scenario's)
            sim_cfg = self.spec.config or get_scenario(_scenario_name(self.spec)).config()
        # unmasked, DQN explores over every action, feasible or not (module docstring)
        sim_cfg = sim_cfg.replace(invalid_action="defer")
        c = self.cfg
        slot = str(getattr(c, "discount_unit", "decision")) == "slot"
        masked = bool(getattr(c, "action_masking", False))
        copies = int(getattr(c, "copies", 1))
        self.env = CentralVecEnv(
            sim_cfg,
            copies,
            self.seed,
            shaping=float(getattr(c, "queue_shaping", 0.0)),
            gamma=float(c.gamma),
            per_slot=slot,
            masked=masked,
            conserving=bool(getattr(c, "work_conserving", False)),
        )
        policy_kwargs: dict[str, Any] = {"net_arch": [int(h) for h in c.hidden]}
        algo, policy = DQN, "MlpPolicy"
        if masked:
            algo, policy, drop = _masked_parts()
            policy_kwargs |= {
                "features_extractor_class": drop,
                "features_extractor_kwargs": {"n_mask": int(self.env.action_space.n)},
            }
        buffer: dict[str, Any] = {}
        if slot:
            buffer = {
                "replay_buffer_class": SlotDiscountReplayBuffer,
                "replay_buffer_kwargs": {"gamma": float(c.gamma)},
            }
        self.model = algo(
            policy,
            self.env,
            learning_rate=float(c.lr),
            # a buffer longer than the run never fills, and SB3 allocates it up front (the
            # central view of edge500 has ~5k features: 100k transitions are ~4 GB)
            buffer_size=min(int(c.buffer_size), self.budget) if self.budget else int(c.buffer_size),
            learning_starts=int(c.learning_starts),
            batch_size=int(c.batch_size),
            gamma=float(c.gamma),
            # train_freq counts vector steps (``copies`` decisions each): one gradient step per
            # copy keeps one per train_freq decisions, as with one head
            train_freq=int(c.train_freq),
            gradient_steps=copies,
            target_update_interval=int(c.target_update_interval),
            exploration_fraction=float(c.exploration_fraction),
            exploration_final_eps=float(c.exploration_final_eps),
            max_grad_norm=float(c.max_grad_norm),
            policy_kwargs=policy_kwargs,
            **buffer,
            seed=self.seed,
            device="cpu",
            verbose=0,
        )
        # SB3's default logger creates an SB3-<timestamp> folder in the temp dir on every
        # learn(); ours logs through the run's own metrics, so give it one without outputs
        self.model.set_logger(Logger(folder=None, output_formats=[]))
        lin = LinearSchedule(1.0, float(c.exploration_final_eps), float(c.exploration_fraction))

        def exploration(_progress_remaining: float) -> float:
            # SB3 measures progress per learn() call; training runs in chunks, so use the
            # decisions made so far out of the whole budget instead
            done = self.model.num_timesteps / max(self.budget, 1)
            return lin(1.0 - min(done, 1.0))

        self.model.exploration_schedule = exploration

    @property
    def actor(self) -> torch.nn.Module:
        """The Q-network (what ``policy.pt`` stores)."""
        if self.model is None:
            # evaluation only: no replay buffer worth allocating
            self.budget = self.budget or 1
            self._build()
        return self.model.q_net

    # ------------------------------------------------------------------ training
    def collect(self, vec: Any, steps: int) -> dict[str, Any]:
        """Train for ``steps x vec.num_envs`` head decisions (one runner update).

        ``vec`` only provides the scenario configuration; the head runs its own central view.
        """
        if self.model is None:
            self._build(vec.cfg)
        chunk = int(steps) * int(vec.num_envs)
        if not self.budget:
            self.budget = chunk  # replaced by the runner's total through set_budget
        t0 = time.perf_counter()
        self.model.learn(chunk, reset_num_timesteps=False, log_interval=None)
        new = self.env.finished[self._seen :]
        self._seen = len(self.env.finished)
        for ep in new:
            ep.setdefault("episode_return_mean", float("nan"))
        return {
            "rewards": np.zeros(1),
            "episodes": new,
            "collisions": 0.0,
            "log": {
                "epsilon": float(self.model.exploration_rate),
                "decisions_per_s": chunk / max(time.perf_counter() - t0, 1e-9),
            },
        }

    def set_budget(self, total_decisions: int) -> None:
        """Total head decisions of the run (sets the exploration schedule's horizon)."""
        self.budget = int(total_decisions)

    def update(self, batch: dict[str, Any], progress: float) -> dict[str, float]:
        """Learning happens inside :meth:`collect` (SB3's loop); count the update."""
        self.updates += 1
        return {}

    # ------------------------------------------------------------------ evaluation
    def greedy(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """Most valuable feasible action (a work-conserving head passes only if nothing fits).

        The Q-values are those of :attr:`actor` (the same torch kernels on the same weights,
        so bit-identical), computed layer by layer: one head decision is one forward pass
        of a small MLP on one row, where the ``nn.Module`` call chain (SB3's feature
        extraction, hooks, ``no_grad``) cost about as much as the arithmetic.
        """
        if getattr(self.cfg, "work_conserving", False):
            mask = work_conserving(mask)
        q = self._q_row(np.asarray(obs, np.float32))
        # infeasible actions are excluded here, so the network's own masking is not needed
        return int(np.where(mask, q, -np.inf).argmax())

    def _q_row(self, features: np.ndarray) -> np.ndarray:
        """Q-values of one observation (without the mask columns) through the Q-network."""
        net = self.actor
        if getattr(self, "_q_ops_of", None) is not net:
            self._q_ops, self._q_ops_of = _layer_ops(net.q_net), net
        x = torch.as_tensor(features[None])
        if not getattr(self.cfg, "action_masking", False):
            x = net.features_extractor(x)  # SB3's flatten: a no-op on one row of features
        for op, args in self._q_ops:
            x = op(x, *args)
        return x[0].numpy()

    def evaluate(
        self,
        env_name: str | ScenarioHandle,
        env_overrides: dict[str, Any],
        eval_seeds: list[int],
        episodes: int,
    ) -> dict[str, Any]:
        """Held-out evaluation on the same workloads as the multi-agent schedulers.

        Args:
            env_name: the run's scenario handle, or a scenario name or versioned id.
            env_overrides: evaluation settings on top of a handle's overrides, or a name's
                overrides (:func:`~edgesched.envs.handle.evaluation_config`).
            eval_seeds: held-out seeds.
            episodes: episodes per seed.

        Returns:
            ``per_episode`` rows and ``summary`` means, with the episode metrics and
            :data:`HEAD_METRICS`.
        """
        from edgesched.protocol import SCALAR_METRICS

        # strict: the greedy choice is masked, so an infeasible one is a bug to surface
        _, cfg = evaluation_config(env_name, {**env_overrides, "invalid_action": "raise"})
        env = EdgeSchedCentralEnv(cfg)
        rows = []
        for s in eval_seeds:
            for k in range(episodes):
                ws = eval_workload_seed(int(s), k)
                obs, _ = env.reset(options={"workload_seed": ws})
                per_slot: dict[int, list[float]] = {}
                done = False
                while not done:
                    t = env.sim.t
                    t0 = time.perf_counter()
                    a = self.greedy(obs, env.action_masks())
                    per_slot.setdefault(t, []).append(time.perf_counter() - t0)
                    obs, _, term, trunc, _ = env.step(a)
                    done = term or trunc
                m = env.last_episode_metrics
                counts = np.array([len(v) for v in per_slot.values()])
                busy = np.array([sum(v) for v in per_slot.values()])
                row = {k2: m[k2] for k2 in SCALAR_METRICS}
                row.update(
                    {
                        "eval_seed": int(s),
                        "episode": k,
                        "jct_by_priority": m["jct_by_priority"],
                        "slots": m["slots"],
                        "truncated": bool(trunc),
                        "invalid_actions": int(m["invalid_actions"]),
                        "head_decisions_per_slot": float(counts.mean()),
                        "head_decisions_per_slot_max": float(counts.max()),
                        "head_latency_ms": 1e3 * float(busy.sum() / counts.sum()),
                        "head_busy_ms_per_slot": 1e3 * float(busy.mean()),
                    }
                )
                rows.append(row)
        keys = SCALAR_METRICS + HEAD_METRICS
        summary = {k: float(np.nanmean([r[k] for r in rows], dtype=np.float64)) for k in keys}
        return {"per_episode": rows, "summary": summary}

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Networks, optimizer, replay buffer, the environment and every RNG."""
        m = self.model
        if m is None:
            return {"updates": self.updates, "budget": self.budget}
        return {
            "updates": self.updates,
            "budget": self.budget,
            "seen": self._seen,
            "policy": m.policy.state_dict(),
            "optim": m.policy.optimizer.state_dict(),
            "replay_rows": replay_state(m.replay_buffer),
            "vec_env": pickle.dumps(m.env),
            "last_obs": m._last_obs,
            "last_original_obs": m._last_original_obs,
            "episode_starts": m._last_episode_starts,
            "num_timesteps": m.num_timesteps,
            "n_calls": m._n_calls,
            "n_updates": m._n_updates,
            "episode_num": m._episode_num,
            "exploration_rate": m.exploration_rate,
            # SB3's epsilon-greedy draws from numpy's legacy global generator
            "np_rng": np.random.get_state(),  # noqa: NPY002
            "py_rng": random.getstate(),
            "torch_rng": torch.get_rng_state(),
            "space_rng": m.action_space.np_random.bit_generator.state,
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.updates = int(sd["updates"])
        self.budget = int(sd["budget"])
        if "policy" not in sd:
            return
        try:
            vec_env = pickle.loads(sd["vec_env"])
        except ValueError as exc:  # the central view's pickled state refuses an old layout
            raise OutdatedCheckpointError(
                "its training environment is SB3's DummyVecEnv of central views, as edgesched "
                "wrote it before dqn_central trained on CentralVecEnv (batched heads): " + str(exc)
            ) from exc
        self._build(vec_env.config)
        m = self.model
        m.set_env(vec_env)
        self.env = vec_env
        self._seen = int(sd["seen"])
        m.policy.load_state_dict(sd["policy"])
        m.policy.optimizer.load_state_dict(sd["optim"])
        if "replay" in sd:  # checkpoints before replay_rows: the pickled buffer object
            m.replay_buffer = pickle.loads(sd["replay"])
        else:
            restore_replay(m.replay_buffer, sd["replay_rows"])
        m._last_obs = sd["last_obs"]
        m._last_original_obs = sd["last_original_obs"]
        m._last_episode_starts = sd["episode_starts"]
        m.num_timesteps = int(sd["num_timesteps"])
        m._n_calls = int(sd["n_calls"])
        m._n_updates = int(sd["n_updates"])
        m._episode_num = int(sd["episode_num"])
        m.exploration_rate = float(sd["exploration_rate"])
        np.random.set_state(sd["np_rng"])  # noqa: NPY002
        random.setstate(sd["py_rng"])
        torch.set_rng_state(sd["torch_rng"])
        m.action_space.np_random.bit_generator.state = sd["space_rng"]


__all__ = ["HEAD_METRICS", "DQNCentralTrainer"]
