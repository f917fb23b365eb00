"""AppTest: the classroom on the Execution order and Expressions pages: the "predict the next
step" quiz (answers, verdicts that say why, ties named by the engine's rule, the score) on the
presets, a typed graph and the loaded model, and the presenter view (large type, the page's
choices hidden, no step buttons, a link that opens it)."""

from __future__ import annotations


import pytest

pytest.importorskip("streamlit")
from apptest_helpers import EXPR, ORDER, app, as_shown, click, no_exception, texts  # noqa: E402


def _boxes(at) -> dict[str, list[str]]:
    return {"error": texts(at.error), "warning": texts(at.warning), "success": texts(at.success)}


def _score(at) -> str:
    return next(m for m in texts(at.markdown) if m.startswith("**Score"))


def _quiz(source: str, algorithm: str, query: dict[str, str] | None = None):
    at = app(page=ORDER, query=query)
    at.selectbox(key="order_source").set_value(source).run()
    at.radio(key="order_algorithm").set_value(algorithm).run()
    at.radio(key="order_mode").set_value("quiz").run()
    no_exception(at)
    return at


def _pick(at, value: str) -> None:
    (pills,) = [p for p in at.pills if p.key.startswith("order_quiz_pick_")]
    pills.set_value([as_shown(o) for o in pills.options].index(value)).run()  # the pills' values are node positions
    no_exception(at)


@pytest.mark.slow
def test_order_quiz_on_kahn_says_why_and_names_the_queue_rule() -> None:
    at = _quiz("A small diamond", "kahn")
    assert "#### Which node does Kahn emit next?" in texts(at.markdown)
    assert _score(at).startswith("**Score: no answers yet** · question 1 of 5")
    assert at.button(key="order_quiz_next").disabled  # answer first
    _pick(at, "add")
    (err,) = _boxes(at)["error"]
    assert "add is not next: its in-degree is still 2 (left and right have not been emitted)" in err
    assert _score(at).startswith("**Score: 0 of 1**")
    assert any("Dequeue input and append it to the order." in m for m in texts(at.markdown))  # what the engine did
    _pick_again = [p for p in at.pills if p.key.startswith("order_quiz_pick_")]
    assert not _pick_again  # answered: no second answer to the same question
    click(at, "order_quiz_next")
    _pick(at, "right")  # left and right are both ready; the queue's front is left
    (warn,) = _boxes(at)["warning"]
    assert warn.startswith("**Valid, but not this engine's choice.**") and "left was enqueued before right" in warn
    click(at, "order_quiz_next")
    _pick(at, "right")
    assert _boxes(at)["success"] and _score(at).startswith("**Score: 1 of 3**")
    click(at, "order_quiz_restart")
    assert _score(at).startswith("**Score: no answers yet** · question 1 of 5")


@pytest.mark.slow
def test_order_quiz_on_dfs_asks_which_node_finishes_next() -> None:
    at = _quiz("KuiperInfer's worked example", "dfs")
    at.radio(key="order_quiz_kind_dfs").set_value("finish").run()
    assert "#### Which node joins the output list next?" in texts(at.markdown)
    _pick(at, "op4")
    (ok,) = _boxes(at)["success"]
    assert "DFS first enters input -> op1 -> op3 -> op4" in ok and "output could finish first" in ok
    for _ in range(5):  # to the end: Next is disabled on the last question
        click(at, "order_quiz_next") if not at.button(key="order_quiz_next").disabled else None
        pills = [p for p in at.pills if p.key.startswith("order_quiz_pick_")]
        if pills:
            _pick(at, "input")
    assert at.button(key="order_quiz_next").disabled
    assert any("The end of the next node finished questions" in s for s in _boxes(at)["success"])


@pytest.mark.slow
def test_order_quiz_on_a_typed_graph_and_on_the_loaded_model() -> None:
    at = _quiz("Type your own graph", "kahn")
    at.text_area(key="order_typed").input("a -> b -> d\na -> c -> d").run()
    _pick(at, "d")
    assert "d is not next: its in-degree is still 2 (b and c have not been emitted)" in _boxes(at)["error"][0]
    at = app(model="yolov5s_mini", page=ORDER)  # 166 operators: picked from a list (or clicked)
    at.selectbox(key="order_source").set_value("The loaded model").run()
    at.radio(key="order_algorithm").set_value("kahn").run()
    at.radio(key="order_mode").set_value("quiz").run()
    (pick,) = [s for s in at.selectbox if s.key and s.key.startswith("order_quiz_pick_")]
    assert pick.value is None and len(pick.options) == 166
    pick.set_value(len(pick.options) - 1).run()  # the last operator in the file: not ready yet
    no_exception(at)
    assert "is not next: its in-degree is still" in _boxes(at)["error"][0]
    assert _score(at).startswith("**Score: 0 of 1** · question 1 of 166")


@pytest.mark.slow
def test_order_quiz_with_both_algorithms_asks_about_dfs() -> None:
    at = _quiz("A small diamond", "both")
    assert "#### Which node does DFS enter next?" in texts(at.markdown)
    assert any("one algorithm at a time" in c for c in texts(at.caption))


def _presenting(at) -> list[str]:
    return [h.proto.body for h in at.get("html") if "kx-present" in h.proto.body]


@pytest.mark.slow
def test_order_presenter_view_hides_the_controls_and_shows_the_step_large() -> None:
    at = app(page=ORDER, query={"graph": "A small diamond", "algo": "kahn", "step": "7"})
    click(at, "order_present")
    bodies = _presenting(at)
    assert any("step 7 of 16" in b for b in bodies) and any(
        "right now has in-degree 0: enqueue it." in b for b in bodies
    )
    assert any("<b>Queue:</b> <code>left  right</code>" in b for b in bodies)
    assert any("[class*='st-key-kx-controls']" in h.proto.body for h in at.get("html"))  # the choices hidden
    assert not [b for b in at.button if b.key in ("order_step", "order_back", "order_play")]  # no step buttons
    assert at.query_params.get("present") in ("1", ["1"])
    # A link opens the same view; the quiz presents a question and no score.
    at = app(page=ORDER, query={"graph": "A small diamond", "algo": "dfs", "mode": "quiz", "present": "1"})
    bodies = _presenting(at)
    assert any("Execution order: quiz" in b for b in bodies) and any(
        "Which node does DFS enter next?" in b for b in bodies
    )
    assert not any("Score" in m for m in texts(at.markdown))


@pytest.mark.slow
def test_expression_quiz_next_node_first_argument_and_closing_paren() -> None:
    at = app(page=EXPR)
    at.radio(key="expr_view").set_value("quiz").run()
    assert "#### Which node does the stack machine evaluate next?" in texts(at.markdown)
    (tokens,) = at.pills
    assert [as_shown(o) for o in tokens.options][:4] == ["mul", "(", "add", "("]
    assert len(set(tokens.options)) == len(tokens.options)  # a pill comes back as its label: all differ
    tokens.set_value(2).run()  # `add` before its arguments
    assert "its argument `@0` is not evaluated yet" in _boxes(at)["error"][0]
    click(at, "expr_quiz_next")
    at.pills[0].set_value(6).run()  # 1.5 (token 6): right, @0 is on the stack
    assert _boxes(at)["success"] and _score(at).startswith("**Score: 1 of 2**")
    at.radio(key="expr_quiz_kind").set_value("first").run()
    (values,) = at.pills
    assert as_shown(values.options[0]).startswith("top: 1.5")
    values.set_value(1).run()  # 1.5, the top of two values
    assert "`1.5` is argument 2 of `add(@0,1.5)`" in _boxes(at)["error"][0]
    at.radio(key="expr_quiz_kind").set_value("close").run()
    assert "mul(add(@0,1.5),neg(@1))\n              ^ column 15" in texts(at.code)
    at.pills[0].set_value(0).run()  # mul is still open, but add opened after it
    assert "`add(` opened after it, at column 5" in _boxes(at)["error"][0]
    no_exception(at)


@pytest.mark.slow
def test_expression_quiz_on_the_models_expression() -> None:
    at = app(model="expr_zoo", page=EXPR)
    at.radio(key="expr_view").set_value("quiz").run()
    no_exception(at)
    (tokens,) = at.pills
    tokens.set_value(0).run()  # the outermost call's name: evaluated last
    no_exception(at)
    assert "is a call, and its argument" in _boxes(at)["error"][0]
    assert _score(at).startswith("**Score: 0 of 1**")


@pytest.mark.slow
def test_expressions_presenter_view() -> None:
    at = app(page=EXPR)
    click(at, "expr_present")
    bodies = _presenting(at)
    assert any("step 6 of 6" in b for b in bodies) and any("pop 2, apply mul" in b for b in bodies)
    assert any("top ▸" in b for b in bodies)
    at = app(page=EXPR, query={"present": "1", "mode": "quiz"})
    assert any("Expressions: quiz" in b for b in _presenting(at))


@pytest.mark.slow
def test_a_mistake_typed_while_presenting_can_be_fixed_and_left() -> None:
    at = app(page=EXPR, query={"present": "1"})
    at.text_input(key="expr_text").input("add(@0,").run()  # the choices show again with the error
    assert "Cannot parse the expression" in at.error[0].value
    click(at, "expressions_present_leave")
    assert at.session_state["kx_presenting"] == {"expressions": False}
    at.text_input(key="expr_text").input("add(@0,1)").run()
    steps = [el for el in at.get("bidi_component") if el.proto.component_name == "kx_step_controls"]
    assert steps and not _presenting(at)  # the page itself (its step controls), and the link says so
    assert "present" not in at.query_params


@pytest.mark.slow
def test_a_quiz_link_opens_the_same_question() -> None:
    at = _quiz("A small diamond", "kahn")
    _pick(at, "input")
    click(at, "order_quiz_next")
    assert at.query_params["q"] in ("2", ["2"]) and at.query_params["mode"] in ("quiz", ["quiz"])
    at = app(page=ORDER, query={"graph": "A small diamond", "algo": "kahn", "mode": "quiz", "q": "2"})
    assert _score(at).startswith("**Score: no answers yet** · question 2 of 5")


# -- a class (issue 38) ------------------------------------------------------------------------
CLASS = "pages/9_class.py"


@pytest.fixture
def class_store(tmp_path, monkeypatch):
    """The app's class store in a fresh data folder (st.cache_resource is per process)."""
    from pages import class_panel

    monkeypatch.setenv("KUIPER_DATA", str(tmp_path))
    class_panel.store.clear()
    yield
    class_panel.store.clear()


def _class_results(at) -> list[dict]:
    return at.dataframe[0].value.to_dict("records") if at.dataframe else []


@pytest.mark.slow
def test_a_class_collects_its_students_answers(class_store) -> None:
    teacher = app(page=CLASS)
    click(teacher, "class_open")
    code = teacher.session_state["kx_class_teacher"]["code"]
    assert any(code in m.value for m in teacher.markdown)
    assert any("No answers yet" in i.value for i in teacher.info)
    students = []
    for answer in ("input", "add", "input"):  # two right, one wrong, on question 1 of Kahn's diamond quiz
        s = app(page=CLASS)
        s.text_input(key="class_code").input(code.lower()).run()  # typed as heard: any case
        click(s, "class_join")
        assert any(code in m.value for m in s.success)
        s.switch_page(ORDER).run()
        s.selectbox(key="order_source").set_value("A small diamond").run()
        s.radio(key="order_algorithm").set_value("kahn").run()
        s.radio(key="order_mode").set_value("quiz").run()
        assert s.query_params["class"] in (code, [code])  # a reload keeps the class
        _pick(s, answer)
        _pick_again = [p for p in s.pills if p.key.startswith("order_quiz_pick_")]
        assert not _pick_again
        students.append(s)
    teacher.run()
    (row,) = _class_results(teacher)
    assert row["question"].endswith("Q1: Which node does Kahn emit next?")
    assert (row["answered"], row["right"]) == (3, 2)
    assert any("3 students have answered" in m.value for m in teacher.markdown)
    csv_text = class_panel_csv(code)
    assert csv_text.splitlines()[1].endswith(",3,2,67")


def class_panel_csv(code: str) -> str:
    from pages import class_panel

    return class_panel.store().csv(code)


@pytest.mark.slow
def test_a_wrong_code_is_said_and_a_link_joins(class_store) -> None:
    s = app(page=CLASS)
    s.text_input(key="class_code").input("ZZZZZ").run()
    click(s, "class_join")
    assert any("No open class has this code" in e.value for e in s.error)
    from pages import class_panel

    code, _ = class_panel.store().open_class()
    s = app(page=CLASS, query={"class": code})
    assert any(code in m.value for m in s.success)
    s = app(page=CLASS, query={"class": "²" * 5000})  # an untrusted link: ignored
    assert not s.success


@pytest.mark.slow
def test_a_reload_keeps_the_quiz_kind_question_and_score() -> None:
    """Issue 38: the question kind was not in the URL (a reload opened another quiz, score reset)."""
    at = _quiz("A small diamond", "kahn")
    _pick(at, "input")  # right
    click(at, "order_quiz_next")
    assert at.query_params["score"] in ("1-1", ["1-1"]) and at.query_params["q"] in ("2", ["2"])
    query = {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    again = app(page=ORDER, query=query)  # a reload: a new session on the same link
    assert _score(again).startswith("**Score: 1 of 1** · question 2 of 5")
    for bad in ("2-1", "²-3", "9" * 50 + "-1", "x"):  # an untrusted link's score: ignored
        at = app(page=ORDER, query={**query, "score": bad})
        assert _score(at).startswith("**Score: no answers yet**")
    e = app(page=EXPR, query={"mode": "quiz", "kind": "first"})
    assert e.session_state["expr_quiz_kind"] == "first" and e.query_params["kind"] in ("first", ["first"])
    d = app(page=ORDER, query={"graph": "A small diamond", "algo": "dfs", "mode": "quiz", "kind": "finish"})
    assert "#### Which node joins the output list next?" in texts(d.markdown)
