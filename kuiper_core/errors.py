"""Every error the engine raises on bad input derives from KuiperError.

Errors say *where* (file:line:col with the source line and a caret for text; the
operator's name for graphs) and *what was expected*, so the CLI and the app can show
them to a person without a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable

# A located error shows a source line of up to EXCERPT_WHOLE characters whole; a longer one
# is cut to EXCERPT_CONTEXT characters on each side of the culprit (an error on a 15 MB
# line must not echo the whole line).
EXCERPT_WHOLE = 1000
EXCERPT_CONTEXT = 100
EXCERPT_MAX_CARET = 80
# Messages quote the values they refuse; a hostile value may be megabytes long.
MAX_MESSAGE = 2000


class KuiperError(Exception):
    """Base class of every error caused by bad input (files, graphs, tensors)."""


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text`, or its start and end around '… (N characters cut) …' when longer than `limit`."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}… ({len(text) - 2 * keep:,} characters cut) …{text[-keep:]}"


def short(text: str, limit: int = 40) -> str:
    """A token quoted in a message: its start and '…' when longer than `limit` (the caret
    excerpt shows where it is)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def excerpt(source_line: str | None, column: int, length: int = 1) -> str:
    """The source line (cut to a window around `column` when long, with '…' where cut) and
    a caret line under `length` characters from `column` (1-based). '' without a source."""
    if source_line is None:
        return ""
    text = source_line.rstrip("\r\n")
    start = max(0, column - 1)
    length = max(1, length)
    lo, hi = 0, len(text)
    if len(text) > EXCERPT_WHOLE:
        lo = max(0, start - EXCERPT_CONTEXT)
        hi = min(len(text), start + min(length, EXCERPT_MAX_CARET) + EXCERPT_CONTEXT)
    shown = ("…" if lo > 0 else "") + text[lo:hi] + ("…" if hi < len(text) else "")
    prefix = ("…" if lo > 0 else "") + text[lo:start]
    # Expand tabs the same way in both lines so the caret stays under the culprit.
    pad = "".join("\t" if ch == "\t" else " " for ch in prefix)
    carets = min(length, max(1, hi - start), EXCERPT_MAX_CARET)
    return f"{shown}\n{pad}{'^' * carets}"


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
        self.message = clip(message)
        self.severity = severity
        self.path = path
        self.line = line
        self.column = column
        self.source_line = source_line
        self.length = max(1, length)
        # Not super(): a located ModelError (ir/validate.py) has ModelError's __init__ next.
        KuiperError.__init__(self, self.render())

    @property
    def location(self) -> str:
        where = self.path if self.path is not None else "<input>"
        return f"{where}:{self.line}:{self.column}"

    def caret(self) -> str:
        """The source line and a caret line under the culprit ('' without source)."""
        return excerpt(self.source_line, self.column, self.length)

    def render(self) -> str:
        head = f"{self.location}: {self.severity + ': ' if self.severity else ''}{self.message}"
        caret = self.caret()
        return f"{head}\n{caret}" if caret else head


class ModelError(KuiperError):
    """A graph that is well formed text but wrong as a model; names the operator."""

    def __init__(self, message: str, *, operator: str | None = None, op_type: str | None = None) -> None:
        message = clip(message)
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

    def __init__(self, missing: Iterable[tuple[str, str, int | None]], note: str = "") -> None:
        # missing: (type, operator name, .param line or None); note: a last line (what to do)
        self.missing = list(missing)
        by_type: dict[str, list[str]] = {}
        for op_type, name, line in self.missing:
            where = f"{name} (line {line})" if line else name
            by_type.setdefault(op_type, []).append(where)
        lines = [f"  {t}: {', '.join(names)}" for t, names in sorted(by_type.items())]
        msg = f"{len(by_type)} unsupported operator type(s):\n" + "\n".join(lines) + (f"\n{note}" if note else "")
        super().__init__(msg)


class ShapeError(ModelError):
    """An operator produced a shape or dtype other than its `#` annotation declares.

    `declared` is the annotation as written (`(1,16)f32`), `produced` what the layer made;
    the app marks `operator` in the graph. No result may silently differ from the file.
    """

    def __init__(
        self,
        message: str,
        *,
        operator: str,
        op_type: str | None = None,
        operand: str | None = None,
        declared: str | None = None,
        produced: str | None = None,
    ) -> None:
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

    def __init__(self, message: str) -> None:
        super().__init__(clip(message))


class LimitError(KuiperError):
    """Input beyond a safety limit (see kuiper_core.limits and docs/limits.md) that would
    otherwise exhaust memory or time. Raised before anything big is allocated.

    `limit` names the `Limits` field, `maximum` its value, `value` what the input asked
    for (when known). Text limits carry a location like ParseError (`path`, `line`,
    `column`, `source_line`); graph limits the `operator` and its `op_type`.
    """

    def __init__(
        self,
        message: str,
        *,
        limit: str,
        maximum: int,
        value: int | None = None,
        path: str | None = None,
        line: int | None = None,
        column: int = 1,
        source_line: str | None = None,
        length: int = 1,
        operator: str | None = None,
        op_type: str | None = None,
    ) -> None:
        self.message = clip(message)
        self.limit = limit
        self.maximum = maximum
        self.value = value
        self.path = path
        self.line = line
        self.column = column
        self.source_line = source_line
        self.length = max(1, length)
        self.operator = operator
        self.op_type = op_type
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.path is not None or self.line is not None:
            where = (self.path or "<input>") + (f":{self.line}:{self.column}" if self.line is not None else "") + ": "
        if self.operator is not None:
            where += f"operator '{self.operator}'" + (f" ({self.op_type})" if self.op_type else "") + ": "
        head = f"{where}{self.message} (limit {self.limit} = {self.maximum:,})"
        caret = excerpt(self.source_line, self.column, self.length) if self.line is not None else ""
        return f"{head}\n{caret}" if caret else head

    def at_operator(self, operator: str, op_type: str | None) -> LimitError:
        """The same error naming the operator it happened in (the runtime adds it)."""
        if self.operator is not None:
            return self
        return LimitError(
            self.message, limit=self.limit, maximum=self.maximum, value=self.value, operator=operator, op_type=op_type
        )


class ConversionError(KuiperError):
    """The `pnnx` converter could not turn a model file (.onnx, TorchScript .pt) into PNNX.

    The message quotes the converter's own last lines; `log` holds all it printed and
    `exit_code` how it ended (None: it did not run, or was stopped at its time limit)."""

    def __init__(self, message: str, *, log: str = "", exit_code: int | None = None) -> None:
        self.message = clip(message)
        self.log = log
        self.exit_code = exit_code
        super().__init__(self.message)


class ConversionDisagreement(ConversionError):
    """A converted model computes something else than the original in its framework
    (references/conversion_check.py): `kuiper run` refuses it unless told to accept it."""


class ConverterNotFoundError(ConversionError):
    """No `pnnx` converter binary on this machine: the message says how to install one."""
