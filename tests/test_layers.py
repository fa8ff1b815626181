"""Imports between memora_rl's sub-packages run one way: down the layers below, never up or sideways.

Every import counts, lazy ones inside functions included (a lazy import is still a dependency).
docs/architecture.md draws the same order; a new sub-package or top-level module needs a layer here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "memora_rl"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

LAYERS: dict[str, int] = {
    "errors": 0,
    "paths": 0,
    "async_bridge": 0,
    "sqlite_wal": 0,
    "turn_ids": 0,
    "config": 1,
    "embedding": 1,
    "cli_options": 1,
    "data": 2,
    "llm": 2,
    "memory": 2,
    "core": 3,
    "builders": 3,
    "judge": 4,
    "env": 5,
    "policy": 6,
    "training": 7,
    "evaluation": 7,
    "serve": 7,
    "export": 8,
    "quickstart": 9,
    "experiments": 9,
    "cli": 10,
}
"""Layer of each sub-package (or top-level module): a module may import its own unit or a strictly lower layer."""


@dataclass(frozen=True)
class Import:
    """One import statement of a module, resolved to the absolute name it loads."""

    target: str
    line: int


def module_name(path: Path) -> str:
    """Dotted name of a source file under `ROOT` (a package's `__init__.py` names the package)."""
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(
    source: str, module: str, is_package: bool = False, known: frozenset[str] = frozenset()
) -> Iterator[Import]:
    """Every memora_rl import in `source` at any depth, relative ones resolved (`from a import b` is `a.b` if known)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in dict.fromkeys(targets):  # `from a import b, c` is one import of `a`
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                yield Import(target, node.lineno)


def unit_of(module: str) -> str | None:
    """The sub-package or top-level module `module` belongs to (None for the root package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def layer_violations(module: str, imports: list[Import]) -> list[str]:
    """One message per import of `module` that goes up a layer or sideways to a sibling unit."""
    unit = unit_of(module)
    problems = []
    for item in imports:
        target_unit = unit_of(item.target)
        if unit is None or target_unit is None or target_unit == unit:
            continue
        if LAYERS[target_unit] >= LAYERS[unit]:
            problems.append(
                f"{module} (line {item.line}, `{unit}`, layer {LAYERS[unit]}) imports {item.target} "
                f"(`{target_unit}`, layer {LAYERS[target_unit]}): imports must go to a lower layer"
            )
    return problems


def source_modules() -> dict[str, list[Import]]:
    """Every module of the package with its resolved memora_rl imports."""
    paths = sorted(ROOT.rglob("*.py"))
    known = frozenset(module_name(path) for path in paths)
    return {
        module_name(path): list(imports_of(path.read_text(), module_name(path), path.name == "__init__.py", known))
        for path in paths
    }


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a list of nodes (first node repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


@pytest.fixture(scope="module")
def modules() -> dict[str, list[Import]]:
    """The parsed package."""
    return source_modules()


def test_every_unit_has_a_layer(modules: dict[str, list[Import]]) -> None:
    """A new sub-package or top-level module must be placed in LAYERS before it can be checked."""
    units = {unit_of(module) for module in modules} - {None}
    assert units - LAYERS.keys() == set(), f"give these a layer in LAYERS: {sorted(units - LAYERS.keys())}"
    assert LAYERS.keys() - units == set(), f"LAYERS names units that do not exist: {sorted(LAYERS.keys() - units)}"


def test_imports_go_down_the_layers(modules: dict[str, list[Import]]) -> None:
    """No module imports a sub-package of its own layer or of a higher one."""
    problems = [problem for module, imports in modules.items() for problem in layer_violations(module, imports)]
    assert not problems, "\n".join(problems)


def test_no_import_cycle_between_modules(modules: dict[str, list[Import]]) -> None:
    """Inside a sub-package too, module imports form no cycle (a module's own parent packages aside)."""
    graph: dict[str, set[str]] = {}
    for module, imports in modules.items():
        targets = set()
        for item in imports:
            parts = item.target.split(".")
            for end in range(2, len(parts) + 1):  # importing a.b.c loads the packages a.b and a.b.c
                name = ".".join(parts[:end])
                if name in modules and name != module and not module.startswith(name + "."):
                    targets.add(name)
        graph[module] = targets
    cycle = import_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_lazy_upward_import_is_reported() -> None:
    """The check sees imports inside functions and relative ones, and names module, line and target."""
    source = (
        "from memora_rl.core.parse import parse_action\n"
        "def act():\n"
        "    from memora_rl.policy.chat import chat_opener\n"
        "    from ..judge import TrajectoryJudge\n"
        "    from . import config\n"
    )
    imports = list(imports_of(source, "memora_rl.env.oracle", known=frozenset({"memora_rl.env.config"})))
    assert [item.target for item in imports] == [
        "memora_rl.core.parse",
        "memora_rl.policy.chat",
        "memora_rl.judge",
        "memora_rl.env.config",
    ]
    problems = layer_violations("memora_rl.env.oracle", imports)
    assert len(problems) == 1
    assert problems[0].startswith("memora_rl.env.oracle (line 3, `env`, layer 5) imports memora_rl.policy.chat")


def test_a_sibling_import_and_a_cycle_are_reported() -> None:
    """Units of one layer may not import each other; a module cycle is found and spelled out."""
    sideways = layer_violations("memora_rl.evaluation.offline", [Import("memora_rl.training.run", 7)])
    assert sideways and "`training`, layer 7" in sideways[0]
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert import_cycle(graph) == ["a", "b", "c", "a"]
    assert import_cycle({"a": {"b"}, "b": set()}) is None
