"""Run files (edgesched.experiment.io): atomic writes that leave readable files behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from edgesched.experiment.io import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_with,
    create_text_exclusive,
    write_jsonl,
)


@pytest.fixture
def umask():
    """Set the process umask for one test and restore the previous one afterwards."""
    old = os.umask(0o022)
    os.umask(old)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_follow_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    atomic_write_bytes(tmp_path / "a.bin", b"x")
    atomic_write_json(tmp_path / "sub" / "b.json", {"k": 1})
    write_jsonl(tmp_path / "c.jsonl", [{"k": 1}])
    for name in ("a.bin", "sub/b.json", "c.jsonl"):
        assert _mode(tmp_path / name) == mode, (name, oct(_mode(tmp_path / name)))


def test_atomic_write_replaces_and_leaves_no_temp_file(tmp_path, umask):
    umask(0o022)
    target = tmp_path / "f.txt"
    target.write_bytes(b"old")
    os.chmod(target, 0o600)  # a file from an older version: the rewrite follows the umask
    atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    assert _mode(target) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_failed_write_removes_its_temp_file(tmp_path):
    target = tmp_path / "f.txt"
    with pytest.raises(TypeError):
        atomic_write_bytes(target, object())  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_streamed_write_publishes_only_a_whole_file(tmp_path):
    """``atomic_write_with`` streams into the temp file: a writer that fails halfway leaves
    the previous file as it was, and one that finishes replaces it whole."""
    target = tmp_path / "ckpt.pt"
    target.write_bytes(b"previous")

    def half(f):
        f.write(b"partial")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="mid-write"):
        atomic_write_with(target, half)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]
    atomic_write_with(target, lambda f: [f.write(b"chunk%d" % i) for i in range(3)])
    assert target.read_bytes() == b"chunk0chunk1chunk2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


def _claim(args: tuple[str, int]) -> str:
    from edgesched.experiment.runner import _claim_new_run_dir

    path, k = args
    return str(_claim_new_run_dir(Path(path), f"run {k}\n", explicit=False))


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path):
    """Hydra names a run directory by the second: two tapfinger variants started together
    on the device once wrote into one folder. Each claim now creates config.yaml exclusively,
    and a later claimant takes <stamp>-1, -2, ..."""
    from concurrent.futures import ProcessPoolExecutor

    stamp = tmp_path / "seed0" / "20261127-162712"
    with ProcessPoolExecutor(4) as pool:
        dirs = list(pool.map(_claim, [(str(stamp), k) for k in range(8)]))
    assert len(set(dirs)) == 8
    assert sorted(Path(d).name for d in dirs) == sorted(
        [stamp.name] + [f"{stamp.name}-{k}" for k in range(1, 8)]
    )
    texts = sorted((Path(d) / "config.yaml").read_text() for d in dirs)
    assert texts == sorted(f"run {k}\n" for k in range(8))  # each whole, none overwritten
    assert not list(tmp_path.rglob("*.tmp"))


def test_exclusive_create_publishes_whole_files_once(tmp_path):
    p = tmp_path / "d" / "config.yaml"
    assert create_text_exclusive(p, "first\n")
    assert not create_text_exclusive(p, "second\n")
    assert p.read_text() == "first\n"
    assert [q.name for q in p.parent.iterdir()] == ["config.yaml"]  # no temp file left


def test_exclusive_create_without_hard_links(tmp_path, monkeypatch):
    """Some file systems (FAT, some network mounts) refuse hard links: exclusive creation
    still lets exactly one writer win."""

    def no_links(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    p = tmp_path / "config.yaml"
    assert create_text_exclusive(p, "first\n")
    assert not create_text_exclusive(p, "second\n")
    assert p.read_text() == "first\n"
    assert [q.name for q in tmp_path.iterdir()] == ["config.yaml"]
