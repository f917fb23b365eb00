"""A converted model's verdict (kuiper_core/formats/conversion_check.py) as the pages show it:
a line under every page's model line (the sidebar), in the error colour when the converted file
disagrees with the original, with a link to the first departing operand in the Forward stepper;
and a box on Home with every line of it."""

from __future__ import annotations

from typing import Any

import streamlit as st

from kuiper_core.formats.conversion_check import ConversionCheck

FORWARD = "pages/5_forward.py"
PENDING = "fw_pending"  # the Forward page's ("name", operator): applied when it opens (5_forward.py)


def verdict_of(model: Any) -> ConversionCheck | None:
    opened = getattr(model, "opened", None)
    return getattr(opened, "check", None)


def model_line(model: Any) -> None:
    """Under the sidebar's model line: the verdict in one line (nothing for a model not converted)."""
    check = verdict_of(model)
    if check is None:
        return
    if check.disagrees:
        st.error(f"**{check.headline()}**", icon="⚠️")
        if check.first is not None and model.ok:
            st.page_link(
                FORWARD,
                label=f"Step to {check.first.operator}, where it first departs",
                query_params={"step": str(check.first.index + 1)},
            )
    else:
        st.caption(check.headline())


def home_box(model: Any) -> None:
    """On Home: the verdict with its details; on a disagreement, a button to the Forward stepper
    at the first departing operator."""
    check = verdict_of(model)
    if check is None:
        return
    if check.disagrees:
        st.error(
            f"**The converted model does not compute what the original does.** {check.headline()}. "
            "Its answers here are the converted file's, not the original model's.",
            icon="⚠️",
        )
        st.code(check.text(), language=None)
        if (
            check.first is not None
            and model.ok
            and st.button(
                f"Step through Forward to {check.first.operator}",
                key="home_verdict_to_forward",
                help="Open the Forward stepper at the first operand that departs from the original's value",
            )
        ):
            st.session_state[PENDING] = ("name", check.first.operator)
            st.switch_page(FORWARD)
    elif check.agrees:
        st.success(check.headline())
        with st.expander("How the conversion was checked"):
            st.code(check.text(), language=None)
    else:
        st.info(check.headline())
