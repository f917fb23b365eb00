"""The model as the app's pages see it (`LoadedModel`), read and built without ever raising:
one record per model content, shared by every session that opened it.

    model = load_upload(digest, name, param_bytes, bin_bytes, open_model, APP_LIMITS)
    model.graph        # None when the file did not parse (model.error says why)
    model.runtime      # None when the graph did not build (the graph page still draws it)

`open_model` is the caller's (kuiper_core.references.conversion_check's, which checks a
conversion against its framework): the framework references live above explore/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import limits as limits_module
from ..errors import KuiperError
from ..formats import OpenedModel
from ..graph import Graph
from ..limits import Limits
from ..runtime import ExecutionOptions, RuntimeGraph
from .app_limits import check_upload_size
from .messages import error_text

Opener = Callable[..., OpenedModel]  # kuiper_core.formats.open_model's signature (source, **options)
RELEASED = "this model was released when the sessions using it ended: load it again"


@dataclass(eq=False)
class LoadedModel:
    """`graph` may exist while `runtime` does not (the graph parsed but could not be built,
    e.g. an unsupported operator): the graph page still draws it, the running pages show `error`."""

    key: str  # content digest
    name: str
    source: str  # "bundled" | "upload"
    meta: dict[str, Any] = field(default_factory=dict)  # models.json entry ({} for uploads)
    graph: Graph | None = None
    runtime: RuntimeGraph | None = None
    error: str | None = None  # the engine's located message
    error_kind: str | None = None  # the error class name
    sample_input: np.ndarray | None = None
    expected: list[np.ndarray] = field(default_factory=list)
    operands: dict[str, np.ndarray] = field(default_factory=dict)  # reference tensors
    examples: np.ndarray | None = None  # bundled example inputs (N, ...) e.g. held-out digits
    example_labels: np.ndarray | None = None
    # What kuiper_core.formats opened: the format, the PNNX files (converted ones included),
    # the conversion record and which references can be computed. None until it opened.
    opened: OpenedModel | None = None

    @property
    def ok(self) -> bool:
        return self.runtime is not None

    @property
    def description(self) -> str:
        return str(self.meta.get("description", ""))


def _failure_text(e: BaseException, hide: str | None) -> str:
    if isinstance(e, MemoryError):  # a size no limit foresaw: more than the server has free
        e = limits_module.out_of_memory(e)
    if isinstance(e, KuiperError):
        text = error_text(e)
    else:  # an engine bug: say so, without a traceback
        text = f"internal error while loading the model: {type(e).__name__}: {e}"
    return text.replace(hide, "") if hide else text


def read_model(model: LoadedModel, read: Callable[[], Graph], limits: Limits, hide: str | None = None) -> LoadedModel:
    """Parse (`read`) then build, keeping the graph when only the build fails. Never raises: a
    cached load that raised would fail again on every page, for the sidebar's badge. `hide` is
    taken out of messages (the server's folder: bundled files go by their repository path)."""
    with limits_module.use(limits):
        try:
            model.graph = read()
            # "auto": the whole forward in this process, never the split executor's helper
            # process (one server process holds every session's sockets and threads).
            model.runtime = RuntimeGraph.from_graph(model.graph, options=ExecutionOptions("auto")).build()
        except Exception as e:
            model.error = _failure_text(e, hide)
            model.error_kind = type(e).__name__
    return model


def load_upload(
    digest: str,
    name: str,
    param: bytes,
    bin_bytes: bytes | None,
    open_model: Opener,
    limits: Limits,
    *,
    inputshape: str | None = None,
    optlevel: int | None = None,
    on_log: Callable[[str], None] | None = None,
    hide: str | None = None,
    values: dict[str, Any] | None = None,
) -> LoadedModel:
    """An uploaded model of any format (kuiper_core.formats: .pnnx.param + .bin, .kir, .onnx,
    TorchScript .pt), read from memory; messages call it by the uploaded name. ONNX and
    TorchScript are converted by pnnx (`inputshape`, `optlevel`, `values` of small integer ONNX
    inputs by name; `on_log` gets each converter line as it is printed; `hide` as for read_model)."""
    model = LoadedModel(key=digest, name=name, source="upload")

    def read() -> Graph:
        for what, data in (("the model", param), ("the .bin", bin_bytes)):
            check_upload_size(what, data, limits)
        model.opened = open_model(
            param,
            bin_path=bin_bytes,
            name=name,
            inputshape=inputshape,
            optlevel=optlevel,
            on_log=on_log,
            values=values or None,
        )
        return model.opened.graph

    return read_model(model, read, limits, hide)


def model_bytes(model: LoadedModel) -> int:
    """What a loaded model keeps in memory: weights, values folded at build, planned buffers,
    reference arrays (what the server's model cache budgets)."""
    total = model.graph.weight_bytes() if model.graph is not None else 0
    if model.runtime is not None:  # (read defensively: the runtime's internals may move)
        constants = getattr(model.runtime, "constants", None) or {}
        total += sum(limits_module.value_bytes(v) for v in constants.values())
        plan = getattr(model.runtime, "plan", None)
        total += int(getattr(plan, "total_bytes", 0) or 0)
    arrays = [model.sample_input, model.examples, *model.expected, *model.operands.values()]
    return total + sum(limits_module.value_bytes(a) for a in arrays if a is not None)


def release(model: LoadedModel) -> None:
    """Empty a model no session holds any more (a finished page's globals may still name it)."""
    model.graph = model.runtime = model.opened = model.sample_input = model.examples = model.example_labels = None
    model.expected, model.operands = [], {}
    model.error = RELEASED


def npz_arrays(path: Path) -> dict[str, np.ndarray]:
    """A .npz beside a bundled model as {key: array} ({} when there is none)."""
    if not path.exists():
        return {}
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}
