"""Link numbers (`?step=`, `?q=`) are read as ASCII digits with a bound (issue 35)."""

from __future__ import annotations

import pytest

from kuiper_core.explore.links import MAX_DIGITS, link_int


@pytest.mark.parametrize("value", ["²", "١٢", "５", "-1", "+3", " 4", "4 ", "1e3", "0x10", "", None, "9" * 5000])
def test_not_a_link_number(value: str | None) -> None:
    assert link_int(value) is None


def test_numbers_and_bounds() -> None:
    assert link_int("0") == 0 and link_int("007") == 7
    assert link_int("9" * MAX_DIGITS) == 10**MAX_DIGITS - 1
    assert link_int("9" * (MAX_DIGITS + 1)) is None
    assert link_int("500", high=40) == 40 and link_int("0", low=1) == 1
