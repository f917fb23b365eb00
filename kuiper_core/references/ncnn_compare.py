"""An ncnn model layer by layer: ours vs ncnn vs PyTorch, and why ncnn's answer leaves PyTorch's.

    report = compare_ncnn("m.ncnn.param", [chw])          # the sibling m.ncnn.bin
    print(report.text())

- ours: the engine's run of the ncnn graph (kuiper_core/ncnn), every blob.
- ncnn: the `ncnn` binding in a child process (isolated.run_ncnn), every blob extracted, with
  every precision and algorithm option off (BASELINE), then with each option on alone, then with
  ncnn's defaults, and with the weights stored the other way (fp16 <-> fp32).
- PyTorch: pnnx's generated NAME_pnnx.py beside the files (torch), every operand, aligned to the
  blobs by name where pnnx kept it (in0, out0) and by content elsewhere (the operand of the same
  size whose values are nearest: fusion and renumbering move them); or only the outputs, given
  as `expected` (PyTorch's out0, … without the batch dim).

The diagnosis names, per run, the final error and the first layer whose blob is more than
`jump` (relative) from the reference, and says in a sentence what moves it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..formats.base import installed
from ..explore.ncnn_view import align, rel_error
from ..formats.ncnn import pnnx_sibling
from ..graph import Graph
from .ncnn_blobs import ALGORITHM_OPTIONS, PRECISION_OPTIONS

JUMP = 1e-4  # a blob further than this (relative) from the reference has diverged


@dataclass
class BlobRow:
    index: int
    layer: str
    type: str
    blob: str
    shape: tuple[int, ...]
    ours_vs_ncnn: float | None
    ours_vs_torch: float | None
    ncnn_vs_torch: float | None
    torch_operand: str | None  # the PNNX operand it was aligned with ("out0" for an output)
    aligned_by: str = ""  # "name" | "content" | ""


@dataclass
class OptionRun:
    label: str  # "baseline (all off)", "use_fp16_storage", "weights as fp16", "ncnn defaults"
    final_error: float
    first_layer: str | None
    first_error: float | None


@dataclass
class NcnnReport:
    model: str
    weights: str  # "fp16" | "fp32" | "mixed" | "none": how the file stores its flagged weights
    reference: str  # what the errors of the option table are measured against
    rows: list[BlobRow]
    runs: list[OptionRun]
    advice: list[str]
    notes: list[str] = field(default_factory=list)
    ncnn_version: str | None = None
    jump: float = JUMP  # the tolerance "first layer over" means
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # ncnn's blobs, every option off
    torch: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # PyTorch's value per blob, where aligned

    def text(self) -> str:
        out = [f"{self.model}: ncnn weights stored as {self.weights}; ncnn {self.ncnn_version or 'not run'}"]
        out.append(f"{'#':>3}  {'layer':<24} {'type':<20} {'blob':<10} {'shape':<16} ours~ncnn  ours~torch ncnn~torch")
        for r in self.rows:
            out.append(
                f"{r.index + 1:>3}  {r.layer[:24]:<24} {r.type[:20]:<20} {r.blob[:10]:<10} {str(r.shape)[:16]:<16} "
                f"{_e(r.ours_vs_ncnn):>9} {_e(r.ours_vs_torch):>10} {_e(r.ncnn_vs_torch):>10}"
                + (f"  = {r.torch_operand} ({r.aligned_by})" if r.torch_operand else "")
            )
        if self.runs:
            out.append("")
            out.append(f"why it differs (errors against {self.reference}):")
            out.append(f"  {'ncnn run':<34} {'final error':>11}  first layer over {self.jump:g}")
            for run in self.runs:
                first = "-" if run.first_layer is None else f"{run.first_layer} ({_e(run.first_error)})"
                out.append(f"  {run.label:<34} {_e(run.final_error):>11}  {first}")
        out += [f"=> {a}" for a in self.advice]
        out += [f"note: {n}" for n in self.notes]
        return "\n".join(out)


def _e(v: float | None) -> str:
    return "-" if v is None else ("inf" if v == float("inf") else f"{v:.2e}")


def weight_storage(graph: Graph) -> str:
    kinds = {a.dtype for op in graph.operators for a in op.attrs.values() if a.dtype in ("f16", "f32")}
    flagged_f16 = "f16" in kinds
    if not kinds:
        return "none"
    return "fp16" if flagged_f16 else "fp32"


def torch_operands(pnnx_param: Path, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray] | None:
    """Every PNNX operand from pnnx's NAME_pnnx.py (torch), batch dim added to the inputs; None
    when the files or torch are not here."""
    if not pnnx_param.is_file() or not installed("torch"):
        return None
    from ..formats import open_model
    from . import framework_references

    model = open_model(pnnx_param, weights=False)
    if "pnnx_py" not in model.references.methods:
        return None
    model = open_model(pnnx_param)
    return framework_references(model, [x[None] for x in inputs], methods=["pnnx_py"]).refs


def first_over(
    graph: Graph, run: Mapping[str, np.ndarray], ref: Mapping[str, np.ndarray], jump: float
) -> tuple[str | None, float | None]:
    for op in graph.operators:
        for o in op.outputs:
            if o.name in run and o.name in ref:
                err = rel_error(run[o.name], ref[o.name])
                if err > jump:
                    return op.name, err
    return None, None


def compare_ncnn(
    param: str | Path,
    inputs: Sequence[np.ndarray],
    *,
    bin_path: str | Path | None = None,
    expected: Sequence[np.ndarray] = (),
    pnnx_param: str | Path | None = None,
    why: bool = True,
    options: Sequence[str] = PRECISION_OPTIONS + ALGORITHM_OPTIONS,
    jump: float = JUMP,
    timeout: float | None = None,
) -> NcnnReport:
    """The report of the module docstring for `inputs` (ncnn's blobs: no batch dim). `options`:
    the ncnn options the sweep turns on one at a time (`why=False`: one baseline run only)."""
    from ..ncnn import default_bin_path, load_ncnn, read_param
    from ..ncnn.weights import write_bin
    from ..runtime import RuntimeGraph

    param = Path(param)
    bin_file = Path(bin_path) if bin_path is not None else default_bin_path(param)
    graph = load_ncnn(param, bin_file)
    arrays = [np.asarray(x, np.float32) for x in inputs]
    run = RuntimeGraph.from_graph(graph).build().steps(*arrays)
    for _ in run:
        pass
    ours = {k: np.asarray(v) for k, v in run.values.items() if k in graph.operands}
    notes: list[str] = []
    refs = torch_operands(Path(pnnx_param) if pnnx_param else pnnx_sibling(param), arrays)
    if refs is None:
        notes.append("no per-layer PyTorch values (needs torch and pnnx's NAME_pnnx.py beside NAME.pnnx.param)")
    aligned = align(graph, ours, refs or {}, expected)
    torch_ref = {blob: v for blob, (_, _, v) in aligned.items()}
    storage = weight_storage(graph)

    feeds = {op.outputs[0].name: x for op, x in zip(graph.inputs, arrays)}
    blobs = list(graph.operands)
    labels: list[str] = []
    runs: list[tuple[Path, Path, dict[str, bool] | None]] = []
    ncnn_runs: list[dict[str, np.ndarray]] = []
    version = None
    with tempfile.TemporaryDirectory(prefix="kuiper-ncnn-") as tmp:
        if installed("ncnn"):
            runs.append((param, bin_file, {}))
            labels.append("baseline (all options off)")
            if why:
                for option in options:
                    runs.append((param, bin_file, {option: True}))
                    labels.append(option)
                if storage != "none":
                    other = Path(tmp) / "restored.ncnn.bin"
                    other.write_bytes(write_bin(read_param(param).layers, _attrs(graph), fp16=storage == "fp32"))
                    runs.append((param, other, {}))
                    labels.append("weights as fp16 (pnnx default)" if storage == "fp32" else "weights widened to fp32")
                runs.append((param, bin_file, None))
                labels.append("ncnn defaults (this CPU)")
            from .isolated import IsolatedRunError, run_ncnn

            try:
                version, ncnn_runs = run_ncnn(runs, feeds, blobs, timeout)
            except IsolatedRunError as e:
                notes.append(f"ncnn could not run this model: {e}")
        else:
            notes.append("ncnn is not installed (pip install ncnn): no ncnn column")
    base = ncnn_runs[0] if ncnn_runs else {}
    rows = []
    for i, op in enumerate(graph.operators):
        for o in op.outputs:
            b = o.name
            t = aligned.get(b)
            rows.append(
                BlobRow(
                    i,
                    op.name,
                    op.type.removeprefix("ncnn."),
                    b,
                    tuple(np.shape(ours[b])),
                    rel_error(ours[b], base[b]) if b in base else None,
                    rel_error(ours[b], torch_ref[b]) if b in torch_ref else None,
                    rel_error(base[b], torch_ref[b]) if b in base and b in torch_ref else None,
                    t[0] if t else None,
                    t[1] if t else "",
                )
            )
    reference, ref = ("PyTorch", torch_ref) if torch_ref else ("ncnn with every option off", base)
    outs = [op.inputs[0].name for op in graph.outputs]
    # the first layer over `jump`: against PyTorch's layers when known, else against ncnn's own
    # run with every option off (PyTorch's outputs alone would name the last layer every time)
    per_layer = any(b not in outs for b in torch_ref)
    layer_ref = ref if per_layer or not base else base
    layer_against = reference if layer_ref is ref else "ncnn with every option off"
    option_runs = []
    for label, values in zip(labels, ncnn_runs):
        if ref is base and values is base:
            continue
        final = max((rel_error(values[o], ref[o]) for o in outs if o in ref), default=0.0)
        layer, err = (None, None) if values is layer_ref else first_over(graph, values, layer_ref, jump)
        option_runs.append(OptionRun(label, final, layer, err))
    if layer_against != reference:
        notes.append(f"the first layer over {jump:g} is against {layer_against} (PyTorch gave only the outputs)")
    ours_first = first_over(graph, ours, torch_ref, jump) if torch_ref else (None, None)
    advice = _advice(storage, option_runs, ours_first, reference, jump)
    return NcnnReport(param.name, storage, reference, rows, option_runs, advice, notes, version, jump, base, torch_ref)


def _attrs(graph: Graph) -> list[dict[str, Any]]:
    """The weights of each ncnn layer in file order (the Input and layers, not the added outputs)."""
    return [op.attrs for op in graph.operators if op.type != "pnnx.Output"]


def _advice(
    storage: str, runs: list[OptionRun], ours_first: tuple[str | None, float | None], reference: str, jump: float
) -> list[str]:
    """What a deployer does about it, one sentence per cause, the largest first."""
    said: list[str] = []
    if storage == "fp16" and reference == "PyTorch":
        layer, err = ours_first
        if layer is not None:
            said.append(
                f"weights stored as fp16 by pnnx: even in fp32 arithmetic the blobs leave PyTorch by {err:.1e} "
                f"from layer {layer}; convert with fp16=0, or accept it"
            )
    base = next((r for r in runs if r.label.startswith("baseline")), None)
    floor = base.final_error if base is not None else 0.0
    causes = [r for r in runs if r.first_layer is not None and not r.label.startswith(("baseline", "ncnn defaults"))]
    causes = [r for r in causes if not r.final_error <= max(2 * floor, jump)]  # NaN included
    for r in sorted(causes, key=lambda r: -r.final_error if r.final_error == r.final_error else -np.inf):
        if r.final_error != r.final_error or r.final_error == float("inf"):
            said.append(
                f"{r.label}=True breaks the answer (NaN or inf at the output; {r.first_error:.1e} already at layer "
                f"{r.first_layer}): leave net.opt.{r.label} = False"
            )
            continue
        if r.label.startswith("weights as fp16"):
            said.append(
                f"pnnx's default fp16=1 would store the weights as fp16: {r.final_error:.1e} at the output, "
                f"from layer {r.first_layer}; keep fp16=0"
            )
        elif r.label.startswith("weights widened"):
            continue
        else:
            said.append(
                f"{r.label}=True moves the output by {r.final_error:.1e} from layer {r.first_layer}: "
                f"set net.opt.{r.label} = False to match {reference}, or accept {r.final_error:.1e}"
            )
    default = next((r for r in runs if r.label.startswith("ncnn defaults")), None)
    if default is not None:
        said.append(
            f"with ncnn's default options on this CPU the output is {default.final_error:.1e} from {reference}"
            + (f", first over {jump:g} at layer {default.first_layer}" if default.first_layer else "")
        )
    if not said:
        said.append(f"every ncnn run stays within {jump:g} of {reference} layer by layer")
    return said
