"""What Streamlit itself draws, said in the reader's language or removed.

A few of Streamlit's own controls carry English text no setting translates: the file
uploader's "Upload" button and its "20MB per file • ZIP" line, and the "Fullscreen" button
Streamlit adds to every chart's toolbar (and to a table's toolbar, beside "Download as CSV"
and "Search"). The uploader gets our translated button text, and pages say the size limit
in their own caption (``upload_limit_mb``); the fullscreen buttons are removed in every
language, and in a language other than English the table toolbar too, so a Korean page
shows no English that is not a term.
"""

from __future__ import annotations

import json

import streamlit as st

from ui.i18n import current_language, t


def upload_limit_mb() -> int:
    """The server's upload limit (server.maxUploadSize, in megabytes)."""
    return int(st.get_option("server.maxUploadSize"))


def chrome_css(lang: str, upload_label: str) -> str:
    """The style sheet for ``lang``; ``upload_label`` replaces the uploader's "Upload"."""
    # A quoted CSS string; "<" escaped so no text can close the <style> element.
    label = json.dumps(upload_label, ensure_ascii=False).replace("<", "\\3C ")
    rules = [
        # the uploader's English size line: the page's own caption says the limit instead
        '[data-testid="stFileUploaderDropzoneInstructions"] { display: none; }',
        # its English button text, replaced by ours (the icon stays)
        '[data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"] p'
        " { display: none; }",
        '[data-testid="stFileUploaderDropzone"] button [data-testid="stMarkdownContainer"]::after'
        f" {{ content: {label}; }}",
        # the fullscreen button Streamlit adds to every chart's toolbar and to tables'
        '.modebar-btn[data-title="Fullscreen"], .modebar-btn[data-title="Close fullscreen"]'
        " { display: none !important; }",
        '[data-testid="stElementToolbar"] button[aria-label="Fullscreen"] { display: none; }',
    ]
    if lang != "en":  # a table's toolbar: "Download as CSV", "Search", in English only
        rules.append('[data-testid="stElementToolbar"] { display: none; }')
    return "<style>\n" + "\n".join(rules) + "\n</style>"


def translate_streamlit_chrome() -> None:
    """Call once per run, from the frame, after the language is known."""
    st.html(chrome_css(current_language(), t("chrome.upload_button")))
