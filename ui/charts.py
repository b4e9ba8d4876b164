"""Every chart goes through here, so all of them read well, and save well, in both languages."""

from __future__ import annotations

import hashlib
import re

import plotly.graph_objects as go
import streamlit as st
from streamlit.errors import StreamlitAPIException

from ui.i18n import current_language, t
from viz.memo import FIGURES, KeptFigure
from viz.summaries import (
    MAX_TRACES_SAID,
    TABLE_COLUMNS,
    attention_peak,
    figure_facts,
    figure_table,
    figure_title,
    series_peak,
)

# Streamlit's chart font has no Hangul, so Korean labels fall back to whatever the system
# offers. Naming Korean faces (Linux, macOS, Windows) keeps them in one consistent font.
FONT_STACK = (
    '"Source Sans", "Source Sans Pro", "Noto Sans CJK KR", "Noto Sans KR", '
    '"Apple SD Gothic Neo", "Malgun Gothic", sans-serif'
)

# Plotly's toolbar has one camera button; its format is a config option, so the session
# picks it (SVG stays sharp on slides, PNG pastes anywhere).
IMAGE_FORMATS = ("png", "svg")
_FORMAT_KEY = "chart_image_format"

# Plotly's toolbar text is English; plotly.js looks a string up in config["locales"] before
# its own, so these follow the app's language. Keys: plotly's own English strings.
_TOOLBAR_TEXT = {
    "Download plot as a PNG": "chart.toolbar.download_png",
    "Download plot": "chart.toolbar.download_svg",  # plotly's title for any other format
    "Zoom": "chart.toolbar.zoom",
    "Pan": "chart.toolbar.pan",
    "Box Select": "chart.toolbar.box_select",
    "Lasso Select": "chart.toolbar.lasso_select",
    "Zoom in": "chart.toolbar.zoom_in",
    "Zoom out": "chart.toolbar.zoom_out",
    "Autoscale": "chart.toolbar.autoscale",
    "Reset axes": "chart.toolbar.reset_axes",
    "Reset view": "chart.toolbar.reset_view",
    "Toggle Spike Lines": "chart.toolbar.spikelines",
    "Show closest data on hover": "chart.toolbar.hover_closest",
    "Compare data on hover": "chart.toolbar.hover_compare",
    "Preparing image - this may take a few seconds": "chart.toolbar.preparing",
    "Image download succeeded": "chart.toolbar.saved",
    "Sorry, there was a problem downloading your image!": "chart.toolbar.save_failed",
    "Double-click to zoom back out": "chart.toolbar.double_click",
}


def image_format() -> str:
    """The format the charts' camera button downloads in this session."""
    chosen = st.session_state.get(_FORMAT_KEY)
    return chosen if chosen in IMAGE_FORMATS else IMAGE_FORMATS[0]


def render_image_format_picker() -> None:
    """Sidebar control: which format every chart's camera button saves."""
    st.segmented_control(
        f":material/photo_camera: {t('chart.image_format')}",
        IMAGE_FORMATS,
        format_func=str.upper,
        default=IMAGE_FORMATS[0],
        required=True,
        key=_FORMAT_KEY,
        help=t("chart.image_format_help"),
        persist_state="session",
        width="stretch",
    )


def chart_config(key: str) -> dict:
    """Plotly config: the session's image format, a file name that says what the chart is,
    and the toolbar in the app's language."""
    fmt, lang = image_format(), current_language()
    name = re.sub(r"[^A-Za-z0-9]+", "-", key.removesuffix("_chart")).strip("-") or "chart"
    return {
        "toImageButtonOptions": {
            "format": fmt,
            "filename": f"attention-lab-{name}",
            "scale": 2 if fmt == "png" else 1,  # PNG at twice the screen size for slides
        },
        "locale": lang,
        "locales": {lang: {"dictionary": {en: t(k) for en, k in _TOOLBAR_TEXT.items()}}},
        "displaylogo": False,
    }


_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()#+\-.!$<>|~])")


def _fact_sentence(fact: dict) -> str:
    text = t(f"a11y.summary.{fact['kind']}", **fact)
    if fact.get("name"):
        text = f"{fact['name']}: {text}"
    return " ".join(text.split())  # an empty axis title leaves no double space


def describe_figure(fig: go.Figure, title: str | None = None) -> str:
    """A one-sentence summary from the figure's own traces, in the reader's language: each
    heatmap's highest cell, each curve's or bar chart's peak (viz.summaries.figure_facts).
    ``title`` names a chart whose title is written beside it rather than in it."""
    facts = figure_facts(fig)
    # untitled: the measured quantity names the chart ("Mean: …", "Standard deviation: …")
    quantities = {f.get("y_title") or f.get("quantity") for f in facts} - {None, ""}
    title = (
        title
        or figure_title(fig)
        or (quantities.pop() if len(quantities) == 1 else t("a11y.chart"))
    )
    if not facts:
        return t("a11y.summary.empty", title=title)
    parts = [_fact_sentence(f) for f in facts[:MAX_TRACES_SAID]]
    if len(facts) > MAX_TRACES_SAID:
        parts.append(t("a11y.summary.more", n=len(facts) - MAX_TRACES_SAID))
    return f"{title}: {' '.join(parts)}"


def attention_summary(where: str, weights, query_tokens, key_tokens) -> str:
    """The summary "Layer 2, head 3: 'it' attends most to 'animal' (0.62)", from the weights drawn."""
    peak = attention_peak(weights, list(query_tokens), list(key_tokens))
    return t(f"a11y.summary.{peak.pop('kind', 'attention')}", where=where, **peak)


def warmup_summary(steps, learning_rates) -> str:
    """The summary "Warm-up: the learning rate peaks at step 4,000 at 7.0e-4", from the curve drawn."""
    return t("a11y.summary.warmup", **series_peak(steps, learning_rates))


TITLE_UNITS = 46  # a title line that fits a 390 px phone: Latin letters 1, Hangul 2
LINE_PX = 22  # one more title line needs this much more room at the top


def _text_units(text: str) -> int:
    return sum(2 if ord(ch) >= 0x1100 else 1 for ch in text)


def wrap_text(text: str, units: int = TITLE_UNITS) -> str:
    """``text`` broken at spaces into lines of at most ``units`` (``<br>`` between them),
    so a chart's title or axis title fits a phone's width instead of running off it."""
    if "<br" in text or _text_units(text) <= units:
        return text
    lines, line = [], ""
    for word in text.split(" "):
        if line and _text_units(line) + 1 + _text_units(word) > units:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "<br>".join([*lines, line])


# A title anchored at the chart's top edge (y=1 in the container, yanchor "top") has its
# first line's cap height at the edge: the letters above it (l, k, Hangul) were cut, and a
# title of several lines starts 11 px higher still (measured in Streamlit's plotly.js).
# These paddings keep the whole first line inside the chart.
TOP_PAD_PX = {1: 8, 2: 20}  # lines: 1, or 2 and more


def _grow_top(fig: go.Figure, px: int) -> None:
    """``px`` more room above the plot; the figure grows with it, so the plot keeps its size."""
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 100
    fig.layout.margin.t = top + px
    if fig.layout.height:
        fig.layout.height += px


def _keep_title_inside(fig: go.Figure) -> None:
    """A title at the top edge is padded down to fit (TOP_PAD_PX), with the room for it."""
    title = fig.layout.title
    if not (title.yref == "container" and title.yanchor == "top" and title.y == 1):
        return
    need = TOP_PAD_PX[2 if "<br" in title.text else 1]
    have = title.pad.t or 0
    if have < need:
        fig.layout.title.pad.t = need
        _grow_top(fig, need - have)


def wrap_titles(fig: go.Figure) -> go.Figure:
    """The figure's title and axis titles wrapped to a phone's width; the top margin (and
    the height) grow by a line for each line the title gains, and a title at the top edge
    is padded so that its first line is not cut."""
    title = fig.layout.title
    if title is not None and title.text:
        wrapped = wrap_text(title.text)
        extra = wrapped.count("<br>") * LINE_PX
        if wrapped != title.text:  # once: a figure wrapped before keeps its margin
            fig.layout.title.text = wrapped
            _grow_top(fig, extra)
        _keep_title_inside(fig)

    def share(axis) -> float:  # the part of the chart's width (or height) an axis spans
        domain = axis.domain or (0, 1)
        return max(float(domain[1]) - float(domain[0]), 0.2)

    def wrap_axis(axis) -> None:
        if axis.title is not None and axis.title.text:
            axis.title.text = wrap_text(axis.title.text, int((TITLE_UNITS + 4) * share(axis)))

    fig.for_each_xaxis(wrap_axis)
    fig.for_each_yaxis(wrap_axis)
    # subplot titles: as wide as their column
    columns = len({tuple(a.domain or (0, 1)) for a in fig.select_xaxes()}) or 1
    for note in fig.layout.annotations or ():
        if note.text and note.xref == "paper" and note.yref == "paper" and not note.showarrow:
            note.text = wrap_text(note.text, max(int(TITLE_UNITS * 0.75 / columns), 8))
    return fig


def _kept_json(fig: go.Figure) -> str | None:
    """The JSON of a kept figure (viz.memo) that nobody has opened or changed: what it is
    sent as, known without serialising it. None for any other figure."""
    if type(fig) is not KeptFigure:
        return None
    kept = object.__getattribute__(fig, "_kept")
    return kept["spec"] if not (kept["built"] or kept["layout"]) else None


def framed_figure(
    fig: go.Figure, summary: str | None = None, title: str | None = None
) -> tuple[str, go.Figure]:
    """(the chart's summary, the figure with titles wrapped and the app's font). ``title``
    names, in a summary made from the traces, a chart whose title is written beside it.

    A kept figure handed out again (a warm revisit, a rerun that left the chart as it was)
    is framed once per content and language, kept in viz.memo's FIGURES beside it: opening
    it to summarise and wrap it cost 50-80 ms a chart on the 2-core machine, most of a
    concept page's warm server time. The key is the figure's JSON, so a figure changed after
    it was built is framed anew. A figure built in this run is framed as it is (keying it
    would mean serialising it once more: tens of ms for a 256 x 256 map after each Enter)."""
    spec = _kept_json(fig)
    if spec is None:
        return _frame(fig, summary, title), fig
    digest = hashlib.blake2b(spec.encode("utf-8"), digest_size=16).digest()
    key = ("ui.charts.framed_figure", digest, current_language(), summary, title)
    found = FIGURES.get(key)
    if found is None:
        said = _frame(fig, summary, title)
        found = (said, fig.to_json(validate=False))
        FIGURES.put(key, found, len(found[1]) + len(said))
    said, framed = found
    return said, KeptFigure(framed)


def _frame(fig: go.Figure, summary: str | None, title: str | None = None) -> str:
    """Wrap the titles, set the font; the summary (``summary``, else one from the traces)."""
    said = summary or describe_figure(fig, title)
    wrap_titles(fig)
    fig.update_layout(font_family=FONT_STACK)
    return said


def plotly_chart(
    fig: go.Figure,
    *,
    key: str,
    where=st,
    config: dict | None = None,
    summary: str | None = None,
    title: str | None = None,
    **kwargs,
) -> None:
    """st.plotly_chart with the app's font stack and toolbar, drawn in ``where`` (a column),
    and its text alternative: ``summary`` (else one computed from the figure's traces) as
    the chart's accessible name, and above the chart an expander that shows the plotted
    numbers. The expander comes first so that the keyboard, and a screen reader, meet the
    summary and the table before the chart's toolbar (the drawing itself says nothing).

    ``title`` names a chart whose title is written beside it in the summary made from its
    traces: passed here, not through describe_figure, so a kept figure (viz.memo) is
    summarised once per content and language, not opened again on every run.

    ``key`` is required: a keyed chart keeps its zoom and selection across reruns.
    """
    summary, fig = framed_figure(fig, summary, title)
    render_table_disclosure(fig, summary, key=key, where=where)
    where.plotly_chart(
        fig, key=key, config={**chart_config(key), **(config or {})}, alt=summary, **kwargs
    )


def render_table_disclosure(fig: go.Figure, summary: str, *, key: str, where=st) -> None:
    """The chart's summary with "(Show as a table)": an expander whose table holds the plotted numbers,
    built only while open (a closed table costs nothing on a rerun); inside another
    expander, where Streamlit allows none, the summary as a caption."""
    escaped = _MARKDOWN_SPECIALS.sub(r"\\\1", summary)  # tokens are text, not markdown
    label = f"{escaped} ({t('a11y.show_table')})"
    try:
        table = where.expander(
            label, icon=":material/table_view:", key=f"{key}__table", on_change="rerun"
        )
    except StreamlitAPIException:
        where.caption(label)
        return
    if table.open:
        headers = {c: t(f"a11y.col.{c}") for c in TABLE_COLUMNS}
        table.dataframe(figure_table(fig, headers), hide_index=True)
