"""Every error the engine raises on bad input derives from KuiperError.

Errors say *where* (file:line:col with the source line and a caret for text; the
operator's name for graphs) and *what was expected*, so the CLI and the app can show
them to a person without a traceback.
"""

from __future__ import annotations

from typing import Iterable


class KuiperError(Exception):
    """Base class of every error caused by bad input (files, graphs, tensors)."""


class ParseError(KuiperError):
    """A located error in text: a .param file, an expression, later the textual IR.

    `line` and `column` are 1-based. `source_line` is the text of that line, used to draw
    a caret under the culprit; `length` is how many characters the caret underlines.
    `severity` ("error") switches the head to MLIR's `path:line:col: error: message`
    (the textual IR uses it; .param messages keep their shorter head).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int = 1,
        column: int = 1,
        source_line: str | None = None,
        length: int = 1,
        severity: str | None = None,
    ) -> None:
        self.message = message
        self.severity = severity
        self.path = path
        self.line = line
        self.column = column
        self.source_line = source_line
        self.length = max(1, length)
        super().__init__(self.render())

    @property
    def location(self) -> str:
        where = self.path if self.path is not None else "<input>"
        return f"{where}:{self.line}:{self.column}"

    def caret(self) -> str:
        """The source line and a caret line under the culprit ('' without source)."""
        if self.source_line is None:
            return ""
        # Expand tabs the same way in both lines so the caret stays under the culprit.
        text = self.source_line.rstrip("\n")
        prefix = text[: self.column - 1]
        pad = "".join("\t" if ch == "\t" else " " for ch in prefix)
        return f"{text}\n{pad}{'^' * self.length}"

    def render(self) -> str:
        head = f"{self.location}: {self.severity + ': ' if self.severity else ''}{self.message}"
        caret = self.caret()
        return f"{head}\n{caret}" if caret else head


class ModelError(KuiperError):
    """A graph that is well formed text but wrong as a model; names the operator."""

    def __init__(self, message: str, *, operator: str | None = None, op_type: str | None = None) -> None:
        self.message = message
        self.operator = operator
        self.op_type = op_type
        where = ""
        if operator is not None:
            where = f"operator '{operator}'" + (f" ({op_type})" if op_type else "") + ": "
        super().__init__(where + message)


class WeightError(ModelError):
    """A .bin problem: missing, short, compressed or unreadable entries."""


class UnsupportedOperatorError(ModelError):
    """The model uses operator types that have no layer; lists every one and where."""

    def __init__(self, missing: Iterable[tuple[str, str, int | None]]) -> None:
        # missing: (type, operator name, .param line or None)
        self.missing = list(missing)
        by_type: dict[str, list[str]] = {}
        for op_type, name, line in self.missing:
            where = f"{name} (line {line})" if line else name
            by_type.setdefault(op_type, []).append(where)
        lines = [f"  {t}: {', '.join(names)}" for t, names in sorted(by_type.items())]
        msg = f"{len(by_type)} unsupported operator type(s):\n" + "\n".join(lines)
        super().__init__(msg)


class ShapeError(ModelError):
    """An operator produced a shape or dtype other than its `#` annotation declares.

    `declared` is the annotation as written (`(1,16)f32`), `produced` what the layer made;
    the app marks `operator` in the graph. No result may silently differ from the file.
    """

    def __init__(self, message: str, *, operator: str, op_type: str | None = None,
                 operand: str | None = None, declared: str | None = None, produced: str | None = None) -> None:
        self.operand = operand
        self.declared = declared
        self.produced = produced
        super().__init__(message, operator=operator, op_type=op_type)


class CycleError(ModelError):
    """The graph has a cycle; `cycle` lists the operator names around it."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__("the graph has a cycle: " + " -> ".join(cycle + cycle[:1]))


class InputError(KuiperError):
    """Tensors given to forward() that do not fit the model's inputs."""


class LimitError(KuiperError):
    """Input beyond a safety limit (nesting depth, sizes) that would otherwise hang or crash."""
