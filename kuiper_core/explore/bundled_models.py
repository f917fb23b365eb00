"""The models bundled with the app (sample_models/): the catalogue in models.json, a digest of
each model's files, and a bundled model loaded with its sample input, PyTorch's outputs, its
per-operand references and its held-out examples."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..graph import Graph
from ..limits import Limits
from .loaded_model import LoadedModel, Opener, npz_arrays, read_model


def catalogue(folder: Path) -> dict[str, dict[str, Any]]:
    """models.json: {name: entry}, the default model first then by operator count, only
    models whose files exist."""
    path = folder / "models.json"
    if not path.exists():
        return {}
    entries = json.loads(path.read_text())
    present = {n: e for n, e in entries.items() if (folder / f"{n}.pnnx.param").exists()}
    return dict(sorted(present.items(), key=lambda kv: (not kv[1].get("default"), kv[1].get("operators", 0))))


def model_paths(folder: Path, name: str) -> tuple[Path, Path]:
    return folder / f"{name}.pnnx.param", folder / f"{name}.pnnx.bin"


def stamps(paths: Sequence[Path]) -> tuple[tuple[int, int], ...]:
    """(size, mtime) of each file ((0, 0) when absent): a cache key that changes when a file is edited."""
    return tuple((p.stat().st_size, int(p.stat().st_mtime)) if p.exists() else (0, 0) for p in paths)


def files_digest(paths: Sequence[Path]) -> str:
    """SHA-256 of the files' bytes in order (an absent file counts as empty)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes() if p.exists() else b"")
    return h.hexdigest()[:16]


def _output_order(key: str) -> tuple[int, str]:
    # expected.npz names outputs out0, out1, ... out10: by number, not as text
    return (int(key[3:]), "") if key[3:].isdigit() else (1 << 30, key)


def load_bundled(
    folder: Path, name: str, digest: str, meta: dict[str, Any], open_model: Opener, limits: Limits
) -> LoadedModel:
    """`name` from `folder`, read and built (never raises: `error` says what failed), with the
    arrays beside it. Messages name the files by their path under the folder's parent."""
    model = LoadedModel(key=digest, name=name, source="bundled", meta=meta)
    param, bin_path = model_paths(folder, name)

    def read() -> Graph:
        # Weights read when first used (the .bin is checked now): kernels keep their own
        # layouts, so the server holds no second copy of a model's weights (ResNet-18: 45 MB).
        model.opened = open_model(param, bin_path=bin_path, format="pnnx", weights="lazy")
        return model.opened.graph

    read_model(model, read, limits, hide=f"{folder.parent}/")
    sample = folder / f"{name}.input.npy"
    if sample.exists():
        model.sample_input = np.load(sample, allow_pickle=False)
    expected = npz_arrays(folder / f"{name}.expected.npz")
    model.expected = [expected[k] for k in sorted(expected, key=_output_order)]
    model.operands = npz_arrays(folder / f"{name}.operands.npz")
    if meta.get("examples"):
        examples = npz_arrays(folder / str(meta["examples"]))
        model.examples, model.example_labels = examples.get("images"), examples.get("labels")
    return model
