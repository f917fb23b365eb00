"""The child process of isolated.py: runs one job (pnnx's generated Python, onnxruntime
with every value exposed, a TorchScript module, or ncnn with every blob extracted) from
FOLDER/job.json and FOLDER/inputs.npz under the memory and CPU limits the job names, and
writes result.json + result.npz, or error.json.

    python -m kuiper_core.references.child FOLDER

Apart from isolated.py (the parent side) so that the in-process runners (pnnx_py.py,
onnx_values.py), which start a child through isolated.py, are imported only here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .. import limits
from ..children import set_rlimits
from ..errors import LimitError


def _child(folder: Path) -> None:
    job = json.loads((folder / "job.json").read_text())
    set_rlimits(job["memory"], job["cpu"])  # at most the hard limits this child inherited
    with np.load(folder / "inputs.npz", allow_pickle=False) as z:
        inputs = [z[f"arr_{i}"] for i in range(len(z.files))]
    try:
        with limits.use(max_planned_bytes=job["budget"]):
            meta, arrays = _JOBS[job["kind"]](job, inputs)
            budget = limits.Budget("max_planned_bytes", "the reference values returned", limits.current())
            for a in arrays.values():
                budget.add(a)
    except Exception as e:  # noqa: BLE001  -- reported to the parent by kind and message
        fields = {k: getattr(e, k) for k in ("limit", "maximum", "value")} if isinstance(e, LimitError) else {}
        message = e.message if isinstance(e, LimitError) else str(e)[:1000]
        (folder / "error.json").write_text(json.dumps([type(e).__name__, message, fields]))
        return
    (folder / "result.json").write_text(json.dumps(meta))
    kept: dict[str, Any] = arrays  # (NumPy's stub types savez's keywords as allow_pickle's)
    np.savez(folder / "result.npz", **kept)


def _pnnx_py_job(job: dict[str, Any], inputs: list[np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    from .pnnx_py import capture_operands

    refs, outputs = capture_operands(job["python"], inputs, job["bin"], isolated=False)
    arrays = {f"v:{i}": v for i, v in enumerate(refs.values())} | {f"o:{i}": y for i, y in enumerate(outputs)}
    return list(refs), arrays


def _onnx_job(job: dict[str, Any], inputs: list[np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    from .onnx_values import run_onnx

    run = run_onnx(job["source"], inputs, isolated=False)
    meta = {
        "values": [(n, t) for n, t, _ in run.values],
        "constants": [n for n, _ in run.constants],
        "version": run.version,
        "sources": run.sources,
        "first_input": run.first_input,
        "producers": run.producers,
    }
    arrays = {f"v:{i}": a for i, (_, _, a) in enumerate(run.values)}
    arrays |= {f"o:{i}": y for i, y in enumerate(run.outputs)} | {f"c:{i}": a for i, (_, a) in enumerate(run.constants)}
    return meta, arrays


def _torchscript_job(job: dict[str, Any], inputs: list[np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    from .torchscript import torchscript_outputs

    outputs = torchscript_outputs(job["source"], inputs, isolated=False)
    return len(outputs), {f"o:{i}": y for i, y in enumerate(outputs)}


def _ncnn_job(job: dict[str, Any], inputs: list[np.ndarray]) -> tuple[Any, dict[str, np.ndarray]]:
    from .ncnn_blobs import ncnn_blobs, ncnn_version

    arrays: dict[str, np.ndarray] = {}
    feeds = dict(zip(job["inputs"], inputs))
    for r, run in enumerate(job["runs"]):
        blobs = ncnn_blobs(run["param"], run["bin"], feeds, job["blobs"], run["options"])
        arrays |= {f"r{r}:{i}": blobs[name] for i, name in enumerate(job["blobs"])}
    return {"version": ncnn_version()}, arrays


_JOBS = {"pnnx_py": _pnnx_py_job, "onnx": _onnx_job, "torchscript": _torchscript_job, "ncnn": _ncnn_job}

if __name__ == "__main__":
    _child(Path(sys.argv[1]))
