"""The table of the README's "Graph passes" section: for optlevel-1 exports, the operators
before, after `kuiper opt -O2`, and in pnnx's own optlevel-2 export, with the -O2 model's
largest error against PyTorch's outputs.

    python tools/passes_table.py              # committed exports: tests/data/optlevel, tests/data/passes,
                                              # tests/data/styles and the Passes page's presets
    python tools/passes_table.py --o0         # the same from the optlevel-0 exports of tests/data/optlevel
    python tools/passes_table.py --full       # the bundled sample models at full size, exported now
                                              # at optlevel 1 and 2 (needs torch + pnnx)
    python tools/passes_table.py O1DIR O2DIR  # any pair of folders holding model.pnnx.param/.bin,
                                              # inputs.npz and expected.npz (tools/pnnx_export.py's layout)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kuiper_core.passes import optimize  # noqa: E402
from kuiper_core.pnnx import load_graph, read_param  # noqa: E402
from kuiper_core.runtime import RuntimeGraph  # noqa: E402


# What the style cases are (tools/export_pass_models.py, tools/pass_style_cases.py), for the README.
NOTES = {
    "attention": "qkv[0..2], softmax",
    "encoder": "nn.TransformerEncoderLayer",
    "functional_weights": "F.conv2d on parameters",
    "shuffle": "ShuffleNet unit",
    "bn_after": "BN after ConvTranspose1d/2d, Conv1d, Linear",
    "chain": "elementwise chains",
    "focus": "YOLOv5's Focus slices, SPP-like cat",
    "mobilenetv2": "inverted residuals, ReLU6, dropout",
    "noops": "every no-op kind",
    "norms": "F.layer_norm · w + b, RMSNorm written out",
    "pads": "pads before convs, every kind",
    "pixel_shuffle": "depth-to-space written out",
    "rms_variants": "two RMSNorms in one expression",
    "sdpa": "F.scaled_dot_product_attention, nn.MultiheadAttention",
    "se_block": "squeeze-excitation on nn.Linear",
    "size_arith": "shapes computed from x.shape",
    "spatial": "space-to-depth written out, einsum, max-pool indices",
    "timm_attention": "timm's Attention",
    "swin": "torchvision's Swin, small: shifted windows",
    "swin_v2": "the same, Swin V2's blocks: cosine attention",
    "conv3d_stem": "r3d_18's stem, Conv3DSimple as F.conv3d",
    "ssdlite_head": "SSDlite's MobileNetV3 backbone and head",
    "detection_post": "torchvision nms, MultiScaleRoIAlign",
    "encoder_relu": "traced nn.TransformerEncoder, fast path",
    "encoder_gelu_norm_first": "the same, gelu, norm_first",
    "encoder_causal": "the same, a causal mask",
    "encoder_padding": "the same, a key padding mask",
    "conv_bn_relu": "preset: TVM's Conv+BN+ReLU example",
    "pass_zoo": "preset: every pass has work",
    "linear_bn_3d": "Linear, then BatchNorm1d over dim 1",
    "shared_outputs": "a conv read by its BN and others",
    "two_in_two_out": "two inputs, two outputs",
}


def row(name: str, o1: Path, o2: Path, inputs: list[np.ndarray], expected: list[np.ndarray]) -> dict[str, object]:
    graph = load_graph(o1)
    after = optimize(graph, 2).after
    ys = RuntimeGraph.from_graph(after).build().forward(*inputs)
    rel = max(
        float(np.max(np.abs(y.astype(np.float64) - r.astype(np.float64)))) / max(1.0, float(np.max(np.abs(r))))
        for y, r in zip(ys, expected)
    )
    return {
        "model": name,
        "before": len(graph.operators),
        "ours": len(after.operators),
        "pnnx": len(read_param(o2).operators),
        "rel_err": rel,
        "pnnx_wrong": (o2.parent.parent / "PNNX_O2_WRONG").exists(),
    }


def _npz(path: Path, prefix: str) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"{prefix}{i}"] for i in range(len(z.files))]


def committed_rows(start: str = "o1") -> list[dict[str, object]]:
    """Rows from the committed exports at optlevel `start` ("o1"; "o0": only tests/data/optlevel
    has optlevel-0 exports, and no presets)."""
    rows = []
    data = ROOT / "tests" / "data"
    folders = sorted((data / "optlevel").iterdir()) + (sorted((data / "passes").iterdir()) if start == "o1" else [])
    folders += sorted((data / "styles").iterdir())  # other people's styles, at every optlevel
    for d in folders:
        if (d / start).is_dir() and (d / "o2").is_dir() and not (d / "CANNOT_RUN").exists():
            rows.append(
                row(
                    d.name,
                    d / start / "model.pnnx.param",
                    d / "o2" / "model.pnnx.param",
                    _npz(d / start / "inputs.npz", "in"),
                    _npz(d / start / "expected.npz", "out"),
                )
            )
    if start != "o1":
        return rows
    presets = ROOT / "sample_models" / "passes"
    for name in ("conv_bn_relu", "pass_zoo"):
        rows.append(
            row(
                name,
                presets / f"{name}.o1.pnnx.param",
                presets / f"{name}.o2.pnnx.param",
                [np.load(presets / f"{name}.input.npy")],
                _npz(presets / f"{name}.expected.npz", "out"),
            )
        )
    return rows


def full_rows() -> list[dict[str, object]]:
    import torch

    sys.path.insert(0, str(ROOT / "tools"))
    from pnnx_export import export_module
    from samples import all_samples

    torch.backends.mha.set_fastpath_enabled(False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, sample in all_samples().items():
            dirs = {}
            for level in (1, 2):
                torch.manual_seed(0)
                module, x = sample.build()
                dirs[level] = Path(tmp) / f"{name}_o{level}"
                export_module(module.eval(), [x], dirs[level], name=name, capture_operands=False, optlevel=level)
            rows.append(
                row(
                    name,
                    dirs[1] / f"{name}.pnnx.param",
                    dirs[2] / f"{name}.pnnx.param",
                    _npz(dirs[1] / "inputs.npz", "in"),
                    _npz(dirs[1] / "expected.npz", "out"),
                )
            )
            print(f"  {rows[-1]}", file=sys.stderr)
    return rows


def _worse(r: dict[str, object]) -> bool:
    """More operators than pnnx's optlevel 2, where pnnx's answer is right."""
    return int(r["ours"]) > int(r["pnnx"]) and not r.get("pnnx_wrong")  # type: ignore[call-overload]


def markdown(rows: list[dict[str, object]], start: str = "optlevel 1") -> str:
    lines = [
        f"| model | {start} | `kuiper opt -O2` | pnnx optlevel 2 | max error vs PyTorch (relative) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        mark = " ⚠" if _worse(r) else ""
        label = f"{r['model']} ({NOTES[str(r['model'])]})" if r["model"] in NOTES else r["model"]
        pnnx = f"{r['pnnx']} (wrong answer)" if r.get("pnnx_wrong") else r["pnnx"]
        lines.append(f"| {label} | {r['before']} | **{r['ours']}**{mark} | {pnnx} | {float(r['rel_err']):.1e} |")  # type: ignore[arg-type]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="export the full-size sample models now (torch + pnnx)")
    ap.add_argument("--o0", action="store_true", help="start from the committed optlevel-0 exports")
    ap.add_argument("dirs", nargs="*", help="O1DIR O2DIR pairs")
    args = ap.parse_args(argv)
    if args.dirs:
        if len(args.dirs) % 2:
            ap.error("give folders in pairs: O1DIR O2DIR")
        rows = []
        for o1, o2 in zip(args.dirs[::2], args.dirs[1::2]):
            o1, o2 = Path(o1), Path(o2)
            param1, param2 = next(o1.glob("*.pnnx.param")), next(o2.glob("*.pnnx.param"))
            rows.append(row(o1.name, param1, param2, _npz(o1 / "inputs.npz", "in"), _npz(o1 / "expected.npz", "out")))
    else:
        rows = full_rows() if args.full else committed_rows("o0" if args.o0 else "o1")
    print(markdown(rows, "optlevel 0" if args.o0 else "optlevel 1"))
    worse = [r["model"] for r in rows if _worse(r)]
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
