"""The edgesched simulator and its API views (numpy only; no torch here)."""

from . import trace_scenarios  # noqa: F401  (registers edge50-philly and edge50-trace)
from .batch_view import BatchView
from .catalog import hardware_tiers, model_catalog
from .central import EdgeSchedCentralEnv
from .central_core import CentralHeads
from .central_vector import EdgeSchedCentralVectorEnv
from .config import ConfigError, SimConfig
from .core import BatchedSim, EdgeClusterSim, InvalidActionError, make_batched
from .parallel import EdgeSchedParallelEnv, make_aec, make_parallel
from .scenarios import (
    DataRequirement,
    Scenario,
    data_requirements,
    get_scenario,
    list_scenarios,
    make_config,
    register_scenario,
    scenario_versions,
)
from .sync import SyncScheme, list_sync_schemes, register_sync_scheme
from .vector import EdgeSchedVectorEnv, make_vector
from .view import ClusterView

__all__ = [
    "BatchView",
    "BatchedSim",
    "CentralHeads",
    "ClusterView",
    "ConfigError",
    "DataRequirement",
    "EdgeClusterSim",
    "EdgeSchedCentralEnv",
    "EdgeSchedCentralVectorEnv",
    "EdgeSchedParallelEnv",
    "EdgeSchedVectorEnv",
    "InvalidActionError",
    "Scenario",
    "SimConfig",
    "SyncScheme",
    "data_requirements",
    "get_scenario",
    "hardware_tiers",
    "list_scenarios",
    "list_sync_schemes",
    "make_aec",
    "make_batched",
    "make_config",
    "make_parallel",
    "make_vector",
    "model_catalog",
    "register_scenario",
    "register_sync_scheme",
    "scenario_versions",
]
