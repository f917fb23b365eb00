"""Profile: per-operator time, parameters, MACs and output memory, with the top operators."""

from __future__ import annotations

import time
from collections import OrderedDict

import pandas as pd
import streamlit as st

from kuiper_core.errors import KuiperError
from kuiper_core.explore import tensors
from kuiper_core.explore.summary import si_number
from kuiper_core.explore.profile import by_type, profile_model, profile_table, profile_totals, top_operators
from pages import common

PROFILES_KEPT = 16  # profiles the server keeps (each a row per operator)

model = common.require_model()
assert model.runtime is not None
st.title(f"Profile of `{model.name}`")
st.caption(
    f"Input: {common.input_description()}. Each operator is timed on its own while stepping through the model; "
    "with several runs the fastest time of each operator is kept. MACs are multiply-accumulates as each layer "
    "counts them (0 where a layer does no arithmetic worth counting). *kernel*: how the engine computes a "
    "layer where it picks among ways, e.g. a convolution's (Winograd, im2col + GEMM, channels last), "
    "chosen per input shape by a cost model."
)

c1, c2 = st.columns([1, 3])
repeats = int(c1.number_input("Runs", min_value=1, max_value=20, value=3, key="profile_repeats"))
run = c2.button("Run profile", type="primary", key="profile_run")


@st.cache_resource(show_spinner=False)
def _profiles() -> OrderedDict:
    """The server's last profiles, by (model hash, input digest, runs): a session opening the
    page shows the last measurement instead of running the model again (ResNet-18 with 3 runs:
    1 s of CPU, 7 s on a shared machine); **Run profile** measures again for everyone."""
    return OrderedDict()


inputs = common.current_input(model)
key = (model.key, tensors.arrays_digest(inputs), repeats)
shared = _profiles()
cached = shared.get(key)
if run or cached is None:
    try:
        with st.spinner("Profiling…"):
            rows = profile_model(model.runtime, inputs, repeats=repeats)
    except (KuiperError, MemoryError) as e:
        common.show_error(e, title="The model failed while running")
        st.stop()
    ran = model.runtime.last_executor or ""  # steps()' executor (RuntimeGraph.last_executor)
    shared[key] = cached = (rows, time.strftime("%H:%M:%S"), ran)
    shared.move_to_end(key)
    while len(shared) > PROFILES_KEPT:
        shared.popitem(last=False)
rows, measured_at, ran = cached
options = model.runtime.options
st.caption(
    f"Measured at {measured_at} (server time) by the `{ran}` executor, at {model.runtime.blas_threads} BLAS "
    f"thread(s); `forward()` here runs the `{options.executor}` executor (docs/architecture.md, "
    '"Which executor runs when"); **Run profile** measures again.'
)

totals = profile_totals(rows)
m1, m2, m3, m4 = st.columns(4)
m1.metric("Total time", f"{totals.seconds * 1e3:.2f} ms")
m2.metric("MACs", si_number(totals.macs))
m3.metric("Parameters", f"{totals.parameters:,}")
m4.metric("Output memory", f"{totals.output_bytes / 2**20:.2f} MB")

st.subheader("Top operators")
metric = st.radio(
    "Rank by",
    ["seconds", "macs", "parameters", "output_bytes"],
    format_func={"seconds": "time", "macs": "MACs", "parameters": "parameters", "output_bytes": "output memory"}.get,
    horizontal=True,
    key="profile_rank",
)
top = top_operators(rows, metric, n=15)
scale = {"seconds": 1e3, "macs": 1e-6, "parameters": 1.0, "output_bytes": 1 / 1024}[metric]
unit = {"seconds": "time (ms)", "macs": "MACs (M)", "parameters": "parameters", "output_bytes": "output (KiB)"}[metric]
chart = pd.DataFrame(
    {"operator": [f"{r.index + 1}. {r.name}" for r in top], unit: [getattr(r, metric) * scale for r in top]}
)
st.bar_chart(chart, x="operator", y=unit, horizontal=True, sort=f"-{unit}", height=max(220, 26 * len(top)))

st.subheader("All operators (click a column header to sort)")
table = pd.DataFrame(profile_table(rows))
st.dataframe(
    table[
        [
            "#",
            "name",
            "type",
            "kernel",
            "category",
            "time_ms",
            "time_%",
            "macs",
            "parameters",
            "output_KiB",
            "output_shapes",
        ]
    ],
    hide_index=True,
    width="stretch",
    column_config={
        "#": st.column_config.NumberColumn(width="small"),
        "kernel": st.column_config.TextColumn("kernel", width="medium"),
        "time_ms": st.column_config.NumberColumn("time (ms)", format="%.3f"),
        "time_%": st.column_config.ProgressColumn("share of time", format="%.1f%%", min_value=0, max_value=100),
        "macs": st.column_config.NumberColumn("MACs", format="localized"),
        "parameters": st.column_config.NumberColumn("parameters", format="localized"),
        "output_KiB": st.column_config.NumberColumn("output (KiB)", format="%.1f"),
    },
)
st.subheader("By operator type")
st.dataframe(
    pd.DataFrame(by_type(rows)),
    hide_index=True,
    width="stretch",
    column_config={"time_ms": st.column_config.NumberColumn("time (ms)", format="%.3f")},
)
st.download_button(
    "Download profile (.csv)", table.to_csv(index=False), file_name=f"{model.name}.profile.csv", mime="text/csv"
)
