"""Causal self-attention that pnnx drops from a TorchScript model, given back as a mask.

PyTorch >= 2 recognises a causal mask (nn.Transformer's `tgt_mask` from
`generate_square_subsequent_mask`, or `is_causal=True`) and the traced forward of such an
nn.MultiheadAttention calls `scaled_dot_product_attention(q, k, v, None, 0., True)`: the mask
is gone, the causality a constant in the module's TorchScript code. pnnx's nn.MultiheadAttention
pass reads the module's inputs and weights, not that constant, and writes an attention with no
mask at every optlevel: its file (and its generated Python) let each position attend to later
ones, a silent wrong answer (nn.Transformer d_model 32 with a causal tgt_mask: 1.9 off).

This reads the archive itself, no torch needed: the TorchScript code of every module class
(which call SDPA with is_causal true) and the module tree in data.pkl (which attribute path has
such a class; pnnx names an nn.MultiheadAttention operator by that path), and gives each such
operator the (L, S) causal mask, 0 on and below the diagonal and -inf above (SDPA's is_causal,
top-left aligned), as a `pnnx.Attribute` feeding `$attn_mask`: pnnx's own format, which every
reader of the file then runs as PyTorch did.
"""

from __future__ import annotations

import io
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConversionError
from ..graph import Attribute, Graph, Operator

_CLASS = re.compile(r"^class (\w+)\(", re.M)
_SDPA = "scaled_dot_product_attention("
MAX_PICKLE_BYTES = 64 << 20  # data.pkl holds the module tree, tensors are in data/: small


def _call_args(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose '(' ends at `start` (text[start-1] == '(')."""
    depth, args, cur = 0, [], []  # type: int, list[str], list[str]
    for ch in text[start:]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                args.append("".join(cur).strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    return args


def _calls_causal_sdpa(code: str) -> bool:
    for m in re.finditer(re.escape(_SDPA), code):
        args = _call_args(code, m.end())
        named = {a.split("=", 1)[0].strip(): a.split("=", 1)[1].strip() for a in args if "=" in a}
        positional = [a for a in args if "=" not in a]
        if named.get("is_causal") == "True" or (len(positional) >= 6 and positional[5] == "True"):
            return True
    return False


def causal_classes(archive: zipfile.ZipFile) -> set[str]:
    """Qualified names (`__torch__.torch.nn.modules.activation.___torch_mangle_16.MultiheadAttention`)
    of the classes whose code calls SDPA with is_causal true."""
    found: set[str] = set()
    for name in archive.namelist():
        top, _, rest = name.partition("/code/")
        if not rest.endswith(".py") or "/" in top:
            continue
        code = archive.read(name).decode("utf-8", errors="replace")
        if _SDPA not in code:
            continue
        module = rest[: -len(".py")].replace("/", ".")
        starts = [(m.start(), m.group(1)) for m in _CLASS.finditer(code)] + [(len(code), "")]
        for (begin, cls), (end, _) in zip(starts, starts[1:]):
            if _calls_causal_sdpa(code[begin:end]):
                found.add(f"{module}.{cls}")
    return found


class _Stub:
    """What any pickled global becomes: only its qualified name and state are kept."""

    qualname = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _TreeReader(pickle.Unpickler):
    """data.pkl read without torch and without running anything it names: every global is a stub."""

    def find_class(self, module: str, name: str) -> Any:
        return type(name, (_Stub,), {"qualname": f"{module}.{name}"})

    def persistent_load(self, pid: Any) -> None:  # tensors' storages: not needed
        return None


def module_paths(archive: zipfile.ZipFile) -> dict[str, str]:
    """Attribute path (`t.decoder.layers.0.self_attn`) -> the module's qualified class name."""
    pkl = next((n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")), None)
    if pkl is None or archive.getinfo(pkl).file_size > MAX_PICKLE_BYTES:
        return {}
    try:
        root = _TreeReader(io.BytesIO(archive.read(pkl))).load()
    except Exception:  # noqa: BLE001 -- an archive this cannot read: nothing to restore
        return {}
    paths: dict[str, str] = {}
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        path, obj = stack.pop()
        if not isinstance(obj, _Stub):
            continue
        paths[path] = obj.qualname
        if isinstance(obj.state, dict):
            stack += [(f"{path}.{k}" if path else str(k), v) for k, v in obj.state.items() if isinstance(v, _Stub)]
    return paths


def causal_attention_paths(model_file: Path) -> set[str]:
    """Module paths of the TorchScript model's attentions that run causally."""
    try:
        with zipfile.ZipFile(model_file) as archive:
            classes = causal_classes(archive)
            if not classes:
                return set()
            return {p for p, q in module_paths(archive).items() if q in classes}
    except (OSError, zipfile.BadZipFile):
        return set()


def _lengths(op: Operator) -> tuple[int, int]:
    """(L, S): the query's and the key's sequence lengths, from the shapes pnnx declared."""
    batch_first = bool(op.params.get("batch_first", False))
    keys = [o for o, n in zip(op.inputs, op.input_names) if n != "attn_mask"]
    shapes = [keys[0].shape, keys[min(1, len(keys) - 1)].shape] if keys else []
    dims = [s[1 if batch_first and len(s) == 3 else 0] if s else None for s in shapes]
    lengths = [d for d in dims if isinstance(d, int)]
    if len(lengths) != 2:
        raise ConversionError(
            f"operator '{op.name}' (nn.MultiheadAttention) runs causally in the TorchScript model "
            "(is_causal), which pnnx drops, and its sequence lengths are not known to give it back: "
            "convert with a fixed inputshape"
        )
    return lengths[0], lengths[1]


def add_causal_masks(graph: Graph, paths: set[str]) -> list[str]:
    """Give every nn.MultiheadAttention named in `paths` that has no mask its causal one; the
    names of the operators given one."""
    given: list[str] = []
    for op in list(graph.operators):
        if op.type != "nn.MultiheadAttention" or op.name not in paths or "attn_mask" in op.input_names:
            continue
        L, S = _lengths(op)
        mask = np.where(np.tri(L, S, dtype=bool), np.float32(0), np.float32(-np.inf)).astype(np.float32)
        operand = graph.add_operand(f"{op.name}.causal_mask")
        operand.shape, operand.dtype = (L, S), "f32"
        const = Operator("pnnx.Attribute", f"{op.name}.causal_mask", [], [operand])
        const.attrs["data"] = Attribute("f32", (L, S), mask)
        operand.producer = const
        graph.operators.insert(graph.operators.index(op), const)
        op.inputs.append(operand)
        op.input_names.append("attn_mask")
        operand.consumers.append(op)
        given.append(op.name)
    return given
