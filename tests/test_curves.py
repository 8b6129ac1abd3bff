"""Sample-efficiency curves: held-out evaluations during training (``experiment.curve_every``)
leave training unchanged, land in ``eval.json`` and aggregate on the leaderboards."""

from __future__ import annotations

import functools
import json
import re

import numpy as np
import pytest
from test_training import make_cfg, read_metrics, without_time

from edgesched.experiment.runner import run


def _train(tmp_path, name, algo, curve_every, **exp):
    cfg = make_cfg(tmp_path / name, algo=algo, total_env_steps=128, **exp)
    cfg.experiment.eval_seeds = [10_000, 10_001]
    cfg.experiment.curve_every = curve_every
    if "learning_starts" in cfg.algo:
        cfg.algo.learning_starts = 16
    if algo == "tapfinger":
        cfg.env.name = "tapfinger-hetero6"
        cfg.env.overrides = {"max_slots": 20, "max_steps": 200}
    summary = run(cfg)
    return summary, tmp_path / name


@pytest.mark.parametrize("algo", ["mappo", "tapfinger", "dqn_central"])
def test_a_curve_does_not_change_training(tmp_path, algo):
    plain, a = _train(tmp_path, "plain", algo, 0)
    curved, b = _train(tmp_path, "curved", algo, 1, curve_seeds=1)

    def results(rows):  # timings (wall time, decisions/s) differ between any two runs
        return [
            {k: v for k, v in r.items() if not k.endswith("_per_s") and k != "heldout_jct_mean"}
            for r in without_time(rows)
        ]

    assert results(read_metrics(b)) == results(read_metrics(a))
    timed = {k for k in plain if "_ms" in k}  # measured latencies differ between runs
    assert {k: v for k, v in curved.items() if k not in timed} == pytest.approx(
        {k: v for k, v in plain.items() if k not in timed}, nan_ok=True
    )
    record = json.loads((b / "eval.json").read_text())
    curve = record["curve"]
    assert curve["every"] == 1 and curve["seeds"] == [10_000] and curve["episodes"] == 1
    updates = [p["update"] for p in curve["points"]]
    assert updates == list(range(1, len(read_metrics(b)) + 1))
    assert [p["env_steps"] for p in curve["points"]] == [r["env_steps"] for r in read_metrics(b)]
    # each point's held-out JCT is logged with its update; the last is the final evaluation
    logged = [r.get("heldout_jct_mean") for r in read_metrics(b)]
    assert logged[:-1] == [p["jct_mean"] for p in curve["points"][:-1]]
    final = [e["jct_mean"] for e in record["per_episode"] if e["eval_seed"] == 10_000]
    assert curve["points"][-1]["per_seed"] == [pytest.approx(np.mean(final))]
    assert "curve" not in json.loads((a / "eval.json").read_text())


def test_curve_settings_are_checked(tmp_path):
    from edgesched.experiment.schema import ExperimentConfigError

    cfg = make_cfg(tmp_path / "bad")
    cfg.experiment.curve_every = -1
    with pytest.raises(ExperimentConfigError, match=r"experiment\.curve_every"):
        run(cfg)


# --------------------------------------------------------------------- leaderboards
def _with_curves(rows, every=2, seeds=(10_000, 10_001), updates=(2, 4, 6)):
    """Fixture records with a curve block: run k's JCT at step s is 100 / s + k + seed."""
    out = []
    for r in rows:
        r = dict(r)
        if r["train_seed"] is not None:
            k = r["train_seed"]
            r["curve"] = {
                "every": every,
                "seeds": list(seeds),
                "episodes": 1,
                "points": [
                    {
                        "update": u,
                        "env_steps": 32 * u,
                        "jct_mean": 0.0,
                        "per_seed": [100.0 / (32 * u) + k + (s - 10_000) for s in seeds],
                    }
                    for u in updates
                ],
            }
        out.append(r)
    return out


def _longer_study(
    rows: list[dict], algo: str, jct_scale: float, flat: bool = False, times: int = 2
) -> list[dict]:
    """Budget-study records of ``algo`` trained ``times`` as long: the same curve shape over
    that many times the steps (or a flat one), its held-out JCTs scaled by ``jct_scale``."""
    out = []
    for r in rows:
        if r["algo"] != algo:
            continue
        r = json.loads(json.dumps(r))
        r["algo"] = f"{algo}-b{times}x"
        for p in r["curve"]["points"]:
            p["env_steps"] *= times
            if flat:
                p["per_seed"] = [5.0 for _ in p["per_seed"]]
        for e in r["per_episode"]:
            e["jct_mean"] *= jct_scale
        out.append(r)
    return out


def _tier_with_study(tmp_path, board, name: str, study_rows: list[dict]) -> str:
    """edge10's budget-tier row of ``coverage.md`` built from the board records ``board``
    with ``study_rows`` as its budget study (``<out>/studies/budget/``)."""
    from test_leaderboard import _write

    from edgesched.leaderboard.build import build

    folder = tmp_path / name / "studies" / "budget"
    folder.mkdir(parents=True)
    _write(folder / "edge10.jsonl", study_rows)
    build([board], [], tmp_path / name, plots=False)
    cov = (tmp_path / name / "coverage.md").read_text()
    return next(x for x in cov.splitlines() if x.startswith("| edge10 |"))


def test_curves_aggregate_over_training_seeds_into_the_board(tmp_path):
    from test_leaderboard import _fixture_rows, _write

    from edgesched.leaderboard.build import build, compute_rows
    from edgesched.leaderboard.records import load_records

    path = _write(tmp_path / "c.jsonl", _with_curves(_fixture_rows()))
    rows = {r.algo: r for r in compute_rows(load_records([path]))}
    c = rows["mappo"].curve
    assert c.every == 2 and c.seeds == (10_000, 10_001) and c.runs == 3
    assert [s for s, _ in c.points] == [64, 128, 192]
    # mean over training seeds 0, 1, 2 and the two curve seeds: 100/s + 1 + 0.5
    for step, est in c.points:
        assert est.value == pytest.approx(100.0 / step + 1.5)
        assert est.low <= est.value <= est.high
    assert rows["random"].curve is None  # heuristics have none
    written = build([path], [], tmp_path / "out")
    md = (tmp_path / "out" / "edge10.md").read_text()
    assert "## Sample efficiency" in md and "| mappo | 3 | 2 | 10000,10001 | 64 |" in md
    assert (tmp_path / "out" / "edge10_curves.png") in written
    # a board without curves has no such section
    build([_write(tmp_path / "p.jsonl", _fixture_rows())], [], tmp_path / "plain", plots=False)
    assert "Sample efficiency" not in (tmp_path / "plain" / "edge10.md").read_text()


def test_training_seeds_with_different_curve_protocols_are_rejected(tmp_path):
    from test_leaderboard import _fixture_rows, _write

    from edgesched.leaderboard.build import build
    from edgesched.leaderboard.records import RecordError

    rows = _with_curves(_fixture_rows())
    mappo = [r for r in rows if r["algo"] == "mappo"]
    mappo[1]["curve"] = {**mappo[1]["curve"], "every": 3}
    with pytest.raises(RecordError, match="must share the curve protocol"):
        build([_write(tmp_path / "x.jsonl", rows)], [], tmp_path / "o", plots=False)


def test_late_trend_is_the_fitted_change_over_the_second_half():
    from edgesched.leaderboard.curves import late_trend

    steps = list(range(10, 101, 10))
    x = np.array(steps, dtype=np.float64)
    # 3 runs x 10 points x 2 curve seeds, JCT = 200 - steps on every series
    jct = np.broadcast_to((200.0 - x)[None, :, None], (3, 10, 2)).copy()
    t = late_trend(steps, jct)
    # window 50..100: the line falls by 50 around a mean of 125
    assert t.value == pytest.approx(-50.0 / 125.0)
    assert t.low == pytest.approx(t.value) and t.high == pytest.approx(t.value)
    # the first half does not count: a drop there and flat afterwards is flat
    stepped = np.where(x < 50, 300.0, 100.0)
    flat = late_trend(steps, np.broadcast_to(stepped[None, :, None], (3, 10, 2)).copy())
    assert flat.value == pytest.approx(0.0)
    assert late_trend([10, 20, 30], np.ones((3, 3, 2))) is None  # 2 points in the window


def test_late_trend_is_not_decided_by_one_stalled_evaluation():
    """A single spike (one evaluation in which the policy stalled) leaves Theil-Sen's
    verdict where the other points put it; a least-squares line through it does not."""
    from edgesched.leaderboard.curves import late_trend, trend_verdict

    steps = list(range(10, 201, 10))
    x = np.array(steps, dtype=np.float64)
    falling = 20.0 - 0.05 * x  # from 19.5 to 10: still improving over the second half
    jct = np.broadcast_to(falling[None, :, None], (3, 20, 3)).copy()
    jct[1, 16, 0] = 2000.0  # one run's evaluation at step 170 stalls on one curve seed
    robust = late_trend(steps, jct)
    ls = late_trend(steps, jct, fit="least-squares")

    assert trend_verdict(robust) == "still improving"
    # the clean runs' change is exactly -5/12.5 of their median; the spiked run's is close
    assert robust.value == pytest.approx(-5.0 / 12.5, rel=0.1)
    assert trend_verdict(ls) != "still improving"  # the spike drags the mean trend towards zero


def test_late_trend_least_squares_is_the_previous_fit():
    from edgesched.leaderboard.curves import late_trend

    rng = np.random.default_rng(0)
    steps = list(range(10, 101, 10))
    jct = rng.uniform(5.0, 15.0, size=(3, 10, 2))
    got = late_trend(steps, jct, fit="least-squares")
    x = np.array(steps[4:], dtype=np.float64)
    rel = [
        np.polyfit(x, jct[i, 4:, j], 1)[0] * (x[-1] - x[0]) / jct[i, 4:, j].mean()
        for i in range(3)
        for j in range(2)
    ]
    assert got.value == pytest.approx(np.mean(rel))
    with pytest.raises(ValueError, match="fit='ols' is not a trend fit; allowed: theil-sen"):
        late_trend(steps, jct, fit="ols")


@pytest.mark.parametrize(
    ("value", "low", "high", "verdict"),
    [
        (-0.10, -0.15, -0.05, "still improving"),
        (-0.01, -0.015, -0.005, "flat"),  # excludes zero but under 2%
        (-0.10, -0.20, 0.01, "flat"),
        (0.05, 0.01, 0.09, "worsening"),
        (0.05, float("nan"), float("nan"), "n/a"),
    ],
)
def test_curve_verdicts(value, low, high, verdict):
    from edgesched.leaderboard import stats
    from edgesched.leaderboard.curves import Curve

    assert Curve(1, (0,), (), 3, stats.Estimate(value, low, high)).verdict == verdict
    assert Curve(1, (0,), (), 3, None).verdict == "n/a"


def test_boards_and_coverage_report_whether_curves_flattened(tmp_path):
    from test_leaderboard import _fixture_rows, _write

    from edgesched.leaderboard.build import build

    # JCT 100/s + k + seed at steps 64..384: from 192 on it falls by 0.26 around about 2.9
    rows = _with_curves(_fixture_rows(), updates=range(2, 13, 2))
    build([_write(tmp_path / "c.jsonl", rows)], [], tmp_path / "out", plots=False)
    md = (tmp_path / "out" / "edge10.md").read_text()
    assert "| entry | change over the second half [95% CI] | verdict |" in md
    line = next(x for x in md.splitlines() if x.startswith("| mappo | -"))
    assert line.endswith("| still improving |")
    cov = (tmp_path / "out" / "coverage.md").read_text()
    row = next(x for x in cov.splitlines() if x.startswith("| edge10 |"))
    assert (
        row
        == "| edge10 | ippo, mappo | ippo, mappo | - | - | not determined: longer curves needed |"
    )
    # flat curves: the default budget is the benchmark budget
    for r in rows:
        for p in r.get("curve", {"points": []})["points"]:
            p["per_seed"] = [5.0 for _ in p["per_seed"]]
    build([_write(tmp_path / "f.jsonl", rows)], [], tmp_path / "flat", plots=False)
    cov = (tmp_path / "flat" / "coverage.md").read_text()
    row = next(x for x in cov.splitlines() if x.startswith("| edge10 |"))
    assert row.endswith("| none | - | - | 150,000 (the default: the curves are flat) |")
    # an entry without a curve leaves the budget open
    for r in rows:
        if r["algo"] == "ippo":
            r.pop("curve", None)
    build([_write(tmp_path / "g.jsonl", rows)], [], tmp_path / "gap", plots=False)
    cov = (tmp_path / "gap" / "coverage.md").read_text()
    row = next(x for x in cov.splitlines() if x.startswith("| edge10 |"))
    assert row == (
        "| edge10 | mappo | none | - | ippo | not determined: the default if the entries "
        "without a curve are flat too |"
    )


def _ci(row: str) -> str:
    """``row`` with each percentage interval as ``[CI]``: the verdicts, not the intervals.

    The paired intervals resample each entry's training runs (``studies.paired_reduction``),
    so the fixtures' scaled copies give intervals around the point value, not points.
    """
    return re.sub(r"\[-?[0-9.]+%, -?[0-9.]+%\]", "[CI]", row)


def test_a_longer_budget_that_gains_nothing_settles_the_default(tmp_path):
    from test_leaderboard import _fixture_rows, _write

    rows = _with_curves(_fixture_rows(), updates=range(2, 13, 2))  # mappo, ippo improving
    board = _write(tmp_path / "c.jsonl", rows)

    study = functools.partial(_longer_study, rows)
    tier = functools.partial(_tier_with_study, tmp_path, board)

    # both improving entries trained longer without a lower JCT: the default stands
    row = _ci(tier("same", study("mappo", 1.0) + study("ippo", 1.0)))
    same = "mappo: 768 steps, 3 seeds, 0.0% lower [CI], curve there still improving"
    assert same in row
    assert row.endswith("| 150,000 (the default: a longer budget gains nothing) |")
    # one of them gains from it and is still improving there: not determined
    row = _ci(tier("gain", study("mappo", 0.5) + study("ippo", 1.0)))
    assert "mappo: 768 steps, 3 seeds, 50.0% lower" in row
    assert row.endswith("| not determined: mappo gains from a longer budget still |")
    # a still longer run not lower than the shorter one (here higher): the longer budget
    # gains nothing more, so the shorter one settles the entry though its curve still falls
    row = _ci(
        tier("noisy", study("mappo", 0.5) + study("mappo", 1.0, times=4) + study("ippo", 1.0))
    )
    assert "mappo: 768 steps, 3 seeds, 50.0% lower" in row
    assert "mappo: 1,536 steps, 3 seeds, 0.0% lower" in row
    assert "768 steps, 3 seeds, 50.0% lower [CI], curve there still improving" in row
    assert row.endswith(
        "| 768 (mappo gains from 768 and no longer run is lower (1,536 steps: 100.0% higher "
        "[CI]); not yet set for the board) |"
    )
    # as low at four times the budget (the same JCTs): still nothing more to gain
    row = _ci(
        tier("level", study("mappo", 0.5) + study("mappo", 0.5, times=4) + study("ippo", 1.0))
    )
    assert row.endswith(
        "| 768 (mappo gains from 768 and no longer run is lower (1,536 steps: 0.0% lower "
        "[CI]); not yet set for the board) |"
    )
    # an entry settled by a longer run while another still needs one: the board stays
    # open, and its row says what settled the first
    row = _ci(tier("open", study("mappo", 0.5) + study("mappo", 0.5, times=4)))
    assert row.endswith(
        "| not determined: longer curves needed; mappo gains from 768 and no longer run is "
        "lower (1,536 steps: 0.0% lower [CI]) |"
    )
    # a still longer run lower than the shorter one: the shorter budget does not settle it,
    # and the longest decides by its curve
    beaten = study("mappo", 0.5) + study("ippo", 1.0)
    row = _ci(tier("beaten", beaten + study("mappo", 0.25, times=4)))
    assert row.endswith("| not determined: mappo gains from a longer budget still |")
    row = _ci(tier("beaten-flat", beaten + study("mappo", 0.25, flat=True, times=4)))
    assert row.endswith(
        "| 1,536 (mappo gains from 1,536 and is no longer improving there; not yet set for "
        "the board) |"
    )
    # it gains and its longer curve is flat: the longer budget is the board's
    row = tier("settled", study("mappo", 0.5, flat=True) + study("ippo", 1.0))
    assert "curve there flat" in row
    assert row.endswith(
        "| 768 (mappo gains from 768 and is no longer improving there; not yet set for the board) |"
    )
    # longer runs on other evaluation seeds cannot be compared paired: still open
    other = study("mappo", 0.5, flat=True) + study("ippo", 1.0)
    for r in other:
        if r["algo"] == "mappo-b2x":
            drop = r["eval_seeds"][-1]
            r["eval_seeds"] = r["eval_seeds"][:-1]
            r["per_episode"] = [e for e in r["per_episode"] if e["eval_seed"] != drop]
    row = tier("apart", other)
    assert "mappo:" not in row and row.endswith("| not determined: longer curves needed |")
    # one of them was not trained longer: still open
    row = tier("half", study("mappo", 1.0))
    assert "ippo:" not in row and row.endswith("| not determined: longer curves needed |")
    # a longer run short of the protocol's 3 training seeds is shown but decides nothing:
    # one seed of a flat, lower run must not settle mappo at its budget
    one_seed = [r for r in study("mappo", 0.5, flat=True) if r["train_seed"] == 0]
    row = tier("one-seed", one_seed + study("ippo", 1.0))
    assert "mappo: 768 steps, 1 of 3 seeds, incomplete, " in row
    assert row.endswith("| not determined: longer curves needed |")
    # with the other seeds it settles mappo, as in "settled" above
    row = tier("three-seeds", study("mappo", 0.5, flat=True) + study("ippo", 1.0))
    assert row.endswith(
        "| 768 (mappo gains from 768 and is no longer improving there; not yet set for the board) |"
    )


def test_a_budget_study_of_a_variant_entry_is_that_entrys_not_its_base(tmp_path):
    from test_leaderboard import _fixture_rows, _write

    rows = _with_curves(_fixture_rows(), updates=range(2, 13, 2))  # mappo, ippo improving
    # an ablation entry on the board (like tapfinger-noptr), with mappo's records
    abl = [dict(json.loads(json.dumps(r)), algo="mappo-abl") for r in rows if r["algo"] == "mappo"]
    board = _write(tmp_path / "c.jsonl", rows + abl)
    # its longer run, algo.variant=abl-b2x: a variant of mappo-abl, not of mappo
    study = _longer_study(abl, "mappo-abl", 0.5)
    assert {r["algo"] for r in study} == {"mappo-abl-b2x"}
    row = _ci(_tier_with_study(tmp_path, board, "abl", study))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3] == (
        "mappo-abl: 768 steps, 3 seeds, 50.0% lower [CI], curve there still improving"
    )
    assert cells[5] == "not determined: longer curves needed"  # mappo and ippo untested


def test_a_variant_run_varies_its_name_up_to_the_last_dash():
    from edgesched.leaderboard.table import varied_entry

    assert varied_entry("tapfinger-b300k") == "tapfinger"
    assert varied_entry("tapfinger-noptr-b300k") == "tapfinger-noptr"
    assert varied_entry("dqn_central-b1200k") == "dqn_central"
    assert varied_entry("tapfinger") is None


def test_trend_text_of_one_run_says_it_has_no_interval():
    from edgesched.leaderboard import stats
    from edgesched.leaderboard.curves import trend_text

    assert trend_text(stats.Estimate(-0.105, -0.189, -0.009)) == "-10.5% [-18.9%, -0.9%]"
    nan = float("nan")
    assert trend_text(stats.Estimate(0.112, nan, nan)) == "+11.2% [n/a]"
    assert trend_text(None) == "n/a"
