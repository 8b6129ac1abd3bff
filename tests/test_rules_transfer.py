"""``benchmarks/rules_transfer.py``: policies trained under some rules, evaluated under others."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import import_benchmark

ROOT = Path(__file__).resolve().parents[1]
LEARNED = ROOT / "leaderboards/results/edge10_learned.jsonl"
BASELINES = ROOT / "leaderboards/results/baselines_edge_v1.jsonl"
TIMESHARE = {"collision_mode": "timeshare"}


@pytest.fixture(scope="module")
def study():
    return import_benchmark("rules_transfer")


def _records(path: Path, algo: str) -> list[dict]:
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in recs if r["scenario"] == "edge10-v1" and r["algo"] == algo]


def _write(path: Path, recs: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return str(path)


@pytest.fixture()
def files(tmp_path):
    """edge10's committed MAPPO and ``least_loaded`` (registered rules), and the same
    policies renamed ``mappo-ts`` as if trained under ``collision_mode=timeshare``, with
    ``least_loaded`` under it taking exactly twice as long.

    ``mappo-ts`` *is* ``mappo``, so evaluated under the registered rules its policies must
    give the committed records' numbers exactly: the two entries' paired change there is
    zero.
    """
    mappo = _records(LEARNED, "mappo")
    ll = _records(BASELINES, "least_loaded")
    twin = [dict(r, algo="mappo-ts", env_overrides=TIMESHARE) for r in mappo]
    slow = json.loads(json.dumps(ll))
    for r in slow:
        r["env_overrides"] = TIMESHARE
        for ep in r["per_episode"]:
            ep["jct_mean"] *= 2.0
    a = _write(tmp_path / "a.jsonl", mappo + ll)
    b = _write(tmp_path / "b.jsonl", twin + slow)
    return a, b


def _table_row(out: str, first_cell: str, nth: int = 0) -> list[str]:
    rows = [ln for ln in out.splitlines() if ln.startswith(f"| {first_cell} |")]
    return [c.strip() for c in rows[nth].strip("|").split("|")]


def test_every_policy_is_evaluated_under_both_rules(study, files, capsys):
    a, b = files
    study.main(["--a", a, "--b", b, "--pair", "mappo-ts=mappo", "--root", str(ROOT)])
    out = capsys.readouterr().out
    assert "rules A: registered rules; rules B: collision_mode=timeshare" in out
    mappo = _table_row(out, "mappo")
    twin = _table_row(out, "mappo-ts")
    assert mappo[1] == "A" and twin[1] == "B"
    # the same policies under the same rules: identical cells, whichever side trained them
    assert twin[2] == mappo[2]
    # timeshare has no crashes to count, and the policies' episodes change with the rules
    assert mappo[3] != "-" and mappo[5] == "-" and mappo[4] != mappo[2]
    # mappo-ts's timeshare cell is mappo's registered-rules record relabelled; mappo's
    # there is a fresh evaluation under timeshare
    assert twin[4] == mappo[2] and mappo[4] != twin[4]
    ll = _table_row(out, "least_loaded")
    assert ll[1] == "(heuristic)"
    assert ll[6] == "100.0% higher [100.0%, 100.0%]"
    trained = _table_row(out, "mappo-ts", nth=4)  # after the cells and the 3 seed rows
    assert trained[1] == "mappo"
    # the two trainings (here the same records) are drawn as independent samples of runs:
    # no difference, with the spread between training seeds around it
    value, low, high = (float(x) for x in re.findall(r"-?[0-9.]+", trained[2]))
    assert trained[2].startswith("0.0% lower [") and low < value == 0.0 < high
    # per training seed: the same policy under the same rules, whichever side trained it
    for seed in range(3):
        mine, twins = _table_row(out, "mappo", nth=1 + seed), _table_row(out, "mappo-ts", 1 + seed)
        assert mine[:3] == ["mappo", "A", str(seed)] and twins[:3] == ["mappo-ts", "B", str(seed)]
        assert twins[3] == mine[3] and twins[4] == mine[3]


def test_refuses_sides_under_the_same_rules(study, files, capsys):
    a, _ = files
    with pytest.raises(SystemExit):
        study.main(["--a", a, "--b", a, "--pair", "mappo=mappo", "--root", str(ROOT)])
    assert "--a and --b are under the same rules (registered rules)" in capsys.readouterr().err


def test_names_a_pair_without_records(study, files, capsys):
    a, b = files
    with pytest.raises(SystemExit):
        study.main(["--a", a, "--b", b, "--pair", "ippo-ts=mappo", "--root", str(ROOT)])
    err = capsys.readouterr().err
    assert "--pair ippo-ts: no learned records under B; have ['mappo-ts']" in err
