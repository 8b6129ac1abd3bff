"""Trace-driven workloads: readers for public job traces and their mapping onto scenarios.

See :mod:`edgesched.envs.workloads.readers` for the formats (Philly, Pollux/Sia, Alibaba
GPU v2023) and :mod:`edgesched.envs.workloads.prepare` for how a trace becomes a scenario's
arrivals (rate rescaling, windows, job sizes, workers and models).
"""

from .prepare import TraceWorkload, resolve_trace_path
from .readers import (
    TRACE_FORMATS,
    Trace,
    TraceFormatError,
    detect_format,
    read_alibaba_pods,
    read_philly,
    read_pollux_workload,
    read_trace,
    read_trace_cached,
)

__all__ = [
    "TRACE_FORMATS",
    "Trace",
    "TraceFormatError",
    "TraceWorkload",
    "detect_format",
    "read_alibaba_pods",
    "read_philly",
    "read_pollux_workload",
    "read_trace",
    "read_trace_cached",
    "resolve_trace_path",
]
