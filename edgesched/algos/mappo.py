"""MAPPO and IPPO: PPO with parameter sharing over all agents (Yu et al., NeurIPS'22).

The whole update rule is in this file. One actor, shared by every agent, maps an agent's
observation to logits over its Discrete actions; infeasible actions are masked out. The
critic is the only difference between the two:

* MAPPO: centralized critic ``V(state(), own observation)``, trained on the global state the
  environment exposes for exactly this purpose;
* IPPO: decentralized critic ``V(own observation)``.

SROLE (Sen & Shen, ICDCS'22) is MAPPO with a collision shield in the loop
(``shield != 'none'``): the actor's sampled actions are *proposals*, the shield turns them into
a collision-free joint action (using the actor's probabilities as preference orders) and the
environment executes that. Two ways to train with it (``algo.shield_training``):

* post-posed (Alshiekh et al., AAAI'18): the learner keeps its own proposal and that
  proposal's log-probability as the action taken (the correction is part of the
  environment, so the PPO ratio stays on-policy) and is charged ``algo.collision_penalty``
  per agent whose proposal took part in a collision (``algo.penalize='collided'``) or whose
  action the shield changed (``'changed'``);
* preemptive: agents commit one by one in a random order, and each agent's mask already
  excludes the placements that would no longer fit after the earlier commitments (within
  its region under the regional shield); the stored mask is the one sampled from, so the
  stored log-probability is exact and PPO re-evaluates the same distribution.

Shared details (the PPO "implementation details" of Huang et al., ICLR blog track 2022):
GAE(lambda), clipped surrogate, value normalization with running statistics, advantage
normalization per minibatch, global gradient-norm clipping, and a linearly decaying entropy
bonus. Truncated episodes bootstrap from the critic's value of their final state. With
``algo.team_reward`` every agent learns from the mean of the agents' rewards; by default it
follows the scenario (the mean on ``tapfinger-hetero6``, where several agents see a waiting
job, each agent's own on the edge scenarios; :class:`edgesched.algos.SharedPPOConfig` says
why).

**Decisions without a choice.** An agent whose mask allows one action (on the edge
scenarios, one that can only defer: about 95% of edge50's agent-decisions) takes it with
log-probability exactly 0, entropy 0 and no gradient, whatever the actor says. Rollouts and
updates therefore run the actor only on the other rows, draw actions only there, and the
preemptive loop visits only agents with a feasible placement; the critic still values every
agent. The PPO loss averages over all agents as before. This made training 1.3-2.0x
(MAPPO, IPPO) and 1.8-2.8x (SROLE, preemptive) faster on edge10 to edge100
(``benchmarks/results/compare_train_forced.md``). Greedy evaluation keeps the full
computation, so the committed policies' records are unchanged; training matches the full
computation to float rounding (the actor's matrix products run on fewer rows), but MAPPO's
and IPPO's rollouts draw from a different point of the generator's stream (no draw for a
single choice), so their runs are not bit-identical to runs made before the change.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from edgesched.envs.view import CAPACITY_EPS
from edgesched.policy import EnvSpec

from .base import team_reward_for
from .common import (
    MASKED_LOGIT,
    PPOEpochs,
    RunningMeanStd,
    TrainingDivergedError,
    VecSim,
    choice_rows_loss,
    clipped_surrogate,
    gae,
    masked_logits,
    mlp,
    probs_of,
    team_mean,
)

__all__ = ["Critic", "PPOTrainer", "TrainingDivergedError"]


def _norm(dim: int, on: bool) -> list[nn.Module]:
    """``[LayerNorm(dim)]`` in front of an input layer when ``on`` (``algo.feature_norm``)."""
    return [nn.LayerNorm(dim)] if on else []


class Critic(nn.Module):
    """Value per agent: ``head([enc_obs(own obs), enc_state(state)])``.

    The global state is encoded once per environment copy and shared by its N agents, so the
    centralized critic costs little more than a local one (feeding ``[state, obs]`` per agent
    would multiply the state's encoding cost by N). Without a state encoder it is IPPO's
    local critic.
    """

    def __init__(
        self, obs_dim: int, state_dim: int | None, hidden: list[int], feature_norm: bool = False
    ) -> None:
        super().__init__()
        h = hidden[0]
        self.enc_obs = nn.Sequential(
            *_norm(obs_dim, feature_norm), nn.Linear(obs_dim, h), nn.Tanh()
        )
        self.enc_state = (
            nn.Sequential(*_norm(state_dim, feature_norm), nn.Linear(state_dim, h), nn.Tanh())
            if state_dim
            else None
        )
        self.head = mlp([h * (2 if state_dim else 1), *hidden[1:]], 1)

    def forward(self, obs: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """(G, N, D) observations and (G, S) states -> (G, N) values."""
        z = self.enc_obs(obs)
        if self.enc_state is None:
            return self.head(z).squeeze(-1)
        # the head's first layer on [z, z_state] is the sum of two blocks: the state's block
        # is computed once per copy and broadcast over its N agents, instead of on an
        # (G, N, 2H) concat (a quarter less critic work on edge50; equal to float rounding)
        first = self.head[0]
        w_obs, w_state = first.weight.split(z.shape[-1], dim=1)
        pre = nn.functional.linear(z, w_obs, first.bias)
        pre = pre + nn.functional.linear(self.enc_state(state), w_state)[:, None, :]
        return self.head[1:](pre).squeeze(-1)


class PPOTrainer:
    """PPO with parameter sharing across agents.

    Args:
        cfg: algorithm hyperparameters (:class:`edgesched.experiment.schema.AlgoConfig`).
        spec: the scenario's static facts.
        seed: seeds torch's initialization and the action-sampling generator.
        centralized_critic: MAPPO (True) or IPPO (False).
        shield: registered shield in the loop (``none``: unshielded).
        shield_kwargs: the shield's options.
    """

    def __init__(
        self,
        cfg: Any,
        spec: EnvSpec,
        seed: int,
        centralized_critic: bool,
        shield: str = "none",
        shield_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.cfg = cfg
        self.spec = spec
        self.shield_name = shield
        self.shield_kwargs = dict(shield_kwargs or {})
        self._shields: tuple[Any, Any] | None = None
        torch.manual_seed(seed)
        hidden = [int(h) for h in cfg.hidden]
        norm = bool(getattr(cfg, "feature_norm", False))
        self.actor = mlp([spec.obs_dim, *hidden], spec.num_actions)
        if norm:
            # the MAPPO authors' input normalization: the observation's blocks differ in scale
            # (queue lengths / 10 are unbounded, fractions lie in [0, 1])
            self.actor = nn.Sequential(*_norm(spec.obs_dim, True), *self.actor)
        self.critic = Critic(
            spec.obs_dim, spec.state_dim if centralized_critic else None, hidden, norm
        )
        self.params = list(self.actor.parameters()) + list(self.critic.parameters())
        self.opt = torch.optim.Adam(self.params, lr=float(cfg.lr), eps=1e-5)
        self.value_rms = RunningMeanStd()
        self.gen = torch.Generator().manual_seed(seed)
        self.updates = 0
        # None follows the scenario: the agents' mean where a waiting job's cost can pass
        # between agents (shared visibility), each agent's own elsewhere
        self.team_reward = team_reward_for(
            getattr(cfg, "team_reward", False), spec.config, "algo.team_reward"
        )

    def seed_sampling(self, seed: int) -> None:
        """Restart the action draws from ``seed``.

        The boards evaluate these learners greedily; this lets a study evaluate the sampled
        policy reproducibly instead (``benchmarks/eval_mode.py``), each episode's draws
        starting from its workload seed as TapFinger's do.
        """
        self.gen.manual_seed(int(seed))

    # ------------------------------------------------------------------ acting
    @torch.no_grad()
    def act(
        self, obs: np.ndarray, mask: np.ndarray, greedy: bool = False, with_probs: bool = False
    ) -> tuple[np.ndarray, ...]:
        """Sample (or take the most likely) feasible actions.

        Args:
            obs: (..., D) observations.
            mask: (..., A) feasibility masks.
            greedy: argmax instead of sampling (evaluation).
            with_probs: also return the action probabilities (a shield's preferences).

        Returns:
            actions and their log-probabilities, shaped like ``obs[..., 0]``, plus the
            (..., A) probabilities if ``with_probs``.
        """
        shape = obs.shape[:-1]
        o = torch.from_numpy(obs.reshape(-1, obs.shape[-1]))
        m = torch.from_numpy(mask.reshape(-1, mask.shape[-1]))
        if greedy:
            logits = masked_logits(self.actor(o), m)
            logp_all = torch.log_softmax(logits, dim=-1)
            a = logits.argmax(dim=-1)
        else:
            rows = torch.nonzero(m.sum(-1) != 1).squeeze(-1)
            logp_all = torch.full(m.shape, MASKED_LOGIT).masked_fill(m, 0.0)
            logp_all[rows] = self._log_policy(o, m, rows)
        probs = probs_of(logp_all) if with_probs or not greedy else None
        if not greedy:
            # draw only where there is a choice; a single feasible action is taken as is
            # (drawing it would cost as much as a real draw and change nothing but the
            # generator's state)
            a = m.to(torch.uint8).argmax(dim=-1)
            if len(rows):
                a[rows] = torch.multinomial(probs[rows], 1, generator=self.gen).squeeze(-1)
        logp = logp_all.gather(-1, a[:, None]).squeeze(-1)
        out = (a.numpy().reshape(shape), logp.numpy().reshape(shape))
        if with_probs:
            out += (probs.numpy().reshape(*shape, -1),)
        return out

    def _log_policy(
        self, obs: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor
    ) -> torch.Tensor:
        """(len(rows), A) masked log-probabilities of the rows ``rows`` of (R, D) / (R, A).

        Callers pass the rows with more than one feasible action. A row with one (on the
        edge scenarios, an agent that can only defer: about 95% of edge50's decisions) has
        that action at log-probability exactly 0, whatever the logits, entropy 0 and no
        gradient, so the actor need not run on it; callers fill it with 0 at the feasible
        action and ``MASKED_LOGIT`` elsewhere (below the point where :func:`probs_of`
        returns exactly 0, as the network's row would). Values match the full computation
        to float rounding: the matrix products run on fewer rows.
        """
        return torch.log_softmax(masked_logits(self.actor(obs[rows]), mask[rows]), dim=-1)

    def _logp_entropy(
        self, obs: torch.Tensor, mask: torch.Tensor, actions: torch.Tensor, choice: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities of ``actions`` and entropies, (G, N) each, for the PPO loss.

        Only the rows of ``choice`` (agents with more than one feasible action) go through
        the network; the others are exactly 0 in both and carry no gradient (see
        :meth:`_log_policy`).
        """
        rows = torch.nonzero(choice.reshape(-1)).squeeze(-1)
        logp_all = self._log_policy(
            obs.reshape(-1, obs.shape[-1]), mask.reshape(-1, mask.shape[-1]), rows
        )
        lp = logp_all.gather(-1, actions.reshape(-1)[rows, None]).squeeze(-1)
        ent = -(probs_of(logp_all) * logp_all.clamp_min(-1e4)).sum(-1)
        zero = obs.new_zeros(choice.numel())
        return (
            zero.index_put((rows,), lp).reshape(choice.shape),
            zero.index_put((rows,), ent).reshape(choice.shape),
        )

    @torch.no_grad()
    def value(self, obs: np.ndarray, state: np.ndarray) -> np.ndarray:
        """Denormalized state values, (E, N)."""
        v = self.critic(torch.from_numpy(obs), torch.from_numpy(state)).numpy()
        return v * self.value_rms.std + self.value_rms.mean

    # ------------------------------------------------------------------ rollout
    def collect(self, vec: VecSim, steps: int) -> dict[str, Any]:
        """Run the shared policy for ``steps`` decision rounds in every copy.

        Returns:
            The rollout batch (numpy arrays, time-major) plus finished episodes' metrics.
        """
        e, n = vec.num_envs, self.spec.num_agents
        obs_b = np.empty((steps, e, n, self.spec.obs_dim), np.float32)
        mask_b = np.empty((steps, e, n, self.spec.num_actions), bool)
        state_b = np.empty((steps, e, self.spec.state_dim), np.float32)
        act_b = np.empty((steps, e, n), np.int64)
        logp_b = np.empty((steps, e, n), np.float32)
        val_b = np.empty((steps, e, n), np.float32)
        rew_b = np.empty((steps, e, n), np.float32)
        done_b = np.empty((steps, e, 1), np.float32)
        episodes: list[dict[str, Any]] = []
        collisions = 0.0
        shields = self._shields_for(vec)
        sh_log = dict.fromkeys(("proposed", "agents", "interventions", "latency_s"), 0.0)
        penalty = float(self.cfg.collision_penalty)
        obs, mask, state = vec.obs, vec.mask, vec.state
        gamma = float(self.cfg.gamma)
        mode = str(getattr(self.cfg, "shield_training", "postposed"))
        changed_only = str(getattr(self.cfg, "penalize", "collided")) == "changed"
        team = self.team_reward
        for t in range(steps):
            if shields is None:
                a, logp = self.act(obs, mask)
                executed = a
            else:
                if mode == "preemptive":
                    # the mask each agent sampled from is the one PPO re-evaluates
                    a, logp, probs, mask = self._act_preemptive(obs, mask, vec)
                else:
                    a, logp, probs = self.act(obs, mask, with_probs=True)
                res = shields.shield_batch(a, probs)
                executed = res.actions
                hit = (executed != a) if changed_only else res.collision_agents
                sh_log["proposed"] += float(res.proposed_collisions.sum())
                sh_log["agents"] += float(res.collision_agents.sum())
                sh_log["interventions"] += float(res.interventions.sum())
                sh_log["latency_s"] += res.compute_s
            v = self.value(obs, state)
            out = vec.step(executed)
            r = out["rewards"]
            if team:
                r = team_mean(r)
            if shields is not None and penalty:  # each agent's own: about its proposal
                r -= penalty * hit
            for i, fo in out["final_obs"].items():
                # time-limit truncation: the episode would go on, so bootstrap its value
                r[i] += gamma * self.value(fo[None], out["final_state"][i][None])[0]
            obs_b[t], mask_b[t], state_b[t] = obs, mask, state
            act_b[t], logp_b[t], val_b[t], rew_b[t] = a, logp, v, r
            done_b[t, :, 0] = out["terminated"] | out["truncated"]
            episodes += out["episodes"]
            collisions += float(out["collisions"].sum())
            obs, mask, state = vec.obs, vec.mask, vec.state
        adv, ret = gae(
            rew_b, val_b, self.value(obs, state), done_b, gamma, float(self.cfg.gae_lambda)
        )
        per_step = 1.0 / (steps * e)
        log = {"collisions_executed_per_step": collisions * per_step}
        if shields is not None:
            log["collisions_proposed_per_step"] = sh_log["proposed"] * per_step
            log["collision_agents_per_step"] = sh_log["agents"] * per_step
            log["interventions_per_step"] = sh_log["interventions"] * per_step
            log["shield_latency_ms"] = 1e3 * sh_log["latency_s"] * per_step
        return {
            "log": log,
            "obs": obs_b,
            "mask": mask_b,
            "state": state_b,
            "actions": act_b,
            "logp": logp_b,
            "adv": adv.astype(np.float32),
            "ret": ret.astype(np.float32),
            "rewards": rew_b,
            "episodes": episodes,
            "collisions": collisions,
        }

    @torch.no_grad()
    def _act_preemptive(
        self, obs: np.ndarray, mask: np.ndarray, vec: VecSim
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Preemptive shielding: agents commit one by one, each masked by the earlier ones.

        Per copy, a random order (the trainer's generator); agent ``i``'s placement actions
        stay feasible only if their allocation still fits its target's free capacity after
        the placements committed before it (under the regional shield, those of its own
        region only). Returns actions, their log-probabilities and probabilities under the
        masks actually sampled from, and those masks (E, N, A).
        """
        e, n, a_dim = mask.shape
        o = torch.from_numpy(obs.reshape(-1, obs.shape[-1]))
        logits = self.actor(o).double().numpy().reshape(e, n, a_dim)
        eff = mask.copy()
        actions = np.zeros((e, n), np.int64)
        probs = np.zeros((e, n, a_dim))
        # one order and one uniform draw per agent, copy after copy: the generator's stream
        # does not depend on how the commitments below are batched
        rank = np.empty((e, n), np.int64)
        u = np.empty((e, n))
        for c in range(e):
            rank[c, torch.randperm(n, generator=self.gen).numpy()] = np.arange(n)
            u[c] = torch.rand(n, generator=self.gen, dtype=torch.float64).numpy()
        # An agent with no feasible placement can only defer: its distribution is the point
        # mass on action 0 whatever the others commit (masks only lose entries). Most agents
        # are such on the edge scenarios (about 95% of decisions on edge50).
        forced = eff[..., 0] & ~eff[..., 1:].any(-1)
        probs[forced, 0] = 1.0
        cs, ag = np.nonzero(~forced)
        if len(cs):
            # the active agents in commit order, copy by copy; step s commits the s-th active
            # agent of every copy that has one (copies never share a node)
            order = np.lexsort((rank[cs, ag], cs))
            cs, ag = cs[order], ag[order]
            first = np.searchsorted(cs, cs)  # index of each copy's first active agent
            step_of = np.arange(len(cs)) - first
            view = vec.sim.batch_view()
            slot, k, lvl = view.decode(np.arange(1, a_dim))
            jobs = view.pending[cs, ag][:, slot]  # (M, A-1)
            nodes = view.neighbors[ag][:, k]
            alloc = view.alloc(cs[:, None], np.maximum(jobs, 0), lvl)
            # each copy's (under the regional shield: each region's) room: row r * N + node
            region = view.regions if self.shield_name == "regional" else np.zeros(n, np.int64)
            room = np.tile(view.free[:, None], (1, int(region.max()) + 1, 1, 1)).reshape(e, -1, 3)
            rows = region[ag][:, None] * n + np.maximum(nodes, 0)  # (M, A-1)
            for s_ in range(int(step_of.max()) + 1):
                at = np.flatnonzero(step_of == s_)
                c, i = cs[at], ag[at]
                ok = eff[c, i, 1:] & (jobs[at] >= 0) & (nodes[at] >= 0)
                ok &= (alloc[at] <= room[c[:, None], rows[at]] + CAPACITY_EPS).all(-1)
                eff[c, i, 1:] = ok
                z = np.where(eff[c, i], logits[c, i], -np.inf)
                p = np.exp(z - z.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                cum = np.cumsum(p, axis=1)
                x = u[c, i] * p.sum(axis=1)
                choice = np.minimum((cum < x[:, None]).sum(axis=1), a_dim - 1)
                while True:  # rounding at the top end can land on an infeasible action
                    bad = ~eff[c, i, choice]
                    if not bad.any():
                        break
                    choice -= bad
                actions[c, i] = choice
                probs[c, i] = p
                placed = np.flatnonzero(choice > 0)
                if len(placed):
                    col = choice[placed] - 1
                    at_p = at[placed]
                    room[c[placed], rows[at_p, col]] -= alloc[at_p, col]
        logp = np.log(probs[np.arange(e)[:, None], np.arange(n)[None, :], actions])
        return actions, logp.astype(np.float32), probs, eff

    def _shields_for(self, vec: VecSim) -> Any:
        """The shield over all of ``vec``'s copies (rebuilt for a new or unpickled vector)."""
        if self.shield_name == "none":
            return None
        if self._shields is None or self._shields[0] is not vec:
            from edgesched.shields import make_shield

            shield = make_shield(self.shield_name, vec.sim.batch_view(), **self.shield_kwargs)
            self._shields = (vec, shield)
        return self._shields[1]

    # ------------------------------------------------------------------ update
    def update(self, batch: dict[str, Any], progress: float) -> dict[str, float]:
        """One PPO update on a rollout.

        Args:
            batch: output of :meth:`collect`.
            progress: fraction of the training budget used so far (entropy schedule).

        Returns:
            Loss statistics of the update.

        Raises:
            TrainingDivergedError: a loss became NaN or infinite.
        """
        cfg = self.cfg
        t, e, n = batch["actions"].shape
        g_total = t * e  # minibatches are groups (one copy at one step) with all N agents
        obs = torch.from_numpy(batch["obs"].reshape(g_total, n, -1))
        mask = torch.from_numpy(batch["mask"].reshape(g_total, n, -1))
        state = torch.from_numpy(batch["state"].reshape(g_total, -1))
        actions = torch.from_numpy(batch["actions"].reshape(g_total, n))
        old_logp = torch.from_numpy(batch["logp"].reshape(g_total, n))
        adv = torch.from_numpy(batch["adv"].reshape(g_total, n))
        ret = batch["ret"].reshape(g_total, n)
        if cfg.value_norm:
            self.value_rms.update(ret)
            ret_n = (ret - self.value_rms.mean) / self.value_rms.std
        else:
            ret_n = ret
        ret_t = torch.from_numpy(ret_n.astype(np.float32))
        # agents with more than one feasible action: only they carry a gradient
        choice = mask.sum(-1) != 1
        # getattr: configs stored before the key existed trained on every row
        on_choice = getattr(cfg, "policy_rows", "all") == "choice"
        clip = float(cfg.clip)
        loop = PPOEpochs(cfg, g_total, self.gen, progress, self.opt, self.params, self.updates)
        for idx in loop:
            obs_i = obs[idx]  # the largest gather of the minibatch: once for actor and critic
            c = choice[idx]
            logp, ent = self._logp_entropy(obs_i, mask[idx], actions[idx], c)
            if on_choice:
                pg, ratio, entropy = choice_rows_loss(logp, old_logp[idx], adv[idx], ent, c, clip)
            else:
                pg, ratio = clipped_surrogate(logp, old_logp[idx], adv[idx], clip)
                entropy = ent.mean()
            v = self.critic(obs_i, state[idx])
            loop.step(pg, 0.5 * ((v - ret_t[idx]) ** 2).mean(), entropy, ratio)
        self.updates += 1
        return loop.result()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue training bit-for-bit."""
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "opt": self.opt.state_dict(),
            "value_rms": (self.value_rms.mean, self.value_rms.var, self.value_rms.count),
            "gen": self.gen.get_state(),
            "torch_rng": torch.get_rng_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.actor.load_state_dict(sd["actor"])
        self.critic.load_state_dict(sd["critic"])
        self.opt.load_state_dict(sd["opt"])
        self.value_rms = RunningMeanStd(*sd["value_rms"])
        self.gen.set_state(sd["gen"])
        torch.set_rng_state(sd["torch_rng"])
        self.updates = int(sd["updates"])
