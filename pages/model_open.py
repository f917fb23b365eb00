"""Home's "open your own model": an upload or a path on the server, of any format the engine
opens (kuiper_core.formats): a .pnnx.param (+ .bin), a .kir (+ .bin), an .onnx, a TorchScript
.pt, an ncnn .ncnn.param (+ .ncnn.bin and its input blob's shape, which pnnx does not write). ONNX and TorchScript are converted by the real pnnx converter, its log shown live; what
it made can be downloaded. Loading happens in the page body (not in a callback) so the
conversion can stream into a status box.
"""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

import numpy as np

from kuiper_core import limits
from kuiper_core.errors import ConversionError, KuiperError
from kuiper_core.explore import model_files
from kuiper_core.explore.messages import hide_server_paths
from kuiper_core.formats import converter_available
from pages import common

LOAD = "home_load_pending"  # ("upload", None) or ("path", text): what the Load buttons asked for
SHAPE_KEY = "home_inputshape"
RESET_PICK = "home_reset_pick"
SHAPE_FOR = "home_inputshape_for"  # the file the shape field was filled for
VALUES_KEY = "home_values"  # an .onnx's small integer inputs fixed for the converter: "sr=16000"
PATHS_ENV = "KUIPER_APP_NO_PATHS"  # set it (to anything) to hide the server's models folder even when one is set
MODEL_TYPES = ["param", "kir", "onnx", "pt", "pth", "torchscript", "ptl"]


def _models_folder() -> Path | None:
    return None if os.environ.get(PATHS_ENV) else model_files.server_models_folder()


def _ask(kind: str) -> None:
    st.session_state[LOAD] = (kind, st.session_state.get("home_path"))


def open_panel() -> None:
    """The uploaders, the TorchScript shape field, the path field and the Load buttons; a
    pending load runs here, inside a status box that shows the converter's log as it comes."""
    st.markdown("**…or open your own model**")
    with st.container(border=True):
        st.file_uploader(
            "model.pnnx.param, .kir, .onnx, TorchScript .pt or ncnn .ncnn.param",
            type=MODEL_TYPES,
            key="home_param",
            help="ONNX and TorchScript are converted to PNNX by the pnnx converter",
        )
        f = st.session_state.get("home_param")
        kind = model_files.kind_of(f.getvalue(), f.name) if f is not None else None
        if kind in ("pnnx", "kir", None):
            st.file_uploader("model.pnnx.bin (its weights; none for a model without any)", type=["bin"], key="home_bin")
        elif kind == "ncnn" and f is not None:
            st.file_uploader("model.ncnn.bin (its weights, written with this .param)", type=["bin"], key="home_bin")
            _ncnn_shape(f.getvalue(), f.name, str(getattr(f, "file_id", f.name)))
        elif kind == "onnx" and f is not None and model_files.may_have_external_data(f.getvalue()):
            st.file_uploader(
                "its weights file, e.g. model.onnx.data (this .onnx may keep its weights in a separate file, "
                "as torch.onnx.export writes by default)",
                type=["data", "bin", "onnx_data", "weights"],
                key="home_bin",
            )
        blocked = kind in model_files.CONVERTED and not converter_available()
        if blocked:
            st.warning(model_files.NO_CONVERTER)  # the one message: nothing to click that could only fail
        elif kind in model_files.CONVERTED and f is not None:
            _conversion_options(kind, f.getvalue(), f.name, str(getattr(f, "file_id", f.name)))
        st.button("Load uploaded model", key="home_load_upload", on_click=_ask, args=("upload",), disabled=blocked)
        if _models_folder() is not None:  # only with KUIPER_SERVER_MODELS: nothing else on the server is read
            a, b = st.columns([4, 1], vertical_alignment="bottom")
            a.text_input(
                "…or a model file in the server's models folder",
                key="home_path",
                placeholder="model.onnx (a .pnnx.param finds its .bin beside it)",
            )
            b.button("Open", key="home_load_path", on_click=_ask, args=("path",), width="stretch")
    pending = st.session_state.pop(LOAD, None)
    if pending is not None:
        _load(*pending)


def _ncnn_shape(data: bytes, name: str, upload_id: str) -> None:
    """ncnn's Input lines as pnnx writes them carry no shape: ask for the blob's (no batch dim)."""
    if not model_files.ncnn_needs_shape(data, name):
        return
    if st.session_state.get(SHAPE_FOR) != upload_id:
        st.session_state[SHAPE_FOR] = upload_id
        st.session_state[SHAPE_KEY] = ""
    st.text_input(
        "Input blob shape for ncnn (no batch dim)",
        key=SHAPE_KEY,
        placeholder=f"e.g. {model_files.NCNN_SHAPE} for a (c, h, w) image",
        help="ncnn's blobs have no batch dim: (c, h, w) for an image, (w,) for a vector; one shape per input, "
        "e.g. [3,224,224],[10]",
    )
    problem = _ncnn_shape_problem(data, name)
    if problem:
        st.caption(problem)


def _ncnn_shape_problem(data: bytes, name: str) -> str | None:
    if not model_files.ncnn_needs_shape(data, name):
        return None
    text = st.session_state.get(SHAPE_KEY)
    if not (text or "").strip():
        return (
            "This .ncnn.param does not say its input blob's shape (pnnx writes none): give it, without the batch dim, "
            f"e.g. {model_files.NCNN_SHAPE}."
        )
    return model_files.shape_problem(text, required=True)


def _field_error(problem: str) -> None:
    """A field's problem: its sentence, and the text with a caret under where it stops reading
    as code (Markdown would close up the spaces that place the caret)."""
    head, _, caret = problem.partition("\n")
    st.error(head)
    if caret:
        st.code(caret, language=None)


def _conversion_options(kind: str, data: bytes, name: str, upload_id: str) -> None:
    if kind == "torchscript":
        traced = not model_files.asks_for_shape(data, name)
        if st.session_state.get(SHAPE_FOR) != upload_id:  # another file: its own first guess
            st.session_state[SHAPE_FOR] = upload_id
            st.session_state[SHAPE_KEY] = "" if traced else model_files.guess_inputshape(data)
        st.text_input(
            "Input shape(s) for pnnx",
            key=SHAPE_KEY,
            placeholder="from the shapes the file recorded when traced" if traced else model_files.DEFAULT_SHAPE,
            help="one shape per input, e.g. [1,3,224,224] or [1,3,224,224],[1,10]i64 (dtype f32 unless given)",
        )
        problem = model_files.shape_problem(st.session_state.get(SHAPE_KEY), required=not traced)
        if problem:
            _field_error(problem)
        elif traced:
            st.caption(
                "This file was saved by torch.jit.trace, which records its example inputs: pnnx uses their shapes."
            )
        else:
            st.caption(
                "This TorchScript file does not record its input shape, which pnnx needs. The field is a guess "
                "from its first layer's weights (channels or features); check the other sizes."
            )
    else:
        if st.session_state.get(SHAPE_FOR) != upload_id:  # another file: the file's own shapes
            st.session_state[SHAPE_FOR] = upload_id
            st.session_state[SHAPE_KEY] = ""
        st.caption(
            "The input shapes are read from the ONNX file. Where it leaves a dim open, pnnx guesses one: "
            "give the sizes the model runs at instead (a size pnnx guessed may be baked into a reshape)."
        )
        st.text_input(
            "Input shape(s) for pnnx (optional)",
            key=SHAPE_KEY,
            placeholder="from the ONNX file, e.g. [1,512],[2,1,128],[]i64",
            help="one shape per input in order, [] for a 0-d input, dtype f32 unless given (e.g. [1,10]i64)",
        )
        problem = model_files.shape_problem(st.session_state.get(SHAPE_KEY), required=False)
        if problem:
            _field_error(problem)
        st.text_input(
            "Values of integer inputs the model branches on (optional)",
            key=VALUES_KEY,
            placeholder=f"e.g. {model_files.VALUES_EXAMPLE}",
            help=(
                "Only for a model with control flow on a small integer input (silero-vad's sample rate `sr`): "
                "it is converted for the value given, and runs at that value only. Several: sr=16000, mode=1"
            ),
        )
        problem = model_files.values_problem(st.session_state.get(VALUES_KEY))
        if problem:
            _field_error(problem)


def _load(kind: str, path_text: str | None) -> None:
    folder = _models_folder()
    try:
        if kind == "upload":
            request = model_files.from_upload(st.session_state.get("home_param"), st.session_state.get("home_bin"))
        elif folder is None:  # the field is not shown: no file on the server is read
            return
        else:
            request = model_files.from_path(path_text or "", common.APP_LIMITS.max_upload_bytes, folder)
    except (KuiperError, MemoryError) as e:
        common.show_error(e, title="Cannot open this model")
        return
    if request is None:
        st.warning("Choose a model file first.")
        return
    shape = st.session_state.get(SHAPE_KEY) if request.kind in model_files.CONVERTED else None
    problem = model_files.shape_problem(
        shape, required=request.kind == "torchscript" and model_files.asks_for_shape(request.data, request.name)
    )
    values = st.session_state.get(VALUES_KEY) if request.kind == "onnx" else None
    problem = problem or model_files.values_problem(values)
    if problem:
        _field_error(problem)
        return
    values = (values or "").strip() or None
    if request.kind == "ncnn":  # the input blob's shape: the field (an upload), or the PNNX files beside (a path)
        problem = _ncnn_shape_problem(request.data, request.name) if kind == "upload" else None
        needs = model_files.ncnn_needs_shape(request.data, request.name)
        if problem or (needs and kind == "path" and request.inputshape is None):
            st.error(
                problem
                or "This .ncnn.param does not say its input blob's shape and no .pnnx.param is beside it: upload it instead, the page then asks for the shape."
            )
            return
        given = (request.inputshape or st.session_state.get(SHAPE_KEY)) if needs else None
        common.select_upload(request.name, request.data, request.bin, inputshape=given)
        _done()
    if request.kind not in model_files.CONVERTED:
        common.select_upload(request.name, request.data, request.bin)
        _done()
    shown = common.display_name(request.name)
    with st.status(f"Converting `{shown}` with pnnx…", expanded=True) as status:
        lines: list[str] = []
        box = st.empty()

        def on_log(line: str) -> None:
            if line.startswith(model_files.WAITING):  # every converter of the server is busy: queued
                status.update(label=f"Waiting for the converter to convert `{shown}`…")
            elif lines and lines[-1].startswith(model_files.WAITING):
                status.update(label=f"Converting `{shown}` with pnnx…")
            lines.append(line)
            box.code(hide_server_paths("\n".join(lines[-model_files.LOG_LINES :])), language=None)

        try:
            with limits.use(common.APP_LIMITS):  # the converter's memory and time: the app's
                conversion = model_files.convert_request(
                    request, shape or None, on_log, model_files.parse_values(values)
                )
        except (KuiperError, MemoryError) as e:
            status.update(label=f"pnnx could not convert `{shown}`", state="error", expanded=True)
            common.show_error(e, title=f"`{shown}` could not be converted")
            if request.kind == "onnx" and "depends on the values of input(s)" in str(e):
                st.info(
                    "Give that input's value in **Values of integer inputs the model branches on** above "
                    f"(e.g. `{model_files.VALUES_EXAMPLE}`) and load again: the model is converted for it."
                )
            return
        status.update(label=f"`{shown}`: {model_files.conversion_text(conversion)}", state="complete")
    # the conversion is cached now (an .onnx's external data file is kept with it: a reload converts the same)
    common.select_upload(request.name, request.data, request.bin, inputshape=shape or None, values=values)
    _done()


def _done() -> None:
    """Draw the page again for the new model (the bundled list then names none)."""
    st.session_state[RESET_PICK] = True
    st.rerun()


def reset_pick() -> None:
    """Before the bundled list is drawn: after an upload it names no model."""
    if st.session_state.pop(RESET_PICK, False):
        st.session_state["home_bundled"] = None


def conversion_details(model: common.LoadedModel) -> None:
    """For a converted model: how it was made, the converter's log, and its .param/.bin to download."""
    opened = model.opened
    if opened is None or opened.conversion is None:
        return
    conversion = opened.conversion
    st.caption(
        model_files.conversion_text(conversion, say_cached=False) + (f" · {conversion.note}" if conversion.note else "")
    )
    with st.expander("The converter's log and the PNNX files it made"):
        st.code(hide_server_paths(conversion.log) or "(nothing printed)", language=None)
        files = opened.files
        if files is not None:
            stem = Path(model.name).stem
            cols = st.columns(2)
            for col, path, suffix in ((cols[0], files.param, ".pnnx.param"), (cols[1], files.bin, ".pnnx.bin")):
                if path is not None and path.exists():
                    col.download_button(
                        f"Download {stem}{suffix}",
                        path.read_bytes,  # read when clicked
                        file_name=f"{stem}{suffix}",
                        mime="application/octet-stream",
                        key=f"home_dl{suffix}",
                        width="stretch",
                    )


def convert_at_input(model: common.LoadedModel, array: np.ndarray, name: str) -> bool:
    """An uploaded .onnx/.pt given an input of another shape than it was converted at: converted
    again at that shape (cached by content and shapes, as every conversion) and made the session's
    model, the array its input. A size pnnx baked into the first conversion (a reshape target)
    would otherwise fail, or fold the batch into another dim. False when the model is no converted
    upload or the array already has the declared shape; a KuiperError when the new conversion fails
    (the model converted before stays the session's)."""
    from kuiper_core.formats.converted import shapes_of

    opened, stored = model.opened, st.session_state.get(common.UPLOAD_KEY)
    if opened is None or opened.conversion is None or stored is None or stored.digest != model.key:
        return False
    declared = [shape for _, shape, _ in common.model_input_specs(model)]
    inputshape = shapes_of([array])
    if len(declared) != 1 or tuple(array.shape) == tuple(declared[0]) or inputshape is None:
        return False
    files, optlevel = stored.files, stored.meta.get("optlevel")
    values = stored.meta.get("values")  # the values it was converted for stay
    new = common.select_upload(
        stored.name, files["param"] or b"", files.get("bin"), inputshape=inputshape, optlevel=optlevel, values=values
    )
    if new.error is not None:  # back to the conversion that worked (cached: no converter run)
        common.select_upload(
            stored.name,
            files["param"] or b"",
            files.get("bin"),
            inputshape=stored.meta.get("inputshape"),
            optlevel=optlevel,
            values=values,
        )
        raise ConversionError(f"{stored.name} could not be converted at the input's shape {inputshape}: {new.error}")
    common.set_input_array("npy", array, name)
    st.session_state[common.INPUT_KEY] = {"kind": "npy", "seed": 0}
    return True
