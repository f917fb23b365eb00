"""Export the models whose output sizes follow their input values, converted by real pnnx,
with PyTorch's outputs for several input sets (tests/test_value_shapes.py).

pnnx annotates such outputs from its own dummy data (a (2,5) mask selecting all ten entries:
`#3=(10)f32`; one_hot of a (2,3) input: `(2,3,2)`), so these are the models the shape check
must read loosely. Each case lands in tests/data/value_shapes/<case>/ as
model.pnnx.param/.bin + runs.npz: `in{i}_{k}` and PyTorch's `out{i}_{k}` for input set k.

    python tools/export_value_shapes.py

Needs the `export` extra (torch==2.13.0 + pnnx).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from pnnx_export import export_module  # noqa: E402

OUT = ROOT / "tests" / "data" / "value_shapes"


def cases() -> dict:
    """name -> (function, [input sets], pnnx optlevel); the first set is the one pnnx traces."""
    import torch
    import torch.nn.functional as F

    ids = lambda *rows: torch.tensor(rows, dtype=torch.int64)  # noqa: E731
    g = torch.Generator().manual_seed(0)
    return {
        # num_classes = max + 1: 4, 2, 7 classes, and another batch
        "one_hot_free": (
            lambda i: F.one_hot(i) * 2,
            [
                [ids([0, 3, 1], [2, 1, 0])],
                [ids([0, 1, 1], [1, 0, 0])],
                [ids([6, 0, 1], [2, 5, 0])],
                [ids([0, 1, 2], [2, 1, 0], [4, 4, 4], [0, 0, 0])],
            ],
            2,
        ),
        # the class count flows on: (2, classes) after the sum
        "one_hot_sum": (
            lambda i, x: F.one_hot(i).float().sum(1) + x.sum(),
            [
                [ids([0, 3, 1], [2, 1, 0]), torch.randn(2, generator=g)],
                [ids([0, 1, 1], [1, 0, 0]), torch.randn(2, generator=g)],
                [ids([5, 1, 1], [1, 0, 5]), torch.randn(2, generator=g)],
            ],
            2,
        ),
        # a tensor of counts: sum(counts) rows, none at all in the last set
        "repeat_tensor": (
            lambda x, r: torch.repeat_interleave(x, r, dim=0) * 2,
            [
                [torch.randn(3, 4, generator=g), ids(1, 0, 2)],
                [torch.randn(3, 4, generator=g), ids(3, 3, 3)],
                [torch.randn(3, 4, generator=g), ids(0, 0, 0)],
            ],
            2,
        ),
        # x[x > 0]: as many entries as are positive, none in the last set
        "bool_mask": (
            lambda x: x[x > 0] * 2,
            [[torch.randn(2, 5, generator=g)], [torch.randn(2, 5, generator=g) + 1], [-torch.rand(2, 5, generator=g)]],
            2,
        ),
        # the selection's size read back: optlevel 2 bakes pnnx's dummy count in (shape=(10,1),
        # +10: wrong for every other input, pnnx's doing); optlevel 0 keeps Tensor.size, which
        # FoldStaticShapes must then not fold from the annotation either
        "mask_size_o0": (_mask_size, [[torch.randn(2, 5, generator=g)], [torch.randn(2, 5, generator=g) - 1]], 0),
    }


def _mask_size(x):
    y = x[x > 0]
    return y.reshape(y.size(0), 1) * 2 + y.size(0)


def main() -> int:
    import torch
    import torch.nn as nn

    class Fn(nn.Module):
        def __init__(self, fn) -> None:
            super().__init__()
            self.fn = fn

        def forward(self, *xs):
            return self.fn(*xs)

    for name, (fn, sets, optlevel) in cases().items():
        dest = OUT / name
        # optlevel through the converter CLI: pnnx.export's own run of the generated
        # model_pnnx.py fails on one_hot's `num_classes=-1` line
        export_module(Fn(fn), sets[0], dest, capture_operands=False, optlevel=optlevel)
        for extra in ("inputs.npz", "expected.npz"):
            (dest / extra).unlink(missing_ok=True)
        runs: dict[str, np.ndarray] = {}
        for k, xs in enumerate(sets):
            with torch.no_grad():
                ys = fn(*xs)
            ys = ys if isinstance(ys, tuple) else (ys,)
            runs.update({f"in{i}_{k}": x.numpy() for i, x in enumerate(xs)})
            runs.update({f"out{i}_{k}": y.numpy() for i, y in enumerate(ys)})
        np.savez(dest / "runs.npz", **runs)
        print(f"{name}: {len(sets)} input sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
