"""Untrusted names as the app shows them: an uploaded file's name (a browser sends any text as
a file name), and the names inside an uploaded model (operators, operands, weights, inputs: a
`.param` name is any text without whitespace, a `.kir` name any text at all). Pages put them
into Markdown (headers, labels, warning boxes, code spans): there each must read as itself,
never as a link, an image, HTML or the end of the code span around it."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

# Characters of a file name that Markdown would act on: a name must not become a link, an
# image or the end of the code span around it.
_INERT = str.maketrans({"`": "'", "[": "(", "]": ")", "<": "‹", ">": "›", "@": "＠", "!": "ǃ"})
_AUTOLINK = re.compile(r"(?i)www\.")
DEFAULT_NAME = "model.pnnx.param"
MAX_NAME_CHARS = 200  # of a name shown in Markdown (a .param line may be 1 MiB)
_JOINER = "\u2060"  # a word joiner: invisible, and no character an autolink continues over
# Where GFM's autolinks start: a scheme's ':' before '//', mailto: and xmpp:, an e-mail's '@'
# (a word joiner after each; other text, "top: 1.5" or "@0", is left as it reads)
_LINK_START = re.compile(r"(?i):(?=/)|(?<=mailto):|(?<=xmpp):|@(?=[\w.+-]*\.)")
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character


def display_name(name: str, limit: int = 120) -> str:
    """No path, no control characters, not endless, and inert as Markdown wherever a page puts
    it (no link, image, autolink or broken code span)."""
    name = "".join(ch for ch in Path(name.replace("\\", "/")).name if unicodedata.category(ch)[0] != "C")
    name = _AUTOLINK.sub(lambda m: m.group(0)[:3] + "\u2024", name.translate(_INERT))
    name = name or DEFAULT_NAME
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _one_line(text: str, limit: int) -> str:
    text = "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in str(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def md_text(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """`text` as itself in Markdown outside a code span (a header, a caption, a button's or an
    option's label): one line, every ASCII punctuation character backslash-escaped (CommonMark
    allows it for each), so no link, image, HTML, emphasis, autolink or Streamlit directive
    (`:red[…]`) comes of it; an invisible word joiner where an autolink would start (`://`,
    `mailto:`, an e-mail's `@`, `www.`) keeps GFM's autolinks off, which act on the text after
    its escapes. An operator named `[Session_expired](https://evil.example/login)`
    was a real link in the Graph page's header."""
    text = _AUTOLINK.sub(lambda m: m.group(0)[:3] + _JOINER + ".", _one_line(text, limit))
    text = _LINK_START.sub(lambda m: m.group(0) + _JOINER, text)  # no https://, mailto: or a@b.c
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def code_span(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """`text` as a Markdown code span that it cannot end: fenced by more backticks than its
    longest run of them (CommonMark), one line."""
    text = _one_line(text, limit)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
