"""Pieces shared by the on-policy learners.

The vector of simulator copies, GAE, value normalization, masked logits and the PPO update's
outer loop (:class:`PPOEpochs`: minibatches, optimizer steps, statistics). Each learner's
losses live in its own file.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from edgesched.envs.config import SimConfig
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.topology import build_cluster
from edgesched.envs.view import ClusterView
from edgesched.protocol import train_episode_seed


class SimCopy:
    """One copy of a :class:`VecSim`, with the parts of a lone simulator trainers use.

    Reads go through :meth:`view` (a read-only :class:`~edgesched.envs.view.ClusterView`
    of this copy, local ids); :meth:`resize` is the one mutation (RLPTO's elastic resources).
    """

    def __init__(self, sim: EdgeClusterSim, b: int) -> None:
        self._sim, self.b = sim, b
        self._view = ClusterView(sim, copy=b)

    def view(self) -> ClusterView:
        """This copy's read-only cluster view (as ``EdgeClusterSim.view()``)."""
        return self._view

    @property
    def cfg(self) -> SimConfig:
        """The scenario's parameters."""
        return self._sim.cfg

    @property
    def obs(self) -> np.ndarray:
        """(N, D) this copy's observations."""
        return self._sim.obs_batched[self.b]

    @property
    def mask(self) -> np.ndarray:
        """(N, A) this copy's action masks."""
        return self._sim.mask_batched[self.b]

    def graph(self) -> dict[str, Any]:
        """This copy's graph view (local ids)."""
        return self._sim.graph(self.b)

    def resize(self, jobs: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Resize running jobs of this copy (local ids), see ``EdgeClusterSim.resize``."""
        offset = self.b * self._sim.job_capacity
        return self._sim.resize(np.asarray(jobs, dtype=np.int64) + offset, delta)


class OutdatedCheckpointError(ValueError):
    """Training state written by an earlier edgesched that this version cannot continue."""


class VecSim:
    """``num_envs`` copies of a scenario as one batched simulator, with auto-reset.

    The copies are one :class:`~edgesched.envs.core.EdgeClusterSim` with ``copies=num_envs``:
    every step is one array program over all of them. Copy ``i`` is bit for bit the lone
    simulator a Python list of copies would hold, so training is unchanged by the batching.

    Args:
        cfg: scenario configuration (all copies share the static cluster).
        num_envs: copies.
        seed: training seed; copy ``i``'s ``k``-th episode uses
            :func:`train_episode_seed` ``(seed, i, k)``.
        scenario_id: versioned id for records.
    """

    def __init__(self, cfg: SimConfig, num_envs: int, seed: int, scenario_id: str = "") -> None:
        self.sim = EdgeClusterSim(cfg, build_cluster(cfg), scenario_id, copies=num_envs)
        self.seed = seed
        self.episodes = np.zeros(num_envs, dtype=np.int64)
        self.num_envs = num_envs
        self.capture_graphs = False
        """Also return the graph view and mask of truncated copies (graph-reading learners)."""
        self.sim.reset(seeds=[train_episode_seed(seed, i, 0) for i in range(num_envs)])
        self.copies = [SimCopy(self.sim, i) for i in range(num_envs)]

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Before 4775351 a VecSim held a list of lone simulators (``sims``). Their states
        # would have to be merged into one batched simulator (per-copy job ids, generators,
        # buffers); rather than guess at that, an old training checkpoint is refused by name.
        if "sims" in state:
            raise OutdatedCheckpointError(
                "its environment copies are separate simulators, as edgesched wrote them "
                "before commit 4775351; this version steps them as one batched simulator"
            )
        self.__dict__.update(state)

    @property
    def cfg(self) -> SimConfig:
        """The scenario's parameters."""
        return self.sim.cfg

    @property
    def obs(self) -> np.ndarray:
        """(E, N, D) observations."""
        return self.sim.obs_batched

    @property
    def mask(self) -> np.ndarray:
        """(E, N, A) action masks."""
        return self.sim.mask_batched

    @property
    def state(self) -> np.ndarray:
        """(E, S) global states."""
        return self.sim.state()

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Step every copy; finished copies restart on their next training seed.

        Returns:
            ``rewards`` (E, N), ``terminated`` (E,), ``truncated`` (E,), ``final_obs`` and
            ``final_state`` for truncated copies (for bootstrapping; also ``final_graph`` and
            ``final_mask`` when ``capture_graphs``), ``episodes`` (metrics
            of the episodes that ended, in copy order), and per-step ``collisions`` (E,).
        """
        sim = self.sim
        rewards, info = sim.step(np.asarray(actions).reshape(self.num_envs, -1))
        term, trunc = sim.terminated.copy(), sim.truncated.copy()
        final_obs: dict[int, np.ndarray] = {}
        final_state: dict[int, np.ndarray] = {}
        final_graph: dict[int, dict[str, Any]] = {}
        final_mask: dict[int, np.ndarray] = {}
        finished = []
        done = np.flatnonzero(term | trunc).tolist()
        if done:
            obs, mask, state = sim.obs_batched, sim.mask_batched, sim.state()
            for i in done:
                if trunc[i]:
                    final_obs[i], final_state[i] = obs[i], state[i]
                    if self.capture_graphs:
                        final_graph[i], final_mask[i] = sim.graph(i), mask[i].copy()
                finished.append(sim.episode_metrics(i))
                self.episodes[i] += 1
            sim.reset_copies(
                done, [train_episode_seed(self.seed, i, int(self.episodes[i])) for i in done]
            )
        return {
            "rewards": rewards,
            "terminated": term,
            "truncated": trunc,
            "final_obs": final_obs,
            "final_state": final_state,
            "final_graph": final_graph,
            "final_mask": final_mask,
            "episodes": finished,
            "collisions": info["collisions"].astype(np.float64),
        }


def team_mean(rewards: np.ndarray) -> np.ndarray:
    """(E, N) per-agent rewards -> (E, N): every agent gets its copy's mean over agents.

    ``algo.team_reward`` (TapFinger by default, MAPPO/IPPO/SROLE as an option): the mean sums
    to the cluster's total completion time (Little's law), so no agent gains by leaving
    another agent's jobs waiting.
    """
    return np.repeat(rewards.mean(axis=1, keepdims=True), rewards.shape[1], axis=1)


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_value: np.ndarray,
    dones: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation (Schulman et al., 2016) over a (T, ...) rollout.

    Args:
        rewards: (T, ...) rewards (truncation bootstrap already folded in).
        values: (T, ...) value estimates of the visited states.
        next_value: (...) value of the state after the last step.
        dones: (T, ...) 1 where the episode ended after that step.
        gamma: discount.
        lam: GAE lambda.

    Returns:
        advantages and returns, both (T, ...).
    """
    adv = np.zeros_like(rewards)
    last = np.zeros_like(next_value)
    for t in range(len(rewards) - 1, -1, -1):
        nv = next_value if t == len(rewards) - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * nv * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv, adv + values


@dataclass
class RunningMeanStd:
    """Running mean and variance (Chan et al. parallel update) for value normalization."""

    mean: float = 0.0
    var: float = 1.0
    count: float = 1e-4

    def update(self, x: np.ndarray) -> None:
        """Fold a batch into the statistics."""
        bm, bv, bc = float(x.mean()), float(x.var()), x.size
        delta = bm - self.mean
        tot = self.count + bc
        self.mean += delta * bc / tot
        self.var = (self.var * self.count + bv * bc + delta**2 * self.count * bc / tot) / tot
        self.count = tot

    @property
    def std(self) -> float:
        """Standard deviation, floored to avoid division by zero."""
        return max(float(np.sqrt(self.var)), 1e-6)


def mlp(sizes: list[int], out: int) -> nn.Sequential:
    """Tanh MLP with orthogonal initialization (the PPO implementation-details defaults)."""
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        lin = nn.Linear(a, b)
        nn.init.orthogonal_(lin.weight, gain=np.sqrt(2))
        nn.init.zeros_(lin.bias)
        layers += [lin, nn.Tanh()]
    head = nn.Linear(sizes[-1], out)
    nn.init.orthogonal_(head.weight, gain=0.01 if out > 1 else 1.0)
    nn.init.zeros_(head.bias)
    layers.append(head)
    return nn.Sequential(*layers)


MASKED_LOGIT = -1e9


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Set infeasible actions' logits to a huge negative number (probability exactly 0)."""
    return logits.masked_fill(~mask, MASKED_LOGIT)


def probs_of(logp: torch.Tensor) -> torch.Tensor:
    """``logp.exp()``, bit for bit in value and gradient, without exponentiating masked entries.

    A float32 ``exp`` whose result underflows (masked actions' log-probabilities are about
    ``MASKED_LOGIT``) takes a slow path in the vectorized math library: measured 10-15x the
    cost of an ordinary ``exp`` on this machine, and masked entries are most of an edge
    scenario's action space, so the plain ``exp`` was about a tenth of a MAPPO update.
    Entries below the underflow point (where ``exp`` is exactly 0) are set to 0 instead; the
    others are the same ``exp`` of the same values. Their gradient is 0 either way.
    """
    fi = torch.finfo(logp.dtype)
    # log of the smallest subnormal, with a margin: exp of anything below rounds to 0
    keep = logp > math.log(fi.smallest_normal * fi.eps) - 1.0
    return torch.where(keep, logp, 0.0).exp() * keep


class TrainingDivergedError(RuntimeError):
    """A loss became NaN or infinite; training stops and keeps the last good checkpoint."""


PPO_STAT_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac", "grad_norm")


def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped policy loss with per-minibatch advantage normalization.

    Returns:
        ``(policy_loss, ratio)``; a single-sample minibatch has no spread to normalize by
        and contributes no policy gradient.
    """
    ratio = (logp - old_logp).exp()
    a = (adv - adv.mean()) / (adv.std() + 1e-8) if adv.numel() > 1 else adv * 0
    return -torch.min(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a).mean(), ratio


def choice_rows_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    entropy: torch.Tensor,
    choice: torch.Tensor,
    clip: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`clipped_surrogate` and the mean entropy over the rows of ``choice`` only.

    The shared-actor learners' ``algo.policy_rows='choice'``: an agent with one feasible
    action (it can only defer) has log-probability 0 and no gradient, but over all rows its
    advantage still sets the minibatch's advantage mean and spread. Normalizing, and
    averaging the policy loss and the entropy, over the agents that chose is what the MAPPO
    authors' implementation does for inactive agents (``use_policy_active_masks``, Yu et
    al., NeurIPS'22). The approximate KL and clip fraction are then of those rows too.

    Args:
        logp: log-probabilities of the actions under the current policy, per row.
        old_logp: their log-probabilities when collected (same shape).
        adv: advantages (same shape).
        entropy: the policy's entropy per row (same shape).
        choice: bool, same shape: rows with more than one feasible action.
        clip: PPO's clip range.

    Returns:
        ``(policy_loss, ratio, entropy)``; a minibatch without a choice row gives zero losses
        (still part of the graph) and a ratio of ones.
    """
    if not bool(choice.any()):
        zero = logp.sum() * 0.0
        return zero, torch.ones(1), zero
    pg, ratio = clipped_surrogate(logp[choice], old_logp[choice], adv[choice], clip)
    return pg, ratio, entropy[choice].mean()


def ppo_step(
    opt: torch.optim.Optimizer,
    params: list[torch.Tensor],
    cfg: Any,
    ent_coef: float,
    pg: torch.Tensor,
    vloss: torch.Tensor,
    entropy: torch.Tensor,
    ratio: torch.Tensor,
    stats: dict[str, float],
    update: int,
) -> None:
    """One optimizer step on ``pg + vf_coef vloss - ent_coef entropy``; accumulate ``stats``.

    Raises:
        TrainingDivergedError: the loss is NaN or infinite (nothing is stepped).
    """
    loss = pg + float(cfg.vf_coef) * vloss - ent_coef * entropy
    if not torch.isfinite(loss):
        raise TrainingDivergedError(
            f"loss is not finite at update {update} (policy loss {float(pg.detach())}, value loss "
            f"{float(vloss.detach())}); training stopped. Lower algo.lr or check the reward scale; "
            "the last good checkpoint is kept."
        )
    opt.zero_grad()
    loss.backward()
    gn = nn.utils.clip_grad_norm_(params, float(cfg.max_grad_norm))
    opt.step()
    with torch.no_grad():
        stats["policy_loss"] += float(pg)
        stats["value_loss"] += float(vloss)
        stats["entropy"] += float(entropy)
        stats["approx_kl"] += float(((ratio - 1) - ratio.log()).mean())
        stats["clip_frac"] += float(((ratio - 1).abs() > float(cfg.clip)).float().mean())
        stats["grad_norm"] += float(gn)


class PPOEpochs:
    """The outer loop of a PPO update, shared by every PPO learner.

    Iterating yields each minibatch's indices: ``cfg.epochs`` times a fresh permutation of
    ``range(n)`` drawn from ``gen``, cut into slices of ``max(n // cfg.minibatches, 1)``
    (with ``n`` = 0 nothing is yielded, and ``randperm(0)`` draws nothing). :meth:`step`
    takes one optimizer step on a minibatch's losses (:func:`ppo_step`) and :meth:`result`
    returns the mean statistics.
    The entropy coefficient falls linearly from ``cfg.ent_coef_start`` to
    ``cfg.ent_coef_end`` over the training budget; with ``cfg.anneal_lr`` the optimizer's
    learning rate falls from ``cfg.lr`` to 0 the same way, and with ``cfg.target_kl > 0``
    the epochs stop after the first whose mean approximate KL exceeds it.

    Args:
        cfg: the algorithm's config (``epochs``, ``minibatches``, the PPO fields).
        n: rows to split into minibatches (graphs, groups of agents, slots, jobs).
        gen: the trainer's generator (its draws are part of a checkpoint's state).
        progress: fraction of the training budget used so far.
        opt: the optimizer.
        params: the parameters whose gradient norm is clipped.
        update: the update's index (named in the error when a loss diverges).
    """

    def __init__(
        self,
        cfg: Any,
        n: int,
        gen: torch.Generator,
        progress: float,
        opt: torch.optim.Optimizer,
        params: list[torch.Tensor],
        update: int,
    ) -> None:
        self.cfg, self.n, self.gen = cfg, n, gen
        self.opt, self.params, self.update = opt, params, update
        self.ent_coef = float(cfg.ent_coef_start) + progress * (
            float(cfg.ent_coef_end) - float(cfg.ent_coef_start)
        )
        self.stats = dict.fromkeys(PPO_STAT_KEYS, 0.0)
        self.count = 0
        self.epochs_run = 0
        # getattr: configs stored before these options existed trained without them
        if getattr(cfg, "anneal_lr", False):
            for group in opt.param_groups:
                group["lr"] = float(cfg.lr) * (1.0 - progress)
        self.target_kl = float(getattr(cfg, "target_kl", 0.0) or 0.0)

    def __iter__(self) -> Iterator[torch.Tensor]:
        n = self.n
        mb = max(n // int(self.cfg.minibatches), 1)
        for _ in range(int(self.cfg.epochs)):
            kl0, count0 = self.stats["approx_kl"], self.count
            perm = torch.randperm(n, generator=self.gen)
            for start in range(0, n, mb):
                yield perm[start : start + mb]
            self.epochs_run += 1
            steps = self.count - count0
            if (
                self.target_kl
                and steps
                and (self.stats["approx_kl"] - kl0) / steps > self.target_kl
            ):
                break

    def step(
        self, pg: torch.Tensor, vloss: torch.Tensor, entropy: torch.Tensor, ratio: torch.Tensor
    ) -> None:
        """One optimizer step on a minibatch's losses (:func:`ppo_step`).

        Raises:
            TrainingDivergedError: the loss is NaN or infinite.
        """
        ppo_step(
            self.opt,
            self.params,
            self.cfg,
            self.ent_coef,
            pg,
            vloss,
            entropy,
            ratio,
            self.stats,
            self.update,
        )
        self.count += 1

    def result(self) -> dict[str, float]:
        """Mean loss statistics over the steps taken, and the entropy coefficient used."""
        out = {k: v / max(self.count, 1) for k, v in self.stats.items()}
        out["ent_coef"] = self.ent_coef
        if getattr(self.cfg, "anneal_lr", False):
            out["lr"] = float(self.opt.param_groups[0]["lr"])
        if self.target_kl:
            out["ppo_epochs"] = float(self.epochs_run)
        return out
