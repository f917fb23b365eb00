"""TorchScript: the zip `torch.jit.save` writes (`ARCHIVE/code/…`, `ARCHIVE/constants.pkl`,
`ARCHIVE/data.pkl`), converted to PNNX by the `pnnx` converter (convert.py)."""

from __future__ import annotations


from .base import Context, OpenedModel
from .converted import open_converted

NAME = "torchscript"
SUFFIXES = (".pt", ".pth", ".torchscript", ".ptl")

_EXPORT = "save the model with torch.jit.trace(model, example).save('model.pt') or torch.onnx.export"


def _archive_entries(context: Context) -> set[str]:
    """The entry names below the archive's top folder (`code/__torch__.py`, `data.pkl`)."""
    return {n.split("/", 1)[1] for n in context.zip_names or () if "/" in n}


def match(context: Context) -> bool:
    entries = _archive_entries(context)
    return "constants.pkl" in entries or ("data.pkl" in entries and any(e.startswith("code/") for e in entries))


def explain(context: Context) -> str | None:
    entries = _archive_entries(context)
    if any("exported_program" in e or e == "archive_format" for e in entries):
        return f"a torch.export program (.pt2), which pnnx does not read: {_EXPORT}"
    if "data.pkl" in entries:
        return f"a PyTorch checkpoint (torch.save: weights or a pickled module, no TorchScript code): {_EXPORT}"
    if context.suffix_is(*SUFFIXES) and context.head[:1] == b"\x80":
        return f"a pickled PyTorch object in the legacy torch.save format, not TorchScript: {_EXPORT}"
    return None


def open(context: Context) -> OpenedModel:
    return open_converted(context, NAME)
