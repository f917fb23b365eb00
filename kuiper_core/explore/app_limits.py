"""The app server's limits: one process serves every browser session, so every model, input
and expression the app makes is made under lower limits than the engine's defaults
(docs/limits.md), and what it keeps for reloads and links is bounded in bytes."""

from __future__ import annotations

from ..errors import LimitError
from ..limits import DEFAULT, Limits

APP_LIMITS = DEFAULT.replace(
    max_operators=20_000,  # every page stays within seconds (100,000 took ~20 s a page)
    max_tensor_elements=1 << 26,  # 256 MB of float32 per tensor
    max_planned_bytes=1 << 30,
    max_expression_operand=256,
    max_expression_depth=2_000,
    max_expression_chars=256 << 10,  # ~2 s to read and plan (real models: 4.4 KB; a 20,000-ReLU chain at -O2: 140 KB)
    max_inflated_bytes=512 << 20,  # an uploaded .npz, all members together
    max_folded_bytes=512 << 20,  # what one model folds at build
    max_model_cache_bytes=1 << 30,  # every uploaded model the server keeps, together
    max_operator_work=1 << 34,  # ~4 s of one core an operator (VGG-16's largest conv at 224: 1.9e9)
    max_child_seconds=180,  # a conversion or a framework reference once it starts (it may wait for a slot first)
)
UPLOAD_STORE_BYTES = 1 << 30  # uploaded models kept for reloads and links, every session together
KEPT_BYTES = 512 << 20  # uploaded inputs and computed references kept for reloads, every session together
EXPRESSION_WALK_NODES = 4_096  # nodes of an expression the Expressions page walks (a step each, its
#                                 tree's colours sent for every step: 8,191 nodes took 3 s a rerun;
#                                 pnnx's and the fusion pass's expressions have at most 256)


def check_upload_size(what: str, data: bytes | None, limits: Limits) -> None:
    """An upload over `limits.max_upload_bytes` is refused before it is read."""
    n = len(data or b"")
    if n > limits.max_upload_bytes:
        raise LimitError(
            f"{what} upload is {n:,} bytes", limit="max_upload_bytes", maximum=limits.max_upload_bytes, value=n
        )
