"""What a session runs on: the input kind chosen on the Home page resolved to arrays, with an
honest description of what they are (the sidebar shows it) and why the chosen kind could not
be used when it could not (no sample input, nothing uploaded yet, several inputs).

    choice = {"kind": "sample"|"random"|"zeros"|"ones"|"npy"|"image"|"example"|"drawing",
              "seed": int, "index": int}
    given  = {kind: (array, file name)}  for "npy", "image", "drawing"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import limits as limits_module
from ..limits import Limits
from .inputs import fixed_values, synthetic_input
from .loaded_model import LoadedModel
from .tensors import arrays_digest
from .upload_store import Kept

DEFAULT_CHOICE: Mapping[str, Any] = {"kind": "sample", "seed": 0}
SYNTHETIC = {"random": "seeded random numbers (seed {seed})", "zeros": "zeros", "ones": "ones"}
GIVEN = {"npy": "uploaded array", "image": "uploaded picture", "drawing": "your drawing"}
Spec = tuple[str, tuple[int, ...], str]  # (operand name, shape, dtype): inputs.input_specs
Synthetic = Callable[[str, tuple[int, ...], str, int], np.ndarray]  # (kind, shape, dtype, seed)
Given = Mapping[str, tuple[np.ndarray | None, str | None]]


@dataclass
class ResolvedInput:
    """The arrays a page runs on and what they truly are."""

    arrays: list[np.ndarray]
    kind: str  # the kind actually used
    description: str
    note: str | None = None  # why the chosen kind could not be used

    @property
    def is_sample(self) -> bool:
        """Only the sample input has PyTorch reference tensors."""
        return self.kind == "sample"


def _chosen(model: LoadedModel, kind: str, index: int, single: bool, given: Given) -> ResolvedInput | str:
    """The chosen kind's arrays, or why they cannot be used (a one-input model's kinds only)."""
    if kind == "sample":
        if model.sample_input is not None and single:
            return ResolvedInput([model.sample_input], "sample", "the model's sample input")
        return "this model has no sample input"
    if kind == "example":
        if model.examples is not None and single and 0 <= index < len(model.examples):
            label = "" if model.example_labels is None else f", a {model.example_labels[index]}"
            text = f"held-out example {index + 1} of {len(model.examples)}{label}"
            return ResolvedInput([model.examples[index : index + 1]], "example", text)
        return "this model has no bundled examples"
    array, name = given.get(kind, (None, None))
    if array is not None and single:
        return ResolvedInput([array], kind, f"{GIVEN[kind]} {name}" if name else GIVEN[kind])
    return "nothing drawn yet" if kind == "drawing" else "no usable file yet"


def resolve_input(
    model: LoadedModel,
    choice: Mapping[str, Any] | None,
    specs: Sequence[Spec],
    given: Given,
    synthetic: Synthetic = synthetic_input,
) -> ResolvedInput:
    """One array per pnnx.Input (`specs`) for `choice`. Falls back to seeded random data when the
    chosen kind is not available and says so; raises KuiperError (or MemoryError) when no input
    of the declared shapes can be made."""
    choice = choice or DEFAULT_CHOICE
    kind = str(choice.get("kind", "sample"))
    seed = int(choice.get("seed", 0))
    note = None
    if kind not in SYNTHETIC:
        if kind not in ("sample", "example", *GIVEN):
            kind = "random"  # a kind this app does not know (an old session's): seeded random
        else:
            found = _chosen(model, kind, int(choice.get("index", 0)), len(specs) == 1, given)
            if isinstance(found, ResolvedInput):
                return found
            note, kind = found, "random"
    fixed = fixed_values(model.graph) if model.graph is not None else {}  # what the file was converted for
    arrays = [
        fixed[name] if name in fixed else synthetic(kind, tuple(shape), dtype, seed + i)
        for i, (name, shape, dtype) in enumerate(specs)
    ]
    text = SYNTHETIC[kind].format(seed=seed)
    return ResolvedInput(arrays, kind, text + (f" ({note})" if note else ""), note)


def shared_synthetic(kind: str, shape: tuple[int, ...], dtype: str, seed: int, limits: Limits) -> np.ndarray:
    """A seeded/zeros/ones input made under `limits` (a 3-line upload may declare a
    (1,3,16000,16000) input), read-only: the app makes it once and shares it between sessions."""
    with limits_module.use(limits):
        a = synthetic_input(kind, shape, dtype, seed)
    a.flags.writeable = False
    return a


def kept_input_key(digest: str) -> str:
    """The key of an uploaded input in the server's store of kept things (the URL's `input=`)."""
    return f"input:{digest}"


def kept_input(kind: str, array: np.ndarray, name: str | None) -> tuple[str, Kept]:
    """An uploaded input (or a drawing) kept by content, so a reload finds it as it finds an
    uploaded model: its digest (the URL's `input=`) and what the store keeps."""
    digest = arrays_digest([array])
    return digest, Kept(kept_input_key(digest), (kind, array, name), int(array.nbytes))
