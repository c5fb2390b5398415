"""Layering: a lower layer must never import a higher one.

Every `src/gpupool/**/*.py` is parsed with `ast` (so nothing is imported or run): `import x`,
`from x import y`, relative imports, imports inside functions or `if TYPE_CHECKING:`, and
`importlib.import_module("...")` / `__import__("...")` with a literal name all count.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# Which gpupool packages each package may import (besides itself). Edit this map, not the
# checker, when the architecture changes.
ALLOWED: dict[str, frozenset[str]] = {
    "core": frozenset(),  # standard library only
    "spec": frozenset({"core"}),
    "policy": frozenset({"core"}),
    "inventory": frozenset({"core"}),
    "store": frozenset({"core"}),
    "executor": frozenset({"core"}),
    "backends": frozenset({"core"}),  # Slurm, Ray, Kubernetes: the executor contract again
    "monitor": frozenset({"core", "inventory"}),
    # The scheduler's runtime: events, state, passes, launching; one seam outward (Engine).
    "engine": frozenset({"core", "policy", "spec", "inventory", "store", "executor"}),
    # The use cases the API and in-process callers use; they drive the engine by its seam.
    "service": frozenset(
        {"core", "policy", "spec", "inventory", "store", "executor", "engine", "monitor"}
    ),
    # HTTP only: requests in, service calls, JSON out. Never the engine, store or executor.
    "api": frozenset(
        {
            "core",
            "policy",
            "spec",
            "service",
            "hwbench",  # a saved result is read with hwbench.result (stdlib) before it is kept
        }
    ),
    # The composition root and lifecycle: the one place that makes and wires everything.
    "daemon": frozenset(
        {
            "core",
            "policy",
            "spec",
            "inventory",
            "store",
            "executor",
            "backends",
            "monitor",
            "engine",
            "service",
            "api",
        }
    ),
    "client": frozenset({"core", "spec"}),
    "sdk": frozenset({"core", "spec", "client"}),  # the Python SDK: a layer over the client
    "cli": frozenset(
        {"core", "spec", "client", "inventory", "policy", "daemon", "api", "sim", "plan", "hwbench"}
    ),
    "sim": frozenset({"core", "policy", "spec"}),
    "plan": frozenset({"core"}),
    "hwbench": frozenset({"core", "plan"}),  # hardware benchmarks (+ torch, lazily)
}
# Top-level modules that may import anything.
UNRESTRICTED = frozenset({"__init__", "__main__"})
# Layers that may import only the standard library and these gpupool packages.
STDLIB_ONLY: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "policy": frozenset({"core", "policy"}),
}

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "gpupool"


@dataclass(frozen=True)
class Import:
    line: int
    target: str  # absolute dotted module name


@dataclass(frozen=True)
class Violation:
    where: str  # file:line
    target: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: imports {self.target} ({self.why})"


def module_of(path: Path, src: Path = SRC) -> tuple[str, bool]:
    """('gpupool.policy.decide', False) for src/gpupool/policy/decide.py; True for packages."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def find_imports(source: str, module: str, is_package: bool = False) -> list[Import]:
    """Every module `source` (the text of `module`) imports, resolved to absolute names."""
    found: list[Import] = []
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package[: len(package) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if node.module is None or base == "gpupool":
                # `from gpupool import api`, `from . import x`: the names are modules, except
                # dunder attributes (`from gpupool import __version__` imports `gpupool`).
                found += [
                    Import(node.lineno, base if _is_dunder(alias.name) else f"{base}.{alias.name}")
                    for alias in node.names
                ]
            else:
                found.append(Import(node.lineno, base))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if (
                name in ("import_module", "__import__")
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
                and not arg.value.startswith(".")
            ):
                found.append(Import(node.lineno, arg.value))
    return found


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def layer_of(module: str) -> str | None:
    """The gpupool package a module belongs to; None outside gpupool; '' for gpupool itself."""
    parts = module.split(".")
    if parts[0] != "gpupool":
        return None
    return parts[1] if len(parts) > 1 else ""


def check_source(
    source: str, module: str, is_package: bool = False, where: str = ""
) -> list[Violation]:
    where = where or module
    layer = layer_of(module)
    if layer in UNRESTRICTED or (layer == "" and is_package):
        return []
    if layer not in ALLOWED:
        return [Violation(where, "-", f"package {layer!r} is not in the layer map")]
    out: list[Violation] = []
    for imp in find_imports(source, module, is_package):
        target = layer_of(imp.target)
        at = f"{where}:{imp.line}"
        if layer in STDLIB_ONLY:
            top = imp.target.split(".")[0]
            if target is None and top not in sys.stdlib_module_names:
                out.append(
                    Violation(at, imp.target, f"{layer} may import only the standard library")
                )
                continue
        if target is None or target == layer:
            continue
        if target == "":
            # `import gpupool` runs only gpupool/__init__.py, which already ran before any
            # gpupool module was imported: no new dependency, except for the stdlib-only layers.
            if layer in STDLIB_ONLY:
                out.append(Violation(at, imp.target, f"{layer} may import only gpupool.core"))
            continue
        if target not in ALLOWED[layer]:
            allowed = ", ".join(sorted(ALLOWED[layer])) or "nothing in gpupool"
            out.append(Violation(at, imp.target, f"{layer} may import only: {allowed}"))
    return out


def check_tree(
    package_dir: Path = PACKAGE, root: Path | None = None
) -> tuple[list[Violation], int]:
    """All violations under `package_dir` (named relative to `root`, by default the repository
    root), and how many files were checked."""
    root = root or package_dir.parent.parent
    files = sorted(package_dir.rglob("*.py"))
    out: list[Violation] = []
    for path in files:
        module, is_package = module_of(path, package_dir.parent)
        where = str(path.relative_to(root))
        out += check_source(path.read_text(encoding="utf-8"), module, is_package, where)
    return out, len(files)


# --- the real tree ---------------------------------------------------------------------------


def test_no_layer_imports_a_higher_one() -> None:
    violations, checked = check_tree()
    assert checked >= 10, f"only {checked} files found under {PACKAGE}"
    assert not violations, "layering violations:\n" + "\n".join(f"  {v}" for v in violations)


def test_the_checker_sees_the_real_imports() -> None:
    """Guard against a checker that passes because it finds nothing."""
    one_pass = PACKAGE / "policy" / "scheduling_pass.py"
    imports = find_imports(one_pass.read_text(encoding="utf-8"), *module_of(one_pass))
    targets = {i.target for i in imports}
    assert "gpupool.core.job" in targets
    assert "gpupool.policy.placement" in targets
    assert "gpupool.policy.wide_jobs" in targets  # imported inside a function: seen too


# --- the checker itself catches violations -----------------------------------------------------

BAD_CORE = """\
import os
from dataclasses import dataclass

from gpupool.engine import loop


def later():
    import gpupool.api.app
    from ..store import db
    return __import__("importlib").import_module("gpupool.cli.main")
"""


def test_checker_reports_each_violation_with_line_and_target() -> None:
    found = [str(v) for v in check_source(BAD_CORE, "gpupool.core.thing", where="core/thing.py")]
    assert found == [
        "core/thing.py:4: imports gpupool.engine (core may import only: nothing in gpupool)",
        "core/thing.py:8: imports gpupool.api.app (core may import only: nothing in gpupool)",
        "core/thing.py:9: imports gpupool.store (core may import only: nothing in gpupool)",
        "core/thing.py:10: imports gpupool.cli.main (core may import only: nothing in gpupool)",
    ]


def test_checker_accepts_allowed_imports() -> None:
    source = (
        "from __future__ import annotations\n"
        "import itertools\n"
        "from gpupool.core.job import Resources\n"
        "from . import placement\n"
        "from .status import Code\n"
        "from ..core import units\n"
    )
    assert check_source(source, "gpupool.policy.decide") == []
    assert check_source("from gpupool.policy import decide\n", "gpupool.engine.loop") == []
    assert check_source("import gpupool.monitor\n", "gpupool.cli.main") != []  # cli may not
    assert check_source("from gpupool import monitor\n", "gpupool.daemon.run") == []
    assert check_source("from gpupool import engine\n", "gpupool.api.app") != []  # HTTP only
    assert check_source("import gpupool.cli\n", "gpupool.__main__") == []
    # gpupool/__init__.py has run before any gpupool module anyway: no new dependency.
    assert check_source("from gpupool import __version__\n", "gpupool.api.app") == []


def test_relative_imports_from_a_package_init_resolve_against_the_package() -> None:
    got = find_imports(
        "from .decide import decide\nfrom .. import engine\n", "gpupool.policy", True
    )
    assert [i.target for i in got] == ["gpupool.policy.decide", "gpupool.engine"]
    assert [v.target for v in check_source("from .. import engine\n", "gpupool.policy", True)] == [
        "gpupool.engine"
    ]


def test_stdlib_only_layers_reject_third_party_packages() -> None:
    source = (
        "import json\nimport numpy as np\nfrom yaml import safe_load\n"
        "from gpupool import __version__\n"
    )
    assert [v.target for v in check_source(source, "gpupool.policy.x")] == [
        "numpy",
        "yaml",
        "gpupool",
    ]
    assert [v.target for v in check_source(source, "gpupool.core.x")] == [
        "numpy",
        "yaml",
        "gpupool",
    ]
    # Other layers may use third-party packages.
    assert check_source(source, "gpupool.store.db") == []


def test_a_package_missing_from_the_map_is_reported() -> None:
    assert [v.why for v in check_source("import os\n", "gpupool.extras.x")] == [
        "package 'extras' is not in the layer map"
    ]


def test_check_tree_on_a_synthetic_package(tmp_path: Path) -> None:
    pkg = tmp_path / "gpupool"
    (pkg / "core").mkdir(parents=True)
    (pkg / "policy").mkdir()
    (pkg / "__init__.py").write_text("from gpupool.cli import main\n")  # unrestricted
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "units.py").write_text(
        "import re\n\n\ndef f():\n    from gpupool.policy import x\n"
    )
    (pkg / "policy" / "decide.py").write_text("from gpupool.core import units\n")
    violations, checked = check_tree(pkg, root=tmp_path)
    assert checked == 4
    assert [str(v) for v in violations] == [
        "gpupool/core/units.py:5: imports gpupool.policy (core may import only: nothing in gpupool)"
    ]


def test_every_package_is_type_checked() -> None:
    """mypy checks only the folders pyproject.toml lists: a package moved or added and not
    listed there (service/, daemon/ and monitor/ once were not) goes unchecked."""
    import tomllib

    listed = tomllib.loads((SRC.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "mypy"
    ]["files"]
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    unchecked = sorted(p for p in packages if f"src/gpupool/{p}" not in listed)
    assert not unchecked, f"not in [tool.mypy] files of pyproject.toml: {unchecked}"
