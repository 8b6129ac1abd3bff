"""Leaderboards generated from raw per-run records.

``python -m edgesched.leaderboard {build,validate,collect,baselines,refresh,promote}``; see
``leaderboards/README.md`` for the protocol and the commands that reproduce a leaderboard.

* :mod:`.stats`: mean / IQM with stratified-bootstrap CIs, probability of improvement,
  normalized score;
* :mod:`.records`: loading and validating raw records, grouping them into tables;
* :mod:`.build`: the ``<scenario>.md`` / ``.csv`` / ``.png`` files;
* :mod:`.validate`: re-running entries from their records;
* :mod:`.collect`: results files from sweep runs and from the registered baselines.

The subcommands need the ``train`` extra (``pip install "edgesched[train]"``: scipy,
matplotlib, and omegaconf through :mod:`edgesched.experiment`); the command line says so
when it is missing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Record", "RecordError", "group_tables", "load_records"]


def __getattr__(name: str) -> Any:
    """Import :mod:`.records` on first use of its names.

    Importing the package stays free of the ``train`` extra, so ``python -m
    edgesched.leaderboard --help`` works in an environments-only install.
    """
    if name in __all__:
        from . import records

        return getattr(records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
