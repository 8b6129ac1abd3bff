"""Workload seeds: training and held-out evaluation never share a workload.

Training episodes use seeds at or above ``TRAIN_SEED_BASE`` (2**40); evaluation episodes use
``64 * eval_seed + episode`` with ``eval_seed < MAX_EVAL_SEED``, which stays below it. The
experiment schema validates both ranges, so the two sets are disjoint by construction.
"""

from __future__ import annotations

TRAIN_SEED_BASE = 2**40
MAX_ENV_COPIES = 2**8
"""At most this many environment copies per run (each gets 2**16 episode seeds)."""
MAX_EVAL_EPISODES = 64
MAX_EVAL_SEED = TRAIN_SEED_BASE // MAX_EVAL_EPISODES


def train_episode_seed(seed: int, copy: int, episode: int) -> int:
    """Workload seed of training episode ``episode`` of env copy ``copy`` of run ``seed``."""
    return TRAIN_SEED_BASE + (seed << 24) + (copy << 16) + episode


def eval_workload_seed(seed: int, episode: int) -> int:
    """Workload seed of evaluation episode ``episode`` of held-out seed ``seed``."""
    return seed * MAX_EVAL_EPISODES + episode
