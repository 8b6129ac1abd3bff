"""The README, the docs/ pages and leaderboards/' hand-written pages: the quick tour runs as
written, every quoted figure comes from a generated file (an estimate and its interval from
one interval of it), and every link resolves in a plain clone (documentation that cannot
rot silently)."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_starts_with_the_two_setup_commands():
    text = README.read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1).strip().splitlines()
    assert len(block) == 2
    assert block[0].endswith("python train.py algo=srole env=edge50")
    assert "pytest" in block[1]


def test_quick_tour_runs():
    text = README.read_text()
    tour = re.search(r"## Quick tour\n.*?```python\n(.*?)```", text, re.S).group(1)
    tour = tour.replace('make_parallel("edge50")', 'make_parallel("edge50", max_slots=30)')
    namespace: dict = {}
    exec(compile(tour, "README.md", "exec"), namespace)
    assert namespace["graph"]["nodes"]["node"].shape[0] == 50


# ---------------------------------------------------------------- numbers cannot drift
# Every measured figure the README (or a docs/ or leaderboards/ page) quotes must come from a
# generated file.
# A section that quotes figures names its sources in a comment, ``<!-- numbers: path [path
# ...] -->`` (paths relative to the repository root); every decimal figure and every figure
# with a thousands separator in that section must then appear, at the precision quoted,
# among the numbers of those files (as given, or as a fraction for a percentage). Generated
# blocks (``<!-- name:start ... -->`` to ``<!-- name:end -->``) are compared whole against
# their file elsewhere and skipped here; code is skipped (it is run, not quoted). A docs/ page
# names its sources once, at its top, and its sections without a comment of their own
# inherit them (the README's sections each name their own).
ROOT = README.parent
# docs/paper-claims.md quotes the papers' own figures: it is a source the other pages cite
QUOTES_PAPERS = {"paper-claims.md"}


def _pages() -> list[Path]:
    """The README and every page of docs/ (the write-ups the README links to)."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


# leaderboards/' hand-written pages: results there are generated, never typed in, so the
# figures these pages quote from the boards, records and studies are held to their sources
# like a docs/ page's (sources at the top, or per section)
HAND_WRITTEN = [ROOT / "leaderboards" / "README.md", ROOT / "leaderboards/archive/v0/README.md"]


_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.,])\d+\.\d+(?![\w.])")
# version strings and the like are not measurements
_NOT_A_FIGURE = re.compile(
    r"(?:Python|python|numpy|torch==|torch|pip|v|§|CC BY|Apache-)\s*\d+(?:\.\d+)+"
)


def _sections(text: str) -> list[tuple[str, str]]:
    """Split the README into (heading, body) pairs at ## and ### headings."""
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.M)
    out = [("(top)", parts[0])]
    out += [(parts[i].strip(), parts[i + 1]) for i in range(1, len(parts) - 1, 2)]
    return out


def _prose(body: str) -> str:
    """The section's quoted text: no code, comments, link targets or generated blocks."""
    body = re.sub(r"<!-- ([\w-]+(?::[\w.-]+)?):start.*?<!-- \1:end -->", "", body, flags=re.S)
    body = re.sub(r"```.*?```", "", body, flags=re.S)
    body = re.sub(r"<!--.*?-->", "", body, flags=re.S)
    body = re.sub(r"`[^`]*`", "", body)
    body = re.sub(r"\]\([^)]*\)", "]", body)
    return _NOT_A_FIGURE.sub("", body)


def _figures(text: str) -> list[str]:
    return _NUMBER.findall(text)


# ``<commit>:<path>`` names a generated file as that commit wrote it: a page's account of an
# earlier study quotes figures that a later regeneration of the file no longer prints
_AT_COMMIT = re.compile(r"[0-9a-f]{7,40}:\S+")


@cache
def _git(*args: str) -> str | None:
    """``git -C <repo> args``'s output, or None where git is missing or the command fails."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return out.stdout if out.returncode == 0 else None


def _history() -> bool:
    """Whether this checkout has its git history (a plain clone; not a shallow one)."""
    return (_git("rev-parse", "--is-shallow-repository") or "").strip() == "false"


def _source_text(path: str) -> str | None:
    """A source's text (a file of the tree, or ``<commit>:<path>``); None if unreadable."""
    if _AT_COMMIT.fullmatch(path):
        return _git("show", path)
    file = ROOT / path
    return file.read_text() if file.is_file() else None


def _source_values(paths: list[str]) -> list[float]:
    values = []
    for p in paths:
        # a source may be code: read its literals' digit separators (10_000) as none
        text = re.sub(r"(?<=\d)_(?=\d)", "", _source_text(p) or "")
        for tok in re.findall(r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?", text):
            try:
                values.append(float(tok.replace(",", "")))
            except ValueError:
                continue
    return values


def _matches(token: str, values: list[float]) -> bool:
    x = float(token.replace(",", ""))
    decimals = len(token.partition(".")[2])
    tol = 0.5 * 10.0**-decimals + 1e-9
    return any(abs(v - x) <= tol or abs(100 * v - x) <= tol for v in values)


MINUS = "\u2212"  # the typographic minus sign the pages write
_SIGNED = r"[\u2212+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
# a figure quoted with its interval, "30.8% lower [27.3%, 34.0%]" or "8.37 [7.92, 8.80]"
_INTERVAL = re.compile(
    rf"({_SIGNED})%?(?:\s+(?:lower|higher|below|above|faster|slower))?"
    rf"\s*\[\s*({_SIGNED})%?,\s*({_SIGNED})%?\s*\]"
)


def _intervals(text: str) -> list[tuple[str, str, str]]:
    """Every ``estimate [low, high]`` of ``text``, as the strings written."""
    return _INTERVAL.findall(text)


def _interval_matches(quoted: tuple[str, str, str], found: tuple[str, str, str]) -> bool:
    """Whether a quoted interval is a source's, at the quoted precision.

    Signs are dropped and the bounds compared as a pair in either order: a page says "12.2%
    lower [8.6%, 16.0%]" of what its source prints as "-12.2% [-16.0%, -8.6%]".
    """

    def same(token: str, value: str) -> bool:
        number = float(value.replace(MINUS, "-").replace(",", ""))
        return _matches(token.lstrip(MINUS + "+-"), [abs(number)])

    (x, a, b), (fx, fa, fb) = quoted, found
    return same(x, fx) and ((same(a, fa) and same(b, fb)) or (same(a, fb) and same(b, fa)))


def _annotated() -> list[tuple[str, list[str], str]]:
    out = []
    for page in [*_pages(), *HAND_WRITTEN]:
        if page.name in QUOTES_PAPERS:
            continue
        where = page.relative_to(ROOT)
        inherited: list[str] = []
        for heading, body in _sections(page.read_text()):
            m = re.search(r"<!-- numbers: (.*?) -->", body)
            sources = m.group(1).split() if m else inherited
            if heading == "(top)" and page != README:
                # a docs page names its sources once, at its top, for all its sections
                inherited = sources
            out.append((f"{where} {heading}", sources, body))
    return out


def test_readme_figures_come_from_generated_files():
    problems, unchecked = [], []
    for heading, sources, body in _annotated():
        figures = _figures(_prose(body))
        if not figures:
            continue
        if not sources:
            problems.append(f"{heading}: quotes {figures[:6]} but names no source file")
            continue
        if not _history() and any(_AT_COMMIT.fullmatch(p) for p in sources):
            unchecked.append(heading)  # its earlier files need the history a clone has
            continue
        missing = [p for p in sources if _source_text(p) is None]
        if missing:
            problems.append(f"{heading}: source files {missing} do not exist")
            continue
        values = _source_values(sources)
        stray = [f for f in figures if not _matches(f, values)]
        if stray:
            problems.append(f"{heading}: {stray} not found in {sources}")
    assert not problems, "README figures without a generated source:\n" + "\n".join(problems)
    if unchecked:
        pytest.skip(f"no git history here: {len(unchecked)} sections cite files at a commit")


def test_quoted_intervals_stand_together_in_a_source():
    # an estimate and its interval are one result: all three numbers must come from one
    # interval of a source, not each from anywhere in it (which long sources make likely)
    problems = []
    for heading, sources, body in _annotated():
        quoted = _intervals(_prose(body))
        if not quoted or not sources:
            continue  # a section naming no source is the other test's failure
        if not _history() and any(_AT_COMMIT.fullmatch(p) for p in sources):
            continue
        found = [iv for p in sources for iv in _intervals(_source_text(p) or "")]
        stray = [q for q in quoted if not any(_interval_matches(q, f) for f in found)]
        if stray:
            problems.append(f"{heading}: {stray} not among its {len(sources)} sources' intervals")
    assert not problems, "intervals without a source:\n" + "\n".join(problems)


def test_interval_check_catches_a_drifted_bound():
    text = "tapfinger ends 30.8% lower [27.3%, 34.0%]; mean 8.37 [7.92, 8.80], 42.2% [36.9%, 47.4%]"
    assert _intervals(text) == [
        ("30.8", "27.3", "34.0"),
        ("8.37", "7.92", "8.80"),
        ("42.2", "36.9", "47.4"),
    ]
    source = _intervals("| -30.8% [-34.0%, -27.3%] | 8.37 [7.92, 8.80] | 122.8, [-19.6, -0.4] |")
    assert len(source) == 2  # "122.8, [...]" is a figure beside an interval, not its estimate
    assert _interval_matches(("30.8", "27.3", "34.0"), source[0])  # sign and order dropped
    assert _interval_matches(("8.4", "7.9", "8.8"), source[1])  # quoted at lower precision
    assert not _interval_matches(("8.37", "7.92", "8.81"), source[1])
    assert not _interval_matches(("8.37", "7.92", "8.80"), source[0])


def test_figure_check_catches_a_drifted_number():
    # the checker itself must be able to fail: a figure absent from the source is caught
    assert _matches("40.1", [40.14])
    assert not _matches("40.1", [36.29])
    assert _matches("48.2", [0.4823])
    assert 10000.0 in _source_values(["edgesched/leaderboard/stats.py"])  # N_RESAMPLES = 10_000
    assert _AT_COMMIT.fullmatch("de97133:leaderboards/coverage.md")
    assert not _AT_COMMIT.fullmatch("benchmarks/results/budget_study.md")
    assert _source_text("0000000:leaderboards/coverage.md") is None  # no such commit
    if _history():  # the file as de97133 wrote it, regenerated since without this interval
        old = _source_text("de97133:benchmarks/results/budget_study_tfh6_noattn1200.md")
        assert ("30.8", "27.3", "34.0") in [(a.lstrip("-"), b, c) for a, b, c in _intervals(old)]
    assert _figures(_prose("mean JCT **40.1** over 23,900 decisions; `x 9.9` Python 3.11")) == [
        "40.1",
        "23,900",
    ]


def _anchors(page: Path) -> set[str]:
    """The heading anchors GitHub renders for ``page`` (lower case, punctuation dropped)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    heads = re.findall(r"^#{1,6} (.*)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def _dead_links(page: Path, root: Path = ROOT) -> list[str]:
    """Relative links of ``page`` that a clone at ``root`` cannot follow (file or anchor)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    dead = []
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        inside = root.resolve() in (path, *path.parents) and path.exists()
        if not inside or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            dead.append(target)
    return dead


def test_readme_links_resolve_inside_a_clone():
    # a plain clone has no folder next to it: every relative link must point into the repo,
    # and an anchor must name a heading of its page (a section moved to docs/ leaves none)
    dead = {str(p.relative_to(ROOT)): _dead_links(p) for p in [*_pages(), *HAND_WRITTEN]}
    dead = {k: v for k, v in dead.items() if v}
    assert not dead, f"links that a plain clone cannot follow: {dead}"


def test_link_check_catches_a_moved_section(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "study.md").write_text("# Study\n\n## Measured: the `--help` run\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# Title\n\n[a](#title) [b](#gone) [c](docs/study.md#measured-the---help-run)\n"
        "[d](docs/study.md#title) [e](docs/missing.md) [f](../outside.md)\n"
    )
    assert _anchors(tmp_path / "docs" / "study.md") == {"study", "measured-the---help-run"}
    dead = _dead_links(page, root=tmp_path)
    assert dead == ["#gone", "docs/study.md#title", "docs/missing.md", "../outside.md"]


def _scenario_rows() -> dict[str, list[str]]:
    """The README's ``## Scenarios`` table: scenario name -> its cells."""
    section = README.read_text().split("\n## Scenarios\n", 1)[1].strip().split("\n\n", 1)[0]
    rows = {}
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells
    return rows


def test_the_scenarios_table_matches_the_registry():
    """One row per registered scenario, its facts those of the latest version."""
    from edgesched import list_scenarios
    from edgesched.envs.scenarios import get_scenario

    rows = _scenario_rows()
    assert sorted(rows) == list_scenarios()
    for name, (_, gym_id, nodes, k, collisions, pending, clock, _what) in rows.items():
        s = get_scenario(name)
        cfg = s.config()
        assert gym_id == f"`{s.gym_id}`", name
        assert (int(nodes), int(k)) == (cfg.num_nodes, cfg.neighbors_k), name
        assert (collisions, int(pending)) == (cfg.collision_mode, cfg.pending_slots), name
        assert clock == cfg.advance.replace("_", " "), name
