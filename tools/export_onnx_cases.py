"""Small ONNX graphs whose operators pnnx keeps as ONNX's (no torch form), converted by the real
pnnx, with onnxruntime's output: tests/data/onnx_cases/NAME.{onnx,pnnx.param,pnnx.bin,input.npy,
expected.npz}. tests/test_layer_index.py finds the types in the .pnnx.param; the engine's output
is checked against onnxruntime's (tests/test_onnx_external.py).

    python tools/export_onnx_cases.py

Needs onnx, onnxruntime and pnnx (no torch).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "onnx_cases"
sys.path.insert(0, str(ROOT))


def gather() -> tuple[Any, np.ndarray]:
    """Reshape + Gather with constant (1, C, 1, 1) indices: how torch.onnx.export's dynamo
    exporter writes convnext's view after its pooling (pnnx keeps the Gather)."""
    from onnx import TensorProto, helper, numpy_helper

    c = 6
    index = np.random.default_rng(0).permutation(c).reshape(1, c, 1, 1).astype(np.int64)
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1),
        helper.make_node("Reshape", ["m", "shape"], ["flat"]),
        helper.make_node("Gather", ["flat", "index"], ["g"], axis=0),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([2, 3], np.int64), "axes"),
        numpy_helper.from_array(np.array([c], np.int64), "shape"),
        numpy_helper.from_array(index, "index"),
    ]
    graph = helper.make_graph(
        nodes,
        "gather",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 1, 1])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model, np.random.default_rng(1).standard_normal((1, c, 4, 4)).astype(np.float32)


CASES = {"gather": gather}


def main() -> int:
    import onnx
    import onnxruntime as ort

    from kuiper_core.formats import open_model

    OUT.mkdir(parents=True, exist_ok=True)
    for name, build in CASES.items():
        model, x = build()
        onnx.save_model(model, str(OUT / f"{name}.onnx"))
        session = ort.InferenceSession(str(OUT / f"{name}.onnx"), providers=["CPUExecutionProvider"])
        ys = session.run(None, {session.get_inputs()[0].name: x})
        with tempfile.TemporaryDirectory() as cache:
            files = open_model(OUT / f"{name}.onnx", cache_dir=cache).files
            assert files is not None and files.param is not None and files.bin is not None
            shutil.copyfile(files.param, OUT / f"{name}.pnnx.param")
            shutil.copyfile(files.bin, OUT / f"{name}.pnnx.bin")
        np.save(OUT / f"{name}.input.npy", x)
        np.savez(OUT / f"{name}.expected.npz", **{f"out{i}": y for i, y in enumerate(ys)})
        print(f"{name}: {', '.join(p.name for p in sorted(OUT.glob(name + '.*')))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
