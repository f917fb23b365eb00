"""AppTest: a hand-made link's numbers never crash a page (issue 35): `?step=²` or 5,000
nines on Forward, Execution order, Expressions and IR, `?q=²` on a quiz, open the page as
if the number were absent; a number past the end opens the last step."""

from __future__ import annotations

import pytest
from apptest_helpers import EXPR, FORWARD, ORDER, app

pytestmark = pytest.mark.slow
IR = "pages/7_ir.py"
BAD = ["²", "9" * 5000, "-3", "1.5"]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize(
    ("page", "query"),
    [
        (ORDER, {"graph": "A small diamond", "algo": "dfs"}),
        (EXPR, {}),
        (FORWARD, {"model": "tiny_mlp"}),
        (IR, {"model": "tiny_mlp"}),
    ],
)
def test_a_bad_step_opens_the_page(page: str, query: dict[str, str], bad: str) -> None:
    app(page=page, query={**query, "step": bad})  # app() asserts no exception


def test_a_bad_question_opens_the_first() -> None:
    for bad in ("²", "9" * 5000):
        at = app(page=ORDER, query={"graph": "A small diamond", "algo": "kahn", "mode": "quiz", "q": bad})
        assert at.query_params["q"] in ("1", ["1"])


def test_a_step_past_the_end_opens_the_last() -> None:
    at = app(page=FORWARD, query={"model": "tiny_mlp", "step": "999999999"})
    total = len(at.session_state["kx_forward"].stepper.runtime.order)
    assert at.query_params["step"] in (str(total), [str(total)])


PHISH = "x[Session expired: log in again](https://evil.example/login)"


@pytest.mark.parametrize(
    ("page", "query"),
    [
        (ORDER, {"graph": PHISH, "algo": PHISH, "mode": "quiz", "kind": PHISH, "score": "²-³", "q": "1"}),
        (EXPR, {"op": PHISH, "mode": PHISH, "kind": PHISH, "present": PHISH}),
        (FORWARD, {"model": "tiny_mlp", "refs": PHISH, "input": PHISH, "present": "²"}),
        ("pages/9_class.py", {"class": PHISH}),
        ("pages/2_graph.py", {"model": "tiny_mlp", "op": PHISH}),
    ],
)
def test_link_values_with_markdown_or_unicode_digits_open_the_page_and_repeat_nothing(
    page: str, query: dict[str, str]
) -> None:
    """The other link parameters (?class=, ?kind=, ?score=, ?present=, ?refs=, ?input=, ?op=)
    with a Markdown link or non-ASCII digits: the page opens and no element repeats the link."""
    at = app(page=page, query=query)
    shown = [
        str(getattr(e, "value", "") or getattr(e, "body", ""))
        for kind in ("markdown", "caption", "warning", "error", "info", "success", "subheader", "title")
        for e in getattr(at, kind)
    ]
    assert not [s for s in shown if "evil.example" in s], shown
