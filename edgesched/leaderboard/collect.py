"""Produce raw records for the committed results: collect sweep runs, evaluate the baselines."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from edgesched.experiment.io import atomic_write_bytes, write_jsonl

from .records import Record, RecordError, check_record, group_tables, load_results, load_runs


def _sort_key(d: dict[str, Any]) -> tuple:
    ts = d["train_seed"]
    return (d["scenario"], d["algo"], d["shield"], -1 if ts is None else ts)


def policy_path(policies: Path, rec: Record) -> Path:
    """``<policies>/<scenario>/<algo>[_<shield>]_seed<k>.pt`` for a learned record."""
    d = rec.data
    shield = "" if d["shield"] == "none" else f"_{d['shield']}"
    return policies / rec.scenario_name / f"{d['algo']}{shield}_seed{d['train_seed']}.pt"


def collect(
    runs: Iterable[str | Path],
    out: str | Path,
    *,
    policies: str | Path = "leaderboards/policies",
    root: str | Path = ".",
    merge: bool = False,
    log: Any = None,
) -> list[dict[str, Any]]:
    """Copy the ``eval.json`` records of finished runs into one JSON-lines results file.

    Each learned run's ``policy.pt`` is copied to :func:`policy_path` and the record's
    ``policy`` field set to that path relative to ``root`` (the repository), so that
    ``validate`` can re-run the entry from the repository alone.

    Args:
        runs: run or sweep directories; every ``eval.json`` under them is a record.
        out: the results file (.jsonl) to write.
        policies: where learned runs' policies are copied.
        root: the repository root; policy paths are stored relative to it.
        merge: keep the records ``out`` already holds and add the runs' records to them; a
            run with the same (scenario, algo, shield, train_seed) as a kept record replaces
            it. A study trained seed by seed across machines or sessions needs this: the
            run directories of its earlier seeds may be gone, while their records and
            policies are committed. Without it, ``out`` holds the runs' records only.
        log: optional callable for progress lines.

    Returns:
        The records written to ``out``.

    Raises:
        RecordError: no finished run, a malformed record, or records that do not form
            coherent tables (for example a merged seed trained with another budget).
    """
    records = load_runs(runs)
    if not records:
        raise RecordError(f"no finished run (eval.json) under {list(map(str, runs))}")
    for rec in records:
        check_record(rec)
    group_tables(records)  # duplicates, mixed versions/overrides
    kept: list[Record] = []
    if merge and Path(out).is_file():
        new = {r.run_key for r in records}
        for rec in load_results([out]):
            if rec.run_key in new:
                if log is not None:
                    log(f"{rec.where} {rec.label}: replaced by the run's record")
                continue
            check_record(rec)
            kept.append(rec)
        group_tables(kept + records)  # the merged file must still form coherent tables
    root, policies = Path(root).resolve(), Path(policies)
    for rec in records:
        if not rec.learned:
            continue
        src = rec.source.parent / "policy.pt"
        if not src.is_file():
            if log is not None:
                log(f"warning: {rec.where} has no policy.pt; its entry cannot be validated")
            continue
        dest = policy_path(policies, rec)
        atomic_write_bytes(dest, src.read_bytes())
        dest = dest.resolve()
        rec.data["policy"] = (
            dest.relative_to(root).as_posix() if dest.is_relative_to(root) else str(dest)
        )
        if log is not None:
            log(f"{rec.where} -> {rec.data['policy']}")
    rows = sorted((r.data for r in kept + records), key=_sort_key)
    write_jsonl(out, rows)
    return rows


def parse_seeds(items: Iterable[str]) -> list[int]:
    """Seeds from ``10000..10009`` (inclusive ranges), comma lists or single integers."""
    seeds: list[int] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            lo, sep, hi = part.partition("..")
            seeds += list(range(int(lo), int(hi) + 1)) if sep else [int(part)]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct integers, got {seeds}")
    return seeds


def evaluate_baselines(
    scenarios: Iterable[str],
    seeds: list[int],
    out: str | Path,
    *,
    episodes: int = 1,
    names: Iterable[str] | None = None,
    overrides: dict[str, Any] | None = None,
    shield: str = "none",
    log: Any = None,
) -> list[dict[str, Any]]:
    """Evaluate every registered baseline (or ``names``) on each scenario; write the records.

    ``shield`` puts every baseline behind that registered shield (default options). Each
    record is produced by :func:`edgesched.experiment.runner.evaluate_baseline`, the same
    path as ``python evaluate.py baseline=...``.
    """
    from edgesched.baselines import list_baselines
    from edgesched.envs.scenarios import get_scenario
    from edgesched.experiment.runner import evaluate_baseline

    names = list(names) if names else list_baselines()
    unknown = sorted(set(names) - set(list_baselines()))
    if unknown:
        raise KeyError(f"unknown baseline(s) {unknown}; registered: {list_baselines()}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for env in scenarios:
            get_scenario(env)  # unknown scenario: fail before any work
            for name in names:
                path = Path(tmp) / f"{env}_{name}.json"
                summary = evaluate_baseline(
                    name, env, dict(overrides or {}), seeds, episodes, path, shield
                )
                rows.append(json.loads(path.read_text()))
                if log is not None:
                    log(f"{env:22s} {name:14s} {shield:8s} mean JCT {summary['jct_mean']:.3f}")
    rows.sort(key=_sort_key)
    write_jsonl(out, rows)
    return rows


__all__ = ["collect", "evaluate_baselines", "parse_seeds", "policy_path"]
