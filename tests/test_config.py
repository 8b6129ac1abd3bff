"""Hydra layout (DESIGN §5): every config file composes and validates; bad configs fail early.

Composition is cheap, so every (algo, scenario) pair is composed and validated here; training
them end to end is the job of the runner's tests. Bad configurations run ``train.py`` in a
subprocess: non-zero exit, a message naming the key, and nothing under ``output_dir``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra")

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import edgesched
from edgesched.algos import list_algorithms
from edgesched.experiment import register_configs, validate
from edgesched.shields import list_shields

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
GROUPS = ("algo", "env", "shield", "logger", "experiment")
LAUNCHER_PLUGINS = {
    "joblib_local": "hydra_plugins.hydra_joblib_launcher",
    "slurm": "hydra_plugins.hydra_submitit_launcher",
    "ray_cluster": "hydra_plugins.hydra_ray_launcher",
}

register_configs()


def _compose(overrides: list[str], hydra_cfg: bool = False):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=hydra_cfg)


def _group_files() -> list[tuple[str, str]]:
    return [(g, p.stem) for g in GROUPS for p in sorted((CONF / g).glob("*.yaml"))]


def test_groups_mirror_the_registries():
    names = {g: sorted(p.stem for p in (CONF / g).glob("*.yaml")) for g in GROUPS}
    assert names["algo"] == list_algorithms()
    assert names["env"] == edgesched.list_scenarios()
    assert names["shield"] == list_shields()
    assert names["logger"] == ["none", "wandb"]
    assert names["experiment"] == ["default", "paper", "smoke"]


@pytest.mark.parametrize(("group", "name"), _group_files(), ids=lambda x: str(x))
def test_every_group_file_composes_against_its_schema(group, name):
    text = (CONF / group / f"{name}.yaml").read_text()
    assert f"- {group}_schema" in text, "each group file starts from its typed schema"
    cfg = _compose([f"{group}={name}"])
    assert OmegaConf.get_type(cfg[group]).__name__.endswith("Config")
    assert cfg[group].name == name
    validate(cfg)


def test_every_algo_scenario_pair_composes_and_validates():
    pairs = [(a, e) for a in list_algorithms() for e in edgesched.list_scenarios()]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for algo, env in pairs:
            cfg = compose("config", overrides=[f"algo={algo}", f"env={env}"])
            assert (cfg.algo.name, cfg.env.name) == (algo, env)
            validate(cfg)


def test_defaults_and_run_dir_layout():
    cfg = _compose([], hydra_cfg=True)
    assert (cfg.algo.name, cfg.env.name, cfg.shield.name, cfg.logger.name) == (
        "mappo",
        "edge50",
        "none",
        "none",
    )
    assert cfg.experiment.name == "default"
    assert cfg.hydra.output_subdir is None
    assert cfg.hydra.job.chdir is False
    assert "handlers" not in cfg.hydra.job_logging or "file" not in cfg.hydra.job_logging.handlers
    assert cfg.hydra.launcher._target_.endswith("JoblibLauncher")
    assert cfg.hydra.launcher.n_jobs == 2
    run_dir = OmegaConf.to_container(cfg.hydra.run, resolve=False)["dir"]
    assert run_dir.startswith("${output_dir}/runs/${env.name}/${algo.name}_${shield.name}/seed")


def test_smoke_budget_is_tiny_and_paper_budget_is_long():
    smoke = _compose(["experiment=smoke"]).experiment
    assert smoke.num_envs == 2 and smoke.rollout_steps == 16 and smoke.checkpoint_every == 1
    assert smoke.total_env_steps <= 2 * smoke.num_envs * smoke.rollout_steps
    assert len(smoke.eval_seeds) == 1 and smoke.env_max_slots == 30
    paper = _compose(["experiment=paper"]).experiment
    assert paper.total_env_steps == 5_000_000 and paper.num_envs == 8
    assert len(paper.eval_seeds) == 5 and paper.eval_episodes == 2


def test_wandb_logger_is_offline_by_default():
    cfg = _compose(["logger=wandb"])
    assert cfg.logger.mode == "offline"


@pytest.mark.parametrize("launcher", sorted(p.stem for p in (CONF / "hydra/launcher").glob("*")))
def test_launcher_configs_compose(launcher):
    module = LAUNCHER_PLUGINS[launcher]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} not installed (install the matching extra)")
    cfg = _compose([f"hydra/launcher={launcher}"], hydra_cfg=True)
    assert cfg.hydra.launcher._target_.startswith(module)


def test_env_configs_match_the_registry():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gen_env_configs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_env_config_check_reports_drift(tmp_path):
    env_dir = tmp_path / "env"
    script = str(ROOT / "scripts/gen_env_configs.py")
    subprocess.run([sys.executable, script, "--env-dir", str(env_dir)], check=True)
    (env_dir / "edge10.yaml").unlink()
    (env_dir / "edge11.yaml").write_text("name: edge11\n")
    proc = subprocess.run(
        [sys.executable, script, "--check", "--env-dir", str(env_dir)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert "edge10.yaml" in proc.stderr and "edge11.yaml" in proc.stderr


BAD_CONFIGS = {
    "misspelled_key": (["algo.lrr=1"], "lrr"),
    "unknown_algo": (["algo=maddpgg"], "algo/maddpgg"),
    "unknown_env": (["env=edge51"], "env/edge51"),
    "negative_budget": (["experiment.total_env_steps=-1"], "experiment.total_env_steps"),
    "bad_scenario_override": (["+env.overrides.arival_rate=1"], "arival_rate"),
    "out_of_range_value": (["algo.gamma=1.5"], "algo.gamma"),
    "srole_without_shield": (["algo=srole", "shield=none"], "shield.name"),
    "dqn_central_with_shield": (["algo=dqn_central", "shield=central"], "shield.name"),
    "penalty_without_shield": (["algo.collision_penalty=1.0"], "algo.collision_penalty"),
    "unknown_shield": (["shield=centrall"], "shield/centrall"),
    "bad_boundary_mode": (["shield=regional", "shield.boundary=maybe"], "shield.boundary"),
    "zero_rounds": (["shield=regional", "shield.rounds=0"], "shield.rounds"),
    "tapfinger_with_shield": (["algo=tapfinger", "shield=central"], "shield.name"),
    "rlpto_with_shield": (["algo=rlpto", "shield=central"], "shield.name"),
    "gnn_heads_not_dividing": (["algo=tapfinger", "algo.gnn_heads=3"], "algo.gnn_hidden"),
    "bad_variant": (["algo.variant=No Attn"], "algo.variant"),
    "trace_conflict": (
        ["env=edge50-trace", "env.trace.path=a.csv", "+env.overrides.trace_path=b.csv"],
        "trace",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_fails_early_and_writes_nothing(case, tmp_path):
    overrides, key = BAD_CONFIGS[case]
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *overrides, f"output_dir={out}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode != 0
    assert key in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not out.exists() or not any(out.rglob("*")), sorted(out.rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["results"])


def test_evaluate_cli_rejects_bad_arguments():
    for args, needle in (
        (["foo=1"], "unknown key 'foo'"),
        (["run_dir=x", "baseline=random"], "exactly one"),
        (["baseline=random", "episodes=two"], "episodes"),
    ):
        proc = subprocess.run(
            [sys.executable, str(ROOT / "evaluate.py"), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def test_srole_defaults_to_the_central_shield_and_keeps_a_chosen_one():
    assert _compose(["algo=srole"]).shield.name == "central"
    regional = _compose(["algo=srole", "shield=regional"]).shield
    assert (regional.name, regional.rounds, regional.boundary) == ("regional", 2, "optimistic")
    assert _compose(["algo=mappo"]).shield.name == "none"


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONF / "benchmark").glob("*.yaml")))
def test_benchmark_sweep_configs_compose(name):
    extra = ["env=edge50-highload", "algo=srole", "shield=regional"] if name == "srole" else []
    cfg = _compose([f"+benchmark={name}", *extra], hydra_cfg=True)
    validate(cfg)
    assert list(cfg.experiment.eval_seeds) == list(range(10_000, 10_010))
    assert "seed" in cfg.hydra.sweeper.params
