"""Export bundles: a pnnx export with its example inputs, PyTorch's outputs and (optionally)
every operand as pnnx's generated Python computed it. The one reader of both layouts:

- a case folder (tests/data/ops/CASE, tests/data/optlevel/MODEL/oN, …): `model.pnnx.param`
  + `.bin`, `inputs.npz` (in0, in1, …), `expected.npz` (out0, out1, …) and `operands.npz`
  (keyed by operand name), as tools/pnnx_export.py writes them;
- a sample (sample_models/NAME.*): `NAME.pnnx.param` + `.bin`, `NAME.input.npy` (its one
  input), `NAME.expected.npz` and `NAME.operands.npz`, as tools/export_samples.py writes them.

These are the project's own files (np.load, no pickles); an upload goes through npy.read_npz.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


def numbered(path: str | Path, prefix: str) -> list[np.ndarray]:
    """The arrays `{prefix}0`, `{prefix}1`, … of a .npz, in order."""
    with np.load(path) as z:
        return [z[f"{prefix}{i}"] for i in range(len(z.files))]


@dataclass(frozen=True)
class Bundle:
    param: Path
    inputs: list[np.ndarray]
    expected: list[np.ndarray]  # PyTorch's outputs, tuples flattened
    operands_path: Path | None  # every operand's reference, where the export kept them

    @property
    def bin(self) -> Path:
        return self.param.with_suffix(".bin")

    def operands(self) -> dict[str, np.ndarray]:
        """Operand name -> PyTorch's value ({} where the export has none)."""
        if self.operands_path is None:
            return {}
        with np.load(self.operands_path) as z:
            return {k: z[k] for k in z.files}


def open_bundle(path: str | Path) -> Bundle:
    """A case folder, or a sample named by its prefix (`sample_models/resnet18`) or its .param."""
    p = Path(path)
    if p.is_dir():
        operands = p / "operands.npz"
        return Bundle(
            p / "model.pnnx.param",
            numbered(p / "inputs.npz", "in"),
            numbered(p / "expected.npz", "out"),
            operands if operands.exists() else None,
        )
    stem = p.name.removesuffix(".pnnx.param")
    base = p.with_name(stem)
    operands = base.with_name(f"{stem}.operands.npz")
    return Bundle(
        base.with_name(f"{stem}.pnnx.param"),
        [np.load(base.with_name(f"{stem}.input.npy"))],
        numbered(base.with_name(f"{stem}.expected.npz"), "out"),
        operands if operands.exists() else None,
    )
