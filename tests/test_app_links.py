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
