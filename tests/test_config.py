"""Hydra layout (DESIGN §5): every config file composes and validates; bad configs fail early.

Composition is cheap, so every (algo, scenario) pair is composed and validated here; training
them end to end is the job of the runner's tests. Bad configurations run ``train.py`` in a
subprocess: non-zero exit, a message naming the key, and nothing under ``output_dir``.
"""

from __future__ import annotations

import importlib.util
import itertools
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
    # algorithms have one schema each (their config dataclass); other groups share one
    schema = f"/schema/{group}/{name}@_here_" if group == "algo" else f"/schema/{group}@_here_"
    assert f"- {schema}" in text, "each group file starts from its typed schema"
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
    # the entry name carries the variant: two variants started in one second never share it
    assert run_dir.startswith(
        "${output_dir}/runs/${env.name}/${edgesched_entry:${algo}}_${shield.name}/seed"
    )


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
    "misspelled_key": (["algo.lrr=1"], "did you mean algo.lr?"),
    # Hydra's own hint for the line above; it used to train with the key ignored
    "misspelled_key_added": (["+algo.lrr=0.1"], "did you mean algo.lr?"),
    "misspelled_nested_key": (["env.trace.pth=a.csv"], "did you mean env.trace.path?"),
    "misspelled_top_key": (["sed=1"], "did you mean seed?"),
    "unknown_top_key_added": (["+lrr=1"], "lrr"),
    "unknown_algo": (["algo=maddpgg"], "algo=maddpgg"),
    "misspelled_algo": (["algo=mapo"], "did you mean algo=mappo?"),
    "schema_as_algo": (["algo=algo_schema"], "algo=algo_schema: no such algo option"),
    "misspelled_algo_in_sweep": (["-m", "algo=mappo,ipo"], "did you mean algo=ippo?"),
    "unknown_env": (["env=edge51"], "did you mean env=edge50?"),
    "hyperparameter_of_another_algo": (
        ["algo=dqn_central", "algo.clip=0.3"],
        "algo=dqn_central does not use algo.clip",
    ),
    "hyperparameter_of_one_swept_algo": (  # stops before the sweep's first job
        ["-m", "algo=mappo,dqn_central", "algo.clip=0.3"],
        "algo=dqn_central does not use algo.clip",
    ),
    "negative_log_every": (["experiment.log_every=-1"], "experiment.log_every"),
    # the benchmark picks the algorithm, so this is caught after composition
    "hyperparameter_the_benchmark_algo_ignores": (
        ["+benchmark=rlpto", "algo.gnn_hidden=32"],
        "algo=rlpto does not use algo.gnn_hidden",
    ),
    "negative_budget": (["experiment.total_env_steps=-1"], "experiment.total_env_steps"),
    "bad_scenario_override": (["+env.overrides.arival_rate=1"], "arival_rate"),
    "out_of_range_value": (["algo.gamma=1.5"], "algo.gamma"),
    "srole_without_shield": (["algo=srole", "shield=none"], "shield.name"),
    "dqn_central_with_shield": (["algo=dqn_central", "shield=central"], "shield.name"),
    "dqn_central_zero_copies": (["algo=dqn_central", "algo.copies=0"], "algo.copies"),
    "dqn_central_copies_not_dividing_an_update": (
        ["algo=dqn_central", "algo.copies=3"],
        "divide experiment.rollout_steps x experiment.num_envs = 512",
    ),
    "penalty_without_shield": (["algo.collision_penalty=1.0"], "algo.collision_penalty"),
    "unknown_shield": (["shield=centrall"], "did you mean shield=central?"),
    "bad_boundary_mode": (["shield=regional", "shield.boundary=maybe"], "shield.boundary"),
    "zero_rounds": (["shield=regional", "shield.rounds=0"], "shield.rounds"),
    "tapfinger_with_shield": (["algo=tapfinger", "shield=central"], "shield.name"),
    "rlpto_with_shield": (["algo=rlpto", "shield=central"], "shield.name"),
    "gnn_heads_not_dividing": (["algo=tapfinger", "algo.gnn_heads=3"], "algo.gnn_hidden"),
    "bad_variant": (["algo.variant=No Attn"], "algo.variant"),
    "variant_dash_first": (["algo.variant=-b300k"], "algo.variant"),
    "variant_dash_twice": (["algo.variant=noptr--b300k"], "algo.variant"),
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
    assert proc.returncode == 2, proc.stderr
    assert key in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    listed = proc.stderr.rpartition(" are ")[2]  # the valid options or keys, when listed
    assert "schema" not in listed, proc.stderr
    assert not out.exists() or not any(out.rglob("*")), sorted(out.rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["results"])


@pytest.mark.parametrize("variant", ["", "noptr", "b300k", "feature_norm", "noptr-b300k"])
def test_variant_labels_may_join_with_a_dash(variant):
    # a budget study of a variant entry: tapfinger-noptr's b300k run is 'noptr-b300k'
    validate(_compose(["algo=tapfinger", f"algo.variant={variant}"]))


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


def test_each_algo_file_sets_only_its_config_fields():
    """conf/algo/<name>.yaml sets keys of that algorithm's config dataclass only."""
    from dataclasses import fields

    from edgesched.algos import get_algorithm

    for name in list_algorithms():
        keys = set(OmegaConf.load(CONF / "algo" / f"{name}.yaml")) - {"defaults"}
        allowed = {f.name for f in fields(get_algorithm(name).config_class)}
        assert keys <= allowed, (name, sorted(keys - allowed))


def test_added_unknown_key_is_rejected_after_composition():
    """``+algo.lrr`` passes Hydra's composition; validate names it and the close match."""
    from edgesched.experiment import ExperimentConfigError

    cfg = _compose(["+algo.lrr=0.1"])
    assert cfg.algo.lrr == 0.1  # Hydra accepted it ...
    with pytest.raises(ExperimentConfigError, match=r"algo\.lrr .*did you mean algo\.lr\?"):
        validate(cfg)  # ... validation does not
    with pytest.raises(ExperimentConfigError, match=r"env\.trace\.pth"):
        validate(_compose(["+env.trace.pth=x"]))
    validate(_compose(["+env.overrides.arrival_rate=0.5"]))  # scenario parameters are free


def test_group_typo_lists_no_schema_entries():
    from edgesched.experiment import ExperimentConfigError
    from edgesched.experiment.cli import check_command_line, group_options

    for group in GROUPS:
        assert not [o for o in group_options(CONF, group) if "schema" in o], group
    with pytest.raises(ExperimentConfigError) as err:
        check_command_line(["env=edge51"], CONF)
    assert "did you mean env=edge50?" in str(err.value) and "schema" not in str(err.value)
    check_command_line(["-m", "algo=glob(*)", "env=edge10,edge50", "+env.overrides.x=1"], CONF)
    check_command_line(["hydra/launcher=joblib", "hydra.launcher.n_jobs=3"], CONF)


def _help(*overrides: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *overrides, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _algo_section(text: str) -> set[str]:
    lines = text.split("\nalgo:  #", 1)[1].split("\nenv:", 1)[0].splitlines()
    rows = [line for line in lines if line.startswith("  ") and not line.strip().startswith("#")]
    return {line.split(":")[0].strip() for line in rows}


def test_help_shows_the_chosen_algorithms_own_hyperparameters():
    from edgesched.experiment.schema import algo_params

    text = _help()
    assert _algo_section(text) == set(algo_params("mappo"))
    assert "buffer_size" not in text and "gnn_hidden" not in text
    assert "lr: 0.0005" in text and "# Adam learning rate" in text
    assert "algo: dqn_central, ippo, mappo, rlpto, srole, tapfinger" in text
    assert "schema" not in text
    dqn = _help("algo=dqn_central", "experiment=smoke")
    assert _algo_section(dqn) == set(algo_params("dqn_central"))
    assert "total_env_steps: 64" in dqn


def _flags(text: str) -> str:
    """The comment lines under ``algo:`` that state the registry flags, joined."""
    lines = text.split("\nalgo:  #", 1)[1].splitlines()[1:]
    return " ".join(
        x.strip()[2:] for x in itertools.takewhile(lambda x: x.startswith("  #"), lines)
    )


@pytest.mark.parametrize("algo", ["mappo", "srole", "tapfinger", "dqn_central"])
def test_help_states_the_algorithms_capabilities_from_its_registry_entry(algo):
    from edgesched.algos import get_algorithm
    from edgesched.shields import list_shields

    entry = get_algorithm(algo)
    flags = _flags(_help(f"algo={algo}"))
    assert flags == entry.capabilities(list_shields())
    assert f"shield={', '.join(entry.shields(list_shields()))} " in flags
    assert ("needs a shield" in flags) == entry.needs_shield
    assert ("takes no shield" in flags) == (not entry.accepts_shield)
    assert ("reads the graph view" in flags) == entry.needs_graph_view
    assert ("evaluates itself" in flags) == entry.own_view


@pytest.mark.parametrize(
    ("override", "allowed"),
    [
        ("algo.discount_unit=bogus", "decision|slot"),
        ("algo.shield_training=bogus", "postposed|preemptive"),
        ("algo.credit=bogus", "team|job"),
        ("algo.placement=bogus", "min_alloc|least_loaded|best_fit"),
        ("algo.conflict_winner=bogus", "sampled|argmax"),
        ("algo.policy_rows=bogus", "all|choice"),
    ],
)
def test_algorithm_choices_name_the_key_the_value_and_what_is_allowed(override, allowed):
    from edgesched.experiment import ExperimentConfigError

    algo = {
        "discount_unit": "dqn_central",
        "credit": "rlpto",
        "placement": "rlpto",
        "conflict_winner": "tapfinger",
    }.get(override.split("=")[0].split(".")[1], "srole")
    with pytest.raises(ExperimentConfigError, match=rf"algo\.\w+='bogus'.*{allowed}"):
        validate(_compose([f"algo={algo}", override]))


def test_a_negative_pointer_clip_is_refused():
    from edgesched.experiment import ExperimentConfigError

    with pytest.raises(ExperimentConfigError, match=r"algo\.pointer_clip=-1\.0.*>= 0"):
        validate(_compose(["algo=tapfinger", "algo.pointer_clip=-1.0"]))
    validate(_compose(["algo=tapfinger", "algo.pointer_clip=10"]))


def test_a_work_conserving_head_needs_masking():
    from edgesched.experiment import ExperimentConfigError

    with pytest.raises(ExperimentConfigError, match=r"algo\.work_conserving=True.*action_masking"):
        validate(_compose(["algo=dqn_central", "algo.action_masking=false"]))
    validate(_compose(["algo=dqn_central"]))  # the default: both on
    validate(
        _compose(["algo=dqn_central", "algo.work_conserving=false", "algo.action_masking=false"])
    )
