"""An uploaded file's name as the app shows it: a browser sends any text as a file name, and
pages put it into Markdown (labels, warning boxes, code spans)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

# Characters of a file name that Markdown would act on: a name must not become a link, an
# image or the end of the code span around it.
_INERT = str.maketrans({"`": "'", "[": "(", "]": ")", "<": "‹", ">": "›", "@": "＠", "!": "ǃ"})
_AUTOLINK = re.compile(r"(?i)www\.")
DEFAULT_NAME = "model.pnnx.param"


def display_name(name: str, limit: int = 120) -> str:
    """No path, no control characters, not endless, and inert as Markdown wherever a page puts
    it (no link, image, autolink or broken code span)."""
    name = "".join(ch for ch in Path(name.replace("\\", "/")).name if unicodedata.category(ch)[0] != "C")
    name = _AUTOLINK.sub(lambda m: m.group(0)[:3] + "\u2024", name.translate(_INERT))
    name = name or DEFAULT_NAME
    return name if len(name) <= limit else name[: limit - 1] + "…"
