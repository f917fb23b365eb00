"""Is a converted model what its framework computes? The verdict on a conversion and where verdicts
are stored; the check itself (its probe input, the framework's run) needs the framework references,
above the formats, and lives in kuiper_core/references/conversion_check.py (the formats call it as
the `checker` they are given).

The engine runs what the pnnx converter writes, exactly; when the converter changes a model's
meaning (a lossy rewrite, a size baked into a reshape), the engine is faithful to a wrong file.
Nothing can know in advance which rewrites of which converter release are lossy, so every
conversion is checked once: the original runs in its framework (onnxruntime for an .onnx,
torch for a TorchScript .pt) and the converted file in the engine, on a probe input (the
user's own input when one is given, else seeded inputs of the declared shapes), and every
output is compared at the project's tolerance. On a disagreement `compare --framework`'s
operand-by-operand run names the first operand that departs.

The verdict is stored in the conversion's cache entry (checks.json, one per probe and version of
the engine's source: a verdict an older engine gave is not reused by a newer one) and carried
by the opened model (OpenedModel.check): it costs once. The framework runs in a child process
under the conversion's limits (its address space, max_planned_bytes + 2 GiB, and its time
limit: references/isolated.py), since what it runs is a file's choice.

    check = model.check                # None: not a converted model
    check.status                       # AGREES, DISAGREES or NOT_CHECKED
    print(check.text())
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np


AGREES, DISAGREES, NOT_CHECKED = "agrees", "disagrees", "not checked"
ENV_CHECK = "KUIPER_CHECK_CONVERSIONS"  # "0": conversions are not checked (and say so)
CHECKS_FILE = "checks.json"  # in the conversion's cache entry: {probe key: verdict}
# Bump when a verdict's meaning changes: older ones are checked again (2: integer probes along ONNX axes).
CHECK_VERSION = 2
SEED = 0
PASSED = "within tolerance"  # explore.compare.OK, the status of an output within tolerance (a test holds them equal)


@dataclass(frozen=True)
class OutputCheck:
    """One output of the converted model against the original's."""

    index: int  # out0, out1, …
    operand: str
    status: str  # explore.compare's OK, OVER or SHAPE, or "missing" (the original has fewer outputs)
    max_error: float | None = None
    relative: float | None = None  # |error| / |reference| where the error is largest
    tolerance: float = 0.0
    detail: str = ""  # where the error is largest, or the two shapes

    @property
    def failed(self) -> bool:
        return self.status != PASSED

    def text(self) -> str:
        head = f"output {self.index} (operand {self.operand})"
        if self.max_error is None:
            return f"{head}: {self.detail or self.status}"
        rel = "" if self.relative is None else f", relative {self.relative:.3g}"
        if self.relative == float("inf"):
            rel = " (where the reference is 0)"
        return f"{head}: max |error| {self.max_error:.3g}{rel} (tolerance {self.tolerance:.3g})"


@dataclass(frozen=True)
class Departure:
    """The first operand, in execution order, that departs from the framework's value."""

    index: int  # the operator's execution position, 0-based (the Forward stepper's step)
    operator: str
    type: str
    operand: str
    text: str  # the comparison: max |error|, tolerance, where


@dataclass(frozen=True)
class ConversionCheck:
    """The verdict on one conversion for one probe input."""

    status: str  # AGREES, DISAGREES or NOT_CHECKED
    reference: str = ""  # what ran the original ("onnxruntime 1.23.2 running the original .onnx")
    probe: str = ""  # the input it ran on
    outputs: tuple[OutputCheck, ...] = ()
    first: Departure | None = None  # DISAGREES: the first departing operand, when one was found
    reason: str = ""  # NOT_CHECKED: why; DISAGREES without a departure: why none was named
    seconds: float = 0.0  # the check's time (framework and engine)

    @property
    def agrees(self) -> bool:
        return self.status == AGREES

    @property
    def disagrees(self) -> bool:
        return self.status == DISAGREES

    @property
    def worst(self) -> OutputCheck | None:
        """The output furthest from the original (by error over tolerance; a missing or
        mis-shaped output first)."""

        def rank(o: OutputCheck) -> float:
            if o.max_error is None:
                return float("inf")
            return o.max_error / o.tolerance if o.tolerance > 0 else (float("inf") if o.max_error else 0.0)

        return max(self.outputs, key=rank, default=None)

    def headline(self) -> str:
        """One short line: the status and the one number that matters."""
        if self.status == NOT_CHECKED:
            return f"conversion not checked: {self.reason}"
        worst = self.worst
        if self.status == AGREES:
            err = "" if worst is None or worst.max_error is None else f", max |error| {worst.max_error:.2g}"
            return f"conversion checked: agrees with {_framework(self.reference)}{err}" + (
                f" {self.reason}" if self.reason else ""
            )
        failed = [o for o in self.outputs if o.failed]
        at = f"; first departs at {self.first.operator} ({self.first.type})" if self.first else ""
        return (
            f"conversion DISAGREES with {_framework(self.reference)}: "
            f"{failed[0].text() if failed else 'an output differs'}{at}"
        )

    def text(self) -> str:
        """Every line of the verdict (the CLI's notes, the app's expander)."""
        if self.status == NOT_CHECKED:
            return self.headline()
        lines = [self.headline(), f"reference: {self.reference}", f"probe: {self.probe}"]
        lines += [("  " if not o.failed else "✗ ") + o.text() for o in self.outputs]
        if self.first is not None:
            f = self.first
            lines.append(
                f"first departing operand (as kuiper compare --framework finds it): operator {f.operator} "
                f"({f.type}, step {f.index + 1}), operand {f.operand}: {f.text}"
            )
        if self.reason and self.status != AGREES:  # (an agreeing verdict's headline says it)
            lines.append(self.reason)
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"version": CHECK_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConversionCheck | None:
        if data.get("version") != CHECK_VERSION:
            return None
        fields = {k: v for k, v in data.items() if k != "version"}
        fields["outputs"] = tuple(OutputCheck(**o) for o in fields.get("outputs", ()))
        first = fields.get("first")
        fields["first"] = Departure(**first) if first else None
        return cls(**fields)


def _framework(reference: str) -> str:
    """'onnxruntime 1.23.2' of 'onnxruntime 1.23.2 running the original .onnx: …'."""
    return reference.split(" running ", 1)[0] if reference else "the framework"


def not_checked(reason: str) -> ConversionCheck:
    return ConversionCheck(NOT_CHECKED, reason=reason)


# -- the key a verdict is stored under ---------------------------------------------------------
@functools.cache
def engine_digest() -> str:
    """A digest of the engine's source (kuiper_core/**/*.py). A verdict is the engine's answer as
    much as the converter's: one stored by another version of the engine (a layer fixed since, or
    broken since) is not reused. Read once per process (~2 MB)."""
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def probe_key(inputs: Sequence[np.ndarray] | None) -> str:
    """The key a verdict is stored under: 'seeded' for the seeded probe, else a digest of the
    given arrays (dtype, shape and bytes); then the engine's digest."""
    if inputs is None:
        return f"seeded-{SEED}@{engine_digest()}"
    h = hashlib.sha256()
    for x in inputs:
        a = np.ascontiguousarray(x)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return "input-" + h.hexdigest()[:24] + f"@{engine_digest()}"


# -- storing verdicts in the conversion's cache entry --------------------------------------------
def stored_check(directory: Path, key: str) -> ConversionCheck | None:
    try:
        data = json.loads((directory / CHECKS_FILE).read_text())
        return ConversionCheck.from_json(data[key])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_check(directory: Path, key: str, check: ConversionCheck) -> None:
    """Add the verdict to the entry's checks.json (written whole by a rename: a reader never
    sees half a file; a racing writer's verdict on another probe may be lost, and is made again)."""
    path = directory / CHECKS_FILE
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    data[key] = check.to_json()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".checks-", dir=directory)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except OSError:  # a read-only cache: the verdict holds for this open only
        pass
