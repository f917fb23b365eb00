"""Class: a teacher opens a class (a short code, no accounts), students join with it, and the
teacher sees per quiz question how many answered and how many were right, live, with a CSV
export. Nothing personal is stored (kuiper_core/explore/classes.py)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kuiper_core.explore.classes import CLASS_HOURS
from pages import class_panel

st.title("Class")
st.caption(
    "Students join with a short code; their first answer to each quiz question (Execution order, Expressions) "
    f"is counted, anonymously: no names, no accounts. A class closes itself after {CLASS_HOURS:.0f} hours."
)

teaching = st.session_state.get(class_panel.TEACHING)


def _open() -> None:
    code, teacher = class_panel.store().open_class()
    st.session_state[class_panel.TEACHING] = {"code": code, "teacher": teacher}


def _close() -> None:
    t = st.session_state.pop(class_panel.TEACHING, None)
    if t is not None:
        class_panel.store().close_class(t["code"], t["teacher"])


def _join() -> None:
    if not class_panel.join(st.session_state.get("class_code")):
        st.session_state["class_join_failed"] = True


if teaching is not None and class_panel.store().exists(teaching["code"]):
    code = teaching["code"]
    left, right = st.columns([2, 3])
    left.markdown(f"### Class code\n<p class='kx-class-code'>{code}</p>", unsafe_allow_html=True)
    left.caption(f"Students: open this app, go to **Class** and type the code, or open the link `?class={code}`.")
    st.html(
        "<style>.kx-class-code{font:700 4.2rem/1 'Source Code Pro',monospace;letter-spacing:0.3rem;"
        "margin:0.2rem 0 0.6rem}</style>"
    )

    @st.fragment(run_every=3.0)
    def _results() -> None:
        """Live: every 3 s from the shared store (answers given in any of the server's processes)."""
        results = class_panel.store().results(code)
        st.markdown(f"**{class_panel.store().students(code)} students have answered** · {len(results)} questions")
        if not results:
            st.info("No answers yet. Students answer on the quiz of Execution order or Expressions.")
            return
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "question": r.label,
                        "answered": r.answered,
                        "right": r.right,
                        "right (%)": round(100 * r.right / r.answered),
                    }
                    for r in results
                ]
            ),
            hide_index=True,
            width="stretch",
            column_config={"right (%)": st.column_config.ProgressColumn(min_value=0, max_value=100, format="%d %%")},
        )
        st.download_button(
            "Download the results (CSV)",
            class_panel.store().csv(code),
            file_name=f"class-{code}.csv",
            mime="text/csv",
            key="class_csv",
            on_click="ignore",
        )

    with right:
        _results()
    st.button("Close the class (deletes its answers)", key="class_close", on_click=_close)
else:
    if teaching is not None:  # expired or closed elsewhere
        st.session_state.pop(class_panel.TEACHING, None)
    code = class_panel.joined()
    if code is not None:
        st.success(f"You are in class **{code}**: your quiz answers count for it (anonymously).")
        st.button("Leave the class", key="class_leave", on_click=class_panel.leave)
    else:
        st.subheader("Join a class")
        c1, c2 = st.columns([2, 1], vertical_alignment="bottom")
        c1.text_input("Class code", key="class_code", max_chars=12, placeholder="e.g. K7PQX")
        c2.button("Join", key="class_join", type="primary", on_click=_join, width="stretch")
        if st.session_state.pop("class_join_failed", False):
            st.error("No open class has this code (five letters and digits, as the teacher shows it).")
    st.divider()
    st.subheader("Teaching?")
    st.button("Open a class", key="class_open", on_click=_open)
