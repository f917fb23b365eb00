"""A converted model's verdict (kuiper_core/formats/conversion_check.py) as the pages show it:
a line under every page's model line (the sidebar), in the error colour when the converted file
disagrees with the original, with a link to the first departing operand in the Forward stepper;
and a box on Home with every line of it."""

from __future__ import annotations

from typing import Any

import streamlit as st

from kuiper_core.explore.messages import hide_server_paths
from kuiper_core.explore.upload_names import md_text
from kuiper_core.formats.conversion_check import ConversionCheck

FORWARD = "pages/5_forward.py"
PENDING = "fw_pending"  # the Forward page's ("name", operator): applied when it opens (5_forward.py)


def _headline(check: ConversionCheck) -> str:
    """The headline as Markdown that shows it as written: a framework's message in it quotes the
    model's node names (onnxruntime: `…running Add node. Name:'[Session expired: log in
    again](https://evil.example/login) 7'`, a real link in every page's sidebar) and its build
    paths."""
    return md_text(hide_server_paths(check.headline()), limit=1000)


def verdict_of(model: Any) -> ConversionCheck | None:
    opened = getattr(model, "opened", None)
    return getattr(opened, "check", None)


def model_line(model: Any) -> None:
    """Under the sidebar's model line: the verdict in one line (nothing for a model not converted)."""
    check = verdict_of(model)
    if check is None:
        return
    if check.disagrees:
        st.error(f"**{_headline(check)}**", icon="⚠️")
        if check.first is not None and model.ok:
            st.page_link(
                FORWARD,
                label=f"Step to {md_text(check.first.operator)}, where it first departs",
                query_params={"step": str(check.first.index + 1)},
            )
    else:
        st.caption(_headline(check))


def home_box(model: Any) -> None:
    """On Home: the verdict with its details; on a disagreement, a button to the Forward stepper
    at the first departing operator."""
    check = verdict_of(model)
    if check is None:
        return
    if check.disagrees:
        st.error(
            f"**The converted model does not compute what the original does.** {_headline(check)}. "
            "Its answers here are the converted file's, not the original model's.",
            icon="⚠️",
        )
        st.code(hide_server_paths(check.text()), language=None)
        if (
            check.first is not None
            and model.ok
            and st.button(
                f"Step through Forward to {md_text(check.first.operator)}",
                key="home_verdict_to_forward",
                help="Open the Forward stepper at the first operand that departs from the original's value",
            )
        ):
            st.session_state[PENDING] = ("name", check.first.operator)
            st.switch_page(FORWARD)
    elif check.agrees:
        st.success(_headline(check))
        with st.expander("How the conversion was checked"):
            st.code(hide_server_paths(check.text()), language=None)
    else:
        st.info(_headline(check))
