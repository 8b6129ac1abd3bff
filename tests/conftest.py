"""Shared fixtures: the scenario registry and the real-data folder.

Which tests need real data is derived from one place, the registries: a scenario's
``Scenario.data`` names the files of ``edgesched.data.DATA_FILES`` it reads, and a test that
reads a file directly names its entry through :func:`needs_data`. A test skips when a file is
missing from the real-data folder in effect (``EDGESCHED_DATA_DIR=none``: none at all), with
a reason that names the fetch command.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

import edgesched
from edgesched.data import fetch_command, file_state
from edgesched.envs.scenarios import get_scenario
from edgesched.envs.topology import find_data_dir, locate_data_dir

try:  # one intra-op thread per test worker: pytest -n 2 on 2 cores would oversubscribe
    import torch

    torch.set_num_threads(1)
except ImportError:  # the env-only install has no torch
    pass

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def import_benchmark(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py``: a folder of scripts, not a package (they import
    their sibling ``_report`` at the top, so the folder is on the path while it loads)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


DATA_DIR = find_data_dir()
"""The real-data folder in effect (``None``: none, e.g. ``EDGESCHED_DATA_DIR=none``)."""


def missing_data_reason(names: tuple[str, ...] | list[str], what: str = "") -> str | None:
    """Skip reason when a registered data file in ``names`` is missing, else ``None``."""
    missing = [n for n in names if file_state(DATA_DIR, n, check=False) != "ok"]
    if not missing:
        return None
    where = f"in {DATA_DIR}" if DATA_DIR is not None else f"({locate_data_dir()[1]})"
    return (
        f"{what or 'test'} needs real data {missing}, absent {where}: run "
        f"`{fetch_command(missing)}` or set EDGESCHED_DATA_DIR"
    )


def scenario_skip_reason(name: str) -> str | None:
    """Skip reason when scenario ``name`` reads real data that is missing, else ``None``."""
    return missing_data_reason(get_scenario(name).data, name)


def needs_data(*names: str) -> pytest.MarkDecorator:
    """Mark: skip unless the registered data files ``names`` are in the real-data folder."""
    reason = missing_data_reason(names)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def needs_scenario_data(name: str) -> pytest.MarkDecorator:
    """Mark: skip unless every data file scenario ``name`` reads is available."""
    reason = scenario_skip_reason(name)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def scenarios_with_data() -> list[str]:
    """Registered scenarios that can be made here (their real data, if any, is present)."""
    return [s for s in edgesched.list_scenarios() if scenario_skip_reason(s) is None]


def scenario_params() -> list:
    """Every registered scenario; those that read real data skip when it is absent."""
    params = []
    for name in edgesched.list_scenarios():
        reason = scenario_skip_reason(name)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params
