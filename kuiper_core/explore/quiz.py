"""What every "predict the next step" quiz shares: a question, a verdict, a score.

A quiz stops an algorithm before one of its steps and asks what it does next; the student
picks an answer (a node, a token, a stack value) and the verdict says right or wrong and why,
from the algorithm's own state. Where several answers would be valid for the algorithm in
general (Kahn may take any ready node, DFS any unvisited successor), the engine's rule
decides, and the verdict names the rule (`tie_rule`) so a "wrong" answer that another
implementation might give is not just called wrong. Plain data: the pages lay it out.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Question:
    """Ask with the state after step `shown` on screen; step `step` holds the answer.

    Steps between the two are part of what is predicted (DFS returning from finished calls,
    the descent before a node finishes)."""

    step: int  # the step that answers the question (an index into the algorithm's trace)
    shown: int  # the step whose state the student sees while answering (-1: before the first)
    kind: str  # what is asked (each quiz names its kinds)
    prompt: str  # "Which node does Kahn emit next?"
    answer: str  # the id of the right choice (a node name, a token or stack position)


@dataclass(frozen=True)
class Verdict:
    """The judgement of one answer."""

    picked: str
    answer: str
    correct: bool
    why: str  # a sentence from the algorithm's state
    tie_rule: str | None = None  # the engine's rule, when `picked` was valid too, or when it decided a tie
    valid_elsewhere: bool = False  # picked is not this engine's choice, but a valid next step in general

    @property
    def headline(self) -> str:
        if self.correct:
            return "Right."
        return "Valid, but not this engine's choice." if self.valid_elsewhere else "Not quite."

    def text(self) -> str:
        """The whole explanation as one paragraph."""
        return " ".join(s for s in (self.headline, self.why, self.tie_rule or "") if s)


@dataclass
class Score:
    """Right answers out of those given, and the current run of right answers."""

    right: int = 0
    asked: int = 0
    streak: int = 0
    best: int = 0
    history: list[Verdict] = field(default_factory=list)

    def add(self, verdict: Verdict) -> None:
        self.asked += 1
        self.history.append(verdict)
        if verdict.correct:
            self.right += 1
            self.streak += 1
            self.best = max(self.best, self.streak)
        else:
            self.streak = 0

    def text(self) -> str:
        if not self.asked:
            return "Score: no answers yet"
        return f"Score: {self.right} of {self.asked}" + (f" · {self.streak} in a row" if self.streak > 1 else "")


def names(items, limit: int = 6) -> str:
    """'a', 'a and b', 'a, b and c'; long lists end with '… (N in all)'."""
    items = list(items)
    if len(items) > limit:
        return ", ".join(items[:limit]) + f", … ({len(items)} in all)"
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
