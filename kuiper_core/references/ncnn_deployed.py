"""The deployed ncnn model as a reference for the Forward page: ncnn's own value of each of our
operands, with PyTorch's where known, and the "why it differs" of `kuiper compare --ncnn`.

    found = deployed_files(opened)                        # (m.ncnn.param, m.ncnn.bin) or None
    run = deployed_references(opened, [x], ours)          # run.refs: our operand -> ncnn's value

Two models have a deployed ncnn model: an ncnn model itself (our operands are its blobs), and a
PNNX model with the ncnn files pnnx wrote beside it (a conversion keeps them in its cache entry).
For the latter ncnn's blobs are lined up with our operands by content (ncnn_view.align: the
operand of the same size whose values are nearest, as `kuiper compare --ncnn` lines them up with
PyTorch's), ncnn's (c, h, w) taking our batch-1 shape. ncnn runs in a child under the current
limits (ncnn_compare.compare_ncnn, isolated.run_ncnn).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..explore.ncnn_view import align
from ..formats.base import OpenedModel, installed
from . import ReferenceError
from .ncnn_compare import NcnnReport, compare_ncnn

INSTALL = "ncnn, to run the deployed model layer by layer (pip install ncnn)"


@dataclass
class DeployedRun:
    """ncnn's values keyed by our operands, PyTorch's where known, and the report they came from."""

    refs: dict[str, np.ndarray]  # our operand -> ncnn's value (every option off), shaped as ours
    blobs: dict[str, str]  # our operand -> the ncnn blob it is
    torch: dict[str, np.ndarray]  # our operand -> PyTorch's value, where pnnx's code ran
    report: NcnnReport
    computed: int  # our operands with a value in the run
    unmapped: list[str] = field(default_factory=list)  # of those, the ones no blob matched


def deployed_files(opened: OpenedModel | None) -> tuple[Path | None, Path | None] | None:
    """(the .ncnn.param, its .ncnn.bin) of the deployed model, on disk where they are (None for an
    upload's: the caller gives its bytes); None when the model has no deployed ncnn model."""
    if opened is None:
        return None
    if opened.format == "ncnn":
        return opened.source, opened.ncnn_bin
    files = opened.files
    if files is not None and files.ncnn_param is not None and files.ncnn_bin is not None:
        return files.ncnn_param, files.ncnn_bin
    return None


@contextlib.contextmanager
def _on_disk(
    found: tuple[Path | None, Path | None], data: tuple[bytes, bytes | None] | None
) -> Iterator[tuple[Path, Path]]:
    """The files ncnn reads: on disk already, or an upload's bytes in a private folder."""
    param, binf = found
    if param is not None and binf is not None:
        yield param, binf
        return
    if data is None:
        raise ReferenceError("the ncnn model's files are not on disk and no bytes were given")
    from ..children import private_folder

    with private_folder("kuiper-ncnn-upload-") as folder:
        (folder / "m.ncnn.param").write_bytes(data[0])
        (folder / "m.ncnn.bin").write_bytes(data[1] or b"")
        yield folder / "m.ncnn.param", folder / "m.ncnn.bin"


def deployed_references(
    opened: OpenedModel,
    inputs: Sequence[np.ndarray],
    ours: Mapping[str, Any],
    *,
    data: tuple[bytes, bytes | None] | None = None,
    expected: Sequence[np.ndarray] = (),
    why: bool = True,
    timeout: float | None = None,
) -> DeployedRun:
    """ncnn's run of the deployed model on `inputs` (ours: without the batch dim for an ncnn model,
    batch 1 for a PNNX one) against `ours` (every operand's value in our run). `data`: an
    uploaded ncnn model's (.param, .bin) bytes; `expected`: PyTorch's outputs without the batch
    dim, when known (the option table is then measured against them). ReferenceError when ncnn
    cannot run it here."""
    found = deployed_files(opened)
    if found is None:
        raise ReferenceError(f"{opened.name} has no deployed ncnn model (pnnx writes one beside each conversion)")
    if not installed("ncnn"):
        raise ReferenceError(f"not available here: {INSTALL}")
    deployed = opened.format == "ncnn"
    arrays = [np.asarray(x) for x in inputs]
    if not deployed and any(x.ndim == 0 or x.shape[0] != 1 for x in arrays):
        raise ReferenceError("ncnn's blobs have no batch dim: the deployed model is compared at batch 1 only")
    chw = arrays if deployed else [x[0] for x in arrays]
    pnnx_param = None if deployed or opened.files is None else opened.files.param
    with _on_disk(found, data) as (param, binf):
        report = compare_ncnn(
            param, chw, bin_path=binf, expected=expected, pnnx_param=pnnx_param, why=why, timeout=timeout
        )
    if not report.values:
        raise ReferenceError("ncnn computed nothing: " + "; ".join(report.notes))
    values = {k: np.asarray(v) for k, v in ours.items() if isinstance(v, np.ndarray)}
    if deployed:
        blobs = {b: b for b in report.values if b in values}
    else:
        blobs = _aligned(report, values)
    refs = {o: _shaped(report.values[b], values[o]) for o, b in blobs.items()}
    torch = {o: _shaped(report.torch[b], values[o]) for o, b in blobs.items() if b in report.torch}
    inputs_ = {op.outputs[0].name for op in opened.graph.inputs}
    computed = [o.name for op in opened.graph.operators for o in op.outputs if o.name in values]
    computed = [o for o in computed if o not in inputs_]
    return DeployedRun(refs, blobs, torch, report, len(computed), [o for o in computed if o not in refs])


def _shaped(theirs: np.ndarray, ours: np.ndarray) -> np.ndarray:
    """ncnn's blob in our operand's shape ((c, h, w) -> (1, c, h, w)); as it is when the sizes differ
    (the comparison then says a shape mismatch: a layer of ours made another size than ncnn's)."""
    return theirs.reshape(ours.shape) if theirs.size == ours.size else theirs


def _aligned(report: NcnnReport, values: Mapping[str, np.ndarray]) -> dict[str, str]:
    """our operand -> the ncnn blob lined up with it by content (the first blob of an operand wins:
    ncnn's Split copies a blob)."""
    from ..graph import Graph

    blobs = Graph()  # ncnn's blobs in execution order: what align walks
    for name in report.values:
        blobs.add_operand(name)
    found: dict[str, str] = {}
    for blob, (operand, _, _) in align(blobs, report.values, values).items():
        found.setdefault(operand, blob)
    return found
