"""Constant folding of an ONNX graph at known input shapes, for onnx_prepare.py (which runs it
in its child process): `Shape`/`Size` of tensors whose shape inference knows every dim, nodes
whose inputs are all constant and small, evaluated one by one with `onnx.reference`, and `If`s
whose condition became constant replaced by the branch taken; then what nothing reads is
dropped. Sizes are checked before and after each evaluation: a value past the limits stays a
node (pnnx folds it or not, under its own memory limit).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

FOLD_ELEMENTS = 1 << 20  # largest input or output of a node folded here (larger work is pnnx's)
DEFAULT_OPSET = 17  # a model without a default-domain opset import
CONTROL_FLOW = ("If", "Loop", "Scan")
_RANDOM = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli")
NOT_FOLDED = frozenset(CONTROL_FLOW + _RANDOM + ("SequenceEmpty", "SequenceConstruct", "SplitToSequence"))


def static_shapes(graph: Any) -> dict[str, tuple[int, ...]]:
    """Every value whose shape inference knows all dims."""
    out: dict[str, tuple[int, ...]] = {}
    for v in list(graph.input) + list(graph.value_info) + list(graph.output):
        t = v.type.tensor_type
        if not v.type.HasField("tensor_type") or not t.HasField("shape"):
            continue
        if all(d.HasField("dim_value") for d in t.shape.dim):
            out[v.name] = tuple(d.dim_value for d in t.shape.dim)
    return out


# -- the child's side: folding ----------------------------------------------------------------------
def subgraphs(node: Any) -> Iterator[Any]:
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def names_used(nodes: Iterable[Any]) -> set[str]:
    """Every value name the nodes read, inside their subgraphs too (outer-scope references)."""
    used: set[str] = set()
    for node in nodes:
        used.update(node.input)
        for sub in subgraphs(node):
            used |= names_used(sub.node)
            used.update(o.name for o in sub.output)
    return used


class Folder:
    """Folds one graph's constants (the module docstring)."""

    def __init__(self, model: Any, fold_elements: int, fold_bytes: int) -> None:
        from onnx import numpy_helper

        self.model = model
        self.graph = model.graph
        self.fold_elements = fold_elements
        self.budget = fold_bytes
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), DEFAULT_OPSET)
        self.known: dict[str, Any] = {}
        for init in self.graph.initializer:
            n = 1
            for d in init.dims:
                n *= d
            if n <= fold_elements:
                self.known[init.name] = numpy_helper.to_array(init)
        self.big_constants = {i.name for i in self.graph.initializer} - set(self.known)
        self.folded = 0
        self.ifs = 0
        self.splits = 0

    def run(self) -> bool:
        """Fold; True when anything changed."""
        import onnx

        shapes = static_shapes(self.graph)
        pending = deque(self.graph.node)
        kept: list[Any] = []
        names = {o for n in self.graph.node for o in n.output} | {i.name for i in self.graph.input}
        while pending:
            node = pending.popleft()
            if node.op_type == "If" and node.domain in ("", "ai.onnx") and node.input[0] in self.known:
                pending.extendleft(reversed(self._inline(node, names)))
                self.ifs += 1
                continue
            values = self._evaluate(node, shapes)
            if values is None:
                if node.op_type == "Split" and self._explicit_split(node, shapes):
                    self.splits += 1
                if node.op_type == "Expand" and self._explicit_expand(node, shapes):
                    self.splits += 1
                kept.append(node)
                continue
            self.known.update(zip(node.output, values))
            self.folded += 1
        if not (self.folded or self.ifs or self.splits):
            return False
        used = names_used(kept) | {o.name for o in self.graph.output}
        existing = {i.name for i in self.graph.initializer}
        made = [
            onnx.numpy_helper.from_array(self.known[name], name) for name in sorted(used & self.known.keys() - existing)
        ]
        del self.graph.node[:]
        self.graph.node.extend(kept)
        self.graph.initializer.extend(made)
        _drop_dead(self.graph)
        return True

    def _evaluate(self, node: Any, shapes: dict[str, tuple[int, ...]]) -> list[Any] | None:
        """The node's outputs when they are constant and small; None to keep the node."""
        import numpy as np

        if node.domain not in ("", "ai.onnx") or node.op_type in NOT_FOLDED or any(subgraphs(node)):
            return None
        if node.op_type in ("Shape", "Size") and node.input[0] in shapes:
            dims = shapes[node.input[0]]
            if node.op_type == "Size":
                return [np.array(int(np.prod(dims, dtype=np.int64)), dtype=np.int64)]
            attrs = {a.name: a.i for a in node.attribute}
            rank = len(dims)
            start, end = attrs.get("start", 0), attrs.get("end", rank)
            return [np.array(dims[slice(start, end)], dtype=np.int64)]
        inputs = [name for name in node.input if name]
        if not all(name in self.known for name in inputs):
            return None
        for out in node.output:  # what shape inference says it will make
            if out in shapes and int(np.prod(shapes[out], dtype=np.int64)) > self.fold_elements:
                return None
        from onnx.reference import ReferenceEvaluator

        try:
            run = ReferenceEvaluator(self._single(node))
            values = run.run(None, {name: self.known[name] for name in inputs})
        except Exception:  # noqa: BLE001  -- an operator onnx.reference does not run: pnnx's to fold
            return None
        arrays = [np.asarray(v) for v in values]
        size = sum(a.nbytes for a in arrays)
        if any(a.size > self.fold_elements or a.dtype == object for a in arrays) or size > self.budget:
            return None
        self.budget -= size
        return arrays

    def _explicit_split(self, node: Any, shapes: dict[str, tuple[int, ...]]) -> bool:
        """Give a Split that splits evenly (no `split` input) its sizes as a constant input:
        pnnx writes it as torch.split with no sizes otherwise."""
        import numpy as np

        if node.domain not in ("", "ai.onnx") or self.opset < 13 or node.input[0] not in shapes:
            return False
        if len(node.input) > 1 and node.input[1]:
            return False
        dims = shapes[node.input[0]]
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        if not -len(dims) <= axis < len(dims):
            return False
        size, parts = dims[axis], len(node.output)
        step = -(-size // parts)  # ceil: opset 18's num_outputs leaves the last part smaller
        sizes = [min(step, size - i * step) for i in range(parts)]
        if min(sizes) < 0 or (self.opset < 18 and size % parts):
            return False
        name = f"{node.name or node.output[0]}/split_sizes"
        self.known[name] = np.array(sizes, dtype=np.int64)
        del node.input[1:]
        node.input.append(name)
        kept = [a for a in node.attribute if a.name != "num_outputs"]
        del node.attribute[:]
        node.attribute.extend(kept)
        return True

    def _explicit_expand(self, node: Any, shapes: dict[str, tuple[int, ...]]) -> bool:
        """Give an Expand to a constant shape the shape it makes: ONNX's Expand broadcasts both
        ways (x of (1,3,1) to [3,1] is (1,3,1)), pnnx writes torch's one-way Tensor.expand(3,-1)."""
        import numpy as np

        if node.domain not in ("", "ai.onnx") or node.input[0] not in shapes or node.input[1] not in self.known:
            return False
        asked = tuple(int(d) for d in np.asarray(self.known[node.input[1]]).reshape(-1))
        try:
            made = tuple(np.broadcast_shapes(shapes[node.input[0]], asked))
        except ValueError:  # onnxruntime's error to give, not ours
            return False
        if made == asked:
            return False
        name = f"{node.name or node.output[0]}/expanded_shape"
        self.known[name] = np.array(made, dtype=np.int64)
        node.input[1] = name
        return True

    def _single(self, node: Any) -> Any:
        """A one-node graph for onnx.reference: its inputs typed from the known values."""
        import onnx

        inputs = [
            onnx.helper.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(self.known[name].dtype), self.known[name].shape
            )
            for name in dict.fromkeys(n for n in node.input if n)
        ]
        outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
        clean = onnx.NodeProto()
        clean.CopyFrom(node)
        return onnx.helper.make_model(
            onnx.helper.make_graph([clean], "fold", inputs, outputs),
            opset_imports=[onnx.helper.make_opsetid("", self.opset)],
        )

    def _inline(self, node: Any, names: set[str]) -> list[Any]:
        """The nodes of the branch a constant-condition If takes, then Identity nodes from the
        branch's outputs to the If's; branch values renamed where they clash with the graph's."""
        import onnx

        take = "then_branch" if bool(self.known[node.input[0]]) else "else_branch"
        branch = next(a.g for a in node.attribute if a.name == take)
        renamed: dict[str, str] = {}
        for init in branch.initializer:  # a branch's own constants become the graph's
            copy = onnx.TensorProto()
            copy.CopyFrom(init)
            copy.name = self._fresh(init.name, node, names, renamed)
            self.graph.initializer.append(copy)
            self.known[copy.name] = onnx.numpy_helper.to_array(copy)
        nodes = []
        for inner in branch.node:
            copy = onnx.NodeProto()
            copy.CopyFrom(inner)
            for i, name in enumerate(copy.input):
                copy.input[i] = renamed.get(name, name)
            for i, name in enumerate(copy.output):
                copy.output[i] = self._fresh(name, node, names, renamed)
            nodes.append(copy)
        for inner_out, out in zip(branch.output, node.output):
            nodes.append(
                onnx.helper.make_node(
                    "Identity", [renamed.get(inner_out.name, inner_out.name)], [out], name=f"{node.name}/{take}/out"
                )
            )
        return nodes

    @staticmethod
    def _fresh(name: str, node: Any, names: set[str], renamed: dict[str, str]) -> str:
        if name in names:
            new, k = f"{node.name or 'If'}/{name}", 1
            while new in names:
                new, k = f"{node.name or 'If'}/{name}_{k}", k + 1
            renamed[name] = new
            name = new
        names.add(name)
        return name


def _drop_dead(graph: Any) -> None:
    """Remove nodes nothing reads (outputs, later nodes, subgraphs), last first; then the
    initializers and value_info of values that are gone."""
    needed = {o.name for o in graph.output}
    kept = []
    for node in reversed(list(graph.node)):
        if any(o in needed for o in node.output if o):
            kept.append(node)
            needed |= names_used([node])
    kept.reverse()
    del graph.node[:]
    graph.node.extend(kept)
    inits = [i for i in graph.initializer if i.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    made = {o for n in graph.node for o in n.output}
    infos = [v for v in graph.value_info if v.name in made]
    del graph.value_info[:]
    graph.value_info.extend(infos)


# Elementwise nodes that broadcast their two operands (numpy's rule): a constant operand may be
# repeated along the other's dims without changing what they compute.
_BROADCASTING = frozenset(
    {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}
)


def widen_f64_scalars(graph: Any) -> int:
    """pnnx makes every one-element constant a scalar and has no float64 scalar: it aborts
    ('unknown constant scalar type 11'). A one-element float64 initializer read only by
    broadcasting elementwise nodes of one other operand shape is repeated along the last dims of
    that shape (as few as make two elements): the same answer, now a tensor. Returns how many."""
    import numpy as np
    from onnx import numpy_helper

    shapes = static_shapes(graph)
    readers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    inside = {n for node in graph.node for sub in subgraphs(node) for n in names_used(sub.node)}
    widened = 0
    for i, init in enumerate(graph.initializer):
        if init.data_type != 11 or int(np.prod(init.dims, dtype=np.int64)) != 1 or init.name in inside:
            continue
        nodes = readers.get(init.name, [])
        others = {
            shapes.get(next((x for x in n.input if x != init.name), ""))
            for n in nodes
            if n.op_type in _BROADCASTING and len(n.input) == 2
        }
        if len(nodes) == 0 or len(others) != 1 or None in others or any(n.op_type not in _BROADCASTING for n in nodes):
            continue
        other = next(iter(others))
        assert other is not None
        k = len(init.dims)
        while k <= len(other) and int(np.prod(other[len(other) - k :], dtype=np.int64)) < 2:
            k += 1
        if k > len(other) or k == 0:
            continue
        value = numpy_helper.to_array(init).reshape(())
        graph.initializer[i].CopyFrom(numpy_helper.from_array(np.full(other[len(other) - k :], value), init.name))
        widened += 1
    return widened
