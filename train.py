"""Train a scheduler: ``python train.py algo=<algo> env=<scenario> [key=value ...]``.

Hydra composes ``conf/config.yaml`` (typed by :mod:`edgesched.experiment.schema`), and
:func:`edgesched.experiment.run` trains, evaluates and writes the run directory. Sweeps::

    python train.py -m algo=mappo,ippo env=edge10 seed=0,1     # local, joblib launcher
    python train.py -m hydra/launcher=slurm ...                # SLURM (extra: slurm)
    python train.py -m hydra/launcher=ray ...                  # Ray (extra: ray)

A bad configuration (unknown algorithm or scenario, misspelled key, out-of-range value) stops
before anything is written: one line on stderr naming the key, exit status 2 (1 for errors
Hydra reports while composing), and no file or directory left under ``output_dir``.
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

CONFIG_ERRORS = (ExperimentConfigError, ConfigError, KeyError)


def remove_empty_dirs(leaf: str | Path, root: str | Path) -> None:
    """Remove ``leaf`` and its parents up to ``root`` (included) while they are empty.

    Never removes anything outside ``root``, the working directory or one of its parents.
    """
    root_p, cwd = Path(root).resolve(), Path.cwd().resolve()
    path = Path(leaf).resolve()
    while path == root_p or root_p in path.parents:
        if path == cwd or path in cwd.parents or not path.is_dir() or any(path.iterdir()):
            return
        path.rmdir()
        path = path.parent


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, Any]:
    """Validate, train and evaluate; return the final evaluation metrics (for sweepers)."""
    hydra_cfg = HydraConfig.get()
    try:
        validate(cfg)  # before anything is written (the runner checks again)
        return edgesched.experiment.run(cfg)
    except CONFIG_ERRORS as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"train.py: configuration error: {' '.join(str(msg).split())}", file=sys.stderr)
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
    main()
