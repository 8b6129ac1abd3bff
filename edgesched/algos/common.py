"""Pieces shared by the on-policy learners.

The vector of simulator copies, GAE, value normalization and masked logits. Update rules live
in their own files.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from edgesched.envs.config import SimConfig
from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.topology import build_cluster
from edgesched.experiment.seeds import train_episode_seed


class VecSim:
    """A vector of simulator copies stepped through the array fast path, with auto-reset.

    Args:
        cfg: scenario configuration (all copies share the static cluster).
        num_envs: copies.
        seed: training seed; copy ``i``'s ``k``-th episode uses
            :func:`train_episode_seed` ``(seed, i, k)``.
        scenario_id: versioned id for records.
    """

    def __init__(self, cfg: SimConfig, num_envs: int, seed: int, scenario_id: str = "") -> None:
        cluster = build_cluster(cfg)
        self.sims = [EdgeClusterSim(cfg, cluster, scenario_id) for _ in range(num_envs)]
        self.seed = seed
        self.episodes = np.zeros(num_envs, dtype=np.int64)
        self.num_envs = num_envs
        self.capture_graphs = False
        """Also return the graph view and mask of truncated copies (graph-reading learners)."""
        for i, sim in enumerate(self.sims):
            sim.reset(train_episode_seed(seed, i, 0))

    @property
    def obs(self) -> np.ndarray:
        """(E, N, D) observations."""
        return np.stack([s.obs for s in self.sims])

    @property
    def mask(self) -> np.ndarray:
        """(E, N, A) action masks."""
        return np.stack([s.mask for s in self.sims])

    @property
    def state(self) -> np.ndarray:
        """(E, S) global states."""
        return np.stack([s.state() for s in self.sims])

    def step(self, actions: np.ndarray) -> dict[str, Any]:
        """Step every copy; finished copies restart on their next training seed.

        Returns:
            ``rewards`` (E, N), ``terminated`` (E,), ``truncated`` (E,), ``final_obs`` and
            ``final_state`` for truncated copies (for bootstrapping; also ``final_graph`` and
            ``final_mask`` when ``capture_graphs``), ``episodes`` (metrics
            of the episodes that ended), and per-step ``collisions`` (E,).
        """
        e = self.num_envs
        rewards = np.empty((e, self.sims[0].num_agents))
        term = np.zeros(e, dtype=bool)
        trunc = np.zeros(e, dtype=bool)
        collisions = np.zeros(e)
        final_obs: dict[int, np.ndarray] = {}
        final_state: dict[int, np.ndarray] = {}
        final_graph: dict[int, dict[str, Any]] = {}
        final_mask: dict[int, np.ndarray] = {}
        finished = []
        for i, sim in enumerate(self.sims):
            r, info = sim.step(actions[i])
            rewards[i] = r
            collisions[i] = info["collisions"]
            if sim.terminated or sim.truncated:
                term[i], trunc[i] = sim.terminated, sim.truncated
                if sim.truncated:
                    final_obs[i], final_state[i] = sim.obs, sim.state()
                    if self.capture_graphs:
                        final_graph[i], final_mask[i] = sim.graph(), sim.mask.copy()
                finished.append(sim.episode_metrics())
                self.episodes[i] += 1
                sim.reset(train_episode_seed(self.seed, i, int(self.episodes[i])))
        return {
            "rewards": rewards,
            "terminated": term,
            "truncated": trunc,
            "final_obs": final_obs,
            "final_state": final_state,
            "final_graph": final_graph,
            "final_mask": final_mask,
            "episodes": finished,
            "collisions": collisions,
        }


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
            f"loss is not finite at update {update} (policy loss {float(pg)}, value loss "
            f"{float(vloss)}); training stopped. Lower algo.lr or check the reward scale; "
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
