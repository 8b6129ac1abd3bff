r"""Evaluate a trained run or a registered baseline on held-out seeds; write ``eval.json``.

Usage (``key=value`` arguments, values parsed as YAML)::

    python evaluate.py run_dir=outputs/runs/edge50/mappo_none/seed0/20250101-120000
    python evaluate.py run_dir=<path> eval_seeds=[10000,10001] episodes=2
    python evaluate.py baseline=random env=edge50
    python evaluate.py baseline=least_loaded env=edge50 shield=central
    python evaluate.py baseline=local_only env=edge50 env.overrides.arrival_rate=0.05 \\
        eval_seeds=[10000,10001,10002] episodes=1 out=results/local_only_edge50.json

A run is evaluated from its last checkpoint with its own config (``<run_dir>/eval.json``; the
run's eval seeds and episodes unless given). A baseline defaults to the ``experiment=default``
protocol and writes ``<output_dir>/baselines/<env>/<baseline>/eval.json`` unless ``out`` is
given (``<baseline>_<shield>`` with a shield). ``shield=central|regional`` runs the baseline
behind a collision shield (regional: default rounds and boundary rule). The metrics are also
printed as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from edgesched import ConfigError
from edgesched.experiment import ExperimentConfigError
from edgesched.experiment.schema import TRACE_PARAMS, ExperimentConfig

USAGE = (
    "usage: python evaluate.py run_dir=<path> [eval_seeds=[...]] [episodes=N]\n"
    "       python evaluate.py baseline=<name> env=<scenario> [env.overrides.<param>=<value>]"
    " [env.trace.path=<csv>]"
    " [shield=<name>] [eval_seeds=[...]] [episodes=N] [out=<path>] [output_dir=outputs]"
)
KEYS = {"run_dir", "baseline", "env", "out", "eval_seeds", "episodes", "output_dir", "shield"}
OVERRIDE_PREFIX = "env.overrides."
TRACE_PREFIX = "env.trace."


class UsageError(ValueError):
    """Malformed command line."""


def parse(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``key=value`` arguments into options and scenario overrides."""
    opts: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    for arg in argv:
        key, sep, text = arg.partition("=")
        if not sep:
            raise UsageError(f"expected key=value, got {arg!r}")
        value = yaml.safe_load(text) if text else ""
        if key.startswith(OVERRIDE_PREFIX):
            overrides[key[len(OVERRIDE_PREFIX) :]] = value
        elif key.startswith(TRACE_PREFIX) and key[len(TRACE_PREFIX) :] in TRACE_PARAMS:
            name = key[len(TRACE_PREFIX) :]
            local = Path(str(value)).expanduser()
            if name == "path" and local.is_file():  # the record names the file, wherever read
                value = str(local.resolve())
            overrides[TRACE_PARAMS[name]] = value
        elif key in KEYS:
            opts[key] = value
        else:
            raise UsageError(
                f"unknown key {key!r}; allowed: {sorted(KEYS)}, {OVERRIDE_PREFIX}*, "
                f"{', '.join(TRACE_PREFIX + k for k in TRACE_PARAMS)}"
            )
    if ("run_dir" in opts) == ("baseline" in opts):
        raise UsageError("give exactly one of run_dir=<path> or baseline=<name>")
    if "run_dir" in opts and ({"env", "out", "output_dir", "shield"} & opts.keys() or overrides):
        raise UsageError("run_dir= takes only eval_seeds= and episodes= (the run has its env)")
    if "eval_seeds" in opts:
        seeds = opts["eval_seeds"]
        seeds = seeds if isinstance(seeds, list) else [seeds]
        if not seeds or not all(isinstance(s, int) for s in seeds):
            raise UsageError(f"eval_seeds must be a list of integers, got {opts['eval_seeds']!r}")
        opts["eval_seeds"] = seeds
    if "episodes" in opts and not isinstance(opts["episodes"], int):
        raise UsageError(f"episodes must be an integer, got {opts['episodes']!r}")
    return opts, overrides


def main(argv: list[str]) -> int:
    """Run the evaluation; print the metrics; return the exit status."""
    try:
        opts, overrides = parse(argv)
    except UsageError as exc:
        print(f"evaluate.py: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    from edgesched.experiment import evaluate_baseline, evaluate_run  # imports torch

    try:
        if "run_dir" in opts:
            metrics = evaluate_run(
                str(opts["run_dir"]), opts.get("eval_seeds"), opts.get("episodes")
            )
        else:
            protocol = ExperimentConfig()
            env = str(opts.get("env", "edge50"))
            name = str(opts["baseline"])
            shield = str(opts.get("shield", "none"))
            tag = name if shield == "none" else f"{name}_{shield}"
            out = opts.get("out") or (
                f"{opts.get('output_dir', 'outputs')}/baselines/{env}/{tag}/eval.json"
            )
            metrics = evaluate_baseline(
                name,
                env,
                overrides,
                opts.get("eval_seeds", list(protocol.eval_seeds)),
                opts.get("episodes", protocol.eval_episodes),
                str(out),
                shield=shield,
            )
    except (ExperimentConfigError, ConfigError, KeyError, FileNotFoundError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"evaluate.py: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2
    print(json.dumps(metrics, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
