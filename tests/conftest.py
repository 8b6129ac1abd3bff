"""Shared fixtures: the scenario registry and the real-data folder."""

from __future__ import annotations

import pytest

import edgesched
from edgesched.envs.topology import find_data_dir

try:  # one intra-op thread per test worker: pytest -n 2 on 2 cores would oversubscribe
    import torch

    torch.set_num_threads(1)
except ImportError:  # the env-only install has no torch
    pass

DATA_DIR = find_data_dir()
NEEDS_DATA = {"melbourne125", "edge50-philly", "edge50-trace"}


def scenario_params() -> list:
    """Every registered scenario; those that read real data skip when it is absent."""
    params = []
    for name in edgesched.list_scenarios():
        marks = []
        if name in NEEDS_DATA and DATA_DIR is None:
            marks.append(
                pytest.mark.skip(reason="real-data folder absent (set EDGESCHED_DATA_DIR)")
            )
        params.append(pytest.param(name, marks=marks, id=name))
    return params
