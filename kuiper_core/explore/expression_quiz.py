"""Predict the next step of the expression parser and stack machine (seed 000).

Three kinds of question, all judged from the engine's own data (the AST with its spans, the
reverse Polish order, the traced stack):

  'next'   Which node of the tree does the stack machine evaluate next?  (a tree node or
           its token; answer: the node's position in reverse Polish order)
  'first'  Which value on the stack does this call take as its first argument?  (a stack
           value; answer: its position on the stack, bottom first)
  'close'  Which call does this ')' close?  (a token; answer: the call's name token, or
           the '[' of a list)

There are no ties: the stack holds a call's arguments in order (the first deepest), so the
machine must evaluate them left to right, and a ')' closes exactly one call.
"""

from __future__ import annotations

from .. import expression as ex
from .quiz import Question, Verdict

KINDS = {
    "next": "Which node does the stack machine evaluate next?",
    "first": "Which value on the stack does {call} take as its first argument?",
    "close": "Which call does the highlighted '{closer}' close?",
}
KIND_LABELS = {"next": "next node evaluated", "first": "a call's first argument", "close": "what a ')' closes"}
_CLOSERS = {")": "(", "]": "["}
MAX_NAMED_NODES = 400  # larger trees: nodes named by their source text and column (to_text is O(size))


class ExpressionQuiz:
    """The questions of one expression: its AST, tokens and traced evaluation."""

    def __init__(self, text: str, ast: ex.Node, trace: ex.Trace) -> None:
        self.text, self.ast, self.trace = text, ast, trace
        self.rpn = trace.rpn  # the order the machine evaluates nodes in
        self.position = {id(n): i for i, n in enumerate(self.rpn)}
        self.tokens = ex.tokens(text)
        self.parent: dict[int, ex.Node] = {}
        for n in ex.walk(ast):
            for c in ex.children(n):
                self.parent[id(c)] = n
        self._starting = {n.span[0]: n for n in self.rpn}  # every node starts at a token of its own
        self._closing = {n.span[1]: n for n in self.rpn if isinstance(n, (ex.Call, ex.ListExpr))}
        self._token_at = {t.start: i for i, t in enumerate(self.tokens)}
        self._repeated: set[str] | None = None  # texts that occur more than once (small trees only)

    # -- naming things the way the student sees them -----------------------------------------------
    def describe(self, node: ex.Node) -> str:
        """`add(@0,1.5)` (and its column where the same text appears twice)."""
        text = ex.span_text(self.text, node) if len(self.rpn) > MAX_NAMED_NODES else ex.to_text(node)
        short = text if len(text) <= 40 else text[:39] + "…"
        return f"`{short}`" + (f" (column {node.span[0] + 1})" if text in self._repeated_texts() else "")

    def _repeated_texts(self) -> set[str]:
        """Texts of more than one node; a big tree names every node by its column."""
        if self._repeated is None:
            if len(self.rpn) > MAX_NAMED_NODES:
                self._repeated = {ex.span_text(self.text, n) for n in self.rpn}
            else:
                seen: set[str] = set()
                self._repeated = set()
                for n in self.rpn:
                    t = ex.to_text(n)
                    (self._repeated if t in seen else seen).add(t)
        return self._repeated

    def node_of_token(self, index: int) -> ex.Node | None:
        """The node a token stands for: an operand or a number itself, a name or the '('
        after it its call (or True/False/None), a '[' its list; None for ',', ')' and ']'."""
        tok = self.tokens[index]
        if tok.kind is ex.Kind.LPAREN and index > 0 and self.tokens[index - 1].kind is ex.Kind.NAME:
            tok = self.tokens[index - 1]  # the '(' of a call stands for the call
        if tok.kind not in (ex.Kind.OPERAND, ex.Kind.NUMBER, ex.Kind.NAME, ex.Kind.LBRACKET):
            return None
        return self._starting.get(tok.start)

    def token_of_node(self, node: ex.Node) -> int:
        """The token a node starts at (its name, operand, number or '[')."""
        return self._token_at[node.span[0]]

    # -- the questions -------------------------------------------------------------------------------
    def questions(self, kind: str) -> list[Question]:
        steps = self.trace.steps
        if kind == "next":
            return [Question(i, i - 1, kind, KINDS[kind], str(i)) for i in range(len(steps))]
        if kind == "first":
            out = []
            for i, s in enumerate(steps):
                if s.kind == "apply" and len(s.args) >= 2:
                    below = len(steps[i - 1].stack) - len(s.args)  # the first argument's place, bottom first
                    prompt = KINDS[kind].format(call=self.describe(s.node))
                    out.append(Question(i, i - 1, kind, prompt, str(below)))
            return out
        if kind == "close":
            out = []
            for i, t in enumerate(self.tokens):
                if t.text in _CLOSERS:
                    node = self._closing[t.end]
                    prompt = KINDS[kind].format(closer=t.text) + f" (column {t.start + 1})"
                    out.append(Question(i, i - 1, kind, prompt, str(self.token_of_node(node))))
            return out
        raise ValueError(f"no {kind!r} question: expected one of {', '.join(KINDS)}")

    def judge(self, q: Question, picked: str) -> Verdict:
        if q.kind == "next":
            return self._judge_next(q, picked)
        if q.kind == "first":
            return self._judge_first(q, picked)
        return self._judge_close(q, picked)

    # -- 'next': reverse Polish order ----------------------------------------------------------------
    def _judge_next(self, q: Question, picked: str) -> Verdict:
        ans = self.rpn[q.step]
        p = self.rpn[int(picked)]
        done = {id(n) for n in self.rpn[: q.step]}
        on_stack = {id(e.node) for e in self.trace.steps[q.shown].stack} if q.shown >= 0 else set()
        if p is ans:
            args = ex.children(ans)
            if args:
                why = (
                    f"Every argument of {self.describe(ans)} is on the stack ({', '.join(self.describe(a) for a in args)}), "
                    f"so the machine pops {len(args)}, applies {ex.label(ans)} and pushes the result."
                )
            else:
                why = (
                    f"{self.describe(ans)} is the leftmost node not evaluated yet and has no arguments: "
                    "the machine pushes its value."
                )
            return Verdict(picked, q.answer, True, why)
        if id(p) in done:
            if id(p) in on_stack:
                why = f"{self.describe(p)} is already evaluated: its value is on the stack."
            else:
                why = f"{self.describe(p)} is already evaluated, and {self.describe(self.parent[id(p)])} has used its value."
            return Verdict(picked, q.answer, False, why)
        pending = [c for c in ex.children(p) if id(c) not in done]
        if pending:
            why = (
                f"{self.describe(p)} is a call, and its argument {self.describe(pending[0])} is not evaluated yet: "
                "reverse Polish order puts every argument before its call, so its value must be on the stack first."
            )
            return Verdict(picked, q.answer, False, why)
        # p is ready too; ans lies in an earlier argument of their lowest common ancestor.
        top, i, j = self._split(ans, p)
        why = (
            f"{self.describe(p)} is ready, but {self.describe(ans)} comes first: it is in argument {i + 1} of "
            f"{self.describe(top)}, and {self.describe(p)} in argument {j + 1}. The machine evaluates arguments left "
            "to right, so that the first argument ends up deepest on the stack, where the call expects it."
        )
        return Verdict(picked, q.answer, False, why)

    def _ancestors(self, node: ex.Node) -> list[ex.Node]:
        out = [node]
        while id(out[-1]) in self.parent:
            out.append(self.parent[id(out[-1])])
        return out

    def _split(self, a: ex.Node, b: ex.Node) -> tuple[ex.Node, int, int]:
        """The lowest common ancestor of a and b, and the argument positions they lie in."""
        up_a, up_b = self._ancestors(a), self._ancestors(b)
        ids_b = {id(n): k for k, n in enumerate(up_b)}
        for k, n in enumerate(up_a):
            if id(n) in ids_b and k > 0 and ids_b[id(n)] > 0:
                kids = ex.children(n)
                pos = {id(c): x for x, c in enumerate(kids)}
                return n, pos[id(up_a[k - 1])], pos[id(up_b[ids_b[id(n)] - 1])]
        raise ValueError("nodes of different trees")

    # -- 'first': which stack values a call pops -----------------------------------------------------
    def _judge_first(self, q: Question, picked: str) -> Verdict:
        step = self.trace.steps[q.step]
        stack = self.trace.steps[q.shown].stack
        k = len(step.args)
        first = len(stack) - k
        at = int(picked)
        call = self.describe(step.node)
        entry = stack[at]
        if at == first:
            why = (
                f"{call} takes {k} arguments: it pops the top {k} values. They were pushed in argument order, so the "
                f"deepest of them, {self.describe(entry.node)}, is the first argument."
            )
            return Verdict(picked, q.answer, True, why)
        if at > first:
            why = (
                f"{self.describe(entry.node)} is argument {at - first + 1} of {call}: the top {k} values are its "
                f"arguments, pushed in order, so the first argument is the deepest of them, "
                f"{self.describe(stack[first].node)}."
            )
            return Verdict(picked, q.answer, False, why)
        user = self.parent.get(id(entry.node))
        why = (
            f"{call} takes {k} arguments and pops only the top {k} values; {self.describe(entry.node)} is below them "
            f"and stays on the stack" + (f" until {self.describe(user)} uses it." if user is not None else ".")
        )
        return Verdict(picked, q.answer, False, why)

    # -- 'close': the parser's open calls --------------------------------------------------------------
    def _opener(self, node: ex.Node) -> str:
        return f"`{ex.label(node)}(`" if isinstance(node, ex.Call) else "`[`"

    def _judge_close(self, q: Question, picked: str) -> Verdict:
        closer = self.tokens[q.step]
        ans = self.node_of_token(int(q.answer))
        assert ans is not None
        node = self.node_of_token(int(picked))
        pos = closer.start
        if node is ans:
            args = ex.children(ans)
            why = (
                f"{self._opener(ans)} at column {ans.span[0] + 1} is the innermost call still open at column {pos + 1}: "
                + (
                    "its argument is complete, and "
                    if len(args) == 1
                    else f"its {len(args)} arguments are complete, and "
                )
                + f"the parser's '{closer.text}' closes the call it opened last."
            )
            return Verdict(picked, q.answer, True, why)
        if not isinstance(node, (ex.Call, ex.ListExpr)):
            tok = self.tokens[int(picked)]
            why = f"`{tok.text}` at column {tok.start + 1} does not open a call: only a name followed by '(' (or a '[') does."
            return Verdict(picked, q.answer, False, why)
        start, end = node.span
        if end <= pos:
            why = f"{self._opener(node)} at column {start + 1} is already closed, by the '{self.text[end - 1]}' at column {end}."
        elif start > pos:
            why = f"{self._opener(node)} at column {start + 1} opens after this '{closer.text}'."
        else:
            why = (
                f"{self._opener(node)} at column {start + 1} is still open, but {self._opener(ans)} opened after it, at "
                f"column {ans.span[0] + 1}: the parser keeps its open calls on a stack, and '{closer.text}' closes "
                "the top one (the most recently opened)."
            )
        return Verdict(picked, q.answer, False, why)
