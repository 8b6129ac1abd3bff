"""Turning a job trace into the simulator's workload: rescaling, windows, catalog mapping.

A trace is recorded on a datacenter with its own load and job sizes; an edge scenario has its
own cluster size and slot length. :class:`TraceWorkload` maps one onto the other with four
documented rules:

1. **Arrival rate.** Trace time is compressed (or stretched) by one factor so that the trace's
   long-run mean submission rate equals the scenario's: ``arrival_rate`` jobs per node per
   slot (``arrival_scope='node'``) or per slot (``'cluster'``). One slot stands for
   ``seconds_per_slot`` seconds of trace time. The trace's own fluctuation (daily cycles,
   bursts, quiet hours) is kept, so the scenario's synthetic diurnal and burst modulation is
   not applied on top.
2. **Time window.** An episode replays ``arrival_slots`` slots of the trace. With
   ``trace_window_start_hours < 0`` each episode starts at an offset drawn uniformly from the
   trace (seeded by ``reset(seed)``: held-out seeds see other parts of the trace), redrawn
   while the window holds no job at all (``trace_window_rule='any_job'``, v0) or placed
   around a job drawn uniformly from the trace, starting up to one window length before it
   (``'per_job'``: a trace whose activity sits in part of its span yields windows there, in
   proportion to its jobs, instead of mostly near-empty ones); with a value >= 0 every
   episode replays the window that starts that many trace hours after the first submission,
   empty or not. With ``trace_drop_never_ran`` the records that never ran (an Alibaba pod
   never scheduled, a Philly job of zero duration) are dropped first.
3. **Job size.** A job's size relative to the median job is its trace duration over the
   median trace duration, clipped to ``trace_size_clip`` (Philly durations span six orders of
   magnitude; unclipped, one job would outlast any episode). The scenario's
   ``job_size_median_slots`` then sets the absolute size as for synthetic jobs. Traces
   without durations (Pollux workloads) and jobs with unknown duration get factor 1.
4. **Workers and model.** A job's GPUs become data-parallel workers: ``ceil(gpus)`` clipped
   to ``[1, max(workers_dist)]`` (the largest job the scenario allows). Jobs that request no
   GPU (CPU-only Alibaba pods) are dropped, since every catalog model trains on GPUs. Traces
   with model names (Pollux) use them and must name models of the scenario's ``models``;
   traces without (Philly, Alibaba) draw the model from ``models``' weights, seeded.

Home node, priority class, sync scheme and target quality are not in any of these traces and
are drawn exactly as for synthetic workloads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import ConfigError, SimConfig
from .readers import Trace, TraceFormatError, read_trace_cached


def resolve_trace_path(path: str, data_dir: str = "") -> Path:
    """Locate a trace file: absolute, relative to the working directory, or in the data folder.

    Relative paths that do not exist under the working directory are looked up in the
    real-data folder (see :func:`edgesched.data.find_data_dir`: ``data_dir``,
    ``$EDGESCHED_DATA_DIR``, ``../shared/data`` or the fetch cache), so the registered trace
    scenarios can name e.g. ``pollux-osdi21/traces/philly.csv``.

    Raises:
        ConfigError: the file exists in none of those places; for a registered data file the
            message names the command that downloads it.
    """
    from ..topology import data_help, find_data_dir

    p = Path(os.path.expanduser(path))
    tried = [p]
    if p.is_file():
        return p
    if not p.is_absolute():
        data = find_data_dir(data_dir)
        if data is not None:
            cand = data / p
            tried.append(cand)
            if cand.is_file():
                return cand
    msg = f"trace_path={path!r}: no such file (looked at {[str(t) for t in tried]})"
    if p.is_absolute():
        msg += "; give the path of an existing file"
    else:
        # where the data folder came from and, for registered files, the fetch command
        msg += ". " + data_help(p.as_posix(), data_dir)
    raise ConfigError(msg)


@dataclass(frozen=True)
class TraceWorkload:
    """A trace prepared for one scenario (see the module docs for the rules).

    Attributes:
        trace: the parsed trace (all jobs).
        submit: (J,) submission seconds of the kept jobs (sorted).
        workers: (J,) data-parallel workers per kept job.
        size_factor: (J,) job size relative to the median job.
        gpu_fraction: (J,) share of one GPU per worker: below 1 for a job that asks for part
            of one GPU (Alibaba's ``gpu_milli``), else 1 (used by ``trace_fractional_gpus``).
        model: (J,) index into the scenario's ``models``, or -1 where the model is drawn.
        seconds_per_slot: trace seconds one simulator slot stands for.
        dropped: jobs of the trace not kept (CPU-only).
    """

    trace: Trace
    submit: np.ndarray
    workers: np.ndarray
    size_factor: np.ndarray
    model: np.ndarray
    seconds_per_slot: float
    dropped: int
    gpu_fraction: np.ndarray | None = None
    """(J,) share of one GPU a kept job's single worker asks for (1 for whole GPUs)."""

    @classmethod
    def from_config(cls, cfg: SimConfig, model_names: tuple[str, ...]) -> TraceWorkload:
        """Read ``cfg.trace_path`` and prepare it for the scenario ``cfg``.

        Raises:
            ConfigError: missing file, bad trace, or trace models outside ``model_names``.
        """
        path = resolve_trace_path(cfg.trace_path, cfg.data_dir)
        try:
            trace = read_trace_cached(path, cfg.trace_format)
        except TraceFormatError as e:
            raise ConfigError(f"trace_path={cfg.trace_path!r}: {e}") from None
        jobs_per_slot = cfg.arrival_rate * (cfg.num_nodes if cfg.arrival_scope == "node" else 1)
        max_workers = max(w for w, _ in cfg.workers_dist)
        return cls.prepare(
            trace,
            jobs_per_slot,
            max_workers,
            model_names,
            cfg.trace_size_clip,
            drop_never_ran=cfg.trace_drop_never_ran,
        )

    @classmethod
    def prepare(
        cls,
        trace: Trace,
        jobs_per_slot: float,
        max_workers: int,
        model_names: tuple[str, ...],
        size_clip: tuple[float, float] = (0.05, 20.0),
        *,
        drop_never_ran: bool = False,
    ) -> TraceWorkload:
        """Apply the rules of the module docs to a parsed trace.

        Args:
            trace: the parsed trace.
            jobs_per_slot: long-run mean arrivals per slot the trace is rescaled to.
            max_workers: largest number of workers per job.
            model_names: the scenario's models (for traces that name models).
            size_clip: (low, high) bounds of the relative job size.
            drop_never_ran: also drop the records that never ran (``Trace.ran``).

        Raises:
            ConfigError: no GPU job, a zero-length trace, non-positive rate, or an unknown
                model name (naming file, line and the allowed models).
        """
        if jobs_per_slot <= 0:
            raise ConfigError(
                f"arrival_rate gives {jobs_per_slot!r} jobs per slot; a trace-driven scenario "
                "needs a positive arrival_rate (the long-run rate the trace is rescaled to)"
            )
        keep = trace.gpus > 0
        if drop_never_ran and trace.ran is not None:
            keep &= trace.ran
        if not keep.any():
            raise ConfigError(f"trace {trace.source}: no job requests a GPU; nothing to schedule")
        submit = trace.submit[keep] - trace.submit[keep][0]
        span = float(submit[-1])
        if span <= 0:
            raise ConfigError(
                f"trace {trace.source}: all {int(keep.sum())} GPU jobs are submitted at the same "
                "time; an arrival rate cannot be derived from it"
            )
        # len - 1 inter-arrival gaps span the trace: the unbiased rate estimate
        rate = (len(submit) - 1) / span
        seconds_per_slot = jobs_per_slot / rate
        gpus = trace.gpus[keep]
        workers = np.clip(np.ceil(gpus - 1e-9), 1, max_workers).astype(np.int64)
        dur = trace.duration[keep]
        known = np.isfinite(dur) & (dur > 0)
        factor = np.ones(len(dur))
        if known.any():
            factor[known] = dur[known] / np.median(dur[known])
        lo, hi = size_clip
        factor = np.clip(factor, lo, hi)
        model = np.full(len(dur), -1, dtype=np.int64)
        apps = trace.application[keep]
        named = apps != ""
        if named.any():
            index = {name: i for i, name in enumerate(model_names)}
            unknown = sorted({a for a in apps[named] if a not in index})
            if unknown:
                first = int(np.flatnonzero(apps == unknown[0])[0])
                line = int(trace.line[keep][first])
                raise ConfigError(
                    f"trace {trace.source}:{line}: application {unknown[0]!r} is not among the "
                    f"scenario's models {list(model_names)} (unknown: {unknown}); add it to "
                    "'models'"
                )
            model[named] = [index[a] for a in apps[named]]
        return cls(
            trace=trace,
            submit=submit,
            workers=workers,
            size_factor=factor,
            model=model,
            seconds_per_slot=seconds_per_slot,
            dropped=int((~keep).sum()),
            gpu_fraction=np.where(gpus < 1.0, gpus, 1.0),
        )

    @property
    def span_slots(self) -> float:
        """Length of the whole (kept) trace in simulator slots."""
        return float(self.submit[-1]) / self.seconds_per_slot

    def window(
        self,
        rng: np.random.Generator,
        arrival_slots: int,
        start_hours: float = -1.0,
        rule: str = "any_job",
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Jobs of one episode: their arrival slots and indices into the kept jobs.

        Args:
            rng: the episode's generator (draws the window start when ``start_hours < 0``).
            arrival_slots: slots of trace an episode replays.
            start_hours: fixed window start in trace hours, or negative for a random start.
            rule: how a random start is drawn (``SimConfig.trace_window_rule``).

        Returns:
            ``(slot, job_index, start_seconds)``, sorted by slot.

        Raises:
            ConfigError: ``start_hours`` lies beyond the end of the trace.
        """
        length = arrival_slots * self.seconds_per_slot
        last = float(self.submit[-1])
        if start_hours < 0 and rule == "per_job":
            # around a uniformly drawn job: windows fall where the trace's jobs are, in
            # proportion to their number, and always hold the drawn job
            k = int(rng.integers(len(self.submit)))
            start = float(self.submit[k]) - float(rng.uniform(0.0, length))
            start = min(max(start, 0.0), max(last - length, 0.0))
            if not start <= float(self.submit[k]) < start + length:
                start = float(self.submit[k])  # clipped past it at the trace's edge
        elif start_hours < 0:
            # A window without any submission is a void episode (and NaN metrics); Philly
            # has quiet days, so such windows are redrawn: starts are uniform among the
            # windows that hold at least one job.
            for _ in range(10_000):
                start = float(rng.uniform(0.0, max(last - length, 0.0)))
                lo, hi = np.searchsorted(self.submit, [start, start + length], side="left")
                if hi > lo:
                    break
            else:  # pragma: no cover - needs a window far shorter than the trace's gaps
                raise ConfigError(
                    f"arrival_slots={arrival_slots}: 10000 random trace windows of "
                    f"{length / 3600.0:.2f} h held no job; lengthen the window"
                )
        else:
            start = start_hours * 3600.0
            if start > last:
                raise ConfigError(
                    f"trace_window_start_hours={start_hours!r} lies beyond the trace's last "
                    f"submission ({last / 3600.0:.2f} h after its first)"
                )
        lo, hi = np.searchsorted(self.submit, [start, start + length], side="left")
        idx = np.arange(lo, hi)
        slot = np.floor((self.submit[idx] - start) / self.seconds_per_slot).astype(np.int64)
        # float rounding at the window's right edge must not produce slot == arrival_slots
        np.minimum(slot, arrival_slots - 1, out=slot)
        return slot, idx, start
