"""References for a model converted from ONNX: onnxruntime runs the original `.onnx` with
every intermediate value exposed as an output, and those values are mapped to our operands.

pnnx keeps no ONNX names (`/layer1/conv1/Conv` becomes `conv2d_3`) and folds or fuses some
operators, so the mapping is by structure: both graphs in execution order, a pair allowed
only when shape, dtype kind and operator kind agree (a convolution with a convolution, an
elementwise op with an Expression), the longest order-preserving alignment of such pairs
taken (a diff of the two op sequences). Where several alignments are as long (same-shape
activations in a row: Conv → Relu against convbn → relu), the one whose values are closer
is taken, by a 64-element sample. The outputs always map, by position. What maps nothing is
reported by name, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from typing import Any

import numpy as np

from ..graph import Graph

SAMPLE = 64  # elements of a fingerprint
WINDOW = 64  # values the fallback looks ahead for an operand
MAX_CELLS = 6_000_000  # of the alignment table (two float64 tables: ~100 MB); past it, a greedy in-order match

# Operator kinds, first match wins: a keyword found in the type's lower-cased last part.
_KINDS = [
    ("conv", ("conv",)),
    ("linear", ("linear", "gemm", "matmul", "bmm", "addmm", "baddbmm", "einsum")),
    ("softmax", ("softmax",)),
    ("norm", ("norm",)),
    ("pool", ("pool", "reducemean", "reducemax", "mean", "adaptive")),
    ("resize", ("resize", "upsample", "interpolate")),
    ("concat", ("concat", "cat", "stack")),
    ("recurrent", ("lstm", "gru", "rnn")),
    ("attention", ("attention", "transformer")),
    (
        "shape",
        ("reshape", "view", "flatten", "squeeze", "transpose", "permute", "slice", "split", "chunk", "gather")
        + ("select", "expand", "tile", "repeat", "pad", "shape", "contiguous", "identity", "cast", "to"),
    ),
    ("pointwise", ("relu", "sigmoid", "tanh", "clip", "clamp", "hard", "silu", "swish", "gelu", "elu", "leaky")),
]
_POINTWISE_MATH = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "sqrt",
    "exp",
    "log",
    "neg",
    "abs",
    "expression",
    "reciprocal",
    "where",
    "max",
    "min",
    "erf",
    "softplus",
    "mish",
    "prelu",
    "dropout",
)


def op_kind(op_type: str) -> str:
    """A coarse kind shared by ONNX and PNNX operator types ('conv', 'pointwise', …),
    'other' when unknown (compatible with anything)."""
    name = op_type.lower().replace("aten::", "").replace("prim::", "").rsplit(".", 1)[-1].replace("_", "")
    for kind, words in _KINDS:
        if any(w in name for w in words):
            return kind
    if any(w in name for w in _POINTWISE_MATH):
        return "pointwise"  # activations and arithmetic: pnnx fuses one into the other
    return "other"


# Kinds one side's single op has where the other side has several: an attention ends with
# its out-projection (MatMul/Gemm in ONNX).
_ALSO = {frozenset(("attention", "linear"))}


def _compatible(a: str, b: str) -> bool:
    return a == b or "other" in (a, b) or frozenset((a, b)) in _ALSO


# ONNX ops that only reshape their first input: the data is its producer's.
_VIEWS = {"Squeeze", "Unsqueeze", "Reshape", "Flatten", "Transpose", "Identity"}
# Elementwise ops that, with a constant operand, finish their input's op: a Linear exported as
# MatMul + Add(bias) is one nn.Linear in PNNX; a BatchNorm as Mul + Add.
_AFFINE = {"Add", "Sub", "Mul", "Div"}


def _data_sources(graph: Any) -> dict[str, str]:
    """ONNX value name -> the op type that made its data: through views (an LSTM's Y is
    squeezed before use; pnnx's nn.LSTM gives the squeezed tensor) and through a constant
    bias or scale (MatMul + Add is a Linear)."""
    constant = {i.name for i in graph.initializer}
    sources: dict[str, str] = {}
    for node in graph.node:
        computed = [i for i in node.input if i and i not in constant]
        if not computed:  # Constant, or Identity of a shared initializer: constant too
            constant.update(o for o in node.output if o)
            continue
        through = None
        if node.op_type in _VIEWS and node.input and node.input[0] in sources:
            through = node.input[0]
        elif node.op_type in _AFFINE and len(computed) == 1 and computed[0] in sources:
            through = computed[0]
        for name in node.output:
            sources[name] = sources[through] if through is not None else node.op_type
    return sources


@dataclass
class OnnxRun:
    """onnxruntime's values: every node output in node order, and the graph's outputs."""

    values: list[tuple[str, str, np.ndarray]]  # (value name, producing op type, array)
    outputs: list[np.ndarray]
    version: str
    # value name -> the op type that made its data: through Squeeze/Reshape/… to their input's
    # producer (an LSTM's Y is squeezed before use; pnnx's nn.LSTM gives the squeezed tensor)
    sources: dict[str, str] = field(default_factory=dict)
    constants: list[tuple[str, np.ndarray]] = field(default_factory=list)  # initializers, by name
    first_input: dict[str, str] = field(default_factory=dict)  # value name -> its node's first input
    # value name -> the name of the ONNX node making it ('/layer1/layer1.0/conv1/Conv'), and
    # 'output K' -> the node making the graph's output K: what a reader of the .onnx knows it by
    producers: dict[str, str] = field(default_factory=dict)


def run_onnx(
    source: str | Path | bytes, inputs: Sequence[np.ndarray], *, isolated: bool = True, timeout: float | None = None
) -> OnnxRun:
    """Run the ONNX model with every node output made a graph output (needs onnx and
    onnxruntime). isolated (the default): in a child process under memory and time limits,
    what it returns within max_planned_bytes (isolated.py: constant subgraphs run whatever
    their size, though pnnx folded them away from our graph)."""
    if isolated:
        from .isolated import run_onnx as run_in_child

        return OnnxRun(**run_in_child(source, [np.asarray(x) for x in inputs], timeout))
    import onnx
    import onnxruntime as ort

    model = onnx.load_from_string(source) if isinstance(source, bytes) else onnx.load(str(source))
    graph = model.graph
    outputs = [o.name for o in graph.output]
    produced: list[tuple[str, str]] = [(name, node.op_type) for node in graph.node for name in node.output if name]
    sources = _data_sources(graph)
    shown = set(outputs)
    for name, _ in produced:
        if name not in shown:
            graph.output.append(onnx.ValueInfoProto(name=name))
            shown.add(name)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every node's value
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    initializers = {i.name for i in graph.initializer}
    names = [i.name for i in session.get_inputs() if i.name not in initializers]
    if len(names) != len(inputs):
        from ..errors import InputError

        raise InputError(f"the ONNX model takes {len(names)} input(s), {len(inputs)} were given")
    feed = {n: np.asarray(x) for n, x in zip(names, inputs)}
    wanted = [o.name for o in session.get_outputs()]
    got = dict(zip(wanted, session.run(wanted, feed)))
    values = [(n, t, np.asarray(got[n])) for n, t in produced if n in got and isinstance(got[n], np.ndarray)]
    constants = [(i.name, onnx.numpy_helper.to_array(i)) for i in graph.initializer]
    first_input = {o: node.input[0] for node in graph.node if node.input for o in node.output if o}
    producers = {o: node.name for node in graph.node if node.name for o in node.output if o}
    producers |= {f"output {k}": producers[n] for k, n in enumerate(outputs) if n in producers}
    return OnnxRun(
        values, [np.asarray(got[n]) for n in outputs], str(ort.__version__), sources, constants, first_input, producers
    )


@dataclass
class OperandMapping:
    """Our operands matched to ONNX values."""

    refs: dict[str, np.ndarray]  # our operand -> the ONNX value
    onnx_names: dict[str, str]  # our operand -> the ONNX value's name ('output 0' for outputs)
    unmapped: list[str] = field(default_factory=list)  # our computed operands with no ONNX value
    aligned: bool = True  # False: too big to align, only operands whose values agree were mapped

    @property
    def mapped(self) -> int:
        return len(self.refs)


def _fingerprint(a: np.ndarray) -> np.ndarray:
    flat = a.reshape(-1)
    if flat.size == 0:
        return np.zeros(SAMPLE)
    idx = np.linspace(0, flat.size - 1, SAMPLE).astype(np.int64)
    return np.nan_to_num(flat[idx].astype(np.float64), nan=0.0, posinf=1e30, neginf=-1e30)


def _key(a: np.ndarray) -> tuple:
    kind = {"f": "f", "c": "f", "i": "i", "u": "i", "b": "b"}.get(a.dtype.kind, a.dtype.kind)
    return (tuple(a.shape), kind)


def map_to_operands(
    graph: Graph, ours: Mapping[str, object], run: OnnxRun, output_names: Sequence[str]
) -> OperandMapping:
    """Map onnxruntime's values to our operands (see the module docstring). `ours`: our
    engine's value of each operand (to order ties), `output_names`: our output operands."""
    mine: list[tuple[str, str, np.ndarray]] = []
    stored: list[tuple[str, np.ndarray]] = []  # pnnx.Attribute: a constant, matched to an initializer
    for op in graph.operators:
        if op.type in ("pnnx.Input", "pnnx.Output"):
            continue
        for o in op.outputs:
            v = ours.get(o.name)
            if not isinstance(v, np.ndarray) or o.name in output_names:
                continue
            if op.type == "pnnx.Attribute":
                stored.append((o.name, v))
            else:
                mine.append((o.name, op.type, v))
    theirs = run.values
    kinds_mine = [op_kind(t) for _, t, _ in mine]
    kinds_theirs = [{op_kind(t), op_kind(run.sources.get(name, t))} for name, t, _ in theirs]
    keys_mine = [_key(v) for _, _, v in mine]
    keys_theirs = [_key(v) for _, _, v in theirs]

    def allowed(i: int, j: int) -> bool:
        return keys_mine[i] == keys_theirs[j] and any(_compatible(kinds_mine[i], k) for k in kinds_theirs[j])

    aligned = len(mine) * len(theirs) <= MAX_CELLS
    if aligned:
        score = _scores(mine, theirs, keys_mine, keys_theirs, allowed)
        pairs = _by_values(_align(score), score, theirs)
    else:  # too big to align: only pairs whose values agree (a wrong one is unmapped, never a false alarm)
        prints: dict[tuple[int, int], np.ndarray] = {}

        def agree(i: int, j: int) -> bool:
            a = prints.setdefault((0, i), _fingerprint(mine[i][2]))
            b = prints.setdefault((1, j), _fingerprint(theirs[j][2]))
            return bool(np.abs(a - b).max() <= 1e-3 * max(1.0, float(np.abs(b).max())))

        pairs = _in_order(len(mine), len(theirs), lambda i, j: allowed(i, j) and agree(i, j))
    pairs = list(pairs) + _siblings(graph, mine, theirs, pairs, run.first_input, allowed)
    refs: dict[str, np.ndarray] = {}
    names: dict[str, str] = {}
    for i, j in _by_values_within_operator(graph, mine, theirs, pairs):
        refs[mine[i][0]] = theirs[j][2]
        names[mine[i][0]] = theirs[j][0]
    for k, (name, y) in enumerate(zip(output_names, run.outputs)):
        refs[name] = y
        names[name] = f"output {k}"
    # A constant is the initializer (or a value folded from constants) holding the same numbers.
    candidates = run.constants + [(n, a) for n, _, a in theirs]
    for name, v in stored:
        same = next((c for c in candidates if _key(c[1]) == _key(v) and _same_values(c[1], v)), None)
        if same is not None:
            refs[name], names[name] = same[1], same[0]
    candidates_of_ours = {n for n, _, _ in mine} | {n for n, _ in stored}  # once: it was built per operand
    unmapped = [
        o.name for op in graph.operators for o in op.outputs if o.name in candidates_of_ours and o.name not in refs
    ]
    return OperandMapping(refs, names, unmapped, aligned)


def _siblings(
    graph: Graph,
    mine: Sequence[tuple[str, str, np.ndarray]],
    theirs: Sequence[tuple[str, str, np.ndarray]],
    pairs: Sequence[tuple[int, int]],
    first_input: Mapping[str, str],
    allowed: Callable[[int, int], bool],
) -> list[tuple[int, int]]:
    """Outputs of one of our multi-output operators the alignment left out (torch.tensor_split's
    second part, ONNX's second Slice, which it may order first): the one unused ONNX value
    made from the same input as the output that was mapped, of a shape and kind that fit."""
    row = {name: i for i, (name, _, _) in enumerate(mine)}
    mapped = dict(pairs)
    used = set(mapped.values())
    extra: list[tuple[int, int]] = []
    made_from: dict[str | None, list[int]] = {}  # ONNX values by their node's first input: no scan of all per output
    for j, (name, _, _) in enumerate(theirs):
        made_from.setdefault(first_input.get(name), []).append(j)
    for op in graph.operators:
        rows = [row[o.name] for o in op.outputs if o.name in row]
        anchors = [mapped[i] for i in rows if i in mapped]
        if len(rows) < 2 or not anchors:
            continue
        source = first_input.get(theirs[anchors[0]][0])
        for i in rows:
            if i in mapped:
                continue
            fits = [j for j in made_from.get(source, ()) if j not in used and allowed(i, j)]
            if len(fits) == 1:
                extra.append((i, fits[0]))
                used.add(fits[0])
    return extra


def _by_values_within_operator(
    graph: Graph,
    mine: Sequence[tuple[str, str, np.ndarray]],
    theirs: Sequence[tuple[str, str, np.ndarray]],
    pairs: Sequence[tuple[int, int]],
) -> list[tuple[int, int]]:
    """The outputs of one of our multi-output operators have no order against the ONNX values
    they match: a bidirectional LSTM's `torch.unbind` gives (forward, backward) where tf2onnx
    computes the backward Slice first, and the in-order alignment paired them crosswise (a
    false divergence in openwakeword 0.4.0's hey_mycroft). Within such a group, each output
    takes the group's ONNX value whose values agree with it, where one does."""
    row = {name: i for i, (name, _, _) in enumerate(mine)}
    to = dict(pairs)
    for op in graph.operators:
        group = [row[o.name] for o in op.outputs if row.get(o.name) in to]
        if len(group) < 2:
            continue
        free = [to[i] for i in group]
        agree = {
            (i, j): mine[i][2].shape == theirs[j][2].shape and _close(mine[i][2], theirs[j][2])
            for i in group
            for j in free
        }
        if all(agree[i, to[i]] for i in group):
            continue
        taken: dict[int, int] = {}
        for i in group:  # the agreeing value first; what agrees with nothing keeps a leftover
            j = next((j for j in free if agree[i, j] and j not in taken.values()), None)
            if j is not None:
                taken[i] = j
        rest = [j for j in free if j not in taken.values()]
        for i in group:
            if i not in taken:
                taken[i] = to[i] if to[i] in rest else rest[0]
                rest.remove(taken[i])
        to.update(taken)
    return list(to.items())


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """A 64-element sample of a and b agrees (the alignment's tie-break, as in `_scores`)."""
    fa, fb = _fingerprint(a), _fingerprint(b)
    return bool(np.abs(fa - fb).max() <= 1e-3 * max(1.0, float(np.abs(fb).max())))


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    with np.errstate(invalid="ignore"):
        return bool(np.allclose(a, b, rtol=1e-6, atol=0.0, equal_nan=True))


def _scores(
    mine: Sequence[tuple[str, str, np.ndarray]],
    theirs: Sequence[tuple[str, str, np.ndarray]],
    keys_mine: Sequence[tuple],
    keys_theirs: Sequence[tuple],
    allowed: Callable[[int, int], bool],
) -> np.ndarray:
    """The pair table: -inf where not allowed, 1 where allowed, 1.5 where the values agree too."""
    score = np.full((len(mine), len(theirs)), -np.inf)
    cols_of: dict[tuple, list[int]] = {}
    for j, key in enumerate(keys_theirs):
        cols_of.setdefault(key, []).append(j)
    prints: dict[int, np.ndarray] = {}
    for i, key in enumerate(keys_mine):
        cols = [j for j in cols_of.get(key, ()) if allowed(i, j)]
        if not cols:
            continue
        for j in cols:
            if j not in prints:
                prints[j] = _fingerprint(theirs[j][2])
        fb = np.stack([prints[j] for j in cols])
        tol = 1e-3 * np.maximum(1.0, np.abs(fb).max(axis=1))
        close = np.abs(fb - _fingerprint(mine[i][2])).max(axis=1) <= tol
        score[i, cols] = 1.0 + 0.5 * close
    return score


def _align(score: np.ndarray) -> list[tuple[int, int]]:
    """The order-preserving set of allowed pairs with the highest total score (LCS-style)."""
    n, m = score.shape
    dp = np.zeros((n + 1, m + 1))
    for i in range(1, n + 1):
        diag = dp[i - 1, :-1] + score[i - 1]
        row = np.maximum(dp[i - 1, 1:], diag)
        dp[i, 1:] = np.maximum.accumulate(np.maximum(row, 0.0))
    pairs = []
    i, j = n, m
    while i > 0 and j > 0:
        if dp[i, j] == dp[i - 1, j]:
            i -= 1
        elif dp[i, j] == dp[i, j - 1]:
            j -= 1
        else:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
    return pairs[::-1]


def _by_values(
    pairs: list[tuple[int, int]], score: np.ndarray, theirs: Sequence[tuple[str, str, np.ndarray]]
) -> list[tuple[int, int]]:
    """The order-preserving alignment cannot follow onnxruntime's order where it differs from
    ours: a bidirectional GRU's Y_h comes before the Transpose/Reshape of its Y, so our (Y, h_n)
    took the next layer's h_n (a false divergence, 0.93). A pair whose values differ moves to the
    one unused value that fits and holds our numbers; an operand left out takes such a value.
    Values all alike (zeros: an initial state) are evidence of nothing and are never taken."""
    used = {j for _, j in pairs}
    varied = [bool(np.ptp(_fingerprint(a)) > 0) for _, _, a in theirs]
    mapped = dict(pairs)

    def only_match(i: int) -> int | None:
        fits = [j for j in np.flatnonzero(score[i] == 1.5) if j not in used and varied[j]]
        return int(fits[0]) if len(fits) == 1 else None

    for i in range(score.shape[0]):
        j = mapped.get(i)
        if j is not None and score[i, j] == 1.5:
            continue
        other = only_match(i)
        if other is not None:
            used.discard(j)
            used.add(other)
            mapped[i] = other
    return sorted(mapped.items())


def _in_order(n: int, m: int, allowed: Callable[[int, int], bool]) -> list[tuple[int, int]]:
    """The fallback for graphs too big for the table: each operand takes the next allowed
    value after the previous match (in a window, so one miss does not skip the rest)."""
    pairs, j0 = [], 0
    for i in range(n):
        j = next((j for j in range(j0, min(m, j0 + WINDOW)) if allowed(i, j)), None)
        if j is not None:
            pairs.append((i, j))
            j0 = j + 1
    return pairs
