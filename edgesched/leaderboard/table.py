"""Pieces every leaderboard page shares: the row of one entry and how numbers are printed.

A module of its own so that the board builder and the study pages import it, not each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import stats

NA = "n/a"


def entry_name(algo: str, shield: str) -> str:
    """A board entry's name in tables: ``algo``, or ``algo (shield)`` for a shielded one."""
    return algo if shield in ("", "none") else f"{algo} ({shield})"


def varied_entry(algo: str) -> str | None:
    """The entry a variant run varies: its name up to the last ``-``; ``None`` without one.

    ``tapfinger-b300k`` varies ``tapfinger``, ``tapfinger-noptr-b300k`` (``algo.variant=
    noptr-b300k``) varies the ablation ``tapfinger-noptr``; ``algo.variant`` allows ``-``
    only between labels (:func:`edgesched.experiment.schema.validate`), so this is unique.
    """
    return algo.rsplit("-", 1)[0] if "-" in algo else None


@dataclass
class Row:
    """One leaderboard entry (an algorithm with a shield) and its statistics."""

    algo: str
    shield: str
    learned: bool
    train_seeds: list[int]
    eval_seeds: list[int]
    episodes: int
    mean: stats.Estimate
    iqm: stats.Estimate
    metrics: dict[str, float]
    normalized_score: float
    p_improvement: float
    commits: list[str]
    config_hashes: list[str]
    episode_jcts: list[float] = field(repr=False)
    seed_scores: list[list[float]] = field(default_factory=list, repr=False)
    """Mean JCT per (training seed or heuristic run, evaluation seed in ``eval_seeds``)."""
    seed_cluster_rewards: list[float] = field(default_factory=list, repr=False)
    """RLPTO's cluster reward per evaluation seed in ``eval_seeds`` (mean over training seeds
    and episodes; NaN where a record predates its metrics)."""
    aliases: tuple[str, ...] = ()
    """Other heuristics whose records on this board are identical to this one's."""
    fingerprint: str = field(default="", repr=False)
    """Canonical text of the entry's per-episode records (equal text: identical records)."""
    curve: Any = field(default=None, repr=False)
    """The entry's :class:`~edgesched.leaderboard.curves.Curve` (learned entries whose runs
    recorded one), else ``None``."""
    train_budget: tuple[int, int] | None = field(default=None, repr=False)
    """``(env_steps, updates)`` every training seed of a learned entry trained (one budget per
    row: :func:`~edgesched.leaderboard.records.group_tables`), else ``None``."""

    @property
    def label(self) -> str:
        """``algo``, or ``algo = alias = ...`` for a row that stands for several heuristics."""
        return " = ".join((self.algo, *self.aliases))


def png_bytes(fig: Any, dpi: int = 110) -> bytes:
    """A matplotlib figure as PNG bytes (then closed), without a timestamp in the file.

    So the same data give the same bytes.
    """
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _f(x: float, nd: int) -> str:
    return NA if x is None or not np.isfinite(x) else f"{x:.{nd}f}"


def _ci(e: stats.Estimate, nd: int = 2) -> str:
    if not (np.isfinite(e.low) and np.isfinite(e.high)):
        return f"{_f(e.value, nd)} [{NA}]"
    return f"{_f(e.value, nd)} [{_f(e.low, nd)}, {_f(e.high, nd)}]"


def _n_seeds(row: Row) -> str:
    return f"{len(row.train_seeds)} train" if row.learned else f"{len(row.eval_seeds)} eval"
