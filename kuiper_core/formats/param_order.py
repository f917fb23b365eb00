"""pnnx's `.pnnx.param` in an order that runs: its LSTM+Squeeze fusion puts `nn.LSTM` where the
Squeeze was, after the `torch.cat` of the LSTM's states (two stacked ONNX LSTMs: silero v4).
The reader refuses an operand used before it is made (locating it in a hand-written file), so a
converted file is put in order first: file order, each operator moved only after what it reads."""

from __future__ import annotations

import heapq
from pathlib import Path


def _operands(line: str) -> tuple[list[str], list[str]] | None:
    """(inputs, outputs) of one operator line `type name nin nout in… out… params…`."""
    tokens = line.split()
    if len(tokens) < 4 or not (tokens[2].isdigit() and tokens[3].isdigit()):
        return None
    nin, nout = int(tokens[2]), int(tokens[3])
    if len(tokens) < 4 + nin + nout:
        return None
    return tokens[4 : 4 + nin], tokens[4 + nin : 4 + nin + nout]


def put_in_order(param: Path) -> bool:
    """Rewrite `param` so that no operator reads an operand before the operator making it;
    False when it already was (or it cannot be read as operator lines: the reader says why)."""
    lines = param.read_text(encoding="utf-8", errors="replace").splitlines()
    if len(lines) < 2:
        return False
    ops = lines[2:]
    parsed = [_operands(line) for line in ops]
    if None in parsed:
        return False
    made_by = {o: k for k, p in enumerate(parsed) if p for o in p[1]}
    needs = [{made_by[i] for i in p[0] if made_by.get(i, k) != k} for k, p in enumerate(parsed) if p]
    if all(all(j < k for j in need) for k, need in enumerate(needs)):
        return False
    waiting = [len(need) for need in needs]
    readers: list[list[int]] = [[] for _ in ops]
    for k, need in enumerate(needs):
        for j in need:
            readers[j].append(k)
    # Kahn's algorithm with a heap, not runtime/order.kahn_order's first-in first-out queue:
    # the lowest file position goes first, so operators (inputs and outputs among them, whose
    # file order is the model's argument order) keep their places unless they must move.
    ready = [k for k, n in enumerate(waiting) if n == 0]  # ascending: a heap already
    order: list[int] = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for r in readers[k]:
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, r)
    if len(order) != len(ops):  # a cycle: left as written, for the reader to locate
        return False
    param.write_text("\n".join(lines[:2] + [ops[k] for k in order]) + "\n", encoding="utf-8")
    return True
