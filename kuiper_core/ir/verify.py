"""Expected-error files, like MLIR's `-split-input-file -verify-diagnostics`.

A file holds cases separated by a line `// -----`. A case expects the error a comment
announces, or parses cleanly when it announces none:

    // expected-error@+1:27 {{use of undefined value %7}}
      (%2) = "nn.ReLU" @r (%7) : …

`@+N` / `@-N` counts lines from the comment (no `@`: the comment's own line), `:COL` (optional)
is the 1-based column; the text in `{{…}}` must occur in the message. Line numbers are the
file's: each case is parsed with the lines before it blanked out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import KuiperError, ParseError
from .load import parse_module

SEPARATOR = re.compile(r"^//\s*-----\s*$", re.M)
_EXPECT = re.compile(r"//\s*expected-error(?:@([+-]\d+))?(?::(\d+))?\s*\{\{(.*?)\}\}")


@dataclass
class Expectation:
    line: int
    column: int | None
    message: str


@dataclass
class CaseResult:
    first_line: int  # where the case starts in the file
    expected: Expectation | None
    error: KuiperError | None

    @property
    def problem(self) -> str | None:
        """What is wrong with this case's outcome, or None."""
        err, exp = self.error, self.expected
        if exp is None:
            return None if err is None else f"unexpected error: {err}"
        want = f"{exp.line}:{exp.column}" if exp.column is not None else f"line {exp.line}"
        if err is None:
            return f"expected an error at {want} {{{{{exp.message}}}}}, but the text parsed"
        if not isinstance(err, ParseError):
            return f"expected a located error at {want}, got {type(err).__name__}: {err}"
        if (err.line, exp.column if exp.column is None else err.column) != (exp.line, exp.column):
            return f"expected the error at {want}, got {err.line}:{err.column}: {err.message}"
        if exp.message not in err.message:
            return f"expected {{{{{exp.message}}}}} in the message, got: {err.message}"
        return None


def split_cases(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each case."""
    cases, start, line = [], 0, 1
    for m in SEPARATOR.finditer(text):
        cases.append((line, text[start : m.start()]))
        line += text.count("\n", start, m.end())
        start = m.end()
    cases.append((line, text[start:]))
    return cases


def expectations(case: str, first_line: int) -> list[Expectation]:
    found = []
    for i, line_text in enumerate(case.split("\n")):
        for m in _EXPECT.finditer(line_text):
            line = first_line + i + (int(m.group(1)) if m.group(1) else 0)
            found.append(Expectation(line, int(m.group(2)) if m.group(2) else None, m.group(3)))
    return found


def verify_text(text: str, path: str | None = None) -> list[CaseResult]:
    results = []
    for first_line, case in split_cases(text):
        expected = expectations(case, first_line)
        if len(expected) > 1:
            raise ValueError(f"{path}:{first_line}: a case may expect one error (the parser stops at the first)")
        try:
            parse_module("\n" * (first_line - 1) + case, path)
            error = None
        except KuiperError as e:
            error = e
        results.append(CaseResult(first_line, expected[0] if expected else None, error))
    return results


def verify_file(path: str | Path) -> list[CaseResult]:
    return verify_text(Path(path).read_text(encoding="utf-8"), str(path))
