"""Crash-safe files: every result is written to a temporary file and renamed into place.

``os.replace`` is atomic on POSIX, so a reader (or a run killed at any instant) sees either
the previous complete file or the new complete file, never a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Atomic text write (UTF-8)."""
    atomic_write_bytes(path, text.encode())


def to_jsonable(x: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats (-> None) for strict JSON."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return to_jsonable(x.tolist())
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Atomic JSON write (strict: NaN becomes null)."""
    atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n")


def write_jsonl(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Rewrite a whole JSON-lines file atomically (no partial last line, ever)."""
    text = "".join(json.dumps(to_jsonable(r), allow_nan=False) + "\n" for r in rows)
    atomic_write_text(path, text)


def git_commit() -> str:
    """The source checkout's commit (``-dirty`` if modified), or ``unknown``."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "")


def config_hash(cfg: dict[str, Any]) -> str:
    """Short stable hash of a configuration (sorted JSON)."""
    blob = json.dumps(to_jsonable(cfg), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
