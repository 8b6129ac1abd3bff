"""``python train.py`` as a user runs it: what it prints with and without a terminal, and how
it stops on a bad trace, a bad resume path or a damaged checkpoint (one line, exit status 2,
nothing left behind), and how ``resume`` treats a run killed before its first checkpoint."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import stat
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

pytest.importorskip("hydra")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ["experiment=smoke", "env=edge10", "algo.hidden=[16]"]


def _train(args: list[str], cwd: Path, tty: bool = False) -> tuple[int, str, str]:
    """Run train.py; stdout is a pipe, or a pseudo-terminal when ``tty``."""
    cmd = [sys.executable, str(ROOT / "train.py"), *args]

    def umask_022() -> None:
        os.umask(0o022)

    if not tty:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, cwd=cwd, timeout=300, preexec_fn=umask_022
        )
        return proc.returncode, proc.stdout, proc.stderr
    master, slave = pty.openpty()
    # a terminal of 0 columns would draw an empty bar
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(
        cmd, stdout=slave, stderr=subprocess.PIPE, cwd=cwd, preexec_fn=umask_022
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return proc.wait(timeout=300), out.decode(), err


def _run_dirs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.rglob("config.yaml"))


def _curve(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "wall_time"} for r in rows]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The same 6-update run twice: stdout a pipe (a log), then a terminal."""
    runs = {}
    for mode in ("pipe", "tty"):
        cwd = tmp_path_factory.mktemp(mode)
        args = [*SMOKE, "experiment.total_env_steps=192", "experiment.log_every=2", "output_dir=o"]
        rc, out, err = _train(args, cwd, tty=mode == "tty")
        assert rc == 0, err[-3000:]
        (run_dir,) = _run_dirs(cwd / "o")
        runs[mode] = (out, run_dir)
    return runs


def test_output_without_terminal_has_progress_lines_summary_and_run_dir(two_runs):
    out, run_dir = two_runs["pipe"]
    assert "\r" not in out, "no progress bar in a log"
    progress = re.findall(r"update (\d+)/6 .* steps/s .*train JCT .*collisions/step", out)
    assert progress == ["2", "4", "6"], out  # every experiment.log_every=2 updates
    summary = json.loads((run_dir / "eval.json").read_text())["summary"]
    line = next(s for s in out.splitlines() if "held-out evaluation" in s)
    assert line.startswith("mappo@edge10-v1 seed 0: held-out evaluation (1 seed x 1 episode")
    assert f"jct_mean {summary['jct_mean']:.2f}" in line, line
    assert f"run directory: {run_dir.resolve()}" in out.splitlines()
    assert out.index("held-out evaluation") < out.index("run directory:")


def test_terminal_gets_a_bar_and_the_same_results(two_runs):
    out_tty, dir_tty = two_runs["tty"]
    _, dir_pipe = two_runs["pipe"]
    assert "%|" in out_tty and "\r" in out_tty, "a progress bar on a terminal"
    assert not re.search(r"update \d+/6 ", out_tty), "no plain progress lines under the bar"
    assert "held-out evaluation" in out_tty and f"run directory: {dir_tty.resolve()}" in out_tty
    # the console never changes the results
    assert _curve(dir_tty) == _curve(dir_pipe)
    evals = [json.loads((d / "eval.json").read_text()) for d in (dir_tty, dir_pipe)]
    assert evals[0]["summary"] == evals[1]["summary"]
    assert evals[0]["config_hash"] == evals[1]["config_hash"]


def test_run_files_follow_the_umask(two_runs):
    _, run_dir = two_runs["pipe"]
    for name in ("config.yaml", "metrics.jsonl", "eval.json", "policy.pt", "checkpoints/last.pt"):
        assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o644, name


def _assert_config_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 2, err
    assert "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


def test_bad_trace_file_leaves_no_run_directory(tmp_path):
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    args = ["experiment=smoke", "env=edge50-trace", "env.trace.path=bad.csv", "output_dir=o"]
    rc, _, err = _train(args, tmp_path)
    _assert_config_error(rc, err, "bad.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv"]


def test_resume_from_a_path_that_is_no_run_leaves_nothing(tmp_path):
    rc, _, err = _train([*SMOKE, "output_dir=o", f"resume={tmp_path / 'nope'}"], tmp_path)
    _assert_config_error(rc, err, str(tmp_path / "nope"), "does not exist")
    assert list(tmp_path.iterdir()) == [], "not even an empty directory skeleton"


@pytest.mark.parametrize("damage", ["truncated", "garbage", "wrong_content"])
def test_damaged_checkpoint_is_named_on_resume(tmp_path, damage):
    import torch

    rc, _, err = _train([*SMOKE, "output_dir=o"], tmp_path)
    assert rc == 0, err
    (run_dir,) = _run_dirs(tmp_path / "o")
    (run_dir / "eval.json").unlink()  # as if killed after a checkpoint
    ckpt = run_dir / "checkpoints" / "last.pt"
    if damage == "truncated":
        ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    elif damage == "garbage":
        ckpt.write_bytes(b"not a checkpoint")
    else:
        torch.save({"weights": [1, 2, 3]}, ckpt)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    rc, _, err = _train([*SMOKE, "output_dir=o", f"resume={run_dir}"], tmp_path)
    _assert_config_error(rc, err, str(ckpt), "Delete it")
    after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    assert after == before, "nothing written on a failed resume"
    assert _run_dirs(tmp_path / "o") == [run_dir]


def test_resume_restarts_a_run_killed_before_its_first_checkpoint(tmp_path):
    rc, _, err = _train([*SMOKE, "output_dir=o"], tmp_path)
    assert rc == 0, err
    (run_dir,) = _run_dirs(tmp_path / "o")
    reference = _curve(run_dir)
    # what a kill before the first checkpoint leaves: the config, maybe a first metrics line
    for name in ("eval.json", "policy.pt", "checkpoints/last.pt"):
        (run_dir / name).unlink()
    lines = (run_dir / "metrics.jsonl").read_text().splitlines(keepends=True)
    (run_dir / "metrics.jsonl").write_text(lines[0])
    rc, out, err = _train([*SMOKE, "output_dir=o", "resume=true"], tmp_path)
    assert rc == 0, err
    assert f"{run_dir.resolve()} stopped before its first checkpoint; starting it afresh" in out
    assert _run_dirs(tmp_path / "o") == [run_dir], "no second directory, no orphan"
    assert (run_dir / "eval.json").is_file()
    assert _curve(run_dir) == reference


def test_default_interval_prints_a_readable_number_of_lines():
    import io

    from edgesched.experiment.console import TrainingConsole, log_interval

    for n_updates in (1, 2, 292, 4882):  # smoke, default edge50, paper budgets
        lines = -(-n_updates // log_interval(0, n_updates))
        assert lines <= 30 and lines >= min(n_updates, 10), (n_updates, lines)
    assert log_interval(7, 292) == 7
    stream = io.StringIO()  # not a terminal: plain lines, never a bar
    console = TrainingConsole("x", n_updates=5, per_update=10, log_every=2, stream=stream)
    console.start(0, 0, 0.0)
    for u in range(1, 6):
        console.update({"update": u, "env_steps": 10 * u, "wall_time": 0.5 * u})
    console.finish({"jct_mean": 12.345, "jobs_done": 3.0}, seeds=2, episodes=1, run_dir="r")
    out = stream.getvalue().splitlines()
    assert [line.split()[2] for line in out[:3]] == ["2/5", "4/5", "5/5"]
    assert "20 steps/s" in out[0] and "train JCT -" in out[0]
    assert out[3] == (
        "x: held-out evaluation (2 seeds x 1 episode, means): jct_mean 12.35  jobs_done 3"
    )
    assert out[4] == f"run directory: {Path('r').resolve()}"
