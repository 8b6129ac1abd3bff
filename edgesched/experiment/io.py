"""Crash-safe files: every result is written to a temporary file and renamed into place.

``os.replace`` is atomic on POSIX, so a reader (or a run killed at any instant) sees either
the previous complete file or the new complete file, never a half-written one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np


def _create_temp(path: Path) -> tuple[int, Path]:
    """Create a new hidden temp file next to ``path``; return its descriptor and path.

    Unlike :func:`tempfile.mkstemp` (always mode 0600), the file is created with mode 0666
    filtered by the process umask, like any file ``open(path, "w")`` creates, so run files
    are as readable to colleagues on a shared cluster as the user's other files.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name next to {path} after 100 tries")


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, rename).

    The file gets the permissions of a plain ``open(path, "w")``: 0666 minus the umask.
    """
    atomic_write_with(path, lambda f: f.write(data))


def atomic_write_with(path: str | Path, write: Callable[[BinaryIO], object]) -> None:
    """Atomically write whatever ``write`` writes into the binary file object it is given.

    For large serializations (``torch.save`` of a checkpoint): they stream into the
    temporary file instead of being assembled in memory first, so writing a file never
    needs memory for extra copies of it. Same guarantees as :func:`atomic_write_bytes`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_fd(fd: int, data: bytes) -> None:
    """Write ``data`` to the open file ``fd``, flush it to disk and close it."""
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_text(path: str | Path, text: str) -> None:
    """Atomic text write (UTF-8)."""
    atomic_write_bytes(path, text.encode())


def create_text_exclusive(path: str | Path, text: str) -> bool:
    """Create ``path`` with ``text`` atomically, only if no file of that name exists.

    The text is written to a temporary file first and published with a hard link, which
    fails when ``path`` exists: a reader sees the whole file or none, and of two processes
    creating the same path exactly one succeeds. On a file system without hard links the
    file is created exclusively and then written (exactly one creator still succeeds).

    Returns:
        True when this call created the file, False when it already existed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode()
    fd, tmp = _create_temp(path)
    try:
        _write_fd(fd, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:
            # a file system without hard links: exclusive creation still decides who wins,
            # only a reader may see the file before its text is whole
            try:
                _write_fd(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), data)
            except FileExistsError:
                return False
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)


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
