"""The runtime's modules form no import cycle and reach into no other module's privates; the
whole package has no import cycle and no package imports one above it (file -> graph ->
runtime -> layers: formats and ir may use the runtime, never the reverse).

Read from the source (ast), imports under `if TYPE_CHECKING:` included: a cycle there is
still a cycle for a reader. A private access is `x._name` where x is not `self` or `cls`
(the object's class is not known to a grep-like check, so any such access counts), or
`from .m import _name`. Dunders (`__array_interface__`) are Python's, not a module's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

RUNTIME = ROOT / "kuiper_core" / "runtime"
PACKAGE = "kuiper_core.runtime"
# Private accesses allowed, as (module, expression): os._exit is Python's own (a forked helper
# ends without running its parent's atexit handlers).
ALLOWED: set[tuple[str, str]] = {("helper_process", "os._exit")}


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(RUNTIME.glob("*.py")) if p.stem != "__init__"}


def _runtime_imports(name: str, tree: ast.Module, modules: set[str]) -> set[str]:
    """The runtime modules `name` imports."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module is None:  # from . import interpreter
                found |= {a.name for a in node.names if a.name in modules}
            elif node.level == 1 and node.module is not None:  # from .program import build
                found.add(node.module.split(".")[0])
            elif node.level == 0 and node.module and node.module.startswith(PACKAGE + "."):
                found.add(node.module[len(PACKAGE) + 1 :].split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {a.name[len(PACKAGE) + 1 :].split(".")[0] for a in node.names if a.name.startswith(PACKAGE + ".")}
    return (found & modules) - {name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return path[path.index(m) :] + [m]
            if m not in state and (found := visit(m)) is not None:
                return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)) is not None:
            return found
    return None


def test_no_import_cycle_in_the_runtime() -> None:
    modules = _modules()
    graph = {name: _runtime_imports(name, tree, set(modules)) for name, tree in modules.items()}
    assert graph["runtime_graph"] and graph["interpreter"], "the check found no imports: is it reading the files?"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_executor_imports_the_facade() -> None:
    modules = _modules()
    importers = [n for n, t in modules.items() if "runtime_graph" in _runtime_imports(n, t, set(modules))]
    assert importers == []


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_reaches_into_another_s_privates() -> None:
    found = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                owner = node.value
                if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                    continue
                expression = ast.unparse(node)
                if (name, expression) not in ALLOWED:
                    found.append(f"{name}.py:{node.lineno}: {expression}")
            elif isinstance(node, ast.ImportFrom) and node.level >= 1:
                found += [f"{name}.py:{node.lineno}: imports {a.name}" for a in node.names if _is_private(a.name)]
    assert found == []


# -- the whole package: data flows file -> graph -> runtime -> layers ---------------------------
# What each package may not import (function-local imports included): formats and ir may use
# the runtime, never the reverse; layers never see the runtime.
UPPER = ("formats", "ir", "passes", "explore", "references", "cli", "cli_models")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "pnnx": ("layers", "runtime", *UPPER),
    "expression": ("layers", "runtime", *UPPER),
    "layers": ("runtime", *UPPER),
    "runtime": UPPER,
}


def _absolute(module: str, level: int, name: str | None) -> str:
    """The absolute module an import in kuiper_core/<module path> names."""
    if level == 0:
        return name or ""
    parts = module.split(".")[:-level]
    return ".".join(parts + ([name] if name else []))


def _package_imports(path: Path) -> set[str]:
    rel = path.relative_to(ROOT).with_suffix("")
    module = ".".join(rel.parts if rel.name != "__init__" else rel.parts)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(module, node.level, node.module)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m.split(".")[1] for m in found if m.startswith("kuiper_core.") and len(m.split(".")) > 1}


@pytest.mark.slow
def test_no_package_imports_a_package_above_it() -> None:
    found = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / "kuiper_core" / package).glob("*.py")):
            bad = _package_imports(path) & set(forbidden)
            found += [f"{path.relative_to(ROOT)} imports kuiper_core.{b}" for b in sorted(bad)]
    assert found == []


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


# Known cycles, listed so that no new one goes in: none (the conversion check that runs the
# framework references lives in references/, and the formats call it as the checker they are given).
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


@pytest.mark.slow
def test_no_import_cycle_in_the_package() -> None:
    """Between kuiper_core's modules (a package is its __init__), function-local imports included;
    imports for annotations only (under `if TYPE_CHECKING:`) are not counted package-wide (the
    runtime's own test above counts them)."""
    files = {_module_name(p): p for p in sorted((ROOT / "kuiper_core").rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        found: set[str] = set()
        tree = ast.parse(path.read_text(), str(path))
        skipped = [
            n
            for n in tree.body
            if isinstance(n, ast.If) and ("__main__" in ast.unparse(n.test) or "TYPE_CHECKING" in ast.unparse(n.test))
        ]
        scripted = {id(n) for m in skipped for n in ast.walk(m)}  # a script's, or annotations' only
        for node in ast.walk(tree):
            if id(node) in scripted:
                continue
            if isinstance(node, ast.ImportFrom):
                base = _absolute(name + (".__init__" if is_package else ""), node.level, node.module)
                targets = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in files] or [base]
                found |= set(targets)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in files and m != name and (name, m) not in KNOWN_CYCLE_EDGES}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
