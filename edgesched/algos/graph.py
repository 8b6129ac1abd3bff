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
"""

from __future__ import annotations

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
        self.convs = nn.ModuleList(
            [HGTConv(hidden, hidden, METADATA, heads=heads) for _ in range(layers)]
        )

    def forward(self, data) -> dict[str, torch.Tensor]:
        """Embeddings per node type, (rows, hidden)."""
        h = {t: self.enc[t](data[t].x) for t in NODE_TYPES}
        edges = {et: data[et].edge_index for et in EDGE_TYPES}
        for conv in self.convs:
            out = conv(h, edges)
            # a type that received no message this layer keeps its embedding
            h = {t: h[t] + torch.tanh(out[t]) if out.get(t) is not None else h[t] for t in h}
        return h
