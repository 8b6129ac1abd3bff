"""edgesched: a multi-agent RL benchmark for scheduling DL training jobs on edge clusters.

Quick start::

    import edgesched, gymnasium
    env = edgesched.make_parallel("edge50")          # PettingZoo ParallelEnv
    central = gymnasium.make("edgesched/Edge50-v0")  # Gymnasium central view
    batch = edgesched.make_batched("edge10", copies=16)  # 16 copies as one array program
"""

from __future__ import annotations

from .envs import (
    ConfigError,
    EdgeSchedVectorEnv,
    InvalidActionError,
    SimConfig,
    data_requirements,
    get_scenario,
    list_scenarios,
    make_aec,
    make_batched,
    make_parallel,
    make_vector,
)

__version__ = "0.1.0"


def _register_gymnasium() -> None:
    """Register one Gymnasium id per scenario version for the central view (and its vector view)."""
    from gymnasium.envs.registration import register, registry

    from .envs.scenarios import scenario_versions

    for name in list_scenarios():
        for s in scenario_versions(name):
            if s.gym_id not in registry:
                register(
                    id=s.gym_id,
                    entry_point="edgesched.envs.central:EdgeSchedCentralEnv",
                    # gymnasium.make_vec: the heads as one batched simulator
                    vector_entry_point="edgesched.envs.central_vector:EdgeSchedCentralVectorEnv",
                    kwargs={"scenario": s.id},  # this version, also after the name moves on
                    disable_env_checker=False,
                )


_register_gymnasium()

__all__ = [
    "ConfigError",
    "EdgeSchedVectorEnv",
    "InvalidActionError",
    "SimConfig",
    "__version__",
    "data_requirements",
    "get_scenario",
    "list_scenarios",
    "make_aec",
    "make_batched",
    "make_parallel",
    "make_vector",
]
