"""Attention Lab: the router and frame. Page config, shared sidebar, navigation."""

from __future__ import annotations

import streamlit as st

from ui.warm import wait_for_warm_imports, warm_chart_code

st.set_page_config(
    page_title="Attention Lab",
    page_icon="🔎",  # an emoji favicon is drawn locally; a :material/: one is fetched from Google
    layout="wide",
)
# First, before the imports below (torch, the models' code: ~2 s on a first visit): the browser
# fetches and compiles plotly.js meanwhile, instead of after the page's run.
warm_chart_code()
wait_for_warm_imports()  # under make run, a thread imports what the pages need from start-up

# ruff: noqa: E402 - the imports below come after the warm-up on purpose
from model.runtime.device import configure_threads
from ui.a11y import render_a11y
from ui.chrome import translate_streamlit_chrome
from ui.frame import mark_framed
from ui.i18n import t
from ui.preload import script_run, start_preload
from ui.sidebar import render_sidebar


@st.cache_resource(show_spinner=False)
def _configure_torch_once() -> None:
    """Torch thread settings are process-wide: set them once, not on every rerun."""
    configure_threads()


_configure_torch_once()
start_preload()  # models and slow numbers, in the background (after this page), once per process

# Groups of pages, each a sidebar section; a new page joins its group here.
pages = {
    t("nav.section.start"): [
        st.Page("pages/home.py", title=t("nav.home"), icon=":material/home:", default=True),
    ],
    t("nav.section.look"): [
        st.Page(
            "pages/explorer.py",
            title=t("nav.explorer"),
            icon=":material/grid_view:",
            url_path="explorer",
        ),
        st.Page(
            "pages/decoding.py",
            title=t("nav.decoding"),
            icon=":material/stairs:",
            url_path="decoding",
        ),
        st.Page(
            "pages/training.py",
            title=t("nav.training"),
            icon=":material/model_training:",
            url_path="training",
        ),
        st.Page(
            "pages/mechanisms.py",
            title=t("nav.mechanisms"),
            icon=":material/psychology:",
            url_path="mechanisms",
        ),
    ],
    t("nav.section.concepts"): [
        st.Page(
            "pages/concept_attention.py",
            title=t("nav.concept_attention"),
            icon=":material/calculate:",
            url_path="concept_attention",
        ),
        st.Page(
            "pages/concept_positional.py",
            title=t("nav.concept_positional"),
            icon=":material/waves:",
            url_path="concept_positional",
        ),
        st.Page(
            "pages/concept_layernorm.py",
            title=t("nav.concept_layernorm"),
            icon=":material/equalizer:",
            url_path="concept_layernorm",
        ),
        st.Page(
            "pages/concept_warmup.py",
            title=t("nav.concept_warmup"),
            icon=":material/trending_up:",
            url_path="concept_warmup",
        ),
        st.Page(
            "pages/concept_family.py",
            title=t("nav.concept_family"),
            icon=":material/account_tree:",
            url_path="concept_family",
        ),
        st.Page(
            "pages/modern.py",
            title=t("nav.modern"),
            icon=":material/rocket_launch:",
            url_path="modern",
        ),
    ],
    t("nav.section.practice"): [
        st.Page(
            "pages/practice.py",
            title=t("nav.practice"),
            icon=":material/quiz:",
            url_path="practice",
        ),
        st.Page(
            "pages/find_the_bug.py",
            title=t("nav.find_the_bug"),
            icon=":material/bug_report:",
            url_path="find_the_bug",
        ),
        st.Page(
            "pages/classroom.py",
            title=t("nav.classroom"),
            icon=":material/groups:",
            url_path="classroom",
        ),
    ],
}
page = st.navigation(pages, expanded=True)  # every page listed: no "View more" fold
# Each page's own title in the browser tab and for screen readers (WCAG 2.4.2), in the UI's
# language: "Attention Explorer · Attention Lab".
st.set_page_config(page_title=t("a11y.page_title", page=page.title))
render_sidebar()
translate_streamlit_chrome()  # Streamlit's own English controls: translated or removed
render_a11y()  # <html lang>, navigation as lists, focus rings, reduced motion (ui/a11y.py)
mark_framed()  # the page's require_frame() knows it runs inside this frame, not bare
with script_run():  # the background preload waits while a page runs
    page.run()
