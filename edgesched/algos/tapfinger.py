"""TapFinger: heterogeneous-graph-attention MARL with task selection (Li et al., INFOCOM'23).

Each agent (an edge node, or an edge cluster in ``tapfinger-hetero6``) decides in two phases:

1. **Task selection** (pointer): attention of the agent's embedding over the embeddings of the
   tasks in its ``pending_slots`` (masked where a slot is empty or nothing fits), plus a
   learned "defer" score: ``logit(s) = q(h_agent) . k(h_task_s) / sqrt(d)``, bounded to
   ``C tanh(logit / C)`` with ``algo.pointer_clip=C`` (by default 10, the original code's
   bound, where agents contest tasks, and unbounded elsewhere:
   :func:`edgesched.algos.pointer_clip_for`).
2. **Allocation**: a head over every (placement target, allocation level) pair for the chosen
   task, ``f([h_agent, h_task, h_target])``, masked by the task's minimum demand and the
   target's free capacity (the simulator's action mask). On ``tapfinger-hetero6`` the grid
   is 0..16 CPUs x 0..16 GPUs; on the edge scenarios it is the scaled levels on K+1 targets.

The joint action's log-probability is the sum of the two phases' (the simulator's flat action
``1 + (slot (K+1) + target) L + level`` is exactly this pair). Embeddings come from
:class:`~edgesched.algos.graph.HeteroBackbone` (PyG ``HGTConv``) over the simulator's graph
view: nodes, pending tasks and running tasks, linked by topology, queue and placement edges.
The pending tasks are those in some agent's selection window
(:func:`~edgesched.algos.graph.visible_pending`); the backlog behind the windows is seen
through each node's queue-length feature, and the graph stays bounded however long queues get.

**Parameter sharing.** One actor serves every agent and no agent-id embedding is used: an
agent's identity, for what matters to scheduling, is in its node embedding (capacity, load,
speed, neighbourhood), and sharing lets one network run on any number of agents.

**Conflicts**. When several agents select the same task in one round, the
winner is drawn with probability proportional to ``pointer probability x fit``, where ``fit``
is the softmax over the competitors of ``min_r free_r / min_demand_r`` on each competitor's
chosen target (greedy evaluation takes the most probable winner). Only the winner places;
the losers defer in the environment, and their allocation term is excluded from the PPO loss
(they keep their pointer term: selecting a contested task is a decision with consequences).
Conflicts are counted per update. With ``algo.conflict_winner=argmax`` the winner is,
in training and at evaluation, the largest ``pointer probability x fit`` with the raw fit
(no softmax) and nothing drawn: the original TapFinger code's rule, the learner's side of
the scenario option ``conflict_rule='fit_argmax'``. The learner resolves its agents'
contests before the step, so the scenario's ``conflict_rule`` never sees one of them; the
algorithm key is what selects the original's rule for TapFinger.

**Reward** (``algo.team_reward``; ``null`` by default in ``conf/algo/tapfinger.yaml``,
resolved per scenario by :func:`edgesched.algos.team_reward_for`): each agent learns
from the mean of all agents' rewards where a waiting job's cost can pass between agents, and
from its own reward elsewhere. The simulator charges a queued job to its home agent and a
running job to the agent that placed it, so with shared visibility (``tapfinger-hetero6``)
an agent that places another agent's job takes over its cost: learning from its own reward,
it learns to leave other agents' jobs waiting (measured: the training JCT on
``tapfinger-hetero6`` rose from 21 to 25 slots over the first 180 updates of a default run).
The mean sums to the cluster's total completion time (Little's law), the objective
TapFinger minimizes. Where a waiting job is visible to its home agent only (the edge
scenarios), that transfer cannot happen and the mean dilutes each agent's credit by the
number of agents: on its own reward TapFinger ended 18.0% (edge10), 42.4% (edge50), 37.9%
(edge100) and 30.7% (edge50-highload) lower in mean JCT than on the mean, paired at the same
budget (``docs/tapfinger.md``, *edge50*; the mean-reward runs are the boards' variant
``tapfinger-mean``). Under ``waiting_charge="every_viewer"`` every agent that sees a
job pays for it, the original code's per-agent reward, so the own reward is used there too.

**Critic**: ``V_i = f([h_agent_i, mean of all node embeddings])`` (centralized through the
graph). PPO details as in :mod:`edgesched.algos.mappo` (GAE, value normalization, clipped
surrogate, entropy schedule, gradient clipping).

**Work conservation** (``algo.work_conserving``, off by default): the pointer may defer only
when no task of the agent's window fits. Measured reason (issue #22): on held-out seed
10007 of ``tapfinger-hetero6`` a policy trained at 4x the default budget deferred with
tasks fitting and GPUs free once its queues grew past what it met in training (queue-length
feature far out of range), and the backlog fed itself: 148 queued jobs with 5 running, a
mean JCT of 47.02 against about 6 on the other seeds. The original's action space has
"skip" ((0, 0)) too, so the option departs from it; it is a learner choice, not a scenario
one.

**Ablations** (``algo.graph_attention=false``: no message passing, each entity embedded from
its own features only; ``algo.pointer=false``: uniform choice among the feasible tasks and
defer, no learned selection).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from edgesched.envs.core import NODE_FEATURES
from edgesched.policy import EnvSpec

from . import TAPFINGER_CONFLICT_WINNERS, pointer_clip_for, team_reward_for
from .common import (
    PPOEpochs,
    RunningMeanStd,
    VecSim,
    clipped_surrogate,
    gae,
    masked_logits,
    mlp,
    probs_of,
    team_mean,
)
from .graph import HeteroBackbone, PaddedGraphs, in_size_groups, pad_graphs, visible_pending


# ---------------------------------------------------------------------------- conflicts
def resource_fit(graph: dict[str, Any], agent_rows: np.ndarray, task_rows: np.ndarray):
    """``min_r free_r / min_demand_r`` of placing each task on each target, from features.

    Args:
        graph: the simulator's graph view.
        agent_rows: (M,) rows of the ``node`` type (the chosen targets).
        task_rows: (M,) rows of the ``pending`` type.

    Node features hold free fraction (0:3) and capacity / max capacity (3:6); pending-task
    features hold minimum demand / max capacity (1:4); the max capacity cancels.
    """
    node = graph["nodes"]["node"][agent_rows]
    free = node[:, 0:3] * node[:, 3:6]
    need = graph["nodes"]["pending"][task_rows, 1:4]
    ratio = np.where(need > 0, free / np.maximum(need, 1e-12), np.inf)
    return ratio.min(axis=1)


def resolve_conflicts(
    task: np.ndarray,
    ptr_prob: np.ndarray,
    fit: np.ndarray,
    rng: np.random.Generator | None,
    winner: str = "sampled",
) -> tuple[np.ndarray, int]:
    """Pick one winner per contested task.

    Args:
        task: (N,) chosen task id per agent, -1 for agents that defer.
        ptr_prob: (N,) each agent's pointer probability of its chosen task.
        fit: (N,) each agent's resource fit for its chosen task and target.
        rng: draws the winner in proportion to ``ptr_prob x softmax(fit)``; ``None`` takes
            the most probable winner (greedy evaluation; ties to the lowest agent index).
        winner: ``sampled`` (the above) or ``argmax``: the largest ``ptr_prob x fit``
            (raw fit, the original TapFinger code's rule), with or without ``rng``; ties
            to the lowest agent index, as ``conflict_rule='fit_argmax'`` in the simulator.

    Returns:
        ``(keeps, contested)``: (N,) True for agents whose placement stands (all
        non-contested placers and each contest's winner); number of contested tasks.
    """
    if winner not in TAPFINGER_CONFLICT_WINNERS:
        raise ValueError(
            f"winner={winner!r} is not allowed; use {'|'.join(TAPFINGER_CONFLICT_WINNERS)}"
        )
    keeps = task >= 0
    contested = 0
    placing = np.flatnonzero(keeps)
    if len(placing) < 2:
        return keeps, 0
    uniq, counts = np.unique(task[placing], return_counts=True)
    for t in uniq[counts > 1]:
        rivals = placing[task[placing] == t]
        # a resource the task does not need gives an infinite ratio: cap it
        f = np.nan_to_num(fit[rivals], posinf=1e6, neginf=-1e6)
        if winner == "argmax":
            win = int(np.argmax(ptr_prob[rivals] * f))
        else:
            soft = np.exp(f - f.max())
            soft /= soft.sum()
            w = ptr_prob[rivals] * soft
            w = w / w.sum() if w.sum() > 0 else np.full(len(rivals), 1.0 / len(rivals))
            win = int(np.argmax(w)) if rng is None else int(rng.choice(len(rivals), p=w))
        keeps[rivals] = False
        keeps[rivals[win]] = True
        contested += 1
    return keeps, contested


# ---------------------------------------------------------------------------- network
class TapFingerNet(nn.Module):
    """Backbone, pointer, allocation head and critic.

    Args:
        spec: the scenario's static facts.
        hidden: embedding width.
        layers: HGTConv layers (0: the no-graph-attention ablation).
        heads: attention heads.
    """

    def __init__(
        self, spec: EnvSpec, hidden: int, layers: int, heads: int, pointer_clip: float = 0.0
    ) -> None:
        super().__init__()
        self.pointer_clip = float(pointer_clip)
        in_dims = {
            "node": NODE_FEATURES,
            "pending": spec.job_features,
            "running": spec.job_features + 2,
        }
        self.backbone = HeteroBackbone(in_dims, hidden, layers, heads)
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.defer = mlp([hidden, hidden], 1)
        self.alloc = mlp([3 * hidden, hidden], spec.num_levels)
        self.critic = mlp([2 * hidden, hidden], 1)
        self.hidden = hidden
        self.spec = spec

    def forward(
        self,
        batch: PaddedGraphs,
        only_slot: torch.Tensor | None = None,
        alloc_rows: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, ...]:
        """Pointer logits (G, N, 1+P), allocation logits (G, N, P, (K+1) L), values (G, N).

        Index 0 of the pointer is "defer". Logits are unmasked. With ``only_slot`` (G, N),
        allocation logits are computed for that pending slot only: (G, N, 1, (K+1) L) (the
        PPO update needs no other, and the allocation head dominates its cost). With
        ``alloc_rows`` as well ((R,) indices into the flattened (G, N) agents), they are
        computed for those agents only and are 0 elsewhere: the update passes the agents
        whose allocation counts (placed and kept; 7% of them in an untrained policy's edge100
        rollout); the others' rows carry no loss and no gradient.
        """
        h = self.backbone(batch, need=("node", "pending"))  # running jobs feed the nodes
        hn, hp = h["node"], h["pending"]  # (G, M, H), padded
        g = len(batch)
        rows = torch.arange(g)[:, None, None]
        zero = hn.new_zeros(g, 1, self.hidden)
        ha = hn[rows[:, :, 0], batch.agents]  # (G, N, H)
        s, tg = batch.slots, batch.targets
        hs = torch.cat([hp, zero], 1)[rows, torch.where(s >= 0, s, hp.shape[1])]  # (G, N, P, H)
        hn_pad = torch.cat([hn, zero], 1)
        tg = torch.where(tg >= 0, tg, hn.shape[1])  # (G, N, K1) rows of hn_pad
        ptr = (self.q(ha)[:, :, None, :] * self.k(hs)).sum(-1) / self.hidden**0.5
        ptr = torch.cat([self.defer(ha), ptr], dim=-1)
        if self.pointer_clip > 0:
            # bounded to +-C like the original's pointers (10 tanh), scaled so that logits
            # near 0, as at initialization, are unchanged
            c = self.pointer_clip
            ptr = c * torch.tanh(ptr / c)
        if only_slot is not None:
            hs = hs.gather(2, only_slot[:, :, None, None].expand(-1, -1, 1, hs.shape[-1]))
        n = hs.shape[1]
        if alloc_rows is None:
            alloc = self._alloc_logits(ha, hs, hn_pad[rows, tg])
        else:
            if only_slot is None:
                raise ValueError("alloc_rows needs only_slot (one pending slot per agent)")
            graph_of = torch.div(alloc_rows, n, rounding_mode="floor")
            part = self._alloc_logits(
                ha.reshape(g * n, -1)[alloc_rows],
                hs.reshape(g * n, 1, -1)[alloc_rows],
                hn_pad[graph_of[:, None], tg.reshape(g * n, -1)[alloc_rows]],
            )  # (R, 1, C)
            alloc = part.new_zeros(g * n, 1, part.shape[-1]).index_put((alloc_rows,), part)
            alloc = alloc.reshape(g, n, 1, -1)
        # mean node embedding per graph (real rows only): a cheap global context for the critic
        count = batch.count["node"]
        real = (torch.arange(hn.shape[1]) < count[:, None]).to(hn.dtype)[:, :, None]
        pool = (hn * real).sum(1) / count.clamp_min(1).to(hn.dtype)[:, None]
        v = self.critic(torch.cat([ha, pool[:, None, :].expand(-1, n, -1)], dim=-1))
        return ptr, alloc, v.squeeze(-1)

    def _alloc_logits(self, ha: torch.Tensor, hs: torch.Tensor, ht: torch.Tensor) -> torch.Tensor:
        """Allocation logits (..., P, K1 L) from the agent's, tasks' and targets' embeddings.

        Args:
            ha: (..., H) the agent's node.
            hs: (..., P, H) the pending tasks (or the chosen one, P = 1).
            ht: (..., K1, H) the placement targets.
        """
        # the head's first layer on [h_agent, h_task, h_target] is the sum of three blocks:
        # project each embedding once and broadcast, instead of the (..., P, K1, 3H) concat
        first = self.alloc[0]
        wa, ws, wt = first.weight.split(self.hidden, dim=1)
        pre = (
            (ha @ wa.T + first.bias)[..., None, None, :]
            + (hs @ ws.T)[..., :, None, :]
            + (ht @ wt.T)[..., None, :, :]
        )
        out = self.alloc[1:](pre)  # (..., P, K1, L)
        return out.reshape(*out.shape[:-2], out.shape[-2] * out.shape[-1])  # R may be 0


def chosen_slot(alloc: torch.Tensor, choice: torch.Tensor) -> torch.Tensor:
    """(G, N, C) allocation log-probabilities of each agent's chosen slot from (G, N, P, C)."""
    slot = (choice - 1).clamp_min(0)
    return alloc.gather(2, slot[:, :, None, None].expand(-1, -1, 1, alloc.shape[-1])).squeeze(2)


def chosen_slot_np(mask: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """(G, N, C) rows of each agent's chosen pending slot from (G, N, P, C) (numpy)."""
    slot = np.maximum(choice - 1, 0)[:, :, None, None]
    return np.take_along_axis(mask, slot, axis=2)[:, :, 0]


def two_phase_logp(
    ptr: torch.Tensor,
    chosen: torch.Tensor,
    choice: torch.Tensor,
    alloc_idx: torch.Tensor,
    keep: torch.Tensor,
) -> torch.Tensor:
    """The learner's log-probability of each agent's decision.

    Args:
        ptr: (G, N, 1+P) pointer log-probabilities (index 0: defer).
        chosen: (G, N, C) allocation log-probabilities of the chosen pending slot.
        choice: (G, N) pointer choices.
        alloc_idx: (G, N) allocation choices (target x level), ignored where not kept.
        keep: (G, N) 1 where the allocation counts (the agent placed and did not lose a
            conflict), else 0.

    Returns:
        (G, N) ``log p(choice) + keep * log p(alloc | choice)``.
    """
    lp_ptr = ptr.gather(-1, choice[..., None]).squeeze(-1)
    lp_alloc = chosen.gather(-1, alloc_idx[..., None]).squeeze(-1)
    # where(keep) rather than keep * lp: no gradient flows to a loser's allocation
    return lp_ptr + torch.where(keep > 0, lp_alloc, torch.zeros_like(lp_alloc))


def _masks(
    spec: EnvSpec, mask: np.ndarray, work_conserving: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Split (G, N, A) action masks into pointer (G, N, 1+P) and allocation (G, N, P, K1 L).

    Deferring is always allowed, or with ``work_conserving`` only where no task of the
    agent's window fits anywhere.
    """
    g, n, _ = mask.shape
    alloc = mask[..., 1:].reshape(g, n, spec.pending_slots, spec.num_targets * spec.num_levels)
    ptr = np.concatenate([mask[..., :1], alloc.any(-1)], axis=-1)
    ptr[..., 0] = ~ptr[..., 1:].any(-1) if work_conserving else True
    return ptr, alloc


# ---------------------------------------------------------------------------- trainer
class TapFingerTrainer:
    """PPO for TapFinger's two-phase actor behind the runner's trainer interface.

    Args:
        cfg: hyperparameters (:class:`edgesched.experiment.schema.AlgoConfig`; uses
            ``gnn_hidden``, ``gnn_layers``, ``gnn_heads``, ``graph_attention``, ``pointer``
            and the PPO fields).
        spec: the scenario's static facts.
        seed: seeds initialization, action sampling and conflict draws.
    """

    needs_graph = True
    eval_sampled = True
    """Evaluate the sampled policy, not its most likely actions. On the 0-16 x 0-16 grid the
    single most likely allocation is not representative of the distribution PPO trained: a
    tapfinger-hetero6 actor whose sampled policy reaches a mean JCT of 12.5 and 13.5 slots on
    two held-out seeds scores 38.2 and 34.9 greedily. Draws are seeded by the evaluation
    episode's workload seed (:meth:`seed_sampling`), so records reproduce exactly. On the edge
    boards the greedy form is not worse everywhere (better on edge100 and edge50-highload;
    ``benchmarks/eval_mode.py``, docs/algorithms.md): one mode for every board, fixed before
    those measurements."""

    def __init__(self, cfg: Any, spec: EnvSpec, seed: int) -> None:
        self.cfg = cfg
        self.spec = spec
        torch.manual_seed(seed)
        layers = int(cfg.gnn_layers) if cfg.graph_attention else 0
        # a stored config from before the key had unbounded pointer logits
        clip = pointer_clip_for(getattr(cfg, "pointer_clip", 0.0), spec.config, "algo.pointer_clip")
        self.actor = TapFingerNet(spec, int(cfg.gnn_hidden), layers, int(cfg.gnn_heads), clip)
        self.pointer = bool(cfg.pointer)
        self.team_reward = team_reward_for(
            getattr(cfg, "team_reward", False), spec.config, "algo.team_reward"
        )
        self.work_conserving = bool(getattr(cfg, "work_conserving", False))
        # a stored config from before the key ran the sampled rule
        self.conflict_winner = str(getattr(cfg, "conflict_winner", "sampled"))
        self.opt = torch.optim.Adam(self.actor.parameters(), lr=float(cfg.lr), eps=1e-5)
        self.value_rms = RunningMeanStd()
        self.gen = torch.Generator().manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.updates = 0

    def seed_sampling(self, seed: int) -> None:
        """Restart the action and conflict draws from ``seed`` (evaluation episodes)."""
        self.gen.manual_seed(seed)
        self.rng = np.random.default_rng(seed)

    # ------------------------------------------------------------------ acting
    def _dist(
        self,
        graphs: list[dict[str, Any]] | PaddedGraphs,
        mask: np.ndarray,
        choice: torch.Tensor | None = None,
        keep: torch.Tensor | None = None,
    ):
        """Masked log-probabilities of pointer, allocation and the values.

        Pointer (G, N, 1+P); allocation (G, N, P, C), or of the chosen slot only (G, N, C)
        when ``choice`` is given; values (G, N). ``graphs`` may come padded already (the
        PPO update pads its rollout once and selects minibatches from it). With ``keep``
        ((G, N), with ``choice``) the allocation is computed only where ``keep > 0``, the
        only agents whose allocation enters the PPO loss (:func:`two_phase_logp`); elsewhere
        it is a uniform placeholder over the mask, constant and without gradient.
        """
        batch = graphs if isinstance(graphs, PaddedGraphs) else pad_graphs(graphs)
        only = None if choice is None else (choice - 1).clamp_min(0)
        rows = None if keep is None else torch.nonzero(keep.reshape(-1) > 0).squeeze(-1)
        ptr, alloc, v = self.actor(batch, only, rows)
        pmask, amask = _masks(self.spec, mask, self.work_conserving)
        if only is not None:
            amask = chosen_slot_np(amask, choice.numpy())[:, :, None]
        ptr = self._pointer_logp(ptr, pmask)
        alloc = torch.log_softmax(masked_logits(alloc, torch.from_numpy(amask)), dim=-1)
        if only is not None:
            alloc = alloc.squeeze(2)
        return ptr, alloc, v

    def _dist_minibatch(
        self,
        graphs: PaddedGraphs,
        mask: np.ndarray,
        choice: torch.Tensor,
        idx: np.ndarray,
        keep: torch.Tensor | None = None,
    ) -> tuple[np.ndarray, torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`_dist` of a PPO minibatch of the padded rollout, on groups of similar sizes.

        Graphs of similar sizes are padded together where that saves enough work
        (:func:`~edgesched.algos.graph.in_size_groups`); each graph's outputs do not depend
        on the padding, so the minibatch's loss is the same up to float summation order.

        Returns:
            ``(order, ptr, chosen, values)``: the minibatch's graph indices in the order of
            the outputs (a permutation of ``idx``), and :meth:`_dist`'s outputs for them.
        """
        order, (ptr, chosen, v) = in_size_groups(
            lambda p: self._dist(
                graphs.select(p), mask[p], choice[p], None if keep is None else keep[p]
            ),
            graphs.count,
            idx,
        )
        return order, ptr, chosen, v

    def _pointer_logp(self, logits: torch.Tensor, pmask: np.ndarray) -> torch.Tensor:
        """(G, N, 1+P) masked pointer log-probabilities (uniform in the no-pointer ablation)."""
        if not self.pointer:  # ablation: uniform over the feasible choices
            logits = torch.zeros_like(logits)
        return torch.log_softmax(masked_logits(logits, torch.from_numpy(pmask)), dim=-1)

    def _draw(self, logp: torch.Tensor, greedy: bool) -> torch.Tensor:
        """(G, N) most likely or sampled indices of (G, N, C) log-probabilities."""
        if greedy:
            return logp.argmax(-1)
        g, n, c = logp.shape
        return torch.multinomial(probs_of(logp).reshape(-1, c), 1, generator=self.gen).reshape(g, n)

    @torch.no_grad()
    def propose(
        self,
        graphs: list[dict[str, Any]],
        mask: np.ndarray,
        greedy: bool = False,
        with_probs: bool = False,
    ) -> dict[str, np.ndarray]:
        """Sample (or take the most likely) two-phase choices and resolve task conflicts.

        Args:
            graphs: one graph view per environment copy.
            mask: (G, N, A) action masks.
            greedy: most likely choices and winners (evaluation).
            with_probs: also return every pending slot's allocation probabilities
                (``alloc_probs``, (G, N, P, C): a shield's preferences over flat actions).

        Returns:
            ``actions`` (G, N) to execute, ``choice`` (pointer index, 0 = defer), ``alloc``
            (target x level index), ``keep`` (allocation term counts), ``logp`` (the
            learner's log-probability), ``value`` (normalized), ``conflicts`` (G,), ``ptr``
            (G, N, 1+P) pointer probabilities, and ``alloc_probs`` if ``with_probs``.
        """
        ptr_logits, alloc_logits, v = self.actor(pad_graphs(graphs))
        pmask, amask = _masks(self.spec, mask, self.work_conserving)
        ptr = self._pointer_logp(ptr_logits, pmask)
        choice = self._draw(ptr, greedy)
        # Normalize only the chosen task's allocation row: the others are never sampled, and
        # over tapfinger-hetero6's 10 x 288 grid the full masked softmax (whose masked
        # entries' exp underflows, a slow path) was most of a rollout step. log_softmax
        # normalizes each row on its own, so the row is the same to the bit.
        a_all = torch.log_softmax(
            masked_logits(
                chosen_slot(alloc_logits, choice),
                torch.from_numpy(chosen_slot_np(amask, choice.numpy())),
            ),
            dim=-1,
        )
        aidx = self._draw(a_all, greedy)
        lp_ptr = ptr.gather(-1, choice[..., None]).squeeze(-1)
        choice_np, aidx_np = choice.numpy(), aidx.numpy()
        placing = choice_np > 0
        keep = placing.copy()
        conflicts = np.zeros(len(graphs), dtype=np.int64)
        l1 = self.spec.num_levels
        for i, graph in enumerate(graphs):
            agents_i = np.arange(len(choice_np[i]))
            slot_i = np.maximum(choice_np[i] - 1, 0)
            # this graph's own rows (the batch offsets do not matter within one graph)
            task = np.where(placing[i], graph["ids"]["slots"][agents_i, slot_i], -1)
            chosen = task[task >= 0]
            if len(np.unique(chosen)) == len(chosen):
                continue  # no two agents chose the same task
            target = graph["ids"]["targets"][agents_i, aidx_np[i] // l1]
            fit = np.full(len(task), -np.inf)
            ok = task >= 0
            fit[ok] = resource_fit(graph, target[ok], task[ok])
            keep[i], conflicts[i] = resolve_conflicts(
                task,
                lp_ptr[i].exp().numpy(),
                fit,
                None if greedy else self.rng,
                self.conflict_winner,
            )
        actions = np.where(keep, 1 + (choice_np - 1) * self.spec.num_targets * l1 + aidx_np, 0)
        logp = two_phase_logp(ptr, a_all, choice, aidx, torch.from_numpy(keep).float())
        out = {
            "actions": actions.astype(np.int64),
            "choice": choice_np,
            "alloc": aidx_np,
            "keep": keep,
            "logp": logp.numpy(),
            "value": v.numpy(),
            "conflicts": conflicts,
            "ptr": probs_of(ptr).numpy(),
        }
        if with_probs:
            alloc = torch.log_softmax(masked_logits(alloc_logits, torch.from_numpy(amask)), -1)
            out["alloc_probs"] = probs_of(alloc).numpy()
        return out

    def act(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        greedy: bool = False,
        with_probs: bool = False,
        graphs: list[dict[str, Any]] | None = None,
    ) -> tuple[np.ndarray, ...]:
        """Policy-interface adapter: actions (N,) of one environment from its graph view.

        Args:
            obs: (N, D) observations (unused: the actor reads the graph).
            mask: (N, A) action mask.
            greedy: most likely actions.
            with_probs: also return (N, A) probabilities of the flat actions (pointer x
                allocation), for shields.
            graphs: ``[sim.graph()]`` of the environment.

        Raises:
            ValueError: no graph given.
        """
        if not graphs:
            raise ValueError("tapfinger reads the graph view: pass graphs=[sim.graph()]")
        out = self.propose(
            [visible_pending(g) for g in graphs], mask[None], greedy=greedy, with_probs=with_probs
        )
        res: tuple[np.ndarray, ...] = (out["actions"][0], out["logp"][0])
        if with_probs:
            ptr, alloc = out["ptr"][0], out["alloc_probs"][0]
            flat = np.concatenate([ptr[:, :1], (ptr[:, 1:, None] * alloc).reshape(len(ptr), -1)], 1)
            res += (flat,)
        return res

    # ------------------------------------------------------------------ rollout
    def collect(self, vec: VecSim, steps: int) -> dict[str, Any]:
        """Run the policy for ``steps`` decision rounds in every copy (time-major batch)."""
        e, n = vec.num_envs, self.spec.num_agents
        vec.capture_graphs = True
        graphs_b: list[list[dict[str, Any]]] = []
        mask_b = np.empty((steps, e, n, self.spec.num_actions), bool)
        choice_b = np.empty((steps, e, n), np.int64)
        alloc_b = np.empty((steps, e, n), np.int64)
        keep_b = np.empty((steps, e, n), bool)
        logp_b = np.empty((steps, e, n), np.float32)
        val_b = np.empty((steps, e, n), np.float32)
        rew_b = np.empty((steps, e, n), np.float32)
        done_b = np.empty((steps, e, 1), np.float32)
        episodes: list[dict[str, Any]] = []
        conflicts = collisions = 0.0
        gamma = float(self.cfg.gamma)
        graphs = [visible_pending(s.graph()) for s in vec.copies]
        mask = vec.mask
        for t in range(steps):
            out = self.propose(graphs, mask)
            res = vec.step(out["actions"])
            r = res["rewards"]
            if self.team_reward:
                r = team_mean(r)
            for i, fg in res["final_graph"].items():
                # time-limit truncation: bootstrap the value of the state it stopped in
                fm = res["final_mask"][i][None]
                r[i] += gamma * self._value([visible_pending(fg)], fm)[0]
            graphs_b.append(graphs)
            mask_b[t], choice_b[t], alloc_b[t], keep_b[t] = (
                mask,
                out["choice"],
                out["alloc"],
                out["keep"],
            )
            logp_b[t], rew_b[t] = out["logp"], r
            val_b[t] = out["value"] * self.value_rms.std + self.value_rms.mean
            done_b[t, :, 0] = res["terminated"] | res["truncated"]
            episodes += res["episodes"]
            conflicts += float(out["conflicts"].sum())
            collisions += float(res["collisions"].sum())
            graphs = [visible_pending(s.graph()) for s in vec.copies]
            mask = vec.mask
        last = self._value(graphs, mask)
        adv, ret = gae(rew_b, val_b, last, done_b, gamma, float(self.cfg.gae_lambda))
        per_step = 1.0 / (steps * e)
        return {
            "log": {
                "task_conflicts_per_step": conflicts * per_step,
                "collisions_executed_per_step": collisions * per_step,
            },
            "graphs": graphs_b,
            "mask": mask_b,
            "choice": choice_b,
            "alloc": alloc_b,
            "keep": keep_b,
            "logp": logp_b,
            "adv": adv.astype(np.float32),
            "ret": ret.astype(np.float32),
            "rewards": rew_b,
            "episodes": episodes,
            "collisions": collisions,
        }

    @torch.no_grad()
    def _value(self, graphs: list[dict[str, Any]], mask: np.ndarray) -> np.ndarray:
        v = self.actor(pad_graphs(graphs))[2].numpy()
        return v * self.value_rms.std + self.value_rms.mean

    # ------------------------------------------------------------------ update
    def update(self, batch: dict[str, Any], progress: float) -> dict[str, float]:
        """One PPO update on a rollout (minibatches of whole graphs, all agents).

        Raises:
            TrainingDivergedError: a loss became NaN or infinite.
        """
        cfg = self.cfg
        t, e, n = batch["choice"].shape
        total = t * e
        # pad the whole rollout once; minibatches select (and trim) rows of it
        graphs = pad_graphs([g for step in batch["graphs"] for g in step])
        mask = batch["mask"].reshape(total, n, -1)
        choice = torch.from_numpy(batch["choice"].reshape(total, n))
        alloc = torch.from_numpy(batch["alloc"].reshape(total, n))
        keep = torch.from_numpy(batch["keep"].reshape(total, n)).float()
        old_logp = torch.from_numpy(batch["logp"].reshape(total, n))
        adv = torch.from_numpy(batch["adv"].reshape(total, n))
        ret = batch["ret"].reshape(total, n)
        if cfg.value_norm:
            self.value_rms.update(ret)
            ret = (ret - self.value_rms.mean) / self.value_rms.std
        ret_t = torch.from_numpy(ret.astype(np.float32))
        clip = float(cfg.clip)
        params = list(self.actor.parameters())
        loop = PPOEpochs(cfg, total, self.gen, progress, self.opt, params, self.updates)
        for mb_idx in loop:
            idx, ptr, chosen, v = self._dist_minibatch(graphs, mask, choice, mb_idx.numpy(), keep)
            logp = two_phase_logp(ptr, chosen, choice[idx], alloc[idx], keep[idx])
            ent_ptr = -(probs_of(ptr) * ptr.clamp_min(-1e4)).sum(-1)
            ent_alloc = -(probs_of(chosen) * chosen.clamp_min(-1e4)).sum(-1)
            entropy = (ent_ptr + keep[idx] * ent_alloc).mean()
            pg, ratio = clipped_surrogate(logp, old_logp[idx], adv[idx], clip)
            loop.step(pg, 0.5 * ((v - ret_t[idx]) ** 2).mean(), entropy, ratio)
        self.updates += 1
        return loop.result()

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue training bit-for-bit."""
        return {
            "actor": self.actor.state_dict(),
            "opt": self.opt.state_dict(),
            "value_rms": (self.value_rms.mean, self.value_rms.var, self.value_rms.count),
            "gen": self.gen.get_state(),
            "rng": self.rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "updates": self.updates,
        }

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.actor.load_state_dict(sd["actor"])
        self.opt.load_state_dict(sd["opt"])
        self.value_rms = RunningMeanStd(*sd["value_rms"])
        self.gen.set_state(sd["gen"])
        self.rng.bit_generator.state = sd["rng"]
        torch.set_rng_state(sd["torch_rng"])
        self.updates = int(sd["updates"])
