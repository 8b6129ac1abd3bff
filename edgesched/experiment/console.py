"""What a training run prints: where it writes, its progress, and its result.

On a terminal the progress is a tqdm bar. Anywhere else (CI logs, ``nohup``, SLURM output
files, sweeps) a bar would be one unreadable line of carriage returns, or nothing at all, so
the run prints one plain line every ``experiment.log_every`` updates instead, flushed at once
so that a log shows it while the run goes on. Both modes end with the held-out evaluation
summary and the run directory. Nothing here touches a random number generator or the run
files: the output never changes the results.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, TextIO

AUTO_LINES = 20
"""Progress lines per run when ``experiment.log_every`` is 0."""

SUMMARY_KEYS = (
    "jct_mean",
    "jct_p95",
    "makespan",
    "median_node_utilization",
    "collisions_proposed",
    "collisions_executed",
    "jobs_done",
    "jobs_unfinished",
    "final_quality_mean",
    "interventions_per_step",
    "shield_latency_ms",
)
"""The ``eval.json`` summary metrics printed at the end, in this order, where present."""


def log_interval(log_every: int, n_updates: int) -> int:
    """Updates between two progress lines: ``log_every``, or about :data:`AUTO_LINES` per run.

    Args:
        log_every: ``experiment.log_every`` (0 = automatic).
        n_updates: updates of the whole run.
    """
    if log_every > 0:
        return log_every
    return max(1, math.ceil(n_updates / AUTO_LINES))


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _number(value: Any) -> str:
    if value is None:
        return "-"
    value = float(value)
    if math.isfinite(value) and value.is_integer() and abs(value) >= 1:
        return f"{int(value)}"
    return f"{value:.4g}" if abs(value) < 1 else f"{value:.2f}"


def summary_line(summary: dict[str, Any], seeds: int, episodes: int) -> str:
    """The one-line held-out evaluation summary (means over the held-out episodes).

    Args:
        summary: ``eval.json``'s ``summary``.
        seeds: held-out seeds evaluated.
        episodes: episodes per seed.
    """
    parts = [f"{k} {_number(summary[k])}" for k in SUMMARY_KEYS if k in summary]
    return (
        f"held-out evaluation ({seeds} seed{'s' if seeds != 1 else ''} x {episodes} "
        f"episode{'s' if episodes != 1 else ''}, means): " + "  ".join(parts)
    )


class TrainingConsole:
    """Progress and results of one training run on stdout.

    Args:
        label: names the run in every line (``mappo@edge10-v0 seed 0``).
        n_updates: updates of the whole run.
        per_update: env steps per update.
        log_every: ``experiment.log_every`` (0 = about :data:`AUTO_LINES` lines per run).
        bar: show a progress bar; ``None`` decides by whether ``stream`` is a terminal.
        stream: where to print (default: ``sys.stdout`` at the time of the call).
    """

    def __init__(
        self,
        label: str,
        n_updates: int,
        per_update: int,
        log_every: int = 0,
        bar: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stdout
        if bar is None:
            isatty = getattr(self.stream, "isatty", None)
            bar = bool(isatty and isatty())
        self.label, self.n_updates, self.per_update = label, n_updates, per_update
        self.every = log_interval(log_every, n_updates)
        self.use_bar = bar
        self._bar: Any = None
        self._last = (0, 0, 0.0)  # update, env steps, wall time of the last progress line

    def say(self, text: str) -> None:
        """Print one line now (above the bar when one is shown)."""
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
            self.stream.flush()
        else:
            print(text, file=self.stream, flush=True)

    def start(self, update: int, env_steps: int, wall_time: float) -> None:
        """Begin the progress display at ``update`` (non-zero when resuming)."""
        self._last = (update, env_steps, wall_time)
        if self.use_bar:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.n_updates * self.per_update,
                initial=env_steps,
                unit="step",
                dynamic_ncols=True,
                desc=self.label,
                file=self.stream,
            )

    def update(self, row: dict[str, Any]) -> None:
        """Report one finished update (a ``metrics.jsonl`` row)."""
        jct = row.get("train_jct_mean")
        collisions = row.get("collisions_per_step")
        if self._bar is not None:
            self._bar.set_postfix(
                jct=f"{jct:.1f}" if jct is not None else "-",
                coll=f"{collisions:.3f}" if collisions is not None else "-",
                refresh=False,  # the update below redraws once
            )
            self._bar.update(self.per_update)
            return
        update = int(row["update"])
        if update % self.every and update != self.n_updates:
            return
        last_update, last_steps, last_wall = self._last
        env_steps, wall = int(row["env_steps"]), float(row["wall_time"])
        span = max(wall - last_wall, 1e-9)
        rate = (env_steps - last_steps) / span
        eta = (self.n_updates - update) * span / max(update - last_update, 1)
        total = self.n_updates * self.per_update
        self.say(
            f"{self.label}: update {update}/{self.n_updates}  env steps {env_steps:,}/{total:,}"
            f"  {rate:,.0f} steps/s  train JCT {_number(jct)}"
            f"  collisions/step {'-' if collisions is None else f'{collisions:.3f}'}"
            f"  elapsed {_clock(wall)}"
            f"  eta {_clock(eta)}"
        )
        self._last = (update, env_steps, wall)

    def close(self) -> None:
        """End the progress display (the bar's last state stays on screen)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def finish(
        self, summary: dict[str, Any], seeds: int, episodes: int, run_dir: str | Path
    ) -> None:
        """Print the held-out evaluation summary and where the run's files are."""
        self.close()
        self.say(f"{self.label}: {summary_line(summary, seeds, episodes)}")
        self.say(f"run directory: {Path(run_dir).resolve()}")
