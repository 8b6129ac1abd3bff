r"""Command line of the leaderboards: build, validate, collect, baselines, refresh, promote.

Run from the repository root (the default paths and the records' ``policy`` paths are
relative to it)::

    python -m edgesched.leaderboard collect --runs outputs/benchmark/edge50/<stamp> \
        --out leaderboards/results/edge50_learned.jsonl
    python -m edgesched.leaderboard baselines --scenarios edge10 edge50 edge100 \
        tapfinger-hetero6 --seeds 10000..10009 --out leaderboards/results/baselines.jsonl
    python -m edgesched.leaderboard build          # leaderboards/<scenario>.md/.csv/.png
    python -m edgesched.leaderboard validate       # re-run entries; exit 1 on a mismatch
    python -m edgesched.leaderboard refresh leaderboards/results/edge50_learned.jsonl \
        --algos mappo                              # re-evaluate in place (new metrics)
    python -m edgesched.leaderboard promote \
        leaderboards/studies/budget/edge50-highload_mappo-b2400k.jsonl \
        leaderboards/results/edge50-highload_mappo.jsonl  # a study run becomes the entry
    python -m edgesched.leaderboard promote-variant --board edge50 --entry tapfinger \
        --variant own --demote-to mean            # after the default became the variant's

The subcommands need the ``train`` extra: ``pip install "edgesched[train]"``. Without it,
``--help`` still works and a subcommand says which extra to install (exit status 2).

Exit status: 0 success, 1 validation mismatch, 2 bad records or arguments, or a missing
extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

# Everything heavier than the environments (the records pull in edgesched.experiment, hence
# omegaconf) is imported inside the subcommands, so --help works in an environments-only
# install.

DEFAULT_RESULTS = Path("leaderboards") / "results"
EXTRA_OF_MODULE = dict.fromkeys(
    (
        "omegaconf",
        "hydra",
        "yaml",
        "torch",
        "scipy",
        "matplotlib",
        "tqdm",
        "stable_baselines3",
        "torch_geometric",
        "statsmodels",
        "wandb",
    ),
    "train",
)
"""Modules the subcommands may import, and the extra of ``pyproject.toml`` that installs each
(PyYAML comes with omegaconf)."""


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _require(*modules: str) -> None:
    """Raise :class:`ModuleNotFoundError` for the first of ``modules`` not installed.

    Checked before a subcommand starts, so it fails before writing anything (a build would
    otherwise write its tables and stop at the first figure).
    """
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError:  # an import hook that refuses the module
            found = False
        if not found:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _sources(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    from .records import RecordError

    results = list(args.results or [])
    if not results and DEFAULT_RESULTS.is_dir():
        results = [str(DEFAULT_RESULTS)]
    if not results and not args.runs:
        raise RecordError(f"no records: {DEFAULT_RESULTS} does not exist and no --runs given")
    return results, list(args.runs or [])


def _overrides(items: list[str]) -> dict:
    import yaml

    from edgesched.experiment.evaluation import STRICT_OVERRIDES

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--override expects key=value, got {item!r}")
        if key in STRICT_OVERRIDES:
            raise ValueError(
                f"--override {item}: evaluation always runs with {key}="
                f"{STRICT_OVERRIDES[key]!r} (an invalid action fails it); drop it"
            )
        out[key] = yaml.safe_load(value)
    return out


def cmd_build(args: argparse.Namespace) -> int:
    """Write the leaderboards."""
    _require("omegaconf", "scipy", *(() if args.no_png else ("matplotlib",)))
    from .build import README_SCENARIO, build, sync_readme

    results, runs = _sources(args)
    for path in build(
        results,
        runs,
        args.out,
        reference=args.reference,
        plots=not args.no_png,
        superseded=args.superseded,
        studies=args.studies,
        root=args.root,
    ):
        _log(f"wrote {path}")
    table = Path(args.out) / f"{README_SCENARIO}.md"
    readme_ok = args.readme and Path(args.readme).exists() and table.exists()
    if readme_ok:
        # a build into a scratch directory (a subset of the records) must not rewrite the
        # README's table: only the leaderboards next to the README are its source
        home = Path(args.readme).resolve().parent / "leaderboards"
        if Path(args.out).resolve() != home:
            _log(f"{args.readme} not updated: --out is not {home}")
        elif sync_readme(args.readme, table):
            _log(f"updated the {README_SCENARIO} table in {args.readme}")
    return 0


def _folder_groups(results: list[str]) -> list[list]:
    """The records of each results argument, one group per folder of ``*.jsonl`` files.

    A file is its own group; a folder is read with its subfolders, each folder that holds
    records a group. A group must form coherent tables (:func:`records.group_tables`), but
    two groups need not: ``leaderboards/studies/`` keeps each study in its own folder, where
    one scenario runs under other overrides or budgets than on its board.
    """
    from .records import RecordError, load_records

    groups = []
    for item in results:
        path = Path(item)
        if path.is_file():
            groups.append(load_records([path]))
            continue
        if not path.is_dir():
            raise RecordError(f"{path}: no such results file or directory")
        folders = sorted({f.parent for f in path.rglob("*.jsonl")})
        groups += [load_records([folder]) for folder in folders]
    return groups


def cmd_validate(args: argparse.Namespace) -> int:
    """Re-run entries and compare."""
    _require("omegaconf")
    from .records import RecordError, group_tables, load_records
    from .validate import validate_records

    results, runs = _sources(args)
    chosen = []
    for group in _folder_groups(results) + ([load_records([], runs)] if runs else []):
        # each record re-runs on its own scenario version, so archived boards validate too
        tables = group_tables(group, superseded=True)
        chosen += [
            r
            for name, recs in tables.items()
            if not args.scenarios or name in args.scenarios
            for r in recs
            if not args.algos or r.data["algo"] in args.algos
        ]
    if not chosen:
        # a typo in a filter or a folder of folders must not pass as "all reproduced"
        raise RecordError(
            f"no records to validate in {' '.join(results + runs)}"
            + (f" for --scenarios {' '.join(args.scenarios)}" if args.scenarios else "")
            + (f" --algos {' '.join(args.algos)}" if args.algos else "")
        )
    report = validate_records(chosen, args.root, learned_rtol=args.rtol, log=_log, jobs=args.jobs)
    print(
        f"validated {len(chosen)} records: {len(report.ok)} reproduced, "
        f"{len(report.mismatches)} mismatched, {len(report.skipped)} skipped"
    )
    for line in report.skipped:
        print(f"skipped: {line}")
    for line in report.mismatches:
        print(f"MISMATCH: {line}")
    return 0 if report.passed else 1


def cmd_collect(args: argparse.Namespace) -> int:
    """Results file from sweep runs."""
    _require("omegaconf")
    from .collect import collect

    rows = collect(
        args.runs, args.out, policies=args.policies, root=args.root, merge=args.merge, log=_log
    )
    _log(f"wrote {len(rows)} records to {args.out}")
    return 0


def cmd_baselines(args: argparse.Namespace) -> int:
    """Results file from the registered baselines."""
    _require("omegaconf", "yaml", "torch")
    from .collect import evaluate_baselines, parse_seeds

    rows = evaluate_baselines(
        args.scenarios,
        parse_seeds(args.seeds),
        args.out,
        episodes=args.episodes,
        names=args.baselines,
        overrides=_overrides(args.override),
        shield=args.shield,
        log=_log,
    )
    _log(f"wrote {len(rows)} records to {args.out}")
    return 0


def cmd_refresh(args: argparse.Namespace) -> int:
    """Re-evaluate records in place with the current code (new metrics)."""
    _require("omegaconf")
    from .validate import refresh_file

    lines = refresh_file(args.file, args.root, scenarios=args.scenarios, algos=args.algos, log=_log)
    _log(f"refreshed {len(lines)} records in {args.file}")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    """A budget study's runs become the board entry they vary."""
    _require("omegaconf", "torch")
    from .promote import promote

    rows, moved = promote(
        args.study,
        args.board,
        studies=args.studies,
        policies=args.policies,
        root=args.root,
        log=_log,
    )
    _log(f"promoted {len(rows)} records" + (f"; the previous ones are in {moved}" if moved else ""))
    return 0


def cmd_promote_variant(args: argparse.Namespace) -> int:
    """A setting variant becomes its board's entry; the previous entry becomes a variant."""
    _require("omegaconf", "torch")
    from .promote import promote_variant

    renames = promote_variant(
        args.board,
        args.entry,
        args.variant,
        args.demote_to,
        results=args.results_dir,
        studies=args.studies,
        policies=args.policies,
        root=args.root,
        log=_log,
    )
    _log("renamed " + ", ".join(f"{a} -> {b}" for a, b in sorted(renames.items())))
    return 0


def _positive_int(flag: str) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers of 1 or more, naming ``flag`` otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag}={text!r} is not allowed; use 1 or more")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = argparse.ArgumentParser(prog="python -m edgesched.leaderboard", description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    sub = p.add_subparsers(dest="command", required=True)

    def sources(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--results",
            nargs="*",
            help=f"JSON-lines results files or directories (default: {DEFAULT_RESULTS})",
        )
        sp.add_argument("--runs", nargs="*", help="sweep/run directories (every **/eval.json)")

    b = sub.add_parser("build", help="write leaderboards/<scenario>.md, .csv and .png")
    sources(b)
    b.add_argument("--out", default="leaderboards", help="output directory")
    b.add_argument("--reference", default="random", help="reference heuristic (score 0)")
    b.add_argument("--no-png", action="store_true", help="skip the figures")
    b.add_argument(
        "--studies",
        help="folder of study-only records (default: <out>/studies; colocation/ feeds "
        "colocation.md)",
    )
    b.add_argument(
        "--superseded",
        action="store_true",
        help="build an archive of earlier scenario versions (leaderboards/archive/vK)",
    )
    b.add_argument(
        "--root",
        default=".",
        help="directory the records' policy paths are under (coverage.md compares each "
        "learned entry's stored settings with today's defaults)",
    )
    b.add_argument(
        "--readme",
        default="README.md",
        help="copy the edge50 table into this file between its markers when --out is the "
        "leaderboards/ folder next to it ('' to skip)",
    )
    b.set_defaults(func=cmd_build)

    v = sub.add_parser(
        "validate",
        help="re-run entries; exit 1 if a number does not reproduce (a folder is read with its "
        "subfolders, each folder's records checked as their own tables)",
    )
    sources(v)
    v.add_argument("--scenarios", nargs="*", help="only these scenario names")
    v.add_argument("--algos", nargs="*", help="only these algorithms")
    v.add_argument("--root", default=".", help="directory the records' policy paths are under")
    v.add_argument("--rtol", type=float, default=1e-6, help="tolerance for learned entries")
    v.add_argument(
        "--jobs",
        type=_positive_int("--jobs"),
        default=1,
        help="records re-run at once, one process each (default 1; results do not depend on it)",
    )
    v.set_defaults(func=cmd_validate)

    c = sub.add_parser("collect", help="results file from finished sweep runs")
    c.add_argument("--runs", nargs="+", required=True, help="sweep/run directories")
    c.add_argument("--out", required=True, help="results file (.jsonl) to write")
    c.add_argument("--policies", default="leaderboards/policies", help="where policies go")
    c.add_argument("--root", default=".", help="repository root (policy paths relative to it)")
    c.add_argument(
        "--merge",
        action="store_true",
        help="keep the records --out already holds (a run of the same entry and seed replaces "
        "its record): for a study trained seed by seed whose earlier run folders are gone",
    )
    c.set_defaults(func=cmd_collect)

    e = sub.add_parser("baselines", help="evaluate the registered baselines, write records")
    e.add_argument("--scenarios", nargs="+", required=True)
    e.add_argument("--seeds", nargs="+", required=True, help="e.g. 10000..10009 or 1,2,3")
    e.add_argument("--episodes", type=int, default=1, help="episodes per evaluation seed")
    e.add_argument("--baselines", nargs="*", help="only these (default: all registered)")
    e.add_argument("--override", nargs="*", default=[], help="scenario parameter key=value")
    e.add_argument("--shield", default="none", help="run every baseline behind this shield")
    e.add_argument("--out", required=True, help="results file (.jsonl) to write")
    e.set_defaults(func=cmd_baselines)
    r = sub.add_parser("refresh", help="re-evaluate records of a results file in place")
    r.add_argument("file", help="results file (.jsonl) to refresh")
    r.add_argument("--scenarios", nargs="*", help="only these scenario names")
    r.add_argument("--algos", nargs="*", help="only these algorithms")
    r.add_argument("--root", default=".", help="directory the records' policy paths are under")
    r.set_defaults(func=cmd_refresh)
    m = sub.add_parser(
        "promote",
        help="make a budget study's runs (<entry>-b<k>k) the board entry at the board's budget",
    )
    m.add_argument("study", help="the budget study's results file (.jsonl); left as it is")
    m.add_argument("board", help="the board's results file holding the entry (.jsonl)")
    m.add_argument(
        "--studies",
        default="leaderboards/studies",
        help="study records folder; the entry's previous records go to its budget/",
    )
    m.add_argument("--policies", default="leaderboards/policies", help="where policies go")
    m.add_argument("--root", default=".", help="repository root (policy paths relative to it)")
    m.set_defaults(func=cmd_promote)
    v = sub.add_parser(
        "promote-variant",
        help="after an algorithm's default changed to a variant's setting: the variant "
        "(<entry>-<variant>) becomes the board's entry, the previous entry <entry>-<demote-to>",
    )
    v.add_argument("--board", required=True, help="the board (scenario name, e.g. edge50)")
    v.add_argument("--entry", required=True, help="the algorithm's entry, e.g. tapfinger")
    v.add_argument("--variant", required=True, help="the variant's label, e.g. own")
    v.add_argument("--demote-to", required=True, help="the previous entry's new label, e.g. mean")
    v.add_argument("--results-dir", default=str(DEFAULT_RESULTS), help="the boards' results")
    v.add_argument(
        "--studies", default="leaderboards/studies", help="study records (budget/ follows)"
    )
    v.add_argument("--policies", default="leaderboards/policies", help="where policies go")
    v.add_argument("--root", default=".", help="repository root (policy paths relative to it)")
    v.set_defaults(func=cmd_promote_variant)
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse, dispatch, map errors to exit status 2 with a one-line message.

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).
    """
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except ModuleNotFoundError as exc:
        top = (exc.name or "").partition(".")[0]
        extra = EXTRA_OF_MODULE.get(top)
        if extra is None:  # not an optional dependency: a real bug, keep the traceback
            raise
        print(
            f"edgesched.leaderboard {args.command}: error: needs the {extra!r} extra (module "
            f'{top!r} is not installed): pip install "edgesched[{extra}]"',
            file=sys.stderr,
        )
        return 2
    except (KeyError, ValueError, FileNotFoundError) as exc:  # RecordError is a ValueError
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        print(f"edgesched.leaderboard {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
