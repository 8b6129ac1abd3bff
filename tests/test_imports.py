"""The package's import graph has no cycle (DESIGN §2, issue 20).

The graph is read from the source (AST), with every import of an ``edgesched`` module,
function-level imports included: a lazy import still ties the two modules together. Two
levels are checked: modules, and the units of the package (its subpackages such as
``edgesched.algos`` and its top-level modules such as ``edgesched.policy``). The root
``edgesched/__init__.py`` is the public facade that re-exports the units; imports of it are
left out, since it depends on everything by design.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "edgesched"


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, dict[str, list[int]]]:
    """Module -> imported ``edgesched`` module -> line numbers (every import in the file)."""
    graph: dict[str, dict[str, list[int]]] = {}
    names = graph_names()
    for path in sorted(PKG.rglob("*.py")):
        mod = _module(path)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        edges = graph.setdefault(mod, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    stem = ".".join(base)
                    if node.module:
                        targets = [f"{stem}.{node.module}"]
                    else:  # from . import a, b: each name may be a module
                        targets = [f"{stem}.{a.name}" for a in node.names]
                else:
                    targets = [node.module or ""]
            else:
                continue
            for target in targets:
                if target == "edgesched" or not target.startswith("edgesched."):
                    continue
                edges.setdefault(_known(target, names), []).append(node.lineno)
    return graph


def graph_names() -> set[str]:
    return {_module(p) for p in PKG.rglob("*.py")}


def _known(target: str, names: set[str]) -> str:
    """The module ``target`` names, or its longest existing prefix (``from m import name``)."""
    while target not in names and "." in target:
        target = target.rpartition(".")[0]
    return target


def unit(mod: str) -> str:
    """``edgesched.algos.mappo`` -> ``edgesched.algos``; ``edgesched.policy`` stays."""
    return ".".join(mod.split(".")[:2])


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of a directed graph as a node list (first node repeated), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(edges.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(edges):
        if n not in state and (found := visit(n)):
            return found
    return None


def unit_edges() -> tuple[dict[str, set[str]], dict]:
    """Unit graph and, per unit edge, the imports behind it."""
    edges: dict[str, set[str]] = {}
    why: dict[tuple[str, str], list[str]] = {}
    for mod, targets in import_graph().items():
        for target, lines in targets.items():
            a, b = unit(mod), unit(target)
            if a == b:
                continue
            edges.setdefault(a, set()).add(b)
            why.setdefault((a, b), []).append(f"{mod}:{lines[0]} -> {target}")
    return edges, why


def _describe(cycle: list[str], why: dict) -> str:
    steps = [f"{a} -> {b} ({'; '.join(why[(a, b)][:3])})" for a, b in itertools.pairwise(cycle)]
    return "import cycle: " + " | ".join(steps)


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    assert "edgesched.algos.mappo" in graph["edgesched.algos"]  # inside a factory function
    assert "edgesched.experiment.schema" in graph["edgesched.experiment"]  # relative
    assert "edgesched.protocol" in graph["edgesched.experiment.evaluation"]


def _module_edges() -> dict[str, set[str]]:
    """Module graph, without a submodule's imports of its own package.

    Such an import runs nothing new: Python initialized the package before the submodule.
    """
    edges: dict[str, set[str]] = {}
    for mod, targets in import_graph().items():
        for target in targets:
            if target != mod and not mod.startswith(target + "."):
                edges.setdefault(mod, set()).add(target)
    return edges


def test_no_module_level_cycle():
    """No module imports itself through others, the simulator's phase modules included."""
    cycle = find_cycle(_module_edges())
    assert cycle is None, f"module import cycle: {' -> '.join(cycle or [])}"


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    cycle = find_cycle(edges)
    assert cycle is not None and set(cycle) == {"a", "b", "c"}
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_cycle_between_units():
    """No cycle between subpackages and top-level modules."""
    edges, why = unit_edges()
    cycle = find_cycle(edges)
    assert cycle is None, _describe(cycle, why)


def test_algorithms_and_experiment_meet_in_protocol():
    """Seeds and metric names are in edgesched.protocol, which imports no other unit."""
    graph = import_graph()
    assert not graph["edgesched.protocol"]
    for mod in ("edgesched.algos", "edgesched.algos.base"):
        assert not [t for t in graph[mod] if unit(t) == "edgesched.experiment"], mod


def test_no_module_of_the_simulator_outgrows_one_room():
    """Each dynamic lives in a module a newcomer can read whole (issue 20: no module of
    ``edgesched/envs`` over about 500 lines); a module that grows past it is split."""
    long = {
        str(p.relative_to(PKG)): n
        for p in sorted((PKG / "envs").rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert not long, f"modules of edgesched/envs over 500 lines: {long}"
