"""Kuiper Explorer: `streamlit run app.py`.

The pages only lay out data that `kuiper_core` computes; see pages/common.py for the
shared model/input state.
"""

import streamlit as st

# The favicon is an emoji, which Streamlit draws as an inline SVG: a ":material/…:" icon is
# fetched from fonts.gstatic.com, a request leaving a classroom's network (an error offline).
st.set_page_config(page_title="Kuiper Explorer", page_icon="🕸️", layout="wide")

PAGES = [
    st.Page("pages/1_home.py", title="Home / model", icon=":material/home:", default=True),
    st.Page("pages/2_graph.py", title="Graph", icon=":material/account_tree:"),
    st.Page("pages/3_order.py", title="Execution order", icon=":material/format_list_numbered:"),
    st.Page("pages/4_expressions.py", title="Expressions", icon=":material/functions:"),
    st.Page("pages/5_forward.py", title="Step through Forward", icon=":material/play_circle:"),
    st.Page("pages/6_profile.py", title="Profile", icon=":material/timer:"),
    st.Page("pages/7_ir.py", title="IR", icon=":material/code:"),
    st.Page("pages/8_passes.py", title="Passes", icon=":material/tune:"),
    st.Page("pages/9_class.py", title="Class", icon=":material/groups:"),
]

page = st.navigation(PAGES)
# A projector at 1280x720 has little height: less empty space above the title.
st.html(
    "<style>[data-testid='stMainBlockContainer']{padding-top:2.2rem}"
    "[data-testid='stMainBlockContainer'] h1{font-size:2.1rem;padding-top:0.2rem}</style>"
)

from pages import class_panel, common, conversion_verdict, server  # noqa: E402  (after set_page_config)

server.start_upkeep()

# The sidebar names the model and input; drawn before the page (long runs) and again after
# it, so it names what the page used when an input changed during this run.
badge = st.sidebar.empty()
with badge.container():
    common.sidebar_model_badge(conversion_verdict.model_line)
common.begin_url()
in_class = class_panel.joined()  # (a class's code stays in the URL on every page)
if in_class is not None:
    st.sidebar.caption(f"Class **{in_class}**: your quiz answers count (anonymously)")
if page.url_path != PAGES[0].url_path:  # (Home says it with every line)
    conversion_verdict.page_banner(common.current_model())  # a disagreeing conversion, on every page
try:
    page.run()
except MemoryError as e:  # one no page caught (they catch it with KuiperError): said so, the server keeps serving
    common.show_error(e, title="Out of memory")
finally:  # also after st.stop(): the sidebar and the URL always reflect this run
    with badge.container():
        common.sidebar_model_badge(conversion_verdict.model_line)
    common.write_url()
