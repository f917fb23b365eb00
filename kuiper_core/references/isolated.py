"""pnnx's generated code run in a child process under memory and time limits (pnnx_py.py).

The code passed the check of code_check.py, but torch's operators still run on sizes and
arguments the file chose (`torch.ones(1 << 36)`, an operator that crashes on odd arguments,
a long matmul): in the app's process that would take every session down with it. The child
gets the inputs and gives back the operands as uncompressed .npz files in a private temporary
folder; an UnsafeCode refusal comes back as itself.

    python -m kuiper_core.references.isolated FOLDER   # the child (FOLDER/job.json)
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .. import limits
from .code_check import UnsafeCode

ENV_TIMEOUT = "KUIPER_REFERENCE_TIMEOUT"
DEFAULT_TIMEOUT = 300.0
TORCH_BYTES = 2 << 30  # address space torch and Python take before any tensor


class IsolatedRunError(RuntimeError):
    """The child ran past a limit or failed: the message says which."""


def memory_limit() -> int:
    return limits.current().max_planned_bytes + TORCH_BYTES


def run_isolated(
    pnnx_py: Path, inputs: list[np.ndarray], bin_path: str | Path | None, timeout: float | None
) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    timeout = float(os.environ.get(ENV_TIMEOUT, DEFAULT_TIMEOUT)) if timeout is None else timeout
    root = str(Path(__file__).resolve().parent.parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(prefix="kuiper-pnnx-py-") as tmp:
        folder = Path(tmp)
        np.savez(folder / "inputs.npz", *inputs)
        job = {
            "python": str(Path(pnnx_py).resolve()),
            "bin": None if bin_path is None else str(Path(bin_path).resolve()),
        }
        job["memory"] = memory_limit()
        job["cpu"] = int(timeout) + 1
        (folder / "job.json").write_text(json.dumps(job))
        argv = [sys.executable, "-m", "kuiper_core.references.isolated", str(folder)]
        try:
            proc = subprocess.run(
                argv, env=env, cwd=tmp, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise IsolatedRunError(f"pnnx's code ran past its time limit ({timeout:g} s, {ENV_TIMEOUT})") from None
        error = folder / "error.json"
        if error.exists():
            kind, message = json.loads(error.read_text())
            if kind == "UnsafeCode":
                raise UnsafeCode(message)
            raise IsolatedRunError(f"{kind}: {message}")
        if proc.returncode != 0 or not (folder / "operands.npz").exists():
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
            how = f"was killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exited {proc.returncode}"
            limit = f"{job['memory'] >> 20} MiB"
            raise IsolatedRunError(f"pnnx's code {how} (memory limit {limit}): {' | '.join(tail)[-300:]}")
        with np.load(folder / "operands.npz", allow_pickle=False) as z:
            refs = {k[2:]: z[k] for k in z.files if k.startswith("v:")}
            outputs = [z[f"o:{i}"] for i in range(sum(k.startswith("o:") for k in z.files))]
    return refs, outputs


def _child(folder: Path) -> None:
    job = json.loads((folder / "job.json").read_text())
    resource.setrlimit(resource.RLIMIT_AS, (job["memory"], job["memory"]))
    resource.setrlimit(resource.RLIMIT_CPU, (job["cpu"], job["cpu"]))
    from .pnnx_py import capture_operands

    with np.load(folder / "inputs.npz", allow_pickle=False) as z:
        inputs = [z[f"arr_{i}"] for i in range(len(z.files))]
    try:
        refs, outputs = capture_operands(job["python"], inputs, job["bin"], isolated=False)
    except Exception as e:  # noqa: BLE001  -- reported to the parent by kind and message
        (folder / "error.json").write_text(json.dumps([type(e).__name__, str(e)[:1000]]))
        return
    arrays = {f"v:{k}": v for k, v in refs.items()} | {f"o:{i}": y for i, y in enumerate(outputs)}
    np.savez(folder / "operands.npz", **arrays)


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
