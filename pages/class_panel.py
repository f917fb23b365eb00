"""A class on this server (kuiper_core/explore/classes.py): which class this session joined,
and its quiz answers sent there. The Class page opens and shows classes; quiz_panel calls
`record_answer` for every first answer."""

from __future__ import annotations

import streamlit as st

from kuiper_core.errors import LimitError
from kuiper_core.explore.classes import ClassStore, new_student_id, normal_code
from pages import common

JOINED = "kx_class"  # {"code": str, "student": str} once this session joined a class
TEACHING = "kx_class_teacher"  # {"code": str, "teacher": str}: the class this session opened


@st.cache_resource(show_spinner=False)
def store() -> ClassStore:
    """The deployment's classes (one SQLite file in the app's data folder, all processes)."""
    return ClassStore()


def join(code: str | None) -> bool:
    """Join the class `code` (as typed); False when there is no such open class."""
    code = normal_code(code)
    if code is None or not store().exists(code):
        return False
    st.session_state[JOINED] = {"code": code, "student": new_student_id()}
    return True


def joined() -> str | None:
    """The class this session answers for: joined here, or named by the link (`?class=`)."""
    state = st.session_state.get(JOINED)
    if state is None and JOINED + "_tried" not in st.session_state:
        st.session_state[JOINED + "_tried"] = True  # a link is read once per session
        join(common.url_param("class"))
        state = st.session_state.get(JOINED)
    if state is None:
        return None
    common.set_url(**{"class": state["code"]})  # a reload keeps the class
    return state["code"]


def leave() -> None:
    st.session_state.pop(JOINED, None)


def record_answer(about: tuple, index: int, prompt: str, correct: bool) -> None:
    """Count this session's first answer to question `index` of the quiz `about`."""
    code = joined()
    state = st.session_state.get(JOINED)
    if code is None or state is None:
        return
    what = " · ".join(str(a) for a in about if a not in (None, ""))
    try:
        store().record(code, state["student"], f"{what}#{index}", f"{what} · Q{index + 1}: {prompt}", correct)
    except LimitError as e:
        st.toast(f"Your answer was not counted: {e}")
