"""Models trained on scikit-learn's bundled digits (8x8 grey, 10 classes), so they mean something.

The data are 8x8 images whose pixels count ink in 4x4 blocks of a 32x32 bitmap: 0 = paper,
16 = full ink. Training input is pixel / 16, i.e. 0..1 with ink high. A picture is turned
into input by: greyscale, invert (dark ink on light paper -> ink high), area-resize to 8x8,
divide by 255.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from .common import Sample

DIGITS_PREPROCESS = {
    "text": "greyscale, invert so that ink is bright (the data have ink=16 on paper=0), "
    "area-resize to 8x8, divide by 255 so values are 0..1 (training used pixel/16)",
    "mode": "L",
    "invert": True,
    "resample": "box",
    "mean": [0.0],
    "std": [1.0],
}
LABELS = [str(d) for d in range(10)]
EXAMPLES_FILE = "digits_cnn.examples.npz"


@lru_cache(maxsize=1)
def _data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]  # N,1,8,8 in 0..1
    y = d.target.astype(np.int64)
    return tuple(train_test_split(x, y, test_size=0.25, random_state=0, stratify=y))  # type: ignore[return-value]


def _train(model: nn.Module, epochs: int, seed: int) -> float:
    """Train with Adam on the fixed split; return test accuracy."""
    x_tr, x_te, y_tr, y_te = (torch.from_numpy(a) for a in _data())
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(epochs):
        model.train()
        perm = torch.randperm(len(x_tr), generator=g)
        for i in range(0, len(perm), 64):
            idx = perm[i : i + 64]
            opt.zero_grad()
            loss_fn(model(x_tr[idx]), y_tr[idx]).backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        return float((model(x_te).argmax(1) == y_te).float().mean())


class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.dropout = nn.Dropout(0.3)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.pool(self.relu(self.bn2(self.conv2(x))))
        x = torch.flatten(x, 1)
        x = self.dropout(self.relu(self.fc1(x)))
        return torch.softmax(self.fc2(x), dim=1)


class TinyMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return torch.softmax(self.fc2(self.act(self.fc1(x))), dim=1)


class _Logits(nn.Module):
    """Train on log-probabilities of a model whose forward ends in softmax."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return torch.log(self.inner(x) + 1e-9)


def _trained(make: type[nn.Module], meta: dict, epochs: int, seed: int) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(seed)
    model = make()
    acc = _train(_Logits(model), epochs, seed)
    if acc < 0.95:
        raise RuntimeError(f"digits model reached only {acc:.3f} test accuracy")
    meta["test_accuracy"] = round(acc, 4)
    x_te = _data()[1]
    return model.eval(), torch.from_numpy(x_te[:1].copy())


def write_examples(out_dir: str | Path, per_class: int = 3) -> None:
    """Save a few real test digits (scaled like training) with their labels."""
    _, x_te, _, y_te = _data()
    idx = np.concatenate([np.flatnonzero(y_te == c)[:per_class] for c in range(10)])
    np.savez(Path(out_dir) / EXAMPLES_FILE, images=x_te[idx], labels=y_te[idx])


_COMMON = {
    "task": "classification",
    "input_shape": [1, 1, 8, 8],
    "image": True,
    "preprocess": DIGITS_PREPROCESS,
    "labels": LABELS,
    "examples": EXAMPLES_FILE,
    "trained": True,
}

_cnn_meta = {
    **_COMMON,
    "description": "A small CNN trained on scikit-learn's 8x8 handwritten digits: two conv+BN+ReLU "
    "layers, max pool, two linear layers and softmax. Draw or upload a digit.",
    "default": True,
}
_mlp_meta = {
    **_COMMON,
    "description": "The smallest model: a two-layer perceptron (flatten, linear, ReLU, linear, softmax) "
    "trained on the same 8x8 digits. Every operator fits on one screen.",
}

SAMPLES = {
    "digits_cnn": Sample(lambda: _trained(DigitsCNN, _cnn_meta, epochs=40, seed=1), _cnn_meta, extras=write_examples),
    "tiny_mlp": Sample(lambda: _trained(TinyMLP, _mlp_meta, epochs=80, seed=2), _mlp_meta),
}
