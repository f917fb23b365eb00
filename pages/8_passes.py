"""Passes: optimise a model with the graph passes and see what each one did."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import streamlit as st

from kuiper_core import limits
from kuiper_core.errors import KuiperError
from kuiper_core.explore import passes_view as pv
from kuiper_core.graph import Graph, shape_label
from kuiper_core.passes import pass_names, pass_table
from pages import common
from pages.graph_viewer import show_graph

PRESET_DIR = common.SAMPLES / "passes"
CURRENT = "current"
DIFF_LINES = 400  # a pass's diff drawn on the page (the rest is a download)


@st.cache_resource(show_spinner=False)
def preset(name: str) -> tuple[pv.Preset, Graph]:
    return pv.load_preset(PRESET_DIR, name)


st.title("Graph passes")
st.caption(
    "A pass manager after TVM's: each pass has a name and an opt level; it runs when it is not disabled and is "
    "required or within the level. The passes repeat until a whole round changes nothing. Every pass's result is "
    "checked (each operand produced once, consumers consistent, a DAG in execution order, shapes consistent)."
)

sources = list(pv.PRESETS) + [CURRENT]
# A reload or a shared link opens the same start and level (the URL keeps them, as other pages' steps).
if "passes_source" not in st.session_state and common.url_param("start") in sources:
    st.session_state["passes_source"] = common.url_param("start")
if "passes_level" not in st.session_state and common.url_param("level") in ("0", "1", "2"):
    st.session_state["passes_level"] = int(common.url_param("level") or 2)
st.session_state.setdefault("passes_level", 2)  # (the radio's default, set here: one source of its value)
source = st.radio(
    "Start from",
    sources,
    format_func=lambda s: pv.PRESETS[s]["title"] if s in pv.PRESETS else "The current model (Home page)",
    horizontal=True,
    key="passes_source",
)
c1, c2, c3 = st.columns([1, 2, 2])
level = c1.radio(
    "Opt level",
    [0, 1, 2],
    horizontal=True,
    key="passes_level",
    help="0: nothing. 1: safe clean-ups that never change a number. 2: everything.",
)
common.set_url(start=source, level=level)
names = pass_names()
disabled = c2.multiselect("Disable passes", names, key="passes_disabled")
required = c3.multiselect("Require passes (run whatever the level)", names, key="passes_required")
only = st.multiselect(
    "Or run only these passes (in pipeline order; each still needs its level or to be required)",
    names,
    key="passes_only",
)
only_passes = [n for n in names if n in only] or None
with st.expander("The passes, in pipeline order"):
    st.dataframe(pd.DataFrame(pass_table()), hide_index=True, width="stretch")

# -- the graph to optimise, its input and PyTorch's outputs --------------------------------------
if source == CURRENT:
    model = common.require_model(runnable=False)
    assert model.graph is not None
    graph, label, pnnx_o2 = model.graph, model.name, None
    inputs = common.current_input(model)
    expected = model.expected if st.session_state.get(common.INPUT_KEY, {}).get("kind", "sample") == "sample" else None
    st.caption(f"`{model.name}` with {common.input_description()}.")
else:
    chosen, graph = preset(source)
    label, pnnx_o2, inputs, expected = source, chosen.pnnx_o2_operators, [chosen.input], chosen.expected
    st.caption(chosen.text)

# The passes and the check of their outputs run once per (model, options, input) for every
# session (deep1500 at level 2: ~2 s of passes and ~3 s of running both graphs on a busy
# machine), not at every rerun of the page (a picker, a toggle).
ident = model.key if source == CURRENT else source
key = (source, ident, level, tuple(disabled), tuple(required), tuple(only_passes or ()))


@st.cache_resource(show_spinner="Running the passes…", max_entries=8)
def _optimised(run: tuple, _graph: Graph) -> pv.PassesView:
    with limits.use(common.APP_LIMITS):  # folding computes tensors: the app's limits
        return pv.optimise_view(_graph, level, disabled=disabled, required=required, passes=only_passes)


@st.cache_resource(show_spinner="Checking the outputs…", max_entries=8)
def _checked(
    run: tuple,
    inputs_digest: str,
    with_expected: bool,
    _view: pv.PassesView,
    _inputs: list[np.ndarray],
    _expected: list[np.ndarray] | None,
) -> tuple[list[pv.OutputCheck], str | None]:
    with limits.use(common.APP_LIMITS):
        return pv.check_outputs(_view.before, _view.after, _inputs, _expected)


try:
    view = _optimised(key, graph)
except (KuiperError, MemoryError) as e:
    common.show_error(e, title="The passes failed")
    st.stop()

n0, n1 = len(view.before.operators), len(view.after.operators)
m1, m2, m3, m4 = st.columns(4)
m1.metric("Operators before", f"{n0:,}")
m2.metric("Operators after", f"{n1:,}", delta=f"{n1 - n0:,}", delta_color="inverse")
m3.metric(
    "pnnx optlevel 2",
    f"{pnnx_o2:,}" if pnnx_o2 is not None else "—",
    help="Operators in pnnx's own optlevel-2 export of the same model",
)
m4.metric("Time in passes", f"{view.result.log.total_seconds * 1e3:.1f} ms")

# -- the two graphs ----------------------------------------------------------------------------
st.subheader("Before and after")
st.caption(
    f"Removed operators are red on the left, new ones green on the right, rewritten ones amber on both sides "
    f"({len(view.diff.removed)} removed, {len(view.diff.added)} added, {len(view.diff.changed)} rewritten)."
)
# "Next change" walks the changes (ringed and centred where each side has it); the two
# viewers pan and zoom together (link=), so the same place is in view on both sides.
order = view.changes_in_order()
NEXT = "passes_next_at"  # (the run's key, index into order)
last = st.session_state.get(NEXT)
at: int | None = last[1] if isinstance(last, tuple) and last[0] == key and last[1] < len(order) else None


def _next() -> None:
    st.session_state[NEXT] = (key, 0 if at is None else (at + 1) % len(order))


current = order[at] if at is not None else None  # (the two are None together)
b_next, b_line = st.columns([1, 5], vertical_alignment="center")
b_next.button("Next change", key="passes_next", on_click=_next, disabled=not order, width="stretch")
if at is not None and current is not None:
    what = "removed" if current in view.diff.removed else "added" if current in view.diff.added else "rewritten"
    b_line.markdown(f"Change {at + 1} of {len(order)}: `{current}` ({what})")
for column, side, n, dot in zip(
    st.columns(2),
    ("before", "after"),
    (n0, n1),
    (view.before_dot(edge_labels=False), view.after_dot(edge_labels=False)),
):
    with column:
        st.markdown(f"**{side.capitalize()}** · {n} operators")
        show_graph(dot, f"passes_{side}", view.overlay(side, current), height=520, follow=True, link="passes")

# -- the log and the diff of each pass ------------------------------------------------------------
st.subheader("Per-pass log")
if not view.rows:
    st.info("No pass ran: opt level 0 and nothing required.")
else:
    every = st.toggle("Show the passes that changed nothing too", key="passes_every")
    rows = view.rows if every else [r for r in view.rows if r["what changed"] != "no change"]
    st.dataframe(
        pd.DataFrame(rows),
        hide_index=True,
        width="stretch",
        column_config={"time_ms": st.column_config.NumberColumn("time (ms)", format="%.2f")},
    )
if view.pass_diffs:
    # Keyed by the run it shows: another start or level is a new picker, never the old
    # picker's label over the new run's changes (the frontend keeps a same-key widget's text).
    labels = [f"{i + 1}. {name}" for i, (name, _) in enumerate(view.pass_diffs)]
    run_id = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
    pick = st.selectbox("What a pass did", labels, key=f"passes_pick_{run_id}")
    name, diff = view.pass_diffs[labels.index(pick)]
    changes = view.changes_of(name)
    with st.expander(f"{len(changes)} change(s) recorded by {name}", expanded=len(changes) <= 12):
        st.code("\n".join(changes) or "(none)", language=None)
    lines = (diff or "").splitlines()
    if len(lines) > DIFF_LINES:
        # deep1500's first pass changes 424 KB of text: highlighting all of it took the browser
        # seconds on every visit; the whole diff is a download.
        st.caption(f"The first {DIFF_LINES:,} of {len(lines):,} lines of the diff; the whole diff is a download.")
        st.code("\n".join(lines[:DIFF_LINES]), language="diff")
        st.download_button(
            f"Download the whole diff of {name} (.diff)",
            diff,
            file_name=f"{label}.{name}.diff",
            mime="text/x-diff",
            key=f"passes_dl_diff_{run_id}",
        )
    else:
        st.code(diff or "(no textual difference)", language="diff")

# -- do both compute the same? ----------------------------------------------------------------------
st.subheader("Outputs checked")
try:
    digest = hashlib.sha1(b"".join(repr((a.shape, a.dtype.str)).encode() + a.tobytes() for a in inputs)).hexdigest()
    checks, original_error = _checked(key, digest, expected is not None, view, inputs, expected)
except (KuiperError, MemoryError) as e:
    common.show_error(e, title="The optimised model failed while running")
    st.stop()
if original_error:
    st.info(
        f"The original graph does not run in this engine ({original_error}); "
        "the optimised one is compared with PyTorch's outputs instead."
    )
table = pd.DataFrame(
    [
        {
            "output": c.index,
            "shape": shape_label(c.shape),
            "max |after − before|": c.vs_original,
            "max |after − PyTorch|": c.vs_reference,
            "equal": {True: "yes", False: "NO", None: "not checked"}[c.ok],
        }
        for c in checks
    ]
)
st.dataframe(table, hide_index=True, width="stretch")
if all(c.ok for c in checks):
    st.success("The optimised model computes the same outputs.")
elif any(c.ok is False for c in checks):
    st.error("The optimised model's outputs differ.")

try:
    files = pv.saved_files(view.after, label)
except (KuiperError, MemoryError) as e:  # a name or string .param cannot hold (pnnx/writer.py)
    common.show_error(e, title="The optimised model cannot be saved as .param")
    files = {}
d1, d2 = st.columns(2)
for col, (fname, data) in zip((d1, d2), files.items()):
    col.download_button(f"Download {fname}", data, file_name=fname, key=f"passes_dl_{fname.rsplit('.', 1)[-1]}")
