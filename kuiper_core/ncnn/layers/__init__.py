"""ncnn's layers (`ncnn.<Type>` in the Graph), registered in the engine's layer registry when
this package is imported (kuiper_core.ncnn does on load)."""

from . import dense, elementwise, pooling, recurrent, shape

__all__ = ["dense", "elementwise", "pooling", "recurrent", "shape"]
