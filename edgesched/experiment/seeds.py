"""Workload seeds (moved to :mod:`edgesched.protocol`; re-exported for existing callers).

New code imports them from :mod:`edgesched.protocol`, which ``edgesched.algos`` can import
without importing ``edgesched.experiment``.
"""

from __future__ import annotations

from edgesched.protocol import (
    MAX_ENV_COPIES,
    MAX_EVAL_EPISODES,
    MAX_EVAL_SEED,
    TRAIN_SEED_BASE,
    eval_workload_seed,
    train_episode_seed,
)

__all__ = [
    "MAX_ENV_COPIES",
    "MAX_EVAL_EPISODES",
    "MAX_EVAL_SEED",
    "TRAIN_SEED_BASE",
    "eval_workload_seed",
    "train_episode_seed",
]
