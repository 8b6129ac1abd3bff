"""Leaderboard tables (``<scenario>.md``, ``.csv``, ``.png``) generated from raw records.

One table per scenario. One row per (algorithm, shield):

* learned schedulers: one run per training seed, scored on every held-out evaluation seed;
  the score matrix is (training seeds x evaluation seeds) and the bootstrap resamples
  training seeds independently within each evaluation seed (stratified bootstrap);
* heuristics: one deterministic run; the "runs" of the bootstrap are the evaluation seeds.

A run's score on an evaluation seed is its mean JCT over that seed's episodes. The markdown
and CSV depend only on the records (fixed bootstrap seed, sorted rows, fixed number formats),
so they are byte-identical for the same records.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from edgesched.experiment.io import atomic_write_bytes, atomic_write_text

from . import stats
from .curves import entry_curve, render_budget_tiers, render_curves_md, render_curves_png
from .provenance import Departure, departures, render_departures
from .records import Record, RecordError, group_tables, load_records
from .table import Row, _ci, _f, _n_seeds, entry_name, png_bytes

REFERENCE = "random"


def _score_matrix(recs: list[Record]) -> tuple[np.ndarray, list[int]]:
    """Mean JCT per (run, evaluation seed); runs = training seeds (learned) or one heuristic."""
    seeds = list(recs[0].data["eval_seeds"])
    mat = np.empty((len(recs), len(seeds)))
    for i, rec in enumerate(recs):
        per: dict[int, list[float]] = {}
        for row in rec.data["per_episode"]:
            per.setdefault(row["eval_seed"], []).append(float(row["jct_mean"]))
        mat[i] = [np.mean(per[s]) for s in seeds]
    return mat, seeds


def _seed_cluster_rewards(recs: list[Record], seeds: list[int]) -> list[float]:
    """RLPTO's cluster reward per evaluation seed, averaged over runs and episodes."""
    from edgesched.protocol import cluster_reward

    per: dict[int, list[float]] = {}
    for rec in recs:
        for row in rec.data["per_episode"]:
            per.setdefault(row["eval_seed"], []).append(cluster_reward(row))
    return [float(np.mean(per[s])) for s in seeds]


def _strata(mat: np.ndarray, learned: bool) -> list[np.ndarray]:
    # learned: one stratum per evaluation seed holding the training seeds' scores;
    # heuristic: a single stratum whose runs are the evaluation seeds
    return [mat[:, j] for j in range(mat.shape[1])] if learned else [mat[0]]


def _episode_mean(rows: list[dict[str, Any]], key: str) -> float:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.mean(vals)) if vals else float("nan")


def _episode_mean_all(rows: list[dict[str, Any]], key: str) -> float:
    """Mean over episodes, or NaN unless every episode recorded ``key`` (no partial means)."""
    vals = [r.get(key) for r in rows]
    if not vals or any(v is None for v in vals):
        return float("nan")
    return float(np.mean(vals))


def _study_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per-entry means the study pages need (RLPTO's reward, resources, per-class JCT)."""
    from edgesched.protocol import COLOCATION_METRICS, cluster_reward

    out = {
        k: _episode_mean_all(rows, k)
        for k in (
            "final_quality_mean",
            "occupied_share_mean",
            "rule_shrinks",
            "gpus_per_job_small",
            "gpus_per_job_large",
            *COLOCATION_METRICS,
        )
    }
    rewards = [cluster_reward(r) for r in rows]
    out["cluster_reward"] = float(np.mean(rewards)) if rows else float("nan")
    classes = max((len(r.get("jct_by_priority") or []) for r in rows), default=0)
    for p in range(classes):
        vals = [r["jct_by_priority"][p] for r in rows if r["jct_by_priority"][p] is not None]
        out[f"jct_prio_{p}"] = float(np.mean(vals)) if vals else float("nan")
    return out


def _reference_by_seed(ref: Record | None) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = {}
    if ref is not None:
        for row in ref.data["per_episode"]:
            out.setdefault(row["eval_seed"], {})[row["episode"]] = float(row["jct_mean"])
    return out


def compute_rows(recs: list[Record], reference: str = REFERENCE) -> list[Row]:
    """Statistics of every (algorithm, shield) of one scenario's records, best mean JCT first."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for rec in recs:
        groups.setdefault((rec.data["algo"], rec.data["shield"]), []).append(rec)
    ref_recs = [r for r in groups.get((reference, "none"), []) if not r.learned]
    ref = _reference_by_seed(ref_recs[0] if ref_recs else None)
    rows = []
    for (algo, shield), group in sorted(groups.items()):
        group.sort(key=lambda r: r.data["train_seed"] if r.learned else -1)
        learned = group[0].learned
        mat, seeds = _score_matrix(group)
        episodes = int(group[0].data["episodes_per_seed"])
        strata = _strata(mat, learned)
        all_rows = [row for r in group for row in r.data["per_episode"]]
        metrics = {
            k: _episode_mean(all_rows, k)
            for k in (
                "jct_p95",
                "jct_mean_completed",
                "collisions_proposed",
                "collisions_executed",
                "overload_node_slots",
                "median_node_utilization",
                "jobs_unfinished",
                "jct_lower_bound_mean",
                "makespan",
                "shield_interventions",
            )
        }
        metrics.update(_study_metrics(all_rows))
        mean = stats.stratified_bootstrap(strata, "mean")
        iqm = stats.stratified_bootstrap(strata, "iqm")
        # the reference must cover the same (seed, episode) workloads
        covered = all(s in ref and all(k in ref[s] for k in range(episodes)) for s in seeds)
        if covered:
            ref_seed = np.array([np.mean([ref[s][k] for k in range(episodes)]) for s in seeds])
            norm = stats.normalized_score(
                mean.value, float(ref_seed.mean()), metrics["jct_lower_bound_mean"]
            )
            # higher is better for the probability of improvement: negate the JCTs
            poi = stats.probability_of_improvement(
                [-mat[:, j] for j in range(len(seeds))],
                [-ref_seed[j : j + 1] for j in range(len(seeds))],
            )
        else:
            norm = poi = float("nan")
        rows.append(
            Row(
                algo=algo,
                shield=shield,
                learned=learned,
                train_seeds=[int(r.data["train_seed"]) for r in group] if learned else [],
                eval_seeds=[int(s) for s in seeds],
                episodes=episodes,
                mean=mean,
                iqm=iqm,
                metrics=metrics,
                normalized_score=norm,
                p_improvement=poi,
                commits=sorted({str(r.data["git_commit"]) for r in group}),
                config_hashes=sorted({str(r.data["config_hash"]) for r in group}),
                episode_jcts=[float(row["jct_mean"]) for row in all_rows],
                seed_scores=mat.tolist(),
                seed_cluster_rewards=_seed_cluster_rewards(group, seeds),
                fingerprint=json.dumps(
                    [(r.data["eval_seeds"], r.data["per_episode"]) for r in group], sort_keys=True
                ),
                curve=entry_curve(group) if learned else None,
                train_budget=group[0].train_budget if learned else None,
            )
        )
    rows.sort(key=lambda r: (r.mean.value, r.algo, r.shield))
    return rows


def merge_identical(rows: list[Row]) -> list[Row]:
    """One row for heuristics (with one shield) whose records are identical on every episode.

    Identical per-episode records on every evaluation episode mean the heuristics made the
    same decisions on this board (for example FIFO, SJF and least-loaded placement when an
    agent sees only the head of its queue), so a board shows them once, as ``a = b``.
    Learned entries are never merged. The first name (alphabetical) keeps the row.
    """
    first: dict[tuple[str, str], int] = {}
    aliases: dict[int, list[str]] = {}
    keep = []
    for i, r in enumerate(rows):
        if r.learned:
            keep.append(i)
            continue
        j = first.setdefault((r.shield, r.fingerprint), i)
        if j == i:
            keep.append(i)
        else:
            aliases.setdefault(j, []).append(r.algo)
    out = []
    for i in keep:
        r = rows[i]
        names = sorted([r.algo, *aliases.get(i, [])])
        out.append(dataclasses.replace(r, algo=names[0], aliases=tuple(names[1:])))
    return out


# ------------------------------------------------------------------------------ formatting
def seed_ranges(seeds: list[int]) -> str:
    """Compact integer list: ``[0, 1, 2, 5]`` -> ``0..2,5``."""
    s = sorted(seeds)
    parts, i = [], 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(str(s[i]) if i == j else f"{s[i]}..{s[j]}")
        i = j + 1
    return ",".join(parts)


def _short_commit(c: str) -> str:
    sha, dirty, _ = c.partition("-dirty")
    return sha[:10] + ("-dirty" if dirty else "")


def _seeds_text(row: Row) -> str:
    ev = f"eval {seed_ranges(row.eval_seeds)} x{row.episodes} ep"
    if not row.learned:
        return ev
    # the budget beside the seeds: a board's entries may differ in it while they are
    # retrained at a new benchmark budget (coverage.md's budget tiers)
    steps = f" ({row.train_budget[0]:,} steps)" if row.train_budget else ""
    return f"train {seed_ranges(row.train_seeds)}{steps}; {ev}"


MD_COLUMNS = (
    "algo",
    "shield",
    "kind",
    "#seeds",
    "mean JCT [95% CI]",
    "IQM JCT [95% CI]",
    "norm. score",
    "P(better than {ref})",
    "collisions prop. / exec.",
    "median util.",
    "unfinished jobs",
    "git commit(s)",
    "config hash(es)",
    "seeds",
)


def render_markdown(
    scenario_id: str,
    overrides: dict[str, Any],
    rows: list[Row],
    reference: str,
    n_records: int,
    superseded: bool = False,
) -> str:
    """The ``<scenario>.md`` leaderboard (``superseded``: of an earlier scenario version)."""
    name = scenario_id.rpartition("-v")[0]
    ov = ", ".join(f"`{k}={v!r}`" for k, v in sorted(overrides.items())) or "none"
    head = [c.format(ref=reference) for c in MD_COLUMNS]
    lines = [
        f"# Leaderboard: {name} (`{scenario_id}`)",
        "",
        _generated_comment(superseded),
        "",
        f"Scenario `{scenario_id}`, environment overrides: {ov}. {n_records} raw records. "
        "JCT = job completion time in slots (arrival to finish; jobs unfinished at the end "
        "of an episode count with their time so far); lower is better. Protocol and "
        "statistics: [README](README.md).",
        "",
        *_superseded_note(scenario_id, superseded),
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for r in rows:
        m = r.metrics
        cells = [
            r.label,
            r.shield,
            "learned" if r.learned else "heuristic",
            _n_seeds(r),
            _ci(r.mean),
            _ci(r.iqm),
            _f(r.normalized_score, 3),
            _f(r.p_improvement, 2),
            f"{_f(m['collisions_proposed'], 1)} / {_f(m['collisions_executed'], 1)}",
            _f(m["median_node_utilization"], 3),
            _f(m["jobs_unfinished"], 1),
            " ".join(_short_commit(c) for c in r.commits),
            " ".join(r.config_hashes),
            _seeds_text(r),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Mean and IQM (interquartile mean) of the per-seed mean JCT, with 95% stratified "
        "bootstrap percentile CIs (learned: training seeds resampled within each evaluation "
        "seed; heuristics: evaluation seeds resampled). Normalized score = (JCT_random - "
        "JCT) / (JCT_random - JCT_bound), JCT_bound = mean per-job lower bound (each job "
        f"alone at its best allocation). P(better than {reference}) = Mann-Whitney U / (n m) "
        f"against {reference} on each evaluation seed, averaged over seeds. Collisions, "
        "utilization and unfinished jobs are means per episode.",
        "",
        *(
            [
                "A row naming several heuristics (`a = b`) stands for all of them: their "
                "records are identical on every evaluation episode, i.e. they made the same "
                "decisions on this board.",
                "",
            ]
            if any(r.aliases for r in rows)
            else []
        ),
        f"![{name}]({name}.png)",
        "",
    ]
    curves = render_curves_md(rows)
    if curves:
        lines += [*curves, f"![{name} sample efficiency]({name}_curves.png)", ""]
    return "\n".join(lines)


def _generated_comment(superseded: bool) -> str:
    if superseded:
        return (
            "<!-- Generated by `python -m edgesched.leaderboard build --superseded` from the "
            "raw records in the results/ folder next to this file. Do not edit by hand: "
            "tests/test_leaderboard.py checks that this file is byte-identical to the "
            "generated one. -->"
        )
    return (
        "<!-- Generated by `python -m edgesched.leaderboard build` from the raw records in "
        "leaderboards/results/. Do not edit by hand: tests/test_leaderboard.py checks that "
        "this file is byte-identical to the generated one. -->"
    )


def _superseded_note(scenario_id: str, superseded: bool) -> list[str]:
    if not superseded:
        return []
    from edgesched.envs.scenarios import get_scenario

    name = scenario_id.rpartition("-v")[0]
    current = get_scenario(name)
    return [
        f"**Superseded.** `{scenario_id}` is an earlier version of `{name}`; the current one "
        f"is `{current.id}` ({current.history[-1]}) Numbers of different versions are not "
        "comparable. This board stays so that its records remain reproducible "
        f"(`python -m edgesched.leaderboard validate` accepts `{scenario_id}`).",
        "",
    ]


CSV_METRICS = (
    "jct_p95",
    "jct_mean_completed",
    "jct_lower_bound_mean",
    "makespan",
    "collisions_proposed",
    "collisions_executed",
    "overload_node_slots",
    "median_node_utilization",
    "jobs_unfinished",
)
"""Per-episode means written to the CSV after the statistics columns."""

CSV_COLUMNS = (
    "scenario",
    "algo",
    "aliases",
    "shield",
    "kind",
    "n_train_seeds",
    "n_eval_seeds",
    "episodes_per_seed",
    "jct_mean",
    "jct_mean_ci_low",
    "jct_mean_ci_high",
    "jct_iqm",
    "jct_iqm_ci_low",
    "jct_iqm_ci_high",
    "normalized_score",
    "p_improvement_vs_reference",
    "reference",
    *CSV_METRICS,
    "git_commits",
    "config_hashes",
    "train_seeds",
    "eval_seeds",
    "train_env_steps",
)


def render_csv(scenario_id: str, rows: list[Row], reference: str) -> str:
    """The ``<scenario>.csv`` leaderboard (full precision, same rows as the markdown)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def g(x: float) -> str:
        return "" if x is None or not np.isfinite(x) else f"{x:.6f}"

    for r in rows:
        m = r.metrics
        w.writerow(
            [
                scenario_id,
                r.algo,
                " ".join(r.aliases),
                r.shield,
                "learned" if r.learned else "heuristic",
                len(r.train_seeds),
                len(r.eval_seeds),
                r.episodes,
                g(r.mean.value),
                g(r.mean.low),
                g(r.mean.high),
                g(r.iqm.value),
                g(r.iqm.low),
                g(r.iqm.high),
                g(r.normalized_score),
                g(r.p_improvement),
                reference,
                *(g(m[k]) for k in CSV_METRICS),
                " ".join(r.commits),
                " ".join(r.config_hashes),
                " ".join(map(str, r.train_seeds)),
                " ".join(map(str, r.eval_seeds)),
                r.train_budget[0] if r.train_budget else "",
            ]
        )
    return buf.getvalue()


def render_png(scenario_id: str, rows: list[Row]) -> bytes:
    """Bar chart of mean JCT with 95% CIs, and the CDF of per-episode mean JCT per entry."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r.label if r.shield == "none" else f"{r.label}+{r.shield}" for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, max(3.5, 0.35 * len(rows) + 1.5)))
    y = np.arange(len(rows))
    vals = np.array([r.mean.value for r in rows])
    lo = np.array([r.mean.value - r.mean.low if np.isfinite(r.mean.low) else 0 for r in rows])
    hi = np.array([r.mean.high - r.mean.value if np.isfinite(r.mean.high) else 0 for r in rows])
    colors = ["tab:blue" if r.learned else "tab:gray" for r in rows]
    ax1.barh(y, vals, xerr=np.vstack([lo, hi]), color=colors, capsize=3)
    ax1.set_yticks(y, labels)
    ax1.invert_yaxis()
    ax1.set_xlabel("mean JCT (slots), 95% CI")
    ax1.set_title(f"{scenario_id}: mean JCT (blue: learned, gray: heuristic)")
    cmap = plt.get_cmap("tab20")
    for i, (r, lab) in enumerate(zip(rows, labels, strict=True)):
        x = np.sort(r.episode_jcts)
        style = "-" if r.learned else "--"
        ax2.step(
            x,
            np.arange(1, len(x) + 1) / len(x),
            where="post",
            label=lab,
            color=cmap(i % 20),
            linestyle=style,
        )
    ax2.set_xlabel("per-episode mean JCT (slots)")
    ax2.set_ylabel("fraction of evaluation episodes")
    ax2.set_title("CDF of per-episode mean JCT (solid: learned)")
    ax2.legend(fontsize=7, loc="lower right")
    ax2.grid(alpha=0.3)
    return png_bytes(fig)


def build(
    results: list[str | Path] | None = None,
    runs: list[str | Path] | None = None,
    out: str | Path = "leaderboards",
    *,
    reference: str = REFERENCE,
    plots: bool = True,
    superseded: bool = False,
    studies: str | Path | None = None,
    root: str | Path = ".",
) -> list[Path]:
    """Write ``<out>/<scenario>.md``, ``.csv`` (and ``.png``) for every scenario with records.

    Args:
        results: JSON-lines results files or directories.
        runs: sweep or run directories.
        out: output directory.
        reference: the heuristic that scores 0.
        plots: also write the ``.png`` figures.
        superseded: build the archive of an earlier scenario version (each page says so);
            by default every record must be of its scenario's registered version.
        studies: folder of the study-only records (default ``<out>/studies``); its
            ``colocation/`` records (``collision_mode=timeshare``) feed ``colocation.md``,
            its ``budget/`` records (entries trained past the default budget) the budget
            tiers of ``coverage.md``.
        root: the directory that the records' ``policy`` paths are relative to (the
            repository); ``coverage.md`` reads each learned entry's stored settings there
            (:mod:`edgesched.leaderboard.provenance`).

    Returns:
        The files written.

    Raises:
        RecordError: a bad record (naming its file and the record) or no record at all.
    """
    records = load_records(results or [], runs or [])
    if not records:
        raise RecordError(f"no records found in results={results} runs={runs}")
    out = Path(out)
    written = []
    tables: dict[str, list[Row]] = {}
    grouped = group_tables(records, superseded=superseded)
    for name, recs in grouped.items():
        scenario_id = recs[0].data["scenario"]
        rows = tables[name] = compute_rows(recs, reference)
        overrides = recs[0].data["env_overrides"]
        shown = merge_identical(rows)
        md = render_markdown(scenario_id, overrides, shown, reference, len(recs), superseded)
        atomic_write_text(out / f"{name}.md", md)
        atomic_write_text(out / f"{name}.csv", render_csv(scenario_id, shown, reference))
        written += [out / f"{name}.md", out / f"{name}.csv"]
        if plots:
            atomic_write_bytes(out / f"{name}.png", render_png(scenario_id, shown))
            written.append(out / f"{name}.png")
            png = render_curves_png(scenario_id, shown)
            if png is not None:
                atomic_write_bytes(out / f"{name}_curves.png", png)
                written.append(out / f"{name}_curves.png")
    longer = {} if superseded else _budget_study(Path(studies) if studies else out / "studies")
    atomic_write_text(
        out / "coverage.md",
        render_coverage(tables, departures(records, root), longer, board_budgets(grouped)),
    )
    written.append(out / "coverage.md")
    from .provenance import matched_bases
    from .studies import TAPFINGER_ABLATIONS, render_rlpto, render_srole, render_tapfinger

    bases = matched_bases(records, TAPFINGER_ABLATIONS, root)
    for page, render in (
        ("srole.md", render_srole),
        ("rlpto.md", render_rlpto),
        ("tapfinger.md", partial(render_tapfinger, bases=bases)),
    ):
        study = render(tables)
        if study is not None:
            atomic_write_text(out / page, study)
            written.append(out / page)
        elif (out / page).exists():
            # its entries are gone (e.g. after a version bump): a stale study must not stay
            (out / page).unlink()
    if not superseded:
        written += _build_colocation(tables, out, Path(studies) if studies else out / "studies")
    return written


def board_budgets(grouped: dict[str, list[Record]]) -> dict[str, int]:
    """Per board, its set benchmark budget (boards at the default are left out).

    A budget belongs to one scenario version
    (:data:`edgesched.experiment.budgets.BENCHMARK_BUDGETS`), so an archived version's board
    has none.
    """
    from edgesched.experiment.budgets import BENCHMARK_BUDGETS

    ids = {name: str(recs[0].data["scenario"]) for name, recs in grouped.items()}
    return {name: BENCHMARK_BUDGETS[i] for name, i in ids.items() if i in BENCHMARK_BUDGETS}


BUDGET_STUDY_DIR = "budget"
"""Sub-folder of the study records holding learned entries trained past the default budget
(``algo.variant=b<steps>``); ``coverage.md``'s budget tiers read it."""


def _budget_study(studies: Path) -> dict[str, list[Row]]:
    """Per board, the rows of the budget study's records (none: an empty dict)."""
    folder = studies / BUDGET_STUDY_DIR
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        return {}
    tables = group_tables(load_records(files, []))
    return {name: compute_rows(recs) for name, recs in tables.items()}


def _build_colocation(tables: dict[str, list[Row]], out: Path, studies: Path) -> list[Path]:
    """``colocation.md`` from the boards' rows and the ``timeshare`` study records."""
    from .colocation import STUDY_DIR, render_colocation

    folder = studies / STUDY_DIR.name
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    timeshare = {}
    if files:
        for name, recs in group_tables(load_records(files, [])).items():
            if recs[0].data["env_overrides"] != {"collision_mode": "timeshare"}:
                raise RecordError(
                    f"{recs[0].where}: the co-location study holds collision_mode=timeshare "
                    f"records only, got env_overrides={recs[0].data['env_overrides']!r}"
                )
            timeshare[name] = merge_identical(compute_rows(recs))
    page = render_colocation({k: merge_identical(v) for k, v in tables.items()}, timeshare)
    if page is None:
        return []
    atomic_write_text(out / "colocation.md", page)
    return [out / "colocation.md"]


PROTOCOL_SCENARIOS = ("edge10", "edge50", "edge100", "tapfinger-hetero6")
"""The leaderboards the evaluation protocol asks for: every baseline on at least
``PROTOCOL_EVAL_SEEDS`` evaluation seeds, every learned algorithm with at least
``PROTOCOL_TRAIN_SEEDS`` training seeds."""
PROTOCOL_EVAL_SEEDS = 10
PROTOCOL_TRAIN_SEEDS = 3


def render_coverage(
    tables: dict[str, list[Row]],
    found: list[Departure] | None = None,
    longer: dict[str, list[Row]] | None = None,
    budgets: dict[str, int] | None = None,
) -> str:
    """Which entries each leaderboard has, and what the protocol still lacks.

    ``found`` (:func:`edgesched.leaderboard.provenance.departures`) adds the section of learned
    entries trained with other than today's defaults; ``None`` leaves it out. ``longer`` (per
    board, the budget study's rows) and ``budgets`` (the boards with a set benchmark budget,
    :func:`board_budgets`) feed the budget tiers (:func:`render_budget_tiers`).

    Rows: every registered baseline, every (algorithm, shield) pair with records (variants
    such as ablations included), and registered learned algorithms without any record;
    columns: every scenario with records, the protocol's scenarios first. A cell gives the
    number of evaluation seeds of a heuristic or of training seeds of a learned entry.
    """
    from edgesched.algos import list_algorithms
    from edgesched.baselines import list_baselines

    scen = [s for s in PROTOCOL_SCENARIOS if s in tables]
    scen += sorted(s for s in tables if s not in PROTOCOL_SCENARIOS)
    scen += [s for s in PROTOCOL_SCENARIOS if s not in tables]
    entries: dict[tuple[str, str], dict[str, Row]] = {}
    for name in scen:
        for row in tables.get(name, []):
            entries.setdefault((row.algo, row.shield), {})[name] = row
    baselines, learned = list_baselines(), list_algorithms()
    keys = [(b, "none") for b in baselines]
    keys += sorted(k for k in entries if k[0] in learned or k[0].split("-")[0] in learned)
    keys += [(a, "") for a in learned if not any(k[0] == a for k in keys)]
    keys += sorted(k for k in entries if k not in keys)
    lines = [
        "# Leaderboard coverage",
        "",
        "<!-- Generated by `python -m edgesched.leaderboard build` from leaderboards/results/. "
        "Do not edit by hand. -->",
        "",
        "Entries per leaderboard: a heuristic's number of evaluation seeds, a learned "
        "entry's number of training seeds (each evaluated on the held-out seeds); `-` = no "
        "records. The protocol asks for every baseline (at least "
        f"{PROTOCOL_EVAL_SEEDS} evaluation seeds) and every learned algorithm (at least "
        f"{PROTOCOL_TRAIN_SEEDS} training seeds at the board's benchmark budget, see *Budget "
        "tiers*) on "
        f"{', '.join(PROTOCOL_SCENARIOS)}.",
        "",
        "| entry | kind | " + " | ".join(scen) + " |",
        "|---|---|" + "---|" * len(scen),
    ]
    missing = []
    for algo, shield in keys:
        is_learned = algo in learned or algo.split("-")[0] in learned
        label = entry_name(algo, shield)
        cells = []
        for name in scen:
            row = entries.get((algo, shield), {}).get(name)
            if row is None:
                cells.append("-")
            else:
                n = len(row.train_seeds) if row.learned else len(row.eval_seeds)
                cells.append(f"{n} {'train' if row.learned else 'eval'}")
        lines.append(
            f"| {label} | {'learned' if is_learned else 'heuristic'} | " + " | ".join(cells) + " |"
        )
    for name in PROTOCOL_SCENARIOS:
        rows = tables.get(name, [])
        for b in baselines:
            seeds = max((len(r.eval_seeds) for r in rows if r.algo == b), default=0)
            if seeds < PROTOCOL_EVAL_SEEDS:
                missing.append(f"{b} on {name} ({seeds} of {PROTOCOL_EVAL_SEEDS} evaluation seeds)")
        for a in learned:
            seeds = max((len(r.train_seeds) for r in rows if r.learned and r.algo == a), default=0)
            if seeds < PROTOCOL_TRAIN_SEEDS:
                missing.append(f"{a} on {name} ({seeds} of {PROTOCOL_TRAIN_SEEDS} training seeds)")
    lines += ["", "Still missing for the protocol: " + ("; ".join(missing) if missing else "none")]
    lines.append("")
    from edgesched.experiment.schema import ExperimentConfig

    lines += render_budget_tiers(
        {name: tables[name] for name in scen if name in tables},
        ExperimentConfig().total_env_steps,
        longer,
        budgets,
        min_seeds=PROTOCOL_TRAIN_SEEDS,
    )
    from .studies import render_learned_vs_heuristics

    lines += render_learned_vs_heuristics(tables, scen, budgets, ExperimentConfig().total_env_steps)
    if found is not None:
        lines += render_departures(found)
    return "\n".join(lines)


README_SCENARIO = "edge50"
README_START = "<!-- leaderboard:edge50:start (python -m edgesched.leaderboard build) -->"
README_END = "<!-- leaderboard:edge50:end -->"


def table_lines(md: str) -> str:
    """The rows of the first table of a generated leaderboard markdown file (the ranking).

    A board may hold more tables after it (the sample-efficiency table); they are not part
    of the ranking the README copies.
    """
    rows: list[str] = []
    for line in md.splitlines():
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return "\n".join(rows) + "\n"


def sync_readme(readme: str | Path, leaderboard_md: str | Path) -> bool:
    """Copy the edge50 table into the README between its markers (no hand-typed numbers).

    Returns:
        Whether the README holds the markers (and was brought up to date).
    """
    readme = Path(readme)
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return False
    head, _, rest = text.partition(README_START)
    _, _, tail = rest.partition(README_END)
    table = table_lines(Path(leaderboard_md).read_text())
    new = f"{head}{README_START}\n{table}{README_END}{tail}"
    if new != text:
        atomic_write_text(readme, new)
    return True


__all__ = [
    "Row",
    "build",
    "compute_rows",
    "render_csv",
    "render_markdown",
    "seed_ranges",
    "sync_readme",
    "table_lines",
]
