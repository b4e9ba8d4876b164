"""Streamlit-only helpers shared by the pages: translation, sidebar, cached loaders."""
