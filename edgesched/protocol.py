"""The evaluation protocol's shared vocabulary: workload seeds and metric names.

Both sides of the training loop need these: :mod:`edgesched.algos` (trainers seed their
training workloads, and learners with their own view evaluate themselves on the held-out
ones) and :mod:`edgesched.experiment` (runner, evaluation, records). They live here, in a
module that imports nothing from ``edgesched``, so that ``algos`` never has to import
``experiment`` (which imports ``algos``): the package has no import cycle
(``tests/test_imports.py``). :mod:`edgesched.experiment.seeds` and the metric names of
:mod:`edgesched.experiment.evaluation` re-export them for existing callers.

Workload seeds: training and held-out evaluation never share a workload. Training
episodes use seeds at or above :data:`TRAIN_SEED_BASE` (2**40); evaluation episodes use
``64 * eval_seed + episode`` with ``eval_seed < MAX_EVAL_SEED``, which stays below it. The
experiment schema validates both ranges, so the two sets are disjoint by construction.
"""

from __future__ import annotations

from typing import Any

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


SCALAR_METRICS = (
    "jct_mean",
    "jct_mean_completed",
    "jct_p95",
    "makespan",
    "median_node_utilization",
    "collisions_proposed",
    "collisions_executed",
    "overload_node_slots",
    "final_quality_mean",
    "episode_return_mean",
    "jct_lower_bound_mean",
    "jobs_done",
    "jobs_unfinished",
)
"""Per-episode metrics every evaluation record carries."""

EXTRA_METRICS = ("occupied_share_mean", "quality_total")
"""Per-episode metrics recorded since RLPTO (resources held, quality gained); optional in
records so older records stay valid."""

COLOCATION_METRICS = (
    "crashes",
    "crash_slots_lost",
    "restart_seconds",
    "shared_gpu_slots",
    "cpu_starved_slots",
)
"""Per-episode metrics of ``collision_mode='measured'`` scenarios (crashes, work lost, restart
time, shared-GPU and CPU-starved worker-slots); present in their records only."""

SHIELD_METRICS = (
    "shield_interventions",
    "shield_residual_collisions",
    "shield_latency_ms",
    "shield_compute_total_ms",
    "shield_network_ms",
    "shield_messages_per_step",
    "shield_inter_messages_per_step",
    "shield_max_messages_per_shield",
    "shield_rounds_per_step",
)
"""Extra per-episode metrics of shielded runs (:meth:`ShieldStats.summary`)."""


def cluster_reward(
    m: dict[str, Any], resource_weight: float = 1.0, accuracy_weight: float = 1.0
) -> float:
    """RLPTO's cluster reward of an episode from its metrics, for any scheduler.

    ``sum over slots of -(jobs in system)/N - resource_weight * occupied share +
    accuracy_weight * quality gained`` = ``episode_return_mean - resource_weight *
    occupied_share_mean * slots + accuracy_weight * quality_total`` (default reward, local
    mode: an agent's mean return is minus the jobs in system per agent, summed over slots).
    NaN when the metrics are missing (records from before they existed).
    """
    try:
        return float(
            m["episode_return_mean"]
            - resource_weight * m["occupied_share_mean"] * m["slots"]
            + accuracy_weight * m["quality_total"]
        )
    except (KeyError, TypeError):
        return float("nan")
