r"""Evaluate a trained run or a registered baseline on held-out seeds; write a new record.

Usage (``key=value`` arguments, values parsed as YAML; ``python evaluate.py --help``)::

    python evaluate.py run_dir=outputs/runs/edge50/mappo_none/seed0
    python evaluate.py run_dir=outputs/runs/edge50/mappo_none/seed0/20250101-120000
    python evaluate.py run_dir=<path> eval_seeds=[10000,10001] episodes=2 out=results/x.json
    python evaluate.py baseline=random env=edge50
    python evaluate.py baseline=least_loaded env=edge50 shield=central
    python evaluate.py baseline=local_only env=edge50 env.overrides.arrival_rate=0.05 \\
        eval_seeds=[10000,10001,10002] episodes=1 out=results/local_only_edge50.json

A run is evaluated from its last checkpoint with its own config (the run's eval seeds and
episodes unless given). ``run_dir`` is a stamped run directory or its ``seed<k>`` folder (then
the newest stamped run inside that has a checkpoint is evaluated, and named). The run's own
files are never rewritten (its ``eval.json`` keeps the ``train`` block): the record goes to a
new ``<run>/evals/eval-<UTC stamp>.json``, or to ``out``. A baseline defaults to the
``experiment=default`` protocol and writes ``<output_dir>/baselines/<env>/<baseline>/eval.json``
(``<baseline>_<shield>`` with a shield; re-running a baseline replaces that file: it is
deterministic) unless ``out`` is given. ``out`` never overwrites an existing file.
``shield=central|regional`` runs the baseline behind a collision shield (regional: default
rounds and boundary rule).

Evaluation is strict: an invalid (masked) action fails it. The metrics are printed as JSON on
stdout, the path written on stderr. Exit status: 0 success, 1 the policy emitted an invalid
action (nothing written), 2 bad arguments or configuration.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from edgesched import ConfigError, InvalidActionError
from edgesched.experiment import ExperimentConfigError
from edgesched.experiment.evaluation import STRICT_OVERRIDES
from edgesched.experiment.schema import TRACE_PARAMS, ExperimentConfig

USAGE = """\
usage: python evaluate.py run_dir=<run or its seed<k> folder> [eval_seeds=[...]] [episodes=N]
                          [out=<path>]
       python evaluate.py baseline=<name> [env=<scenario>] [env.overrides.<param>=<value> ...]
                          [env.trace.<option>=<value> ...] [shield=<name>] [eval_seeds=[...]]
                          [episodes=N] [out=<path>] [output_dir=<dir>]
       python evaluate.py --help"""
HELP = f"""{USAGE}

Evaluate a trained run (from its last checkpoint, with its own config) or a registered
baseline on held-out seeds, and write the evaluation record (JSON).

arguments (key=value; values are parsed as YAML):
  run_dir=<path>        a stamped run directory (outputs/runs/<env>/<entry>_<shield>/seed<k>/
                        <stamp>) or its seed<k> folder: then the newest stamped run inside
                        that has a checkpoint (checkpoints/last.pt) is evaluated
  baseline=<name>       a registered heuristic (edgesched.baselines.list_baselines())
  env=<scenario>        scenario of a baseline (default edge50)
  env.overrides.<p>=<v> scenario parameter of a baseline
  env.trace.<p>=<v>     trace-driven workload option of a baseline ({", ".join(TRACE_PARAMS)})
  shield=<name>         run a baseline behind a collision shield (central, regional)
  eval_seeds=[...]      held-out seeds (default: the run's, or the protocol's 10000..10009)
  episodes=N            episodes per evaluation seed (default: the run's, or 1)
  out=<path>            where to write the record; must not exist yet
  output_dir=<dir>      root of a baseline's default output (default outputs)

where the record goes:
  run_dir   a new <run>/evals/eval-<UTC stamp>.json; the run's own files (eval.json with its
            train block, config, checkpoints) are never rewritten
  baseline  <output_dir>/baselines/<env>/<baseline>[_<shield>]/eval.json (replaced on a
            re-run: a baseline's evaluation is deterministic)
  out=      exactly that path, for either; an existing file is never overwritten
The metrics are printed as JSON on stdout; the path written and the run chosen on stderr.

evaluation is strict: environments raise on an invalid (masked or out-of-range) action, so a
policy that emits one fails its evaluation instead of getting a record.

examples:
  python evaluate.py run_dir=outputs/runs/edge50/mappo_none/seed0
  python evaluate.py run_dir=outputs/runs/edge50/mappo_none/seed0/20250101-120000 \\
      eval_seeds=[10000,10001] episodes=2 out=results/mappo_seed0.json
  python evaluate.py baseline=random env=edge50
  python evaluate.py baseline=least_loaded env=edge50 shield=central
  python evaluate.py baseline=local_only env=edge50 env.overrides.arrival_rate=0.05 \\
      eval_seeds=[10000,10001,10002] out=results/local_only_edge50.json

exit status: 0 success; 1 the policy emitted an invalid action (nothing written);
2 bad arguments or configuration."""
KEYS = {"run_dir", "baseline", "env", "out", "eval_seeds", "episodes", "output_dir", "shield"}
OVERRIDE_PREFIX = "env.overrides."
TRACE_PREFIX = "env.trace."
CHECKPOINT = Path("checkpoints") / "last.pt"
EVALS = "evals"
"""Folder of a run's re-evaluations (``load_runs`` reads only ``eval.json`` files, so these
never enter a leaderboard twice)."""


class UsageError(ValueError):
    """Malformed command line (exit status 2)."""


def parse(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split ``key=value`` arguments into options and scenario overrides.

    Args:
        argv: the command line after the script name.

    Returns:
        ``(options, scenario overrides)``.

    Raises:
        UsageError: an argument is malformed, unknown or conflicts with another; the message
            names it.
    """
    opts: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    for arg in argv:
        key, sep, text = arg.partition("=")
        if not sep:
            raise UsageError(f"expected key=value, got {arg!r} (e.g. run_dir=<path>; see --help)")
        try:
            value = yaml.safe_load(text) if text else ""
        except yaml.YAMLError as exc:
            why = getattr(exc, "problem", None) or type(exc).__name__
            raise UsageError(f"{key}: cannot parse value {text!r} as YAML ({why})") from None
        if key.startswith(OVERRIDE_PREFIX):
            name = key[len(OVERRIDE_PREFIX) :]
            if name in STRICT_OVERRIDES:
                raise UsageError(
                    f"{key}={text}: evaluation always runs with {name}="
                    f"{STRICT_OVERRIDES[name]!r} (an invalid action fails it); drop {key}"
                )
            overrides[name] = value
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
    if "run_dir" in opts and ({"env", "output_dir", "shield"} & opts.keys() or overrides):
        raise UsageError(
            "run_dir= takes only eval_seeds=, episodes= and out= (the run has its env and shield)"
        )
    for key in ("run_dir", "baseline", "out", "output_dir", "env", "shield"):
        if key in opts and (opts[key] in ("", None) or isinstance(opts[key], (list, dict))):
            raise UsageError(f"{key}={opts[key]!r}: expected a non-empty name or path")
    if "eval_seeds" in opts:
        seeds = opts["eval_seeds"]
        seeds = seeds if isinstance(seeds, list) else [seeds]
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise UsageError(f"eval_seeds must be a list of integers, got {opts['eval_seeds']!r}")
        opts["eval_seeds"] = seeds
    if "episodes" in opts:
        eps = opts["episodes"]
        if not isinstance(eps, int) or isinstance(eps, bool) or eps < 1:
            raise UsageError(f"episodes must be a positive integer, got {eps!r}")
    return opts, overrides


def _natural_key(name: str) -> list[Any]:
    # job10 after job9; stamps (20250101-120000) sort chronologically either way
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def resolve_run_dir(path: str | Path) -> tuple[Path, str | None]:
    """The run directory to evaluate, given a run or the ``seed<k>`` folder holding runs.

    Args:
        path: the ``run_dir=`` argument.

    Returns:
        ``(run directory, note)``; ``note`` says which run was chosen inside a seed folder
        (None when ``path`` is itself a run).

    Raises:
        UsageError: ``path`` does not exist, or neither it nor any folder directly inside it
            holds a checkpoint.
    """
    p = Path(path)
    if not p.is_dir():
        raise UsageError(f"run_dir={str(path)!r}: no such directory")
    if (p / CHECKPOINT).is_file():
        return p, None
    runs = sorted(
        (c for c in p.iterdir() if c.is_dir() and (c / CHECKPOINT).is_file()),
        key=lambda c: _natural_key(c.name),
    )
    if not runs:
        raise UsageError(
            f"run_dir={str(path)!r}: neither it nor a folder inside it holds {CHECKPOINT}; "
            "give a run directory (outputs/runs/<env>/<entry>_<shield>/seed<k>/<stamp>) or "
            "its seed<k> folder"
        )
    chosen = runs[-1]
    others = f" (newest of {len(runs)} runs with a checkpoint)" if len(runs) > 1 else ""
    return chosen, f"run_dir={str(path)!r} holds runs; evaluating {chosen}{others}"


def _utc_stamp() -> str:
    # microseconds: two evaluations of one run in the same second get distinct names that
    # still sort in the order they were written
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


def write_new_json(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically, and never over an existing file.

    The text goes to a temporary file in the same folder first (mode 0666 minus the umask,
    like the run's other files), which is then hard-linked to ``path``: ``os.link`` fails if
    ``path`` exists, so a file that appeared meanwhile is not clobbered, and readers never
    see a partial file.

    Raises:
        FileExistsError: ``path`` exists.
    """
    from edgesched.experiment.io import to_jsonable

    path = Path(path)
    text = json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise  # the whole point: an existing file is not ours to replace
        except OSError:
            # filesystems without hard links: claim the name exclusively, then replace it
            with open(path, "x"):
                pass
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_run_evaluation(run: Path, record: dict[str, Any]) -> Path:
    """Write a run's new evaluation record as ``<run>/evals/eval-<UTC stamp>[-k].json``.

    Returns:
        The path written (``-2``, ``-3`` ... are appended should the name exist).
    """
    stem = f"eval-{_utc_stamp()}"
    for k in range(1, 1000):
        path = run / EVALS / (f"{stem}.json" if k == 1 else f"{stem}-{k}.json")
        try:
            write_new_json(path, record)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{run / EVALS}: no free name for {stem}.json")


def _check_out(out: Any) -> Path:
    path = Path(str(out))
    if path.is_dir():
        raise UsageError(f"out={str(out)!r} is a directory; give the path of a new .json file")
    if path.exists():
        raise UsageError(
            f"out={str(out)!r} already exists; evaluate.py never overwrites a file: remove it "
            "or choose another path"
        )
    return path


def _evaluate(opts: dict[str, Any], overrides: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    out = _check_out(opts["out"]) if "out" in opts else None
    run, note = resolve_run_dir(opts["run_dir"]) if "run_dir" in opts else (None, None)
    from edgesched.experiment import evaluate_baseline, evaluate_run  # imports torch

    if run is not None:
        if note:
            print(f"evaluate.py: {note}", file=sys.stderr)
        record = evaluate_run(str(run), opts.get("eval_seeds"), opts.get("episodes"))
        if out is None:
            return record["summary"], write_run_evaluation(run, record)
        try:
            write_new_json(out, record)
        except FileExistsError:
            raise UsageError(
                f"out={str(opts['out'])!r} appeared during the evaluation; not overwritten"
            ) from None
        return record["summary"], out
    protocol = ExperimentConfig()
    env = str(opts.get("env", "edge50"))
    name = str(opts["baseline"])
    shield = str(opts.get("shield", "none"))
    tag = name if shield == "none" else f"{name}_{shield}"
    root = Path(str(opts.get("output_dir", "outputs")))
    path = out or root / "baselines" / env / tag / "eval.json"
    summary = evaluate_baseline(
        name,
        env,
        overrides,
        opts.get("eval_seeds", list(protocol.eval_seeds)),
        opts.get("episodes", protocol.eval_episodes),
        str(path),
        shield=shield,
    )
    return summary, path


def main(argv: list[str]) -> int:
    """Run the evaluation; print the metrics and where they were written; return the status.

    Args:
        argv: the command line after the script name.
    """
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return 0
    try:
        opts, overrides = parse(argv)
        metrics, path = _evaluate(opts, overrides)
    except UsageError as exc:
        print(f"evaluate.py: error: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    except InvalidActionError as exc:
        print(
            f"evaluate.py: error: the policy emitted an invalid action ({exc}); evaluation is "
            "strict, nothing was written",
            file=sys.stderr,
        )
        return 1
    except (ExperimentConfigError, ConfigError, KeyError, FileNotFoundError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"evaluate.py: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2
    print(json.dumps(metrics, indent=2, default=str))
    print(f"evaluate.py: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
