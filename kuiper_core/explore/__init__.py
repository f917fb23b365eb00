"""What the app shows, as plain data: DOT text, tables, traces, tensor summaries.

Each module computes one kind of view from the engine's objects and has its own unit
tests; the Streamlit pages only lay the results out.
"""
