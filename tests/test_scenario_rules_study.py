"""``benchmarks/scenario_rules_study.py``: schedulers under a scenario's optional rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import import_benchmark

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "leaderboards/studies/original_rules/tapfinger-hetero6_baselines.jsonl"
B150K = ROOT / "leaderboards/studies/budget/tapfinger-hetero6_tapfinger-noclip-b150k.jsonl"
ORIGINAL = {"pending_refill": "on_advance", "waiting_charge": "every_viewer"}


@pytest.fixture(scope="module")
def study():
    return import_benchmark("scenario_rules_study")


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _scaled(rec: dict, factor: float, **changes) -> dict:
    """A copy of ``rec`` with every episode's mean JCT times ``factor`` and ``changes``."""
    out = json.loads(json.dumps(rec))
    out.update(changes)
    for ep in out["per_episode"]:
        ep["jct_mean"] *= factor
    return out


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


@pytest.fixture()
def files(tmp_path):
    """Records under the rules, and the same systems under the registered rules.

    The reference heuristics take twice as long and the reference learner (the committed
    ``tapfinger-noclip-b150k`` records) is renamed and halved under the rules, so every paired
    change is known exactly: 50% lower.
    """
    heur = [r for r in _records(RULES) if r["algo"] in ("optimus", "tiresias", "random")]
    learned = _records(B150K)
    ref = [_scaled(r, 2.0, env_overrides={}) for r in heur] + learned
    rules = [_scaled(r, 1.0, env_overrides=ORIGINAL) for r in heur]
    rules += [_scaled(r, 0.5, env_overrides=ORIGINAL, algo="tapfinger-orig") for r in learned]
    return _write(tmp_path / "rules.jsonl", rules), _write(tmp_path / "ref.jsonl", ref)


def test_pairs_by_name_and_by_pair_on_the_same_workloads(study, files, capsys):
    rules, ref = files
    study.main(
        [
            "--rules", str(rules), "--reference", str(ref),
            "--pair", "tapfinger-orig=tapfinger-noclip-b150k",
            "--baselines", "optimus", "tiresias",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    for line in (
        "| tapfinger-orig | tapfinger-noclip-b150k | 11.19 [10.72, 11.73] | 5.60",
        "| optimus | optimus | 15.08",
        "| tiresias | tiresias |",
        "| random | random |",
    ):
        row = next(x for x in out.splitlines() if x.startswith(line))
        low, high = (
            float(x)
            for x in re.search(r"50\.0% lower \[([0-9.]+)%, ([0-9.]+)%\] \|$", row).groups()
        )
        if line.startswith("| tapfinger-orig"):
            # each run a scaled copy of its counterpart's, the runs unlike each other: the
            # interval resamples them (studies.paired_reduction), so it is not a point
            assert low < 50.0 < high, row
        else:  # a heuristic is one run: exactly half on every workload
            assert low == high == 50.0, row
    # the learner under the rules against the best of the heuristics asked for (optimus)
    assert "best of them: optimus, 7.54" in out
    assert "- tapfinger-orig vs optimus: 25.8% lower" in out
    assert out.count("target (at least 30% lower): missed") == 1


def test_target_verdict_follows_the_reduction(study, files, capsys):
    rules, ref = files
    faster = rules.with_name("faster.jsonl")
    recs = [_scaled(r, 0.5) if r["algo"] == "tapfinger-orig" else r for r in _records(rules)]
    _write(faster, recs)
    study.main(["--rules", str(faster), "--reference", str(ref), "--baselines", "optimus"])
    out = capsys.readouterr().out
    assert "- tapfinger-orig vs optimus: 62.9% lower" in out
    assert "target (at least 30% lower): met" in out
    # no --pair: the renamed learner has no reference row of its own name
    assert "| tapfinger-orig | tapfinger-noclip-b150k |" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pair", "tapfinger-orig"], "expected <entry under the rules>=<reference entry>"),
        (["--baselines", "optimus", "--pair", "x=tapfinger-noclip-b150k"], "--pair names ['x']"),
        (
            ["--baselines", "optimus", "--pair", "tapfinger-orig=x"],
            "--pair names ['x'], not among the reference",
        ),
        (["--baselines", "nosuch"], "--baselines ['nosuch']: not among the records"),
    ],
)
def test_bad_arguments_name_the_value(study, files, capsys, args, message):
    rules, ref = files
    with pytest.raises(SystemExit) as exc:
        study.main(["--rules", str(rules), "--reference", str(ref), *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_records_without_overrides_are_refused(study, files, capsys):
    _, ref = files
    with pytest.raises(SystemExit):
        study.main(["--rules", str(B150K), "--reference", str(ref)])
    assert "carry no scenario overrides" in capsys.readouterr().err


def test_heuristics_with_identical_records_share_one_row(study, tmp_path, capsys):
    """As on the boards (``merge_identical``): one row, both names, on each side."""
    heur = [r for r in _records(RULES) if r["algo"] in ("optimus", "random")]
    twin = _scaled(next(r for r in heur if r["algo"] == "random"), 1.0, algo="zz_twin")
    rules = _write(tmp_path / "rules.jsonl", [*heur, twin])
    ref = _write(
        tmp_path / "ref.jsonl",
        [_scaled(r, 2.0, env_overrides={}) for r in (*heur, twin)],
    )
    study.main(["--rules", str(rules), "--reference", str(ref), "--baselines", "optimus"])
    out = capsys.readouterr().out
    assert "| random = zz_twin | heuristic |" in out
    assert "| random = zz_twin | random = zz_twin |" in out
    assert "| zz_twin " not in out


def _row(algo: str, scores: list[list[float]], seeds: list[int]):
    """The fields of a leaderboard row the single-run spread reads."""
    from types import SimpleNamespace

    return SimpleNamespace(algo=algo, seed_scores=scores, eval_seeds=seeds)


def test_single_runs_are_each_training_seed_on_each_workload(study):
    # two workloads: the baseline takes 10 and 8 slots; a reduction exactly at 40% counts
    learned = _row("tf", [[5.0, 8.0], [6.0, 4.0]], [1, 2])
    best = _row("optimus", [[10.0, 8.0]], [1, 2])
    red = study.single_workload_reductions(learned, best)
    assert red.ravel().tolist() == pytest.approx([0.5, 0.0, 0.4, 0.5])
    line = study.single_workload_line(learned, best)
    assert line == "| tf | 4 | 0.0% | 45.0% | 50.0% | 3 of 4 | 3 of 4 |"
    # against the baseline's mean over its runs on each workload
    two = _row("optimus", [[9.0, 7.0], [11.0, 9.0]], [1, 2])
    assert study.single_workload_reductions(learned, two).ravel().tolist() == pytest.approx(
        red.ravel().tolist()
    )


def test_single_runs_refuse_rows_on_different_workloads(study):
    with pytest.raises(ValueError, match=r"tf and optimus were evaluated on different seeds"):
        study.single_workload_reductions(_row("tf", [[1.0]], [1]), _row("optimus", [[1.0]], [2]))


def test_single_runs_table_is_on_the_page(study, files, capsys):
    rules, ref = files
    study.main(["--rules", str(rules), "--reference", str(ref), "--baselines", "optimus"])
    out = capsys.readouterr().out
    assert "Single runs (one training seed on one workload) against optimus's mean" in out
    # 3 training seeds x 10 held-out workloads
    assert any(x.startswith("| tapfinger-orig | 30 |") for x in out.splitlines())


def test_versus_compares_two_entries_under_the_rules(study, files, tmp_path, capsys):
    rules, ref = files
    # a second learner under the rules taking 3/4 of tapfinger-orig's time on every episode
    recs = _records(rules)
    orig = [r for r in recs if r["algo"] == "tapfinger-orig"]
    both = _write(
        tmp_path / "both.jsonl", recs + [_scaled(r, 0.75, algo="tapfinger-orig-g1") for r in orig]
    )
    study.main(
        [
            "--rules", str(both), "--reference", str(ref), "--baselines", "optimus",
            "--versus", "tapfinger-orig-g1=tapfinger-orig",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "Under the rules, entry against entry on the same workloads:" in out
    row = next(x for x in out.splitlines() if x.startswith("| tapfinger-orig-g1 | 4.20"))
    assert "| tapfinger-orig | 5.60" in row
    # each run a scaled copy of its counterpart's, the runs unlike each other: the interval
    # resamples them (studies.paired_reduction), so it brackets 25.0% without being a point
    low, high = (
        float(x) for x in re.search(r"25\.0% lower \[([0-9.]+)%, ([0-9.]+)%\] \|$", row).groups()
    )
    assert low < 25.0 < high, row


@pytest.mark.parametrize(
    ("versus", "message"),
    [
        ("tapfinger-orig", "--versus 'tapfinger-orig': expected <entry>=<other entry>"),
        ("tapfinger-orig=nosuch", "--versus names ['nosuch'], not among the records"),
    ],
)
def test_versus_errors_name_the_value(study, files, capsys, versus, message):
    rules, ref = files
    with pytest.raises(SystemExit) as exc:
        study.main(
            ["--rules", str(rules), "--reference", str(ref), "--baselines", "optimus",
             "--versus", versus]
        )  # fmt: skip
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
