"""The README's quick tour runs as written (documentation that cannot rot silently)."""

from __future__ import annotations

import re
from pathlib import Path

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
