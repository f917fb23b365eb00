"""The example inputs torch.jit.trace stores in a TorchScript zip (`traced_inputs.pkl`): pnnx
takes the input shapes from them, and refuses any other shape while they are there."""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path


def records_input_shapes(zip_names: Sequence[str] | None) -> bool:
    """A TorchScript zip saved by torch.jit.trace (torch >= 2.x) records its example inputs:
    pnnx reads the input shapes from them."""
    return bool(zip_names) and any(n.endswith("/traced_inputs.pkl") for n in zip_names or ())


def forget_traced_inputs(model_file: Path) -> bool:
    """Rewrite `model_file` without the example inputs torch.jit.trace stored in it, as pnnx
    refuses other shapes than those ("input_shapes[0] expect [1,3,8,8]f32 but got
    [1,3,1024,1024]f32": kelp-o-matic's LRASPP). A trace keeps `x.size(2)` as a size op; a size
    it baked in shows in the conversion check (the original at the shapes given). False: none."""
    with zipfile.ZipFile(model_file) as z:
        infos = z.infolist()
        keep = [
            i for i in infos if not i.filename.split("/", 1)[-1].startswith(("traced_inputs.pkl", "traced_inputs/"))
        ]
        if len(keep) == len(infos):
            return False
        parts = [(i, z.read(i)) for i in keep]
    with zipfile.ZipFile(model_file, "w") as z:
        for info, data in parts:
            z.writestr(info, data)  # each entry as it was (stored, as torch writes them)
    return True
