"""Rendering of the cluster state: a text table and a load heatmap (numpy only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .core import EdgeClusterSim


def check_render_mode(render_mode: str | None, modes: Sequence[str]) -> str | None:
    """``render_mode`` if it is ``None`` or one of ``modes`` (a view's ``metadata``).

    Raises:
        ValueError: any other value, naming the parameter, the value and the choices.
    """
    if render_mode not in (None, *modes):
        raise ValueError(
            f"render_mode={render_mode!r} is not supported; choose one of {[None, *modes]}"
        )
    return render_mode


def render_sim(sim: EdgeClusterSim, render_mode: str | None) -> str | np.ndarray | None:
    """A view's ``render()``: the text table (``ansi``), the heatmap (``rgb_array``) or None."""
    if render_mode == "ansi":
        return render_ansi(sim)
    if render_mode == "rgb_array":
        return render_rgb(sim)
    return None


def render_ansi(sim: EdgeClusterSim, max_rows: int = 20) -> str:
    """Text summary: clock, job counts, and per-node load for the first ``max_rows`` nodes."""
    c = sim.job_counts()
    lines = [
        f"slot {sim.t}  step {sim.counters.steps}  jobs: arrived {c['arrived']} queued "
        f"{c['queued']} running {c['running']} done {c['done']}  collisions "
        f"{sim.counters.collisions_proposed}",
        f"{'node':>6} {'tier':>12} {'cpu':>11} {'gpu':>9} {'mem':>11} {'queue':>5}",
    ]
    tiers = sim.cluster.tier_names
    for i in range(min(sim.num_agents, max_rows)):
        u, cap = sim.used[i], sim.capacity[i]
        lines.append(
            f"{i:>6} {tiers[sim.cluster.tier[i]]:>12} {u[0]:>5.0f}/{cap[0]:<5.0f}"
            f"{u[1]:>4.0f}/{cap[1]:<4.0f}{u[2]:>5.0f}/{cap[2]:<5.0f} {sim.qlen[i]:>5}"
        )
    if sim.num_agents > max_rows:
        lines.append(f"... {sim.num_agents - max_rows} more nodes")
    return "\n".join(lines)


def render_rgb(sim: EdgeClusterSim, cell: int = 12) -> np.ndarray:
    """Heatmap image (H, W, 3) uint8: one cell per node, laid out in a square grid.

    Colour encodes GPU load (green = idle, yellow = full, red = overloaded); the cell's top
    band shows queue length (darker = longer).
    """
    n = sim.num_agents
    side = int(np.ceil(np.sqrt(n)))
    cap = sim.capacity[:, 1]
    load = np.divide(sim.used[:, 1], cap, out=np.zeros(n), where=cap > 0)
    r = np.clip(load, 0, 1)
    g = np.clip(2.0 - load, 0, 1)
    colour = np.zeros((side * side, 3))
    colour[:n] = np.stack([r, g, np.zeros(n)], axis=1)
    q = np.zeros(side * side)
    q[:n] = np.minimum(sim.qlen / 10.0, 1.0)
    img = np.repeat(np.repeat(colour.reshape(side, side, 3), cell, 0), cell, 1)
    band = np.repeat(np.repeat((1.0 - q).reshape(side, side), cell, 0), cell, 1)
    top = (np.arange(side * cell) % cell) < max(cell // 4, 1)
    img[top] *= band[top][..., None]
    return (img * 255).astype(np.uint8)
