"""The simulator's heterogeneous graph view as torch-geometric ``HeteroData``, and a backbone.

:meth:`edgesched.envs.core.EdgeClusterSim.graph` returns numpy arrays: node types ``node``,
``pending`` and ``running``, five edge types, and index maps of each agent's pending slots and
placement targets. :func:`to_heterodata` converts one graph; :func:`batch_graphs` merges the
graphs of many environment copies (or many rollout steps) into one ``HeteroData`` whose node
indices are offset per graph, plus the offsets, so per-agent heads can gather their rows.

Why not ``torch_geometric.data.Batch.from_data_list``: it does the same merge, but its
per-object bookkeeping costs more than the whole forward pass for the thousands of tiny graphs
a PPO update batches (6 nodes, a few jobs); one numpy concatenation per type is enough here.
:func:`to_heterodata` of a single graph and a batch of one agree exactly (tested).

The backbone is PyG's ``HGTConv`` (Hu et al., WWW'20): attention per relation type with
type-specific projections, on every edge type of the view. ``HANConv`` would need hand-picked
metapaths (node-pending-node, node-running-node), ``HGTConv`` learns over the relations
directly, which is what TapFinger's heterogeneous graph attention does.

**Dense computation.** The backbone keeps PyG's ``HGTConv`` modules as its parameters (so
checkpoints keep their keys and initialization its random draws) but computes their layer
itself, on :class:`PaddedGraphs`: per-row projections on the packed rows of all graphs, and
attention on each graph's rows padded to the batch's largest count per type, graphs stacked
along a leading axis, edges as (G, dst, src) score biases, the per-relation attention as one
masked softmax over all of a destination type's sources.
The graphs are small (``tapfinger-hetero6``: 6 nodes, up to ~40 pending and ~30 running jobs),
so a few batched matrix products replace PyG's per-edge gathers and scatters, whose backward
dominated the PPO update: ``benchmarks/tapfinger_update.py`` measures both on recorded
graphs. The output equals ``HGTConv.forward`` on the same graph within float rounding
(``tests/test_tapfinger.py`` keeps the sparse computation as the reference). On the edge
scenarios a graph's pending jobs range from a few to over a hundred, and one long queue pads
every graph of a batch to its length: the PPO update pads a minibatch in groups of similar
sizes where that saves enough of the work (:func:`size_buckets`). And where every row of a
destination type has at most one source (an edge scenario's pending job hears only the node
that holds it), its softmax is exactly 1 and the row takes that source's value directly
(:meth:`PaddedGraphs.single_source`; the same bits as the padded computation, tested).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

NODE_TYPES = ("node", "pending", "running")
EDGE_TYPES = (
    ("node", "link", "node"),
    ("pending", "queued_at", "node"),
    ("node", "rev_queued_at", "pending"),
    ("running", "runs_on", "node"),
    ("node", "hosts", "running"),
)
METADATA = (list(NODE_TYPES), list(EDGE_TYPES))
# the edge types into each node type, as (index in EDGE_TYPES, source type): the sources a
# destination's attention softmax runs over, in this order
INCOMING = {
    dst: [(e, et[0]) for e, et in enumerate(EDGE_TYPES) if et[2] == dst] for dst in NODE_TYPES
}


def to_heterodata(graph: dict[str, Any]):
    """One simulator graph as a ``HeteroData`` (features float32, edge indices int64)."""
    return batch_graphs([graph])[0]


def batch_graphs(graphs: list[dict[str, Any]]):
    """Merge graphs into one ``HeteroData``.

    Args:
        graphs: outputs of ``EdgeClusterSim.graph()``.

    Returns:
        ``(data, offsets)``: the merged graph and, per node type, a (G+1,) array of row
        offsets (graph ``g``'s rows of type ``t`` are ``offsets[t][g]:offsets[t][g+1]``).
        ``data[t].batch`` holds each row's graph index.
    """
    from torch_geometric.data import HeteroData

    data = HeteroData()
    offsets: dict[str, np.ndarray] = {}
    for t in NODE_TYPES:
        feats = [g["nodes"][t] for g in graphs]
        counts = np.array([len(f) for f in feats], dtype=np.int64)
        offsets[t] = np.concatenate([[0], np.cumsum(counts)])
        data[t].x = torch.from_numpy(np.concatenate(feats).astype(np.float32, copy=False))
        data[t].batch = torch.from_numpy(np.repeat(np.arange(len(graphs)), counts))
    for src, rel, dst in EDGE_TYPES:
        parts = [
            g["edges"][(src, rel, dst)]
            + np.array([[offsets[src][i]], [offsets[dst][i]]], dtype=np.int64)
            for i, g in enumerate(graphs)
        ]
        ei = np.concatenate(parts, axis=1) if parts else np.zeros((2, 0), np.int64)
        data[src, rel, dst].edge_index = torch.from_numpy(ei.astype(np.int64, copy=False))
    return data, offsets


def visible_pending(graph: dict[str, Any]) -> dict[str, Any]:
    """The graph restricted to the pending tasks some agent can select this round.

    The simulator's view holds every queued job; only those in an agent's ``pending_slots``
    window can be chosen, and the backlog behind the windows already shows in each node's
    queue-length feature. Dropping it bounds the graph by ``N x P`` pending rows instead of
    the (unbounded) backlog, which keeps the PPO update's cost flat when queues build up.

    Args:
        graph: an output of ``EdgeClusterSim.graph()``.

    Returns:
        The same structure with the ``pending`` rows, their ``queued_at`` edges (both
        directions), ``ids["pending"]`` and ``ids["slots"]`` renumbered; other entries are
        shared with ``graph`` (not copied). ``graph`` itself when nothing is hidden.
    """
    slots = graph["ids"]["slots"]
    keep = np.unique(slots[slots >= 0])
    n_pend = len(graph["nodes"]["pending"])
    if len(keep) == n_pend:
        return graph
    remap = np.full(n_pend + 1, -1, dtype=np.int64)  # the extra row maps slot -1 to -1
    remap[keep] = np.arange(len(keep))
    qa = graph["edges"][("pending", "queued_at", "node")]
    src = remap[qa[0]]
    on = src >= 0
    queued_at = np.stack([src[on], qa[1][on]])
    out = {k: dict(v) for k, v in graph.items()}
    out["nodes"]["pending"] = graph["nodes"]["pending"][keep]
    out["ids"]["pending"] = graph["ids"]["pending"][keep]
    out["ids"]["slots"] = remap[slots]
    out["edges"][("pending", "queued_at", "node")] = queued_at
    out["edges"][("node", "rev_queued_at", "pending")] = queued_at[::-1].copy()
    return out


def agent_index(graphs: list[dict[str, Any]], offsets: dict[str, np.ndarray]):
    """Rows of the merged graph for every agent, its pending slots and its targets.

    Returns:
        ``(agents, slots, targets)``: (G, N) rows of the ``node`` type; (G, N, P) rows of the
        ``pending`` type (-1 for empty slots); (G, N, K+1) rows of the ``node`` type (-1 for
        missing targets).
    """
    agents = np.stack([offsets["node"][i] + g["ids"]["node"] for i, g in enumerate(graphs)])
    slots = np.stack(
        [
            np.where(g["ids"]["slots"] >= 0, g["ids"]["slots"] + offsets["pending"][i], -1)
            for i, g in enumerate(graphs)
        ]
    )
    targets = np.stack(
        [
            np.where(g["ids"]["targets"] >= 0, g["ids"]["targets"] + offsets["node"][i], -1)
            for i, g in enumerate(graphs)
        ]
    )
    return agents, slots, targets


@dataclass
class PaddedGraphs:
    """A batch of graph views for the dense backbone: rows packed, attention padded.

    Per-row work (encoders, projections, ``out_lin``) runs on the packed rows of all graphs,
    as in a merged ``HeteroData``; attention runs on each graph's rows padded to the batch's
    largest count per type (``size``) and stacked along a leading graph axis.

    Attributes:
        x: per node type, (R_t, F_t) features of every graph's rows, graph after graph.
        count: per node type, (G,) rows each graph has.
        size: per node type, the padded row count M_t (at least 1: no empty dimension).
        pos: per node type, (R_t,) each row's index in the flattened (G * M_t) padded layout.
        bias: per destination type, (G, M_dst, S) attention-score bias from every source row:
            ``log`` of the edge multiplicity (PyG's softmax runs over an edge list, so a
            repeated edge counts twice), -1e30 where there is no edge. The source axis
            concatenates the rows of the types in ``INCOMING[dst]``, in order.
        has_in: per destination type, (G, M_dst, 1): 1.0 where the row has incoming edges.
        agents: (G, N) ``node`` rows (of its graph) of the agents.
        slots: (G, N, P) ``pending`` rows in each agent's slots, -1 for empty slots.
        targets: (G, N, K+1) ``node`` rows of each agent's placement targets, -1 for missing.
    """

    x: dict[str, torch.Tensor]
    count: dict[str, torch.Tensor]
    size: dict[str, int]
    pos: dict[str, torch.Tensor]
    bias: dict[str, torch.Tensor]
    has_in: dict[str, torch.Tensor]
    agents: torch.Tensor
    slots: torch.Tensor
    targets: torch.Tensor
    # single_source's cache; not an init field, so dataclasses.replace starts a fresh one
    _single: dict[str, torch.Tensor | None] = field(default_factory=dict, init=False, repr=False)

    def __len__(self) -> int:
        return len(self.agents)

    def single_source(self, dst: str) -> torch.Tensor | None:
        """Where no ``dst`` row has edges from two or more source rows: each row's source.

        On the edge scenarios a pending job's one incoming edge is from the node that holds
        it, yet its padded attention spans every node (on an edge100 rollout of an untrained
        policy, 0.2% of those scores were edges). A softmax over one score is exactly 1, so
        such a row's attention output is that source's value row, bit for bit
        (:func:`_hgt_dense` gathers it instead).

        Returns:
            (G, M_dst) source column (of :attr:`bias`'s source axis) of each row, 0 for rows
            without incoming edges (:attr:`has_in` zeroes them); ``None`` when some row has
            two or more sources. Computed on first use and kept.
        """
        if dst not in self._single:
            real = self.bias[dst] > -1e29  # -1e30 marks a non-edge, log(multiplicity) >= 0
            one = real.shape[-1] == 0 or int(real.sum(-1).max()) <= 1
            self._single[dst] = real.to(torch.uint8).argmax(-1) if one else None
        return self._single[dst]

    def select(self, idx: np.ndarray | torch.Tensor) -> PaddedGraphs:
        """The graphs ``idx``, with padding trimmed to their own largest counts.

        A PPO minibatch pads the rollout once and selects from it: no per-graph work.
        """
        idx = torch.as_tensor(idx)
        count = {t: c[idx] for t, c in self.count.items()}
        size = {t: max(int(c.max()), 1) if len(c) else 1 for t, c in count.items()}
        x = {}
        for t, c in count.items():
            # the selected graphs' packed rows, in the order of idx
            start = torch.cumsum(self.count[t], 0) - self.count[t]
            new_start = torch.cumsum(c, 0) - c
            rows = torch.arange(int(c.sum())) + torch.repeat_interleave(start[idx] - new_start, c)
            x[t] = self.x[t][rows]
        bias = {}
        for dst, inc in INCOMING.items():
            full = self.bias[dst][idx, : size[dst]]
            cols, start = [], 0
            for _, src in inc:
                cols.append(torch.arange(start, start + size[src]))
                start += self.size[src]
            bias[dst] = full[:, :, torch.cat(cols)]
        return PaddedGraphs(
            x=x,
            count=count,
            size=size,
            pos=_positions(count, size),
            bias=bias,
            has_in={t: h[idx, : size[t]] for t, h in self.has_in.items()},
            agents=self.agents[idx],
            slots=self.slots[idx],
            targets=self.targets[idx],
        )


def padded_cost(count: dict[str, torch.Tensor], idx: np.ndarray) -> int:
    """The dense backbone's attention work on the graphs ``idx``, padded together.

    Every graph of a padded batch is as large as the batch's largest of each type, and the
    attention of a layer is dominated by its node rows attending over all nodes, pending
    and running jobs, and by the job rows attending over the nodes:
    ``len(idx) x M_node x (M_node + 2 M_pending + 2 M_running)`` in units of score entries.
    Where every job row of a type has one source (:meth:`PaddedGraphs.single_source`, the
    edge scenarios' pending jobs) that type's rows no longer attend, so the model overstates
    the work there; :data:`MIN_SAVED_WORK` was measured before that shortcut and is kept.

    Args:
        count: :attr:`PaddedGraphs.count`.
        idx: the graphs.
    """
    m = {t: max(int(c[idx].max()), 1) for t, c in count.items()}
    return len(idx) * m["node"] * (m["node"] + 2 * m["pending"] + 2 * m["running"])


MIN_SAVED_WORK = 200_000
"""A minibatch is padded in two halves when that saves at least this much padded attention
work (:func:`padded_cost` units, score entries): each group is another forward and backward
pass, whose fixed cost only a large enough saving repays. Measured with 128-graph PPO
minibatches on one core, forward and backward (ms per minibatch, one graph group against
two): edge50 saved 477k to 677k units and 56 to 69 ms (of 369 to 439); tapfinger-hetero6
saved 11k to 19k units and edge10 21k, within a few ms either way, and more groups cost
them up to 30 ms. The threshold between the two is assumed."""


def size_buckets(
    count: dict[str, torch.Tensor], idx: np.ndarray, min_size: int = 32
) -> list[np.ndarray]:
    """Split a minibatch into groups of similar graph sizes when padding wastes enough.

    The graphs are ordered by their job count and halved, recursively, while the halves'
    padded work (:func:`padded_cost`) is at least :data:`MIN_SAVED_WORK` below the whole's
    and each half keeps ``min_size`` graphs. A PPO loss that averages over the minibatch is
    the same over its groups' outputs concatenated (up to float summation order), at less
    padded work when sizes are spread (a few long queues pad every graph to their length).

    Args:
        count: :attr:`PaddedGraphs.count` of the rollout.
        idx: the minibatch's graph indices.
        min_size: smallest group.

    Returns:
        Index arrays whose concatenation is a permutation of ``idx``; ``[idx]`` unchanged
        when no split pays.
    """
    if len(idx) < 2 * min_size:
        return [idx]
    jobs = (count["pending"] + count["running"]).numpy()[idx]
    parts = _halves(count, idx[np.argsort(jobs, kind="stable")], min_size)
    return [idx] if len(parts) == 1 else parts


def _halves(count: dict[str, torch.Tensor], order: np.ndarray, min_size: int) -> list:
    """:func:`size_buckets` on graphs already ordered by size (halves stay ordered)."""
    if len(order) < 2 * min_size:
        return [order]
    lo, hi = order[: len(order) // 2], order[len(order) // 2 :]
    saved = padded_cost(count, order) - padded_cost(count, lo) - padded_cost(count, hi)
    if saved < MIN_SAVED_WORK:
        return [order]
    return _halves(count, lo, min_size) + _halves(count, hi, min_size)


def in_size_groups(
    fn: Any, count: dict[str, torch.Tensor], idx: np.ndarray
) -> tuple[np.ndarray, tuple[torch.Tensor, ...]]:
    """``fn`` on the :func:`size_buckets` groups of a minibatch, outputs concatenated.

    Args:
        fn: maps an index array of graphs to a tuple of tensors whose first axis is those
            graphs (a forward pass on ``PaddedGraphs.select(indices)``).
        count: :attr:`PaddedGraphs.count` of the rollout.
        idx: the minibatch's graph indices.

    Returns:
        ``(order, outputs)``: the graph indices in the order of the outputs' first axis (a
        permutation of ``idx``; ``idx`` itself with one group, where ``fn`` runs once on
        it and nothing is copied) and ``fn``'s outputs.
    """
    parts = size_buckets(count, idx)
    outs = [tuple(fn(p)) for p in parts]
    if len(outs) == 1:
        return idx, outs[0]
    return np.concatenate(parts), tuple(torch.cat(x) for x in zip(*outs, strict=True))


def _positions(count: dict[str, torch.Tensor], size: dict[str, int]) -> dict[str, torch.Tensor]:
    """:attr:`PaddedGraphs.pos` from the per-graph row counts and padded sizes."""
    pos = {}
    for t, c in count.items():
        gi = torch.repeat_interleave(torch.arange(len(c)), c)
        local = torch.arange(int(c.sum())) - torch.repeat_interleave(torch.cumsum(c, 0) - c, c)
        pos[t] = gi * size[t] + local
    return pos


def pad_graphs(graphs: list[dict[str, Any]]) -> PaddedGraphs:
    """Pack and pad graph views for the dense backbone.

    Args:
        graphs: outputs of ``EdgeClusterSim.graph()`` (or :func:`visible_pending` of them),
            all of one scenario (same feature widths and agent count).

    Returns:
        The batch; each type padded to the largest count among ``graphs``.
    """
    g = len(graphs)
    counts = {t: np.array([len(gr["nodes"][t]) for gr in graphs], np.int64) for t in NODE_TYPES}
    m = {t: max(int(c.max()), 1) for t, c in counts.items()}
    x = {
        t: torch.from_numpy(
            np.concatenate([gr["nodes"][t] for gr in graphs]).astype(np.float32, copy=False)
        )
        for t in NODE_TYPES
    }
    bias, has_in = {}, {}
    for dst, inc in INCOMING.items():
        width = sum(m[src] for _, src in inc)
        flat = []
        start = 0
        for e, src in inc:
            parts = [gr["edges"][EDGE_TYPES[e]] for gr in graphs]
            ne = np.array([p.shape[1] for p in parts], np.int64)
            ei = np.concatenate(parts, axis=1).astype(np.int64, copy=False)
            gi = np.repeat(np.arange(g), ne)
            flat.append((gi * m[dst] + ei[1]) * width + start + ei[0])
            start += m[src]
        cnt = np.bincount(np.concatenate(flat), minlength=g * m[dst] * width)
        cnt = cnt.reshape(g, m[dst], width).astype(np.float32)
        # exp(-1e30 - max) underflows to an exact 0: a non-edge takes no attention
        with np.errstate(divide="ignore"):
            bias[dst] = torch.from_numpy(np.where(cnt > 0, np.log(cnt), np.float32(-1e30)))
        has_in[dst] = torch.from_numpy((cnt.sum(-1, keepdims=True) > 0).astype(np.float32))
    count = {t: torch.from_numpy(c) for t, c in counts.items()}
    return PaddedGraphs(
        x=x,
        count=count,
        size=m,
        pos=_positions(count, m),
        bias=bias,
        has_in=has_in,
        agents=torch.from_numpy(np.stack([gr["ids"]["node"] for gr in graphs]).astype(np.int64)),
        slots=torch.from_numpy(np.stack([gr["ids"]["slots"] for gr in graphs]).astype(np.int64)),
        targets=torch.from_numpy(
            np.stack([gr["ids"]["targets"] for gr in graphs]).astype(np.int64)
        ),
    )


def _pad(rows: torch.Tensor, batch: PaddedGraphs, t: str) -> torch.Tensor:
    """(R_t, C) packed rows as (G, M_t, C), zeros in the padding."""
    padded = rows.new_zeros(len(batch) * batch.size[t], rows.shape[1])
    return padded.index_copy(0, batch.pos[t], rows).reshape(len(batch), batch.size[t], -1)


def _fused_projections(conv: nn.Module, dsts: tuple[str, ...]) -> dict[str, tuple]:
    """Per node type, the one projection of its rows that a layer needs.

    HGT projects a source row to a key (value), then by a per-head (d, d) relation matrix per
    edge type. Both are linear: fold them into one projection per (type, edge type), with the
    relation prior ``p_rel / sqrt(d)`` in the key's, so each type takes a single matmul of
    its rows (the relation matrices alone would cost as much as the projection).

    Returns:
        ``{type: (weight, bias, names)}``: the stacked (C F, F) weight, (C F,) bias and the
        name of each F-wide output block: ``"q"`` or ``(edge type index, "k" | "v")``.
    """
    heads, f = conv.heads, conv.out_channels
    d = f // heads
    n_et = len(conv.edge_types)
    blocks: dict[str, list[tuple[torch.Tensor, torch.Tensor, Any]]] = {t: [] for t in NODE_TYPES}
    for t in dsts:
        lin = conv.kqv_lin.lins[t]
        blocks[t].append((lin.weight[f : 2 * f], lin.bias[f : 2 * f], "q"))
    for dst in dsts:
        for e, src in INCOMING[dst]:
            lin = conv.kqv_lin.lins[src]
            scale = conv.p_rel["__".join(EDGE_TYPES[e])].reshape(heads, 1, 1) / math.sqrt(d)
            wk = torch.block_diag(*(conv.k_rel.weight[e::n_et] * scale))  # (F, F)
            wv = torch.block_diag(*conv.v_rel.weight[e::n_et])
            blocks[src].append((wk.T @ lin.weight[:f], lin.bias[:f] @ wk, (e, "k")))
            blocks[src].append((wv.T @ lin.weight[2 * f :], lin.bias[2 * f :] @ wv, (e, "v")))
    return {
        t: (torch.cat([b[0] for b in bl]), torch.cat([b[1] for b in bl]), [b[2] for b in bl])
        for t, bl in blocks.items()
        if bl
    }


def _hgt_dense(
    conv: nn.Module,
    fused: dict[str, tuple],
    h: dict[str, torch.Tensor],
    batch: PaddedGraphs,
    bias: dict[str, torch.Tensor],
    has_in: dict[str, torch.Tensor],
    dsts: tuple[str, ...] = NODE_TYPES,
) -> dict[str, torch.Tensor]:
    """``HGTConv.forward`` on padded graphs, from the conv's own parameters.

    Args:
        conv: a ``torch_geometric.nn.HGTConv`` over ``METADATA``.
        fused: :func:`_fused_projections` of ``conv`` for ``dsts``.
        h: per node type, (R_t, F) embeddings of the packed rows.
        batch: the graphs' layout.
        bias: per destination type, (G, 1, M_dst, S) (:attr:`PaddedGraphs.bias`).
        has_in: per destination type, (G, 1, M_dst, 1) (:attr:`PaddedGraphs.has_in`).
        dsts: the destination types to compute (the last layer skips outputs nobody reads).

    Returns:
        Per type of ``dsts``, (R_t, F) outputs (after ``out_lin`` and the gated skip).
    """
    heads, f = conv.heads, conv.out_channels
    d = f // heads
    proj: dict[Any, torch.Tensor] = {}
    for t, (w, b, names) in fused.items():
        # project the real rows only, then lay them out padded for the attention
        parts = _pad(torch.nn.functional.linear(h[t], w, b), batch, t).split(f, dim=-1)
        proj.update({(t, name): x for name, x in zip(names, parts, strict=True)})
    out = {}
    for dst in dsts:
        gsz, m_dst = len(batch), batch.size[dst]
        vs = [proj[src, (e, "v")] for e, src in INCOMING[dst]]
        one = batch.single_source(dst)
        if one is not None:
            # one source per row: its attention weight is exactly 1 (see single_source). The
            # fused projection still computes this type's unused query: dropping it would
            # change that matmul's shape, which may change the bits of the other projections
            v = torch.cat(vs, 1)  # (G, S, F)
            rows = (one + (torch.arange(gsz) * v.shape[1])[:, None]).reshape(-1)
            rows = rows.index_select(0, batch.pos[dst])
            keep = has_in[dst].reshape(gsz * m_dst, 1).index_select(0, batch.pos[dst])
            agg = v.reshape(-1, f).index_select(0, rows) * keep
        else:
            ks = [proj[src, (e, "k")] for e, src in INCOMING[dst]]
            kh = torch.cat(ks, 1).reshape(gsz, -1, heads, d).transpose(1, 2)  # (G, H, S, d)
            vh = torch.cat(vs, 1).reshape(gsz, -1, heads, d).transpose(1, 2)
            qh = proj[dst, "q"].reshape(gsz, m_dst, heads, d).transpose(1, 2)  # (G, H, M, d)
            att = torch.softmax(qh @ kh.transpose(-1, -2) + bias[dst], dim=-1)
            # a row without incoming edges aggregates nothing (PyG: zero), not a uniform mix
            agg = (att @ vh) * has_in[dst]
            agg = agg.transpose(1, 2).reshape(gsz * m_dst, f).index_select(0, batch.pos[dst])
        a = conv.out_lin.lins[dst](torch.nn.functional.gelu(agg))
        alpha = conv.skip[dst].sigmoid()
        out[dst] = alpha * a + (1 - alpha) * h[dst]
    return out


class HeteroBackbone(nn.Module):
    """Per-type input encoders, then ``layers`` HGTConv layers with residual connections.

    With ``layers=0`` there is no message passing: each node, pending and running job is
    embedded from its own features only (the "no graph attention" ablation: an MLP on
    stacked features).

    Args:
        in_dims: input feature width per node type.
        hidden: embedding width.
        layers: HGTConv layers.
        heads: attention heads per layer.
    """

    def __init__(self, in_dims: dict[str, int], hidden: int, layers: int, heads: int) -> None:
        super().__init__()
        from torch_geometric.nn import HGTConv

        self.enc = nn.ModuleDict(
            {t: nn.Sequential(nn.Linear(in_dims[t], hidden), nn.Tanh()) for t in NODE_TYPES}
        )
        # HGTConv holds the parameters (and draws their initialization); _hgt_dense computes
        self.convs = nn.ModuleList(
            [HGTConv(hidden, hidden, METADATA, heads=heads) for _ in range(layers)]
        )
        self._cache: dict[tuple, tuple] = {}

    def _fused(self, layer: int, dsts: tuple[str, ...]) -> dict[str, tuple]:
        """:func:`_fused_projections` of a layer; reused without autograd until a change.

        A rollout runs hundreds of no-grad forward passes on a few graphs between two
        optimizer steps: folding the weights each time would cost about as much as the
        pass. Parameters' version counters (bumped by every in-place update: optimizer
        steps, ``load_state_dict``) tell when the folded weights are stale.
        """
        conv = self.convs[layer]
        if torch.is_grad_enabled():
            return _fused_projections(conv, dsts)
        key = (layer, dsts)
        params = list(conv.parameters())
        version = tuple((p._version, p.data_ptr(), p.dtype) for p in params)
        hit = self._cache.get(key)
        if hit is None or hit[0] != version:
            hit = (version, _fused_projections(conv, dsts))
            self._cache[key] = hit
        return hit[1]

    def forward(
        self, batch: PaddedGraphs, need: tuple[str, ...] = NODE_TYPES
    ) -> dict[str, torch.Tensor]:
        """Embeddings of the types ``need``, (G, M_t, hidden), zeros in the padding.

        The last layer computes only the ``need`` types' outputs (the same numbers, less work).
        """
        h = {t: self.enc[t](batch.x[t]) for t in NODE_TYPES}
        # a head axis to broadcast over
        bias = {t: b[:, None] for t, b in batch.bias.items()}
        has_in = {t: x[:, None] for t, x in batch.has_in.items()}
        for i, conv in enumerate(self.convs):
            dsts = need if i == len(self.convs) - 1 else NODE_TYPES
            out = _hgt_dense(conv, self._fused(i, dsts), h, batch, bias, has_in, dsts)
            h = {t: h[t] + torch.tanh(out[t]) for t in dsts}
        return {t: _pad(h[t], batch, t) for t in need}
