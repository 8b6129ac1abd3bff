"""``promote``: a budget study's runs become the board entry they vary, checked first."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from edgesched.algos import algo_config  # noqa: E402
from edgesched.leaderboard.__main__ import main  # noqa: E402
from edgesched.leaderboard.build import build  # noqa: E402
from edgesched.leaderboard.promote import budget_label, promote, promote_variant  # noqa: E402
from edgesched.leaderboard.records import RecordError  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "leaderboard" / "records.jsonl"
AT_BUDGET = {"env_steps": 149_504, "updates": 292}  # edge10's board budget: the default
SHORTER = {"env_steps": 74_752, "updates": 146}


def _fixture(algo: str) -> dict:
    return next(json.loads(line) for line in FIXTURE.read_text().splitlines() if algo in line)


def _learned(root: Path, algo: str, seed: int, train: dict, **settings) -> dict:
    """A mappo-based record named ``algo`` with a policy file under ``root``."""
    base, _, variant = algo.partition("-")
    row = {**_fixture('"mappo"'), "algo": algo, "train_seed": seed, "train": dict(train)}
    row["per_episode"] = [{**ep, "jct_mean": ep["jct_mean"] + seed} for ep in row["per_episode"]]
    stored = {**dataclasses.asdict(algo_config(base)), "variant": variant, **settings}
    rel = Path("leaderboards/policies/edge10") / f"{algo}_seed{seed}.pt"
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    torch.save({"actor": {"w": torch.full((2,), float(seed))}, "algo": stored}, root / rel)
    row["policy"] = rel.as_posix()
    return row


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _single(root: Path, rel: str, algo: str, seed: int, train: dict, **settings) -> Path:
    """A results file ``root/rel`` of one record (:func:`_learned`)."""
    return _write(root / rel, [_learned(root, algo, seed, train, **settings)])


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository root with a board (random + mappo at half the budget) and a study."""
    monkeypatch.chdir(tmp_path)
    heuristic = _fixture('"random"')
    board = [heuristic] + [_learned(tmp_path, "mappo", s, SHORTER) for s in range(3)]
    study = [_learned(tmp_path, "mappo-b150k", s, AT_BUDGET) for s in range(3)]
    return (
        tmp_path,
        _write(tmp_path / "leaderboards/results/edge10.jsonl", board),
        _write(tmp_path / "leaderboards/studies/budget/edge10_mappo-b150k.jsonl", study),
    )


def test_budget_labels_name_the_requested_budget():
    assert budget_label(1_199_616, 2343) == "b1200k"
    assert budget_label(299_520, 585) == "b300k"
    assert budget_label(4_800_000, 9375) == "b4800k"
    assert budget_label(149_504, 292) == "b150k"  # the default budget, not 100k
    assert budget_label(74_752, 146) == "b75k"
    assert budget_label(149_504, 73) == "b150k"  # 2,048 steps per update
    with pytest.raises(ValueError, match="env_steps=64 in updates=3"):
        budget_label(64, 3)


def test_a_study_run_becomes_the_entry_and_the_previous_one_a_study_row(repo):
    root, board, study = repo
    study_text = study.read_text()
    old_policy = (root / "leaderboards/policies/edge10/mappo_seed1.pt").read_bytes()
    new_policy = (root / "leaderboards/policies/edge10/mappo-b150k_seed1.pt").read_bytes()
    promoted, moved = promote(study, board, root=root)

    assert study.read_text() == study_text  # the study keeps its rows
    rows = _read(board)
    assert [(r["algo"], r["train_seed"]) for r in rows] == [
        ("mappo", 0),
        ("mappo", 1),
        ("mappo", 2),
        ("random", None),
    ]
    for row, before in zip(rows[:3], _read(study), strict=True):
        assert row["promoted_from"] == "mappo-b150k"
        assert row["per_episode"] == before["per_episode"] and row["train"] == AT_BUDGET
        assert row["config_hash"] == before["config_hash"]  # the run that produced it
        assert row["policy"] == f"leaderboards/policies/edge10/mappo_seed{row['train_seed']}.pt"
    assert (root / rows[1]["policy"]).read_bytes() == new_policy
    assert promoted == rows[:3]

    assert moved == Path("leaderboards/studies/budget/edge10_mappo-b75k.jsonl")
    previous = _read(root / moved)
    assert [(r["algo"], r["train"]) for r in previous] == [("mappo-b75k", SHORTER)] * 3
    assert all("promoted_from" not in r for r in previous)
    assert (root / previous[1]["policy"]).read_bytes() == old_policy

    # the board builds, and its entry is today's mappo at the board's budget
    build([board], [], root / "out", plots=False, root=root)
    page = (root / "out" / "coverage.md").read_text()
    assert "None: every learned entry is trained with today's defaults." in page
    # a second promotion has nothing to do
    with pytest.raises(RecordError, match="already trained at 149,504"):
        promote(study, board, root=root)


def test_only_a_budget_variant_is_promoted(repo):
    root, board, _ = repo
    other = _single(
        root, "leaderboards/studies/edge10_mappo-wide.jsonl", "mappo-wide", 0, AT_BUDGET
    )
    with pytest.raises(RecordError, match="algo='mappo-wide' is not a budget variant"):
        promote(other, board, root=root)


def test_a_study_at_another_budget_than_the_boards_is_refused(repo):
    root, board, _ = repo
    longer = _single(
        root,
        "leaderboards/studies/budget/edge10_mappo-b300k.jsonl",
        "mappo-b300k",
        0,
        {"env_steps": 299_520, "updates": 585},
    )
    with pytest.raises(RecordError, match=r"total_env_steps 299,520 env steps \(board 150,000\)"):
        promote(longer, board, root=root)
    assert _read(board)[1]["train"] == SHORTER  # nothing was written


def test_other_settings_than_todays_are_refused(repo):
    root, board, _ = repo
    stale = _single(
        root,
        "leaderboards/studies/budget/edge10_mappo-b150k.jsonl",
        "mappo-b150k",
        0,
        AT_BUDGET,
        epochs=8,
    )
    with pytest.raises(RecordError, match=r"epochs `8` \(today `4`\)"):
        promote(stale, board, root=root)


def test_an_ablation_is_compared_with_its_board_records(repo):
    root, _, _ = repo
    board = _single(
        root, "leaderboards/results/edge10_wide.jsonl", "mappo-wide", 0, SHORTER, hidden=[8]
    )
    same = _single(
        root,
        "leaderboards/studies/budget/edge10_mappo-wide-b150k.jsonl",
        "mappo-wide-b150k",
        0,
        AT_BUDGET,
        hidden=[8],
    )
    other = _single(
        root,
        "leaderboards/studies/budget/x/edge10_mappo-wide-b150k.jsonl",
        "mappo-wide-b150k",
        1,
        AT_BUDGET,
        hidden=[16],
    )
    with pytest.raises(RecordError, match=r"algo.hidden \[16\] \(board \[8\]\)"):
        promote(other, board, root=root)
    promote(same, board, root=root)
    assert [(r["algo"], r["promoted_from"]) for r in _read(board)] == [
        ("mappo-wide", "mappo-wide-b150k")
    ]
    fresh = root / "leaderboards/results/none.jsonl"
    with pytest.raises(RecordError, match="no board records to compare"):
        promote(other, fresh, root=root)


def test_an_existing_study_file_is_not_overwritten(repo):
    root, board, study = repo
    taken = _write(root / "leaderboards/studies/budget/edge10_mappo-b75k.jsonl", [])
    with pytest.raises(RecordError, match="exists"):
        promote(study, board, root=root)
    assert taken.read_text() == "" and _read(board)[1]["algo"] == "mappo"


def test_the_command_line_names_the_error(repo, capsys):
    root, board, _ = repo
    missing = root / "nothing.jsonl"
    missing.write_text("")
    assert main(["promote", str(missing), str(board), "--root", str(root)]) == 2
    assert "no records to promote" in capsys.readouterr().err


def _promoted_from_earlier_study(root: Path, board: Path) -> Path:
    """Make the board's mappo runs ones promoted from a 75k study that still holds them."""
    rows, earlier = _read(board), []
    for row in rows:
        if row["algo"] != "mappo":
            continue
        rel = Path(f"leaderboards/policies/edge10/mappo-b75k_seed{row['train_seed']}.pt")
        (root / rel).write_bytes((root / row["policy"]).read_bytes())
        earlier.append({**row, "algo": "mappo-b75k", "policy": rel.as_posix()})
        row["promoted_from"] = "mappo-b75k"
    _write(board, rows)
    return _write(root / "leaderboards/studies/budget/edge10_mappo-b75k.jsonl", earlier)


def test_an_entry_promoted_from_a_study_goes_back_to_it_without_a_copy(repo):
    root, board, study = repo
    earlier = _promoted_from_earlier_study(root, board)
    text = earlier.read_text()
    new_policy = (root / "leaderboards/policies/edge10/mappo-b150k_seed2.pt").read_bytes()
    _, moved = promote(study, board, root=root)
    assert moved == Path("leaderboards/studies/budget/edge10_mappo-b75k.jsonl")
    assert earlier.read_text() == text  # the study keeps its rows as they were
    mappo = [r for r in _read(board) if r["algo"] == "mappo"]
    assert [r["promoted_from"] for r in mappo] == ["mappo-b150k"] * 3
    assert [r["train"] for r in mappo] == [AT_BUDGET] * 3
    assert (root / mappo[2]["policy"]).read_bytes() == new_policy
    assert all((root / r["policy"]).is_file() for r in _read(earlier))


def test_a_study_that_differs_from_the_entry_it_was_promoted_to_is_not_overwritten(repo):
    root, board, study = repo
    earlier = _promoted_from_earlier_study(root, board)
    # the study's policy of seed 1 is not the board's any more: they are not the same runs
    (root / "leaderboards/policies/edge10/mappo-b75k_seed1.pt").write_bytes(b"other")
    text, board_text = earlier.read_text(), board.read_text()
    with pytest.raises(RecordError, match="exists"):
        promote(study, board, root=root)
    assert earlier.read_text() == text and board.read_text() == board_text


# ------------------------------------------------------------------ promote_variant
LONGER = {"env_steps": 299_520, "updates": 585}


@pytest.fixture
def swap(tmp_path, monkeypatch):
    """edge10 with tapfinger on the mean reward, its own-reward variant and both studies."""
    monkeypatch.chdir(tmp_path)
    root = tmp_path
    mean = [_learned(root, "tapfinger", s, AT_BUDGET, team_reward=True) for s in range(3)]
    _write(root / "leaderboards/results/edge10.jsonl", [_fixture('"random"'), *mean])
    own = [_learned(root, "tapfinger-own", s, AT_BUDGET, team_reward=False) for s in range(3)]
    _write(root / "leaderboards/results/edge10_tapfinger-own.jsonl", own)
    budget = root / "leaderboards/studies/budget"
    mean_b = [_learned(root, "tapfinger-b300k", s, LONGER, team_reward=True) for s in range(3)]
    _write(budget / "edge10_tapfinger-b300k.jsonl", mean_b)
    own_b = [_learned(root, "tapfinger-own-b300k", s, LONGER, team_reward=False) for s in range(3)]
    _write(budget / "edge10_tapfinger-own-b300k.jsonl", own_b)
    return root


def _policy(root: Path, name: str, seed: int) -> bytes:
    return (root / f"leaderboards/policies/edge10/{name}_seed{seed}.pt").read_bytes()


def test_a_variant_with_todays_defaults_becomes_the_entry_and_the_entry_a_variant(swap):
    root = swap
    was = {n: _policy(root, n, 1) for n in ("tapfinger", "tapfinger-own", "tapfinger-own-b300k")}
    own_rows = _read(root / "leaderboards/results/edge10_tapfinger-own.jsonl")
    renames = promote_variant("edge10", "tapfinger", "own", "mean", root=root)
    assert renames == {
        "tapfinger": "tapfinger-mean",
        "tapfinger-b300k": "tapfinger-mean-b300k",
        "tapfinger-own": "tapfinger",
        "tapfinger-own-b300k": "tapfinger-b300k",
    }
    results, budget = root / "leaderboards/results", root / "leaderboards/studies/budget"
    # a file named for one renamed entry is renamed with it; a mixed file keeps its name
    assert sorted(p.name for p in results.iterdir()) == ["edge10.jsonl", "edge10_tapfinger.jsonl"]
    assert sorted(p.name for p in budget.iterdir()) == [
        "edge10_tapfinger-b300k.jsonl",
        "edge10_tapfinger-mean-b300k.jsonl",
    ]
    board = _read(results / "edge10.jsonl")
    assert [(r["algo"], r.get("renamed_from")) for r in board] == [("random", None)] + [
        ("tapfinger-mean", "tapfinger")
    ] * 3
    entry = _read(results / "edge10_tapfinger.jsonl")
    for row, before in zip(entry, own_rows, strict=True):
        assert row["algo"] == "tapfinger" and row["renamed_from"] == "tapfinger-own"
        assert row["per_episode"] == before["per_episode"]
        assert row["config_hash"] == before["config_hash"]
    # every policy followed its run, the variant's after the previous entry left its path
    assert (root / entry[1]["policy"]).read_bytes() == was["tapfinger-own"]
    assert (root / board[2]["policy"]).read_bytes() == was["tapfinger"]
    longer = _read(budget / "edge10_tapfinger-b300k.jsonl")
    assert (root / longer[1]["policy"]).read_bytes() == was["tapfinger-own-b300k"]
    left = sorted(p.name for p in (root / "leaderboards/policies/edge10").iterdir())
    assert not [n for n in left if "own" in n]  # no record names them any more
    # the board builds with tapfinger as today's algorithm, the mean-reward runs a variant
    build(sorted(results.iterdir()), [], root / "out", plots=False, root=root)
    page = (root / "out" / "coverage.md").read_text()
    assert "None: every learned entry is trained with today's defaults." in page
    # done once: the variant is gone, so a second run has nothing to promote
    with pytest.raises(RecordError, match="no records of tapfinger-own"):
        promote_variant("edge10", "tapfinger", "own", "mean", root=root)


def test_a_variant_that_is_not_todays_default_is_not_promoted(swap):
    root = swap
    path = root / "leaderboards/results/edge10_tapfinger-own.jsonl"
    text = path.read_text()
    _single(
        root,
        "leaderboards/results/edge10_tapfinger-own.jsonl",
        "tapfinger-own",
        0,
        AT_BUDGET,
        team_reward=False,
        epochs=8,
    )
    with pytest.raises(RecordError, match=r"would not be today's tapfinger: epochs `8`"):
        promote_variant("edge10", "tapfinger", "own", "mean", root=root)
    path.write_text(text)
    # an entry already trained as today's is not demoted
    _single(root, "leaderboards/results/edge10.jsonl", "tapfinger", 0, AT_BUDGET, team_reward=False)
    before = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    with pytest.raises(RecordError, match="trained with today's defaults; it stays tapfinger"):
        promote_variant("edge10", "tapfinger", "own", "mean", root=root)
    assert {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} == before


def test_a_variant_at_another_budget_or_a_taken_name_is_refused(swap):
    root = swap
    _single(
        root,
        "leaderboards/results/edge10_tapfinger-own.jsonl",
        "tapfinger-own",
        0,
        LONGER,
        team_reward=False,
    )
    with pytest.raises(RecordError, match="trained at different budgets"):
        promote_variant("edge10", "tapfinger", "own", "mean", root=root)
    _single(
        root,
        "leaderboards/results/edge10_tapfinger-mean.jsonl",
        "tapfinger-mean",
        0,
        AT_BUDGET,
        team_reward=True,
    )
    with pytest.raises(RecordError, match=r"entries \['tapfinger-mean'\] exist already"):
        promote_variant("edge10", "tapfinger", "own", "mean", root=root)
    for bad in ("a-b", "b300k", ""):
        with pytest.raises(RecordError, match=f"variant={bad!r} is not allowed"):
            promote_variant("edge10", "tapfinger", bad, "mean", root=root)


def test_promote_variant_on_the_command_line(swap, capsys):
    root = swap
    args = ["promote-variant", "--board", "edge10", "--entry", "tapfinger", "--root", str(root)]
    assert main([*args, "--variant", "wide", "--demote-to", "mean"]) == 2
    assert "no records of tapfinger-wide" in capsys.readouterr().err
    assert main([*args, "--variant", "own", "--demote-to", "mean"]) == 0
    assert "tapfinger-own -> tapfinger" in capsys.readouterr().err


def test_a_second_promotion_leaves_the_first_ones_files_alone(swap):
    root = swap
    promote_variant("edge10", "tapfinger", "own", "mean", root=root)
    files = sorted((root / "leaderboards").rglob("*tapfinger*"))
    before = {p: p.read_bytes() for p in files}
    board = root / "leaderboards/results/edge10.jsonl"
    rows = _read(board) + [_learned(root, "mappo", s, AT_BUDGET, epochs=8) for s in range(3)]
    _write(board, rows)
    _write(
        root / "leaderboards/results/edge10_mappo-wide.jsonl",
        [_learned(root, "mappo-wide", s, AT_BUDGET) for s in range(3)],
    )
    lines: list[str] = []
    assert promote_variant("edge10", "mappo", "wide", "e8", root=root, log=lines.append) == {
        "mappo": "mappo-e8",
        "mappo-wide": "mappo",
    }
    assert not [line for line in lines if "tapfinger" in line]
    assert sorted((root / "leaderboards").rglob("*tapfinger*")) == files
    assert {p: p.read_bytes() for p in files} == before
    assert sorted(p.name for p in (root / "leaderboards/results").iterdir()) == [
        "edge10.jsonl",
        "edge10_mappo.jsonl",
        "edge10_tapfinger.jsonl",
    ]


def test_a_renamed_entry_promoted_from_a_study_names_the_study_row_by_its_new_name(swap):
    root = swap
    path = root / "leaderboards/results/edge10_tapfinger-own.jsonl"
    rows = _read(path)
    for row in rows:
        row["promoted_from"] = "tapfinger-own-b150k"
    _write(path, rows)
    _write(
        root / "leaderboards/studies/budget/edge10_tapfinger-own-b150k.jsonl",
        [{**r, "algo": "tapfinger-own-b150k"} for r in rows],
    )
    renames = promote_variant("edge10", "tapfinger", "own", "mean", root=root)
    assert renames["tapfinger-own-b150k"] == "tapfinger-b150k"
    entry = _read(root / "leaderboards/results/edge10_tapfinger.jsonl")
    assert [r["promoted_from"] for r in entry] == ["tapfinger-b150k"] * 3
    study = _read(root / "leaderboards/studies/budget/edge10_tapfinger-b150k.jsonl")
    assert [r["algo"] for r in study] == ["tapfinger-b150k"] * 3
