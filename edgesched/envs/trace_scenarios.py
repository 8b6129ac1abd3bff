"""The trace-driven scenarios: edge50 with arrivals replayed from a job trace.

Registered on import of :mod:`edgesched.envs` (kept apart from
:mod:`edgesched.envs.scenarios`, which would outgrow one module otherwise); see
:mod:`edgesched.envs.workloads` for how a trace becomes a workload.
"""

from __future__ import annotations

from typing import Any

from .scenarios import (
    EDGE_RATE,
    V1_EDGE,
    V1_HISTORY,
    V1_NOTE,
    Scenario,
    _edge,
    _register_v0_v1,
    register_scenario,
)

PHILLY_TRACE = "pollux-osdi21/traces/philly.csv"
"""Philly job list (Jeon et al., ATC'19; CC BY 4.0) as shipped with the Pollux artifact."""
POLLUX_WORKLOAD = "pollux-osdi21/workloads/workload-1.csv"
"""A Pollux workload (Qiao et al., OSDI'21; Apache-2.0): Philly-sampled jobs with models."""

_register_v0_v1(
    "edge50-philly",
    "edge50 with arrivals, GPU counts and job sizes replayed from Microsoft's Philly trace "
    "(82k jobs, Sep-Dec 2017): trace time is compressed so the long-run rate equals "
    "edge50's (0.03 jobs per node per slot), each episode replays a seeded 200-slot "
    "window, a job's GPUs become its workers (at most 4), its duration relative to the "
    "trace median sets its size (clipped to 0.05-20x); models are drawn from edge50's "
    "mix because Philly records none. Needs the real-data folder.",
    _edge(50, 6, 10, EDGE_RATE, trace_path=PHILLY_TRACE, trace_format="philly"),
    data=("philly",),
)
_TRACE_DESCRIPTION = (
    "edge50 driven by a job trace you point at: python train.py env=edge50-trace "
    "env.trace.path=/path/to/file.csv (Philly, Pollux/Sia or Alibaba GPU v2023 format, "
    "detected from the header). By default it replays a Pollux workload (160 jobs with "
    "their models and GPU counts, sampled from Philly). Rescaling as in edge50-philly."
)
_TRACE = _edge(50, 6, 10, EDGE_RATE, trace_path=POLLUX_WORKLOAD, trace_format="auto")
# v1 also: an Alibaba pod's part of a GPU (gpu_milli) is a shared-GPU worker, not a whole GPU
_TRACE_V1_EXTRA: dict[str, Any] = {"trace_fractional_gpus": True}
_TRACE_V1_HISTORY = (
    f"{V1_HISTORY} Also trace_fractional_gpus=True: an Alibaba pod's part of a GPU "
    "(gpu_milli) is a worker holding that share, not a whole GPU."
)
_register_v0_v1(
    "edge50-trace",
    _TRACE_DESCRIPTION,
    _TRACE,
    # the default trace; a trace_path override of the user's own needs none of ours
    data=("pollux-workload-1",),
    v1_extra=_TRACE_V1_EXTRA,
    v1_history=_TRACE_V1_HISTORY,
)
TRACE_V2: dict[str, Any] = dict(trace_window_rule="per_job", trace_drop_never_ran=True)
"""What ``edge50-trace`` v2 changes. This scenario replays any trace a user points at, and
under v1's windows (uniform over the span, redrawn only while empty) a trace whose activity
sits in part of its span yields mostly near-empty episodes (a synthetic trace with 1,000 of
its 1,020 jobs in 1% of its span: fewer than 30% of windows hold 10 jobs or more, against
over 90% with ``per_job``; ``tests/test_workloads.py``); ``per_job`` windows fall around a
uniformly drawn job. The price is a load above the
scenario's ``arrival_rate`` on bursty traces, since busy stretches hold more jobs to draw
(Philly: 858 instead of 325 jobs per episode on average, ``benchmarks/results/
trace_loading.md``), which is why ``edge50-philly``, whose point is Philly's own rate, keeps
v1's rule. Records that never ran (an Alibaba pod never scheduled, a Philly job of zero
duration) are dropped: they have no duration to replay."""
register_scenario(
    Scenario(
        "edge50-trace",
        2,
        _TRACE_DESCRIPTION
        + V1_NOTE.replace(" v1:", " v1/v2:")
        + " v2: each episode's window is drawn around a uniformly drawn job of the trace, "
        "and records that never ran are dropped.",
        {**_TRACE, **V1_EDGE, **_TRACE_V1_EXTRA, **TRACE_V2},
        history=(
            "v0: first release.",
            _TRACE_V1_HISTORY,
            "v2: trace_window_rule='per_job' (windows around a uniformly drawn job, so a "
            "trace active in part of its span no longer yields mostly near-empty episodes) "
            "and trace_drop_never_ran=True; v1's rules stay available as "
            "trace_window_rule='any_job', trace_drop_never_ran=False.",
        ),
        data=("pollux-workload-1",),
    )
)
