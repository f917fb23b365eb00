"""A class: a teacher opens one (a short code, no accounts), students join with the code, and
each student's first answer to each quiz question is counted; the teacher sees, per question,
how many answered and how many were right, and exports that as CSV.

The answers live in one SQLite file (stdlib sqlite3) in the app's data folder, so every
process of the classroom deployment (several behind the proxy: a class is spread over them)
reads and writes the same class. Nothing personal is stored: a student is a random id made
for the browser session, never a name; a question is the page's own description of it. Every
table is bounded (classes open at once, students and questions per class, text lengths), and
a class is deleted CLASS_HOURS after it was opened.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import LimitError

ENV_DATA = "KUIPER_DATA"
DB_NAME = "classes.sqlite3"
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I/L: read aloud and typed from a projector
CODE_LENGTH = 5  # 31^5 = 28 million codes
CLASS_HOURS = 12.0
MAX_CLASSES = 500  # open at once on one server; the oldest is dropped for a new one
MAX_STUDENTS = 300  # per class
MAX_QUESTIONS = 400  # per class
MAX_TEXT = 200  # a question's id and label are cut to this many characters

_SCHEMA = """
CREATE TABLE IF NOT EXISTS classes (code TEXT PRIMARY KEY, teacher TEXT NOT NULL, opened REAL NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
  code TEXT NOT NULL, student TEXT NOT NULL, question TEXT NOT NULL, label TEXT NOT NULL,
  correct INTEGER NOT NULL, at REAL NOT NULL, PRIMARY KEY (code, student, question));
CREATE INDEX IF NOT EXISTS answers_by_question ON answers (code, question);
"""


def data_root() -> Path:
    """$KUIPER_DATA, else $XDG_DATA_HOME/kuiper (~/.local/share/kuiper)."""
    named = os.environ.get(ENV_DATA)
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kuiper"


def normal_code(text: str | None) -> str | None:
    """A class code as typed (any case, spaces) in its one form, or None if it cannot be one."""
    if not isinstance(text, str) or len(text) > 20:
        return None
    code = "".join(text.split()).upper()
    return code if len(code) == CODE_LENGTH and all(c in CODE_ALPHABET for c in code) else None


def new_student_id() -> str:
    """An anonymous id for one browser session (what counts one student once per question)."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class QuestionResult:
    question: str
    label: str
    answered: int
    right: int


class ClassStore:
    """The classes of one deployment, in one SQLite file shared by its processes."""

    def __init__(self, path: str | Path | None = None, *, now=time.time) -> None:
        self.path = Path(path) if path is not None else data_root() / DB_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._now = now
        with self._db() as db:
            db.executescript(_SCHEMA)

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        # One short-lived connection per call: several processes, each with threads (one per
        # session's script run), write to one file; SQLite serialises the writes (WAL: readers
        # are never blocked by a writer), `timeout` waits for the lock instead of failing.
        db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            yield db
        finally:
            db.close()

    def _open(self, db: sqlite3.Connection, code: str) -> bool:
        row = db.execute("SELECT opened FROM classes WHERE code = ?", (code,)).fetchone()
        return row is not None and row[0] >= self._now() - CLASS_HOURS * 3600

    def _sweep(self, db: sqlite3.Connection) -> None:
        old = self._now() - CLASS_HOURS * 3600
        db.execute("DELETE FROM answers WHERE code IN (SELECT code FROM classes WHERE opened < ?)", (old,))
        db.execute("DELETE FROM classes WHERE opened < ?", (old,))

    # -- the teacher ------------------------------------------------------------------------------
    def open_class(self) -> tuple[str, str]:
        """A new class: (its code for the students, the teacher's key to its results)."""
        teacher = secrets.token_urlsafe(12)
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            self._sweep(db)
            (n,) = db.execute("SELECT COUNT(*) FROM classes").fetchone()
            if n >= MAX_CLASSES:  # the oldest class makes room
                db.execute("DELETE FROM answers WHERE code = (SELECT code FROM classes ORDER BY opened LIMIT 1)")
                db.execute("DELETE FROM classes WHERE code = (SELECT code FROM classes ORDER BY opened LIMIT 1)")
            while True:
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                if db.execute("SELECT 1 FROM classes WHERE code = ?", (code,)).fetchone() is None:
                    break
            db.execute("INSERT INTO classes VALUES (?, ?, ?)", (code, teacher, self._now()))
            db.execute("COMMIT")
        return code, teacher

    def is_teacher(self, code: str, teacher: str | None) -> bool:
        if not teacher:
            return False
        with self._db() as db:
            row = db.execute("SELECT teacher FROM classes WHERE code = ?", (code,)).fetchone()
        return row is not None and secrets.compare_digest(row[0], teacher)

    def close_class(self, code: str, teacher: str) -> bool:
        """Delete the class and its answers (the teacher's key only)."""
        if not self.is_teacher(code, teacher):
            return False
        with self._db() as db:
            db.execute("DELETE FROM answers WHERE code = ?", (code,))
            db.execute("DELETE FROM classes WHERE code = ?", (code,))
        return True

    # -- the students -------------------------------------------------------------------------------
    def exists(self, code: str | None) -> bool:
        if code is None:
            return False
        with self._db() as db:
            return self._open(db, code)

    def record(self, code: str, student: str, question: str, label: str, correct: bool) -> bool:
        """A student's answer; only the first to each question counts. False when it was not
        stored (no such class, a second answer, or the class is full)."""
        question, label, student = question[:MAX_TEXT], label[:MAX_TEXT], student[:64]
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                if not self._open(db, code):
                    return False
                if db.execute(
                    "SELECT 1 FROM answers WHERE code = ? AND student = ? AND question = ?", (code, student, question)
                ).fetchone():
                    return False
                students, questions = db.execute(
                    "SELECT COUNT(DISTINCT student), COUNT(DISTINCT question) FROM answers WHERE code = ?", (code,)
                ).fetchone()
                new_student = not db.execute(
                    "SELECT 1 FROM answers WHERE code = ? AND student = ? LIMIT 1", (code, student)
                ).fetchone()
                new_question = not db.execute(
                    "SELECT 1 FROM answers WHERE code = ? AND question = ? LIMIT 1", (code, question)
                ).fetchone()
                if (new_student and students >= MAX_STUDENTS) or (new_question and questions >= MAX_QUESTIONS):
                    raise LimitError(
                        f"the class is full ({MAX_STUDENTS} students, {MAX_QUESTIONS} questions)",
                        limit="class size",
                        maximum=MAX_STUDENTS if new_student else MAX_QUESTIONS,
                        value=students if new_student else questions,
                    )
                db.execute(
                    "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?)",
                    (code, student, question, label, int(bool(correct)), self._now()),
                )
                return True
            finally:
                db.execute("COMMIT")

    # -- what the teacher sees ---------------------------------------------------------------------------
    def results(self, code: str) -> list[QuestionResult]:
        """Per question, in the order first answered: how many answered, how many were right."""
        with self._db() as db:
            rows = db.execute(
                "SELECT question, MIN(label), COUNT(*), SUM(correct), MIN(at) FROM answers WHERE code = ? "
                "GROUP BY question ORDER BY MIN(at)",
                (code,),
            ).fetchall()
        return [QuestionResult(q, label, n, int(right or 0)) for q, label, n, right, _ in rows]

    def students(self, code: str) -> int:
        """How many students have answered at least once."""
        with self._db() as db:
            (n,) = db.execute("SELECT COUNT(DISTINCT student) FROM answers WHERE code = ?", (code,)).fetchone()
        return int(n)

    def csv(self, code: str) -> str:
        """The results as CSV (no student column: nothing personal leaves either)."""
        out = io.StringIO()
        w = csv.writer(out)
        w.writerow(["question", "answered", "right", "right (%)"])
        for r in self.results(code):
            w.writerow([_cell(r.label), r.answered, r.right, round(100 * r.right / r.answered) if r.answered else 0])
        return out.getvalue()


def _cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text (a leading = + - @ would make it a formula)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
