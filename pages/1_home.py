"""Home: pick a bundled model or upload one, see its summary, choose the input."""

from __future__ import annotations


import streamlit as st

from kuiper_core.errors import KuiperError
from kuiper_core.explore import inputs as kx_inputs
from kuiper_core.npy import read_npy
from kuiper_core.explore.summary import markdown_table, model_summary, type_table
from kuiper_core.graph import shape_label
from pages import common, conversion_verdict
from pages.input_size import size_picker
from pages.model_open import conversion_details, convert_at_input, open_panel, reset_pick

st.title("Kuiper Explorer")
st.caption(
    "A NumPy inference engine for PNNX models, shown at work: see the graph, learn how the engine "
    "orders it, read its expressions as trees, step through Forward watching every tensor, read and edit "
    "the model as text (IR) and optimise it with graph passes."
)

models = common.bundled_models()
model = common.current_model()  # the default model on a first visit
choice = st.session_state.get(common.MODEL_KEY) or {}


def _on_pick() -> None:
    name = st.session_state.get("home_bundled")
    if name is not None:
        common.select_bundled(name)


# -- 1. the model -----------------------------------------------------------------------
st.header("1. Model")
reset_pick()
pick, upload = st.columns([3, 2])
with pick:
    names = list(models)
    if names:
        if "home_bundled" not in st.session_state:  # (re)entering the page: show the session's choice
            st.session_state["home_bundled"] = choice.get("name") if choice.get("source") == "bundled" else None
        picked = st.radio(
            "Bundled models",
            names,
            format_func=lambda n: f"{n} — {models[n].get('operators', '?')} operators",
            key="home_bundled",
            on_change=_on_pick,
        )
        if picked is not None:
            st.caption(models[picked].get("description", ""))
    else:
        st.info("No bundled models found in sample_models/.")

with upload:
    open_panel()

model = common.current_model()
dropped = st.session_state.pop(common.LOAD_ERROR_KEY, None)
if dropped is not None:
    common.show_error(dropped, title="The model could not be loaded and was closed")
lost = common.lost_model_message()
if lost is not None:
    st.warning(lost)
common.link_notes()
if model is None:
    st.stop()

if model.error is not None:
    what = "parsed, but cannot run" if model.graph is not None else "could not be read"
    common.show_error(model.error, title=f"Model '{model.name}' {what} ({model.error_kind})")
    if model.graph is None:
        st.stop()

# -- 2. summary --------------------------------------------------------------------------
assert model.graph is not None
summary = model_summary(model.graph)
st.header(f"2. Summary of `{model.name}`")
conversion_details(model)
conversion_verdict.home_box(model)  # the conversion's check against the original's framework
c1, c2, c3, c4 = st.columns(4)
c1.metric("Operators", f"{summary.operators:,}")
c2.metric("Parameters", f"{summary.parameters:,}")
c3.metric("Weights", f"{summary.weight_mb:.2f} MB")
c4.metric("Operator types", len(summary.by_type))
io_rows = [{"": "input", "operand": s.name, "shape": shape_label(s.shape), "dtype": s.dtype} for s in summary.inputs]
io_rows += [{"": "output", "operand": s.name, "shape": shape_label(s.shape), "dtype": s.dtype} for s in summary.outputs]
left, right = st.columns(2)
left.markdown("**Inputs and outputs**")
left.markdown(markdown_table(io_rows, code=("operand", "shape")))
right.markdown("**Operators by type**")
right.container(height=240, border=False).markdown(markdown_table(type_table(summary), code=("type",)))

if not model.ok:
    st.stop()

# -- 3. the input --------------------------------------------------------------------------
# Every choice is stored by a callback, before the page (and the sidebar) is drawn, so
# everything on screen names the input that is really used.
st.header("3. Input")
try:
    specs = common.model_input_specs(model)
except KuiperError as e:  # an input the file gives no shape (an ncnn Input line): say so, no traceback
    common.show_error(e, title=f"No input can be made for '{model.name}'")
    st.stop()
size_picker(model, specs)  # dynamic-shape models only
kinds = ["sample", "example", "random", "zeros", "ones", "npy"]
if model.sample_input is None:
    kinds.remove("sample")
if model.examples is None:
    kinds.remove("example")
is_image = bool(model.meta.get("image")) or (len(specs) == 1 and len(specs[0][1]) == 4 and specs[0][1][1] in (1, 3))
if is_image:
    kinds.append("image")
if is_image and specs[0][1][1] == 1:
    kinds.append("drawing")
labels = {
    "sample": "the model's sample input",
    "example": "a bundled example",
    "random": "seeded random",
    "zeros": "zeros",
    "ones": "ones",
    "npy": "upload a .npy",
    "image": "upload a picture",
    "drawing": "draw one",
}
spec = dict(st.session_state.get(common.INPUT_KEY) or {"kind": kinds[0], "seed": 0})
if spec.get("kind") not in kinds:
    spec["kind"] = kinds[0]
    st.session_state[common.INPUT_KEY] = spec
ERR = "home_input_error"  # the last rejected file's message, per kind


def _store(**changes) -> None:
    st.session_state[common.INPUT_KEY] = {**(st.session_state.get(common.INPUT_KEY) or {}), **changes}


# The callbacks read their widget's key with .get: a new model pops these keys
# (common._reset_model_state), and a callback of a run it interrupted may still fire after
# (16 sessions uploading at once: a KeyError on the page).
def _on_kind() -> None:
    if st.session_state.get("home_input_kind") is not None:
        _store(kind=st.session_state["home_input_kind"])


def _on_seed() -> None:
    if st.session_state.get("home_seed") is not None:
        _store(seed=int(st.session_state["home_seed"]))


def _on_example() -> None:
    if st.session_state.get("home_example") is not None:
        _store(index=int(st.session_state["home_example"]))


def _on_file(kind: str, widget: str) -> None:
    """Read an uploaded .npy or picture now; a rejected file leaves no array behind."""
    f = st.session_state.get(widget)
    assert model is not None  # (the uploaders are drawn only with a model)
    errors = dict(st.session_state.get(ERR) or {})
    errors.pop(kind, None)
    if f is None:
        common.set_input_array(kind, None)
    else:
        name, shape, _ = specs[0]
        try:
            if kind == "npy":
                common.check_upload_size(f.name, f.getvalue())
                array = read_npy(f.getvalue(), common.display_name(f.name), common.APP_LIMITS)
                if convert_at_input(model, array, common.display_name(f.name)):  # .onnx/.pt: at this shape
                    conversion_verdict.check_input(common.current_model(), array)
                    return
                array = kx_inputs.check_array(array, shape, name)
            else:
                array = common.picture_to_input(f.getvalue(), model, shape)
            common.set_input_array(kind, array, common.display_name(f.name))
            conversion_verdict.check_input(model, array)  # a converted model: checked on the user's input
        except (KuiperError, MemoryError) as e:
            common.set_input_array(kind, None)
            errors[kind] = (common.display_name(f.name), e)
    st.session_state[ERR] = errors


kind = st.radio(
    "Input to use",
    kinds,
    index=kinds.index(spec["kind"]),
    format_func=labels.get,
    horizontal=True,
    key="home_input_kind",
    on_change=_on_kind,
)
if kind == "random":
    st.number_input(
        "Seed",
        min_value=0,
        max_value=2**31 - 1,
        value=int(spec.get("seed", 0)),
        step=1,
        key="home_seed",
        on_change=_on_seed,
    )
elif kind == "example":
    labels_ = model.example_labels
    n = len(model.examples) if model.examples is not None else 0  # (offered only with examples)
    st.selectbox(
        f"Held-out examples the model never saw in training ({n})",
        list(range(n)),
        index=int(spec.get("index", 0)) if int(spec.get("index", 0)) < n else 0,
        format_func=lambda i: f"example {i + 1}" + (f": a {labels_[i]}" if labels_ is not None else ""),
        key="home_example",
        on_change=_on_example,
    )
elif kind in ("npy", "image"):
    name, shape, _ = specs[0]
    if kind == "npy":
        st.file_uploader(
            f"A .npy array of shape {shape_label(shape)}",
            type=["npy"],
            key="home_npy",
            on_change=_on_file,
            args=("npy", "home_npy"),
        )
    else:
        st.file_uploader(
            f"A picture (resized to {shape[-1]}×{shape[-2]})",
            type=["png", "jpg", "jpeg", "bmp", "gif"],
            key="home_img",
            on_change=_on_file,
            args=("image", "home_img"),
        )
        pp = model.meta.get("preprocess")
        if pp and pp.get("text"):
            st.caption(f"Preprocessing: {pp['text']}")
    rejected = (st.session_state.get(ERR) or {}).get(kind)
    if rejected is not None:
        common.show_error(rejected[1], title=f"Cannot use {rejected[0]} as input")
elif kind == "drawing":
    from pages.digit_pad import digit_pad

    digit_pad(model, specs[0][1])

resolved = common.resolve_input(model)
if resolved.note:
    st.info(f"Using {resolved.description}.")
for (name, _shape, _dtype), a in zip(specs, resolved.arrays):
    values = (
        f", min {float(a.min()):.3g}, max {float(a.max()):.3g}, mean {float(a.mean()):.3g}"
        if a.size and a.dtype.kind in "biuf"
        else ""
    )
    st.caption(f"`{name}`: shape {shape_label(a.shape)}, {a.dtype}{values}")
if resolved.kind in ("image", "example", "drawing", "sample") and is_image:
    a = resolved.arrays[0][0]
    shown = a.transpose(1, 2, 0) if a.shape[0] == 3 else a[0]
    lo, hi = float(shown.min()), float(shown.max())
    st.image(
        ((shown - lo) / (hi - lo + 1e-12)),
        caption="the tensor the model sees (rescaled for display)",
        width=160,
        clamp=True,
    )

st.success(
    "Ready. Open **Graph**, **Execution order**, **Expressions**, **Step through Forward** or **Profile** in the sidebar."
)
