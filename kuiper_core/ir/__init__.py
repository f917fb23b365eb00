"""The textual IR: any model printed as readable text, and parsed back (docs/ir.md).

    from kuiper_core import ir
    text = ir.print_graph(graph)          # Graph -> text
    graph = ir.parse_ir(text)             # text -> Graph (located errors, layers checked)
    runtime = ir.load_ir("m.kir", "m.pnnx.bin")  # text + weights -> a built RuntimeGraph

Modules: `lexer` (tokens with spans), `parser` (recursive descent, semantic checks),
`printer`, `dialects` (the registry and its print/parse hooks), `types` (tensor type),
`validate` (layers check their attributes, errors located), `load` (weights and build),
`verify` (MLIR-style expected-error files).
"""

from __future__ import annotations

from ..graph import Graph
from .dialects import Dialect, DialectRegistry, OpsDialect, PnnxDialect, default_registry
from .lexer import Kind, Lexer, Source, Span, Token, tokenize
from .load import SUFFIX, bind_arrays, bind_bin, bind_weights, build, load_ir, parse_module, read_module
from .parser import IRModule, OpLocation, Parser
from .printer import print_attribute, print_graph
from .types import ANY, TensorType
from .validate import IRError


def parse_ir(
    text: str,
    path: str | None = None,
    *,
    registry: DialectRegistry | None = None,
    allow_unregistered: bool = False,
    check: bool = True,
) -> Graph:
    """IR text -> Graph (weights by shape and dtype only; bind them with `bind_*`); keyword
    arguments as for parse_module."""
    return parse_module(text, path, registry=registry, allow_unregistered=allow_unregistered, check=check).graph


__all__ = [
    "print_graph",
    "print_attribute",
    "parse_ir",
    "parse_module",
    "read_module",
    "load_ir",
    "bind_arrays",
    "bind_bin",
    "bind_weights",
    "build",
    "IRModule",
    "OpLocation",
    "IRError",
    "Parser",
    "Lexer",
    "Source",
    "Span",
    "Token",
    "Kind",
    "tokenize",
    "Dialect",
    "OpsDialect",
    "PnnxDialect",
    "DialectRegistry",
    "default_registry",
    "TensorType",
    "ANY",
    "SUFFIX",
]
