"""A class's answers in SQLite (issue 38): codes, first answers only, per-question counts,
CSV without anything personal, bounds, expiry, and several processes writing one file."""

from __future__ import annotations

import csv
import io
import multiprocessing

import pytest

from kuiper_core.errors import LimitError
from kuiper_core.explore import classes as C


def test_a_class_collects_first_answers_per_question(tmp_path) -> None:
    store = C.ClassStore(tmp_path / "c.sqlite3")
    code, teacher = store.open_class()
    assert C.normal_code(code.lower()[:2] + " " + code.lower()[2:]) == code and store.exists(code)
    a, b = C.new_student_id(), C.new_student_id()
    assert store.record(code, a, "order/q1", "Which node is next?", True)
    assert not store.record(code, a, "order/q1", "Which node is next?", False)  # a second answer does not count
    assert store.record(code, b, "order/q1", "Which node is next?", False)
    assert store.record(code, b, "order/q2", "And then?", True)
    assert [(r.label, r.answered, r.right) for r in store.results(code)] == [
        ("Which node is next?", 2, 1),
        ("And then?", 1, 1),
    ]
    assert store.students(code) == 2
    rows = list(csv.reader(io.StringIO(store.csv(code))))
    assert rows[0] == ["question", "answered", "right", "right (%)"] and rows[1] == [
        "Which node is next?",
        "2",
        "1",
        "50",
    ]
    assert a not in store.csv(code) and b not in store.csv(code)  # nothing that tells students apart
    assert not store.close_class(code, "not the key") and store.close_class(code, teacher)
    assert not store.exists(code) and store.results(code) == []


def test_codes_are_checked_and_unknown_classes_take_nothing(tmp_path) -> None:
    store = C.ClassStore(tmp_path / "c.sqlite3")
    for bad in ("", "ABC", "ABCDEF", "ABCD0", "ABCDI", "²²²²²", None, "A" * 5000):
        assert C.normal_code(bad) is None
    assert not store.record("ZZZZZ", "s", "q", "q", True)


def test_a_class_expires_and_a_spreadsheet_formula_is_text(tmp_path) -> None:
    now = [1000.0]
    store = C.ClassStore(tmp_path / "c.sqlite3", now=lambda: now[0])
    code, _ = store.open_class()
    store.record(code, "s", "q", "=HYPERLINK(1)", True)
    assert "'=HYPERLINK" in store.csv(code)
    now[0] += C.CLASS_HOURS * 3600 + 1
    assert not store.exists(code) and not store.record(code, "t", "q", "q", True)
    store.open_class()  # opening another sweeps the expired one
    assert store.results(code) == []


def test_a_class_is_bounded(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(C, "MAX_STUDENTS", 3)
    monkeypatch.setattr(C, "MAX_QUESTIONS", 2)
    store = C.ClassStore(tmp_path / "c.sqlite3")
    code, _ = store.open_class()
    for s in "abc":
        store.record(code, s, "q1", "q1", True)
    with pytest.raises(LimitError):
        store.record(code, "d", "q1", "q1", True)
    store.record(code, "a", "q2", "q2", True)
    with pytest.raises(LimitError):
        store.record(code, "a", "q3", "q3", True)
    assert store.record(code, "b", "q2", "x" * 10_000, True)  # long text is cut, not refused
    monkeypatch.setattr(C, "MAX_CLASSES", 2)
    first, _ = store.open_class()
    store.open_class()
    store.open_class()
    assert not store.exists(code) and not store.exists(first)  # the two oldest made room


def _student(path: str, code: str, i: int) -> None:
    store = C.ClassStore(path)
    for q in range(20):
        store.record(code, f"s{i}", f"q{q}", f"question {q}", (i + q) % 2 == 0)


@pytest.mark.slow
def test_processes_share_one_class(tmp_path) -> None:
    """The deployment runs several app processes; a class's answers are in the one file."""
    path = str(tmp_path / "c.sqlite3")
    code, _ = C.ClassStore(path).open_class()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_student, args=(path, code, i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    results = C.ClassStore(path).results(code)
    assert len(results) == 20 and all(r.answered == 4 and r.right == 2 for r in results)
