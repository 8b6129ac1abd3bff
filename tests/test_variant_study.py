"""``benchmarks/variant_study.py``: which rows it pairs (its wording: ``reduction_text``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import import_benchmark

from edgesched.leaderboard import stats
from edgesched.leaderboard.records import RecordError
from edgesched.leaderboard.table import Row

ROOT = Path(__file__).resolve().parents[1]


def _results(*names: str) -> list[str]:
    """Paths of committed board results files (``leaderboards/results/<name>``)."""
    return [str(ROOT / "leaderboards" / "results" / n) for n in names]


@pytest.fixture(scope="module")
def study():
    return import_benchmark("variant_study")


def _row(algo: str, shield: str = "none", learned: bool = True, seeds=(10000, 10001)) -> Row:
    e = stats.Estimate(1.0, 0.5, 1.5)
    return Row(
        algo=algo,
        shield=shield,
        learned=learned,
        train_seeds=[0, 1, 2],
        eval_seeds=list(seeds),
        episodes=1,
        mean=e,
        iqm=e,
        metrics={},
        normalized_score=0.0,
        p_improvement=0.5,
        commits=[],
        config_hashes=[],
        episode_jcts=[],
        seed_scores=[[1.0, 2.0]] * 3,
    )


def test_pairs_only_the_study_variants_with_their_base_entry(study):
    rows = [
        _row("srole", "central"),
        _row("srole-fnorm", "central"),
        _row("mappo"),
        _row("mappo-fnorm"),
        _row("ippo-fnorm"),  # no base entry on the board
        _row("tapfinger"),
        _row("tapfinger-noattn"),  # a committed ablation, not one of this study's runs
        _row("srole-fnorm", "regional"),  # its base would be srole (regional): absent
    ]
    ours = {("srole-fnorm", "central"), ("mappo-fnorm", "none"), ("ippo-fnorm", "none")}
    ours |= {("srole-fnorm", "regional")}
    got = [(b.algo, b.shield, v.algo) for b, v in study.pairs(rows, ours)]
    assert got == [("srole", "central", "srole-fnorm"), ("mappo", "none", "mappo-fnorm")]
    # different evaluation seeds: not comparable pairwise
    assert study.pairs([_row("mappo"), _row("mappo-fnorm", seeds=(1, 2))], ours) == []


def test_curve_cell_names_budget_trend_and_verdict(study):
    from edgesched.leaderboard.curves import Curve

    e = stats.Estimate(1.0, 0.5, 1.5)
    down = stats.Estimate(-0.1, -0.2, -0.05)
    falling = Curve(30, (1, 2, 3), ((15_360, e), (299_520, e)), 3, down)
    assert study.curve_cell(falling) == "299,520: -10.0% [-20.0%, -5.0%] still improving"
    flat = Curve(30, (1, 2, 3), ((149_504, e),), 3, stats.Estimate(0.01, -0.05, 0.07))
    assert study.curve_cell(flat) == "149,504: +1.0% [-5.0%, +7.0%] flat"
    assert study.curve_cell(Curve(30, (1,), ((100, e),), 3, None)) == "100: n/a n/a"
    assert study.curve_cell(None) == "no curve"


def test_curve_groups_plot_each_entry_with_its_variants(study):
    from edgesched.leaderboard.curves import Curve

    e = stats.Estimate(1.0, 0.5, 1.5)

    def curved(algo, steps, shield="none"):
        r = _row(algo, shield)
        r.curve = Curve(30, (0, 1, 2), ((steps, e),), 3, None)
        return r

    base = curved("tapfinger", 149_504)
    b300, b600 = curved("tapfinger-b300k", 299_520), curved("tapfinger-b600k", 599_552)
    srole = curved("srole", 149_504, "central")
    found = [(base, b300), (base, b600), (srole, _row("srole-fnorm", "central"))]
    groups = study.curve_groups("tapfinger-hetero6", found)
    # srole's variant has no curve: nothing to compare its curve with
    assert list(groups) == ["tapfinger-hetero6_tapfinger"]
    assert [r.algo for r in groups["tapfinger-hetero6_tapfinger"]] == [
        "tapfinger",
        "tapfinger-b300k",
        "tapfinger-b600k",
    ]
    group = groups["tapfinger-hetero6_tapfinger"]
    plain = study.render_curves_png("tapfinger-hetero6: tapfinger", group)
    marked = study.render_curves_png("tapfinger-hetero6: tapfinger", group, {"optimus": 7.5})
    assert plain.startswith(b"\x89PNG") and marked.startswith(b"\x89PNG") and plain != marked


def test_collected_budget_tiers_join_the_study_without_run_directories(study, tmp_path, capsys):
    # the tapfinger-hetero6 budget tiers' run directories are gone; their records remain
    board = _results(
        "baselines.jsonl", "baselines_preemptive.jsonl", "tapfinger-hetero6_tapfinger-noclip.jsonl"
    )
    budget = ROOT / "leaderboards" / "studies" / "budget"
    tiers = [str(budget / f"tapfinger-hetero6_tapfinger-noclip-b{k}k.jsonl") for k in (300, 600)]
    study.main(
        [
            "--results",
            *board,
            "--variant-results",
            *tiers,
            "--name",
            "tiers",
            "--out",
            str(tmp_path),
        ]
    )
    text = (tmp_path / "tiers.md").read_text()
    for tier in ("tapfinger-noclip-b300k", "tapfinger-noclip-b600k"):
        assert f"| tapfinger-hetero6 | tapfinger-noclip | {tier} | 3 vs 3 |" in text
    # each tier against the board's best heuristic, whose records are among --results
    for tier in ("tapfinger-noclip-b300k", "tapfinger-noclip-b600k"):
        assert f"| tapfinger-hetero6 | {tier} | " in text
    assert text.count("| optimus | 7.48 [7.31, 7.66] | ") == 2
    # one plot with the entry's curve and both tiers'
    png = tmp_path / "tiers_tapfinger-hetero6_tapfinger-noclip.png"
    assert png.read_bytes().startswith(b"\x89PNG")
    with pytest.raises(SystemExit):
        study.main(["--results", *board])  # no variants at all: a usage error
    assert "--variant-results" in capsys.readouterr().err


def test_the_heuristic_reference_line_is_its_mean_on_the_curve_seeds(study):
    """A curve is held-out JCT on a few seeds; the heuristic beside it is averaged over the
    same seeds, not over the whole board's (where it may be far from that)."""
    from dataclasses import replace

    from edgesched.leaderboard.curves import Curve
    from edgesched.leaderboard.studies import mean_on_seeds

    e = stats.Estimate(1.0, 0.5, 1.5)
    heur = replace(
        _row("min_alloc", learned=False, seeds=(10000, 10001, 10002)),
        train_seeds=[],
        seed_scores=[[80.0, 90.0, 200.0]],
    )
    assert mean_on_seeds(heur, (10000, 10001)) == pytest.approx(85.0)
    assert mean_on_seeds(heur, (10002,)) == pytest.approx(200.0)
    assert mean_on_seeds(heur, (10000, 10003)) is None  # a seed it was not evaluated on
    curved = replace(_row("mappo"), curve=Curve(30, (10000, 10001), ((100, e),), 3, None))
    ref = study.curve_reference(heur, [curved])
    assert ref == {"best heuristic: min_alloc (on the curve seeds)": pytest.approx(85.0)}
    other = replace(_row("mappo-b300k"), curve=Curve(30, (10002,), ((100, e),), 3, None))
    assert study.curve_reference(heur, [curved, other]) == {}  # seeds differ: no line
    assert study.curve_reference(None, [curved]) == {}


def test_same_steps_compares_a_longer_variant_where_the_board_entry_ends(study):
    """The board entry's last quarter, the variant over those steps and over its own."""
    from edgesched.leaderboard.curves import Curve

    def curve(points):
        pts = tuple((s, stats.Estimate(v, v - 1, v + 1)) for s, v in points)
        return Curve(30, (0, 1, 2), pts, 3, None)

    base = curve([(100, 50.0), (700, 40.0), (800, 30.0), (1000, 20.0)])
    # quarter of the board's budget: (750, 1000]; of the variant's: (1500, 2000]
    var = curve([(100, 60.0), (800, 35.0), (900, 33.0), (1000, 31.0), (1600, 24.0), (2000, 22.0)])
    assert study.same_steps_cells(base, var) == "750 to 1,000 | 25.00 | 33.00 | 23.00"
    # a point exactly at the window's start is outside it; the end is inside
    assert study.window_mean(base, 700, 800) == pytest.approx(30.0)
    assert study.window_mean(base, 1000, 2000) is None
    # only a longer variant with a curve gets the comparison
    shorter = curve([(100, 60.0), (500, 40.0)])
    assert study.same_steps_cells(base, shorter) is None
    assert study.same_steps_cells(base, None) is None
    assert study.same_steps_cells(None, var) is None
    # no variant point inside the board entry's last quarter: nothing to compare
    sparse = curve([(100, 60.0), (2000, 22.0)])
    assert study.same_steps_cells(base, sparse) is None


def test_heuristic_cells_apply_the_board_target_test_to_a_variant(study):
    """The variant's CI below the heuristic's (``coverage.md``'s test), and the paired
    reduction on the same workloads."""
    from dataclasses import replace

    heur = replace(
        _row("optimus", learned=False),
        train_seeds=[],
        mean=stats.Estimate(7.5, 7.3, 7.7),
        seed_scores=[[8.0, 7.0]],
    )
    better = replace(_row("srole-b1200k", "central"), mean=stats.Estimate(6.5, 6.1, 7.0))
    better.seed_scores = [[6.0, 7.0]] * 3
    cells = study.heuristic_cells(better, heur)
    assert cells.startswith("6.50 [6.10, 7.00] | optimus | 7.50 [7.30, 7.70] | yes | ")
    # per evaluation seed 6 vs 8 and 7 vs 7: the paired reduction is 13.3% lower
    assert "13.3% lower" in cells
    overlapping = replace(better, mean=stats.Estimate(7.0, 6.5, 7.4))
    assert "| 7.50 [7.30, 7.70] | no | " in study.heuristic_cells(overlapping, heur)
    # disjoint but above: the target's test asks for the variant's CI below
    worse = replace(better, mean=stats.Estimate(9.0, 8.5, 9.5))
    assert "| 7.50 [7.30, 7.70] | no | " in study.heuristic_cells(worse, heur)
    assert study.heuristic_cells(better, None) is None


def test_a_variant_already_on_the_board_is_read_once(study, tmp_path):
    """``tapfinger-noclip`` is in the board's results; given again as the study's variant,
    its board records are left out instead of failing as duplicates of the same runs."""
    board = _results(
        "baselines.jsonl",
        "tapfinger-hetero6_tapfinger.jsonl",
        "tapfinger-hetero6_tapfinger-noclip.jsonl",
    )
    (variant,) = _results("tapfinger-hetero6_tapfinger-noclip.jsonl")
    study.main(["--results", *board, "--variant-results", variant, "--out", str(tmp_path)])
    text = (tmp_path / "variant_study.md").read_text()
    assert text.count("| tapfinger-hetero6 | tapfinger | tapfinger-noclip | 3 vs 3 |") == 1
    # a default entry given again is not a variant: still refused as the same runs twice
    (base,) = _results("tapfinger-hetero6_tapfinger.jsonl")
    with pytest.raises(RecordError, match="duplicate entry"):
        study.main(["--results", *board, "--variant-results", variant, base])


def test_a_variant_is_paired_on_the_boards_it_was_given_for_only(study, tmp_path):
    """edge100's ``tapfinger-mean`` given; edge50's, of the same name, is on the board: the
    page compares the one given, not every board's variant of that name."""
    board = _results(
        "baselines_edge_v1.jsonl",
        "edge100_tapfinger.jsonl",
        "edge50_tapfinger.jsonl",
        "edge50_tapfinger-mean.jsonl",
    )
    (variant,) = _results("edge100_tapfinger-mean.jsonl")
    study.main(["--results", *board, "--variant-results", variant, "--out", str(tmp_path)])
    text = (tmp_path / "variant_study.md").read_text()
    assert "| edge100 | tapfinger | tapfinger-mean | 3 vs 3 |" in text
    assert "| edge50 |" not in text


def test_results_rev_compares_with_the_board_entry_a_later_commit_replaced(
    study, tmp_path, monkeypatch
):
    """``--results-rev``: the board records as a revision held them, not the working tree's.

    ``mappo`` is retrained after the commit (twice the JCT on every workload); its variant
    halves the committed entry's JCT, so against the revision it is 50% lower and against
    the working tree 75% lower.
    """
    import json
    import subprocess

    from test_leaderboard import _fixture_rows, _write

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    results = tmp_path / "leaderboards" / "results"
    results.mkdir(parents=True)
    rows = _fixture_rows()
    _write(results / "edge10.jsonl", rows)
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "board")

    def scaled(algo: str, factor: float, name: str) -> list[dict]:
        out = [json.loads(json.dumps(r)) for r in rows if r["algo"] == algo]
        for r in out:
            r["algo"] = name
            for e in r["per_episode"]:
                e["jct_mean"] *= factor
        return out

    retrained = [r for r in rows if r["algo"] != "mappo"] + scaled("mappo", 2.0, "mappo")
    _write(results / "edge10.jsonl", retrained)
    variant = _write(tmp_path / "own.jsonl", scaled("mappo", 0.5, "mappo-own"))
    monkeypatch.chdir(tmp_path)
    args = ["--results", "leaderboards/results", "--variant-results", str(variant)]
    study.main([*args, "--results-rev", "HEAD", "--name", "then", "--out", str(tmp_path)])
    study.main([*args, "--name", "now", "--out", str(tmp_path)])
    then = (tmp_path / "then.md").read_text()
    now = (tmp_path / "now.md").read_text()
    assert "| edge10 | mappo | mappo-own | 3 vs 3 |" in then
    # half of every run's JCT; the runs differ among themselves, and the interval resamples
    # them (studies.paired_reduction), so it brackets 50% without being a point
    low, high = (
        float(x) for x in re.search(r"50\.0% lower \[([0-9.]+)%, ([0-9.]+)%\]", then).groups()
    )
    assert low < 50.0 < high
    low, high = (
        float(x) for x in re.search(r"75\.0% lower \[([0-9.]+)%, ([0-9.]+)%\]", now).groups()
    )
    assert low < 75.0 < high
    with pytest.raises(SystemExit, match="rev='no-such-rev'"):
        study.main([*args, "--results-rev", "no-such-rev"])
    with pytest.raises(SystemExit, match="results='nowhere'"):
        study.main(
            ["--results", "nowhere", "--variant-results", str(variant), "--results-rev", "HEAD"]
        )
