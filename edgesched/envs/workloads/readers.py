"""Readers for public job-trace formats, all into one array form (:class:`Trace`).

Three formats are understood, each identified by its header:

``philly``
    Microsoft Philly job lists as distributed with the Pollux artifact
    (``pollux-osdi21/traces/philly.csv``; Jeon et al., ATC'19, CC BY 4.0)::

        timestamp,duration,num_gpus,gpu_time,cluster
        2017-10-09 07:01:55,66.0,1,66.0,11cb48

    ``timestamp`` is the submission time (``YYYY-MM-DD HH:MM:SS``), ``duration`` the run time
    in seconds, ``num_gpus`` the GPUs the job held. ``gpu_time`` and ``cluster`` are read but
    not used. Rows need not be sorted.

``pollux``
    Pollux/Sia workload files (``pollux-osdi21/workloads*/workload-N.csv``; Qiao et al.,
    OSDI'21, Apache-2.0)::

        name,time,application,num_replicas,batch_size
        cifar10-0,107,cifar10,6,2048

    ``time`` is the submission time in seconds from the start, ``application`` a model name
    (the Pollux models are exactly edgesched's catalog), ``num_replicas`` the GPUs requested.
    These files carry no durations: a job runs until its model converges.

``alibaba``
    Alibaba GPU pod lists from cluster-trace-gpu-v2023 (``csv/openb_pod_list_*.csv``; Weng
    et al., ATC'23, CC BY 4.0), after the published column list::

        name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
        creation_time,deletion_time,scheduled_time

    Times are seconds. The duration is ``deletion_time - scheduled_time`` (``creation_time``
    when ``scheduled_time`` is empty); a pod without ``deletion_time`` has an unknown
    duration (NaN). CPU-only pods (``num_gpu == 0``) are kept in the :class:`Trace` and
    flagged by ``gpus == 0``; the scenario preparation drops them because every catalog model
    trains on GPUs.

Every reader raises :class:`TraceFormatError` naming the file and the 1-based line of the
first malformed row; nothing is guessed or skipped silently (blank lines are the one
exception: several public files end with one). Files are UTF-8, with or without a byte-order
mark (spreadsheet exports add one); a byte that is not UTF-8 is reported with its line and
byte offset.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

TRACE_FORMATS = ("philly", "pollux", "alibaba")
"""Formats :func:`read_trace` understands (``auto`` detects one from the header)."""

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus")
POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
ALIBABA_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
_REQUIRED = {
    "philly": PHILLY_COLUMNS,
    "pollux": ("time", "application", "num_replicas"),
    "alibaba": ("num_gpu", "creation_time", "deletion_time"),
}


class TraceFormatError(ValueError):
    """A trace file is missing, has the wrong header or a malformed row (file and line)."""


@dataclass(frozen=True)
class Trace:
    """Jobs of a trace as arrays, sorted by submission time.

    Attributes:
        source: path of the file read.
        format: one of :data:`TRACE_FORMATS`.
        submit: (J,) submission times in seconds from the first submission (sorted).
        duration: (J,) run time in seconds; NaN where the trace does not record it.
        gpus: (J,) GPUs requested (fractional for GPU-sharing pods; 0 for CPU-only pods).
        cpus: (J,) CPU cores requested; NaN where not recorded.
        mem_gib: (J,) memory requested in GiB; NaN where not recorded.
        application: (J,) model name per job; empty strings where not recorded.
        line: (J,) 1-based line of each job in the file, for error messages.
        epoch: absolute time of the first submission (ISO string), when the trace has one.
        ran: (J,) whether the record shows the job ran: a positive Philly ``duration``; an
            Alibaba ``scheduled_time``; every Pollux job (its files list submitted jobs).
            ``None`` is read as all True.
    """

    source: str
    format: str
    submit: np.ndarray
    duration: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    mem_gib: np.ndarray
    application: np.ndarray
    line: np.ndarray
    epoch: str = ""
    ran: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.submit)

    @property
    def span_seconds(self) -> float:
        """Time from the first to the last submission."""
        return float(self.submit[-1]) if len(self.submit) else 0.0

    def counts_per_window(self, window_seconds: float) -> np.ndarray:
        """Submissions per consecutive window of ``window_seconds`` from the first one."""
        if window_seconds <= 0:
            raise ValueError(f"window_seconds={window_seconds!r}: need a positive number")
        bins = np.floor(self.submit / window_seconds).astype(np.int64)
        return np.bincount(bins, minlength=int(bins.max(initial=-1)) + 1)


def detect_format(path: str | os.PathLike[str]) -> str:
    """Name the format of a trace file from its header.

    Raises:
        TraceFormatError: the file is missing or its header matches no known format.
    """
    header = _header(Path(path))
    for fmt in ("alibaba", "pollux", "philly"):
        if all(c in header for c in _REQUIRED[fmt]):
            return fmt
    raise TraceFormatError(
        f"{path}:1: header {header!r} matches no known trace format; expected the columns of "
        f"philly {list(PHILLY_COLUMNS)}, pollux {list(POLLUX_COLUMNS)} or alibaba "
        f"{list(ALIBABA_COLUMNS)}"
    )


def read_trace(path: str | os.PathLike[str], format: str = "auto") -> Trace:
    """Read a trace file in one of :data:`TRACE_FORMATS` (``auto``: detect from the header).

    Args:
        path: the CSV file.
        format: ``auto``, ``philly``, ``pollux`` or ``alibaba``.

    Raises:
        TraceFormatError: missing file, unknown format, wrong header or malformed row.
    """
    if format == "auto":
        format = detect_format(path)
    if format not in TRACE_FORMATS:
        raise TraceFormatError(
            f"format={format!r} is not allowed; choose one of ['auto', {', '.join(TRACE_FORMATS)}]"
        )
    return _READERS[format](path)


@lru_cache(maxsize=8)
def _read_cached(path: str, format: str, mtime_ns: int, size: int) -> Trace:
    del mtime_ns, size  # cache keys only: a rewritten file is read again
    return read_trace(path, format)


def read_trace_cached(path: str | os.PathLike[str], format: str = "auto") -> Trace:
    """:func:`read_trace`, memoized on (path, format, modification time, size).

    Vectorized environments build one simulator per copy; they share one parsed trace.
    """
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read trace file ({e.strerror})") from None
    return _read_cached(str(p), format, st.st_mtime_ns, st.st_size)


# ------------------------------------------------------------------------------ readers
def read_philly(path: str | os.PathLike[str]) -> Trace:
    """Read a Philly job list (``timestamp,duration,num_gpus,...``). See the module docs."""
    p = Path(path)
    rows, lines, header = _rows(p, PHILLY_COLUMNS)
    it, idur, igpu = (header.index(c) for c in PHILLY_COLUMNS)
    stamps = [r[it] for r in rows]
    try:
        submit = np.array(stamps, dtype="datetime64[s]")
    except ValueError:
        # numpy reports no position; find the offending row for the message
        _column(p, rows, lines, it, "timestamp", lambda s: np.datetime64(s, "s"))
        raise
    dur = _column(p, rows, lines, idur, "duration", _nonneg)
    gpus = _column(p, rows, lines, igpu, "num_gpus", _pos_int)
    nat = np.isnat(submit)
    if nat.any():
        ln = lines[int(np.argmax(nat))]
        raise TraceFormatError(f"{p}:{ln}: timestamp is empty or NaT; need YYYY-MM-DD HH:MM:SS")
    t0 = submit.min() if len(submit) else np.datetime64(0, "s")
    seconds = (submit - t0).astype(np.float64)
    n = len(rows)
    return _sorted_trace(
        p,
        "philly",
        seconds,
        dur.astype(np.float64),
        gpus.astype(np.float64),
        np.full(n, np.nan),
        np.full(n, np.nan),
        np.full(n, "", dtype=object),
        np.array(lines),
        epoch=str(t0) if n else "",
        ran=dur > 0,  # a zero-second job never ran (rejected or failed at once)
    )


def read_pollux_workload(path: str | os.PathLike[str]) -> Trace:
    """Read a Pollux/Sia workload (``name,time,application,num_replicas,batch_size``)."""
    p = Path(path)
    rows, lines, header = _rows(p, _REQUIRED["pollux"])
    it, iapp, irep = (header.index(c) for c in _REQUIRED["pollux"])
    submit = _column(p, rows, lines, it, "time", _nonneg)
    gpus = _column(p, rows, lines, irep, "num_replicas", _pos_int)
    names = _column(p, rows, lines, iapp, "application", _name, as_array=False)
    app = np.array(names, dtype=object)
    n = len(rows)
    return _sorted_trace(
        p,
        "pollux",
        submit.astype(np.float64) - (submit.min() if n else 0.0),
        np.full(n, np.nan),
        gpus.astype(np.float64),
        np.full(n, np.nan),
        np.full(n, np.nan),
        app,
        np.array(lines),
    )


def read_alibaba_pods(path: str | os.PathLike[str]) -> Trace:
    """Read an Alibaba cluster-trace-gpu-v2023 pod list (``openb_pod_list_*.csv``)."""
    p = Path(path)
    rows, lines, header = _rows(p, _REQUIRED["alibaba"])
    col = {c: header.index(c) for c in ALIBABA_COLUMNS if c in header}

    def num(name: str, conv: Callable[[str], float], optional: bool = False) -> np.ndarray:
        if name not in col:
            return np.full(len(rows), np.nan)
        i = col[name]
        out = []
        for r, ln in zip(rows, lines, strict=True):
            v = r[i].strip()
            if optional and v in ("", "nan", "NaN"):
                out.append(math.nan)
            else:
                out.append(_convert(p, ln, name, v, conv))
        return np.array(out, dtype=np.float64)

    num_gpu = num("num_gpu", _nonneg_int)
    gpu_milli = num("gpu_milli", _nonneg, optional=True)
    created = num("creation_time", _nonneg)
    scheduled = num("scheduled_time", _nonneg, optional=True)
    deleted = num("deletion_time", _nonneg, optional=True)
    start = np.where(np.isnan(scheduled), created, scheduled)
    duration = deleted - start
    bad = np.flatnonzero(duration < 0)
    if len(bad):
        ln = lines[int(bad[0])]
        raise TraceFormatError(
            f"{p}:{ln}: deletion_time {deleted[bad[0]]:g} is before the pod started "
            f"({start[bad[0]]:g}); need deletion_time >= scheduled_time (or creation_time)"
        )
    # GPU-sharing pods (num_gpu == 1) request gpu_milli/1000 of one GPU
    share = np.where((num_gpu == 1) & ~np.isnan(gpu_milli), gpu_milli / 1000.0, 1.0)
    gpus = num_gpu * np.clip(share, 0.0, 1.0)
    cpus = num("cpu_milli", _nonneg, optional=True) / 1000.0
    mem = num("memory_mib", _nonneg, optional=True) / 1024.0
    n = len(rows)
    return _sorted_trace(
        p,
        "alibaba",
        created - (created.min() if n else 0.0),
        duration,
        gpus,
        cpus,
        mem,
        np.full(n, "", dtype=object),
        np.array(lines),
        ran=~np.isnan(scheduled),  # a pod never scheduled (pending, failed before) never ran
    )


_READERS: dict[str, Callable[[str | os.PathLike[str]], Trace]] = {
    "philly": read_philly,
    "pollux": read_pollux_workload,
    "alibaba": read_alibaba_pods,
}


# ------------------------------------------------------------------------------ helpers
def _decode(p: Path, data: bytes) -> str:
    """UTF-8 text of a trace file's bytes, without a leading byte-order mark.

    Raises:
        TraceFormatError: a byte sequence is not UTF-8 (naming its line and byte offset).
    """
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        offset = skip + e.start  # offsets in the message count the file's own bytes
        line = data.count(b"\n", 0, offset) + 1
        bad = data[offset : skip + e.end]
        raise TraceFormatError(
            f"{p}:{line}: byte {bad!r} at byte offset {offset} is not UTF-8 ({e.reason}); "
            "trace files must be UTF-8 text (a byte-order mark is allowed)"
        ) from None


def _header(p: Path) -> list[str]:
    if not p.is_file():
        raise TraceFormatError(f"{p}: trace file not found")
    with open(p, "rb") as f:
        first = _decode(p, f.readline())
    if not first.strip():
        raise TraceFormatError(f"{p}:1: empty file; expected a CSV header")
    return [c.strip() for c in next(csv.reader([first]))]


def _rows(p: Path, required: Sequence[str]) -> tuple[list[list[str]], list[int], list[str]]:
    header = _header(p)
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceFormatError(
            f"{p}:1: header {header!r} lacks column(s) {missing}; need {list(required)}"
        )
    rows, lines = [], []
    # decoded whole, so an undecodable byte anywhere is reported with its line, not as a
    # bare UnicodeDecodeError from inside the csv module
    reader = csv.reader(io.StringIO(_decode(p, p.read_bytes()), newline=""))
    next(reader)
    for row in reader:
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != len(header):
            raise TraceFormatError(
                f"{p}:{reader.line_num}: {len(row)} fields, the header has {len(header)}"
            )
        rows.append(row)
        lines.append(reader.line_num)
    if not rows:
        raise TraceFormatError(f"{p}: no jobs after the header")
    return rows, lines, header


def _column(
    p: Path,
    rows: list[list[str]],
    lines: list[int],
    index: int,
    name: str,
    conv: Callable[[str], object],
    as_array: bool = True,
):
    """Convert one column of every row, naming file and line of the first bad value."""
    out = [_convert(p, ln, name, r[index], conv) for r, ln in zip(rows, lines, strict=True)]
    return np.array(out) if as_array else out


def _convert(p: Path, line: int, name: str, value: str, conv: Callable[[str], object]):
    try:
        return conv(value)
    except (ValueError, TypeError) as e:
        raise TraceFormatError(f"{p}:{line}: column {name!r} = {value!r}: {e}") from None


def _nonneg(s: str) -> float:
    v = float(s)
    if not math.isfinite(v) or v < 0:
        raise ValueError("need a finite number >= 0")
    return v


def _nonneg_int(s: str) -> int:
    v = float(s)
    if not v.is_integer() or v < 0:
        raise ValueError("need an integer >= 0")
    return int(v)


def _pos_int(s: str) -> int:
    v = _nonneg_int(s)
    if v < 1:
        raise ValueError("need an integer >= 1")
    return v


def _name(s: str) -> str:
    s = s.strip()
    if not s:
        raise ValueError("need a non-empty model name")
    return s


def _sorted_trace(
    p: Path,
    fmt: str,
    submit: np.ndarray,
    *cols: np.ndarray,
    epoch: str = "",
    ran: np.ndarray | None = None,
) -> Trace:
    order = np.argsort(submit, kind="stable")
    duration, gpus, cpus, mem, app, line = (c[order] for c in cols)
    ran = np.ones(len(submit), dtype=bool) if ran is None else np.asarray(ran, bool)[order]
    return Trace(
        source=str(p),
        format=fmt,
        submit=submit[order],
        duration=duration,
        gpus=gpus,
        cpus=cpus,
        mem_gib=mem,
        application=app,
        line=line,
        epoch=epoch,
        ran=ran,
    )
