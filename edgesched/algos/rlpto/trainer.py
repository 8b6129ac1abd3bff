"""RLPTO (Lu et al., IEEE TPDS 2023): priority queues, forecast-aware RL resource scheduling.

RLPTO splits scheduling in two, as the paper does:

* **Task scheduling: multi-priority queues.** Every agent serves its queue in priority order
  (the simulator's queues: class 0 first, then arrival; with ``priority_aging_slots`` a
  waiting job climbs one class per that many slots, which is the starvation protection). The
  first feasible queued job is placed at the *minimum* allocation (jobs start small and the
  resource scheduler grows them where it pays) by a baseline's rule, ``algo.placement``.
  The paper names no placement rule, so this one is an assumption: ``min_alloc`` (the first
  feasible target in neighbourhood order, the agent itself first;
  :class:`~edgesched.baselines.heuristics.MinAllocScheduler`) is the default since issue
  #22, because as a heuristic it beats ``least_loaded`` (the rule before: the target with
  the most free GPU fraction) on every v1 edge board (why is not measured; their executed
  collisions are about equal): mean JCT 31.26 vs 41.34 on edge10, 42.09 vs 48.77 on
  edge50, 26.36 vs 32.14 on edge100, 107.56 vs 121.98 on edge50-highload (the boards'
  heuristic rows). Configs stored before the option existed load as ``least_loaded``.
* **Resource scheduling: PPO** (on-policy, like the project's other learners; the decisions
  are many small ones per slot, which suits a shared stochastic policy better than DQN's
  one-action-per-transition replay). Every slot, for each running job, one shared policy
  chooses **shrink / keep / grow** (one allocation level of ``alloc_scales`` for all the
  job's workers, or one GPU on a grid scenario, :meth:`EdgeClusterSim.resize`; growth only
  where the nodes have room). It
  sees the job (priority, workers, level, quality, recent quality gain, progress, free
  capacity of its nodes), the cluster (free capacity, queued jobs per priority class) and
  the **task-volume forecast** (:class:`~edgesched.algos.rlpto.forecast.VolumeForecaster`
  on arrivals per ``forecast_window`` slots).
* **Reward** (the paper's three terms, team reward per slot, weights in ``AlgoConfig``):
  ``R = -(jobs in the system) / N - resource_weight * (allocated share of the cluster's CPU
  and GPU) + accuracy_weight * (sum of quality gained this slot)``. The first term summed
  over an episode is minus the total JCT / N (training time); the second charges occupied
  resources; the third credits model accuracy.
* **Convergence-aware shrinking**: a job whose quality gain in the last slot fell below
  ``shrink_gain`` (0.5) times its own mean gain per slot since it started, once past half
  its quality (its curve has flattened), is shrunk one level per slot by rule, before
  the policy acts (the paper: "when a model tends to converge, its resources are gradually
  reduced and given to other tasks"). Logged as ``rule_shrinks``.

**Credit** (``algo.credit``). ``job`` (the default): the slot's reward is split over the
jobs that ran (:mod:`edgesched.algos.rlpto.job_credit`: each job's quality gained, its share
of the resources, its own time in the system and, in proportion to its share, the queued
jobs' waiting), and each decision's advantage is GAE along its job's own decisions with a
critic on the job's features. ``team``, the form before issue #22: the critic is
``V(state(), forecast)`` per environment copy and advantages (GAE on the team reward) are
shared by all of a slot's decisions; one job's choice is then within the noise of the
cluster's reward, and every trained controller collapsed to "grow whenever feasible"
(``benchmarks/rlpto_controller.py``). The forecaster is refitted every
``forecast_refit`` updates on the arrival history of the finished training episodes (their
arrival phase, in ``forecast_window``-slot windows) when that history has grown since the
last fit. The history keeps the last ``HISTORY_WINDOWS`` windows; once it is full it no
longer grows, so training keeps its last fit from then on (on edge100 at the default
budget, from update 200). The committed rlpto results were trained so; refitting on a full but
changed history would change them. That history and the forecaster's seed
live in the actor's state, and evaluation fits the forecaster on the final history, so a
saved policy forecasts exactly as it did in the run's own evaluation. Shrink and grow are
the simulator's own resize step (:meth:`ClusterView.resize_levels`): one level of
``alloc_scales``, or on ``alloc_mode='grid'`` scenarios (TapFinger's) one GPU at the same
CPUs. Earlier code offered only "keep" on grid scenarios (RLPTO there was its placement
rule); a policy trained so acts differently under this code. On ``scale`` scenarios the
choices offered are unchanged.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import nn

from edgesched.envs.core import EdgeClusterSim
from edgesched.envs.handle import ScenarioHandle, evaluation_config
from edgesched.policy import EnvSpec

from ..common import (
    PPOEpochs,
    RunningMeanStd,
    VecSim,
    clipped_surrogate,
    gae,
    masked_logits,
    mlp,
    probs_of,
)
from .forecast import VolumeForecaster
from .job_credit import finished, job_rewards, job_shares, sequence_gae

SHRINK, KEEP, GROW = 0, 1, 2
HISTORY_WINDOWS = 4000
"""Arrival windows of forecaster history kept (the oldest are dropped beyond)."""
FIT_WINDOWS = 2000
"""The forecaster is fitted on the most recent this many windows of the history."""


class RLPTONet(nn.Module):
    """Controller, critic and the forecaster's history.

    The controller maps job features to 3 logits (shrink, keep, grow), the critic maps
    (state, forecast) to a value, and under per-job credit the job critic maps job features
    to the job's value; the forecaster's training history and the seed of its fits are
    buffers, so they are saved with the weights.
    """

    def __init__(
        self,
        job_dim: int,
        state_dim: int,
        hidden: list[int],
        seed: int = 0,
        job_critic: bool = False,
    ) -> None:
        super().__init__()
        self.policy = mlp([job_dim, *hidden], 3)
        self.critic = mlp([state_dim + 1, *hidden], 1)
        # per-job credit learns each job's return from the job's own features; built last
        # so that the team-credit networks initialize exactly as before it existed
        self.job_critic = mlp([job_dim, *hidden], 1) if job_critic else None
        self.register_buffer("forecast_history", torch.zeros(0, dtype=torch.float64))
        self.register_buffer("forecast_seed", torch.tensor(seed, dtype=torch.int64))

    def load_state_dict(self, sd, strict: bool = True, assign: bool = False):  # noqa: D102
        # the history's length varies; adopt the saved one
        self.forecast_history = sd["forecast_history"].clone()
        return super().load_state_dict(sd, strict=strict, assign=assign)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # (torch passes its own copy of the state dict here)
        if prefix + "forecast_seed" not in state_dict:
            # saved before the seed was: keep this net's own (the seed such policies were
            # always re-evaluated with), so their numbers do not change
            state_dict[prefix + "forecast_seed"] = self.forecast_seed.clone()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class RLPTOTrainer:
    """RLPTO behind the runner's trainer interface (see the module docs).

    Args:
        cfg: hyperparameters (:class:`edgesched.experiment.schema.AlgoConfig`; PPO fields
            plus ``resource_weight``, ``accuracy_weight``, ``shrink_gain``,
            ``forecast_window``, ``forecast_refit``).
        spec: the scenario's static facts.
        seed: seeds initialization and sampling.
    """

    def __init__(self, cfg: Any, spec: EnvSpec, seed: int) -> None:
        from edgesched.baselines import make_baseline

        self.cfg = cfg
        self.spec = spec
        self.seed = seed
        torch.manual_seed(seed)
        self.num_prio = max(spec.num_priorities, 1)
        self.job_dim = self.num_prio * 2 + 12
        self.job_credit = str(getattr(cfg, "credit", "team")) == "job"
        self.actor = RLPTONet(
            self.job_dim, spec.state_dim, [int(h) for h in cfg.hidden], seed, self.job_credit
        )
        self.opt = torch.optim.Adam(self.actor.parameters(), lr=float(cfg.lr), eps=1e-5)
        self.value_rms = RunningMeanStd()
        self.gen = torch.Generator().manual_seed(seed)
        # configs stored before the option existed placed least-loaded
        self.placement = str(getattr(cfg, "placement", "least_loaded"))
        self.placer = make_baseline(self.placement, spec)
        self.window = int(cfg.forecast_window)
        self.forecaster: VolumeForecaster | None = None
        self._fitted_hist: np.ndarray | None = None  # the history of the last fit
        self._fits = 0  # forecaster fits so far (keys the per-episode forecast memo)
        self._episode_ids: dict[int, tuple[int, int]] = {}
        self._last_arrivals: dict[int, np.ndarray] = {}
        self._fc_memo: dict[int, tuple[tuple[tuple[int, int], int], np.ndarray]] = {}
        self._q_snap: dict[int, tuple[tuple[int, int], int, np.ndarray, np.ndarray]] = {}
        self.updates = 0

    # ------------------------------------------------------------------ forecasting
    def _arrivals(self, sim: EdgeClusterSim, upto: int | None = None) -> np.ndarray:
        """Arrivals per window of the episode's arrival phase (windows ending before upto)."""
        w = self.window
        view = sim.view()
        n_win = max(view.config.arrival_slots // w, 1)
        a = view.job_arrival
        if upto is not None:
            a = a[a < (upto // w) * w]
        counts = np.bincount(np.minimum(a // w, n_win - 1), minlength=n_win)[:n_win]
        return counts.astype(np.float64) if upto is None else counts[: upto // w]

    def _refit(self, current: bool = False) -> None:
        """Refit the forecaster when the history grew since the last fit.

        Args:
            current: refit whenever the history differs from the last fit's, even at the
                same length (the history is capped, so once full it changes without
                growing): evaluation fits on the final history, as a reloaded policy does.
        """
        hist = self.actor.forecast_history.numpy()
        last = self._fitted_hist
        if last is not None and (np.array_equal(hist, last) if current else len(hist) == len(last)):
            return
        self._fit(hist)

    def _fit(self, hist: np.ndarray) -> None:
        """Fit the forecaster on ``hist`` (its last ``FIT_WINDOWS`` windows)."""
        # The history concatenates episodes that each restart at the same time of day, so
        # daily Fourier terms over the concatenation would be misaligned: none are used.
        season = max(1440 // self.window, 2)
        fc = VolumeForecaster(
            season=season,
            fourier_terms=0,
            window=8,
            epochs=20,
            recent=8,
            min_history=32,
            seed=int(self.actor.forecast_seed),
        )
        self.forecaster = fc.fit(hist[-FIT_WINDOWS:]) if len(hist) else None
        self._fitted_hist = hist.copy()
        self._fits += 1

    def _forecast(self, sim: EdgeClusterSim) -> float:
        """Forecast of the current window's arrivals, relative to the history's mean.

        The forecaster's rolling one-step forecasts are causal (the forecast of window ``k``
        uses windows ``< k`` only), so one call per episode yields every window's forecast;
        it is memoized per episode and fit.
        """
        view = sim.view()
        if view.clock >= view.config.arrival_slots:
            return 0.0  # arrivals are over for this episode
        key = (view.episode_key(), self._fits)
        memo = self._fc_memo.get(id(sim))
        if memo is None or memo[0] != key:
            memo = (key, self._episode_forecasts(sim))
            self._fc_memo[id(sim)] = memo
        return float(memo[1][min(view.clock // self.window, len(memo[1]) - 1)])

    def _episode_forecasts(self, sim: EdgeClusterSim) -> np.ndarray:
        """Normalized forecasts of every arrival window of the episode (causal)."""
        counts = self._arrivals(sim)
        hist = self.actor.forecast_history.numpy()
        scale = max(float(hist.mean()) if len(hist) else 1.0, 1.0)
        if self.forecaster is None:
            # no history fitted yet: the running mean of the windows seen so far
            csum = np.concatenate([[0.0], np.cumsum(counts)])
            k = np.arange(len(counts))
            f = np.where(k > 0, csum[k] / np.maximum(k, 1), scale)
        else:
            f = self.forecaster.rolling(counts)["combined"]
            f[0] = scale if not np.isfinite(f[0]) else f[0]
        return np.nan_to_num(f, nan=scale) / scale

    # ------------------------------------------------------------------ features
    def _quality_before(self, sim: EdgeClusterSim) -> np.ndarray:
        """Every job's quality one slot ago (zeros at an episode's first slot).

        Snapshots are taken at the first call in each slot, so ``quality - this`` is the
        gain over the last slot, whatever the number of decision rounds per slot.
        """
        key = id(sim)
        view = sim.view()
        ep, t, quality = view.episode_key(), view.clock, view.job_quality
        snap = self._q_snap.get(key)
        if snap is None or snap[0] != ep:
            snap = (ep, t, quality.copy(), np.zeros_like(quality))
        elif snap[1] != t:
            snap = (ep, t, quality.copy(), snap[2])
        self._q_snap[key] = snap
        return snap[3]

    def _jobs(self, sim: EdgeClusterSim, prev_q: np.ndarray, forecast: float):
        """Running jobs, their features (J, D), action masks (J, 3) and rule shrinks (J,)."""
        view = sim.view()
        jobs = view.running
        nj = len(jobs)
        feats = np.zeros((nj, self.job_dim), np.float32)
        mask = np.zeros((nj, 3), bool)
        mask[:, KEEP] = True
        rule = np.zeros(nj, bool)
        if nj == 0:
            return jobs, feats, mask, rule
        w = view.job_workers[jobs]
        wmax = view.max_workers
        valid = np.arange(wmax)[None, :] < w[:, None]
        nodes = np.where(valid, view.worker_nodes[jobs], 0)
        lv = np.where(valid, view.worker_levels[jobs], 0)
        top = view.num_levels - 1
        cap = view.capacity
        free = np.clip(view.free / np.maximum(cap, 1e-9), 0.0, 1.0)
        node_free = (free[nodes] * valid[..., None]).sum(1) / w[:, None]
        quality = view.job_quality[jobs]
        gain = quality - prev_q[jobs]
        queued = view.queued
        per_prio = np.bincount(view.job_priority[queued], minlength=self.num_prio) / view.num_agents
        feats[np.arange(nj), view.job_priority[jobs]] = 1.0
        o = self.num_prio
        feats[:, o] = w / 4.0
        feats[:, o + 1] = lv.sum(1) / w / max(top, 1)
        feats[:, o + 2] = quality
        feats[:, o + 3] = np.clip(gain * 10.0, -1.0, 1.0)
        feats[:, o + 4] = np.clip(
            view.job_progress[jobs] / np.maximum(view.job_max_samples[jobs], 1e-9), 0, 1
        )
        feats[:, o + 5 : o + 7] = node_free[:, :2]
        tot_free = 1.0 - view.used[:, :2].sum(0) / np.maximum(cap[:, :2].sum(0), 1e-9)
        feats[:, o + 7 : o + 9] = tot_free
        feats[:, o + 9 : o + 9 + self.num_prio] = per_prio
        feats[:, o + 9 + self.num_prio] = forecast
        feats[:, o + 10 + self.num_prio] = len(jobs) / view.num_agents
        feats[:, o + 11 + self.num_prio] = view.clock / max(view.config.max_slots, 1)
        if top > 0:
            # the simulator's own step (a scale level, or one GPU on the grid), so a choice
            # offered here is one that resize() carries out when the nodes have room
            down = view.resize_levels(jobs, -1)
            up = view.resize_levels(jobs, 1)
            mask[:, SHRINK] = ((down != lv) & valid).any(1)
            add = view.alloc(jobs[:, None], np.where(valid, up, 0))
            add = (add - view.worker_alloc[jobs][:, :wmax]) * valid[..., None]
            need = np.zeros((nj, view.num_agents, 3))
            for k in range(wmax):
                np.add.at(need, (np.arange(nj), nodes[:, k]), add[:, k])
            fits = (need <= view.free[None] + 1e-9).all(axis=(1, 2))
            mask[:, GROW] = ((up != lv) & valid).any(1) & fits
            pace = quality / np.maximum(view.clock - view.job_start_slot[jobs], 1)
            rule = mask[:, SHRINK] & (gain < float(self.cfg.shrink_gain) * pace) & (quality > 0.5)
        return jobs, feats, mask, rule

    def _value_input(self, state: np.ndarray, forecast: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.concatenate([state, forecast[:, None]], 1).astype(np.float32))

    def _reward(self, sim: EdgeClusterSim, env_reward: np.ndarray, gain: float) -> float:
        """RLPTO's cluster reward of the slot just run (see the module docs)."""
        view = sim.view()
        in_system = -float(env_reward.sum()) if view.config.reward_mode == "local" else 0.0
        if view.config.reward_mode == "team":
            in_system = -float(env_reward.mean()) * view.num_agents
        return (
            -in_system / view.num_agents
            - float(self.cfg.resource_weight) * view.occupied_share()
            + float(self.cfg.accuracy_weight) * gain
        )

    # ------------------------------------------------------------------ one decision round
    def _control(self, sim, prev_q, forecast, greedy):
        """Rule shrinks, then the policy's shrink/keep/grow; applied to the simulator."""
        jobs, feats, mask, rule = self._jobs(sim, prev_q, forecast)
        out = {"feats": feats, "mask": mask, "actions": np.full(len(jobs), KEEP), "logp": None}
        if len(jobs) == 0:
            out["logp"] = np.zeros(0, np.float32)
            out["rule"] = 0
            if self.job_credit:
                out.update(jobs=jobs, learn=np.zeros(0, bool))
            return out
        if rule.any():
            sim.resize(jobs[rule], np.full(int(rule.sum()), -1))
        learn = ~rule
        with torch.no_grad():
            logits = masked_logits(
                self.actor.policy(torch.from_numpy(feats)), torch.from_numpy(mask)
            )
            lp = torch.log_softmax(logits, -1)
            if greedy:
                a = lp.argmax(-1)
            else:
                a = torch.multinomial(probs_of(lp), 1, generator=self.gen).squeeze(-1)
        a_np = a.numpy()
        if learn.any():
            delta = a_np[learn] - 1  # SHRINK/KEEP/GROW -> -1/0/+1
            sim.resize(jobs[learn], delta)
        # PPO learns from the decisions that had a choice: a job that can neither shrink nor
        # grow (about 93% of the controller's calls on edge10-v1) has one feasible action,
        # no gradient and zero entropy, and kept among the rows it diluted the entropy bonus
        # and the advantage normalization by that share
        keep = learn & (mask.sum(1) > 1)
        logp = lp.gather(-1, a[:, None]).squeeze(-1).numpy()
        if self.job_credit:
            # every running job's row: its trajectory's rewards accrue in every slot, and
            # the critic learns from all of them; the policy only from the decisions
            out.update(jobs=jobs, feats=feats, mask=mask, actions=a_np, logp=logp, learn=keep)
        else:
            out.update(feats=feats[keep], mask=mask[keep], actions=a_np[keep], logp=logp[keep])
        out["rule"] = int(rule.sum())
        return out

    # ------------------------------------------------------------------ rollout
    def collect(self, vec: VecSim, steps: int) -> dict[str, Any]:
        """Run RLPTO for ``steps`` slots in every copy; returns the batch for :meth:`update`."""
        if self.updates % int(self.cfg.forecast_refit) == 0:
            self._refit()
        if self.job_credit:
            return self._collect_jobs(vec, steps)
        e = vec.num_envs
        feats, masks, acts, logps, groups = [], [], [], [], []
        state_b = np.empty((steps, e, self.spec.state_dim), np.float32)
        fc_b = np.empty((steps, e), np.float32)
        val_b = np.empty((steps, e), np.float32)
        rew_b = np.empty((steps, e), np.float32)
        done_b = np.empty((steps, e), np.float32)
        episodes: list[dict[str, Any]] = []
        rule_shrinks = 0
        gamma = float(self.cfg.gamma)
        for t in range(steps):
            fc = np.array([self._forecast(s) for s in vec.copies], np.float32)
            prev_q = [self._quality_before(s) for s in vec.copies]
            for i, sim in enumerate(vec.copies):
                self._track_episode(i, sim)
                out = self._control(sim, prev_q[i], float(fc[i]), greedy=False)
                rule_shrinks += out["rule"]
                feats.append(out["feats"])
                masks.append(out["mask"])
                acts.append(out["actions"])
                logps.append(out["logp"])
                groups.append(np.full(len(out["actions"]), t * e + i))
            state = vec.state
            state_b[t], fc_b[t] = state, fc
            val_b[t] = self._value(state, fc)
            placements = np.stack([self.placer.act(s.obs, s.mask, None) for s in vec.copies])
            views = [s.view() for s in vec.copies]
            before = [(v.running.copy(), float(v.job_quality[v.running].sum())) for v in views]
            res = vec.step(placements)
            for i, sim in enumerate(vec.copies):
                gain = 0.0
                if not (res["terminated"][i] or res["truncated"][i]):
                    # quality gained this slot by the jobs that ran (completions included)
                    was, q0 = before[i]
                    gain = max(float(views[i].job_quality[was].sum()) - q0, 0.0)
                r = self._reward(sim, res["rewards"][i], gain)
                if i in res["final_state"]:
                    r += gamma * float(self._value(res["final_state"][i][None], fc[i : i + 1])[0])
                rew_b[t, i] = r
            done_b[t] = res["terminated"] | res["truncated"]
            episodes += res["episodes"]
        last_fc = np.array([self._forecast(s) for s in vec.copies], np.float32)
        adv, ret = gae(
            rew_b, val_b, self._value(vec.state, last_fc), done_b, gamma, float(self.cfg.gae_lambda)
        )
        n_dec = sum(len(a) for a in acts)
        acts_all = np.concatenate(acts) if n_dec else np.zeros(0, np.int64)
        per_step = 1.0 / (steps * e)
        return {
            "log": {
                "rule_shrinks_per_step": rule_shrinks * per_step,
                "policy_shrinks_per_step": float((acts_all == SHRINK).sum()) * per_step,
                "policy_grows_per_step": float((acts_all == GROW).sum()) * per_step,
                "rlpto_reward_per_step": float(rew_b.mean()),
                "forecast_history": float(len(self.actor.forecast_history)),
            },
            "feats": np.concatenate(feats) if n_dec else np.zeros((0, self.job_dim), np.float32),
            "mask": np.concatenate(masks) if n_dec else np.zeros((0, 3), bool),
            "actions": acts_all,
            "logp": np.concatenate(logps).astype(np.float32) if n_dec else np.zeros(0, np.float32),
            "group": np.concatenate(groups) if n_dec else np.zeros(0, np.int64),
            "state": state_b.reshape(steps * e, -1),
            "forecast": fc_b.reshape(-1),
            "adv": adv.reshape(-1).astype(np.float32),
            "ret": ret.reshape(-1).astype(np.float32),
            "rewards": rew_b,
            "episodes": episodes,
            "collisions": 0.0,
        }

    def _track_episode(self, key: int, sim: EdgeClusterSim) -> None:
        """When a copy has started a new episode, its previous one's arrivals are history."""
        cur = sim.view().episode_key()
        prev = self._episode_ids.get(key)
        if prev is not None and prev != cur and key in self._last_arrivals:
            hist = np.concatenate([self.actor.forecast_history.numpy(), self._last_arrivals[key]])
            self.actor.forecast_history = torch.from_numpy(hist[-HISTORY_WINDOWS:])
        self._episode_ids[key] = cur
        self._last_arrivals[key] = self._arrivals(sim)

    @torch.no_grad()
    def _value(self, state: np.ndarray, forecast: np.ndarray) -> np.ndarray:
        v = self.actor.critic(self._value_input(state, forecast)).squeeze(-1).numpy()
        return v * self.value_rms.std + self.value_rms.mean

    def _collect_jobs(self, vec: VecSim, steps: int) -> dict[str, Any]:
        """:meth:`collect` under per-job credit (:mod:`.job_credit`).

        One row per running job and slot, linked along each job's trajectory.
        """
        e = vec.num_envs
        cols: dict[str, list[np.ndarray]] = {
            k: [] for k in ("feats", "mask", "actions", "logp", "learn", "slot", "reward")
        }
        nxt: list[int] = []
        closed: list[int] = []  # 0 open, 1 finished (value 0 after), 2 bootstrap on itself
        # (copy, episode, job) -> its latest row
        last: dict[tuple[int, tuple[int, int], int], int] = {}
        keys: list[tuple[int, tuple[int, int], int]] = []
        episodes: list[dict[str, Any]] = []
        team_rew = np.empty((steps, e), np.float32)
        fc_b = np.empty((steps, e), np.float32)
        rule_shrinks = 0
        rw, aw = float(self.cfg.resource_weight), float(self.cfg.accuracy_weight)
        for t in range(steps):
            fc = np.array([self._forecast(s) for s in vec.copies], np.float32)
            prev_q = [self._quality_before(s) for s in vec.copies]
            fc_b[t] = fc
            slot_rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
            for i, sim in enumerate(vec.copies):
                self._track_episode(i, sim)
                out = self._control(sim, prev_q[i], float(fc[i]), greedy=False)
                rule_shrinks += out["rule"]
                view = sim.view()
                jobs, ep = out["jobs"], view.episode_key()
                base = len(nxt)
                for k, j in enumerate(jobs.tolist()):
                    key = (i, ep, j)
                    if key in last:
                        nxt[last[key]] = base + k
                    last[key] = base + k
                    keys.append(key)
                nxt += [-1] * len(jobs)
                closed += [0] * len(jobs)
                for name in ("feats", "mask", "actions", "logp", "learn"):
                    cols[name].append(out[name])
                cols["slot"].append(np.full(len(jobs), t))
                rows = np.arange(base, base + len(jobs))
                slot_rows.append((rows, jobs, job_shares(view, jobs), view.job_quality[jobs]))
            placements = np.stack([self.placer.act(s.obs, s.mask, None) for s in vec.copies])
            res = vec.step(placements)
            for i, sim in enumerate(vec.copies):
                rows, jobs, share, q0 = slot_rows[i]
                view = sim.view()
                if res["terminated"][i] or res["truncated"][i]:
                    # the copy was reset: its jobs' trajectories end here, bootstrapped on
                    # their own value (the end state is gone)
                    r = job_rewards(
                        0 * share, share, np.ones(len(jobs), bool), 0, view.num_agents, rw, aw
                    )
                    for row in rows.tolist():
                        closed[row] = 2
                else:
                    done = finished(view, jobs)
                    gain = np.maximum(view.job_quality[jobs] - q0, 0.0)
                    r = job_rewards(
                        gain, share, ~done, int(view.queued.sum()), view.num_agents, rw, aw
                    )
                    for row in rows[done].tolist():
                        closed[row] = 1
                cols["reward"].append(r)
                team_rew[t, i] = float(r.sum())
            episodes += res["episodes"]
        cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
        n = len(nxt)
        feats = cat["feats"].reshape(n, self.job_dim).astype(np.float32)
        values = self._job_value(feats)
        nxt_a = np.asarray(nxt, np.int64)
        closed_a = np.asarray(closed, np.int64)
        boot = np.where(closed_a == 2, values, 0.0)
        # open trajectories at the rollout's end: the job's value now if it still runs,
        # else (crashed back into a queue) its last row's own value
        end_rows = np.flatnonzero((nxt_a < 0) & (closed_a == 0))
        boot[end_rows] = values[end_rows]
        if len(end_rows):
            now: dict[tuple[int, tuple[int, int], int], int] = {}
            end_feats = []
            for i, sim in enumerate(vec.copies):
                view = sim.view()
                jobs, f, _, _ = self._jobs(sim, self._quality_before(sim), self._forecast(sim))
                ep = view.episode_key()
                for k, j in enumerate(jobs.tolist()):
                    now[(i, ep, j)] = len(end_feats)
                    end_feats.append(f[k])
            if end_feats:
                v_now = self._job_value(np.stack(end_feats))
                for row in end_rows.tolist():
                    at = now.get(keys[row])
                    if at is not None:
                        boot[row] = v_now[at]
        adv, ret = sequence_gae(
            cat["slot"].astype(np.int64),
            nxt_a,
            cat["reward"],
            values,
            boot,
            float(self.cfg.gamma),
            float(self.cfg.gae_lambda),
        )
        acts = cat["actions"].astype(np.int64)
        learn = cat["learn"].astype(bool)
        per_step = 1.0 / (steps * e)
        return {
            "log": {
                "rule_shrinks_per_step": rule_shrinks * per_step,
                "policy_shrinks_per_step": float((acts[learn] == SHRINK).sum()) * per_step,
                "policy_grows_per_step": float((acts[learn] == GROW).sum()) * per_step,
                "rlpto_reward_per_step": float(team_rew.mean()),
                "forecast_history": float(len(self.actor.forecast_history)),
            },
            "feats": feats,
            "mask": cat["mask"].reshape(n, 3).astype(bool),
            "actions": acts,
            "logp": cat["logp"].astype(np.float32),
            "learn": learn,
            "forecast": fc_b.reshape(-1),
            "adv": adv.astype(np.float32),
            "ret": ret.astype(np.float32),
            "rewards": team_rew,
            "episodes": episodes,
            "collisions": 0.0,
        }

    @torch.no_grad()
    def _job_value(self, feats: np.ndarray) -> np.ndarray:
        if len(feats) == 0:
            return np.zeros(0)
        v = self.actor.job_critic(torch.from_numpy(feats)).squeeze(-1).numpy()
        return (v * self.value_rms.std + self.value_rms.mean).astype(np.float64)

    def _update_jobs(self, batch: dict[str, Any], progress: float) -> dict[str, float]:
        """:meth:`update` under per-job credit: minibatches of job rows.

        The controller learns from the decision rows, the job critic from every row.
        """
        cfg = self.cfg
        ret = batch["ret"]
        if cfg.value_norm and len(ret):
            self.value_rms.update(ret)
            ret = (ret - self.value_rms.mean) / self.value_rms.std
        ret_t = torch.from_numpy(ret.astype(np.float32))
        feats = torch.from_numpy(batch["feats"])
        mask = torch.from_numpy(batch["mask"])
        acts = torch.from_numpy(batch["actions"])
        old = torch.from_numpy(batch["logp"])
        adv_all = torch.from_numpy(batch["adv"])
        learn = torch.from_numpy(batch["learn"])
        params = list(self.actor.parameters())
        loop = PPOEpochs(cfg, len(ret), self.gen, progress, self.opt, params, self.updates)
        for idx in loop:
            v = self.actor.job_critic(feats[idx]).squeeze(-1)
            rows = idx[learn[idx]]
            pg, ratio, entropy = self._policy_terms(feats, mask, acts, old, rows, adv_all[rows])
            loop.step(pg, 0.5 * ((v - ret_t[idx]) ** 2).mean(), entropy, ratio)
        self.updates += 1
        return loop.result()

    def _policy_terms(
        self,
        feats: torch.Tensor,
        mask: torch.Tensor,
        acts: torch.Tensor,
        old: torch.Tensor,
        rows: torch.Tensor,
        adv: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The controller's clipped policy loss, ratio and entropy on decision ``rows``.

        With no row (no decision in the minibatch) only the critic learns: zero loss and
        entropy, ratio 1.
        """
        if not len(rows):
            zero = torch.zeros(())
            return zero, torch.ones(1), zero
        lp_all = torch.log_softmax(masked_logits(self.actor.policy(feats[rows]), mask[rows]), -1)
        lp = lp_all.gather(-1, acts[rows][:, None]).squeeze(-1)
        pg, ratio = clipped_surrogate(lp, old[rows], adv, float(self.cfg.clip))
        entropy = -(probs_of(lp_all) * lp_all.clamp_min(-1e4)).sum(-1).mean()
        return pg, ratio, entropy

    # ------------------------------------------------------------------ update
    def update(self, batch: dict[str, Any], progress: float) -> dict[str, float]:
        """One PPO update (minibatches of slots with all their decisions).

        The controller learns from its slot's shared advantage, the critic from the slots'
        returns (under per-job credit, :meth:`_update_jobs`).
        """
        if self.job_credit:
            return self._update_jobs(batch, progress)
        cfg = self.cfg
        n_groups = len(batch["adv"])
        ret = batch["ret"]
        if cfg.value_norm:
            self.value_rms.update(ret)
            ret = (ret - self.value_rms.mean) / self.value_rms.std
        ret_t = torch.from_numpy(ret.astype(np.float32))
        vin = self._value_input(batch["state"], batch["forecast"])
        adv_all = torch.from_numpy(batch["adv"])
        feats = torch.from_numpy(batch["feats"])
        mask = torch.from_numpy(batch["mask"])
        acts = torch.from_numpy(batch["actions"])
        old = torch.from_numpy(batch["logp"])
        group = batch["group"]
        params = list(self.actor.parameters())
        group_t = torch.from_numpy(group)
        loop = PPOEpochs(cfg, n_groups, self.gen, progress, self.opt, params, self.updates)
        for gidx_t in loop:
            gidx = gidx_t.numpy()
            v = self.actor.critic(vin[gidx]).squeeze(-1)
            rows = torch.from_numpy(np.flatnonzero(np.isin(group, gidx)))
            adv = adv_all[group_t[rows]]
            pg, ratio, entropy = self._policy_terms(feats, mask, acts, old, rows, adv)
            loop.step(pg, 0.5 * ((v - ret_t[gidx]) ** 2).mean(), entropy, ratio)
        self.updates += 1
        return loop.result()

    # ------------------------------------------------------------------ evaluation
    def _evaluate_rows(
        self,
        env_name: str | ScenarioHandle,
        env_overrides: dict[str, Any],
        eval_seeds: list[int],
        episodes: int,
    ) -> list[dict[str, Any]]:
        """:meth:`evaluate`'s per-episode rows (the forecaster refitted on the final history)."""
        from edgesched.protocol import (
            EXTRA_METRICS,
            SCALAR_METRICS,
            cluster_reward,
            eval_workload_seed,
        )

        self._refit(current=True)
        scenario_id, cfg = evaluation_config(env_name, env_overrides)
        sim = EdgeClusterSim(cfg, scenario_id=scenario_id)
        view = sim.view()
        # per-simulator caches are keyed by id(): drop any entry of a dead object at this id
        self._fc_memo.pop(id(sim), None)
        self._q_snap.pop(id(sim), None)
        rows = []
        for s in eval_seeds:
            for k in range(episodes):
                sim.reset(eval_workload_seed(int(s), k))
                total, rule = 0.0, 0
                gpu_small = gpu_large = 0.0
                n_small = n_large = 0
                x90 = view.job_x90
                big = x90 > np.median(x90) if view.num_jobs else np.zeros(0, bool)
                t0 = time.perf_counter()
                while not (sim.terminated or sim.truncated):
                    fc = self._forecast(sim)
                    out = self._control(sim, self._quality_before(sim), fc, greedy=True)
                    rule += out["rule"]
                    run = view.running
                    if len(run):
                        gpus = view.worker_alloc[run, :, 1].sum(1)
                        large = big[run]
                        gpu_small += float(gpus[~large].sum())
                        gpu_large += float(gpus[large].sum())
                        n_small += int((~large).sum())
                        n_large += int(large.sum())
                    before = (run.copy(), float(view.job_quality[run].sum()))
                    r, _ = sim.step(self.placer.act(sim.obs, sim.mask, None))
                    gain = max(float(view.job_quality[before[0]].sum()) - before[1], 0.0)
                    total += self._reward(sim, r, gain)
                m = sim.episode_metrics()
                row = {key: m[key] for key in SCALAR_METRICS + EXTRA_METRICS}
                row.update(
                    eval_seed=int(s),
                    episode=k,
                    jct_by_priority=m["jct_by_priority"],
                    slots=m["slots"],
                    truncated=bool(sim.truncated),
                    # the same definition as for every other scheduler (from the metrics);
                    # `total` is the per-slot sum the learner saw, for comparison
                    rlpto_reward=cluster_reward(
                        m, float(self.cfg.resource_weight), float(self.cfg.accuracy_weight)
                    ),
                    rlpto_reward_learner=total,
                    resized_down=m["resized_down"],
                    resized_up=m["resized_up"],
                    rule_shrinks=rule,
                    gpus_per_job_small=gpu_small / max(n_small, 1),
                    gpus_per_job_large=gpu_large / max(n_large, 1),
                    wall_s=time.perf_counter() - t0,
                )
                rows.append(row)
        self._fc_memo.pop(id(sim), None)  # the simulator dies here; its id may be reused
        self._q_snap.pop(id(sim), None)
        return rows

    def evaluate(
        self,
        env_name: str | ScenarioHandle,
        env_overrides: dict[str, Any],
        eval_seeds: list[int],
        episodes: int,
    ) -> dict[str, Any]:
        """Held-out evaluation with the greedy controller (same workloads as every scheduler).

        ``env_name`` is the run's scenario handle (``env_overrides``: settings on top of its
        overrides) or a name or versioned id (``env_overrides``: its overrides); see
        :func:`~edgesched.envs.handle.evaluation_config`.

        Returns:
            ``per_episode`` rows and ``summary`` means: the episode metrics plus
            ``rlpto_reward`` (the episode's sum of RLPTO's cluster reward), resize counts,
            and the mean GPUs held per running job for jobs below / above the median size
            (the paper's data-scale statement).
        """
        from edgesched.protocol import EXTRA_METRICS, SCALAR_METRICS

        # evaluation forecasts with a fit on the final history (as a reloaded policy does);
        # the training forecaster is restored afterwards, so that a learning-curve
        # evaluation mid-run leaves training exactly as it would have been without it
        saved = (self.forecaster, self._fitted_hist, self._fits)
        try:
            rows = self._evaluate_rows(env_name, env_overrides, eval_seeds, episodes)
        finally:
            self.forecaster, self._fitted_hist, self._fits = saved
        keys = (*SCALAR_METRICS, *EXTRA_METRICS, *RLPTO_METRICS)
        summary = {key: float(np.nanmean([r[key] for r in rows])) for key in keys}
        return {"per_episode": rows, "summary": summary}

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue training bit-for-bit."""
        return {
            "actor": self.actor.state_dict(),
            "opt": self.opt.state_dict(),
            "value_rms": (self.value_rms.mean, self.value_rms.var, self.value_rms.count),
            "gen": self.gen.get_state(),
            "torch_rng": torch.get_rng_state(),
            "updates": self.updates,
            "episode_ids": dict(self._episode_ids),
            "last_arrivals": {k: v.copy() for k, v in self._last_arrivals.items()},
            # the history the current forecaster was fitted on (older than the actor's own
            # once new episodes arrived since the last refit)
            "fitted_hist": None if self._fitted_hist is None else self._fitted_hist.copy(),
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`.

        The forecaster is refitted on the history it was last fitted on, so a resumed run
        forecasts as the uninterrupted one would; checkpoints written before that history
        was saved refit on the actor's current history instead.
        """
        self.actor.load_state_dict(sd["actor"])
        self.opt.load_state_dict(sd["opt"])
        self.value_rms = RunningMeanStd(*sd["value_rms"])
        self.gen.set_state(sd["gen"])
        torch.set_rng_state(sd["torch_rng"])
        self.updates = int(sd["updates"])
        self._episode_ids = dict(sd["episode_ids"])
        self._last_arrivals = dict(sd["last_arrivals"])
        fitted = sd.get("fitted_hist")
        if fitted is None:
            self._fitted_hist = None
            self._refit()
        else:
            self._fit(np.asarray(fitted, dtype=np.float64))


RLPTO_METRICS = (
    "rlpto_reward",
    "rlpto_reward_learner",
    "resized_down",
    "resized_up",
    "rule_shrinks",
    "gpus_per_job_small",
    "gpus_per_job_large",
)
"""Extra per-episode metrics of rlpto's evaluation."""
