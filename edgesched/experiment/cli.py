"""``train.py``'s command line: override checks with suggestions, and ``--help`` text.

Hydra reports a misspelled group option with a long message (and exit status 1), and a
misspelled key with a hint to add it with ``+``, which then trains with the key ignored.
:func:`check_command_line` reads the overrides first, against the ``conf/`` groups and the
typed schemas, and raises :class:`ExperimentConfigError` with one line naming the override,
the closest valid spelling and the valid ones. :func:`check_algo_overrides` runs after
composition, when the algorithm is known, and rejects settings that algorithm would ignore.

``conf/hydra/help/train.yaml`` renders ``--help`` through two OmegaConf resolvers registered
here: the selectable groups (without the internal schema group) and the composed
configuration with only the chosen algorithm's hyperparameters, each key with its
description from the schema's docstring (for ``algo``, the algorithm's config class named by
its registry entry). Every algorithm rule here derives from those classes
(:func:`~edgesched.experiment.schema.algo_params`, :func:`~edgesched.experiment.schema.algo_users`).
"""

from __future__ import annotations

import argparse
import contextlib
import textwrap
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from .schema import (
    SCHEMA_GROUP,
    SCHEMAS,
    ExperimentConfigError,
    TraceConfig,
    TrainConfig,
    algo_params,
    algo_schema,
    algo_users,
    closest,
    field_docs,
    store_schemas,
)

# flags after which the configuration comes from elsewhere (or nothing is composed)
_SKIP_FLAGS = ("config_path", "config_name", "config_dir", "experimental_rerun")


class _Parser(argparse.ArgumentParser):
    """Hydra's argument parser, raising instead of printing usage and exiting."""

    def error(self, message: str) -> typing.NoReturn:
        raise ValueError(message)


def _hydra_args(argv: list[str]) -> argparse.Namespace | None:
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.__class__ = _Parser
    try:
        return parser.parse_args(argv)
    except (ValueError, SystemExit):
        return None  # Hydra reports it in its own words


def group_options(conf_dir: Path, group: str) -> list[str]:
    """The options of config group ``group``.

    The files ``conf_dir/<group>/*.yaml`` and the ConfigStore entries of that group; never the
    typed schemas, which live in a group of their own.
    """
    from hydra.core.config_store import ConfigStore

    names = {p.stem for p in (conf_dir / group).glob("*.yaml")}
    with contextlib.suppress(OSError):  # raised when the ConfigStore has no such group
        names |= {n.removesuffix(".yaml") for n in ConfigStore.instance().list(group)}
    return sorted(names)


def user_groups(conf_dir: Path) -> list[str]:
    """The config groups a user picks options of (``conf/`` folders, Hydra's own aside)."""
    return sorted(
        p.name for p in conf_dir.iterdir() if p.is_dir() and p.name not in ("hydra", SCHEMA_GROUP)
    )


def _default_algo(conf_dir: Path) -> str | None:
    """The algorithm ``conf/config.yaml`` selects when the command line does not."""
    for entry in OmegaConf.load(conf_dir / "config.yaml").get("defaults", []):
        if isinstance(entry, DictConfig) and "algo" in entry:
            return str(entry["algo"])
    return None


def _field_type(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def _check_key(key: str, line: str, algo: str | None) -> None:
    """Raise unless dotted ``key`` names a field of the :class:`TrainConfig` schema tree.

    ``algo.*`` keys are checked against the chosen algorithm's config class, or against every
    algorithm's keys when the command line does not tell one (``check_algo_overrides`` then
    checks each algorithm of a sweep).
    """
    node: Any = TrainConfig
    parts = key.split(".")
    for depth, part in enumerate(parts):
        if depth == 1 and parts[0] == "algo":
            allowed = list(algo_params(algo or ""))
            if part in allowed or part in algo_params(""):
                # another algorithm's key: check_algo_overrides names the algorithms using it
                return
            owner = f"algo={algo}" if algo is not None else "the algorithms"
            guess = closest(part, allowed) or closest(part, list(algo_params("")))
            hint = f" did you mean algo.{guess}?" if guess else ""
            raise ExperimentConfigError(
                f"algo.{part} (in {line!r}) is not a configuration key;{hint} the keys of "
                f"{owner} are {', '.join(allowed)}"
            )
        if not (isinstance(node, type) and is_dataclass(node)):
            return  # below a dict, list or free-form value (env.overrides.*, algo.hidden.0)
        allowed = [f.name for f in fields(node)]
        if part in allowed:
            node = _field_type(node, part)
            continue
        prefix = ".".join(parts[:depth])
        dotted = f"{prefix}." if prefix else ""
        owner = prefix or "the top level"
        guess = closest(part, allowed)
        hint = f" did you mean {dotted}{guess}?" if guess else ""
        raise ExperimentConfigError(
            f"{dotted}{part} (in {line!r}) is not a configuration key;{hint} the keys of "
            f"{owner} are {', '.join(allowed)}"
        )


def check_command_line(argv: list[str], conf_dir: str | Path) -> None:
    """Check ``train.py``'s overrides before Hydra composes them.

    Group options (``algo=mapo``) must name a file of ``conf/<group>/``; keys (``algo.lrr=1``,
    also ``+algo.lrr=1``) must be fields of the typed schema. Scenario parameters
    (``env.overrides.*``) are left to the simulator's validation, Hydra's own settings
    (``hydra.*``, ``hydra/launcher=...``) and unparsable lines to Hydra.

    Args:
        argv: the command line after the program name.
        conf_dir: the primary config folder (``conf/``).

    Raises:
        ExperimentConfigError: one line naming the override, the closest valid spelling and
            the valid ones.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ValueType
    from hydra.errors import HydraException

    conf_dir = Path(conf_dir)
    args = _hydra_args(argv)
    if args is None or any(getattr(args, flag, None) for flag in _SKIP_FLAGS):
        return
    try:
        overrides = OverridesParser.create().parse_overrides(args.overrides)
    except HydraException:
        return
    groups = user_groups(conf_dir)
    chosen = _chosen_algos(overrides, conf_dir)
    algo = chosen[0] if chosen and len(chosen) == 1 else None
    for o in overrides:
        key = o.key_or_group
        if key == "hydra" or key.startswith(("hydra.", "hydra/")) or o.is_delete():
            continue
        if key in groups:
            if o.package is not None or o.value_type not in (
                ValueType.ELEMENT,
                ValueType.CHOICE_SWEEP,
                ValueType.SIMPLE_CHOICE_SWEEP,
            ):
                continue  # globs and ranges match options by construction
            if o.value_type == ValueType.ELEMENT:
                values = [o.get_value_element_as_str()]
            else:
                values = [str(v) for v in o.sweep_string_iterator()]
            options = group_options(conf_dir, key)
            for value in values:
                if value in options or "${" in value:
                    continue
                guess = closest(value, options)
                hint = f" did you mean {key}={guess}?" if guess else ""
                raise ExperimentConfigError(
                    f"{key}={value}: no such {key} option;{hint} the options of {key} are "
                    f"{', '.join(options)}"
                )
            continue
        if "/" in key:
            continue  # a nested group of Hydra's or a plugin's
        _check_key(key, o.input_line or key, algo)
    # a sweep fails here, before its first job, rather than in the jobs of one algorithm
    algo_lines = [o.input_line for o in overrides if o.key_or_group.startswith("algo.")]
    for name in chosen or []:
        check_algo_overrides(name, algo_lines)


def _chosen_algos(overrides: list[Any], conf_dir: Path) -> list[str] | None:
    """The algorithms the command line trains (several in a sweep); None: not known here."""
    from hydra.core.override_parser.types import Glob, ValueType

    from edgesched.algos import list_algorithms

    known = list_algorithms()
    chosen: list[str] | None = None
    for o in overrides:
        if o.key_or_group != "algo" or o.is_delete() or o.package is not None:
            continue
        if o.value_type == ValueType.ELEMENT:
            chosen = [str(o.get_value_element_as_str())]
        elif isinstance(o.value(), Glob):
            chosen = o.value().filter(group_options(conf_dir, "algo"))
        elif o.value_type in (ValueType.CHOICE_SWEEP, ValueType.SIMPLE_CHOICE_SWEEP):
            chosen = [str(v) for v in o.sweep_string_iterator()]
        else:
            return None
    if chosen is None:
        benchmarks = [o for o in overrides if o.key_or_group == "benchmark"]
        if benchmarks:
            # a benchmark may pick the algorithm (conf/benchmark/rlpto.yaml) or sweep them
            if len(benchmarks) > 1 or benchmarks[0].value_type != ValueType.ELEMENT:
                return None
            chosen = _benchmark_algos(conf_dir, str(benchmarks[0].get_value_element_as_str()))
            if chosen is None:
                return None
        else:
            chosen = [_default_algo(conf_dir) or ""]
    return [a for a in chosen if a in known]


def _benchmark_algos(conf_dir: Path, name: str) -> list[str] | None:
    """The algorithms benchmark ``name`` trains when the command line names none.

    Its ``override /algo: X`` default, its sweeper's ``algo`` choices (a glob or a list), or
    the default algorithm; None when the file cannot be read.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob

    path = conf_dir / "benchmark" / f"{name}.yaml"
    try:
        node = OmegaConf.load(path)
    except (OSError, ValueError):
        return None
    for entry in node.get("defaults", []) or []:
        if isinstance(entry, DictConfig) and "override /algo" in entry:
            return [str(entry["override /algo"])]
    sweep = OmegaConf.select(node, "hydra.sweeper.params.algo", default=None)
    if sweep is not None:
        o = OverridesParser.create().parse_override(f"algo={sweep}")
        if isinstance(o.value(), Glob):
            return o.value().filter(group_options(conf_dir, "algo"))
        return [str(v) for v in o.sweep_string_iterator()]
    return [_default_algo(conf_dir) or ""]


def check_algo_overrides(algo: str, overrides: list[str]) -> None:
    """Reject command-line settings of hyperparameters that algorithm ``algo`` never reads.

    Args:
        algo: the composed ``algo.name``.
        overrides: this job's overrides (``HydraConfig.get().overrides.task``).

    Raises:
        ExperimentConfigError: naming the setting, the algorithms that read it and ``algo``'s
            own keys.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    own = algo_params(algo)
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        parts = o.key_or_group.split(".")
        if len(parts) < 2 or parts[0] != "algo" or o.is_delete() or parts[1] in own:
            continue
        users = algo_users(parts[1])
        if not users:
            continue  # not a hyperparameter at all: check_keys names it
        raise ExperimentConfigError(
            f"{o.input_line}: algo={algo} does not use algo.{parts[1]} (a hyperparameter of "
            f"{', '.join(users)}); the keys of algo={algo} are {', '.join(own)}"
        )


# ---------------------------------------------------------------------------------- --help


def _flow(value: Any) -> str:
    """One-line YAML of a value (flow style for lists and mappings)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _describe(text: str) -> str:
    return " ".join(text.replace("``", "").split())


def _lines(node: dict[str, Any], docs: dict[str, str], indent: str, width: int = 100) -> list[str]:
    """``key: value`` rows, each with its description wrapped in comments after it."""
    rows = [(f"{indent}{k}: {_flow(v)}", _describe(docs.get(k, ""))) for k, v in node.items()]
    column = max((len(r) for r, _ in rows), default=0) + 2
    out = []
    for row, doc in rows:
        if not doc:
            out.append(row)
            continue
        wrapped = textwrap.wrap(doc, width=max(30, width - column - 2))
        out.append(f"{row.ljust(column)}# {wrapped[0]}")
        out += [f"{' ' * column}# {more}" for more in wrapped[1:]]
    return out


def _capability_lines(algo: str, width: int = 100) -> list[str]:
    """The algorithm's registry flags in words, as comment lines (see AlgorithmEntry)."""
    from edgesched.algos import get_algorithm
    from edgesched.shields import list_shields

    try:
        text = get_algorithm(algo).capabilities(list_shields())
    except KeyError:  # an unknown name: the config's validation reports it
        return []
    return textwrap.wrap(text, width=width - 4, initial_indent="  # ", subsequent_indent="  # ")


def help_config(root: DictConfig) -> str:
    """The composed configuration as ``--help`` shows it.

    Every group with its keys, values and descriptions (from the schemas' docstrings);
    ``algo`` limited to the chosen algorithm's own hyperparameters.

    Args:
        root: the composed configuration, Hydra's node included (it is left out).
    """
    cfg = OmegaConf.to_container(root, resolve=False)
    cfg.pop("hydra", None)
    out: list[str] = []
    for group, schema in SCHEMAS.items():
        node = cfg.pop(group, None)
        if not isinstance(node, dict):
            continue
        title = f"{group}:"
        if group == "algo":
            keep = algo_params(str(node.get("name")))
            node = {k: node[k] for k in keep if k in node}
            title += f"  # the hyperparameters of algo={node.get('name')}"
        out.append(title)
        if group == "algo":
            out += _capability_lines(str(node.get("name")))
        docs = field_docs(algo_schema(str(node.get("name"))) if group == "algo" else schema)
        if group == "env":
            trace = node.pop("trace", None)
            out += _lines(node, docs, "  ")
            if isinstance(trace, dict):
                out.append("  trace:  # " + _describe(docs.get("trace", "")))
                out += _lines(trace, field_docs(TraceConfig), "    ")
            continue
        out += _lines(node, docs, "  ")
    out += _lines(cfg, field_docs(TrainConfig), "")
    # string.Template (Hydra's help renderer) reads '$' as a placeholder
    return "\n".join(out).replace("$", "$$")


def help_groups() -> str:
    """``group: option, ...`` for each selectable config group (schemas left out)."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    rows = []
    for group in sorted(loader.list_groups("")):
        if group in ("hydra", SCHEMA_GROUP):
            continue
        options = loader.get_group_options(group)
        prefix = "+" if group == "benchmark" else ""
        rows.append(f"{prefix}{group}: {', '.join(options)}")
    return "\n".join(rows).replace("$", "$$")


def register_help_resolvers() -> None:
    """Register the resolvers ``conf/hydra/help/train.yaml`` calls (idempotent)."""

    def config(*, _root_: DictConfig) -> str:
        return help_config(_root_)

    OmegaConf.register_new_resolver("edgesched_help_config", config, replace=True)
    OmegaConf.register_new_resolver("edgesched_help_groups", help_groups, replace=True)


def register_budget_resolver() -> None:
    """Register ``${edgesched_benchmark_budget:<scenario>}`` (idempotent).

    The leaderboard sweeps (``conf/benchmark/``) set ``experiment.total_env_steps`` through
    it, so a board's budget is written once, in
    :data:`edgesched.experiment.budgets.BENCHMARK_BUDGETS`, and a sweep over several
    scenarios trains each at its own board's budget.
    """

    def budget(scenario: str) -> int:
        from edgesched.experiment.budgets import benchmark_budget

        return benchmark_budget(str(scenario))

    OmegaConf.register_new_resolver("edgesched_benchmark_budget", budget, replace=True)


def register_entry_resolver() -> None:
    """Register ``${edgesched_entry:${algo}}``: a run's entry name (``name`` or ``name-variant``).

    The run directories (``hydra.run.dir``) are named by it, so two variants of one
    algorithm (``tapfinger`` and ``tapfinger-noattn``) never share a folder.
    """

    def entry(algo: Any) -> str:
        from edgesched.experiment.schema import algo_label

        return algo_label(algo)

    OmegaConf.register_new_resolver("edgesched_entry", entry, replace=True)


def register_configs() -> None:
    """Store the typed schemas in Hydra's ConfigStore and register the config resolvers.

    Call before Hydra composes (``train.py`` does, also in sweep workers).
    """
    store_schemas()
    register_help_resolvers()
    register_budget_resolver()
    register_entry_resolver()
