"""kuiper_core.explore.messages: carets stay on screen; unknown types get a suggestion."""

from __future__ import annotations

import pytest

from kuiper_core import expression as ex
from kuiper_core.errors import ParseError, UnsupportedOperatorError
from kuiper_core.explore.messages import EXCERPT_WIDTH, caret_excerpt, error_text, type_suggestions


def test_a_long_line_is_cut_around_the_caret() -> None:
    text = "mul(@0," + "add(@1,2.0)," * 60 + "$)"
    with pytest.raises(ParseError) as e:
        ex.parse(text)
    err = e.value
    assert len(err.source_line) > 500
    shown = caret_excerpt(err)
    lines = shown.splitlines()
    excerpt, caret = lines[1], lines[2]
    assert len(excerpt) <= EXCERPT_WIDTH + 2 and excerpt.startswith("…")
    assert excerpt[caret.index("^")] == "$"  # the caret is under the culprit, on screen
    assert f"of a {len(text):,}-character line" in lines[3]


def test_short_lines_and_visible_carets_are_rendered_as_the_engine_does() -> None:
    with pytest.raises(ParseError) as e:
        ex.parse("add(@0,")
    assert caret_excerpt(e.value) == e.value.render() == error_text(e.value)
    with pytest.raises(ParseError) as e:  # a long line, but the caret is near its start
        ex.parse("add(@0,$," + "add(@1,2.0)," * 60 + "1)")
    assert caret_excerpt(e.value) == e.value.render()


def test_unknown_operator_types_get_did_you_mean() -> None:
    known = ["nn.ReLU", "nn.ReLU6", "nn.Conv2d", "F.relu"]
    assert type_suggestions("nn.Relu", known)[0] == "nn.ReLU"
    assert type_suggestions("nn.FancyAct", known) == []
    text = error_text(UnsupportedOperatorError([("nn.Relu", "act", 6), ("nn.Conv2D", "c", 3)]))
    assert "nn.Relu: did you mean nn.ReLU" in text and "nn.Conv2D: did you mean nn.Conv2d" in text
