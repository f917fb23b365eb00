"""From IR text to a runnable graph: parse, bind the weights, build — every error located.

Weights are looked up as the .bin names them, `opname.attrname`; one that is missing or of
another size than the text declares is an error at its `@name:(pnnx.weight)<…>`.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping

import numpy as np

from ..errors import ModelError, ParseError, WeightError
from ..files import decode_utf8, read_regular
from ..limits import check_text
from ..limits import current as current_limits
from ..graph import format_shape, numpy_dtype
from .dialects import DialectRegistry
from .lexer import Span
from .parser import IRModule, Parser
from .validate import check_layers, locate_model_error, located_type

SUFFIX = ".kir"


def parse_module(
    text: str,
    path: str | None = None,
    *,
    registry: DialectRegistry | None = None,
    allow_unregistered: bool = False,
    check: bool = True,
) -> IRModule:
    """Parse IR text; check=True also builds each layer to check its attributes."""
    check_text(text, path)  # file and line length limits, before the lexer sees it
    module = Parser(text, path, registry=registry, allow_unregistered=allow_unregistered).parse_module()
    if check:
        check_layers(module)
    return module


def read_text(path: str | Path) -> str:
    """A text file's content, or a located error for unreadable or non-UTF-8 bytes (only
    regular files, at most max_param_bytes: a FIFO or /dev/zero would never end)."""
    where = str(path)
    raw = read_regular(
        path,
        lambda why: ParseError(f"cannot read {where}: {why}", path=where, severity="error"),
        max_bytes=current_limits().max_param_bytes,
        limit="max_param_bytes",
    )
    return decode_utf8(raw, where, severity="error")


def read_module(
    path: str | Path,
    *,
    registry: DialectRegistry | None = None,
    allow_unregistered: bool = False,
    check: bool = True,
) -> IRModule:
    """A `.kir` file, parsed (keyword arguments as for parse_module)."""
    text = read_text(path)
    return parse_module(text, str(path), registry=registry, allow_unregistered=allow_unregistered, check=check)


# -- weights -------------------------------------------------------------------------------------------
def _weight_span(module: IRModule, index: int, key: str) -> Span:
    return module.locations[index].key_span("@" + key) or module.locations[index].name_span


def bind_arrays(module: IRModule, arrays: Mapping[str, np.ndarray]) -> None:
    """Weights from arrays keyed `opname.attrname` (e.g. another graph's); located errors."""
    for index, op in enumerate(module.graph.operators):
        for key, attr in op.attrs.items():
            entry = f"{op.name}.{key}"
            data = arrays.get(entry)
            span = _weight_span(module, index, key)
            if data is None:
                raise located_type(WeightError)(
                    module,
                    span,
                    f"weight '{entry}' is referenced but there is no such weight",
                    operator=op.name,
                    op_type=op.type,
                )
            want = numpy_dtype(attr.dtype)
            if tuple(data.shape) != tuple(attr.shape) or data.dtype != want:
                have = format_shape(data.shape, str(data.dtype))
                raise located_type(WeightError)(
                    module,
                    span,
                    f"weight '{entry}' is {have}, the text declares {format_shape(attr.shape, attr.dtype)}",
                    operator=op.name,
                    op_type=op.type,
                )
            attr.data = data


def bind_bin(module: IRModule, bin_path: str | Path | bytes) -> None:
    """Weights from a PNNX .bin (read by the .bin reader); its errors located in the text."""
    from ..pnnx import load_weights

    try:
        load_weights(module.graph, bin_path)
    except WeightError as e:
        index = module.op_index(e.operator) if e.operator is not None else None
        if index is None:  # the file itself: point at the first weight the text references
            index = next((i for i, op in enumerate(module.graph.operators) if op.attrs), None)
            if index is None:
                raise
            key = next(iter(module.graph.operators[index].attrs))
            raise located_type(type(e))(
                module, _weight_span(module, index, key), e.message, operator=None, op_type=None
            ) from e
        op = module.graph.operators[index]
        key = next((k for k in op.attrs if f"@{k}" in e.message or f".{k}'" in e.message), next(iter(op.attrs)))
        raise located_type(type(e))(
            module, _weight_span(module, index, key), e.message, operator=op.name, op_type=op.type
        ) from e


def default_bin(path: str | Path) -> Path | None:
    """`m.kir` -> the first of `m.bin`, `m.pnnx.bin` that exists."""
    path = Path(path)
    for candidate in (path.with_suffix(".bin"), path.with_suffix(".pnnx.bin")):
        if candidate.exists():
            return candidate
    return None


def build(module: IRModule, algorithm: str = "dfs"):  # -> RuntimeGraph (import kept local)
    """A RuntimeGraph of the module's graph; layer errors point into the text."""
    from ..runtime import RuntimeGraph

    try:
        return RuntimeGraph.from_graph(module.graph).build(algorithm)
    except ModelError as e:
        located = locate_model_error(module, e)
        if located is e:
            raise
        raise located from e


def bind_weights(module: IRModule, path: str | Path | None, bin_path: str | Path | bytes | None = None) -> None:
    """Bind the weights the text references from `bin_path` (a path or bytes; default: the
    sibling .bin of `path`); a located error when there is none."""
    if not any(op.attrs for op in module.graph.operators):
        return
    bin_file = bin_path if bin_path is not None else (default_bin(path) if path is not None else None)
    if bin_file is None:
        first = next(i for i, op in enumerate(module.graph.operators) if op.attrs)
        key = next(iter(module.graph.operators[first].attrs))
        looked = ""
        if path is not None:
            looked = f" (looked for {Path(path).with_suffix('.bin').name}, {Path(path).with_suffix('.pnnx.bin').name})"
        raise located_type(WeightError)(
            module,
            _weight_span(module, first, key),
            f"the text references weights but no .bin was given{looked}: pass --bin",
            operator=None,
            op_type=None,
        )
    bind_bin(module, bin_file)


def load_ir(path: str | Path, bin_path: str | Path | None = None, *, algorithm: str = "dfs"):
    """Read a `.kir`, bind its weights from `bin_path` (default: the sibling .bin) and build."""
    module = read_module(path, check=False)  # the build below checks the layers, with real weights
    bind_weights(module, path, bin_path)
    return build(module, algorithm)
