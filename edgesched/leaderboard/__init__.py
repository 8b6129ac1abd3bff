"""Leaderboards generated from raw per-run records (DESIGN §6).

``python -m edgesched.leaderboard {build,validate,collect,baselines,refresh}``; see
``leaderboards/README.md`` for the protocol and the commands that reproduce a leaderboard.

* :mod:`.stats`: mean / IQM with stratified-bootstrap CIs, probability of improvement,
  normalized score;
* :mod:`.records`: loading and validating raw records, grouping them into tables;
* :mod:`.build`: the ``<scenario>.md`` / ``.csv`` / ``.png`` files;
* :mod:`.validate`: re-running entries from their records;
* :mod:`.collect`: results files from sweep runs and from the registered baselines.
"""

from __future__ import annotations

from .records import Record, RecordError, group_tables, load_records

__all__ = ["Record", "RecordError", "group_tables", "load_records"]
