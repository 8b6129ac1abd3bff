"""Whether a learned entry is what ``python train.py algo=<name>`` trains today.

A record names the algorithm it was trained with, but an algorithm's defaults move on (RLPTO's
credit became per-job and its placement ``min_alloc``, SROLE's shield training became
preemptive, ``dqn_central`` became work-conserving). A board row labelled ``rlpto`` that was
trained before such a change still reproduces under ``validate`` (its policy file keeps the
settings it was trained with), yet it is not the algorithm a reader would run. This module
compares each learned record with today's defaults, from what the record and its policy file
store:

* the algorithm's hyperparameters: the ``algo`` node of the policy file, read through
  :func:`edgesched.algos.config_from_dict` (so a key added later takes the value that keeps the
  stored behaviour), against :func:`edgesched.algos.algo_config`'s defaults, which
  ``conf/algo/<name>.yaml`` restates (``tests/test_algo_contract.py`` keeps the two equal);
* the shield's options, against the defaults of ``ShieldConfig`` (``conf/shield/``);
* the budget: the record's training env steps against its board's benchmark budget
  (:func:`edgesched.experiment.budgets.benchmark_budget`: the default
  ``experiment.total_env_steps`` unless the board has a longer one; the runner trains
  :func:`~edgesched.experiment.schema.whole_updates` of them).

Entries of a variant (``tapfinger-noattn``: an ablation, named as such) are not checked: their
name already says they are not the default algorithm.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .records import Record
from .table import entry_name

_IGNORED_KEYS = ("name", "variant")


@dataclass(frozen=True)
class Departure:
    """How one learned record differs from today's defaults.

    Attributes:
        record: the record.
        changes: ``(setting, trained with, today's default)`` per differing setting.
        unknown: why the settings cannot be compared (no policy file), else ``""``.
    """

    record: Record
    changes: tuple[tuple[str, str, str], ...]
    unknown: str = ""


def _text(value: Any) -> str:
    return "`" + (repr(value) if isinstance(value, str) else str(value)) + "`"


def _stored_policy(rec: Record, root: Path) -> dict[str, Any] | str:
    """The policy file's stored settings, or why there are none."""
    rel = rec.data.get("policy")
    if not rel:
        return "no policy file in the record"
    path = root / str(rel)
    if not path.is_file():
        return f"policy file {rel!r} not found"
    import torch  # only here: building the tables alone needs no torch

    stored = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(stored, dict) or not isinstance(stored.get("algo"), dict):
        return f"policy file {rel!r} stores no algorithm config"
    return stored


def scenario_config(rec: Record) -> Any:
    """The :class:`~edgesched.envs.config.SimConfig` ``rec`` was evaluated on, or ``None``.

    ``None`` where the record's scenario is not registered here (then a default that follows
    the scenario stays unresolved, and differs from any stored value).
    """
    from edgesched.envs.handle import resolve_scenario

    try:
        return resolve_scenario(
            str(rec.data["scenario"]), **dict(rec.data.get("env_overrides") or {})
        ).config
    except (KeyError, ValueError):
        return None


def algo_changes(
    stored_algo: dict[str, Any], shield: str = "none", sim_config: Any = None
) -> list[tuple[str, str, str]]:
    """``(key, stored, default)`` for every hyperparameter that differs from today's default.

    A key the stored settings make inert (``AlgorithmConfig.inert_keys``: it cannot change
    training with them and ``shield``) is not a difference. A default that follows the
    scenario (``AlgorithmConfig.for_scenario``, TapFinger's ``team_reward``) is compared as
    it resolves on ``sim_config``, on both sides.

    Args:
        stored_algo: a stored ``algo`` node (with its ``name``), as in ``policy.pt``.
        shield: the shield it was trained with.
        sim_config: the scenario's configuration (:func:`scenario_config`), if known.
    """
    from edgesched.algos import algo_config, config_from_dict

    stored = config_from_dict(stored_algo).for_scenario(sim_config)
    trained = dataclasses.asdict(stored)
    today = dataclasses.asdict(algo_config(str(stored_algo["name"])).for_scenario(sim_config))
    skip = set(_IGNORED_KEYS) | stored.inert_keys(shield)
    return [
        (key, _text(trained[key]), _text(today[key]))
        for key in sorted(today)
        if key not in skip and trained.get(key) != today[key]
    ]


def shield_changes(shield: str, stored_kwargs: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(shield.<key>, stored, default)`` for shield options that differ from the default."""
    if shield in ("", "none"):
        return []
    from omegaconf import OmegaConf

    from edgesched.experiment.schema import ShieldConfig, shield_kwargs

    today = shield_kwargs(OmegaConf.structured(ShieldConfig(name=shield)))
    return [
        (f"shield.{key}", _text(stored_kwargs.get(key)), _text(today.get(key)))
        for key in sorted(set(today) | set(stored_kwargs))
        if stored_kwargs.get(key, today.get(key)) != today.get(key)
    ]


def setting_changes(rec: Record, stored: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``rec``'s algorithm and shield settings that differ from today's defaults.

    Args:
        rec: a learned record.
        stored: its policy file's contents (``algo``, ``shield_kwargs``).
    """
    changes = algo_changes(stored["algo"], rec.data["shield"], scenario_config(rec))
    changes += shield_changes(rec.data["shield"], dict(stored.get("shield_kwargs") or {}))
    return changes


def budget_change(rec: Record) -> list[tuple[str, str, str]]:
    """The budget as a change when the record was not trained at its board's budget."""
    from edgesched.experiment.budgets import benchmark_budget, trained_at

    if rec.train_budget is None:
        return []
    budget = benchmark_budget(str(rec.data["scenario"]))
    if trained_at(*rec.train_budget, budget):
        return []
    return [("experiment.total_env_steps", f"{rec.train_budget[0]:,} env steps", f"{budget:,}")]


def departures(records: list[Record], root: str | Path = ".") -> list[Departure]:
    """The learned records that are not today's defaults (or cannot be checked).

    Args:
        records: records of any kind; heuristics and variant entries are skipped.
        root: the directory that the records' ``policy`` paths are relative to.
    """
    from edgesched.algos import list_algorithms

    root, found = Path(root), []
    for rec in records:
        if not rec.learned or rec.data["algo"] not in list_algorithms():
            continue
        stored = _stored_policy(rec, root)
        if isinstance(stored, str):
            found.append(Departure(rec, (), stored))
            continue
        changes = setting_changes(rec, stored) + budget_change(rec)
        if changes:
            found.append(Departure(rec, tuple(changes)))
    return found


def matched_bases(
    records: list[Record], variants: tuple[str, ...], root: str | Path = "."
) -> dict[tuple[str, str], tuple[str, tuple[str, ...]]]:
    """For each variant entry (an ablation), the entry it should be compared with.

    An ablation changes one component of its algorithm; what the component is worth is the
    difference from the entry trained with the same settings otherwise. When a default
    moves after the ablation was trained (TapFinger's ``pointer_clip``), the board's
    default entry differs in more than the component, and an entry demoted to a variant
    (``tapfinger-noclip``) may be the ablation's true base. The base is the entry of the
    same algorithm on the same board, not itself a listed variant, whose stored settings
    (resolved on the board's scenario) differ from the variant's in the fewest keys, the
    default entry first among equals.

    Args:
        records: the boards' records.
        variants: the variant entries to match (e.g. ``("tapfinger-noattn", ...)``).
        root: the directory that the records' ``policy`` paths are relative to.

    Returns:
        ``(board, variant) -> (base entry, keys in which they differ)``, for
        every variant with a readable policy file and a candidate base that has one too.
    """
    from edgesched.algos import config_from_dict

    root = Path(root)
    settings: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
    for rec in records:
        if not rec.learned or rec.data["shield"] not in ("", "none"):
            continue
        key = (rec.scenario_name, str(rec.data["algo"]))
        if key in settings:
            continue
        stored = _stored_policy(rec, root)
        if isinstance(stored, str):
            continue
        cfg = config_from_dict(stored["algo"]).for_scenario(scenario_config(rec))
        settings[key] = (str(stored["algo"]["name"]), dataclasses.asdict(cfg))
    out = {}
    for (board, entry), (algo, mine) in settings.items():
        if entry not in variants:
            continue
        best: tuple[int, bool, str, tuple[str, ...]] | None = None
        for (other_board, other), (other_algo, theirs) in settings.items():
            if other_board != board or other_algo != algo or other in variants:
                continue
            diff = tuple(
                k for k in sorted(mine) if k not in _IGNORED_KEYS and mine.get(k) != theirs.get(k)
            )
            rank = (len(diff), other != algo, other, diff)
            if best is None or rank < best:
                best = rank
        if best is not None:
            out[(board, entry)] = (best[2], best[3])
    return out


def render_departures(found: list[Departure]) -> list[str]:
    """Markdown lines for ``coverage.md``: one line per (board, entry) with its departures."""
    lines = [
        "## Entries trained with other than today's defaults",
        "",
        "Compared with what `python train.py algo=<name>` trains now (the policy file's stored "
        "algorithm and shield settings, and the board's benchmark budget; "
        "`edgesched/leaderboard/provenance.py`). "
        "Such an entry still reproduces under `validate`, but it is not today's algorithm.",
        "",
    ]
    grouped: dict[tuple[str, str, str], list[Departure]] = {}
    for dep in found:
        d = dep.record.data
        grouped.setdefault((dep.record.scenario_name, d["algo"], d["shield"]), []).append(dep)
    if not grouped:
        return [*lines, "None: every learned entry is trained with today's defaults.", ""]
    lines += [
        "| board | entry | training seeds | trained with (today's default) |",
        "|---|---|---|---|",
    ]
    for (board, algo, shield), deps in sorted(grouped.items()):
        label = entry_name(algo, shield)
        seeds = ", ".join(str(d.record.data["train_seed"]) for d in deps)
        texts = sorted(
            {
                dep.unknown or "; ".join(f"{key} {was} ({now})" for key, was, now in dep.changes)
                for dep in deps
            }
        )
        lines.append(f"| {board} | {label} | {seeds} | {' / '.join(texts)} |")
    return [*lines, ""]


__all__ = [
    "Departure",
    "algo_changes",
    "budget_change",
    "departures",
    "render_departures",
    "scenario_config",
    "setting_changes",
]
