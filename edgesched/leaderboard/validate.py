"""Re-run leaderboard entries from their records and check that every number reproduces.

* Heuristics are re-evaluated with the record's scenario, overrides, evaluation seeds and
  episodes; the simulator is deterministic, so every per-episode number must match exactly.
* Learned entries whose record names a ``policy`` file (a path relative to the repository,
  set by ``collect``) are reloaded with :func:`edgesched.experiment.evaluation.load_policy`
  and re-evaluated as their run was (greedily; tapfinger with seeded sampling); numbers
  must match within a small relative tolerance.
* Entries that cannot be re-run here (learned without a policy file, a shield that is not
  registered) are reported as skipped.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgesched.experiment.io import to_jsonable

from .records import Record

LEARNED_RTOL = 1e-6


@dataclass
class ValidationReport:
    """Outcome of :func:`validate_records`."""

    ok: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when no entry failed to reproduce."""
        return not self.mismatches


WALL_CLOCK_METRICS = frozenset(
    {
        "shield_latency_ms",
        "shield_compute_total_ms",
        "head_latency_ms",
        "head_busy_ms_per_slot",
        "wall_s",  # rlpto's per-episode evaluation time
    }
)
"""Measured wall-clock times: recorded for the scalability studies, never reproducible, so
only their presence is checked."""

ADDED_METRICS = frozenset({"occupied_share_mean", "quality_total", "invalid_actions"})
"""Metrics added after records existed: a rerun may have them where an older record has
not (compared when both have them)."""


def diff(recorded: Any, fresh: Any, rtol: float, path: str = "") -> list[str]:
    """Differences between a recorded and a recomputed value (numbers within ``rtol``)."""
    if isinstance(recorded, dict) and isinstance(fresh, dict):
        out = []
        for k in sorted(set(recorded) | set(fresh)):
            if k in WALL_CLOCK_METRICS and k in recorded and k in fresh:
                continue
            if k in ADDED_METRICS and k not in recorded:
                continue
            if k not in recorded or k not in fresh:
                out.append(f"{path}.{k}: only in {'record' if k in recorded else 'rerun'}")
            else:
                out += diff(recorded[k], fresh[k], rtol, f"{path}.{k}")
        return out
    if isinstance(recorded, list) and isinstance(fresh, list):
        if len(recorded) != len(fresh):
            return [f"{path}: length {len(recorded)} recorded, {len(fresh)} re-run"]
        out = []
        for i, (a, b) in enumerate(zip(recorded, fresh, strict=True)):
            out += diff(a, b, rtol, f"{path}[{i}]")
        return out
    numbers = (int, float)
    if (
        isinstance(recorded, numbers)
        and isinstance(fresh, numbers)
        and not isinstance(recorded, bool)
        and not isinstance(fresh, bool)
    ):
        if recorded == fresh or math.isclose(recorded, fresh, rel_tol=rtol, abs_tol=rtol * 1e-3):
            return []
        return [f"{path}: recorded {recorded!r}, re-run {fresh!r}"]
    if recorded != fresh:
        return [f"{path}: recorded {recorded!r}, re-run {fresh!r}"]
    return []


def _fresh(result: dict[str, Any]) -> dict[str, Any]:
    # the same JSON round trip as the written record (NaN -> null, tuples -> lists)
    return json.loads(json.dumps(to_jsonable(result), allow_nan=False))


def _compare(rec: Record, result: dict[str, Any], rtol: float) -> list[str]:
    d = rec.data

    def key(row: dict[str, Any]) -> tuple[int, int]:
        return row["eval_seed"], row["episode"]

    fresh = _fresh(result)
    out = diff(
        sorted(d["per_episode"], key=key),
        sorted(fresh["per_episode"], key=key),
        rtol,
        "per_episode",
    )
    out += diff(d["summary"], fresh["summary"], rtol, "summary")
    return out


def rerun_heuristic(rec: Record) -> dict[str, Any]:
    """Evaluate the record's heuristic exactly as ``evaluate_baseline`` did."""
    from edgesched.baselines import make_baseline
    from edgesched.envs.handle import resolve_scenario
    from edgesched.experiment.evaluation import evaluate_scheduler

    d = rec.data
    # the record's own version, also after its scenario moved on (archived boards)
    scenario = resolve_scenario(d["scenario"], **d["env_overrides"])
    policy = make_baseline(d["algo"], scenario.spec, seed=0)
    return evaluate_scheduler(
        policy, scenario, None, d["eval_seeds"], d["episodes_per_seed"], shield=d["shield"]
    )


def rerun_learned(
    rec: Record, root: Path, env_overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Reload the record's ``policy`` file and evaluate it as its run did, on its seeds.

    Args:
        rec: a learned record with a ``policy`` file.
        root: the directory its policy path is relative to.
        env_overrides: the scenario overrides to evaluate under instead of the record's own
            (``None``: the record's; a policy trained under some rules, evaluated under
            others, as ``benchmarks/rules_transfer.py`` does).
    """
    import torch

    from edgesched.envs.handle import resolve_scenario
    from edgesched.experiment.evaluation import (
        STRICT_OVERRIDES,
        LearnedScheduler,
        evaluate_scheduler,
        load_policy,
    )

    torch.set_num_threads(1)  # as in training's final evaluation (experiment.threads)
    d = rec.data
    overrides = d["env_overrides"] if env_overrides is None else env_overrides
    path = root / d["policy"]
    if not path.is_file():
        raise FileNotFoundError(f"policy file {d['policy']!r} not found under {root}")
    policy, _, _ = load_policy(str(path), d["scenario"])
    if not isinstance(policy, LearnedScheduler):
        # load_policy returns the trainer itself for learners that evaluate themselves
        # (registry flag own_view, e.g. dqn_central); their view builds its own
        # environment: strict like every evaluation environment
        scenario = resolve_scenario(d["scenario"], **overrides)
        return policy.evaluate(
            scenario, dict(STRICT_OVERRIDES), d["eval_seeds"], d["episodes_per_seed"]
        )
    return evaluate_scheduler(
        policy,
        d["scenario"],
        overrides,
        d["eval_seeds"],
        d["episodes_per_seed"],
        shield=d["shield"],
        shield_kwargs=policy.shield_kwargs,
    )


def _check(rec: Record, root: Path, learned_rtol: float) -> tuple[str, str]:
    """Re-run one record: its status (``ok``, ``MISMATCH``, ``skipped``) and what was wrong.

    A top-level function so that a process pool can run it (:func:`validate_records`).
    """
    from edgesched.baselines import list_baselines
    from edgesched.shields import list_shields

    d = rec.data
    try:
        if d["shield"] != "none" and d["shield"] not in list_shields():
            return "skipped", f"shield {d['shield']!r} is not registered here"
        if not rec.learned:
            if d["algo"] not in list_baselines():
                return "MISMATCH", f"unknown baseline {d['algo']!r}; registered: {list_baselines()}"
            problems = _compare(rec, rerun_heuristic(rec), 0.0)
        elif d.get("policy"):
            problems = _compare(rec, rerun_learned(rec, root), learned_rtol)
        else:
            return "skipped", "learned entry without a policy file"
    except (FileNotFoundError, KeyError, ValueError) as exc:
        return "MISMATCH", f"cannot re-run: {exc}"
    return ("MISMATCH", "; ".join(problems[:10])) if problems else ("ok", "")


def validate_records(
    records: list[Record],
    root: str | Path = ".",
    *,
    learned_rtol: float = LEARNED_RTOL,
    log: Any = None,
    jobs: int = 1,
) -> ValidationReport:
    """Re-run every re-runnable record and compare its numbers with the recorded ones.

    Args:
        records: records to check (already validated by ``load_records``/``group_tables``).
        root: directory that ``policy`` paths are relative to (the repository).
        learned_rtol: relative tolerance for learned entries (heuristics: exact).
        log: optional callable receiving one progress line per record, in record order.
        jobs: records re-run at once, each in its own process (1: in this process). Each
            re-run is single-threaded and deterministic, so the report does not depend on it.

    Raises:
        ValueError: ``jobs`` is below 1.
    """
    if int(jobs) < 1:
        raise ValueError(f"jobs={jobs!r} is not allowed; use 1 or more processes")
    root = Path(root)
    if int(jobs) == 1 or len(records) < 2:
        outcomes: Any = (_check(rec, root, learned_rtol) for rec in records)
        return _report(records, outcomes, log)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: the parent may hold torch's and numba's threads and locks
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(int(jobs), len(records)), mp_context=ctx) as pool:
        outcomes = pool.map(_check, records, [root] * len(records), [learned_rtol] * len(records))
        return _report(records, outcomes, log)


def _report(records: list[Record], outcomes: Any, log: Any) -> ValidationReport:
    """Sort each record's ``(status, message)`` into a :class:`ValidationReport`."""
    report = ValidationReport()
    for rec, (status, message) in zip(records, outcomes, strict=True):
        tag = f"{rec.where} {rec.label}"
        if status == "ok":
            report.ok.append(tag)
        elif status == "skipped":
            report.skipped.append(f"{tag}: {message}")
        else:
            report.mismatches.append(f"{tag}: {message}")
        if log is not None:
            log(f"{status:8s} {tag}")
    return report


__all__ = ["LEARNED_RTOL", "ValidationReport", "diff", "validate_records"]


def refresh_file(
    path: str | Path,
    root: str | Path = ".",
    *,
    scenarios: list[str] | None = None,
    algos: list[str] | None = None,
    log: Any = None,
) -> list[str]:
    """Re-evaluate records of one results file with the current code, in place.

    For after the evaluation gained metrics: each chosen record's ``per_episode``,
    ``summary`` and ``git_commit`` are replaced by a fresh run on the record's own seeds
    (learned entries from their ``policy`` file, heuristics re-run); everything else is
    kept. Mean JCTs that moved are reported (the simulator is deterministic, so they should
    not; a scenario version change needs retraining, not a refresh). The file is rewritten
    atomically.

    Returns:
        One line per refreshed record with its old and new mean JCT.
    """
    from edgesched.experiment.io import git_commit, write_jsonl

    from .records import load_records

    records = load_records([path], [])
    lines, out = [], []
    commit = git_commit()
    for rec in records:
        d = dict(rec.data)
        chosen = (not scenarios or rec.scenario_name in scenarios) and (
            not algos or d["algo"] in algos
        )
        if chosen:
            fresh = rerun_learned(rec, Path(root)) if rec.learned else rerun_heuristic(rec)
            old = float(d["summary"]["jct_mean"])
            d["per_episode"], d["summary"] = fresh["per_episode"], fresh["summary"]
            d["git_commit"] = commit
            line = f"{rec.label}: jct_mean {old:.4f} -> {float(d['summary']['jct_mean']):.4f}"
            lines.append(line)
            if log:
                log(line)
        out.append(d)
    write_jsonl(path, out)
    return lines
