"""The heterogeneous graph view of one copy's state (TapFinger's HAN input), as numpy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np


class GraphMixin:
    """:meth:`graph` of :class:`~edgesched.envs.core.EdgeClusterSim` (reads state only)."""

    def graph(self, b: int = 0) -> dict[str, Any]:
        """Heterogeneous graph of copy ``b``'s current state, with the copy's local ids.

        Returns:
            ``{"nodes": {type: features}, "edges": {(src, rel, dst): (2, E) index array},
            "edge_attr": {(src, rel, dst): (E, F)}, "ids": {type: ids}}`` with node types
            ``node`` (cluster nodes), ``pending`` (queued jobs) and ``running`` (running jobs).
            Edge types: ``(node, link, node)`` topology links both ways with (log bandwidth,
            latency); ``(pending, queued_at, node)`` each queued job to the agents that see it;
            ``(running, runs_on, node)`` one edge per worker with its allocation; and the
            reverse relations ``(node, rev_queued_at, pending)``, ``(node, hosts, running)``.
            ``ids`` also maps each agent's pending slots (``slots``, (N, P)) and placement
            targets (``targets``, (N, K+1)) to rows of the ``pending`` and ``node`` types.
        """
        c = self.cluster
        n, jc = self.agents_per_copy, self._job_capacity
        a0, j0 = b * n, b * jc
        ag = slice(a0, a0 + n)
        q_agent, q_jobs = self.queued_pairs()
        if self.copies > 1:
            mine = q_jobs // jc == b
            q_agent, q_jobs = q_agent[mine], q_jobs[mine]
            run_ids = self.running[self.running // jc == b]
        else:
            run_ids = self.running
        pend_ids, pend_idx = np.unique(q_jobs, return_inverse=True)
        nodes = self.w_node[run_ids]
        r_idx, w_idx = np.nonzero(nodes >= 0)
        link = np.concatenate([c.edges, c.edges[:, ::-1]], axis=0).T
        link_attr = np.tile(
            np.stack([np.log10(c.link_bw + 1.0), c.link_lat / 100.0], axis=1), (2, 1)
        ).astype(np.float32)
        run_feat = np.concatenate(
            [
                self._job_features(run_ids),
                self.quality[run_ids, None].astype(np.float32),
                (self.sync_time[run_ids, None] / 10.0).astype(np.float32),
            ],
            axis=1,
        )
        queued_at = np.stack([pend_idx, q_agent - a0])
        runs_on = np.stack([r_idx, nodes[r_idx, w_idx] - a0])
        head = self.head[ag]
        return {
            "nodes": {
                "node": self._node_feat[ag],
                "pending": self._job_features(pend_ids),
                "running": run_feat,
            },
            "ids": {
                "node": np.arange(n),
                "pending": pend_ids - j0,
                "running": run_ids - j0,
                # (N, P) each agent's pending slot -> row of the pending type (-1: empty)
                "slots": np.where(head >= 0, np.searchsorted(pend_ids, head), -1),
                # (N, K+1) each agent's placement targets -> row of the node type (-1: none)
                "targets": c.neighbors,
            },
            "edges": {
                ("node", "link", "node"): link,
                ("pending", "queued_at", "node"): queued_at,
                ("node", "rev_queued_at", "pending"): queued_at[::-1].copy(),
                ("running", "runs_on", "node"): runs_on,
                ("node", "hosts", "running"): runs_on[::-1].copy(),
            },
            "edge_attr": {
                ("node", "link", "node"): link_attr,
                ("running", "runs_on", "node"): (
                    self.w_alloc[run_ids[r_idx], w_idx] / self._cap_max
                ).astype(np.float32),
            },
        }
