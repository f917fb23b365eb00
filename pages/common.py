"""The pages' Streamlit glue: the session's model and input in ``st.session_state``, the URL,
messages. What they are and how they are computed lives in kuiper_core/explore/
(loaded_model.py, bundled_models.py, input_choice.py, session_link.py, stepper_cache.py,
app_limits.py); this module keeps them per session and per server process.

Models are loaded once per content (``st.cache_resource`` keyed by a SHA-256 of the
files) and shared between sessions; what a user picked lives in ``st.session_state``:

    kx_model  a model choice (kuiper_core.explore.session_link: bundled, upload or lost)
              (kx_upload: an upload's StoredModel)
    kx_input  {"kind": ..., "seed": int, "index": int} (kuiper_core.explore.input_choice)
              (+ {kind: (array, file name)} in kx_input_arrays for "npy" / "image" / "drawing")
    kx_refs   {key: array} an uploaded reference .npz as read (kx_refs_name: its file name), or
              absent; kuiper_core.explore.references maps its keys to operands
    kx_forward the Forward stepper (a StepperCache), shared by the Forward and IR pages

Pages call ``require_model()`` (stops the page with a hint when nothing is usable) and
``resolve_input()`` (the arrays and an honest description of what they are); they never
touch the files or the cache directly. The URL carries the model (``model=NAME`` for a
bundled one, ``upload=DIGEST`` for an upload, kept by content in ``upload_store()``), an
uploaded input (``input=DIGEST``, kept by content in ``kept_store()`` with computed references) and each
page's position (``sync_url``), so a reload or a shared link opens the same view.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import streamlit as st

from kuiper_core import limits
from kuiper_core.errors import KuiperError, LimitError
from kuiper_core.explore import app_limits, bundled_models as bundled, input_choice, model_files, session_link
from kuiper_core.explore import inputs as kx_inputs
from kuiper_core.explore.app_limits import KEPT_BYTES, UPLOAD_STORE_BYTES
from kuiper_core.explore.input_choice import ResolvedInput
from kuiper_core.explore.links import link_int
from kuiper_core.explore.loaded_model import LoadedModel, load_upload, model_bytes, release
from kuiper_core.explore.messages import error_text
from kuiper_core.explore.model_cache import ModelCache
from kuiper_core.explore.stepper import ForwardStepper
from kuiper_core.explore.stepper_cache import StepperCache
from kuiper_core.explore.upload_names import display_name
from kuiper_core.explore.upload_store import Kept, StoredModel, UploadStore, content_digest
from kuiper_core.references.conversion_check import open_model

__all__ = ["KEPT_BYTES", "UPLOAD_STORE_BYTES", "LoadedModel", "ResolvedInput", "display_name"]  # for the pages

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"
APP_LIMITS = app_limits.APP_LIMITS  # read at each call (tests lower it)

MODEL_KEY = "kx_model"
UPLOAD_KEY = "kx_upload"
INPUT_KEY = "kx_input"
INPUT_ARRAYS_KEY = "kx_input_arrays"
INPUT_DIGESTS_KEY = "kx_input_digests"  # {kind: digest} of kx_input_arrays' arrays (the URL's input=)
REFS_KEY = "kx_refs"
REFS_NAME_KEY = "kx_refs_name"  # the uploaded reference file's name
REFS_DIGEST_KEY = "kx_refs_digest"  # its content digest: the URL's refs=, kept in kept_store() (issue 38)
LOAD_ERROR_KEY = "kx_load_error"  # why the session's model was dropped (shown on Home)
FORWARD_KEY = "kx_forward"
LOST_KEY = "kx_lost"  # the digest of an uploaded model the URL named and the server no longer has
LINK_NOTE_KEY = "kx_link_note"  # what the URL asked for and did not get (said once)
UNKEPT_KEY = "kx_unkept"  # the session's upload was too big for the store: a reload will not find it


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


# -- bundled models ----------------------------------------------------------------------
@st.cache_data(show_spinner=False)
def bundled_models() -> dict[str, dict[str, Any]]:
    """models.json: {name: entry}, the default model first, only models whose files exist."""
    return bundled.catalogue(SAMPLES)


def default_model_name() -> str | None:
    return next(iter(bundled_models()), None)


@st.cache_data(show_spinner=False)
def _file_digest(paths: tuple[str, ...], stamps: tuple[tuple[int, int], ...]) -> str:
    # `stamps` (size, mtime) are part of the cache key so an edited file is re-hashed.
    return bundled.files_digest([Path(p) for p in paths])


def _bundled_digest(name: str) -> str:
    paths = bundled.model_paths(SAMPLES, name)
    return _file_digest(tuple(str(p) for p in paths), bundled.stamps(paths))


@st.cache_resource(show_spinner="Loading model…", max_entries=12)
def load_bundled(name: str, digest: str) -> LoadedModel:
    return bundled.load_bundled(SAMPLES, name, digest, bundled_models().get(name, {}), open_model, APP_LIMITS)


# -- what the server keeps for every session -------------------------------------------------
@st.cache_resource(show_spinner=False)
def upload_store() -> UploadStore[StoredModel]:
    """The server's uploaded models by content digest (one per process, bounded by bytes)."""
    return UploadStore(UPLOAD_STORE_BYTES)


@st.cache_resource(show_spinner=False)
def kept_store() -> UploadStore[Kept]:
    """Uploaded inputs ('input:DIGEST') and computed references ('refs:MODEL:INPUT') by digest,
    so a reload finds them as it finds an uploaded model (one per process, bounded by bytes)."""
    return UploadStore(KEPT_BYTES)


# Uploaded models, shared by the sessions that upload the same files, bounded in bytes
# (APP_LIMITS.max_model_cache_bytes) and dropped when no session holds them any more.
_UPLOADS: ModelCache[LoadedModel] = ModelCache(lambda: APP_LIMITS.max_model_cache_bytes, release)
_SESSION_TOKEN = "_kx_session_token"


class _SessionToken:
    """Held in a session's state only: collected when the session ends, it releases the
    session's uploaded models (model_cache.py)."""


def load_uploaded(
    digest: str,
    name: str,
    _param: bytes,
    _bin: bytes | None,
    inputshape: str | None = None,
    optlevel: int | None = None,
    _on_log: Callable[[str], None] | None = None,
    values: str | None = None,
) -> LoadedModel:
    """An uploaded model (loaded_model.load_upload), kept in _UPLOADS for the sessions holding it.
    `values`: the Home field's text for small integer ONNX inputs (model_files.parse_values)."""

    def make() -> LoadedModel:
        with st.spinner("Loading model…"):
            options: dict[str, Any] = {"inputshape": inputshape, "optlevel": optlevel, "on_log": _on_log}
            options["values"] = model_files.parse_values(values) if values else None
            return load_upload(digest, name, _param, _bin, open_model, APP_LIMITS, hide=f"{ROOT}/", **options)

    token = st.session_state.get(_SESSION_TOKEN)
    if token is None:
        token = st.session_state[_SESSION_TOKEN] = _SessionToken()
    key = (digest, name, inputshape, optlevel, values)
    model = _UPLOADS.get(key, make, model_bytes)
    _UPLOADS.hold(token, key)
    return model


def check_upload_size(what: str, data: bytes | None) -> None:
    """An upload over APP_LIMITS.max_upload_bytes is refused before it is read."""
    app_limits.check_upload_size(what, data, APP_LIMITS)


# -- the session's model ---------------------------------------------------------------------
def select_bundled(name: str) -> None:
    st.session_state[MODEL_KEY] = session_link.bundled_choice(name)
    _reset_model_state()


def select_upload(
    name: str,
    data: bytes,
    bin_bytes: bytes | None,
    *,
    inputshape: str | None = None,
    optlevel: int | None = None,
    on_log: Callable[[str], None] | None = None,
    values: str | None = None,
) -> LoadedModel:
    """Make an uploaded model the session's: a .pnnx.param or .kir (+ its .bin), an .onnx or a
    TorchScript .pt (converted by pnnx with `inputshape`/`optlevel`/`values`; `on_log` gets each
    line the converter prints, when it runs). Kept by content for reloads and links."""
    name = display_name(name)
    options = {"inputshape": inputshape, "optlevel": optlevel} | ({"values": values} if values else {})
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
    st.session_state[MODEL_KEY] = session_link.upload_choice(stored)
    _reset_model_state()


def _load_stored(stored: StoredModel, on_log: Callable[[str], None] | None = None) -> LoadedModel:
    param = stored.files["param"] or b""
    meta = stored.meta
    return load_uploaded(
        stored.digest,
        stored.name,
        param,
        stored.files.get("bin"),
        meta.get("inputshape"),
        meta.get("optlevel"),
        on_log,
        meta.get("values"),
    )


def _reset_model_state() -> None:
    """A new model invalidates inputs, references and every page's per-model state
    (the Home page's input widgets too, so they show the new model's default)."""
    st.session_state[INPUT_KEY] = dict(input_choice.DEFAULT_CHOICE)
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


def _add_link_note(note: str) -> None:
    old = st.session_state.get(LINK_NOTE_KEY)
    st.session_state[LINK_NOTE_KEY] = f"{old}\n\n{note}" if old else note


def _model_from_url() -> dict[str, str] | None:
    """A new session (a reload, a shared link): the model its URL names (session_link)."""
    linked = session_link.model_from_link(url_param("upload"), url_param("model"), bundled_models(), upload_store().get)
    if linked.stored is not None:
        _use_stored(linked.stored)
    elif linked.choice is not None and linked.choice["source"] == "bundled":
        select_bundled(linked.choice["name"])
    elif linked.choice is not None:  # lost
        st.session_state[MODEL_KEY] = linked.choice
        st.session_state[LOST_KEY] = linked.choice["digest"]
    if linked.note is not None:
        _add_link_note(linked.note)
    return linked.choice


def _input_from_url() -> None:
    """A new session: the uploaded input its URL names (`input=DIGEST`), from the kept store;
    when the server no longer has it the page says what was lost instead of quietly running
    on another input."""
    digest = url_param("input")
    if digest is None:
        return
    kept = kept_store().get(input_choice.kept_input_key(digest)) if session_link.is_digest(digest) else None
    if kept is None:
        _add_link_note(session_link.INPUT_LOST_NOTE)
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
    kept = kept_store().get(f"npz:{digest}") if session_link.is_digest(digest) else None
    if kept is None:
        _add_link_note(session_link.REFS_LOST_NOTE)
        return
    name, arrays = kept.value
    st.session_state[REFS_KEY], st.session_state[REFS_NAME_KEY] = arrays, name
    st.session_state[REFS_DIGEST_KEY] = digest


def link_notes() -> None:
    """What the session's model is not, although the URL asked for it (said once), and that
    a reload will not find an upload too big for the store."""
    note = st.session_state.pop(LINK_NOTE_KEY, None)
    if note is not None:
        st.warning(note)
    unkept = st.session_state.get(UNKEPT_KEY)
    if unkept is not None:
        st.caption(session_link.unkept_note(unkept, UPLOAD_STORE_BYTES))


def lost_model_message() -> str | None:
    """Why the session has no model although its URL named one, or None."""
    digest = st.session_state.get(LOST_KEY)
    return None if digest is None else session_link.lost_model_message(digest)


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
    link_notes()
    if model.graph is None or (runnable and not model.ok):
        show_error(model.error or "the model could not be loaded", title=f"Cannot use model '{model.name}'")
        st.stop()
    return model


# -- the session's input ---------------------------------------------------------------------
def model_input_specs(model: LoadedModel) -> list[tuple[str, tuple[int, ...], str]]:
    from pages.input_size import chosen_sizes  # the size picked for a dynamic-shape model

    assert model.graph is not None
    return kx_inputs.input_specs(model.graph, model.meta.get("input_shape"), chosen_sizes(model))


def resolve_input(model: LoadedModel | None = None) -> ResolvedInput:
    """The input arrays (one per pnnx.Input) the session chose on the Home page
    (input_choice.resolve_input: seeded random, said so, when the choice cannot be used)."""
    model = model or require_model()
    given = st.session_state.get(INPUT_ARRAYS_KEY) or {}
    try:
        return input_choice.resolve_input(
            model, st.session_state.get(INPUT_KEY), model_input_specs(model), given, _synthetic
        )
    except (KuiperError, MemoryError) as e:
        show_error(e, title="Cannot make an input for this model")
        st.stop()


@st.cache_resource(show_spinner=False, max_entries=64)
def _synthetic(kind: str, shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    """Made once per server and shared read-only by every session and rerun (each page run
    resolves the input twice, page and sidebar: ResNet-18's took ~3 ms)."""
    return input_choice.shared_synthetic(kind, shape, dtype, seed, APP_LIMITS)


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
        arrays[kind] = (array, name)
        digests[kind], kept = input_choice.kept_input(kind, array, name)
        kept_store().put(kept)  # kept by content, like an uploaded model: a reload finds it
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
    """The URL becomes the session's model and uploaded input plus the page's set_url() keys
    (session_link.link_params), so a reload or a shared link opens the same model, page and step."""
    kind = (st.session_state.get(INPUT_KEY) or {}).get("kind")
    input_digest = (st.session_state.get(INPUT_DIGESTS_KEY) or {}).get(kind)
    page = st.session_state.get(_URL_KEY) or {}
    wanted = session_link.link_params(st.session_state.get(MODEL_KEY), input_digest, page)
    if st.session_state.get(REFS_DIGEST_KEY) and st.session_state.get(REFS_KEY) is not None:
        wanted["refs"] = st.session_state[REFS_DIGEST_KEY]  # an uploaded reference .npz, kept by content too
    if dict(st.query_params) != wanted:
        st.query_params.from_dict(wanted)


def forward_stepper(model: LoadedModel, inputs: list[np.ndarray]) -> ForwardStepper:
    """The session's Forward stepper for this model and input (a new one when either changed)."""
    assert model.runtime is not None
    cache = st.session_state.get(FORWARD_KEY)
    if not isinstance(cache, StepperCache):
        cache = st.session_state[FORWARD_KEY] = StepperCache()
    return cache.get(model.key, model.runtime, inputs)


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


def sidebar_model_badge(verdict: Callable[[LoadedModel], None]) -> None:
    """The current model and input, in the current container (app.py puts it in the sidebar);
    `verdict` draws a converted model's check under the model's name (conversion_verdict.py)."""
    model = current_model()
    if model is None:
        st.caption("No model loaded")
        return
    status = "ready" if model.ok else ("graph only" if model.graph is not None else "failed")
    st.markdown(f"**Model:** `{model.name}` ({status})")
    verdict(model)  # a converted model's check: agrees, DISAGREES (error colour, a link), not checked
    if model.ok:
        st.caption(f"Input: {input_description(model)}")


def picture_to_input(data: bytes, model: LoadedModel, shape: tuple[int, ...]) -> np.ndarray:
    """Decode and resize a picture (Pillow: the engine depends on no image library), then the
    model's preprocessing (NumPy, in the engine)."""
    from PIL import Image, UnidentifiedImageError

    pp = model.meta.get("preprocess") or {}
    channels = int(shape[1]) if len(shape) == 4 else 1
    mode = pp.get("mode") or ("L" if channels == 1 else "RGB")
    resample = {"box": Image.Resampling.BOX, "nearest": Image.Resampling.NEAREST}.get(
        pp.get("resample", ""), Image.Resampling.BILINEAR
    )
    check_upload_size("the picture", data)
    try:
        opened = Image.open(io.BytesIO(data))
        pixels = opened.size[0] * opened.size[1]
        if pixels > APP_LIMITS.max_tensor_elements:  # before decoding: a tiny PNG can inflate to gigabytes
            raise LimitError(
                f"the picture is {opened.size[0]}x{opened.size[1]} pixels",
                limit="max_tensor_elements",
                maximum=APP_LIMITS.max_tensor_elements,
                value=pixels,
            )
        opened.load()
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as e:
        raise KuiperError(f"not a picture this app can read: {e}") from None
    img = opened.convert(mode).resize((int(shape[-1]), int(shape[-2])), resample)
    return kx_inputs.image_to_input(np.asarray(img), pp, shape)
