"""Engine errors as the app shows them: a caret that stays on screen, and "did you mean".

The engine's messages already say where and what was expected; this adds what only a
screen needs: a long source line (a 2,000-character expression, a minified .param line)
is cut to a window around the caret, and an operator type the engine does not know gets
the closest types it does know.
"""

from __future__ import annotations

import difflib

from ..errors import ParseError, UnsupportedOperatorError

EXCERPT_WIDTH = 96  # characters of a source line shown around the caret


def caret_excerpt(error: ParseError, width: int = EXCERPT_WIDTH) -> str:
    """The error as the engine renders it, except that when the caret lies beyond `width`
    characters of a long source line, that line is shown as a window around the caret,
    with '…' where it was cut and the columns shown (the head line stays as it is)."""
    text = error.render()
    if error.source_line is None:
        return text
    line = error.source_line.rstrip("\n")
    col = error.column - 1
    if col + error.length <= width:  # the caret is on screen already
        return text
    lines = text.split("\n")
    at = next((i for i in range(len(lines) - 1) if lines[i] == line), None)
    if at is None:
        return text
    flat = line.replace("\t", " ")
    inner = width - 2
    start = max(0, min(col - inner // 3, len(flat) - inner))
    end = min(len(flat), start + inner)
    head, tail = ("…" if start > 0 else ""), ("…" if end < len(flat) else "")
    caret = " " * (len(head) + col - start) + "^" * max(1, min(error.length, end - col))
    window = [f"{head}{flat[start:end]}{tail}", caret, f"(columns {start + 1}–{end} of a {len(flat):,}-character line)"]
    return "\n".join(lines[:at] + window + lines[at + 2 :])


def type_suggestions(op_type: str, known: list[str], n: int = 3) -> list[str]:
    """Known operator types close to `op_type` (case-insensitive), best first."""
    lower = {k.lower(): k for k in known}
    return [lower[m] for m in difflib.get_close_matches(op_type.lower(), list(lower), n=n, cutoff=0.6)]


def error_text(error: BaseException | str) -> str:
    """What the app prints in its error box (monospace, caret aligned)."""
    if isinstance(error, ParseError):
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

