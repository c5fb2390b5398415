"""The modules of `gpupool.policy` import one another without a cycle (issue 31).

Data types sit at the bottom (reasons, status, snapshot, request), the pass above them, and
the words (policy/render.py) above the types they render: nothing imports upward. Every import
counts, wherever it is written: at the top of a module, under `if TYPE_CHECKING:`, or inside a
function, since a cycle closed by a local or type-only import is still a cycle of meaning.
The modules are parsed with `ast`: nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpupool.policy

PACKAGE = "gpupool.policy"
ROOT = Path(gpupool.policy.__file__).resolve().parent


def modules(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Every module under `root` by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def imported(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> dict[str, int]:
    """The modules of `known` that `tree` imports, anywhere in it, each with its first line.
    `from a import b` names module `a.b` when that is a module, else `a`; relative imports are
    resolved against `module`."""
    here = module if is_package else module.rpartition(".")[0]
    out: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        while name and name not in known:  # a name inside a module: the module
            name = name.rpartition(".")[0]
        if name and name != module:
            out.setdefault(name, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in known else base, node.lineno)
    return out


def graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, dict[str, int]]:
    """Module -> the modules of the package it imports (-> the line of the first import)."""
    found = modules(root, package)
    known = set(found)
    return {
        name: imported(
            ast.parse(path.read_text(encoding="utf-8")), name, path.stem == "__init__", known
        )
        for name, path in found.items()
    }


def find_cycle(edges: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle as the modules along it, the first repeated at the end; None: acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(edges.get(m, {})):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state:
                cycle = visit(n)
                if cycle is not None:
                    return cycle
        path.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            cycle = visit(m)
            if cycle is not None:
                return cycle
    return None


def described(
    cycle: list[str], edges: dict[str, dict[str, int]], root: Path = ROOT, package: str = PACKAGE
) -> str:
    """E.g. "status -> words (status.py:92) -> status (words.py:18)": each step with the file
    and line of the import that makes it."""
    files = modules(root, package)
    steps = [cycle[0].removeprefix(package + ".")]
    for a, b in zip(cycle, cycle[1:]):
        where = files[a].relative_to(root).as_posix()
        steps.append(f"{b.removeprefix(package + '.')} ({where}:{edges[a][b]})")
    return " -> ".join(steps)


def test_policy_modules_import_one_another_without_a_cycle() -> None:
    edges = graph()
    assert len(edges) >= 20, f"only {len(edges)} modules found under {ROOT}"
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle in gpupool.policy: " + described(cycle, edges)


def test_the_graph_sees_type_checking_and_local_imports(tmp_path: Path) -> None:
    """Guard against a checker that passes because it misses imports."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    edges = graph(pkg, "pkg")
    assert edges["pkg.a"] == {"pkg.b": 3} and edges["pkg.b"] == {"pkg.c": 2}
    cycle = find_cycle(edges)
    assert cycle == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    assert described(cycle, edges, pkg, "pkg") == "a -> b (a.py:3) -> c (b.py:2) -> a (c.py:1)"
    (pkg / "c.py").write_text("import os\n")
    assert find_cycle(graph(pkg, "pkg")) is None
