"""The language server's module graph, read from its source with ast: no cycle (imports under
TYPE_CHECKING and inside functions count: a back-reference is a cycle all the same), the parsers below
the rules, and no private name imported from another module (a module's interface is public)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import fixpoint_server

PACKAGE = Path(fixpoint_server.__file__).parent
ABOVE_PARSE = ("rules", "features", "commands", "app", "language_server", "checker", "watcher", "worker")
"""What the parsers (fixpoint_server.parse) must not import: everything that reads their facts."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> Iterator[tuple[str, str | None]]:
    """(module imported, name imported from it or None) for every import of the file, wherever it is."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None


def _edges() -> dict[str, set[str]]:
    """module -> the server's modules it imports (`from package import module` names the module)."""
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, imported in _imports(path):
            target = f"{module}.{imported}" if f"{module}.{imported}" in MODULES else module
            if target in MODULES and target != name:
                edges[name].add(target)
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph (its modules in order), None when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_back_reference() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_module_of_the_server_imports_itself_back() -> None:
    assert len(MODULES) > 50  # the package was found, not an empty folder
    assert _cycle(_edges()) is None


def test_the_parsers_import_nothing_that_reads_their_facts() -> None:
    edges = _edges()
    upward = {
        (name, target)
        for name in edges
        if name.startswith("fixpoint_server.parse")
        for target in edges[name]
        if target.removeprefix("fixpoint_server.").split(".")[0] in ABOVE_PARSE
    }
    assert upward == set()


def test_no_private_name_is_imported_from_another_module() -> None:
    private = [
        (name, module, imported)
        for name, path in MODULES.items()
        for module, imported in _imports(path)
        if module in MODULES and imported and imported.startswith("_") and not imported.startswith("__")
    ]
    assert private == []
