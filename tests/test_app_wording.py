"""What the app says is written for its users: no internal design-source names such as
"seed 004" (say what it is: KuiperInfer's worked example, a TVM Relay walkthrough's model)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

# Every string the app can show comes from pages/, app.py or kuiper_core/explore/.
SOURCES = [
    ROOT / "app.py",
    *sorted((ROOT / "pages").glob("*.py")),
    *sorted((ROOT / "kuiper_core" / "explore").glob("*.py")),
]
INTERNAL = re.compile(r"\bseeds?\s*0\d\d\b|\bseed'?s\b|\bthe seeds?\b", re.I)


def shown_strings(path: Path) -> list[tuple[int, str]]:
    """String literals of a file, docstrings left out (those are for the next engineer)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def test_no_internal_seed_names_in_what_the_app_shows() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line}: {text[:80]!r}"
        for p in SOURCES
        for line, text in shown_strings(p)
        if INTERNAL.search(text)
    ]
    assert not found, "\n".join(found)


def test_the_check_finds_one() -> None:
    assert INTERNAL.search("Conv + BN + ReLU (seed 003's TVM example)") and INTERNAL.search("The seed's simplenet")
    assert not INTERNAL.search("seeded random numbers (seed 0)")
