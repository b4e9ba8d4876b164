"""What every AppTest here does: open a page of the real app, read its charts, check it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from viz.memo import json_arrays

APP = str(Path(__file__).resolve().parents[2] / "app.py")
# The concept pages, each with the catalog key of its title.
CONCEPT_PAGES = {
    "concept_attention": "concepts.attention.title",
    "concept_positional": "concepts.positional.title",
    "concept_layernorm": "concepts.layernorm.title",
    "concept_warmup": "concepts.warmup.title",
    "concept_family": "concepts.family.title",
}


def open_page(
    page: str | None = None, timeout: float = 120, tabs: dict | None = None, **query: str
) -> AppTest:
    """The app on ``pages/<page>.py`` (None: the home page) with ``query`` in the URL, run once;
    ``tabs``: {tabs key: label} of lazy tabs (ui.tabs) open from the start."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    if page is not None:
        at.switch_page(page if page.endswith(".py") else f"pages/{page}.py")
    at.query_params.update(query)
    for key, label in (tabs or {}).items():
        at.session_state[key] = label
    return at.run()


def open_tab(at: AppTest, key: str, label: str) -> AppTest:
    """Open the lazy tab ``label`` of the tabs ``key`` (ui.tabs), as a click on it does."""
    at.session_state[key] = label
    return at.run()


def elements(at: AppTest, kind: str) -> list:
    """Every element of ``kind`` anywhere in the page, inside columns and expanders too."""
    found = []

    def walk(node):
        if getattr(node, "type", None) == kind:
            found.append(node)
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at.main)
    return found


def chart_key(element) -> str:
    """The widget key a chart was drawn with (the end of its element id)."""
    return element.proto.id.split("-")[-1]


def figures(at: AppTest) -> list[dict]:
    """Every plotly chart's figure (data + layout), in page order."""
    return [json.loads(chart.proto.spec) for chart in elements(at, "plotly_chart")]


def plotted(values) -> np.ndarray:
    """A figure's array as plotted (plotly sends numeric arrays as base64 typed arrays)."""
    return np.asarray(json_arrays(values))


def chart(at: AppTest, key: str) -> dict | None:
    """The figure of the chart whose widget key contains ``key``, or None."""
    for element in elements(at, "plotly_chart"):
        if key in element.proto.id:
            return json.loads(element.proto.spec)
    return None


def ok(at: AppTest) -> None:
    """No exception and no error box on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@contextmanager
def shelf_set_aside() -> Iterator[None]:
    """An empty model shelf (ui.models.MODELS) for the block, then the models it held put
    back, the least recently used first: a test that must see loads from nothing does not
    make the worker's later tests load their models (and recompute what is kept per model)
    again. What the block loaded is let go."""
    from ui.model_shelf import model_bytes
    from ui.models import MODELS

    kept = [(key, MODELS.get(key)) for key in MODELS.kept_keys()]
    MODELS.clear()
    try:
        yield
    finally:
        MODELS.clear()
        for key, lm in kept:
            MODELS.put(key, lm, model_bytes(lm))
