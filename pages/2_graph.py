"""Graph: the PNNX graph grouped by module, with pan/zoom, search, filters, focus, and an
operator detail panel that opens when a node is clicked."""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from kuiper_core import KuiperError
from kuiper_core.explore.dot import CLUSTER_LIMIT, graph_view
from kuiper_core.explore.overlay import Overlay
from kuiper_core.explore.profile import declared_kernel
from kuiper_core.explore.search import matches as find_operators
from kuiper_core.explore.summary import operator_details, weight_table
from kuiper_core.explore.tensors import npy_bytes
from kuiper_core.explore.upload_names import code_span, md_text
from kuiper_core.graph import Graph
from pages import common
from pages.find_key import find_key
from pages.graph_viewer import ModuleState, show_graph
from pages.tensor_panel import chart, histogram_chart

model = common.require_model(runnable=False)  # a graph that cannot run can still be drawn
assert model.graph is not None  # (require_model stops the page when there is none)
graph: Graph = model.graph  # declared: the callbacks below see it narrowed
names = [op.name for op in graph.operators]
types = sorted({op.type for op in graph.operators})
SEL = "graph_selected"  # (model key, operator name)
modules = ModuleState("graph_modules", model.key)


def _selected() -> str | None:
    v = st.session_state.get(SEL)
    return v[1] if isinstance(v, tuple) and v[0] == model.key and v[1] in names else None


if _selected() is None and common.url_param("op") in names:  # a shared link names an operator
    st.session_state[SEL] = (model.key, common.url_param("op"))


# -- callbacks: every click changes state before the page is drawn ------------------------------
def _select(name: str | None) -> None:
    st.session_state[SEL] = (model.key, name)
    if name is not None:
        modules.reveal(name)


def _on_click(title: str) -> None:
    name = modules.click(title)
    if name is not None:
        _select(name)


def _on_detail(widget: str) -> None:
    _select(st.session_state.get(widget))


def _matches(text: str) -> list[str]:
    return find_operators(graph, text)


def _on_search() -> None:
    """A search selects its first match (Netron's way): the graph stays whole around it."""
    found = _matches(st.session_state.get("graph_search", ""))
    if found:
        _select(found[0])


st.title(f"Graph of `{model.name}`")
if model.error:
    st.warning(f"This model cannot run ({model.error_kind}); the graph is shown as parsed. See Home for the message.")

# -- controls --------------------------------------------------------------------------------
c1, c2, c3, c4, c5 = st.columns([2, 2, 2, 0.8, 1.2])
search = c1.text_input(
    "Find an operator (name or type)",
    key="graph_search",
    placeholder="conv, 64x56x56, stride=2,2 (/ or Ctrl+F)",
    on_change=_on_search,
    help="A name or type; a shape (`64x56x56`); a parameter or weight (`stride=2,2`, `weight=64x3x7x7`). "
    "Selects and centres the first match and rings every match in blue; the graph stays whole. "
    "`/` or Ctrl+F puts the cursor here.",
)
find_key("graph_search")
type_filter = c2.multiselect("Only these types", types, key="graph_types")
focus = c3.selectbox("Focus on operator", names, index=None, key="graph_focus", placeholder="whole graph")
hops = c4.number_input("Hops", min_value=1, max_value=20, value=2, key="graph_hops", disabled=focus is None)
with c5.popover("Modules", width="stretch"):
    max_nodes = int(
        st.number_input(
            "Open every module up to this many operators",
            min_value=20,
            max_value=3000,
            value=400,
            step=20,
            key="graph_max",
        )
    )
    edge_labels = st.toggle("Shapes on edges", value=True, key="graph_edge_labels")
    st.button("Open all modules", key="graph_open_all", on_click=modules.set_all, args=(True,), width="stretch")
    st.button("Close all modules", key="graph_close_all", on_click=modules.set_all, args=(False,), width="stretch")
    st.button("Back to the default", key="graph_default_open", on_click=modules.set_all, args=(None,), width="stretch")

selected = _selected()
view = graph_view(
    graph,
    focus=focus,
    hops=int(hops),
    max_nodes=max_nodes,
    type_filter=set(type_filter),
    expanded=modules.expanded,
    show=[selected] if modules.expanded is None else (),  # a shared link opens the modules around it
    edge_labels=edge_labels,
)
modules.remember(view)
common.set_url(op=selected)

found = _matches(search)
if search.strip():
    here = selected if selected in found else None
    st.caption(
        f"**{len(found):,}** operator(s) match “{search.strip()}”"
        + (f"; showing match {found.index(here) + 1}: `{here}`." if here else ".")
        + (" Pick another in *Operator details*." if len(found) > 1 else "")
    )
closed = view.closed_groups
st.caption(
    f"Showing {len(view.shown):,} of {view.selected:,} selected operators ({view.total:,} in the model)"
    + (
        f"; {closed} closed module(s): click a folder to open it, click a module's frame to close it."
        if closed
        else "."
    )
    + " Dashed border: more graph beyond this node. Click an operator for its details."
    + (
        ""
        if view.frames
        else f" Above {CLUSTER_LIMIT} nodes the modules' frames are left out (their layout would take minutes)."
    )
)

graph_col, detail_col = st.columns([3, 2])
with graph_col:
    if view.selected == 0:
        st.warning("No operator matches the filters.")
    else:
        show_graph(
            view.dot,
            "graph",
            Overlay(
                highlight=view.node_for(selected),
                legend=view.legend(),
                highlight_label="selected" if selected else None,
                marks=sorted({m for m in (view.node_for(n) for n in found[:500]) if m}),
                marks_label="matches the search" if found else None,
            ),
            height=640,
            follow=True,
            on_click=_on_click,
            export_name=f"{model.name}-graph",
        )
    st.download_button("Download DOT", view.dot, file_name=f"{model.name}.dot", mime="text/vnd.graphviz")

# -- detail panel ------------------------------------------------------------------------------
with detail_col:
    # Keyed by the selection: a click in the graph makes a new picker showing it.
    widget = f"graph_detail_{names.index(selected) if selected else 'none'}_{len(found)}"
    choices = found + [n for n in names if n not in set(found)] if found else names  # matches first
    st.selectbox(
        "Operator details",
        choices,
        index=choices.index(selected) if selected else None,
        key=widget,
        placeholder="click a node, or choose",
        on_change=_on_detail,
        args=(widget,),
    )
    if selected is not None:
        d = operator_details(graph, selected)
        head, go = st.columns([3, 2])
        head.subheader(md_text(d.name))  # the model's own text: no link, no HTML
        if model.ok and go.button(
            "Run to here", key="graph_to_forward", width="stretch", help="Step through Forward up to this operator"
        ):
            st.session_state["fw_pending"] = ("name", selected)  # applied when the Forward page opens
            st.switch_page("pages/5_forward.py")
        st.markdown(f"{code_span(d.type)} · category **{d.category}**" + (f" · .param line {d.line}" if d.line else ""))
        how = declared_kernel(model.runtime, selected) if model.ok and model.runtime is not None else ""
        if how:
            st.caption(f"Runs as **{how}** at the declared input shape (the kernel the cost model picks).")
        if d.params:
            st.dataframe(pd.DataFrame(d.params, columns=["param", "value"]), hide_index=True, width="stretch")
        io_rows = [{"": f"in {arg or i}", "operand": o, "shape": s} for i, (arg, o, s) in enumerate(d.inputs)]
        io_rows += [{"": "out", "operand": o, "shape": s} for o, s in d.outputs]
        st.dataframe(pd.DataFrame(io_rows), hide_index=True, width="stretch")
        for label, neighbours in (("From", d.producers), ("To", d.consumers)):
            if neighbours:
                cols = st.columns([1] + [3] * min(3, len(neighbours)))
                cols[0].markdown(f"**{label}**")
                for i, n in enumerate(neighbours[:3]):
                    cols[i + 1].button(
                        md_text(n), key=f"graph_nav_{label}_{i}", on_click=_select, args=(n,), width="stretch"
                    )
                if len(neighbours) > 3:
                    st.caption(f"{label} also: " + ", ".join(code_span(n) for n in neighbours[3:]))
        if d.weights:
            st.markdown("**Weights**")
            st.dataframe(pd.DataFrame(weight_table(d.weights)), hide_index=True, width="stretch")
            wname = st.radio(
                "Histogram of",
                [w.name for w in d.weights],
                format_func=md_text,
                horizontal=True,
                key=f"graph_w_{selected}",
            )
            data = graph.operator(selected).attrs[wname].data
            assert data is not None
            chart(histogram_chart(data, height=180))
            st.download_button(
                f"Download @{wname} (.npy)",
                partial(npy_bytes, data),  # made when the button is clicked
                file_name=f"{selected}.{wname}.npy",
                mime="application/octet-stream",
            )

# The deployed model: the ncnn files pnnx wrote (or the ncnn model opened), its params named
# and the PNNX operators each layer came from (kuiper_core/explore/ncnn_view.py, docs/ncnn.md).
if model.opened is not None and (model.opened.format == "ncnn" or getattr(model.opened.files, "ncnn_param", None)):
    from kuiper_core.explore.ncnn_view import deployed_rows

    with st.expander("Deployed as ncnn: layers, params by name, and where each came from"):
        origins_on = st.toggle(
            "Find the PNNX operators behind each layer (runs both graphs once)", key="graph_ncnn_from"
        )
        try:
            ncnn_view = deployed_rows(model.opened, model.sample_input, with_origins=origins_on)
        except KuiperError as e:
            common.show_error(e, title="The ncnn files cannot be shown")  # (its message quotes the file)
            ncnn_view = None
        if ncnn_view is not None:
            st.caption(
                ncnn_view[0] + ". `kuiper compare MODEL.ncnn.param --ncnn` lines every blob up with ncnn and PyTorch."
            )
            st.dataframe(pd.DataFrame(ncnn_view[1]), hide_index=True, width="stretch")
