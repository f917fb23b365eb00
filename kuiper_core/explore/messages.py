"""Engine errors as the app shows them: a caret that stays on screen, and "did you mean".

The engine's messages already say where and what was expected; this adds what only a
screen needs: a long source line (a 2,000-character expression, a minified .param line)
is cut to a window around the caret, and an operator type the engine does not know gets
the closest types it does know.
"""

from __future__ import annotations

import difflib
import re

from ..errors import LimitError, ParseError, UnsupportedOperatorError
from ..children import BACKTRACE_FRAME

EXCERPT_WIDTH = 96  # characters of a source line shown around the caret


def caret_excerpt(error: ParseError | LimitError, width: int = EXCERPT_WIDTH) -> str:
    """The error as the engine renders it, except that when its caret lies beyond `width`
    characters of the shown source line, that line is cut to a window around the caret,
    with '…' where it was cut (the head line stays as it is)."""
    text = error.render()
    lines = text.split("\n")
    at = next((i for i in range(1, len(lines)) if lines[i].strip() and set(lines[i].strip()) == {"^"}), None)
    if at is None:
        return text
    source, carets = lines[at - 1].expandtabs(8), lines[at].expandtabs(8)
    col = len(carets) - len(carets.lstrip())
    n = len(carets.strip())
    if col + n <= width:  # the caret is on screen already
        return text
    inner = width - 2
    start = max(0, min(col - inner // 3, len(source) - inner))
    end = min(len(source), start + inner)
    head, tail = ("…" if start > 0 else ""), ("…" if end < len(source) else "")
    caret = " " * (len(head) + col - start) + "^" * max(1, min(n, end - col))
    full = len((error.source_line or "").rstrip("\r\n"))
    note = f"(column {error.column:,} of a {full:,}-character line)"
    return "\n".join(lines[: at - 1] + [f"{head}{source[start:end]}{tail}", caret, note] + lines[at + 1 :])


def type_suggestions(op_type: str, known: list[str], n: int = 3) -> list[str]:
    """Known operator types close to `op_type` (case-insensitive), best first."""
    lower = {k.lower(): k for k in known}
    return [lower[m] for m in difflib.get_close_matches(op_type.lower(), list(lower), n=n, cutoff=0.6)]


# An absolute path of two or more folders (not inside a word, an expression's `@0/@1` or a
# fraction): the server's install, cache or temp folders in a converter's crash text.
_SERVER_PATH = re.compile(r"(?<![\w.@~:/])/(?:[^\s/:'\"()\[\]{},;<>|`*]+/)+([^\s/:'\"()\[\]{},;<>|`*]*)")


def hide_server_paths(text: str) -> str:
    """`text` with every absolute path cut to its file name (`…/model.cc`) and the frames of a
    C++ backtrace left out (counted): what a page shows of an error or a converter's log never
    tells where the server keeps anything."""
    lines, frames = [], 0
    for line in [*text.split("\n"), None]:  # None: the end, where a last run of frames is said
        if line is not None and BACKTRACE_FRAME.match(line):
            frames += 1
            continue
        if frames:
            lines.append(f"  ({frames} line{'s' * (frames > 1)} of a C++ backtrace left out)")
            frames = 0
        if line is not None:
            lines.append(line)
    return _SERVER_PATH.sub(lambda m: "…/" + m.group(1), "\n".join(lines))


def error_text(error: BaseException | str) -> str:
    """What the app prints in its error box (monospace, caret aligned), server paths hidden
    (in the message: a quoted source line is the user's own, and its caret stays aligned)."""
    text = _error_text(error)
    if isinstance(error, (ParseError, LimitError)):
        head, sep, rest = text.partition("\n")
        return hide_server_paths(head) + sep + rest
    return hide_server_paths(text)


def _error_text(error: BaseException | str) -> str:
    if isinstance(error, (ParseError, LimitError)):
        return caret_excerpt(error)
    text = str(error)
    if isinstance(error, UnsupportedOperatorError):
        from ..layers.registry import supported_types

        known = supported_types()
        hints = []
        for op_type in sorted({t for t, _, _ in error.missing}):
            near = type_suggestions(op_type, known)
            if near:
                hints.append(f"  {op_type}: did you mean {' or '.join(near)}?")
        if hints:
            text += "\n" + "\n".join(hints)
    return text
