"""Promote a budget study's runs to their board entry when the board's budget rises to theirs.

A budget study trains an entry past its board's budget under a variant label
(``algo.variant=b2400k`` makes entry ``mappo-b2400k``). When the study settles the board at
that budget (:data:`edgesched.experiment.budgets.BENCHMARK_BUDGETS`), those runs are exactly
what retraining the entry at the new budget would produce: the label names the run and
changes nothing else (``tests/test_training.py::test_variant_label_changes_only_the_name``
trains with and without one and compares every curve point, record number and weight).
Retraining would spend hours of CPU for bit-identical policies, so :func:`promote` relabels
them instead, after checking that they *are* today's entry:

* every record is a budget variant (``<entry>-b<k>k``) of one entry, scenario and shield;
* the runs trained the board's benchmark budget, and the policy files' stored algorithm and
  shield settings are today's defaults (the label is ignored), the comparison
  :mod:`edgesched.leaderboard.provenance` makes for ``coverage.md``.

The board's previous records of that entry are not dropped: they become the budget study's
row of their own budget (``<entry>-b<k>k`` in ``<studies>/budget/``), so the comparisons that
set the budget stay reproducible. A promoted record keeps its ``config_hash`` and
``git_commit`` (those of the run that produced it) and names its study entry in
``promoted_from``. Where the board entry was itself promoted from the study its records
would move to, and that study still holds the same runs (seeds, run configurations,
results and policy bytes), the study is left as it is and the board's copies are dropped.

Every file is written atomically, the moved records and policies before the board file
that stops naming them, so a killed promotion leaves no half-written file.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgesched.experiment.io import atomic_write_bytes, write_jsonl

from .build import BUDGET_STUDY_DIR
from .collect import _sort_key, policy_path
from .records import Record, RecordError, check_record, group_tables, load_records
from .table import entry_name, varied_entry

BUDGET_LABEL = re.compile(r"b\d+k")
"""A budget study's variant label: ``b<requested thousands of steps>k``."""


def budget_label(env_steps: int, updates: int) -> str:
    """The study label of a run that trained ``updates`` updates, ``env_steps`` in all.

    Studies are named by the requested budget (``b1200k`` for 1,199,616 trained steps), and
    a run trains the whole updates that fit in it, so the requested budget lies within one
    update above the trained steps. The roundest such number of steps is taken: a multiple
    of 100k, else of 50k, 10k, then 1k, that trains exactly these updates.
    """
    from edgesched.experiment.budgets import trained_at

    per_update = max(int(env_steps) // max(int(updates), 1), 1)
    for unit in (100_000, 50_000, 10_000, 1_000):
        budget = -(-int(env_steps) // unit) * unit  # the first multiple at or above
        if budget < env_steps + per_update and trained_at(env_steps, updates, budget):
            return f"b{budget // 1000}k"
    raise ValueError(
        f"env_steps={env_steps:,} in updates={updates} is no whole number of updates of a "
        "budget in thousands of steps; name the study row by hand"
    )


def _records(path: Path) -> list[Record]:
    recs = load_records([path], [])
    for rec in recs:
        check_record(rec)
    return recs


def _move_policy(rec: Record, policies: Path, root: Path) -> None:
    """Copy ``rec``'s policy file to the path of its (new) name; point the record at it."""
    rel = rec.data.get("policy")
    if not rel:
        raise rec.error("names no policy file; only entries that validate can be promoted")
    src = root / str(rel)
    if not src.is_file():
        raise rec.error(f"policy file {rel!r} not found under {root}")
    dest = policy_path(policies, rec)
    atomic_write_bytes(root / dest, src.read_bytes())
    rec.data["policy"] = dest.as_posix()


def _came_from(previous: list[Record], study: Path, label: str, root: Path) -> bool:
    """Whether the board's ``previous`` records were promoted from ``study``, which holds them.

    That is: its entries are named ``label`` and are the same runs (training seeds, run
    configurations, evaluation results and policy bytes).
    """
    theirs = _records(study)

    def key(data: dict[str, Any]) -> tuple:
        return (data.get("train_seed"), data.get("config_hash"), json.dumps(data["per_episode"]))

    if any(r.data.get("promoted_from") != label for r in previous):
        return False
    if any(r.data["algo"] != label for r in theirs):
        return False
    if sorted(map(key, (r.data for r in previous))) != sorted(map(key, (r.data for r in theirs))):
        return False
    policy = {key(r.data): (root / str(r.data.get("policy", ""))) for r in theirs}
    for rec in previous:
        mine, its = root / str(rec.data.get("policy", "")), policy[key(rec.data)]
        if not (mine.is_file() and its.is_file() and mine.read_bytes() == its.read_bytes()):
            return False
    return True


def _stored(rec: Record, root: Path) -> dict[str, Any]:
    """The settings ``rec``'s policy file stores; an error naming the record if it has none."""
    from .provenance import _stored_policy

    stored = _stored_policy(rec, root)
    if isinstance(stored, str):
        raise rec.error(stored)
    return stored


def _settings(rec: Record, root: Path) -> dict[str, Any]:
    """The algorithm (without its name and label) and shield settings a policy file stores."""
    from edgesched.algos import config_from_dict

    from .provenance import _IGNORED_KEYS

    stored = _stored(rec, root)
    algo = dataclasses.asdict(config_from_dict(stored["algo"]))
    return {
        "algo": {k: v for k, v in algo.items() if k not in _IGNORED_KEYS},
        "shield": dict(stored.get("shield_kwargs") or {}),
    }


def _departures(recs: list[Record], previous: list[Record], root: Path) -> list[str]:
    """Why the relabelled ``recs`` are not the entry the board trains today (none: ``[]``).

    The budget is the board's benchmark budget. A registered algorithm's stored settings
    are compared with today's defaults (:func:`~edgesched.leaderboard.provenance.algo_changes`
    and :func:`~edgesched.leaderboard.provenance.shield_changes`, which ignore the label); an
    ablation's (``tapfinger-noptr``), which has no defaults, with the settings of the board's
    previous records of it, which must exist.
    """
    from edgesched.algos import list_algorithms

    from .provenance import budget_change, setting_changes

    out = [f"{k} {was} (board {now})" for k, was, now in budget_change(recs[0])]
    if recs[0].data["algo"] in list_algorithms():
        for rec in recs:
            stored = _stored(rec, root)
            changes = setting_changes(rec, stored)
            out += [f"{k} {was} (today {now})" for k, was, now in changes]
        return sorted(set(out))
    if not previous:
        return [*out, "an ablation with no board records to compare its settings with"]
    want = _settings(previous[0], root)
    for rec in recs:
        got = _settings(rec, root)
        for part in ("algo", "shield"):
            out += [
                f"{part}.{k} {got[part].get(k)!r} (board {want[part].get(k)!r})"
                for k in sorted(set(got[part]) | set(want[part]))
                if got[part].get(k) != want[part].get(k)
            ]
    return sorted(set(out))


def promote(
    study: str | Path,
    board: str | Path,
    *,
    studies: str | Path = "leaderboards/studies",
    policies: str | Path = "leaderboards/policies",
    root: str | Path = ".",
    log: Callable[[str], Any] | None = None,
) -> tuple[list[dict[str, Any]], Path | None]:
    """Make a budget study's records the board entry they vary.

    Args:
        study: the study's results file (``leaderboards/studies/budget/<board>_<entry>-b<k>k
            .jsonl``); it is left as it is.
        board: the board's results file that holds (or will hold) the entry; its other
            records are kept.
        studies: the study records folder; the board's previous records of the entry go to
            its ``budget/`` sub-folder.
        policies: the policy folder, relative to ``root``.
        root: the repository root that records' ``policy`` paths are relative to.
        log: called with one line per file written.

    Returns:
        The promoted records, and the study file the previous records went to (``None``
        when the board had none).

    Raises:
        RecordError: the study's records are not one budget variant of one entry, are not
            today's defaults at the board's budget, or the previous records' study file
            exists already and does not hold the same runs they were promoted from.
    """
    root, study, board = Path(root), Path(study), Path(board)
    policies = Path(policies)
    recs = _records(study)
    if not recs:
        raise RecordError(f"{study}: no records to promote")
    keys = {(r.data["scenario"], varied_entry(r.data["algo"]), r.data["shield"]) for r in recs}
    if len(keys) != 1:
        raise RecordError(f"{study}: records of several entries {sorted(map(str, keys))}")
    scenario, entry, shield = keys.pop()
    for rec in recs:
        label = rec.data["algo"][len(entry or "") + 1 :]
        if not rec.learned or entry is None or BUDGET_LABEL.fullmatch(label) is None:
            raise rec.error(
                f"algo={rec.data['algo']!r} is not a budget variant '<entry>-b<k>k' of a "
                "learned entry; only a budget study's runs can be promoted (another variant "
                "changes the configuration)"
            )
    found = sorted(r.data["algo"] for r in recs)
    for rec in recs:
        rec.data["promoted_from"] = rec.data["algo"]
        rec.data["algo"] = entry
    kept, previous = [], []
    for rec in _records(board) if board.is_file() else []:
        d = rec.data
        same = (d["scenario"], d["algo"], d["shield"]) == (scenario, entry, shield)
        (previous if same else kept).append(rec)
    off = _departures(recs, previous, root)
    if off:
        raise RecordError(
            f"{study}: {found} would not be today's {entry_name(entry, shield)} on {scenario}: "
            + "; ".join(off)
        )
    group_tables(recs)  # one budget and one evaluation protocol across the seeds

    moved_to = None
    if previous:
        budgets = {r.train_budget for r in previous}
        if len(budgets) != 1 or None in budgets:
            raise RecordError(f"{board}: the previous {entry} records share no one budget")
        before = budgets.pop()
        if before == recs[0].train_budget:
            raise RecordError(
                f"{board}: {entry_name(entry, shield)} is already trained at "
                f"{before[0]:,} env steps; nothing to promote"
            )
        label = budget_label(*before)
        moved_to = (
            Path(studies) / BUDGET_STUDY_DIR / f"{previous[0].scenario_name}_{entry}-{label}.jsonl"
        )
        if moved_to.exists() and _came_from(previous, moved_to, f"{entry}-{label}", root):
            # the board entry was promoted from that study, which still holds its runs and
            # policies: the board's copies are dropped, the study stays as it is
            if log is not None:
                log(f"previous {entry} records were promoted from {moved_to}; it keeps them")
            previous = []
        elif moved_to.exists():
            raise RecordError(
                f"{moved_to} exists: the previous records of {entry} would overwrite it"
            )
        for rec in previous:
            rec.data["algo"] = f"{entry}-{label}"
            rec.data.pop("promoted_from", None)  # its name is its study label again
            _move_policy(rec, policies, root)
        if previous:
            write_jsonl(moved_to, [r.data for r in previous])
            if log is not None:
                log(f"previous {entry} records -> {moved_to} ({label})")
    for rec in recs:
        _move_policy(rec, policies, root)
    rows = sorted((r.data for r in kept + recs), key=_sort_key)
    write_jsonl(board, rows)
    if log is not None:
        log(f"{study} -> {board} as {entry_name(entry, shield)} ({len(recs)} records)")
    return [r.data for r in recs], moved_to


def _renamed(name: str, entry: str, variant: str, demote_to: str) -> str | None:
    """The name ``name`` takes when ``<entry>-<variant>`` becomes ``entry`` (else ``None``).

    ``entry`` becomes ``<entry>-<demote_to>``, ``<entry>-<variant>`` becomes ``entry``, and
    a budget study's row of either (``-b<k>k``) follows its entry.
    """
    base, _, label = name.rpartition("-")
    budget = f"-{label}" if base and BUDGET_LABEL.fullmatch(label) else ""
    stem = base if budget else name
    if stem == entry:
        return f"{entry}-{demote_to}{budget}"
    if stem == f"{entry}-{variant}":
        return f"{entry}{budget}"
    return None


def promote_variant(
    board: str,
    entry: str,
    variant: str,
    demote_to: str,
    *,
    results: str | Path = "leaderboards/results",
    studies: str | Path = "leaderboards/studies",
    policies: str | Path = "leaderboards/policies",
    root: str | Path = ".",
    log: Callable[[str], Any] | None = None,
) -> dict[str, str]:
    """Make a setting variant a board's entry when the algorithm's default becomes its setting.

    When an algorithm's default changes to what a variant trained with (TapFinger's
    ``team_reward`` on the edge boards: ``tapfinger-own`` trained ``team_reward=false``), the
    variant's runs are what retraining the entry would produce, the label aside (as for a
    budget study, :func:`promote`). On board ``board`` this renames ``<entry>-<variant>`` to
    ``entry`` and the previous ``entry``, no longer today's default, to
    ``<entry>-<demote_to>``; their budget-study rows (``<name>-b<k>k`` in ``<studies>/
    budget/``) follow their entries, so longer runs stay paired with their own setting.
    Records keep their numbers, ``config_hash`` and ``git_commit``, name their previous
    entry in ``renamed_from`` and the study row they were promoted from (``promoted_from``)
    by its new name; policy files are copied to their new names (the previous
    entry's first, since the variant's take over its paths) and the ones no record names
    any more are removed last. A results file named for one renamed entry
    (``<board>_<entry>.jsonl``) is renamed with it.

    Refuses unless every variant record (board and study) stores today's default algorithm
    and shield settings resolved on its scenario (the label ignored), trained the same budget
    as the board's previous entry, every previous record does not store them, and no record
    of the board already carries a name the renaming gives.

    Args:
        board: the board (scenario name, ``edge50``).
        entry: the algorithm's entry (``tapfinger``; a shielded entry is renamed with each of
            its shields).
        variant: the variant's label (``own`` of ``tapfinger-own``).
        demote_to: the label the previous entry gets (``mean``).
        results: the boards' results folder.
        studies: the study records folder (its ``budget/`` is renamed too).
        policies: the policy folder, relative to ``root``.
        root: the repository root the records' ``policy`` paths are relative to.
        log: called with one line per file written or removed.

    Returns:
        ``{old name: new name}`` of the entries renamed.

    Raises:
        RecordError: a check above failed (nothing is written then).
    """
    from .provenance import setting_changes

    root, policies = Path(root), Path(policies)
    for flag, label in (("variant", variant), ("demote_to", demote_to)):
        if not label or "-" in label or BUDGET_LABEL.fullmatch(label):
            raise RecordError(
                f"{flag}={label!r} is not allowed; use one label without '-' that is not a "
                "budget label b<k>k"
            )
    files = sorted(Path(results).glob("*.jsonl"))
    files += sorted((Path(studies) / BUDGET_STUDY_DIR).glob("*.jsonl"))
    content: dict[Path, list[Record]] = {f: _records(f) for f in files}
    mine = [r for recs in content.values() for r in recs if r.scenario_name == board]
    renames = {
        r.data["algo"]: new
        for r in mine
        if (new := _renamed(r.data["algo"], entry, variant, demote_to)) is not None
    }
    board_recs = {name: [r for r in mine if r.data["algo"] == name] for name in renames}
    promoted = board_recs.get(f"{entry}-{variant}", [])
    previous = board_recs.get(entry, [])
    if not promoted:
        raise RecordError(f"{board}: no records of {entry}-{variant} in {results}")
    taken = {r.data["algo"] for r in mine} - set(renames)
    clash = sorted(set(renames.values()) & taken)
    if clash:
        raise RecordError(f"{board}: entries {clash} exist already; the renaming would merge them")

    def changes(rec: Record) -> list[str]:
        out = setting_changes(rec, _stored(rec, root))
        return [f"{k} {was} (today {now})" for k, was, now in out]

    for rec in mine:
        name = rec.data["algo"]
        if name not in renames or not rec.learned:
            continue
        off = changes(rec)
        if renames[name].startswith(f"{entry}-{demote_to}"):
            if not off:
                raise rec.error(
                    f"{name} is trained with today's defaults; it stays {name} (nothing to "
                    f"promote over it)"
                )
        elif off:
            raise rec.error(f"{name} would not be today's {entry}: " + "; ".join(sorted(set(off))))
    if previous and {r.train_budget for r in previous} != {r.train_budget for r in promoted}:
        raise RecordError(
            f"{board}: {entry}-{variant} and {entry} were trained at different budgets; "
            "promote a budget study's runs with `promote` instead"
        )

    # policies: the previous entry's new copies first (the variant's take over their paths)
    order = sorted(
        (r for r in mine if r.data["algo"] in renames),
        key=lambda r: not renames[r.data["algo"]].startswith(f"{entry}-{demote_to}"),
    )
    before = {root / str(r.data["policy"]) for r in order if r.data.get("policy")}
    moved = {id(r) for r in order}  # this call's; a record may carry an earlier renamed_from
    for rec in order:
        rec.data["renamed_from"] = rec.data["algo"]
        rec.data["algo"] = renames[rec.data["algo"]]
        if rec.data.get("promoted_from") in renames:  # its study row is renamed too
            rec.data["promoted_from"] = renames[rec.data["promoted_from"]]
        if rec.data.get("policy"):
            # the record's policy path is relative to root; policy_path's folder is too
            _move_policy(rec, policies, root)
    # records: files named for one renamed entry are renamed with it
    written: dict[Path, list[dict[str, Any]]] = {}
    for path, recs in content.items():
        if not any(id(r) in moved for r in recs):
            continue
        stem_board, _, stem_entry = path.stem.partition("_")
        names = {r.data["renamed_from"] if id(r) in moved else r.data["algo"] for r in recs}
        target = path
        if stem_board == board and names == {stem_entry} and stem_entry in renames:
            target = path.with_name(f"{board}_{renames[stem_entry]}.jsonl")
        written.setdefault(target, []).extend(r.data for r in recs)
    demoted_first = sorted(written, key=lambda p: f"-{demote_to}" not in p.stem)
    for target in demoted_first:
        write_jsonl(target, sorted(written[target], key=_sort_key))
        if log is not None:
            log(f"wrote {target} ({len(written[target])} records)")
    for path in content:
        if path not in written and any(id(r) in moved for r in content[path]):
            path.unlink()
            if log is not None:
                log(f"removed {path} (its records are in their renamed file)")
    named = {
        root / str(json.loads(line).get("policy"))
        for folder in (Path(results), Path(studies))
        for path in folder.rglob("*.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    }
    for old in sorted(before - named):
        old.unlink()
        if log is not None:
            log(f"removed {old} (no record names it)")
    return renames


__all__ = ["BUDGET_LABEL", "budget_label", "promote", "promote_variant"]
