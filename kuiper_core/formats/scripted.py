"""What to say when a TorchScript module's forward takes an argument that is no tensor.

pnnx calls forward with one tensor per inputshape entry: a scripted `forward(x, sr: int)`
(silero-vad's .jit) fails inside it with torch's "forward() is missing value for argument
'sr.1'" (or "Expected a value of type 'int' for argument 'sr.1'"), and its inputshape= cannot
say a 0-d value at all. Tracing a wrapper that passes a constant around the scripted file does
not help: the trace calls the script, whose control flow (and state kept in attributes) pnnx
fails on again (tried on silero_vad.jit, also frozen and constant-propagated).
"""

from __future__ import annotations

import re

# torch's complaint when pnnx calls a scripted forward with tensors only (silero-vad's `sr: int`)
NOT_A_TENSOR = re.compile(r"(?:missing value for|of type '\w+' for) argument '(\w+?)(?:\.\d+)?'")


def scripted_argument_hint(argument: str | None = None) -> str:
    """What to do about a scripted forward's argument that is no tensor (None: not known by name)."""
    which = f"'{argument}'" if argument else "that argument"
    head = (
        f"the module's forward takes {which}, which is no tensor (an int, a float, a bool), and pnnx calls forward "
        "with tensors only (one per inputshape): "
        if argument
        else ""
    )
    return head + (
        f"trace the original Python module with {which} fixed (torch.jit.trace of a wrapper whose forward passes "
        f"it as a constant), or torch.onnx.export it so and open the .onnx (the ONNX route also fixes {which} at "
        "the value given with --input); a wrapper traced around a scripted file keeps its script, and pnnx fails "
        "on that again"
    )
