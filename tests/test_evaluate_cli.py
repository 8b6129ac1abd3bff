"""evaluate.py's command line and strict evaluation.

The command line answers ``--help``, accepts a run's ``seed<k>`` folder as well as a stamped
run, and never rewrites a run's files: each evaluation is a new record file. Evaluation
environments raise on invalid actions whatever the scenario's ``invalid_action`` default.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgesched import InvalidActionError
from edgesched.experiment.evaluation import (
    STRICT_OVERRIDES,
    evaluate_scheduler,
    make_eval_sim,
    make_record,
)
from edgesched.experiment.io import config_hash
from edgesched.policy import Scheduler

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("evaluate_cli", ROOT / "evaluate.py")
cli = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cli)


def _touch_run(path: Path, checkpoint: bool = True) -> Path:
    path.mkdir(parents=True)
    if checkpoint:
        (path / "checkpoints").mkdir()
        (path / "checkpoints" / "last.pt").write_bytes(b"")
    return path


# ------------------------------------------------------------------------------ help, usage
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_usage_where_it_writes_and_examples(flag, capsys):
    assert cli.main([flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python evaluate.py run_dir=")
    for needle in ("seed<k>", "evals/eval-<UTC stamp>.json", "never overwritten", "examples:"):
        assert needle in out, needle


def test_help_from_the_script_itself():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "evaluate.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: python evaluate.py" in proc.stdout and "expected key=value" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run_dir=x", "env=edge10"], "run_dir= takes only"),
        (["baseline=random", "env.overrides.invalid_action=defer"], "invalid_action"),
        (["baseline=random", "episodes=0"], "episodes must be a positive integer"),
        (["run_dir="], "run_dir=''"),
        (["baseline=random", "oops"], "expected key=value, got 'oops'"),
    ],
)
def test_bad_arguments_name_the_argument_and_exit_2(args, needle, capsys):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert needle in err and "usage:" in err and "Traceback" not in err


# ------------------------------------------------------------------------- run directories
def test_seed_folder_resolves_to_its_newest_run_with_a_checkpoint(tmp_path):
    seed = tmp_path / "seed0"
    _touch_run(seed / "20250101-120000")
    newest = _touch_run(seed / "20250102-090000")
    _touch_run(seed / "20250103-000000", checkpoint=False)  # newer, but nothing to evaluate
    run, note = cli.resolve_run_dir(seed)
    assert run == newest
    assert str(newest) in note and "newest of 2 runs" in note
    assert cli.resolve_run_dir(newest) == (newest, None)
    # multirun job folders: job10 is newer than job9
    jobs = tmp_path / "jobs"
    _touch_run(jobs / "job9")
    job10 = _touch_run(jobs / "job10")
    assert cli.resolve_run_dir(jobs)[0] == job10


def test_run_dir_without_any_checkpoint_is_a_usage_error(tmp_path, capsys):
    empty = tmp_path / "seed0"
    _touch_run(empty / "20250101-120000", checkpoint=False)
    with pytest.raises(cli.UsageError, match="neither it nor a folder inside it holds"):
        cli.resolve_run_dir(empty)
    assert cli.main([f"run_dir={tmp_path / 'missing'}"]) == 2
    assert "no such directory" in capsys.readouterr().err


def test_write_new_json_never_overwrites(tmp_path):
    path = tmp_path / "a" / "eval.json"
    cli.write_new_json(path, {"x": float("nan"), "y": np.float32(1.5)})
    assert json.loads(path.read_text()) == {"x": None, "y": 1.5}
    with pytest.raises(FileExistsError):
        cli.write_new_json(path, {"x": 2})
    assert json.loads(path.read_text())["x"] is None
    assert sorted(p.name for p in path.parent.iterdir()) == ["eval.json"]  # no temp left


def test_run_evaluation_writes_a_new_file_and_keeps_the_runs_eval_json(tmp_path, capsys):
    pytest.importorskip("torch")
    from omegaconf import OmegaConf

    from edgesched.experiment import run
    from edgesched.experiment.schema import AlgoConfig, EnvConfig, TrainConfig

    cfg = OmegaConf.structured(TrainConfig(algo=AlgoConfig(name="ippo"), env=EnvConfig("edge10")))
    cfg.algo.hidden = [16]
    cfg.experiment.total_env_steps = 32
    cfg.experiment.num_envs = 2
    cfg.experiment.rollout_steps = 16
    cfg.experiment.eval_seeds = [10_000]
    cfg.experiment.env_max_slots = 20
    seed_dir = tmp_path / "runs" / "edge10" / "ippo_none" / "seed0"
    run_dir = seed_dir / "20250101-120000"
    cfg.run_dir = str(run_dir)
    run(cfg)
    capsys.readouterr()  # the training console's output is not evaluate.py's
    original = (run_dir / "eval.json").read_bytes()
    assert "train" in json.loads(original)

    assert cli.main([f"run_dir={seed_dir}"]) == 0
    captured = capsys.readouterr()
    written = sorted((run_dir / "evals").iterdir())
    assert len(written) == 1 and written[0].name.startswith("eval-")
    assert f"evaluating {run_dir}" in captured.err and f"wrote {written[0]}" in captured.err
    fresh = json.loads(written[0].read_text())
    assert fresh["summary"] == json.loads(original)["summary"]  # same seeds, same numbers
    assert json.loads(captured.out) == pytest.approx(fresh["summary"])
    first = written[0].read_bytes()

    # again, other seeds: another new file; nothing of the run is rewritten
    assert cli.main([f"run_dir={run_dir}", "eval_seeds=[10001]"]) == 0
    now = sorted((run_dir / "evals").iterdir())
    assert len(now) == 2 and written[0].read_bytes() == first
    (second,) = set(now) - set(written)
    assert json.loads(second.read_text())["eval_seeds"] == [10001]
    assert (run_dir / "eval.json").read_bytes() == original

    # out= goes exactly there, and never over an existing file (the run's eval.json included)
    capsys.readouterr()
    assert cli.main([f"run_dir={run_dir}", f"out={run_dir / 'eval.json'}"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (run_dir / "eval.json").read_bytes() == original
    out = tmp_path / "elsewhere" / "mine.json"
    assert cli.main([f"run_dir={run_dir}", f"out={out}"]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    assert json.loads(out.read_text())["algo"] == "ippo"


# ------------------------------------------------------------------------ strict evaluation
class MaskedActionScheduler(Scheduler):
    """Emits a masked action for the first agent that has one (defers otherwise)."""

    name = "masked"

    def act(self, obs, mask, state, graph=None):
        a = np.zeros(len(mask), dtype=np.int64)
        for i, row in enumerate(mask):
            bad = np.flatnonzero(~row)
            if len(bad):
                a[i] = bad[0]
                break
        return a


@pytest.mark.parametrize("shield", ["none", "central", "regional"])
def test_evaluation_raises_on_a_masked_action_even_where_the_scenario_defers(shield):
    # the run's (or scenario's) own setting says defer; evaluation must not honour it
    overrides = {"invalid_action": "defer", "max_slots": 20}
    sim = make_eval_sim("edge10", overrides)
    assert sim.cfg.invalid_action == "raise"
    policy = MaskedActionScheduler(None)
    with pytest.raises(InvalidActionError, match="masked"):
        evaluate_scheduler(policy, "edge10", overrides, [10_000], 1, shield=shield)


def test_records_do_not_carry_the_strict_setting_and_hash_the_config_as_given():
    from edgesched.baselines import make_baseline
    from edgesched.policy import EnvSpec

    overrides = {"invalid_action": "defer", "max_slots": 10}
    policy = make_baseline("least_loaded", EnvSpec.of(make_eval_sim("edge10", overrides)))
    result = evaluate_scheduler(policy, "edge10", overrides, [10_000], 1)
    config = {"baseline": "least_loaded", "env": "edge10", "overrides": {"max_slots": 10}}
    rec = make_record(
        env_name="edge10",
        env_overrides=overrides,
        algo="least_loaded",
        shield="none",
        train_seed=None,
        eval_seeds=[10_000],
        episodes=1,
        result=result,
        config=config,
    )
    assert rec["env_overrides"] == {"max_slots": 10}
    assert rec["config_hash"] == config_hash(config)
    assert set(STRICT_OVERRIDES) == {"invalid_action"}


def test_cli_exits_1_and_writes_nothing_when_a_baseline_emits_a_masked_action(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("torch")
    from edgesched import baselines

    monkeypatch.setitem(baselines._REGISTRY, "masked", MaskedActionScheduler)
    out = tmp_path / "masked.json"
    args = ["baseline=masked", "env=edge10", "env.overrides.max_slots=20", "eval_seeds=[10000]"]
    assert cli.main([*args, f"out={out}"]) == 1
    err = capsys.readouterr().err
    assert "invalid action" in err and "nothing was written" in err and "Traceback" not in err
    assert not out.exists()
    assert cli.main([*args, f"output_dir={tmp_path / 'o'}"]) == 1
    assert not (tmp_path / "o").exists()
