"""The parts of a "predict the next step" quiz both classroom pages draw.

A quiz's state lives in session state under one key per page: the question on screen, the
verdict of the answer given (None until answered), the score. It starts again when what it
is about (graph, algorithm, expression, question kind) changes. The questions and verdicts
themselves are plain data from kuiper_core.explore (quiz.py, order_quiz.py,
expression_quiz.py); this module only lays them out and keeps the score.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from kuiper_core.explore.links import link_int
from kuiper_core.explore.quiz import Question, Score, Verdict
from kuiper_core.explore.upload_names import md_text
from pages import class_panel, common
from pages.keys import keyboard

MODES = {"walk": "Walk through", "quiz": "Quiz"}  # the pages' two ways: walk through, or predict the next step


def quiz_state(key: str, about: tuple) -> dict[str, Any]:
    """{"about", "index", "verdict", "score"}: fresh when `about` changed. A link's `?q=N`
    opens question N the first time, and its `?score=R-N` the score (the URL carries the
    question on screen and the score: a reload keeps both)."""
    state = st.session_state.get(key)
    if state is None or state.get("about") != about:
        wanted = common.url_number("q", low=1) if state is None else None
        start = wanted - 1 if wanted is not None else 0  # current() keeps it within the questions
        score = _linked_score(common.url_param("score")) if state is None else Score()
        state = {"about": about, "index": start, "verdict": None, "score": score}
        st.session_state[key] = state
    return state


def _linked_score(text: str | None) -> Score:
    """A link's `R-N` (R right of N answered, ASCII digits, R <= N <= MAX_LINKED); else none."""
    right, _, asked = (text or "").partition("-")
    r, n = link_int(right, high=MAX_LINKED), link_int(asked, high=MAX_LINKED)
    return Score(right=r, asked=n) if r is not None and n is not None and r <= n else Score()


MAX_LINKED = 10_000  # answers a link's score may claim


def current(state: dict[str, Any], qs: Sequence[Question]) -> tuple[int, Question, Verdict | None]:
    """The question on screen (its index and itself) and the verdict of its answer, if any."""
    index = min(state["index"], len(qs) - 1)
    score: Score = state["score"]
    common.set_url(q=index + 1, score=f"{score.right}-{score.asked}" if score.asked else None)
    return index, qs[index], state["verdict"]


def answer(state: dict[str, Any], judge: Callable[[Question, str], Verdict], qs: Sequence[Question], pick: str) -> None:
    """Judge `pick` for the question on screen (a second answer to it is not counted)."""
    if state["verdict"] is not None or state["index"] >= len(qs):
        return
    verdict = judge(qs[state["index"]], pick)
    state["verdict"] = verdict
    state["score"].add(verdict)
    class_panel.record_answer(state["about"], state["index"], qs[state["index"]].prompt, verdict.correct)


def next_question(state: dict[str, Any]) -> None:
    state["index"] += 1
    state["verdict"] = None


def restart(state: dict[str, Any]) -> None:
    state.update(index=0, verdict=None, score=Score())


def verdict_box(verdict: Verdict) -> None:
    """Right (green), valid elsewhere (amber), wrong (red), with the whole explanation."""
    box = st.success if verdict.correct else st.warning if verdict.valid_elsewhere else st.error
    box(f"**{verdict.headline}** {verdict.why}" + (f"\n\n{verdict.tie_rule}" if verdict.tie_rule else ""))


def controls(state: dict[str, Any], qs: Sequence[Question], prefix: str) -> None:
    """Score, and the Next question / Start again buttons (→ or PageDown: next question)."""

    def forward() -> None:
        if state["verdict"] is not None and state["index"] + 1 < len(qs):
            next_question(state)

    keyboard(f"{prefix}_keys", {"ArrowRight": forward, "PageDown": forward})
    score: Score = state["score"]
    st.markdown(f"**{score.text()}** · question {min(state['index'] + 1, len(qs))} of {len(qs)}")
    left, right = st.columns(2)
    left.button(
        "Next question",
        key=f"{prefix}_next",
        type="primary",
        width="stretch",
        on_click=next_question,
        args=(state,),
        disabled=state["verdict"] is None or state["index"] + 1 >= len(qs),
    )
    right.button("Start again", key=f"{prefix}_restart", width="stretch", on_click=restart, args=(state,))


QuizSetup = tuple[Callable[[Question, str], Verdict], Sequence[Question], dict[str, Any]]  # judge, questions, state


def presenter_keys(setup: Callable[[], QuizSetup]) -> tuple[Callable[[], None], Callable[[], None]]:
    """The presenter's keys for a quiz: → reveals the engine's answer, then moves to the
    next question; ← goes back. `setup()` gives (judge, questions, state). No score is kept:
    the class answers aloud."""

    def forward() -> None:
        judge, qs, state = setup()
        if state["verdict"] is None and state["index"] < len(qs):
            q = qs[state["index"]]
            state["verdict"] = judge(q, q.answer)
        elif state["index"] + 1 < len(qs):
            next_question(state)

    def back() -> None:
        _, _, state = setup()
        if state["verdict"] is not None:
            state["verdict"] = None
        elif state["index"] > 0:
            state["index"] -= 1

    return forward, back


MAX_PILLS = 120  # more choices than this: a list to pick from (pills would fill the screen)


def choice(label: str, options: Sequence[int], labels: Sequence[str], key: str, on_pick: Callable[[str], None]) -> None:
    """One pick among `options` (labels[option] shows it): pills, or a list when there are many.
    `on_pick(key)` runs as the widget's callback."""
    if len(options) <= MAX_PILLS:
        shown = unique_labels([md_text(label) for label in labels])  # a loaded model's names: no link
        st.pills(label, options, format_func=shown.__getitem__, key=key, on_change=on_pick, args=(key,))
    else:
        st.selectbox(
            label,
            options,
            index=None,
            format_func=labels.__getitem__,
            key=key,
            placeholder=f"one of {len(options):,}…",
            on_change=on_pick,
            args=(key,),
        )


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Labels for pills, made unique by invisible zero-width spaces: a pill's value travels
    as its label, so a second '(' or '@0' would otherwise come back as the first."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        out.append(label + "\u200b" * seen.get(label, 0))
        seen[label] = seen.get(label, 0) + 1
    return out


def finished(state: dict[str, Any], qs: Sequence[Question]) -> bool:
    """After the last question has been answered."""
    return state["index"] >= len(qs) - 1 and state["verdict"] is not None
