"""Convert a plain-torch module with the real `pnnx` converter and capture references.

Needs the `export` extra (torch==2.13.0, pnnx). Used by tools/export_opcases.py and
tools/export_samples.py; the runtime never imports this.

For a module `m` and example inputs, `export_module` writes into `out_dir`:
  NAME.pnnx.param, NAME.pnnx.bin       what pnnx wrote
  inputs.npz                           in0, in1, … (the example inputs)
  expected.npz                         out0, out1, … PyTorch's outputs of `m` (flattened tuples)
  operands.npz (optional)              every operand v_N computed by pnnx's generated
                                       NAME_pnnx.py, keyed by PNNX operand name ("N")
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # kuiper_core, when run as a script


def _flatten(value: Any) -> list[Any]:
    from kuiper_core.references.pnnx_py import flatten

    return flatten(value)


def _capture_operands(pnnx_py: Path, inputs: Sequence[Any]) -> dict[str, np.ndarray]:
    """Every operand v_N of pnnx's generated NAME_pnnx.py (kuiper_core.references.pnnx_py)."""
    from kuiper_core.references.pnnx_py import capture_operands

    return capture_operands(pnnx_py, inputs)[0]


def export_module(
    module: Any,
    inputs: Sequence[Any],
    out_dir: str | Path,
    name: str = "model",
    *,
    capture_operands: bool = True,
    optlevel: int | None = None,
    inputshape2: Sequence[Sequence[int]] | None = None,
    trace_without_grad: bool = False,
    keep_python: str | Path | None = None,
    converter: str | Path | None = None,
) -> Path:
    """Convert `module` with pnnx; write the files listed in the module docstring.

    `inputshape2`: a second shape per input; pnnx then keeps shape-dependent values
    dynamic (`?` dims, size expressions, torch.zeros with a `$size` input) instead of
    folding them into constants. Uses the converter CLI like `optlevel`.
    `trace_without_grad`: trace under torch.no_grad() (with the CLI), as a user exporting for
    inference does: PyTorch then records its fused fast paths (nn.TransformerEncoderLayer as
    aten::_transformer_encoder_layer_fwd).
    `keep_python`: a folder to copy pnnx's generated NAME_pnnx.py into (it opens NAME.pnnx.bin by
    a relative path: run it from the export folder).
    `converter`: another pnnx binary (an older release, tools/old_pnnx.py) instead of the
    installed one; run through the CLI at `optlevel` (default 2).
    """
    import torch
    import pnnx

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    inputs = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in inputs]
    with torch.no_grad():
        expected = _flatten(module(*inputs))

    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        pt = tmp_path / f"{name}.pt"
        if optlevel is None and inputshape2 is None and not trace_without_grad and converter is None:
            pnnx.export(module, str(pt), tuple(inputs))
        else:
            # The converter CLI, so that optlevel can be chosen; check its exit status.
            with torch.no_grad() if trace_without_grad else contextlib.nullcontext():
                traced = torch.jit.trace(module, tuple(inputs))
            traced.save(str(pt))
            # Each shape carries its dtype (pnnx assumes f32 otherwise and fails on int inputs).
            pnnx_type = {
                torch.float32: "f32",
                torch.int64: "i64",
                torch.int32: "i32",
                torch.float64: "f64",
                torch.bool: "bool",
            }
            shapes = ",".join("[" + ",".join(str(d) for d in x.shape) + "]" + pnnx_type[x.dtype] for x in inputs)
            exe = str(converter) if converter is not None else pnnx.EXEC_PATH
            cmd = [exe, str(pt), f"inputshape={shapes}", f"optlevel={2 if optlevel is None else optlevel}"]
            if inputshape2 is not None:
                shapes2 = [
                    "[" + ",".join(str(d) for d in s) + "]" + pnnx_type[x.dtype] for s, x in zip(inputshape2, inputs)
                ]
                cmd.append("inputshape2=" + ",".join(shapes2))
            res = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
            if res.returncode != 0:
                # At optlevel 0/1 pnnx 20261020 often aborts (std::out_of_range) in its onnx
                # or ncnn writer, which run after it saved .pnnx.param/.bin and then
                # NAME_pnnx.py: when that script exists, the .pnnx files are complete.
                if not (tmp_path / f"{name}_pnnx.py").exists():
                    raise RuntimeError(f"pnnx failed ({res.returncode}): {res.stderr[-2000:]}")
                print(
                    f"note: pnnx aborted ({res.returncode}) after writing {name}.pnnx.*, in its onnx/ncnn writer",
                    file=sys.stderr,
                )
        param = tmp_path / f"{name}.pnnx.param"
        binf = tmp_path / f"{name}.pnnx.bin"
        if not param.exists() or not binf.exists():
            raise RuntimeError(f"pnnx wrote no {param.name}/{binf.name} for {name}")
        shutil.copy(param, out_dir / param.name)
        shutil.copy(binf, out_dir / binf.name)
        refs: dict[str, np.ndarray] = {}
        pnnx_py = tmp_path / f"{name}_pnnx.py"
        if keep_python is not None and pnnx_py.exists():
            Path(keep_python).mkdir(parents=True, exist_ok=True)
            shutil.copy(pnnx_py, Path(keep_python) / pnnx_py.name)
        if capture_operands and pnnx_py.exists():
            try:
                refs = _capture_operands(pnnx_py, inputs)
            except Exception as e:  # pnnx's own script can be wrong (e.g. a 4-tuple Conv2d padding)
                print(
                    f"warning: {name}_pnnx.py failed ({type(e).__name__}: {str(e)[:200]}); no operands.npz",
                    file=sys.stderr,
                )

    np.savez(out_dir / "inputs.npz", **{f"in{i}": x.numpy() for i, x in enumerate(inputs)})
    np.savez(
        out_dir / "expected.npz",
        **{
            f"out{i}": (y.detach().numpy() if isinstance(y, torch.Tensor) else np.asarray(y))
            for i, y in enumerate(expected)
        },
    )
    (out_dir / "operands.npz").unlink(missing_ok=True)  # a re-export must not keep stale references
    if refs:
        np.savez_compressed(out_dir / "operands.npz", **refs)
    return out_dir / f"{name}.pnnx.param"


if __name__ == "__main__":  # pragma: no cover
    print(__doc__)
    sys.exit(0)
