"""A converted model's verdict (kuiper_core/formats/conversion_check.py) as the app says it:
its tone (the error colour when the converted file disagrees with the original), the lines it
shows, and the Forward step of the first departing operand its link opens. pages/conversion_verdict.py
only draws this.

    view = verdict_view(session_verdict(model.opened, inputs))   # None: not a converted model
    view.tone, view.line, view.step
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..formats.conversion_check import ConversionCheck, probe_key, stored_check

ERROR, SUCCESS, INFO = "error", "success", "info"
GIVEN = "the given input"  # how a verdict's probe starts when it is the user's input


@dataclass(frozen=True)
class VerdictView:
    tone: str  # ERROR (disagrees), SUCCESS (agrees) or INFO (not checked)
    line: str  # the one line under every page's model line
    details: str  # every line of the verdict (Home)
    warning: str = ""  # ERROR: the sentence Home and the pages lead with
    operator: str | None = None  # ERROR: the first departing operator, when one was found
    step: int | None = None  # its Forward step (1-based, as ?step= reads it)

    @property
    def link_label(self) -> str:
        return f"Step to {self.operator}, where it first departs" if self.operator else ""

    @property
    def button_label(self) -> str:
        return f"Step through Forward to {self.operator}" if self.operator else ""


def session_verdict(opened: Any, inputs: Sequence[np.ndarray] | None) -> ConversionCheck | None:
    """The verdict on the input the user gave (`inputs`: an upload, a drawing) where the
    conversion was checked on it (stored with the conversion), else the opened model's (the
    seeded probe's); None for a model that was not converted."""
    conversion = getattr(opened, "conversion", None)
    if conversion is not None and inputs is not None:
        found = stored_check(conversion.directory, probe_key(inputs))
        if found is not None:
            return found
    return getattr(opened, "check", None)


def verdict_view(check: ConversionCheck | None) -> VerdictView | None:
    """How the app shows `check` (None for a model that was not converted)."""
    if check is None:
        return None
    line = check.headline() + (" (on your input)" if check.probe.startswith(GIVEN) else "")
    if not check.disagrees:
        return VerdictView(SUCCESS if check.agrees else INFO, line, check.text())
    first = check.first
    return VerdictView(
        ERROR,
        line,
        check.text(),
        warning=(
            "The converted model does not compute what the original does: its answers here are the "
            "converted file's, not the original model's."
        ),
        operator=first.operator if first else None,
        step=first.index + 1 if first else None,
    )
