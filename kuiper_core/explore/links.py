"""Reading the numbers of a link's query string (`?step=`, `?q=`): untrusted input.

`str.isdigit()` accepts "²" and other non-ASCII digits that `int()` refuses, and `int()`
refuses more than 4,300 digits, so a hand-made link gave an uncaught ValueError page. A link
number is ASCII digits only, at most MAX_DIGITS of them; anything else is as if it were absent.
"""

from __future__ import annotations

MAX_DIGITS = 9  # no step, question or level of the app comes near 10^9


def link_int(value: str | None, low: int = 0, high: int | None = None) -> int | None:
    """`value` as an int when it is 1..MAX_DIGITS ASCII digits, clamped to [low, high];
    None for anything else (absent, empty, a sign, a space, non-ASCII digits, too long)."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_DIGITS:
        return None
    if not (value.isascii() and value.isdigit()):
        return None
    number = max(low, int(value))
    return number if high is None else min(number, high)
