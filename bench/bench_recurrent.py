"""Recurrent layers (layers/recurrent.py) against PyTorch: whole small models (LSTM, GRU, RNN
and a Linear head) converted by the real pnnx, one thread, in one process, alternating
blocks, CPU time.

    python bench/bench_recurrent.py                       # every model below
    python bench/bench_recurrent.py --workdir /tmp/krnn   # keep the conversions for the next run

Each model's engine output is checked against PyTorch's first (largest difference over the
largest magnitude). The recurrence is a Python loop over time steps, ~8 NumPy calls a step:
at batch 1 each is mostly call overhead, at batch 8 the step's GEMM. Needs the `export` extra
(torch, pnnx).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy's import: one thread each
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import numpy as np  # noqa: E402

from timing import median, timed_blocks  # noqa: E402

# name, torch class, layers, bidirectional, input shape (batch, time, features)
MODELS = [
    ("lstm", "LSTM", 2, False, (1, 100, 64)),
    ("lstm_bidir", "LSTM", 1, True, (1, 100, 64)),
    ("lstm_b8", "LSTM", 2, False, (8, 100, 64)),
    ("gru", "GRU", 2, False, (1, 100, 64)),
    ("rnn", "RNN", 2, False, (1, 100, 64)),
]
HIDDEN = 128


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workdir", type=Path, help="conversions go here (default: a temporary folder)")
    args = ap.parse_args()
    import torch
    from torch import nn

    import kuiper_core
    from pnnx_export import export_module

    torch.set_num_threads(1)

    class Net(nn.Module):
        def __init__(self, kind: str, layers: int, bidirectional: bool) -> None:
            super().__init__()
            self.rnn = getattr(nn, kind)(64, HIDDEN, num_layers=layers, batch_first=True, bidirectional=bidirectional)
            self.head = nn.Linear(HIDDEN * (2 if bidirectional else 1), 10)

        def forward(self, x):  # type: ignore[no-untyped-def]
            y, _ = self.rnn(x)
            return self.head(y)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench_recurrent_"))
    print("| model | input | PyTorch ms | kuiper ms | kuiper / PyTorch | max rel. error |")
    print("|---|---|---|---|---|---|")
    for k, (name, kind, layers, bidir, shape) in enumerate(MODELS):
        torch.manual_seed(k)  # the same weights as a conversion kept in --workdir (pnnx draws from the RNG)
        module = Net(kind, layers, bidir).eval()
        tx = torch.randn(*shape)
        param = workdir / name / "model.pnnx.param"
        if not param.exists():
            export_module(module, [tx], workdir / name, capture_operands=False)
        model = kuiper_core.load(param)
        x = tx.numpy()
        with torch.inference_mode():
            ref = module(tx).numpy()
            y = model.forward(x)
            err = float(np.abs(y - ref).max() / np.abs(ref).max())
            times = timed_blocks(
                {"torch": lambda module=module, tx=tx: module(tx), "kuiper": lambda model=model, x=x: model.forward(x)},
                args.runs,
                args.rounds,
                clock=time.process_time,
            )
        t, ours = median(times["torch"]) * 1e3, median(times["kuiper"]) * 1e3
        what = f"{kind} {64}→{HIDDEN} x{layers}" + (" bidirectional" if bidir else "")
        print(f"| {what} | {'x'.join(map(str, shape))} | {t:.2f} | {ours:.2f} | {ours / t:.2f}x | {err:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
