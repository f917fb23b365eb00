"""Full-size efficientnet_b0 on ill-conditioned inputs (issue 25): our float32 error against
float64 next to PyTorch's float32 error, per input and operand by operand.

    python tools/precision_efficientnet.py --out /tmp/effb0            # export once, 16 ratios
    python tools/precision_efficientnet.py --out /tmp/effb0 --probe 108 # where ours departs
    python tools/precision_efficientnet.py --out /tmp/effb0 --local 108 # each operator alone
    python tools/precision_efficientnet.py --out /tmp/effb0 --ideal     # an ideal float32 engine

The model: torchvision's efficientnet_b0 (random weights, torch.manual_seed(--weights), BatchNorm
recalibrated by samples.common.randomize_batchnorm), pnnx optlevel 2 at 224x224. The inputs:
randn·2 + 0.5 (seeds 100-115), which saturate the squeeze-excitation sigmoids. The float64
reference is pnnx's generated Python (kuiper_core.references.pnnx_py) with model.double();
PyTorch's float32 error is the same Python in float32. Ratio = our max error / PyTorch's.
--ideal: the same ratio for an ideal float32 engine, the float64 run with every module's output
rounded to float32 (each operator exact, then rounded once): how far any float32 engine's
amplified error can land from PyTorch's on these inputs.
Needs torch, torchvision (tools/torchvision_cpu.py) and pnnx.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
SEEDS = range(100, 116)


def ill_conditioned(seed: int, size: int = 224) -> np.ndarray:
    import torch

    return (torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(seed)) * 2 + 0.5).numpy()


def export(out: Path, weights: int = 0) -> None:
    import torch
    from pnnx_export import export_module
    from samples.common import randomize_batchnorm
    from torchvision_cpu import torchvision

    torch.manual_seed(weights)
    m = torchvision.models.efficientnet_b0()
    randomize_batchnorm(m, batches=2, batch_size=4, input_shape=(3, 224, 224))
    export_module(
        m.eval(), [torch.from_numpy(ill_conditioned(100))], out, optlevel=2, capture_operands=False, keep_python=out
    )


def torch_runs(out: Path, x: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every operand of pnnx's Python in float64 and in float32."""
    import torch
    from kuiper_core.references.pnnx_py import load_model

    runs = []
    for dtype in (torch.float64, torch.float32):
        model = load_model(out / "model_pnnx.py", out / "model.pnnx.bin").to(dtype)
        with torch.no_grad():
            _, local_vars = model(torch.from_numpy(x).to(dtype))
        runs.append(
            {k[2:]: v.numpy() for k, v in local_vars.items() if k.startswith("v_") and isinstance(v, torch.Tensor)}
        )
    return runs[0], runs[1]


def ours(out: Path, x: np.ndarray, every: bool = False) -> dict[str, np.ndarray]:
    import kuiper_core
    from kuiper_core.formats import open_model

    if not every:
        g = kuiper_core.load(out / "model.pnnx.param")
        return {"out": g.forward(x)[0]}
    run = open_model(out / "model.pnnx.param").build().steps(x)
    for _ in run:
        pass
    return {k: np.array(v) for k, v in run.values.items() if isinstance(v, np.ndarray)}


def _err(a: Any, ref: np.ndarray) -> float:
    return float(np.abs(np.asarray(a, np.float64) - ref).max())


def ratios(out: Path, seeds: Any) -> list[float]:
    import kuiper_core

    g = kuiper_core.load(out / "model.pnnx.param")
    result = []
    for seed in seeds:
        x = ill_conditioned(seed)
        f64, f32 = torch_runs(out, x)
        last = max(f64, key=int)
        ref = f64[last]
        r = _err(g.forward(x)[0], ref) / _err(f32[last], ref)
        print(
            f"seed {seed}: |ref| {np.abs(ref).max():.3g}  torch {_err(f32[last], ref):.3g}  ours/torch {r:.2f}",
            flush=True,
        )
        result.append(r)
    print("ratios", " ".join(f"{r:.2f}" for r in result))
    print(
        f"geometric mean {np.exp(np.mean(np.log(result))):.2f}  median {np.median(result):.2f}  max {max(result):.2f}"
    )
    return result


def probe(out: Path, seed: int) -> None:
    """Operand by operand (execution order): max error against float64, ours and PyTorch's."""
    from kuiper_core.pnnx import read_param

    x = ill_conditioned(seed)
    f64, f32 = torch_runs(out, x)
    mine = ours(out, x, every=True)
    graph = read_param(out / "model.pnnx.param")
    for op in graph.operators:
        for name in (o.name for o in op.outputs):
            if name not in f64 or name not in mine:
                continue
            ref = f64[name]
            eo, et = _err(mine[name], ref), _err(f32[name], ref)
            scale = float(np.abs(ref).max())
            flag = "  <<" if eo > 3 * et and eo > 1e-6 * scale else ""
            print(
                f"{op.type:24s} {op.name:28s} {name:>5s} |ref| {scale:9.3g} ours {eo:9.3g} torch {et:9.3g} {eo / max(et, 1e-30):7.2f}{flag}"
            )


def ideal(out: Path, seeds: Any) -> list[float]:
    """Per input: an ideal float32 engine's max error against float64 / PyTorch float32's."""
    import torch
    from kuiper_core.references.pnnx_py import load_model

    model = load_model(out / "model_pnnx.py", out / "model.pnnx.bin").double()
    rounded = [m.register_forward_hook(lambda m, i, o: o.float().double()) for m in model.children()]
    result = []
    for seed in seeds:
        x = ill_conditioned(seed)
        f64, f32 = torch_runs(out, x)
        last = max(f64, key=int)
        with torch.no_grad():
            y = model(torch.from_numpy(x).double())[0].numpy()
        result.append(_err(y, f64[last]) / _err(f32[last], f64[last]))
    for h in rounded:
        h.remove()
    print("ideal float32 engine / PyTorch:", " ".join(f"{r:.2f}" for r in result))
    print(f"geometric mean {np.exp(np.mean(np.log(result))):.2f}  max {max(result):.2f}")
    return result


def local(out: Path, seed: int) -> None:
    """Each operator alone, on the float64 run's inputs rounded to float32: its own rounding
    error against float64, ours and PyTorch's (nn.* modules; expressions are elementwise)."""
    import torch
    from kuiper_core.layers.registry import create_layer
    from kuiper_core.pnnx import load_graph
    from kuiper_core.references.pnnx_py import load_model

    x = ill_conditioned(seed)
    f64, _ = torch_runs(out, x)
    model = load_model(out / "model_pnnx.py", out / "model.pnnx.bin")
    graph = load_graph(out / "model.pnnx.param")
    for op in graph.operators:
        if not op.type.startswith("nn.") or op.outputs[0].name not in f64:
            continue
        args = [f64[o.name].astype(np.float32) for o in op.inputs]
        ref = f64[op.outputs[0].name]
        mine = create_layer(op).forward(args, [None])[0]
        with torch.no_grad():
            theirs = getattr(model, op.name.replace(".", "_"))(*[torch.from_numpy(a) for a in args]).numpy()
        eo, et = _err(mine, ref), _err(theirs, ref)
        shape = "x".join(str(d) for d in args[0].shape)
        flag = "  <<" if eo > 2 * et else ""
        print(
            f"{op.type:20s} {op.name:36s} {shape:14s} |ref| {np.abs(ref).max():9.3g} ours {eo:9.3g} torch {et:9.3g} {eo / max(et, 1e-30):6.2f}{flag}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/effb0"))
    ap.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS))
    ap.add_argument("--weights", type=int, default=0, help="torch.manual_seed of the export's random weights")
    ap.add_argument("--ideal", action="store_true", help="an ideal float32 engine's ratios instead of ours")
    ap.add_argument("--probe", type=int, help="one seed, operand by operand")
    ap.add_argument("--local", type=int, help="one seed, each operator alone on the float64 run's inputs")
    args = ap.parse_args(argv)
    if not (args.out / "model_pnnx.py").exists():
        export(args.out, args.weights)
    if args.local is not None:
        local(args.out, args.local)
    elif args.probe is not None:
        probe(args.out, args.probe)
    elif args.ideal:
        ideal(args.out, args.seeds)
    else:
        ratios(args.out, args.seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
