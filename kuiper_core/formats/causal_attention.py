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

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..budgets import MAX_PICKLE_BYTES, Copied, load_pickle, open_zip, torchscript_pickle, walk_once
from ..errors import ConversionError, KuiperError, LimitError
from ..graph import Attribute, Graph, Operator

_CLASS = re.compile(r"^class (\w+)\(", re.M)
_SDPA = "scaled_dot_product_attention("


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


def causal_classes(archive: zipfile.ZipFile, where: str = "the TorchScript model") -> set[str]:
    """Qualified names (`__torch__.torch.nn.modules.activation.___torch_mangle_16.MultiheadAttention`)
    of the classes whose code calls SDPA with is_causal true: the code of the folder libtorch
    reads, every member's size counted before it is inflated (budgets.Copied)."""
    pkl = torchscript_pickle(archive)
    if pkl is None:
        return set()
    folder = pkl.split("/", 1)[0]
    copied = Copied(archive, where)
    found: set[str] = set()
    for name in archive.namelist():
        top, _, rest = name.partition("/code/")
        if not rest.endswith(".py") or top != folder:
            continue
        code = copied.read(name).decode("utf-8", errors="replace")
        if _SDPA not in code:
            continue
        module = rest[: -len(".py")].replace("/", ".")
        starts = [(m.start(), m.group(1)) for m in _CLASS.finditer(code)] + [(len(code), "")]
        for (begin, cls), (end, _) in zip(starts, starts[1:]):
            if _calls_causal_sdpa(code[begin:end]):
                found.add(f"{module}.{cls}")
    return found


class _Stub:
    """What any pickled global becomes: only its qualified name and state are kept. A class
    attribute, not set in __init__: pickle's NEWOBJ makes an instance without calling it."""

    qualname = ""
    state: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        self.state = state


def _stub_class(module: str, name: str) -> type[_Stub]:
    return type(name, (_Stub,), {"qualname": f"{module}.{name}"})


def _attributes(obj: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, _Stub) and isinstance(obj.state, dict):
        yield from ((str(k), v) for k, v in obj.state.items() if isinstance(v, _Stub))


def module_paths(archive: zipfile.ZipFile, where: str = "the TorchScript model") -> dict[str, str]:
    """Attribute path (`t.decoder.layers.0.self_attn`) -> the module's qualified class name,
    from the data.pkl libtorch reads, read within the pickle budgets (kuiper_core.budgets)
    and walked once per object. {} when there is none; LimitError past a budget."""
    pkl = torchscript_pickle(archive)
    if pkl is None:
        return {}
    data = Copied(archive, where).read(pkl, MAX_PICKLE_BYTES)
    try:
        root = load_pickle(data, f"{where}: {pkl}", _stub_class)
    except LimitError:
        raise
    except KuiperError:  # a pickle this cannot read: pnnx read it, nothing to restore
        return {}
    paths: dict[str, str] = {}
    for path, obj in walk_once(root, _attributes):
        if not isinstance(obj, _Stub):
            continue
        if obj.qualname.startswith("__torch__.") and not isinstance(obj.state, dict):
            # its attributes are unknown: an attention below it could not be told causal
            raise ConversionError(
                f"{where}: {pkl}: the module {path or '(the root)'!r} ({obj.qualname[:200]}) has no state "
                "(no attributes): not an archive torch.jit.save writes"
            )
        paths[path] = obj.qualname
    return paths


def causal_attention_paths(model_file: Path, where: str | None = None) -> set[str]:
    """Module paths of the TorchScript model's attentions that run causally; `where` names the
    model in messages (default: the file's name)."""
    where = where or model_file.name
    try:
        with open_zip(model_file, where) as archive:
            classes = causal_classes(archive, where)
            if not classes:
                return set()
            return {p for p, q in module_paths(archive, where).items() if q in classes}
    except (OSError, zipfile.BadZipFile):
        return set()
    except LimitError as e:
        raise ConversionError(f"{e.message} (limit {e.limit} = {e.maximum:,})") from None
    except ConversionError:
        raise
    except KuiperError as e:  # a member that cannot be read (budgets.Copied)
        raise ConversionError(str(e)) from None


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
