"""Record (or check) the engine's exact outputs on every bundled model: the golden outputs.

A refactoring of the runtime must not change one bit of what forward() and steps() compute.
This runs every bundled sample (sample_models/*.pnnx.param) and every export under
tests/data/optlevel, tests/data/ops, ops_o0, ops_o1 and value_shapes on its committed inputs,
with NumPy's OpenBLAS at 1 thread and at 2 (the kernels' cost models, and OpenBLAS's own
GEMM rounding, depend on it), and notes a digest of the bytes of:

- forward(): the first call's outputs (the checked run, or the prepared forward's binding
  run; at 2 threads and a batch >= 2, "auto" runs the sharded forward: runtime/policy.py)
  and the second call's (the hot path);
- steps(): the operand values after a full walk, three walks in a row with each walk's
  values held, so that the third takes the per-operator path (step_arena.py: MAX_ARENAS = 2).

An export that fails notes its error class instead. Digests depend on the CPU kernels that
ran: the file records the footing (OpenBLAS core, NumPy version and the SIMD targets NumPy
dispatches to), and tests/test_golden.py compares only where the footing is the same. Each
model also notes a digest of its files (.param, .bin, inputs): a model exported again, or
added, since the digests were made is not compared (record it: `--add`).

    python tools/golden_outputs.py                 # write tests/data/golden/outputs.json
    python tools/golden_outputs.py --check         # compare with it; exit 1 on a difference
    python tools/golden_outputs.py --add ops/x     # record these models (new or re-exported)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kuiper_core import KuiperError, load  # noqa: E402
from kuiper_core.threads import blas_core, blas_threads, set_blas_threads  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "golden" / "outputs.json"
EXPORT_DIRS = ("optlevel", "ops", "ops_o0", "ops_o1", "value_shapes")
THREADS = (1, 2)
WALKS = 3  # the third, with two walks' values held, runs operator by operator


def footing() -> dict[str, Any]:
    """What decides the rounding besides our code: the CPU kernels that NumPy and its BLAS run."""
    from numpy._core import _multiarray_umath as umath

    features = umath.__cpu_features__
    return {
        "openblas_core": blas_core(),
        "numpy": np.__version__,
        "numpy_simd": [t for t in umath.__cpu_dispatch__ if features.get(t)],
    }


def files_digest(param: Path) -> str:
    """A digest of a model's files: its .param, .bin and inputs (what its outputs follow from)."""
    h = hashlib.sha256()
    names = [param.name, param.name.replace(".param", ".bin")]
    if param.parent.name == "sample_models":
        names.append(param.name.replace(".pnnx.param", ".input.npy"))
    else:
        names += ["inputs.npz", "runs.npz"]
    for name in names:
        path = param.with_name(name)
        if path.exists():
            h.update(name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def models() -> Iterator[tuple[str, Path, list[np.ndarray]]]:
    """(id, .param path, inputs) of every bundled model, in a fixed order."""
    for param in sorted((ROOT / "sample_models").glob("*.pnnx.param")):
        name = param.name.removesuffix(".pnnx.param")
        yield f"sample_models/{name}", param, [np.load(param.with_name(f"{name}.input.npy"))]
    for d in EXPORT_DIRS:
        for param in sorted((ROOT / "tests" / "data" / d).glob("**/model.pnnx.param")):
            folder = param.parent
            yield folder.relative_to(ROOT / "tests" / "data").as_posix(), param, _inputs(folder)


def _inputs(folder: Path) -> list[np.ndarray]:
    """in0, in1, … of inputs.npz; value_shapes' runs.npz: its first set (in0_0, in1_0, …)."""
    if (folder / "inputs.npz").exists():
        with np.load(folder / "inputs.npz") as z:
            return [z[f"in{i}"] for i in range(len(z.files))]
    with np.load(folder / "runs.npz") as z:
        names = [k for k in z.files if k.startswith("in") and k.endswith("_0")]
        return [z[k] for k in sorted(names, key=lambda k: int(k[2:].split("_")[0]))]


def _feed(h: Any, value: Any) -> None:
    if isinstance(value, np.ndarray):
        h.update(f"a{value.dtype.str}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (tuple, list)):
        h.update(f"t{len(value)}".encode())
        for v in value:
            _feed(h, v)
    elif isinstance(value, np.generic):
        _feed(h, np.asarray(value))
    else:
        h.update(f"v{value!r}".encode())


def digest(value: Any) -> str:
    h = hashlib.sha256()
    _feed(h, value)
    return h.hexdigest()[:16]


def values_digest(values: Any) -> str:
    """One digest over every operand (name and value), in name order."""
    h = hashlib.sha256()
    for name in sorted(values):
        h.update(name.encode() + b"\0")
        _feed(h, values[name])
    return f"{len(values)}:{h.hexdigest()[:16]}"


def record(param: Path, inputs: list[np.ndarray], threads: int) -> dict[str, Any]:
    """The digests of one model at one BLAS thread count (see the module docstring)."""
    try:
        runtime = load(param)
        first = [digest(y) for y in runtime.forward(*inputs)]
        second = [digest(y) for y in runtime.forward(*inputs)]
        walks, held = [], []
        for _ in range(WALKS):
            run = runtime.steps(*inputs)
            for _event in run:
                pass
            walks.append(values_digest(run.values))
            held.append(run)
        return {"forward": [first, second], "steps": walks}
    except KuiperError as e:
        return {"error": type(e).__name__}


def record_all(selected: set[str] | None = None) -> dict[str, Any]:
    saved = blas_threads()
    result: dict[str, dict[str, Any]] = {}
    try:
        for threads in THREADS:
            set_blas_threads(threads)
            for key, param, inputs in models():
                if selected is None or key in selected:
                    entry = result.setdefault(key, {"files": files_digest(param)})
                    entry[str(threads)] = record(param, inputs, threads)
    finally:
        set_blas_threads(saved)
    return {"footing": footing(), "threads": list(THREADS), "models": result}


def comparable(golden: dict[str, Any], key: str, param: Path) -> bool:
    """The model has digests made from the files it has now."""
    entry = golden["models"].get(key)
    return entry is not None and entry.get("files") == files_digest(param)


def differences(golden: dict[str, Any], now: dict[str, Any]) -> list[str]:
    bad = []
    for key, entry in now["models"].items():
        for threads, got in entry.items():
            want = golden["models"].get(key, {}).get(threads)
            if threads != "files" and want != got:
                bad.append(f"{key} at {threads} thread(s): {want} != {got}")
    return bad


def to_text(golden: dict[str, Any]) -> str:
    """JSON with one line per model (a change shows as the models it touched)."""
    models = ",\n".join(
        f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(golden["models"].items())
    )
    head = {k: v for k, v in golden.items() if k != "models"}
    return json.dumps(head, sort_keys=True)[:-1] + ', "models": {\n' + models + "\n}}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed digests")
    parser.add_argument("--add", action="store_true", help="record only the models named, keep the others")
    parser.add_argument("models", nargs="*", help="only these ids (e.g. sample_models/resnet18)")
    args = parser.parse_args()
    now = record_all(set(args.models) or None)
    if args.add:
        golden = json.loads(GOLDEN.read_text())
        if golden["footing"] != now["footing"]:
            print(f"footing differs: {golden['footing']} vs {now['footing']}: record all models here instead")
            return 1
        golden["models"].update(now["models"])
        now = golden
    elif args.check:
        golden = json.loads(GOLDEN.read_text())
        if golden["footing"] != now["footing"]:
            print(f"footing differs: {golden['footing']} vs {now['footing']}")
            return 1
        bad = differences(golden, now)
        print("\n".join(bad) or f"{len(now['models'])} models: bit-for-bit as recorded")
        return 1 if bad else 0
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(to_text(now))
    print(f"wrote {GOLDEN.relative_to(ROOT)}: {len(now['models'])} models")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
