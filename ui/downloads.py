"""Download buttons for what a page drew: charts as one self-contained HTML file.

The file is made when the button is clicked, from charts the page already built (so the same
numbers are in the page and in the file); everything said in the reader's language (caption,
summary, table headers) is fixed while the page runs, since the click runs outside it.
"""

from __future__ import annotations

import re

import plotly.graph_objects as go
import streamlit as st

from ui.charts import describe_figure, plotly_chart
from ui.i18n import current_language, t
from viz.export_html import ExportedChart, view_html
from viz.summaries import TABLE_COLUMNS


def exported(figure: go.Figure, summary: str, caption: str = "") -> ExportedChart:
    """A chart as drawn, with its table's column names in the reader's language."""
    headers = {c: t(f"a11y.col.{c}") for c in TABLE_COLUMNS}
    return ExportedChart(figure, summary, caption, headers)


def drawn(
    figure: go.Figure, key: str, summary: str | None = None, where=st, caption: str = ""
) -> ExportedChart:
    """Draw a chart (ui.charts.plotly_chart) and keep it, as drawn, for the page's file."""
    summary = summary or describe_figure(figure)
    plotly_chart(figure, key=key, summary=summary, where=where)
    return exported(figure, summary, caption)


def file_stem(*parts) -> str:
    """A file name from its parts: letters, digits and dashes only."""
    text = "-".join(str(p) for p in parts if p not in (None, ""))
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "chart"


def html_download(
    charts: list[ExportedChart], *, title: str, intro: str, name: str, key: str, where=st
) -> None:
    """A button that saves ``charts`` as one HTML page that opens offline (viz.export_html)."""
    lang, table_label, no_chart = (
        current_language(),
        t("a11y.show_table"),
        t("chart.export_no_chart"),
    )

    def page() -> bytes:
        return view_html(title, charts, lang, intro, table_label, no_chart).encode("utf-8")

    where.download_button(
        t("chart.export_html"),
        page,
        file_name=f"{file_stem(name, lang)}.html",
        mime="text/html",
        icon=":material/html:",
        on_click="ignore",
        key=key,
        help=t("chart.export_html_help"),
    )
