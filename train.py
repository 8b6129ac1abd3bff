"""Train a scheduler: ``python train.py algo=<algo> env=<scenario> [key=value ...]``.

Hydra composes ``conf/config.yaml`` (typed by :mod:`edgesched.experiment.schema`), and
:func:`edgesched.experiment.run` trains, evaluates and writes the run directory. Sweeps::

    python train.py -m algo=mappo,ippo env=edge10 seed=0,1     # local, joblib launcher
    python train.py -m hydra/launcher=slurm ...                # SLURM (extra: slurm)
    python train.py -m hydra/launcher=ray ...                  # Ray (extra: ray)

A bad configuration (unknown algorithm or scenario, misspelled key, also with Hydra's ``+``,
out-of-range value, unreadable trace or checkpoint) stops before training: one line on stderr
naming the key with the closest valid spelling, exit status 2 (1 for the rare errors Hydra
reports while composing, such as a value of the wrong type), and no file or directory left
under ``output_dir``. ``--help`` lists the groups and the configuration, with only the chosen
algorithm's hyperparameters.

A run prints where it writes, its progress (a bar on a terminal, otherwise a line every
``experiment.log_every`` updates, about 20 per run by default) and at the end the held-out
evaluation summary and the run directory.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

import edgesched.experiment
from edgesched import ConfigError
from edgesched.experiment import ExperimentConfigError, register_configs, validate
from edgesched.experiment.cli import check_algo_overrides, check_command_line

CONFIG_ERRORS = (ExperimentConfigError, ConfigError, KeyError)
CONF_DIR = Path(__file__).resolve().parent / "conf"


def config_error(exc: BaseException) -> str:
    """The one line ``train.py`` prints for a configuration error."""
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return f"train.py: configuration error: {' '.join(str(msg).split())}"


def remove_empty_dirs(leaf: str | Path, root: str | Path) -> None:
    """Remove ``leaf`` and its parents up to ``root`` (included) while they are empty.

    Never removes anything outside ``root``, the working directory or one of its parents.
    """
    root_p, cwd = Path(root).resolve(), Path.cwd().resolve()
    path = Path(leaf).resolve()
    while path == root_p or root_p in path.parents:
        if path == cwd or path in cwd.parents:
            return
        if path.is_dir():  # already gone when the runner removed it: go on with its parents
            if any(path.iterdir()):
                return
            path.rmdir()
        path = path.parent


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, Any]:
    """Validate, train and evaluate; return the final evaluation metrics (for sweepers)."""
    hydra_cfg = HydraConfig.get()
    try:
        # before anything is written (the runner validates again)
        check_algo_overrides(str(cfg.algo.name), list(hydra_cfg.overrides.task))
        validate(cfg)
        return edgesched.experiment.run(cfg)
    except CONFIG_ERRORS as exc:
        print(config_error(exc), file=sys.stderr)
        if hydra_cfg.mode == RunMode.MULTIRUN:
            raise  # the launcher marks this job failed; the sweep exits non-zero
        sys.exit(2)
    finally:
        # Hydra creates its output directory before calling us; drop it when nothing went in
        # (bad configuration, or an explicit run_dir elsewhere).
        remove_empty_dirs(hydra_cfg.runtime.output_dir, cfg.output_dir)


# The typed schemas must be in the ConfigStore before Hydra composes (also in sweep workers).
register_configs()

if __name__ == "__main__":
    # Typos in groups and keys, before Hydra answers them with a traceback or a '+' hint
    try:
        check_command_line(sys.argv[1:], CONF_DIR)
    except ExperimentConfigError as exc:
        print(config_error(exc), file=sys.stderr)
        sys.exit(2)
    main()
