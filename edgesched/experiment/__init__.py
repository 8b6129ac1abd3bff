"""Experiment machinery: typed configs, training runs and evaluation.

``run``, ``evaluate_run`` and ``evaluate_baseline`` live in :mod:`edgesched.experiment.runner`
and are imported on first use, so importing the schemas stays light (no torch).
:mod:`~edgesched.experiment.cli` checks ``train.py``'s command line and renders its
``--help``; :mod:`~edgesched.experiment.console` is what a training run prints.
"""

from __future__ import annotations

from typing import Any

from .cli import register_configs
from .schema import ExperimentConfigError, TrainConfig, validate

__all__ = [
    "ExperimentConfigError",
    "TrainConfig",
    "evaluate_baseline",
    "evaluate_run",
    "register_configs",
    "run",
    "validate",
]

_LAZY = ("run", "evaluate_run", "evaluate_baseline")


def __getattr__(name: str) -> Any:
    """Import the runner on first access to one of its entry points."""
    if name in _LAZY:
        from . import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
