"""Shared UI helpers for every page: the current model, the current input, errors.

Models are loaded once per content (``st.cache_resource`` keyed by a SHA-256 of the
files) and shared between sessions; what a user picked lives in ``st.session_state``:

    kx_model  {"source": "bundled", "name": NAME}
              or {"source": "upload", "name": FILE, "digest": HEX}   (bytes in kx_upload)
    kx_input  {"kind": "sample"|"random"|"zeros"|"ones"|"npy"|"image", "seed": int}
              (+ the array itself in kx_input_array for "npy" / "image")
    kx_refs   {operand name: array} uploaded reference tensors (.npz), or absent
    kx_forward {"key": (model key, input digest), "stepper": ForwardStepper}: the Forward
              stepper, shared by the Forward and IR pages (`forward_stepper()`)

Pages call ``require_model()`` (stops the page with a hint when nothing is usable) and
``current_input()``; they never touch the files or the cache directly.
"""

from __future__ import annotations

import hashlib
import io
import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import streamlit as st

from kuiper_core import limits
from kuiper_core.errors import KuiperError, LimitError, ParseError
from kuiper_core.explore import inputs as kx_inputs
from kuiper_core.graph import Graph
from kuiper_core.runtime import RuntimeGraph

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"

MODEL_KEY = "kx_model"
UPLOAD_KEY = "kx_upload"
INPUT_KEY = "kx_input"
INPUT_ARRAY_KEY = "kx_input_array"
REFS_KEY = "kx_refs"
LOAD_ERROR_KEY = "kx_load_error"  # why the session's model was dropped (shown on Home)

# One process serves every browser session: lower limits than the engine's defaults
# (docs/limits.md). Every model, input and expression of the app is made under these.
APP_LIMITS = limits.DEFAULT.replace(
    max_operators=20_000,  # every page stays within seconds (100,000 took ~20 s a page)
    max_tensor_elements=1 << 26,  # 256 MB of float32 per tensor
    max_planned_bytes=1 << 30,
    max_expression_operand=256,
    max_expression_depth=2_000,
)
FORWARD_KEY = "kx_forward"


def _leave_legacy_pages_mode() -> None:
    """Serve a deep link on a fresh server through app.py's st.navigation.

    Streamlit treats a `pages/` folder as the legacy multipage layout until the main
    script has called st.navigation once; a first request for /graph would then run
    pages/2_graph.py bare (no wide layout, every file in the sidebar). Every page imports
    this module, so switching the flag and rerunning here routes it through app.py.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a future Streamlit without the legacy mode
        return
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


_leave_legacy_pages_mode()


@dataclass(eq=False)
class LoadedModel:
    """A model as the pages see it. `graph` may exist while `runtime` does not (the
    graph parsed but could not be built, e.g. an unsupported operator): the graph page
    still draws it, the running pages show `error`."""

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

    @property
    def ok(self) -> bool:
        return self.runtime is not None

    @property
    def description(self) -> str:
        return str(self.meta.get("description", ""))


# -- bundled models ----------------------------------------------------------------------
@st.cache_data(show_spinner=False)
def bundled_models() -> dict[str, dict[str, Any]]:
    """models.json: {name: entry}, the default model first, only models whose files exist."""
    path = SAMPLES / "models.json"
    if not path.exists():
        return {}
    entries = json.loads(path.read_text())
    present = {n: e for n, e in entries.items() if (SAMPLES / f"{n}.pnnx.param").exists()}
    return dict(sorted(present.items(), key=lambda kv: (not kv[1].get("default"), kv[1].get("operators", 0))))


def default_model_name() -> str | None:
    models = bundled_models()
    return next(iter(models), None)


@st.cache_data(show_spinner=False)
def _file_digest(paths: tuple[str, ...], stamps: tuple[tuple[int, int], ...]) -> str:
    # `stamps` (size, mtime) are part of the cache key so an edited file is re-hashed.
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes() if Path(p).exists() else b"")
    return h.hexdigest()[:16]


def _bundled_digest(name: str) -> str:
    paths = tuple(str(SAMPLES / f"{name}.pnnx.{ext}") for ext in ("param", "bin"))
    stamps = tuple((Path(p).stat().st_size, int(Path(p).stat().st_mtime)) if Path(p).exists() else (0, 0) for p in paths)
    return _file_digest(paths, stamps)


def _read_model(model: LoadedModel, read: Callable[[], Graph]) -> LoadedModel:
    """Parse (`read`) then build, keeping the graph when only the build fails. Never raises:
    a cached load that raised would fail again on every page, for the sidebar's badge."""

    def fail(e: BaseException) -> None:
        if isinstance(e, KuiperError):
            text = e.render() if isinstance(e, (ParseError, LimitError)) else str(e)
        else:  # an engine bug: say so, without a traceback
            text = f"internal error while loading the model: {type(e).__name__}: {e}"
        model.error = text.replace(f"{ROOT}/", "")  # bundled files by their repository path, not the server's
        model.error_kind = type(e).__name__

    with limits.use(APP_LIMITS):
        try:
            model.graph = read()
        except Exception as e:
            fail(e)
            return model
        try:
            model.runtime = RuntimeGraph.from_graph(model.graph).build()
        except Exception as e:
            fail(e)
    return model


def _npz(path: Path) -> dict[str, np.ndarray]:
    if not path.exists():
        return {}
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@st.cache_resource(show_spinner="Loading model…", max_entries=12)
def load_bundled(name: str, digest: str) -> LoadedModel:
    meta = bundled_models().get(name, {})
    model = LoadedModel(key=digest, name=name, source="bundled", meta=meta)
    from kuiper_core.pnnx import load_graph

    _read_model(model, lambda: load_graph(SAMPLES / f"{name}.pnnx.param", SAMPLES / f"{name}.pnnx.bin"))
    sample = SAMPLES / f"{name}.input.npy"
    if sample.exists():
        model.sample_input = np.load(sample, allow_pickle=False)
    expected = _npz(SAMPLES / f"{name}.expected.npz")
    model.expected = [expected[k] for k in sorted(expected, key=lambda k: int(k[3:]) if k[3:].isdigit() else k)]
    model.operands = _npz(SAMPLES / f"{name}.operands.npz")
    return model


@st.cache_resource(show_spinner="Loading model…", max_entries=8)
def load_uploaded(digest: str, name: str, _param: bytes, _bin: bytes | None) -> LoadedModel:
    """An uploaded pair, read from memory (no copies on the server's disk); messages
    call the files by the uploaded name."""
    from kuiper_core.pnnx import load_graph_bytes

    model = LoadedModel(key=digest, name=name, source="upload")

    def read() -> Graph:
        for what, data in (("the .param", _param), ("the .bin", _bin)):
            check_upload_size(what, data)
        return load_graph_bytes(_param, _bin, name)

    return _read_model(model, read)


def check_upload_size(what: str, data: bytes | None) -> None:
    """An upload over APP_LIMITS.max_upload_bytes is refused before it is read."""
    n = len(data or b"")
    if n > APP_LIMITS.max_upload_bytes:
        raise LimitError(f"{what} upload is {n:,} bytes", limit="max_upload_bytes",
                         maximum=APP_LIMITS.max_upload_bytes, value=n)


def display_name(name: str, limit: int = 120) -> str:
    """An uploaded file's name as pages show it: no path, no control characters, not endless."""
    name = "".join(ch for ch in Path(name.replace("\\", "/")).name if unicodedata.category(ch)[0] != "C")
    name = name or "model.pnnx.param"
    return name if len(name) <= limit else name[: limit - 1] + "…"


def upload_digest(param: bytes, bin_bytes: bytes | None) -> str:
    h = hashlib.sha256(param)
    h.update(b"\0bin\0" + (bin_bytes or b""))
    return h.hexdigest()[:16]


# -- the session's model and input -------------------------------------------------------
def select_bundled(name: str) -> None:
    st.session_state[MODEL_KEY] = {"source": "bundled", "name": name}
    _reset_model_state()


def select_upload(name: str, param: bytes, bin_bytes: bytes | None) -> LoadedModel:
    name = display_name(name)
    digest = upload_digest(param, bin_bytes)
    st.session_state[UPLOAD_KEY] = (param, bin_bytes)
    st.session_state[MODEL_KEY] = {"source": "upload", "name": name, "digest": digest}
    _reset_model_state()
    return load_uploaded(digest, name, param, bin_bytes)


def _reset_model_state() -> None:
    """A new model invalidates inputs, references and every page's per-model state."""
    st.session_state[INPUT_KEY] = {"kind": "sample", "seed": 0}
    for key in (INPUT_ARRAY_KEY, REFS_KEY):
        st.session_state.pop(key, None)


def current_model() -> LoadedModel | None:
    """The session's model (the default bundled model on first visit), or None.

    Runs on every page (the sidebar badge): if loading the session's choice fails in a way
    the loader did not catch, the choice is dropped (Home says why), never an error on
    every page until the browser reloads."""
    try:
        return _current_model()
    except Exception as e:
        st.session_state[LOAD_ERROR_KEY] = f"{type(e).__name__}: {e}"
        st.session_state.pop(MODEL_KEY, None)
        st.session_state.pop(UPLOAD_KEY, None)
        try:
            return _current_model()
        except Exception:
            return None


def _current_model() -> LoadedModel | None:
    choice = st.session_state.get(MODEL_KEY)
    if choice is None:
        name = default_model_name()
        if name is None:
            return None
        select_bundled(name)
        choice = st.session_state[MODEL_KEY]
    if choice["source"] == "upload":
        param, bin_bytes = st.session_state.get(UPLOAD_KEY, (None, None))
        if param is None:
            return None
        return load_uploaded(choice["digest"], choice["name"], param, bin_bytes)
    return load_bundled(choice["name"], _bundled_digest(choice["name"]))


def require_model(runnable: bool = True) -> LoadedModel:
    """The current model, or stop the page with a clear message.

    runnable=False accepts a model whose graph parsed but could not be built."""
    model = current_model()
    if model is None:
        st.info("No model loaded: pick one on the Home page.")
        st.stop()
    assert model is not None
    if model.graph is None or (runnable and not model.ok):
        show_error(model.error or "the model could not be loaded", title=f"Cannot use model '{model.name}'")
        st.stop()
    return model


def model_input_specs(model: LoadedModel) -> list[tuple[str, tuple[int, ...], str]]:
    from pages.input_size import chosen_sizes  # the size picked for a dynamic-shape model

    assert model.graph is not None
    return kx_inputs.input_specs(model.graph, model.meta.get("input_shape"), chosen_sizes(model))


def current_input(model: LoadedModel | None = None) -> list[np.ndarray]:
    """The input arrays (one per pnnx.Input) the session chose on the Home page.

    Falls back to seeded random data when the chosen kind is not available (e.g. an
    uploaded model has no sample input)."""
    model = model or require_model()
    spec = st.session_state.get(INPUT_KEY) or {"kind": "sample", "seed": 0}
    specs = model_input_specs(model)
    kind = spec.get("kind", "sample")
    if kind == "sample" and model.sample_input is not None and len(specs) == 1:
        return [model.sample_input]
    if kind in ("npy", "image") and INPUT_ARRAY_KEY in st.session_state and len(specs) == 1:
        return [st.session_state[INPUT_ARRAY_KEY]]
    if kind not in ("random", "zeros", "ones"):
        kind = "random"
    seed = int(spec.get("seed", 0))
    try:
        with limits.use(APP_LIMITS):  # a 3-line upload may declare a (1,3,16000,16000) input
            return [kx_inputs.synthetic_input(kind, shape, dtype, seed + i) for i, (_, shape, dtype) in enumerate(specs)]
    except KuiperError as e:
        show_error(e, title="Cannot make an input for this model")
        st.stop()
        raise  # (st.stop raises; this line is for the type checker)


def input_description() -> str:
    spec = st.session_state.get(INPUT_KEY) or {"kind": "sample"}
    kind = spec.get("kind", "sample")
    return {
        "sample": "the model's sample input",
        "random": f"seeded random (seed {spec.get('seed', 0)})",
        "zeros": "zeros",
        "ones": "ones",
        "npy": "an uploaded .npy",
        "image": "an uploaded picture",
    }.get(kind, kind)


def current_references(model: LoadedModel) -> dict[str, np.ndarray]:
    """Reference tensors by operand name: an uploaded .npz, else the bundled operands.

    Only meaningful for the model's sample input; pages should say so."""
    refs = st.session_state.get(REFS_KEY)
    return refs if refs is not None else model.operands


def set_uploaded_references(data: bytes) -> dict[str, np.ndarray]:
    """Store an uploaded .npz of reference tensors (operand name -> array)."""
    from kuiper_core.npy import read_npz

    check_upload_size("the .npz", data)
    refs = read_npz(data, "the .npz", APP_LIMITS)
    st.session_state[REFS_KEY] = refs
    return refs


def forward_stepper(model: LoadedModel, inputs: list[np.ndarray]) -> "ForwardStepper":
    """The session's Forward stepper for this model and input (a new one when either changed)."""
    from kuiper_core.explore import tensors
    from kuiper_core.explore.stepper import ForwardStepper

    assert model.runtime is not None
    key = (model.key, tensors.arrays_digest(inputs))
    state = st.session_state.get(FORWARD_KEY)
    if state is None or state.get("key") != key:
        state = {"key": key, "stepper": ForwardStepper(model.runtime, inputs)}
        st.session_state[FORWARD_KEY] = state
    return state["stepper"]


# -- presentation --------------------------------------------------------------------------
def show_error(error: BaseException | str, title: str = "Error") -> None:
    """An engine error as a red box + the located message in monospace (caret aligned)."""
    if isinstance(error, (ParseError, LimitError)):
        text = error.render()
    else:
        text = str(error)
    st.error(f"**{title}**" + (f" — {type(error).__name__}" if isinstance(error, BaseException) else ""))
    st.code(text, language=None)


def sidebar_model_badge() -> None:
    """The current model and input, shown in the sidebar of every page."""
    model = current_model()
    with st.sidebar:
        if model is None:
            st.caption("No model loaded")
            return
        status = "ready" if model.ok else ("graph only" if model.graph is not None else "failed")
        st.markdown(f"**Model:** `{model.name}` ({status})")
        if model.ok:
            st.caption(f"Input: {input_description()}")


def shape_text(shape: Any) -> str:
    if shape is None:
        return "?"
    return "×".join("?" if d is None else str(d) for d in shape)


def picture_to_input(data: bytes, model: LoadedModel, shape: tuple[int, ...]) -> np.ndarray:
    """Decode and resize a picture (Pillow), then the model's preprocessing (NumPy, in the engine)."""
    from PIL import Image, UnidentifiedImageError

    pp = model.meta.get("preprocess") or {}
    channels = int(shape[1]) if len(shape) == 4 else 1
    mode = pp.get("mode") or ("L" if channels == 1 else "RGB")
    resample = {"box": Image.Resampling.BOX, "nearest": Image.Resampling.NEAREST}.get(
        pp.get("resample", ""), Image.Resampling.BILINEAR
    )
    check_upload_size("the picture", data)
    try:
        img = Image.open(io.BytesIO(data))
        pixels = img.size[0] * img.size[1]
        if pixels > APP_LIMITS.max_tensor_elements:  # before decoding: a tiny PNG can inflate to gigabytes
            raise LimitError(f"the picture is {img.size[0]}x{img.size[1]} pixels", limit="max_tensor_elements",
                             maximum=APP_LIMITS.max_tensor_elements, value=pixels)
        img.load()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as e:
        raise KuiperError(f"not a picture this app can read: {e}") from None
    img = img.convert(mode).resize((int(shape[-1]), int(shape[-2])), resample)
    return kx_inputs.image_to_input(np.asarray(img), pp, shape)
