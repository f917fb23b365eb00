"""The session's Forward stepper, kept while the model and the input stay the same: the Forward
and IR pages share it, and a rerun (every click) must not start Forward over."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..runtime import RuntimeGraph
from .stepper import ForwardStepper
from .tensors import arrays_digest


@dataclass
class StepperCache:
    key: tuple[str, str] | None = None  # (model content digest, inputs' digest)
    stepper: ForwardStepper | None = None

    def get(self, model_key: str, runtime: RuntimeGraph, inputs: Sequence[np.ndarray]) -> ForwardStepper:
        """The stepper for this model and input: a new one when either changed."""
        key = (model_key, arrays_digest(inputs))
        if self.stepper is None or self.key != key:
            self.key, self.stepper = key, ForwardStepper(runtime, inputs)
        return self.stepper
