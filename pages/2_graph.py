import streamlit as st; st.info("Coming in a moment.")
