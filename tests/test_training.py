"""Training runs end to end: run files, smoke training of every (algorithm, scenario) pair,
exact resume after SIGKILL, determinism, NaN handling, wandb offline logging."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import scenario_params
from omegaconf import OmegaConf

pytest.importorskip("torch")

from edgesched import ConfigError
from edgesched.algos import AlgorithmConfig, algo_config, get_algorithm, list_algorithms
from edgesched.experiment import ExperimentConfigError, run
from edgesched.experiment.schema import EnvConfig, TrainConfig

REPO = Path(__file__).resolve().parents[1]


def make_cfg(run_dir: Path, algo: str = "mappo", env: str = "edge10", **exp) -> OmegaConf:
    # an unregistered name gets the keys every algorithm has (validation must name it)
    typed = algo_config(algo) if algo in list_algorithms() else AlgorithmConfig(name=algo)
    cfg = OmegaConf.structured(TrainConfig(algo=typed, env=EnvConfig(name=env)))
    if "hidden" in cfg.algo:
        cfg.algo.hidden = [32, 32]
    cfg.experiment.total_env_steps = 64
    cfg.experiment.num_envs = 2
    cfg.experiment.rollout_steps = 16
    cfg.experiment.checkpoint_every = 1
    cfg.experiment.checkpoint_min_seconds = 0  # a checkpoint after every update
    cfg.experiment.eval_seeds = [10_000]
    cfg.experiment.env_max_slots = 30
    for k, v in exp.items():
        OmegaConf.update(cfg, k if k in ("seed", "resume") else f"experiment.{k}", v)
    cfg.run_dir = str(run_dir)
    return cfg


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def without_time(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "wall_time"} for r in rows]


def smoke_pairs() -> list[tuple[str, str]]:
    """(algorithm, shield) pairs from the registry's flags: unshielded where the algorithm
    runs without a shield, else with each registered shield (srole: central and regional)."""
    from edgesched.shields import list_shields

    pairs = []
    for name in list_algorithms():
        entry = get_algorithm(name)
        shields = entry.shields(list_shields())
        pairs += [(name, s) for s in (["none"] if "none" in shields else shields)]
    return pairs


SMOKE_PAIRS = smoke_pairs()


@pytest.mark.parametrize(("algo", "shield"), SMOKE_PAIRS, ids=lambda x: str(x))
@pytest.mark.parametrize("scenario", scenario_params())
def test_smoke_training_every_pair(tmp_path, algo, shield, scenario):
    cfg = make_cfg(tmp_path / "run", algo=algo, env=scenario)
    cfg.shield.name = shield
    if "learning_starts" in cfg.algo:  # off-policy (dqn_central): learn within the budget
        cfg.algo.learning_starts = 16
    # tiny held-out episodes keep the smoke test fast; the record format is the same
    cfg.env.overrides = {"max_slots": 20, "max_steps": 200}
    summary = run(cfg)
    run_dir = tmp_path / "run"
    assert {"config.yaml", "metrics.jsonl", "eval.json", "checkpoints"} <= {
        p.name for p in run_dir.iterdir()
    }
    rows = read_metrics(run_dir)
    assert [r["update"] for r in rows] == [1, 2]
    assert rows[-1]["env_steps"] == 64
    record = json.loads((run_dir / "eval.json").read_text())
    assert record["algo"] == algo and record["scenario"].startswith(scenario + "-v")
    assert record["shield"] == shield
    if shield != "none":
        assert "interventions_per_step" in rows[-1]
        assert "shield_latency_ms" in record["summary"]
    if algo == "dqn_central":
        assert record["summary"]["head_decisions_per_slot"] > 0
    assert record["eval_seeds"] == [10_000] and len(record["per_episode"]) == 1
    assert record["summary"]["jct_mean"] == pytest.approx(summary["jct_mean"])
    ep = record["per_episode"][0]
    assert np.isfinite(summary["jct_mean"]) and ep["jobs_done"] + ep["jobs_unfinished"] > 0
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl"):
        if key in rows[-1]:  # the PPO learners log these; the DQN head logs its own
            assert np.isfinite(rows[-1][key]), (key, rows[-1][key])
    assert len(record["config_hash"]) == 12 and record["git_commit"]
    assert not list(run_dir.rglob(".*.tmp"))


def test_same_seed_same_learning_curve(tmp_path):
    a = make_cfg(tmp_path / "a", total_env_steps=96)
    b = make_cfg(tmp_path / "b", total_env_steps=96)
    run(a)
    run(b)
    ra, rb = without_time(read_metrics(tmp_path / "a")), without_time(read_metrics(tmp_path / "b"))
    assert ra == rb and len(ra) == 3
    c = make_cfg(tmp_path / "c", total_env_steps=96, seed=1)
    run(c)
    assert without_time(read_metrics(tmp_path / "c")) != ra


def untimed(row: dict) -> dict:
    """``row`` without measured wall-clock quantities (times, rates), which no rerun repeats."""
    from edgesched.leaderboard.validate import WALL_CLOCK_METRICS

    timed = {*WALL_CLOCK_METRICS, "wall_time", "decisions_per_s"}
    return {k: v for k, v in row.items() if k not in timed}


@pytest.mark.parametrize(("algo", "shield"), SMOKE_PAIRS, ids=lambda x: str(x))
def test_variant_label_changes_only_the_name(tmp_path, algo, shield):
    """``algo.variant`` names a run and nothing else: a budget study's run at the board's
    budget is the board entry (``python -m edgesched.leaderboard promote`` relies on it)."""
    import torch

    records, weights = [], []
    for variant in ("", "b1k"):
        cfg = make_cfg(tmp_path / (variant or "plain"), algo=algo, curve_every=1)
        cfg.shield.name = shield
        cfg.algo.variant = variant
        if "learning_starts" in cfg.algo:
            cfg.algo.learning_starts = 16
        cfg.env.overrides = {"max_slots": 20, "max_steps": 200}
        run(cfg)
        run_dir = tmp_path / (variant or "plain")
        record = json.loads((run_dir / "eval.json").read_text())
        records.append((record, [untimed(r) for r in read_metrics(run_dir)]))
        weights.append(torch.load(run_dir / "policy.pt", map_location="cpu", weights_only=True))
    (plain, plain_rows), (labelled, labelled_rows) = records
    assert labelled["algo"] == f"{algo}-b1k" and plain["algo"] == algo
    assert labelled_rows == plain_rows
    for key in ("per_episode", "summary", "curve", "train_seed", "eval_seeds", "env_overrides"):
        got, want = labelled[key], plain[key]
        if key == "summary":
            got, want = untimed(got), untimed(want)
        elif key == "per_episode":
            got, want = [untimed(e) for e in got], [untimed(e) for e in want]
        assert got == want, key
    assert labelled["train"]["env_steps"] == plain["train"]["env_steps"]

    def tensors(obj, path=""):
        if isinstance(obj, torch.Tensor):
            yield path, obj
        elif isinstance(obj, dict):
            for k in sorted(obj, key=str):
                yield from tensors(obj[k], f"{path}.{k}")

    a, b = dict(tensors(weights[0])), dict(tensors(weights[1]))
    assert a.keys() == b.keys() and a
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert weights[1]["algo"]["variant"] == "b1k"


@pytest.mark.parametrize("algo", ["mappo", "dqn_central", "dqn_central:copies=2"])
def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path, algo):
    """Killed at any instant and resumed, a run's curve and record equal an uninterrupted
    run's (``dqn_central``: its replay buffer, exploration and SB3 counters included; with
    two heads, the batched simulator and both heads' episodes too)."""
    updates = 12
    steps = updates * 2 * 16
    algo, _, copies = algo.partition(":copies=")

    def cfg_for(path, **kw):
        cfg = make_cfg(path, algo=algo, total_env_steps=steps, **kw)
        if "learning_starts" in cfg.algo:  # learn from the buffer within the budget
            cfg.algo.learning_starts = 48
        if copies:
            cfg.algo.copies = int(copies)
        return cfg

    ref = cfg_for(tmp_path / "ref")
    run(ref)
    reference = [untimed(r) for r in read_metrics(tmp_path / "ref")]
    assert len(reference) == updates

    killed = tmp_path / "killed"
    cfg_dict = OmegaConf.to_container(cfg_for(killed))
    code = (
        "from omegaconf import OmegaConf\n"
        "from edgesched.experiment import run\n"
        f"run(OmegaConf.create({cfg_dict!r}))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    deadline = time.time() + 120
    while time.time() < deadline:
        ok = (killed / "metrics.jsonl").exists() and len(read_metrics(killed)) >= 4
        if ok or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "training finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # whatever instant the kill hit, every result file is whole
    partial = read_metrics(killed)
    assert 4 <= len(partial) < updates
    assert not (killed / "eval.json").exists()

    resumed = cfg_for(killed, resume=True)
    run(resumed)
    final = [untimed(r) for r in read_metrics(killed)]
    assert [r["update"] for r in final] == list(range(1, updates + 1))  # no gaps, no repeats
    assert final == reference  # same RNG and env state: the same learning curve
    assert untimed(json.loads((killed / "eval.json").read_text())["summary"]) == untimed(
        json.loads((tmp_path / "ref" / "eval.json").read_text())["summary"]
    )


def test_a_new_run_never_overwrites_a_run_directory(tmp_path):
    """A new run into an explicit run_dir that holds a run is refused, its files untouched."""
    run(make_cfg(tmp_path / "r", total_env_steps=32))
    before = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    with pytest.raises(ExperimentConfigError, match=r"run_dir=.*already holds a run"):
        run(make_cfg(tmp_path / "r", total_env_steps=32, seed=1))
    assert {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()} == before


def test_resume_refuses_a_different_config(tmp_path):
    run(make_cfg(tmp_path / "r", total_env_steps=32))
    other = make_cfg(tmp_path / "r", total_env_steps=32, resume=True)
    other.algo.lr = 1e-3
    with pytest.raises(ExperimentConfigError, match="algo"):
        run(other)


def test_nan_loss_stops_with_clear_message_and_keeps_checkpoint(tmp_path, monkeypatch):
    import torch

    from edgesched.algos import mappo

    calls = {"n": 0}
    original = mappo.Critic.forward

    def poisoned(self, obs, state):
        calls["n"] += 1
        out = original(self, obs, state)
        return out * float("nan") if torch.is_grad_enabled() and calls["n"] > 40 else out

    monkeypatch.setattr(mappo.Critic, "forward", poisoned)
    cfg = make_cfg(tmp_path / "nan", total_env_steps=32 * 8)
    with pytest.raises(mappo.TrainingDivergedError, match="not finite at update"):
        run(cfg)
    ckpt = torch.load(tmp_path / "nan" / "checkpoints" / "last.pt", weights_only=False)
    assert ckpt["trainer"]["updates"] >= 1
    assert all(torch.isfinite(p).all() for p in ckpt["trainer"]["critic"].values()), (
        "the kept checkpoint must be the last good one"
    )
    assert not (tmp_path / "nan" / "eval.json").exists()
    assert len(read_metrics(tmp_path / "nan")) == ckpt["trainer"]["updates"]


def test_bad_config_writes_nothing(tmp_path):
    cfg = make_cfg(tmp_path / "bad", total_env_steps=-5)
    with pytest.raises(ExperimentConfigError, match=r"experiment\.total_env_steps"):
        run(cfg)
    assert not (tmp_path / "bad").exists()
    cfg = make_cfg(tmp_path / "bad", algo="nope")
    with pytest.raises(ExperimentConfigError, match=r"algo\.name"):
        run(cfg)
    assert not (tmp_path / "bad").exists()
    cfg = make_cfg(tmp_path / "bad")
    cfg.algo.target_kl = -0.01
    with pytest.raises(ExperimentConfigError, match=r"algo\.target_kl=-0\.01.*>= 0"):
        run(cfg)
    assert not (tmp_path / "bad").exists()
    # the workload is read before the first file is written (it used to leave config.yaml)
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    cfg = make_cfg(tmp_path / "bad", env="edge50-trace")
    cfg.env.trace.path = str(tmp_path / "bad.csv")
    with pytest.raises(ConfigError, match=r"bad\.csv"):
        run(cfg)
    assert not (tmp_path / "bad").exists()


def test_resume_restarts_a_run_stopped_before_its_first_checkpoint(tmp_path):
    ref = make_cfg(tmp_path / "ref")
    run(ref)
    stopped = tmp_path / "stopped"
    stopped.mkdir()
    (stopped / "config.yaml").write_text((tmp_path / "ref" / "config.yaml").read_text())
    (stopped / "metrics.jsonl").write_text('{"update": 1}\n')  # the killed attempt's line
    run(make_cfg(stopped, resume=True))
    assert without_time(read_metrics(stopped)) == without_time(read_metrics(tmp_path / "ref"))
    # a run of another configuration is not restarted in its place
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.yaml").write_text((tmp_path / "ref" / "config.yaml").read_text())
    cfg = make_cfg(tmp_path / "x", seed=1, resume=str(other))
    with pytest.raises(ExperimentConfigError, match=r"differs .*\['seed'\]"):
        run(cfg)
    assert sorted(p.name for p in other.iterdir()) == ["config.yaml"]


def test_log_every_changes_neither_results_nor_the_record_hash(tmp_path, capsys):
    a = make_cfg(tmp_path / "a", total_env_steps=96)
    b = make_cfg(tmp_path / "b", total_env_steps=96, log_every=1)
    run(a)
    assert capsys.readouterr().out.count(" steps/s ") == 3  # 3 updates, 20 lines at most
    run(b)
    assert capsys.readouterr().out.count(" steps/s ") == 3
    records = [json.loads((tmp_path / d / "eval.json").read_text()) for d in ("a", "b")]
    assert records[0]["config_hash"] == records[1]["config_hash"]
    assert records[0]["summary"] == records[1]["summary"]
    # resuming with another log_every is allowed: it is not part of the run's configuration
    run(make_cfg(tmp_path / "a", total_env_steps=96, log_every=5, resume=True))


def test_checkpoint_min_seconds_spaces_checkpoints_without_changing_results(tmp_path, monkeypatch):
    import torch

    import edgesched.experiment.runner as runner_mod

    writes: list[str] = []
    real = runner_mod.atomic_write_with  # checkpoints stream through it

    def counting(path, write):
        writes.append(Path(path).name)
        real(path, write)

    monkeypatch.setattr(runner_mod, "atomic_write_with", counting)
    run(make_cfg(tmp_path / "a", total_env_steps=96))  # 3 updates, min 0 s
    assert writes.count("last.pt") == 3
    writes.clear()
    run(make_cfg(tmp_path / "b", total_env_steps=96, checkpoint_min_seconds=1e9))
    assert writes.count("last.pt") == 1  # the periodic ones wait; the last update's is kept
    records = [json.loads((tmp_path / d / "eval.json").read_text()) for d in ("a", "b")]
    assert records[0]["config_hash"] == records[1]["config_hash"]
    assert records[0]["summary"] == records[1]["summary"]
    assert without_time(read_metrics(tmp_path / "a")) == without_time(read_metrics(tmp_path / "b"))
    ckpt = torch.load(tmp_path / "b" / "checkpoints" / "last.pt", weights_only=False)
    assert ckpt["trainer"]["updates"] == 3
    # not part of the run's configuration: resuming with another value is allowed
    run(make_cfg(tmp_path / "b", total_env_steps=96, checkpoint_min_seconds=5, resume=True))


def test_checkpoint_min_seconds_is_validated(tmp_path):
    with pytest.raises(ExperimentConfigError, match=r"experiment\.checkpoint_min_seconds=-1"):
        run(make_cfg(tmp_path / "a", checkpoint_min_seconds=-1))
    assert not (tmp_path / "a").exists()


def read_wandb_summary(run_file: Path, wait_s: float = 60.0) -> dict:
    """Merge the summary records of an offline ``run-*.wandb`` file.

    The file is wandb's LevelDB-style log of protobuf ``Record``s: a 7-byte header, then
    32 KiB blocks of chunks with a (crc32, length, type) header; wandb ships no reader.
    ``run.finish()`` can return before wandb's service process has flushed the file (seen on
    a loaded machine), so this waits for the run's ``exit`` record, up to ``wait_s``.
    """
    from wandb.proto import wandb_internal_pb2 as pb

    deadline = time.monotonic() + wait_s
    while True:
        records = _wandb_records(run_file.read_bytes())
        kinds = []
        for raw in records:
            rec = pb.Record()
            rec.ParseFromString(raw)
            kinds.append(rec.WhichOneof("record_type"))
        if "exit" in kinds or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    summary: dict = {}
    for raw in records:
        rec = pb.Record()
        rec.ParseFromString(raw)
        if rec.WhichOneof("record_type") == "summary":
            for item in rec.summary.update:
                summary[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return summary


def _wandb_records(data: bytes) -> list[bytes]:
    """The complete records of a ``.wandb`` file's bytes (a partial tail is left out)."""
    if data[:4] != b":W&B":  # not written yet
        return []
    pos, block, buf, records = 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # block trailer padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0:
            break
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4) and len(chunk) == length:
            records.append(buf)
    return records


def test_wandb_offline_run_holds_summary(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = make_cfg(tmp_path / "w", total_env_steps=64)
    cfg.logger.name = "wandb"  # mode offline by default
    summary = run(cfg)
    files = list((tmp_path / "w").rglob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, "one wandb offline run inside the run directory"
    logged = read_wandb_summary(files[0])
    assert "eval/jct_mean" in logged, f"summary keys in the run file: {sorted(logged)}"
    assert logged["eval/jct_mean"] == pytest.approx(summary["jct_mean"])
    assert logged["_step"] == 2  # both updates' curves were logged
    assert "reward_mean" in logged and "policy_loss" in logged


def test_trained_policy_actions_are_always_feasible(tmp_path):
    """The masked actor never proposes an infeasible action, sampling or greedy."""
    from edgesched.envs.core import EdgeClusterSim
    from edgesched.envs.scenarios import make_config
    from edgesched.experiment.evaluation import load_policy

    run(make_cfg(tmp_path / "m", total_env_steps=64))
    policy, _, _ = load_policy(str(tmp_path / "m" / "policy.pt"))
    sim = EdgeClusterSim(make_config("edge10", max_slots=60))
    sim.reset(10_000)
    rows = np.arange(sim.num_agents)
    placed = 0
    while not (sim.terminated or sim.truncated):
        for greedy in (False, True):
            a, _ = policy.trainer.act(sim.obs, sim.mask, greedy=greedy)
            assert sim.mask[rows, a].all()
        placed += int((a > 0).sum())
        sim.step(a)
    assert placed > 0  # the check saw real placements, not only defers


def test_saved_policy_reproduces_the_evaluation(tmp_path):
    from edgesched.experiment.evaluation import evaluate_scheduler, load_policy

    cfg = make_cfg(tmp_path / "p", total_env_steps=64)
    cfg.env.overrides = {"max_slots": 40}
    summary = run(cfg)
    policy, env, overrides = load_policy(str(tmp_path / "p" / "policy.pt"))
    assert env == "edge10-v1" and overrides == {"max_slots": 40}
    again = evaluate_scheduler(policy, env, overrides, [10_000], 1)["summary"]
    assert again == pytest.approx(summary, nan_ok=True)


def test_dqn_central_policy_file_reproduces_its_evaluation(tmp_path):
    from edgesched.experiment.evaluation import load_policy

    cfg = make_cfg(tmp_path / "run", algo="dqn_central", total_env_steps=256)
    cfg.algo.learning_starts = 32
    summary = run(cfg)
    head, env, overrides = load_policy(str(tmp_path / "run" / "policy.pt"))
    again = head.evaluate(env, overrides, [10_000], 1)["summary"]
    assert again["jct_mean"] == summary["jct_mean"]
    assert again["head_decisions_per_slot"] == summary["head_decisions_per_slot"] > 0


def test_variant_names_the_entry_in_the_record(tmp_path):
    """Ablations get their own leaderboard rows: record algo = '<name>-<variant>'."""
    cfg = make_cfg(tmp_path / "v", algo="tapfinger", env="edge10", total_env_steps=32)
    cfg.algo.graph_attention = False
    cfg.algo.variant = "noattn"
    run(cfg)
    record = json.loads((tmp_path / "v" / "eval.json").read_text())
    assert record["algo"] == "tapfinger-noattn"
    from edgesched.experiment.evaluation import load_policy

    trainer, _, _ = load_policy(str(tmp_path / "v" / "policy.pt"))
    assert len(trainer.trainer.actor.backbone.convs) == 0  # the ablation's network reloads


@pytest.mark.parametrize("name", ["mappo", "ippo", "srole"])
def test_feature_norm_normalizes_actor_and_critic_inputs(name):
    """``algo.feature_norm``: a LayerNorm in front of the actor and of each critic input.

    At initialization (unit weight, zero bias) the actor's logits then ignore a positive
    rescaling and a shift of an agent's whole observation, which is what the option is for:
    blocks of very different scales (queue lengths / 10 are unbounded) cannot dominate.
    """
    import torch
    from torch import nn

    import edgesched
    from edgesched.algos import algo_config, make_trainer
    from edgesched.policy import EnvSpec

    sim = edgesched.make_parallel("edge10", max_slots=30).sim
    sim.reset(seed=0)
    spec = EnvSpec.of(sim)
    shield = "central" if name == "srole" else "none"
    plain = make_trainer(name, algo_config(name), spec, 0, shield, {})
    normed = make_trainer(name, algo_config(name, feature_norm=True), spec, 0, shield, {})
    assert not any(isinstance(m, nn.LayerNorm) for m in plain.actor.modules())
    assert isinstance(normed.actor[0], nn.LayerNorm)
    assert isinstance(normed.critic.enc_obs[0], nn.LayerNorm)
    if name == "ippo":
        assert normed.critic.enc_state is None
    else:
        assert isinstance(normed.critic.enc_state[0], nn.LayerNorm)
    obs = torch.from_numpy(sim.obs)
    with torch.no_grad():
        a, b = normed.actor(obs), normed.actor(3.0 * obs + 2.0)
        c, d = plain.actor(obs), plain.actor(3.0 * obs + 2.0)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(c, d, rtol=1e-4, atol=1e-5)
    acts, logp = normed.act(sim.obs, sim.mask)
    assert sim.mask[np.arange(len(acts)), acts].all() and np.isfinite(logp).all()


@pytest.mark.parametrize("name", ["mappo", "ippo", "srole"])
def test_team_reward_trains_on_the_agents_mean_reward(name):
    """``algo.team_reward``: every agent learns from the mean of the agents' rewards.

    The same seed and initial network give the same rollout; only the learning signal
    differs. (SROLE's collision penalty, the agent's own, is set to 0 so that the mean is
    all that is left; no episode ends within the rollout, so no value is bootstrapped.)
    """
    from edgesched.algos import make_trainer
    from edgesched.algos.common import VecSim
    from edgesched.envs.scenarios import make_config
    from edgesched.policy import EnvSpec

    shield = "central" if name == "srole" else "none"
    batches = {}
    for team in (False, True):
        vec = VecSim(make_config("tapfinger-hetero6", max_slots=40), 2, 0, "tapfinger-hetero6")
        extra = {"collision_penalty": 0.0} if name == "srole" else {}
        cfg = algo_config(name, team_reward=team, **extra)
        trainer = make_trainer(name, cfg, EnvSpec.of(vec.sim), 0, shield, {})
        batches[team] = trainer.collect(vec, 16)
    local, team = batches[False]["rewards"], batches[True]["rewards"]
    np.testing.assert_array_equal(batches[False]["actions"], batches[True]["actions"])
    assert (local != local[..., :1]).any(), "fixture: agents' own rewards never differ"
    want = np.repeat(local.mean(-1, keepdims=True), local.shape[-1], -1)
    np.testing.assert_allclose(team, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["mappo", "ippo", "srole", "tapfinger"])
def test_the_default_reward_follows_the_scenario(name):
    """``team_reward=None``: the mean on tapfinger-hetero6, each agent's own on the edge boards."""
    from edgesched.algos import make_trainer
    from edgesched.envs.core import EdgeClusterSim
    from edgesched.envs.scenarios import make_config
    from edgesched.policy import EnvSpec

    shield = "central" if name == "srole" else "none"
    cfg = algo_config(name)
    assert cfg.team_reward is None
    for scenario, overrides, team in (
        ("tapfinger-hetero6", {}, True),
        ("tapfinger-hetero6", {"waiting_charge": "every_viewer"}, False),
        ("edge10", {}, False),
    ):
        spec = EnvSpec.of(EdgeClusterSim(make_config(scenario, **overrides)))
        trainer = make_trainer(name, cfg, spec, 0, shield, {})
        assert trainer.team_reward is team, (scenario, overrides)
        assert cfg.for_scenario(spec.config).team_reward is team


def test_the_policy_file_stores_the_reward_the_default_resolved_to(tmp_path):
    """``team_reward: null`` in the run's config; the policy says which reward it learned."""
    import torch

    for env, team in (("edge10", False), ("tapfinger-hetero6", True)):
        cfg = make_cfg(tmp_path / env, env=env, total_env_steps=32)
        assert cfg.algo.team_reward is None
        run(cfg)
        written = OmegaConf.load(tmp_path / env / "config.yaml")
        assert written.algo.team_reward is None  # the configuration as given (its hash)
        stored = torch.load(tmp_path / env / "policy.pt", map_location="cpu", weights_only=True)
        assert stored["algo"]["team_reward"] is team, env


def test_resume_names_a_checkpoint_from_before_the_batched_trainers(tmp_path):
    """A checkpoint whose VecSim held separate simulators (before 4775351) is refused by name."""
    import pickle

    import torch

    from edgesched.algos.common import VecSim

    cfg = make_cfg(tmp_path / "r", total_env_steps=32)
    run(cfg)
    (tmp_path / "r" / "eval.json").unlink()  # as if killed after its checkpoint
    ckpt_path = tmp_path / "r" / "checkpoints" / "last.pt"
    ckpt = torch.load(ckpt_path, weights_only=False)
    old = object.__new__(VecSim)  # the earlier layout: a list of lone simulators
    old.__dict__.update(sims=[], seed=0, episodes=np.zeros(2, dtype=np.int64), num_envs=2)
    ckpt["vec"] = pickle.dumps(old)
    torch.save(ckpt, ckpt_path)
    before = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    with pytest.raises(
        ExperimentConfigError, match=r"earlier edgesched \(commit \w+\).*resume=false"
    ):
        run(make_cfg(tmp_path / "r", total_env_steps=32, resume=True))
    after = {p: p.read_bytes() for p in (tmp_path / "r").rglob("*") if p.is_file()}
    assert after == before, "nothing written on a refused resume"


def test_anneal_lr_and_target_kl_reach_the_update(tmp_path):
    """The PPO options travel from the config to every update's log."""
    cfg = make_cfg(tmp_path / "run", total_env_steps=128)
    cfg.algo.anneal_lr = True
    cfg.algo.target_kl = 1e-9  # any movement of the policy stops the update's epochs
    run(cfg)
    rows = read_metrics(tmp_path / "run")
    lrs = [r["lr"] for r in rows]
    assert len(rows) == 4 and lrs[0] == pytest.approx(cfg.algo.lr)
    assert lrs == sorted(lrs, reverse=True) and lrs[-1] == pytest.approx(cfg.algo.lr / 4)
    assert all(r["ppo_epochs"] == 1 for r in rows)


@pytest.mark.parametrize("name", ["mappo", "ippo", "srole"])
def test_policy_rows_choice_changes_only_the_update(name):
    """``algo.policy_rows``: the same rollout either way; ``choice`` updates the actor from the
    rows with a choice (a different step when forced rows exist), the critic as before."""
    import torch

    from edgesched.algos import make_trainer
    from edgesched.algos.common import VecSim
    from edgesched.envs.scenarios import make_config
    from edgesched.policy import EnvSpec

    shield = "central" if name == "srole" else "none"
    out = {}
    for rows in ("all", "choice"):
        vec = VecSim(make_config("edge10", max_slots=40), 2, 0, "edge10")
        trainer = make_trainer(
            name, algo_config(name, policy_rows=rows), EnvSpec.of(vec.sim), 0, shield, {}
        )
        batch = trainer.collect(vec, 16)
        stats = trainer.update(batch, 0.5)
        out[rows] = (batch, trainer, stats)
    (b_all, t_all, s_all), (b_ch, t_ch, s_ch) = out["all"], out["choice"]
    np.testing.assert_array_equal(b_all["actions"], b_ch["actions"])
    forced = (b_all["mask"].sum(-1) == 1).mean()
    assert 0 < forced < 1, "fixture: needs forced and choice rows"
    w_all = torch.cat([p.detach().flatten() for p in t_all.actor.parameters()])
    w_ch = torch.cat([p.detach().flatten() for p in t_ch.actor.parameters()])
    assert not torch.equal(w_all, w_ch)
    # over the choice rows only, the mean KL is larger than the all-row mean dilutes it to
    assert s_ch["approx_kl"] > s_all["approx_kl"]


class _Stop(Exception):
    """Raised by :func:`_stopped_after_two_checkpoints`: a run killed at that point."""


def _stopped_after_two_checkpoints(run_dir: Path, monkeypatch) -> dict:
    """Train 4 updates into ``run_dir``, stopped after its second checkpoint; its checkpoint."""
    import torch

    from edgesched.experiment import runner

    write, saved = runner.atomic_write_with, []

    def stop_after_two_checkpoints(path, fn):
        write(path, fn)
        saved.append(path.name)
        if saved.count("last.pt") == 2:
            raise _Stop

    monkeypatch.setattr(runner, "atomic_write_with", stop_after_two_checkpoints)
    with pytest.raises(_Stop):
        run(make_cfg(run_dir, total_env_steps=32 * 4))
    monkeypatch.setattr(runner, "atomic_write_with", write)
    return torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)


def test_resume_accepts_a_checkpoint_written_before_an_option_existed(tmp_path, monkeypatch):
    """A checkpoint whose config predates a key (here ``policy_rows``) resumes when the key
    is at its default (the class's default keeps the stored behaviour) and is refused when
    it is not; resumed halfway, the run's record equals an uninterrupted run's."""
    import torch

    ref = tmp_path / "ref"
    run(make_cfg(ref, total_env_steps=32 * 4))
    r = tmp_path / "r"
    ckpt = _stopped_after_two_checkpoints(r, monkeypatch)
    ckpt_path = r / "checkpoints" / "last.pt"
    assert ckpt["trainer"]["updates"] == 2 and not (r / "eval.json").exists()
    assert ckpt["config"]["algo"].pop("policy_rows") == "all"
    torch.save(ckpt, ckpt_path)

    changed = make_cfg(r, total_env_steps=32 * 4, resume=True)
    changed.algo.policy_rows = "choice"
    with pytest.raises(ExperimentConfigError, match=r"differs from the checkpoint's in \['algo'\]"):
        run(changed)
    run(make_cfg(r, total_env_steps=32 * 4, resume=True))
    assert [m["update"] for m in read_metrics(r)] == [1, 2, 3, 4]
    assert without_time(read_metrics(r)) == without_time(read_metrics(ref))
    got = json.loads((r / "eval.json").read_text())
    want = json.loads((ref / "eval.json").read_text())
    assert untimed(got["summary"]) == untimed(want["summary"])


@pytest.mark.parametrize("stored", ["commits", "legacy"])
def test_the_record_names_the_code_that_trained_each_update(tmp_path, monkeypatch, capsys, stored):
    """``train.commits``: one entry for a run trained by one code version; a run resumed
    under other code lists both, with the updates each trained (a checkpoint from before
    the key existed: its updates' commit is not known, ``None``); the resumed run says so."""
    import torch

    from edgesched.experiment import runner

    monkeypatch.setattr(runner, "git_commit", lambda: "c" * 40)
    whole = tmp_path / "whole"
    run(make_cfg(whole, total_env_steps=32 * 4))
    got = json.loads((whole / "eval.json").read_text())["train"]["commits"]
    assert got == [{"commit": "c" * 40, "updates": [0, 4]}]

    r = tmp_path / "r"
    monkeypatch.setattr(runner, "git_commit", lambda: "a" * 40)
    ckpt = _stopped_after_two_checkpoints(r, monkeypatch)
    ckpt_path = r / "checkpoints" / "last.pt"
    assert ckpt["commits"] == [{"commit": "a" * 40, "updates": [0, 2]}]
    first = "a" * 40
    if stored == "legacy":
        del ckpt["commits"]
        torch.save(ckpt, ckpt_path)
        first = None
    # resumed under other code
    monkeypatch.setattr(runner, "git_commit", lambda: "b" * 40)
    capsys.readouterr()
    run(make_cfg(r, total_env_steps=32 * 4, resume=True))
    said = capsys.readouterr()
    assert "updates 1-2 were trained by commit " + ("a" * 12 if first else "unknown") in (
        said.out + said.err
    )
    got = json.loads((r / "eval.json").read_text())["train"]["commits"]
    assert got == [
        {"commit": first, "updates": [0, 2]},
        {"commit": "b" * 40, "updates": [2, 4]},
    ]
    # resumed again under the same code: the entry grows, no new one
    grown = {"commit": "b" * 40, "updates": [2, 6]}
    assert runner._add_commit(got, "b" * 40, 4, 6) == [got[0], grown]
