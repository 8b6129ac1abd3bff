"""Migrations of simulator state pickled by earlier versions of edgesched.

A resumed training run unpickles its simulators from the checkpoint. Each entry below
rebuilds, from what an earlier version stored, a state array renamed, added or replaced
since, so that the run continues exactly as the uninterrupted one would have; a state that
cannot be rebuilt exactly is refused with a message.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .layout import _NO_ARRIVAL
from .observe import SMALL_MASK_CELLS


def upgrade_state(state: dict[str, Any]) -> None:
    """Bring a pickled ``EdgeClusterSim.__dict__`` up to this version, in place.

    Raises:
        ValueError: a stored state this version cannot rebuild exactly.
    """
    if "_scale_need_ext" not in state and "_inv_need_ext" in state:
        need = state.pop("_inv_need_ext").copy()
        need[:, 2] = state["_j_min_ext"][:, 2]  # minimum memory (the sentinel's is inf)
        state["_scale_need_ext"] = need
    if "_nbr_safe_t" not in state and "_nbr_safe" in state:
        state["_nbr_safe_t"] = np.ascontiguousarray(state["_nbr_safe"].T)
    if "_mask_small" not in state and "k1" in state:  # pickled before the two mask layouts
        cells = state["num_agents"] * state["pending_slots"] * state["k1"]
        state["_mask_small"] = cells <= SMALL_MASK_CELLS
    if state.get("_coloc") is not None and "_coloc_k" not in state:
        # pickled before the compiled node rule: its memo and list tables are gone
        from .colocation import kernel_tables

        for old in ("_coloc_memo", "_pair_l", "_fail_l", "_pick_ext"):
            state.pop(old, None)
        state["_coloc_k"] = kernel_tables(state["_coloc"])
        # its cached slowdowns hold job ids where per-copy counts are kept now
        state["_slow_cache"] = None
    if "_kstate" not in state:  # pickled before the measured call's buffers
        state["_kstate"] = None
        state["_slow_cache"] = None  # it held the slowdowns themselves
        state["_maybe_dirty"] = True
    if "_node_over" not in state and "_util_sum" in state:  # pickled before the count
        state["_node_over"] = np.zeros(len(state["_util_sum"]), dtype=np.int64)
    if "_cnt" in state and "crashes_memory" not in state["_cnt"]:  # before the cause
        state["_cnt"]["crashes_memory"] = np.zeros_like(state["_cnt"]["crashes"])
    if "_order_rngs" not in state:  # pickled before crash_order (so its order is agent)
        state["_order_rngs"] = [None] * len(state["_wl"])
    if "j_alloc" in state:  # pickled with a stored (J, L, 3) allocation table
        _allocs_as_shares(state)


def _allocs_as_shares(state: dict[str, Any]) -> None:
    """Replace a pickled simulator's stored allocation table by its jobs' GPU shares.

    Earlier versions stored every job's allocation at every level; it is now its model's
    (``_m_alloc``) with the GPU times the job's share. The share is read back from the table
    and must rebuild it exactly; a table it cannot rebuild is refused rather than resumed
    with other allocations.

    Raises:
        ValueError: the stored table is not a per-job GPU scaling of the model tables.
    """
    table = state.pop("j_alloc")
    model_alloc = state["_m_alloc"][state["j_model"]]  # (J, L, 3)
    used = state["j_arrival"] < _NO_ARRIVAL
    share = np.ones(len(table))
    gpu = model_alloc[..., 1] > 0
    first = gpu.argmax(axis=1)  # a level with a GPU, where the job has one
    rows = np.flatnonzero(used & gpu.any(axis=1))
    share[rows] = table[rows, first[rows], 1] / model_alloc[rows, first[rows], 1]
    rebuilt = model_alloc.copy()
    rebuilt[..., 1] *= share[:, None]
    if not np.array_equal(rebuilt[used], table[used]):
        raise ValueError(
            "this simulator was pickled by an earlier edgesched whose allocation table is not "
            "its models' tables scaled per job (part-GPU jobs whose shares cannot be read "
            "back exactly); it cannot be resumed identically: start the run afresh"
        )
    state["j_gpu_share"] = share
    state["_gpu_shared"] = bool((share[used] != 1.0).any())
    jc = state["_job_capacity"]
    for b, wl in enumerate(state["_wl"]):
        if wl is not None and "alloc" in wl.__dict__:
            del wl.__dict__["alloc"]
            wl.gpu_share = share[b * jc : b * jc + wl.num_jobs].copy()
