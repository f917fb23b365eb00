"""Shared UI helpers for every page: the current model, the current input, errors.

Models are loaded once per content (``st.cache_resource`` keyed by a SHA-256 of the
files) and shared between sessions; what a user picked lives in ``st.session_state``:

    kx_model  {"source": "bundled", "name": NAME}
              or {"source": "upload", "name": FILE, "digest": HEX}   (kx_upload: its StoredModel)
              or {"source": "lost", "digest": HEX}: the URL named an upload the server no longer has
    kx_input  {"kind": "sample"|"random"|"zeros"|"ones"|"npy"|"image"|"example"|"drawing",
               "seed": int, "index": int}
              (+ {kind: (array, file name)} in kx_input_arrays for "npy" / "image" / "drawing")
    kx_refs   {key: array} an uploaded reference .npz as read (kx_refs_name: its file name), or
              absent; kuiper_core.explore.references maps its keys to operands
    kx_forward {"key": (model key, input digest), "stepper": ForwardStepper}: the Forward
              stepper, shared by the Forward and IR pages (`forward_stepper()`)

Pages call ``require_model()`` (stops the page with a hint when nothing is usable) and
``resolve_input()`` (the arrays and an honest description of what they are); they never
touch the files or the cache directly. The URL carries the model (``model=NAME`` for a
bundled one, ``upload=DIGEST`` for an upload, kept by content in ``upload_store()``), an
uploaded input (``input=DIGEST``, kept by content in ``kept_store()`` with computed references) and each
page's position (``sync_url``), so a reload or a shared link opens the same view.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable

import numpy as np
import streamlit as st

from kuiper_core import limits
from kuiper_core.errors import KuiperError, LimitError
from kuiper_core.explore import inputs as kx_inputs
from kuiper_core.explore.messages import error_text
from kuiper_core.explore.links import link_int
from kuiper_core.explore.upload_store import DIGEST_CHARS, Kept, StoredModel, UploadStore, content_digest
from kuiper_core.explore.model_cache import ModelCache
from kuiper_core.formats import OpenedModel
from kuiper_core.references.conversion_check import open_model
from kuiper_core.graph import Graph
from kuiper_core.runtime import ExecutionOptions, RuntimeGraph

if TYPE_CHECKING:
    from kuiper_core.explore.stepper import ForwardStepper

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"

MODEL_KEY = "kx_model"
UPLOAD_KEY = "kx_upload"
INPUT_KEY = "kx_input"
INPUT_ARRAYS_KEY = "kx_input_arrays"
REFS_KEY = "kx_refs"
REFS_NAME_KEY = "kx_refs_name"  # the uploaded reference file's name
REFS_DIGEST_KEY = "kx_refs_digest"  # its content digest: the URL's refs=, kept in kept_store() (issue 38)
LOAD_ERROR_KEY = "kx_load_error"  # why the session's model was dropped (shown on Home)

# One process serves every browser session: lower limits than the engine's defaults
# (docs/limits.md). Every model, input and expression of the app is made under these.
APP_LIMITS = limits.DEFAULT.replace(
    max_operators=20_000,  # every page stays within seconds (100,000 took ~20 s a page)
    max_tensor_elements=1 << 26,  # 256 MB of float32 per tensor
    max_planned_bytes=1 << 30,
    max_expression_operand=256,
    max_expression_depth=2_000,
    max_inflated_bytes=512 << 20,  # an uploaded .npz, all members together
    max_folded_bytes=512 << 20,  # what one model folds at build
    max_model_cache_bytes=1 << 30,  # every uploaded model the server keeps, together
    max_child_seconds=180,  # a conversion or a framework reference once it starts (it may wait for a slot first)
)
FORWARD_KEY = "kx_forward"


def _leave_legacy_pages_mode() -> None:
    """Serve a deep link on a fresh server through app.py's st.navigation.

    Streamlit treats a `pages/` folder as the legacy multipage layout until the main
    script has called st.navigation once; a first request for /graph would then run
    pages/2_graph.py bare (no wide layout, every file in the sidebar). Every page imports
    this module, so switching the flag and rerunning here routes it through app.py.
    """
    from pages.streamlit_internals import leave_legacy_pages_mode

    if leave_legacy_pages_mode():
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
    stamps = tuple(
        (Path(p).stat().st_size, int(Path(p).stat().st_mtime)) if Path(p).exists() else (0, 0) for p in paths
    )
    return _file_digest(paths, stamps)


def _read_model(model: LoadedModel, read: Callable[[], Graph]) -> LoadedModel:
    """Parse (`read`) then build, keeping the graph when only the build fails. Never raises:
    a cached load that raised would fail again on every page, for the sidebar's badge."""

    def fail(e: BaseException) -> None:
        if isinstance(e, MemoryError):  # a size no limit foresaw: more than the server has free
            e = limits.out_of_memory(e)
        if isinstance(e, KuiperError):
            text = error_text(e)
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
            # "auto": the whole forward in this process, never the split executor's helper
            # process (one server process holds every session's sockets and threads).
            model.runtime = RuntimeGraph.from_graph(model.graph, options=ExecutionOptions("auto")).build()
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

    def read() -> Graph:
        # Weights read when first used (the .bin is checked now): kernels keep their own
        # layouts, so the server holds no second copy of a model's weights (ResNet-18: 45 MB).
        model.opened = open_model(
            SAMPLES / f"{name}.pnnx.param", bin_path=SAMPLES / f"{name}.pnnx.bin", format="pnnx", weights="lazy"
        )
        return model.opened.graph

    _read_model(model, read)
    sample = SAMPLES / f"{name}.input.npy"
    if sample.exists():
        model.sample_input = np.load(sample, allow_pickle=False)
    expected = _npz(SAMPLES / f"{name}.expected.npz")
    model.expected = [expected[k] for k in sorted(expected, key=lambda k: int(k[3:]) if k[3:].isdigit() else k)]
    model.operands = _npz(SAMPLES / f"{name}.operands.npz")
    if meta.get("examples"):
        ex = _npz(SAMPLES / str(meta["examples"]))
        model.examples, model.example_labels = ex.get("images"), ex.get("labels")
    return model


UPLOAD_STORE_BYTES = 1 << 30  # uploaded models kept for reloads and links, every session together
LOST_KEY = "kx_lost"  # the digest of an uploaded model the URL named and the server no longer has
LINK_NOTE_KEY = "kx_link_note"  # the URL named a bundled model that does not exist (said once)
UNKEPT_KEY = "kx_unkept"  # the session's upload was too big for the store: a reload will not find it


@st.cache_resource(show_spinner=False)
def upload_store() -> UploadStore[StoredModel]:
    """The server's uploaded models by content digest (one per process, bounded by bytes)."""
    return UploadStore(UPLOAD_STORE_BYTES)


KEPT_BYTES = 512 << 20  # uploaded inputs and computed references kept for reloads, every session together
INPUT_DIGESTS_KEY = "kx_input_digests"  # {kind: digest} of kx_input_arrays' arrays (the URL's input=)


@st.cache_resource(show_spinner=False)
def kept_store() -> UploadStore[Kept]:
    """Uploaded inputs ('input:DIGEST') and computed references ('refs:MODEL:INPUT') by digest,
    so a reload finds them as it finds an uploaded model (one per process, bounded by bytes)."""
    return UploadStore(KEPT_BYTES)


def _add_link_note(note: str) -> None:
    old = st.session_state.get(LINK_NOTE_KEY)
    st.session_state[LINK_NOTE_KEY] = f"{old}\n\n{note}" if old else note


def _input_from_url() -> None:
    """A new session: the uploaded input its URL names (`input=DIGEST`), from the kept store;
    when the server no longer has it the page says what was lost instead of quietly running
    on another input."""
    digest = url_param("input")
    if digest is None:
        return
    kept = kept_store().get(f"input:{digest}") if _DIGEST.fullmatch(digest) else None
    if kept is None:
        _add_link_note(
            "The link's input (an uploaded array, picture or drawing) is no longer on this server (it restarted, or "
            "dropped it for newer uploads): the pages use the default input instead (the sidebar says which), and "
            "references computed for that input are gone. Upload the input again on the Home page."
        )
        return
    kind, array, name = kept.value
    st.session_state[INPUT_KEY] = {"kind": kind, "seed": 0}
    set_input_array(kind, array, name)


def _references_from_url() -> None:
    """A new session: the reference .npz its URL names (`refs=DIGEST`), from the kept store, or
    a note saying it is gone (the Forward page would otherwise compare with nothing, silently)."""
    digest = url_param("refs")
    if digest is None:
        return
    kept = kept_store().get(f"npz:{digest}") if _DIGEST.fullmatch(digest) else None
    if kept is None:
        _add_link_note(
            "The link's reference file (an uploaded .npz) is no longer on this server (it restarted, or dropped it "
            "for newer uploads): nothing is compared with it. Upload it again under **Compare with** on the Forward "
            "page."
        )
        return
    name, arrays = kept.value
    st.session_state[REFS_KEY], st.session_state[REFS_NAME_KEY] = arrays, name
    st.session_state[REFS_DIGEST_KEY] = digest


# Uploaded models, shared by the sessions that upload the same files, bounded in bytes
# (APP_LIMITS.max_model_cache_bytes) and dropped when no session holds them any more.
def _unload(model: LoadedModel) -> None:
    """Empty a model no session holds any more (a finished page's globals may still name it)."""
    model.graph = model.runtime = model.opened = model.sample_input = model.examples = model.example_labels = None
    model.expected, model.operands = [], {}
    model.error = "this model was released when the sessions using it ended: load it again"


_UPLOADS: ModelCache[LoadedModel] = ModelCache(lambda: APP_LIMITS.max_model_cache_bytes, _unload)
_SESSION_TOKEN = "_kx_session_token"


class _SessionToken:
    """Held in a session's state only: collected when the session ends, it releases the
    session's uploaded models (model_cache.py)."""


def model_bytes(model: LoadedModel) -> int:
    """What a loaded model keeps in memory: weights, values folded at build, planned
    buffers, reference arrays."""
    total = model.graph.weight_bytes() if model.graph is not None else 0
    if model.runtime is not None:  # (read defensively: the runtime's internals may move)
        constants = getattr(model.runtime, "constants", None) or {}
        total += sum(limits.value_bytes(v) for v in constants.values())
        plan = getattr(model.runtime, "plan", None)
        total += int(getattr(plan, "total_bytes", 0) or 0)
    arrays = [model.sample_input, model.examples, *model.expected, *model.operands.values()]
    return total + sum(limits.value_bytes(a) for a in arrays if a is not None)


def load_uploaded(
    digest: str,
    name: str,
    _param: bytes,
    _bin: bytes | None,
    inputshape: str | None = None,
    optlevel: int | None = None,
    _on_log: Callable[[str], None] | None = None,
) -> LoadedModel:
    """An uploaded model of any format (kuiper_core.formats: .pnnx.param + .bin, .kir,
    .onnx, TorchScript .pt), read from memory; messages call it by the uploaded name.
    ONNX and TorchScript are converted by pnnx (`inputshape`, `optlevel`; `_on_log` gets
    each converter line as it is printed), cached on disk by content. Kept in _UPLOADS
    (bytes-bounded, released with the sessions holding it)."""

    def make() -> LoadedModel:
        model = LoadedModel(key=digest, name=name, source="upload")

        def read() -> Graph:
            for what, data in (("the model", _param), ("the .bin", _bin)):
                check_upload_size(what, data)
            model.opened = open_model(
                _param, bin_path=_bin, name=name, inputshape=inputshape, optlevel=optlevel, on_log=_on_log
            )
            return model.opened.graph

        with st.spinner("Loading model…"):
            return _read_model(model, read)

    token = st.session_state.get(_SESSION_TOKEN)
    if token is None:
        token = st.session_state[_SESSION_TOKEN] = _SessionToken()
    key = (digest, name, inputshape, optlevel)
    model = _UPLOADS.get(key, make, model_bytes)
    _UPLOADS.hold(token, key)
    return model


def check_upload_size(what: str, data: bytes | None) -> None:
    """An upload over APP_LIMITS.max_upload_bytes is refused before it is read."""
    n = len(data or b"")
    if n > APP_LIMITS.max_upload_bytes:
        raise LimitError(
            f"{what} upload is {n:,} bytes", limit="max_upload_bytes", maximum=APP_LIMITS.max_upload_bytes, value=n
        )


# Characters of a file name that Markdown (a label, a warning box, a code span) would act on:
# a name must not become a link, an image or the end of the code span around it.
_INERT = str.maketrans({"`": "'", "[": "(", "]": ")", "<": "‹", ">": "›", "@": "＠", "!": "ǃ"})
_AUTOLINK = re.compile(r"(?i)www\.")


def display_name(name: str, limit: int = 120) -> str:
    """An uploaded file's name as pages show it: no path, no control characters, not endless,
    and inert as Markdown wherever a page puts it (no link, image, autolink or broken code span)."""
    name = "".join(ch for ch in Path(name.replace("\\", "/")).name if unicodedata.category(ch)[0] != "C")
    name = _AUTOLINK.sub(lambda m: m.group(0)[:3] + "\u2024", name.translate(_INERT))
    name = name or "model.pnnx.param"
    return name if len(name) <= limit else name[: limit - 1] + "…"


# -- the session's model and input -------------------------------------------------------
def select_bundled(name: str) -> None:
    st.session_state[MODEL_KEY] = {"source": "bundled", "name": name}
    _reset_model_state()


def select_upload(
    name: str,
    data: bytes,
    bin_bytes: bytes | None,
    *,
    inputshape: str | None = None,
    optlevel: int | None = None,
    on_log: Callable[[str], None] | None = None,
) -> LoadedModel:
    """Make an uploaded model the session's: a .pnnx.param or .kir (+ its .bin), an .onnx or a
    TorchScript .pt (converted by pnnx with `inputshape`/`optlevel`; `on_log` gets each line
    the converter prints, when it runs). Kept by content for reloads and links."""
    name = display_name(name)
    options = {"inputshape": inputshape, "optlevel": optlevel}
    files = {"param": data, "bin": bin_bytes}
    stored = StoredModel(content_digest(files, options), name, files, options)
    kept = upload_store().put(stored)
    _use_stored(stored)
    if not kept:
        st.session_state[UNKEPT_KEY] = stored.nbytes
    return _load_stored(stored, on_log)


def _use_stored(stored: StoredModel) -> None:
    """Make a stored upload the session's model (the session holds it: eviction cannot take it)."""
    st.session_state[UPLOAD_KEY] = stored
    st.session_state[MODEL_KEY] = {"source": "upload", "name": stored.name, "digest": stored.digest}
    _reset_model_state()


def _load_stored(stored: StoredModel, on_log: Callable[[str], None] | None = None) -> LoadedModel:
    return load_uploaded(
        stored.digest,
        stored.name,
        stored.files["param"] or b"",
        stored.files.get("bin"),
        stored.meta.get("inputshape"),
        stored.meta.get("optlevel"),
        on_log,
    )


def _reset_model_state() -> None:
    """A new model invalidates inputs, references and every page's per-model state
    (the Home page's input widgets too, so they show the new model's default)."""
    st.session_state[INPUT_KEY] = {"kind": "sample", "seed": 0}
    for key in (
        LOST_KEY,
        UNKEPT_KEY,
        INPUT_ARRAYS_KEY,
        INPUT_DIGESTS_KEY,
        REFS_KEY,
        REFS_NAME_KEY,
        REFS_DIGEST_KEY,
        "kx_ref_choice",  # what to compare with (pages/compare_panel.py): chosen again per model
        "home_input_kind",
        "home_seed",
        "home_example",
        "home_input_error",
    ):
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
        choice = _model_from_url()
        if choice is None:
            return None
        _input_from_url()
        _references_from_url()
    if choice["source"] == "lost":
        return None
    if choice["source"] == "upload":
        stored = st.session_state.get(UPLOAD_KEY)
        if not isinstance(stored, StoredModel) or stored.digest != choice["digest"]:
            return None
        return _load_stored(stored)
    return load_bundled(choice["name"], _bundled_digest(choice["name"]))


_DIGEST = re.compile(rf"[0-9a-f]{{{DIGEST_CHARS}}}")  # what upload_store.content_digest writes into a link
_MODEL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,80}")  # a bundled model's name as a link may carry it


def _model_from_url() -> dict[str, str] | None:
    """A new session (a reload, a shared link): the model its URL names. An uploaded model
    comes back from the server's store; when the store no longer has it the session's model
    is 'lost' (the pages say so) instead of quietly another one."""
    digest = url_param("upload")
    if digest is not None and not _DIGEST.fullmatch(digest):  # a link's text is never shown
        st.session_state[LINK_NOTE_KEY] = "The link's `upload=` is not a model this app made a link for: ignored."
        digest = None
    if digest is not None:
        stored = upload_store().get(digest)
        if stored is not None:
            _use_stored(stored)
        else:
            st.session_state[MODEL_KEY] = {"source": "lost", "name": "", "digest": digest[:64]}
            st.session_state[LOST_KEY] = digest[:64]
        return st.session_state[MODEL_KEY]
    wanted = url_param("model")
    name = wanted if wanted in bundled_models() else default_model_name()
    if name is None:
        return None
    select_bundled(name)
    if wanted is not None and wanted != name:
        named = f" `{wanted}`" if _MODEL_NAME.fullmatch(wanted) else ""  # else not repeated (a link's Markdown)
        st.session_state[LINK_NOTE_KEY] = (
            f"The link names a bundled model{named} that this app does not have: opened `{name}` instead."
        )
    return st.session_state[MODEL_KEY]


def link_notes() -> None:
    """What the session's model is not, although the URL asked for it (said once), and that
    a reload will not find an upload too big for the store."""
    note = st.session_state.pop(LINK_NOTE_KEY, None)
    if note is not None:
        st.warning(note)
    unkept = st.session_state.get(UNKEPT_KEY)
    if unkept is not None:
        st.caption(
            f"This upload ({unkept / 2**20:.0f} MB) is larger than the {UPLOAD_STORE_BYTES / 2**30:.0f} GB this "
            "server keeps for reloads and links: a reload will not find it."
        )


def lost_model_message() -> str | None:
    """Why the session has no model although its URL named one, or None."""
    digest = st.session_state.get(LOST_KEY)
    if digest is None:
        return None
    return (
        f"The link names an uploaded model (content digest `{digest}`) that this server no longer has: the server "
        "restarted, or it dropped the model to make room for newer uploads. Upload the model again (the same file "
        "gets the same link), or pick a bundled model on the Home page."
    )


def require_model(runnable: bool = True) -> LoadedModel:
    """The current model, or stop the page with a clear message.

    runnable=False accepts a model whose graph parsed but could not be built."""
    model = current_model()
    if model is None:
        lost = lost_model_message()
        if lost is not None:
            st.warning(lost)
        else:
            st.info("No model loaded: pick one on the Home page.")
        st.stop()
    assert model is not None
    link_notes()
    if model.graph is None or (runnable and not model.ok):
        show_error(model.error or "the model could not be loaded", title=f"Cannot use model '{model.name}'")
        st.stop()
    return model


def model_input_specs(model: LoadedModel) -> list[tuple[str, tuple[int, ...], str]]:
    from pages.input_size import chosen_sizes  # the size picked for a dynamic-shape model

    assert model.graph is not None
    return kx_inputs.input_specs(model.graph, model.meta.get("input_shape"), chosen_sizes(model))


@dataclass
class ResolvedInput:
    """The arrays a page runs on and what they truly are (the sidebar shows `description`)."""

    arrays: list[np.ndarray]
    kind: str  # the kind actually used
    description: str
    note: str | None = None  # why the chosen kind could not be used

    @property
    def is_sample(self) -> bool:
        """Only the sample input has PyTorch reference tensors."""
        return self.kind == "sample"


def resolve_input(model: LoadedModel | None = None) -> ResolvedInput:
    """The input arrays (one per pnnx.Input) the session chose on the Home page.

    Falls back to seeded random data when the chosen kind is not available (an uploaded
    model has no sample input, no file was given, the file was rejected) and says so."""
    model = model or require_model()
    spec = st.session_state.get(INPUT_KEY) or {"kind": "sample", "seed": 0}
    specs = model_input_specs(model)
    kind = spec.get("kind", "sample")
    seed = int(spec.get("seed", 0))
    note = None
    single = len(specs) == 1
    if kind == "sample":
        if model.sample_input is not None and single:
            return ResolvedInput([model.sample_input], "sample", "the model's sample input")
        note = "this model has no sample input"
    elif kind == "example":
        i = int(spec.get("index", 0))
        if model.examples is not None and single and 0 <= i < len(model.examples):
            x = model.examples[i : i + 1]
            label = "" if model.example_labels is None else f", a {model.example_labels[i]}"
            return ResolvedInput([x], "example", f"held-out example {i + 1} of {len(model.examples)}{label}")
        note = "this model has no bundled examples"
    elif kind in ("npy", "image", "drawing"):
        array, name = (st.session_state.get(INPUT_ARRAYS_KEY) or {}).get(kind, (None, None))
        if array is not None and single:
            what = {"npy": "uploaded array", "image": "uploaded picture", "drawing": "your drawing"}[kind]
            return ResolvedInput([array], kind, f"{what} {name}" if name else what)
        note = {"drawing": "nothing drawn yet"}.get(kind, "no usable file yet")
    if kind not in ("random", "zeros", "ones"):
        kind = "random"
    try:
        arrays = [_synthetic(kind, tuple(shape), dtype, seed + i) for i, (_, shape, dtype) in enumerate(specs)]
    except (KuiperError, MemoryError) as e:
        show_error(e, title="Cannot make an input for this model")
        st.stop()
        raise  # (st.stop raises; this line is for the type checker)
    text = {"random": f"seeded random numbers (seed {seed})", "zeros": "zeros", "ones": "ones"}[kind]
    return ResolvedInput(arrays, kind, text + (f" ({note})" if note else ""), note)


@st.cache_resource(show_spinner=False, max_entries=64)
def _synthetic(kind: str, shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """A seeded/zeros/ones input, made once per server and shared read-only by every session and
    rerun (each page run resolves the input twice, page and sidebar: ResNet-18's took ~3 ms)."""
    with limits.use(APP_LIMITS):  # a 3-line upload may declare a (1,3,16000,16000) input
        a = kx_inputs.synthetic_input(kind, shape, dtype, seed)
    a.flags.writeable = False
    return a


def current_input(model: LoadedModel | None = None) -> list[np.ndarray]:
    return resolve_input(model).arrays


def input_description(model: LoadedModel | None = None) -> str:
    return resolve_input(model).description


def set_input_array(kind: str, array: np.ndarray | None, name: str | None = None) -> None:
    """Keep (or, with None, forget) the array an upload or a drawing produced for `kind`."""
    arrays = dict(st.session_state.get(INPUT_ARRAYS_KEY) or {})
    digests = dict(st.session_state.get(INPUT_DIGESTS_KEY) or {})
    if array is None:
        arrays.pop(kind, None)
        digests.pop(kind, None)
    else:
        from kuiper_core.explore.tensors import arrays_digest

        arrays[kind] = (array, name)
        digests[kind] = arrays_digest([array])  # kept by content, like an uploaded model: a reload finds it
        kept_store().put(Kept(f"input:{digests[kind]}", (kind, array, name), int(array.nbytes)))
    st.session_state[INPUT_ARRAYS_KEY] = arrays
    st.session_state[INPUT_DIGESTS_KEY] = digests


def set_uploaded_references(data: bytes, name: str = "references.npz") -> dict[str, np.ndarray]:
    """Store an uploaded .npz of reference tensors (key -> array, keys as in the file)."""
    from kuiper_core.npy import read_npz

    check_upload_size("the .npz", data)
    refs = read_npz(data, name, APP_LIMITS)
    st.session_state[REFS_KEY] = refs
    st.session_state[REFS_NAME_KEY] = name
    digest = content_digest({"npz": data})  # kept by content, as an uploaded input: a reload finds it
    kept = kept_store().put(Kept(f"npz:{digest}", (name, refs), sum(int(a.nbytes) for a in refs.values())))
    st.session_state[REFS_DIGEST_KEY] = digest if kept else None
    return refs


def clear_uploaded_references() -> None:
    for key in (REFS_KEY, REFS_NAME_KEY, REFS_DIGEST_KEY):
        st.session_state.pop(key, None)


# -- the URL ---------------------------------------------------------------------------------
_URL_KEY = "_kx_url"  # this run's page parameters, written to the URL when the run ends


def url_param(name: str) -> str | None:
    """A parameter of the URL the page was opened with (a reload or a shared link)."""
    value = st.query_params.get(name)
    return value if isinstance(value, str) and value else None


def url_number(name: str, low: int = 0, high: int | None = None) -> int | None:
    """A number of the URL (`?step=`, `?q=`): ASCII digits, clamped to [low, high]; None when
    absent or not such a number (a link is untrusted: "²" or 5,000 nines are ignored)."""
    return link_int(url_param(name), low, high)


def set_url(**params: str | int | None) -> None:
    """This page's position for the URL (None leaves a key out); see write_url."""
    st.session_state.setdefault(_URL_KEY, {}).update({k: None if v is None else str(v) for k, v in params.items()})


def begin_url() -> None:
    st.session_state[_URL_KEY] = {}


def write_url() -> None:
    """The URL becomes ?model=NAME (bundled models) plus the page's set_url() keys, so a
    reload or a shared link opens the same model, page and step."""
    choice = st.session_state.get(MODEL_KEY) or {}
    wanted: dict[str, str] = {}
    if choice.get("source") == "bundled":
        wanted["model"] = choice["name"]
    elif choice.get("source") in ("upload", "lost"):  # a lost model's link stays: re-uploading restores it
        wanted["upload"] = choice["digest"]
    input_digest = (st.session_state.get(INPUT_DIGESTS_KEY) or {}).get(
        (st.session_state.get(INPUT_KEY) or {}).get("kind")
    )
    if input_digest is not None:  # an uploaded input, kept by content (kept_store)
        wanted["input"] = input_digest
    if st.session_state.get(REFS_DIGEST_KEY) and st.session_state.get(REFS_KEY) is not None:
        wanted["refs"] = st.session_state[REFS_DIGEST_KEY]  # an uploaded reference .npz, kept the same way
    wanted.update({k: v for k, v in (st.session_state.get(_URL_KEY) or {}).items() if v is not None})
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)


def forward_stepper(model: LoadedModel, inputs: list[np.ndarray]) -> ForwardStepper:
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
    """An engine error as a red box + the located message in monospace (caret aligned and
    on screen, "did you mean" for unknown operator types). A MemoryError (a size no limit
    foresaw: more than the server has free) is said so, as a LimitError."""
    if isinstance(error, MemoryError):
        error = limits.out_of_memory(error)
    text = error_text(error)
    st.error(f"**{title}**" + (f" — {type(error).__name__}" if isinstance(error, BaseException) else ""))
    st.code(text, language=None)


def sidebar_model_badge() -> None:
    """The current model and input, in the current container (app.py puts it in the sidebar)."""
    model = current_model()
    if model is None:
        st.caption("No model loaded")
        return
    status = "ready" if model.ok else ("graph only" if model.graph is not None else "failed")
    st.markdown(f"**Model:** `{model.name}` ({status})")
    from pages.conversion_verdict import model_line

    model_line(model)  # a converted model's check: agrees, DISAGREES (error colour, a link), not checked
    if model.ok:
        st.caption(f"Input: {input_description(model)}")


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
            raise LimitError(
                f"the picture is {img.size[0]}x{img.size[1]} pixels",
                limit="max_tensor_elements",
                maximum=APP_LIMITS.max_tensor_elements,
                value=pixels,
            )
        img.load()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as e:
        raise KuiperError(f"not a picture this app can read: {e}") from None
    img = img.convert(mode).resize((int(shape[-1]), int(shape[-2])), resample)
    return kx_inputs.image_to_input(np.asarray(img), pp, shape)
