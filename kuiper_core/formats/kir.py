"""Kuiper's textual IR (docs/ir.md): text whose first token, after `//` comments, is `{`."""

from __future__ import annotations

import re
from .base import Context, OpenedModel, reference_info

NAME = "kir"
SUFFIXES = (".kir",)
_LEAD = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*")  # the IR lexer's spacing and comments


def match(context: Context) -> bool:
    text = context.text_head()
    lead = _LEAD.match(text)
    return lead is not None and text[lead.end() :].startswith("{")


def open(context: Context) -> OpenedModel:
    from ..files import decode_utf8
    from ..ir import bind_weights, parse_module, read_module

    opts = context.options
    check, unregistered = opts.check_layers, opts.allow_unregistered
    if context.path is not None:
        module = read_module(context.path, check=check, allow_unregistered=unregistered)
    else:
        text = decode_utf8(context.data(), context.where, severity="error")
        module = parse_module(text, context.where, check=check, allow_unregistered=unregistered)
    bin_source = opts.bin_path
    if opts.weights:
        weights = bytes(bin_source) if isinstance(bin_source, (bytes, bytearray, memoryview)) else bin_source
        bind_weights(module, context.path, weights)
    return OpenedModel(
        module.graph, NAME, context.where, context.path, references=reference_info(NAME, None), ir_module=module
    )
