"""IR: the model as text (docs/ir.md), the current Forward operator highlighted, an editor to
change and re-run it, the tokens of a line, and the same operators written three ways."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kuiper_core import ir, limits
from kuiper_core.errors import KuiperError
from kuiper_core.explore import ir_view
from kuiper_core.explore.stepper import ForwardStepper
from kuiper_core.graph import Graph
from pages import common

RUN = "kx_ir_run"  # the last edit's run: {"model": key, "rows": [...], "diff": str, "ops": int} or {"model", "error"}
WINDOW = 12  # lines shown on each side of the current operator in big models
WHOLE_UP_TO = 80  # models with at most this many lines show the whole text by default


@st.cache_data(show_spinner="Printing the IR…", max_entries=12)
def _printed(key: str, _graph: Graph) -> str:  # key: the model's digest (the graph itself is not hashable)
    return ir.print_graph(_graph)


@st.cache_resource(show_spinner=False, max_entries=12)
def _module(key: str, text: str) -> ir.IRModule:
    return ir.parse_module(text, "model.kir", check=False)


st.title("IR")
st.caption(
    'The model as textual IR: one operation a line in execution order, `(results) = "type" @name (operands) '
    "{typed attributes} : (operand types) -> result types`. Every value is typed (`(Int32)3`, `(Bool)true`) so "
    "the parser never guesses; weights appear by name, shape and dtype. `kuiper print MODEL` prints it, "
    "`kuiper run FILE.kir` runs it. The format is in docs/ir.md."
)
model = common.require_model(runnable=False)
assert model.graph is not None
text = _printed(model.key, model.graph)
module = _module(model.key, text)
lines = ir_view.ir_lines(module)


# -- the Forward stepper's cursor --------------------------------------------------------------------
def _step(stepper: ForwardStepper) -> None:
    stepper.step()  # (a callback returns nothing: the page draws the step after it)


current = None
if model.ok:
    inputs = common.current_input(model)
    stepper = common.forward_stepper(model, inputs)
    if st.session_state.get("ir_stepper") is not stepper:  # a new cursor: a reload or a shared link's step
        st.session_state["ir_stepper"] = stepper
        wanted = common.url_number("step", high=stepper.total)
        if wanted is not None and stepper.cursor < 0 and not stepper.events:
            stepper.go_to(wanted)
    # Callbacks move the cursor before the buttons are drawn: never one click out of date.
    at_end = stepper.cursor + 1 >= stepper.total or (
        stepper.error is not None and stepper.cursor + 1 >= len(stepper.events)
    )
    b = st.columns([1, 1, 1, 5])
    b[0].button(
        "Reset",
        key="ir_reset",
        width="stretch",
        on_click=stepper.reset,
        disabled=stepper.cursor < 0 and not stepper.events,
    )
    b[1].button("Back", key="ir_back", width="stretch", on_click=stepper.back, disabled=stepper.cursor < 0)
    b[2].button("Step", key="ir_step", width="stretch", on_click=_step, args=(stepper,), disabled=at_end)
    common.set_url(step=stepper.cursor + 1 if stepper.cursor >= 0 else None)
    event = stepper.current
    current = event.name if event is not None else None
    if stepper.error is not None:
        common.show_error(stepper.error, title="Forward stopped")
    if event is None:
        b[3].markdown(
            f"Nothing has run yet: **Step** runs `{stepper.next_name}` (the Forward page shares this cursor)."
        )
    else:
        b[3].markdown(
            f"**Operator {event.index + 1} of {stepper.total}: `{event.name}`** ({event.type}), line "
            f"{ir_view.line_of_operator(module, event.name)} — the same cursor as on the Forward page."
        )
else:
    st.warning(f"The model cannot run ({model.error_kind}); its text is shown without a Forward cursor.")

tab_text, tab_edit, tab_tokens, tab_ways = st.tabs(
    ["Text", "Edit and run", "Tokens of a line", "Three ways to write it"]
)

# -- the text ------------------------------------------------------------------------------------------
with tab_text:
    whole = st.toggle("Whole text", value=len(lines) <= WHOLE_UP_TO, key="ir_whole")
    start, end = (0, len(lines)) if whole else ir_view.window(lines, current, WINDOW)
    if not whole:
        st.caption(f"Lines {start + 1}–{end} of {len(lines)}, around the current operator.")
    st.html(ir_view.html_block(lines, current, start=start, end=end))
    st.download_button("Download .kir", text, file_name=f"{model.name}.kir", mime="text/plain", key="ir_download")

# -- edit and run ----------------------------------------------------------------------------------------
with tab_edit:
    st.caption(
        "Change the text and run it: the engine parses it (errors point at the spot), takes the weights from the "
        "loaded model by `opname.attrname`, builds every layer and runs Forward on the current input."
    )
    edit_key = f"ir_edit_{model.key}"
    if st.button("Back to the model's text", key="ir_restore") or edit_key not in st.session_state:
        st.session_state[edit_key] = text
        st.session_state.pop(RUN, None)
    edited = st.text_area("IR text", height=360, key=edit_key)
    if st.button("Parse and run", type="primary", key="ir_run", disabled=not model.ok):
        inputs = common.current_input(model)
        try:
            with st.spinner("Parsing and running…"), limits.use(common.APP_LIMITS):  # typed text: the app's limits
                result = ir_view.run_text(edited, ir_view.weight_arrays(model.graph), inputs)
                assert model.runtime is not None
                original = model.runtime.forward(*inputs)
            expected = (
                model.expected
                if (st.session_state.get(common.INPUT_KEY) or {}).get("kind", "sample") == "sample"
                else None
            )
            st.session_state[RUN] = {
                "model": model.key,
                "rows": ir_view.output_rows(result.outputs, original, expected or None),
                "diff": ir_view.text_diff(text, edited),
                "ops": len(result.module.graph.operators),
            }
        except (KuiperError, MemoryError) as e:
            st.session_state[RUN] = {"model": model.key, "error": e}
    run = st.session_state.get(RUN)
    if run is not None and run["model"] == model.key:
        if "error" in run:
            common.show_error(run["error"], title="The edited text cannot run")
        else:
            st.success(f"Parsed {run['ops']} operations, built and ran them.")
            st.dataframe(pd.DataFrame(run["rows"]), hide_index=True, width="stretch")
            st.markdown("**What changed**")
            st.code(run["diff"] or "(nothing: the text is the model's)", language="diff")

# -- tokens -------------------------------------------------------------------------------------------------
with tab_tokens:
    follow = min((ir_view.line_of_operator(module, current) if current is not None else None) or 2, len(lines))
    # Keyed by the cursor's line: the chosen line follows the Forward cursor when it moves.
    n = int(
        st.number_input("Line (follows the current operator)", 1, len(lines), follow, key=f"ir_token_line_{follow}")
    )
    line = lines[n - 1].text
    st.code(line or " ", language=None)
    try:
        rows = ir_view.token_rows(line)
        st.caption(f"{len(rows)} tokens. A `<…>` body is one token; its dialect's hook reads the inside.")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", height=min(420, 38 + 35 * max(1, len(rows))))
    except (KuiperError, MemoryError) as e:
        common.show_error(e, title="The lexer stops on this line")

# -- three ways -------------------------------------------------------------------------------------------
with tab_ways:
    way = st.radio(
        "Write the operators as", ["Dataflow", "Let-bound (A-normal form)", "Nested"], horizontal=True, key="ir_way"
    )
    if way == "Dataflow":
        st.caption(
            "One operator a line; every value is named once and referred to by name, so a value used twice "
            "is computed once. This is the IR above without attributes and types."
        )
        view = ir_view.dataflow_lines(model.graph)
    elif way.startswith("Let"):
        st.caption(
            "The same lines as `let` bindings. The text barely changes, but the tree does: each `let` holds "
            "the rest of the program as its body, which fixes where (in which scope) a value is computed."
        )
        view = ir_view.let_lines(model.graph)
    else:
        nested = ir_view.nested_view(model.graph)
        view = nested.lines
        shared = sorted(nested.repeated.items(), key=lambda kv: -kv[1])[:5]
        st.caption(
            "Each output as one expression tree. A value used twice is written twice: the tree reads as if the "
            "shared value were computed again — the ambiguity Relay's text format avoids by naming values. "
            f"The full tree has {nested.calls_in_full:,} calls for {nested.operators:,} operators."
            + (" Most repeated: " + ", ".join(f"`{k}` ×{v:,}" for k, v in shared) + "." if shared else "")
        )
        if nested.cut:
            st.info(
                f"Cut after {nested.calls_printed} calls or {ir_view.NESTED_DEPTH_LIMIT} levels (`…`): the whole tree "
                "is too big to print."
            )
    st.html(ir_view.html_block(view, current, numbers=False, max_height="70vh"))
