"""Graph: the PNNX graph coloured by category, with search, filters, focus, overview and
an operator detail panel."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kuiper_core.explore.dot import graph_view
from kuiper_core.explore.summary import histogram_table, operator_details
from kuiper_core.explore.tensors import npy_bytes
from pages import common

model = common.require_model(runnable=False)  # a graph that cannot run can still be drawn
graph = model.graph
assert graph is not None
names = [op.name for op in graph.operators]
types = sorted({op.type for op in graph.operators})

st.title(f"Graph of `{model.name}`")
if model.error:
    st.warning(f"This model cannot run ({model.error_kind}); the graph is shown as parsed. See Home for the message.")

# -- controls --------------------------------------------------------------------------------
c1, c2, c3, c4 = st.columns([2, 2, 2, 1])
name_filter = c1.text_input("Search name or type", key="graph_search", placeholder="e.g. conv, relu, blocks.3")
type_filter = c2.multiselect("Only these types", types, key="graph_types")
focus = c3.selectbox("Focus on operator", names, index=None, key="graph_focus", placeholder="whole graph")
hops = c4.number_input("Hops", min_value=1, max_value=20, value=2, key="graph_hops", disabled=focus is None)
o1, o2 = st.columns([1, 3])
max_nodes = int(
    o1.number_input("Max nodes before overview", min_value=20, max_value=3000, value=400, step=20, key="graph_max")
)
edge_labels = o2.toggle("Shapes on edges", value=True, key="graph_edge_labels")

# The chosen operator is remembered per model (another model may reuse the name).
remembered = st.session_state.get("graph_selected")
selected = remembered[1] if isinstance(remembered, tuple) and remembered[0] == model.key else None
if selected not in names:
    selected = None

view = graph_view(
    graph,
    highlight=selected,
    focus=focus,
    hops=int(hops),
    max_nodes=max_nodes,
    type_filter=set(type_filter),
    name_filter=name_filter,
    edge_labels=edge_labels,
)
window = None
if view.overview:
    labels = [f"{g.index}: {g.label.splitlines()[0]}" for g in view.groups]
    st.info(
        f"{view.selected:,} operators are more than {max_nodes}: showing an overview of {len(view.groups)} groups of "
        "consecutive operators. Open a group, focus on an operator, or filter to see operators themselves."
    )
    pick = st.selectbox("Open group", labels, index=None, key="graph_group", placeholder="overview")
    if pick is not None:
        g = view.groups[labels.index(pick)]
        window = (g.start, g.stop)
        view = graph_view(
            graph, highlight=selected, focus=focus, hops=int(hops), max_nodes=max_nodes,
            type_filter=set(type_filter), name_filter=name_filter, window=window, edge_labels=edge_labels,
        )
if not view.overview:
    st.caption(f"Showing {len(view.shown):,} of {view.total:,} operators. Dashed border: more graph beyond this node.")

graph_col, detail_col = st.columns([3, 2])
with graph_col:
    if view.selected == 0:
        st.warning("No operator matches the filters.")
    else:
        st.graphviz_chart(view.dot)
    st.download_button("Download DOT", view.dot, file_name=f"{model.name}.dot", mime="text/vnd.graphviz")

# -- detail panel ------------------------------------------------------------------------------
with detail_col:
    choices = view.shown or names
    chosen = st.selectbox(
        "Operator details",
        choices,
        index=choices.index(selected) if selected in choices else None,
        placeholder="choose an operator",
    )
    if chosen != selected:
        st.session_state["graph_selected"] = (model.key, chosen)
        st.rerun()
    if chosen is not None:
        d = operator_details(graph, chosen)
        st.subheader(d.name)
        st.markdown(f"`{d.type}` · category **{d.category}**" + (f" · .param line {d.line}" if d.line else ""))
        if d.params:
            st.dataframe(pd.DataFrame(d.params, columns=["param", "value"]), hide_index=True, width="stretch")
        io_rows = [{"": f"in {arg or i}", "operand": o, "shape": s} for i, (arg, o, s) in enumerate(d.inputs)]
        io_rows += [{"": "out", "operand": o, "shape": s} for o, s in d.outputs]
        st.dataframe(pd.DataFrame(io_rows), hide_index=True, width="stretch")
        st.caption(
            "From: " + (", ".join(f"`{p}`" for p in d.producers) or "—")
            + " · To: " + (", ".join(f"`{c}`" for c in d.consumers) or "—")
        )
        if d.weights:
            st.markdown("**Weights**")
            st.dataframe(
                pd.DataFrame(
                    [
                        {"weight": w.name, "shape": "x".join(map(str, w.shape)), "dtype": w.dtype, "min": w.min,
                         "max": w.max, "mean": w.mean, "std": w.std, "zeros": w.zeros}
                        for w in d.weights
                    ]
                ),
                hide_index=True,
                width="stretch",
            )
            wname = st.radio("Histogram of", [w.name for w in d.weights], horizontal=True, key=f"graph_w_{chosen}")
            data = graph.operator(chosen).attrs[wname].data
            assert data is not None
            st.bar_chart(pd.DataFrame(histogram_table(data)), x="value", y="count", height=200)
            st.download_button(
                f"Download @{wname} (.npy)",
                npy_bytes(data),
                file_name=f"{chosen}.{wname}.npy",
                mime="application/octet-stream",
            )
