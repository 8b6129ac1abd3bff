"""Raw per-run records: loading, validation and grouping into tables.

A record is what :func:`edgesched.experiment.evaluation.make_record` writes: one training run
of a learned scheduler (``train_seed`` set; ``eval.json`` in its run directory) or one
heuristic (``train_seed`` null) evaluated on held-out seeds. Records are read from
``leaderboards/results/*.jsonl`` (one record per line) and from sweep output directories
(every ``**/eval.json``). Each one is validated; an error names the file (and line) and the
record. Every metric (per episode and in the summary) must be a finite JSON number, or null
where it can be undefined; a number stored as a string, a boolean, NaN or an infinity is
rejected naming the field and the value, so that no table is built from it.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgesched.envs.scenarios import get_scenario, scenario_versions
from edgesched.protocol import SCALAR_METRICS

REQUIRED_FIELDS = (
    "scenario",
    "env_overrides",
    "algo",
    "shield",
    "train_seed",
    "eval_seeds",
    "episodes_per_seed",
    "git_commit",
    "config_hash",
    "edgesched_version",
    "per_episode",
    "summary",
)
EPISODE_FIELDS = (
    "eval_seed",
    "episode",
    *SCALAR_METRICS,
    "jct_by_priority",
    "slots",
    "truncated",
)

NULLABLE_SCALARS = ("jct_mean_completed", "final_quality_mean")
"""Per-episode metrics of :data:`SCALAR_METRICS` that are undefined (null in JSON) when an
episode completes no job; the others are defined for every episode with arrivals, which
``jct_mean`` must have. Metrics outside :data:`SCALAR_METRICS` (optional and
algorithm-specific ones) may be null too."""
_NON_METRIC_FIELDS = ("eval_seed", "episode", "truncated", "jct_by_priority")


class RecordError(ValueError):
    """A raw record is malformed, stale or inconsistent with the others of its table."""


@dataclass
class Record:
    """One raw record and where it came from.

    Attributes:
        data: the record as loaded (JSON object).
        source: file it was read from.
        line: 1-based line for JSON-lines files, None for ``eval.json``.
    """

    data: dict[str, Any]
    source: Path
    line: int | None = None

    @property
    def where(self) -> str:
        """``file:line`` (or ``file``)."""
        return f"{self.source}:{self.line}" if self.line is not None else str(self.source)

    @property
    def label(self) -> str:
        """Short identification of the record for messages."""
        d = self.data
        return (
            f"(scenario={d.get('scenario')!r}, algo={d.get('algo')!r}, "
            f"shield={d.get('shield')!r}, train_seed={d.get('train_seed')!r})"
        )

    @property
    def learned(self) -> bool:
        """True for a trained run (has a training seed), False for a heuristic."""
        return self.data.get("train_seed") is not None

    @property
    def train_budget(self) -> tuple[int, int] | None:
        """``(env_steps, updates)`` a learned run trained, ``None`` where not recorded."""
        train = self.data.get("train") or {}
        steps, updates = train.get("env_steps"), train.get("updates")
        return (int(steps), int(updates)) if steps and updates else None

    @property
    def scenario_name(self) -> str:
        """Scenario name without its version (``edge50`` for ``edge50-v0``)."""
        return split_scenario_id(self.data["scenario"])[0]

    @property
    def run_key(self) -> tuple[str, str, str, int | None]:
        """``(scenario name, algo, shield, train_seed)``: one run; a table holds it once."""
        d = self.data
        return (self.scenario_name, d["algo"], d["shield"], d["train_seed"])

    def error(self, message: str) -> RecordError:
        """A :class:`RecordError` naming this record's file, line and identity."""
        return RecordError(f"{self.where}: record {self.label}: {message}")


def split_scenario_id(scenario_id: str) -> tuple[str, int | None]:
    """``edge50-v0`` -> (``edge50``, 0); an id without ``-v<k>`` -> (id, None)."""
    name, sep, version = str(scenario_id).rpartition("-v")
    if sep and version.isdigit():
        return name, int(version)
    return str(scenario_id), None


def check_record(rec: Record, *, current_version: bool = True) -> None:
    """Validate one record's structure and scenario; raise :class:`RecordError` if bad.

    Args:
        rec: the record.
        current_version: also require the scenario version to be the registered one.
    """
    d = rec.data
    if not isinstance(d, dict):
        raise rec.error(f"expected a JSON object, got {type(d).__name__}")
    missing = [k for k in REQUIRED_FIELDS if k not in d]
    if missing:
        raise rec.error(f"missing required field(s) {missing}")
    name, version = split_scenario_id(d["scenario"])
    if version is None:
        raise rec.error(f"scenario {d['scenario']!r} is not a versioned id like 'edge50-v0'")
    try:
        scenario = get_scenario(name)
    except KeyError as exc:
        raise rec.error(f"unknown scenario {d['scenario']!r}: {exc.args[0]}") from None
    known = [v.id for v in scenario_versions(name)]
    if d["scenario"] not in known:
        raise rec.error(
            f"scenario version {d['scenario']!r} was never registered (registered: {known})"
        )
    if current_version and scenario.id != d["scenario"]:
        raise rec.error(
            f"scenario version {d['scenario']!r} is not the registered one ({scenario.id!r}); "
            "numbers from another version of a scenario are not comparable: re-run this entry"
        )
    for key in ("algo", "shield"):
        if not isinstance(d[key], str) or not d[key]:
            raise rec.error(f"field {key!r} must be a non-empty string, got {d[key]!r}")
    if d["train_seed"] is not None and not isinstance(d["train_seed"], int):
        raise rec.error(f"train_seed must be an integer or null, got {d['train_seed']!r}")
    if not isinstance(d["env_overrides"], dict):
        raise rec.error(f"env_overrides must be an object, got {d['env_overrides']!r}")
    seeds, eps = d["eval_seeds"], d["episodes_per_seed"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise rec.error(f"eval_seeds must be a non-empty list of integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise rec.error(f"eval_seeds has duplicates: {seeds}")
    if not isinstance(eps, int) or eps < 1:
        raise rec.error(f"episodes_per_seed must be a positive integer, got {eps!r}")
    if d["train_seed"] is not None and d["train_seed"] in seeds:
        raise rec.error(f"train_seed {d['train_seed']} is also an evaluation seed (not held out)")
    rows = d["per_episode"]
    if not isinstance(rows, list):
        raise rec.error("per_episode must be a list")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise rec.error(f"per_episode[{i}] is not an object")
        miss = [k for k in EPISODE_FIELDS if k not in row]
        if miss:
            raise rec.error(f"per_episode[{i}] misses field(s) {miss}")
        _check_episode_values(rec, i, row)
    summary = d["summary"]
    if not isinstance(summary, dict):
        raise rec.error(f"summary must be an object, got {_show(summary)}")
    for key, value in summary.items():
        _check_number(rec, f"summary.{key}", value, nullable=key != "jct_mean")
    if "jct_mean" not in summary:
        raise rec.error("summary misses field 'jct_mean'")
    got = sorted((r["eval_seed"], r["episode"]) for r in rows)
    want = sorted((s, k) for s in seeds for k in range(eps))
    if got != want:
        extra, lost = sorted(set(got) - set(want)), sorted(set(want) - set(got))
        raise rec.error(
            "per_episode covers other (eval_seed, episode) pairs than eval_seeds x "
            f"episodes_per_seed: missing {lost[:6]}, unexpected {extra[:6]}"
            + (", duplicated pairs" if len(set(got)) != len(got) else "")
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: Any) -> str:
    """A value as the message shows it: its repr, and its JSON type when not a number."""
    kinds = {str: "a string", bool: "a boolean", list: "a list", dict: "an object"}
    kind = kinds.get(type(value))
    return f"{value!r} ({kind})" if kind else repr(value)


def _check_number(rec: Record, field: str, value: Any, *, nullable: bool) -> None:
    """Raise unless ``value`` is a finite number (or None when ``nullable``)."""
    if value is None and nullable:
        return
    if not _is_number(value) or not math.isfinite(value):
        allowed = "a finite number or null" if nullable else "a finite number"
        raise rec.error(f"{field} must be {allowed}, got {_show(value)}")


def _check_episode_values(rec: Record, i: int, row: dict[str, Any]) -> None:
    """Types of one ``per_episode`` row: identifiers, flags and every metric."""
    where = f"per_episode[{i}]"
    for key in ("eval_seed", "episode"):
        if not isinstance(row[key], int) or isinstance(row[key], bool):
            raise rec.error(f"{where}.{key} must be an integer, got {_show(row[key])}")
    if not isinstance(row["truncated"], bool):
        raise rec.error(f"{where}.truncated must be true or false, got {_show(row['truncated'])}")
    prio = row["jct_by_priority"]
    if not isinstance(prio, list):
        raise rec.error(f"{where}.jct_by_priority must be a list, got {_show(prio)}")
    for p, value in enumerate(prio):  # null: no job of that class arrived
        _check_number(rec, f"{where}.jct_by_priority[{p}]", value, nullable=True)
    for key, value in row.items():
        if key in _NON_METRIC_FIELDS:
            continue
        required = (key in SCALAR_METRICS and key not in NULLABLE_SCALARS) or key == "slots"
        _check_number(rec, f"{where}.{key}", value, nullable=not required)


def _parse_jsonl(path: Path, text: str | None = None) -> list[Record]:
    out = []
    text = path.read_text() if text is None else text
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{path}:{i}: not valid JSON ({exc.msg})") from None
        out.append(Record(data, path, i))
    return out


def load_results(paths: Iterable[str | Path]) -> list[Record]:
    """Read records from JSON-lines files, or from every ``*.jsonl`` of given directories."""
    records: list[Record] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files = sorted(p.glob("*.jsonl"))
        elif p.is_file():
            files = [p]
        else:
            raise RecordError(f"{p}: no such results file or directory")
        for f in files:
            records += _parse_jsonl(f)
    return records


def load_runs(dirs: Iterable[str | Path]) -> list[Record]:
    """Read the ``eval.json`` record of every finished run under the given directories."""
    records: list[Record] = []
    for d in dirs:
        d = Path(d)
        if not d.is_dir():
            raise RecordError(f"{d}: no such run directory")
        for f in sorted(d.rglob("eval.json")):
            try:
                data = json.loads(f.read_text())
            except json.JSONDecodeError as exc:
                raise RecordError(f"{f}: not valid JSON ({exc.msg})") from None
            records.append(Record(data, f))
    return records


def load_records(
    results: Iterable[str | Path] = (), runs: Iterable[str | Path] = ()
) -> list[Record]:
    """Load and structurally validate records from results files and run directories.

    The scenario version is checked per table by :func:`group_tables` (so that a table mixing
    versions is reported as such).
    """
    records = load_results(results) + load_runs(runs)
    for rec in records:
        check_record(rec, current_version=False)
    return records


def load_records_at(
    rev: str, results: Iterable[str | Path], root: str | Path = "."
) -> list[Record]:
    """:func:`load_records` of results files or folders as git revision ``rev`` held them.

    For a comparison with records that a later commit replaced (an entry retrained at
    another budget): ``load_records_at("e77e399", ["leaderboards/results"])``. Each record's
    ``path`` reads ``<rev>:<file>``.

    Args:
        rev: a git revision of the repository at ``root``.
        results: ``*.jsonl`` files or folders (every ``*.jsonl`` below), relative to ``root``.
        root: the repository.

    Raises:
        RecordError: ``rev`` is not a revision there, or a path held no records at it.
    """
    import subprocess

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=root, check=True, capture_output=True, text=True
            ).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            err = getattr(exc, "stderr", "") or exc
            raise RecordError(f"rev={rev!r}: git {args[0]} failed in {root}: {err}") from None

    records: list[Record] = []
    for folder in results:
        names = [
            n
            for n in git("ls-tree", "-r", "--name-only", rev, "--", str(folder)).splitlines()
            if n.endswith(".jsonl")
        ]
        if not names:
            raise RecordError(f"results={str(folder)!r}: no *.jsonl records at revision {rev!r}")
        for name in names:
            records += _parse_jsonl(Path(f"{rev}:{name}"), git("show", f"{rev}:{name}"))
    for rec in records:
        check_record(rec, current_version=False)
    return records


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True)


def _show_budget(rec: Record) -> str:
    if rec.train_budget is None:
        return "no recorded budget"
    steps, updates = rec.train_budget
    return f"env_steps={steps} in updates={updates}"


def group_tables(records: list[Record], *, superseded: bool = False) -> dict[str, list[Record]]:
    """Group records by scenario name into leaderboard tables; check each table is coherent.

    Args:
        records: the records.
        superseded: accept tables of an earlier version of their scenario (the archive of
            boards a version bump left behind, ``leaderboards/archive/``); by default a
            table must be of the registered version.

    Raises:
        RecordError: mixed scenario versions or environment overrides in one table, a stale
            scenario version, a duplicate entry, or learned runs of one algorithm evaluated
            with different seeds or trained with different budgets.
    """
    tables: dict[str, list[Record]] = defaultdict(list)
    for rec in records:
        tables[rec.scenario_name].append(rec)
    for name, recs in tables.items():
        versions: dict[str, Record] = {}
        for rec in recs:
            versions.setdefault(rec.data["scenario"], rec)
        if len(versions) > 1:
            listing = "; ".join(f"{v} in {r.where} {r.label}" for v, r in sorted(versions.items()))
            raise RecordError(
                f"table {name!r} mixes scenario versions: {listing}. Numbers from different "
                "versions must not share a table: drop or re-run the stale records"
            )
        for rec in recs:
            check_record(rec, current_version=not superseded)
        overrides: dict[str, Record] = {}
        for rec in recs:
            overrides.setdefault(_canon(rec.data["env_overrides"]), rec)
        if len(overrides) > 1:
            listing = "; ".join(f"{o} in {r.where} {r.label}" for o, r in sorted(overrides.items()))
            raise RecordError(f"table {name!r} mixes env_overrides: {listing}")
        seen: dict[tuple, Record] = {}
        for rec in recs:
            key = rec.run_key
            if key in seen:
                raise rec.error(f"duplicate entry: the same run is also in {seen[key].where}")
            seen[key] = rec
        kinds: dict[tuple, Record] = {}
        for rec in recs:
            other = kinds.setdefault((rec.data["algo"], rec.data["shield"]), rec)
            if other.learned != rec.learned:
                raise rec.error(
                    f"mixes a heuristic (train_seed null) and a learned run under one name with "
                    f"{other.where} {other.label}"
                )
        protocol: dict[tuple, Record] = {}
        for rec in recs:
            if not rec.learned:
                continue
            d = rec.data
            first = protocol.setdefault((d["algo"], d["shield"]), rec)
            if (first.data["eval_seeds"], first.data["episodes_per_seed"]) != (
                d["eval_seeds"],
                d["episodes_per_seed"],
            ):
                raise rec.error(
                    f"evaluated on other seeds/episodes than {first.where} {first.label}; the "
                    "training seeds of one algorithm must share the evaluation protocol"
                )
            if first.train_budget != rec.train_budget:
                # one row is one budget: seeds trained for different lengths are different
                # entries (a longer run belongs in the budget study, algo.variant=b<steps>)
                raise rec.error(
                    f"trained {_show_budget(rec)}, but {first.where} {first.label} trained "
                    f"{_show_budget(first)}; the training seeds of one entry must share the budget"
                )
    return dict(sorted(tables.items()))


__all__ = [
    "EPISODE_FIELDS",
    "NULLABLE_SCALARS",
    "REQUIRED_FIELDS",
    "Record",
    "RecordError",
    "check_record",
    "group_tables",
    "load_records",
    "load_results",
    "load_runs",
    "split_scenario_id",
]
