"""Framework code run in a child process under memory and time limits: pnnx's generated
Python (pnnx_py.py), onnxruntime with every intermediate value exposed (onnx_values.py) and
an original TorchScript module (torchscript.py).

Both run what a file chose. pnnx's code passed the check of code_check.py, but torch's
operators still run on sizes and arguments the file chose (`torch.ones(1 << 36)`, an operator
that crashes on odd arguments, a long matmul). An ONNX file's constant subgraphs run in
onnxruntime however big their values (pnnx folded them away, so our engine's limits never
saw them): a 309-byte .onnx of 8 ReLUs over a ConstantOfShape of 2^26 took 2.7 GB in the
server's process. In the app's process either would take every session down with it.

The child gets its job and the inputs as files in a private temporary folder, and gives back
its arrays as an uncompressed .npz: what it returns is bounded by max_planned_bytes (a
LimitError beyond), what it computes by its address space (max_planned_bytes + 2 GiB for the
framework) and by KUIPER_REFERENCE_TIMEOUT (300 s). Starting it costs the framework's import.

    python -m kuiper_core.references.child FOLDER   # the child (FOLDER/job.json): child.py
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import limits
from ..children import private_folder, slot
from ..errors import LimitError
from .code_check import UnsafeCode

ENV_TIMEOUT = "KUIPER_REFERENCE_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
FRAMEWORK_BYTES = 2 << 30  # address space torch or onnxruntime and Python take before any tensor


class IsolatedRunError(RuntimeError):
    """The child ran past a limit or failed: the message says which."""


class ChildTimeout(IsolatedRunError):
    """The child ran past its time limit and was stopped."""


def memory_limit() -> int:
    return limits.current().max_planned_bytes + FRAMEWORK_BYTES


def child_timeout(asked: float | None = None) -> float:
    """Seconds a child may run: `asked`, else KUIPER_REFERENCE_TIMEOUT, else DEFAULT_TIMEOUT
    within the current limits' max_child_seconds (the app's are lower)."""
    if asked is not None:
        return float(asked)
    try:
        return float(os.environ[ENV_TIMEOUT])
    except (KeyError, ValueError):
        return min(DEFAULT_TIMEOUT, float(limits.current().max_child_seconds))


def _spawn(
    what: str, job: dict[str, Any], inputs: list[np.ndarray], timeout: float | None
) -> tuple[Path, contextlib.ExitStack]:
    """Run `job` in a child once a child slot is free (children.slot); (its folder, what
    removes the folder) once it wrote result.npz."""
    timeout = child_timeout(timeout)
    root = str(Path(__file__).resolve().parent.parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    tmp = contextlib.ExitStack()
    folder = tmp.enter_context(private_folder("kuiper-reference-"))
    try:
        np.savez(folder / "inputs.npz", *inputs)
        job = {**job, "memory": memory_limit(), "cpu": int(timeout) + 1, "budget": limits.current().max_planned_bytes}
        (folder / "job.json").write_text(json.dumps(job))
        argv = [sys.executable, "-m", "kuiper_core.references.child", str(folder)]
        try:
            with slot(what):
                proc = subprocess.run(
                    argv, env=env, cwd=folder, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
                )
        except subprocess.TimeoutExpired:
            raise ChildTimeout(f"{what} ran past its time limit ({timeout:g} s, {ENV_TIMEOUT})") from None
        error = folder / "error.json"
        if error.exists():
            kind, message, fields = json.loads(error.read_text())
            if kind == "UnsafeCode":
                raise UnsafeCode(message)
            if kind == "LimitError":
                raise LimitError(message, **fields)
            raise IsolatedRunError(f"{what} failed: {kind}: {message}")
        if proc.returncode != 0 or not (folder / "result.npz").exists():
            tail = " | ".join(proc.stderr.decode(errors="replace").strip().splitlines()[-3:])[-300:]
            how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited {proc.returncode}"
            raise IsolatedRunError(f"{what} {how} (memory limit {job['memory'] >> 20} MiB): {tail}")
    except BaseException:
        tmp.close()
        raise
    return folder, tmp


def _arrays(folder: Path, prefix: str) -> list[np.ndarray]:
    with np.load(folder / "result.npz", allow_pickle=False) as z:
        count = sum(k.startswith(prefix) for k in z.files)
        return [z[f"{prefix}{i}"] for i in range(count)]


def run_pnnx_py(
    pnnx_py: Path, inputs: list[np.ndarray], bin_path: str | Path | None, timeout: float | None
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    """pnnx_py.capture_operands in a child: (operands by number, outputs)."""
    job: dict[str, Any] = {"kind": "pnnx_py", "python": str(pnnx_py.resolve())}
    job["bin"] = None if bin_path is None else str(Path(bin_path).resolve())
    folder, tmp = _spawn("pnnx's code", job, inputs, timeout)
    with tmp:
        names = json.loads((folder / "result.json").read_text())
        return dict(zip(names, _arrays(folder, "v:"))), _arrays(folder, "o:")


def _on_disk(source: str | Path | bytes, spare: Path) -> Path:
    """The model file the child reads: `source` itself, or its bytes written to `spare`."""
    if isinstance(source, bytes):
        spare.write_bytes(source)
        return spare
    return Path(source).resolve()


def run_torchscript(source: str | Path | bytes, inputs: list[np.ndarray], timeout: float | None) -> list[np.ndarray]:
    """torchscript.torchscript_outputs in a child: the outputs."""
    with private_folder("kuiper-torchscript-") as keep:
        path = _on_disk(source, keep / "model.pt")
        folder, tmp = _spawn("the TorchScript module", {"kind": "torchscript", "source": str(path)}, inputs, timeout)
    with tmp:
        return _arrays(folder, "o:")


def run_onnx(source: str | Path | bytes, inputs: list[np.ndarray], timeout: float | None) -> dict[str, Any]:
    """onnx_values.run_onnx in a child: the fields of its OnnxRun (onnx_values makes it)."""
    with private_folder("kuiper-onnx-") as keep:
        path = _on_disk(source, keep / "model.onnx")
        folder, tmp = _spawn("onnxruntime", {"kind": "onnx", "source": str(path)}, inputs, timeout)
    with tmp:
        meta = json.loads((folder / "result.json").read_text())
        values = [(n, t, a) for (n, t), a in zip(meta["values"], _arrays(folder, "v:"))]
        constants = list(zip(meta["constants"], _arrays(folder, "c:")))
        return {
            "values": values,
            "outputs": _arrays(folder, "o:"),
            "version": meta["version"],
            "sources": meta["sources"],
            "constants": constants,
            "first_input": meta["first_input"],
            "producers": meta.get("producers", {}),
        }


def run_ncnn(
    runs: Sequence[tuple[str | Path, str | Path, dict[str, bool] | None]],
    inputs: dict[str, np.ndarray],
    blobs: list[str],
    timeout: float | None,
) -> tuple[str, list[dict[str, np.ndarray]]]:
    """ncnn_blobs.ncnn_blobs in a child, once per (param, bin, options) of `runs` (one import
    of ncnn for all; options None: ncnn's defaults): (ncnn's version, each run's blobs by name)."""
    job: dict[str, Any] = {
        "kind": "ncnn",
        "inputs": list(inputs),
        "blobs": blobs,
        "runs": [{"param": str(Path(p).resolve()), "bin": str(Path(b).resolve()), "options": o} for p, b, o in runs],
    }
    folder, tmp = _spawn("ncnn", job, list(inputs.values()), timeout)
    with tmp:
        meta = json.loads((folder / "result.json").read_text())
        results = []
        for r in range(len(runs)):
            values = _arrays(folder, f"r{r}:")
            results.append(dict(zip(blobs, values)))
        return meta["version"], results
