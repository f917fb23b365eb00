"""Write the small model tests/test_conversion_check.py converts with the real pnnx and then
alters on purpose (a weight, a padding, a reshape) to see that the conversion check catches it.

Into tests/data/conversion_check/:
  probe.onnx   torch.onnx.export (TorchScript-based exporter, opset 17)
  probe.pt     torch.jit.trace(...).save (the example input recorded in it)
  probe.input.npy, probe.expected.npz (out0: the PyTorch module's output on it)
  dynamic.onnx dynamic batch, height and width (Conv2d, ReLU, a mean over the map, Linear):
               converted at the shapes of the input a user gives
  tokens.onnx, tokens.pt   two inputs of two dtypes (f32 features, i64 token ids into a 40-row
               Embedding) and two outputs: the probe's ids must stay below 40
  scalar.onnx, scalar.pt   a 0-d f32 input (a scale): pnnx's .param gives it no shape

The model: Conv2d 2→4 (3×3, padding 1: the padding a test turns to 'reflect'), ReLU, a reshape to
(1,16,6) and a transpose (the reshape a test turns into (1,6,16): same size, other order), flatten,
Linear 96→5 (the weight a test scales). A few kilobytes.

    python tools/export_conversion_check.py

Needs torch==2.13.0 and onnx.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "conversion_check"


def main() -> int:
    import torch
    from torch import nn

    class Probe(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.fc = nn.Linear(96, 5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.conv(x))  # (1,4,4,6)
            y = y.reshape(1, 16, 6).transpose(1, 2)  # (1,6,16)
            return self.fc(y.flatten(1))

    torch.manual_seed(0)
    model = Probe().eval()
    x = torch.randn(1, 2, 4, 6)
    OUT.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        y = model(x)
        torch.jit.trace(model, (x,)).save(str(OUT / "probe.pt"))
        torch.onnx.export(model, (x,), str(OUT / "probe.onnx"), dynamo=False, opset_version=17, input_names=["input"])

    class Dynamic(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.fc = nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.relu(self.conv(x)).mean((2, 3)))

    with torch.no_grad():
        torch.onnx.export(
            Dynamic().eval(),
            (x,),
            str(OUT / "dynamic.onnx"),
            dynamo=False,
            opset_version=17,
            input_names=["input"],
            dynamic_axes={"input": {0: "batch", 2: "height", 3: "width"}},
        )

    class Tokens(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(40, 6)
            self.fc = nn.Linear(6, 6)

        def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.fc(x) + self.emb(ids)  # (1,5,6)
            return torch.relu(h), h.mean(1).softmax(-1)

    class Scalar(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(5, 5)

        def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * scale

    tokens = (torch.randn(1, 5, 6), torch.randint(0, 40, (1, 5)))
    scalar = (torch.randn(1, 5), torch.tensor(0.5))
    for name, module, args, names in (
        ("tokens", Tokens(), tokens, ["x", "ids"]),
        ("scalar", Scalar(), scalar, ["x", "scale"]),
    ):
        with torch.no_grad():
            torch.jit.trace(module.eval(), args).save(str(OUT / f"{name}.pt"))
            torch.onnx.export(
                module, args, str(OUT / f"{name}.onnx"), dynamo=False, opset_version=17, input_names=names
            )
    np.save(OUT / "probe.input.npy", x.numpy())
    np.savez(OUT / "probe.expected.npz", out0=y.numpy())
    for p in sorted(OUT.iterdir()):
        print(f"{p.name}: {p.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
