"""Reference tensors computed for you, from the framework the model came from.

    from kuiper_core.formats import open_model
    from kuiper_core.references import framework_references
    model = open_model("resnet18.pt", inputshape=[1, 3, 224, 224])
    refs = framework_references(model, [x])      # refs.refs: {operand name: array}
    print(refs.summary())

Methods (kuiper_core.formats.ReferenceInfo says which apply on this machine):
  pnnx_py      pnnx's generated NAME_pnnx.py run with torch: every operand, exactly keyed
  torchscript  the original TorchScript module run with torch: the outputs
  onnxruntime  the original .onnx with every intermediate value exposed, mapped to our
               operands by structure (onnx_values.py): how many mapped, and which not
Heavy imports (torch, onnxruntime) happen only when a method runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import KuiperError
from ..formats.base import OpenedModel
from .code_check import UnsafeCode

__all__ = ["ReferenceSet", "framework_references", "engine_values", "ReferenceError"]


class ReferenceError(KuiperError):
    """References could not be computed (the framework is missing, or failed on the model)."""


@dataclass
class ReferenceSet:
    """Reference tensors keyed by our operand names, and where they came from."""

    refs: dict[str, np.ndarray]
    sources: list[str]  # one line per method used ("torch 2.13.0 running pnnx's model_pnnx.py: …")
    computed: int  # our operands that have a value in a run (the ones a reference could cover)
    unmapped: list[str] = field(default_factory=list)  # of those, the ones with no reference
    notes: list[str] = field(default_factory=list)  # methods that could not run, and why
    onnx_nodes: dict[str, str] = field(default_factory=dict)  # operand -> the ONNX node that made it

    def summary(self) -> str:
        head = f"{len(self.refs)} reference tensor(s)"
        covered = self.computed - len(self.unmapped)
        head += f" for {covered} of {self.computed} computed operands"
        return "\n".join([head, *self.sources, *(f"note: {n}" for n in self.notes)])


def engine_values(model: OpenedModel, inputs: Sequence[np.ndarray]) -> dict[str, Any]:
    """Every operand's value in one run of our engine (steps), by operand name."""
    runtime = model.build()
    run = runtime.steps(*inputs)
    for _ in run:
        pass
    return dict(run.values)


def _outputs(graph: Any) -> list[str]:
    from ..explore.compare import output_operand_names

    return output_operand_names(graph)


def framework_references(
    model: OpenedModel,
    inputs: Sequence[np.ndarray],
    *,
    methods: Sequence[str] | None = None,
    ours: Mapping[str, Any] | None = None,
    timeout: float | None = None,
) -> ReferenceSet:
    """References for `model` on `inputs` from every method that applies (or `methods`).
    `ours`: our engine's operand values for these inputs when already computed (the ONNX
    mapping orders ties by them); computed here when needed. ReferenceError when no method
    can run (what to install is said). `timeout`: seconds each framework's child process may
    run (None: KUIPER_REFERENCE_TIMEOUT or 300)."""
    info = model.references
    wanted = list(methods) if methods is not None else list(info.methods)
    if not wanted:
        raise ReferenceError(
            f"no reference can be computed for {model.name} here: {info.text()}. "
            "Give a reference .npz instead (kuiper compare --reference)"
        )
    unknown = [m for m in wanted if m not in info.methods]
    if unknown:
        raise ReferenceError(f"reference method(s) {', '.join(unknown)} do not apply here: {info.text()}")
    outputs = _outputs(model.graph)
    refs: dict[str, np.ndarray] = {}
    sources: list[str] = []
    notes: list[str] = [f"not available: {m}" for m in info.missing]
    computed_names: set[str] | None = None
    onnx_nodes: dict[str, str] = {}
    arrays = [np.asarray(x) for x in inputs]
    failure: BaseException | None = None  # the last method's error: the ReferenceError's cause (a timeout, say)
    for method in wanted:
        try:
            if method == "pnnx_py":
                from .pnnx_py import capture_operands
                from .torchscript import torch_version

                assert model.files is not None and model.files.python is not None
                operands, _ = capture_operands(model.files.python, arrays, model.files.bin, timeout=timeout)
                known = {k: v for k, v in operands.items() if k in model.graph.operands}
                for k, v in known.items():
                    refs.setdefault(k, v)
                sources.append(
                    f"torch {torch_version()} running pnnx's {model.files.python.name}: {len(known)} operands"
                )
            elif method == "torchscript":
                from .torchscript import torch_version, torchscript_outputs

                assert model.files is not None and model.files.source is not None
                ys = torchscript_outputs(model.files.source, arrays, timeout=timeout)
                for name, y in zip(outputs, ys):
                    refs[name] = y  # the original module's answer wins over pnnx's code's
                sources.append(f"torch {torch_version()} running the original TorchScript module: {len(ys)} output(s)")
            elif method == "onnxruntime":
                if ours is None:
                    ours = engine_values(model, arrays)
                source_text, onnx_nodes = _onnx_references(model, arrays, ours, outputs, refs, timeout)
                sources.append(source_text)
        except ReferenceError as e:
            notes.append(f"{method}: {e}")
            failure = e.__cause__ or e
        except UnsafeCode as e:
            notes.append(f"pnnx's code was not run: the check refused it at {str(e)[:300]}{_others(wanted, method)}")
            failure = e
        except Exception as e:  # a framework failing on the model: say so, keep the other methods
            notes.append(f"{method} failed: {type(e).__name__}: {str(e)[:300]}{_others(wanted, method)}")
            failure = e
    if not refs:
        raise ReferenceError("no reference could be computed: " + "; ".join(notes)) from failure
    if ours is not None:
        computed_names = {k for k, v in ours.items() if isinstance(v, np.ndarray)} - _input_names(model)
    else:
        computed_names = {
            o.name for op in model.graph.operators if op.type not in ("pnnx.Input", "pnnx.Output") for o in op.outputs
        }
    unmapped = [n for n in _in_order(model, computed_names) if n not in refs]
    return ReferenceSet(refs, sources, len(computed_names), unmapped, notes, onnx_nodes)


def _onnx_references(
    model: OpenedModel,
    arrays: Sequence[np.ndarray],
    ours: Mapping[str, Any],
    outputs: Sequence[str],
    refs: dict[str, np.ndarray],
    timeout: float | None,
) -> tuple[str, dict[str, str]]:
    """onnxruntime's values of the original .onnx mapped onto our operands, into `refs`:
    (the sources line, {operand: the ONNX node that made it})."""
    from .onnx_values import map_to_operands, run_onnx

    source = model.files.source if model.files is not None else None
    if source is None:
        raise ReferenceError("the original .onnx is not kept")
    run = run_onnx(source, arrays, timeout=timeout)
    mapping = map_to_operands(model.graph, ours, run, outputs)
    for op, x in zip(model.graph.inputs, arrays):
        refs.setdefault(op.outputs[0].name, x)  # what onnxruntime was given (as pnnx's code records)
    replaced = 0
    for k, v in mapping.refs.items():
        # The original model is the truth, pnnx's code the converter's reading of it: the
        # original's outputs win, and its values mapped by structure win in between.
        if k in outputs or (mapping.aligned and k not in _input_names(model)):
            replaced += k in refs
            refs[k] = v
        else:
            refs.setdefault(k, v)
    onnx_nodes = {k: run.producers[n] for k, n in mapping.onnx_names.items() if n in run.producers}
    total = mapping.mapped + len(mapping.unmapped)
    text = (
        f"onnxruntime {run.version} running the original .onnx: {mapping.mapped} of {total} operands "
        + ("mapped by structure" if mapping.aligned else "mapped where values agree (too big to align)")
        + f" ({len(outputs)} output(s) by position)"
        + (f"; not mapped: {_names(mapping.unmapped)}" if mapping.unmapped else "")
        + (f"; the original's values used over pnnx's code's for {replaced}" if replaced else "")
    )
    return text, onnx_nodes


def _others(wanted: Sequence[str], failed: str) -> str:
    rest = [m for m in wanted if m != failed]
    return f"; the references come from {', '.join(rest)}" if rest else ""


def _input_names(model: OpenedModel) -> set[str]:
    return {o.name for op in model.graph.operators if op.type == "pnnx.Input" for o in op.outputs}


def _in_order(model: OpenedModel, names: set[str]) -> list[str]:
    return [o.name for op in model.graph.operators for o in op.outputs if o.name in names]


def _names(names: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
