"""A converted model's verdict as the pages draw it (its wording, tone and Forward step:
kuiper_core/explore/conversion_verdict.py): a line under every page's model line (the sidebar),
a box at the top of every page but Home when the converted file disagrees with the original, and
Home's box with every line; in the error colour on a disagreement, with a link to the Forward step
where it first departs."""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st

from kuiper_core import limits
from kuiper_core.errors import KuiperError
from kuiper_core.explore.conversion_verdict import ERROR, SUCCESS, VerdictView, session_verdict, verdict_view
from kuiper_core.references.conversion_check import checked
from pages import common

FORWARD = "pages/5_forward.py"
PENDING = "fw_pending"  # the Forward page's ("name", operator): applied when it opens (5_forward.py)


def _given_input() -> list[np.ndarray] | None:
    """The session's input when the user gave it (an upload, a picture, a drawing), else None."""
    kind = (st.session_state.get(common.INPUT_KEY) or {}).get("kind")
    held = (st.session_state.get(common.INPUT_ARRAYS_KEY) or {}).get(kind)
    return None if held is None else [held[0]]


def view_of(model: Any) -> VerdictView | None:
    return verdict_view(session_verdict(getattr(model, "opened", None), _given_input()))


def check_input(model: Any, array: np.ndarray) -> None:
    """The user gave a converted model an input: the conversion checked on it once (the
    framework's run, stored with the conversion; later pages and a reload read it)."""
    opened = getattr(model, "opened", None)
    if opened is not None and opened.conversion is not None:
        try:
            with limits.use(common.APP_LIMITS):  # the framework child's memory and time: the app's
                checked(opened, [array])
        except KuiperError:  # (the verdict says why it was not checked; nothing else to stop)
            pass


def _link(view: VerdictView, model: Any) -> None:
    if view.step is not None and model.ok:
        st.page_link(FORWARD, label=view.link_label, query_params={"step": str(view.step)})


def model_line(model: Any) -> None:
    """Under the sidebar's model line: the verdict in one line (nothing for a model not converted)."""
    view = view_of(model)
    if view is None:
        return
    if view.tone == ERROR:
        st.error(f"**{view.line}**", icon="⚠️")
        _link(view, model)
    else:
        st.caption(view.line)


def page_banner(model: Any) -> None:
    """At the top of a page that shows the model (all but Home): a disagreement, where it departs."""
    view = view_of(model)
    if view is not None and view.tone == ERROR:
        st.error(f"**{view.warning}** {view.line}", icon="⚠️")
        _link(view, model)


def home_box(model: Any) -> None:
    """On Home: the verdict with its details; on a disagreement, a button to the Forward stepper
    at the first departing operator."""
    view = view_of(model)
    if view is None:
        return
    if view.tone == ERROR:
        st.error(f"**{view.warning}** {view.line}.", icon="⚠️")
        st.code(view.details, language=None)
        if (
            view.operator is not None
            and model.ok
            and st.button(
                view.button_label,
                key="home_verdict_to_forward",
                help="Open the Forward stepper at the first operand that departs from the original's value",
            )
        ):
            st.session_state[PENDING] = ("name", view.operator)
            st.switch_page(FORWARD)
    elif view.tone == SUCCESS:
        st.success(view.line)
        with st.expander("How the conversion was checked"):
            st.code(view.details, language=None)
    else:
        st.info(view.line)
