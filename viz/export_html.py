"""A view as a file: one self-contained HTML page with the charts a page drew, each with its
caption, its one-line summary and its data table, that opens offline in any browser.

plotly.js travels inside the file, gzipped (the plotly package's bundle is 4.8 MB as it
is, 1.4 MB gzipped) and unpacked by the browser's own DecompressionStream, so a long
input's overview and zoom window still fit in well under 5 MB with their tables. Nothing is
fetched: no CDN, no font, no script from anywhere else.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly
import plotly.graph_objects as go

from viz.summaries import figure_table

MAX_BYTES = 5_000_000  # the file's size at any input length (a test holds it)


@dataclass
class ExportedChart:
    """One chart as the page drew it: the figure, the caption above it (may be empty), its
    summary (the chart's text alternative) and the column names of its table, in the
    page's language."""

    figure: go.Figure
    summary: str
    caption: str = ""
    headers: dict[str, str] | None = None


@functools.cache
def _plotly_js_gzipped() -> str:
    """plotly.js from the plotly package, gzipped and base64-encoded (made once a process)."""
    bundle = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return base64.b64encode(gzip.compress(bundle.read_bytes(), compresslevel=9, mtime=0)).decode()


def _plain(text: str) -> str:
    """A caption's markdown emphasis and code marks dropped: the file shows text as text."""
    return re.sub(r"\*\*|`+|\\(?=[\\`*_{}\[\]()#+\-.!$<>|~])", "", text)


def _script_json(value) -> str:
    """JSON safe inside a <script> element: no "</" can close it early."""
    return json.dumps(value, ensure_ascii=False).replace("</", "<\\/")


def _table_html(frame: pd.DataFrame, caption: str) -> str:
    body = frame.to_html(index=False, escape=True, border=0, na_rep="")
    head = f'<table class="data"><caption>{html.escape(caption)}</caption>'
    return re.sub(r"<table[^>]*>", lambda _: head, body, count=1)


_LOADER = """
(async () => {
  if (!("DecompressionStream" in window)) {  // an old browser: the tables still speak
    for (const chart of document.querySelectorAll(".chart")) {
      chart.textContent = document.body.dataset.noChart;
      chart.style.minHeight = "0";
    }
    document.body.dataset.drawn = "no";
    return;
  }
  const packed = document.getElementById("plotly-js").textContent.trim();
  const bytes = Uint8Array.from(atob(packed), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const code = await new Response(stream).text();
  const script = document.createElement("script");
  script.textContent = code;
  document.head.appendChild(script);
  for (const spec of document.querySelectorAll("script.figure")) {
    const fig = JSON.parse(spec.textContent);
    await Plotly.newPlot(spec.dataset.target, fig.data, fig.layout, fig.config);
  }
  document.body.dataset.drawn = "yes";
})();
"""

_STYLE = """
body { font-family: "Noto Sans KR", "Apple SD Gothic Neo", "Malgun Gothic", sans-serif;
       max-width: 960px; margin: 2rem auto; padding: 0 1rem; color: #1f1f1f; }
figure { margin: 2rem 0; }
.chart { width: 100%; min-height: 420px; }
.summary { font-weight: 600; }
details { margin: 0.5rem 0 1.5rem; }
table.data { border-collapse: collapse; font-size: 0.85rem; }
table.data th, table.data td { border: 1px solid #c8c8c8; padding: 2px 8px; text-align: left; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
"""


def view_html(
    title: str,
    charts: list[ExportedChart],
    lang: str = "en",
    intro: str = "",
    table_label: str = "Data table",
    no_chart: str = "This browser cannot draw the chart: its numbers are in the table below.",
) -> str:
    """The whole file: ``title``, ``intro`` (a line saying what was read), then each chart
    with its caption, summary, drawing and (under ``table_label``) its plotted numbers;
    ``no_chart`` stands in a chart's place in a browser too old to unpack plotly.js."""
    parts = []
    for i, chart in enumerate(charts):
        fig = go.Figure(chart.figure)
        # Streamlit's own template makes room for the tick labels; plotly's alone does not
        fig.update_xaxes(automargin=True)
        fig.update_yaxes(automargin=True)
        spec = {**json.loads(fig.to_json()), "config": {"displaylogo": False, "responsive": True}}
        table = figure_table(fig, chart.headers)
        caption = _plain(chart.caption)
        caption = f"<p class='caption'>{html.escape(caption)}</p>" if caption else ""
        parts.append(
            f"""<figure aria-labelledby="summary-{i}">
{caption}
<p class="summary" id="summary-{i}">{html.escape(chart.summary)}</p>
<div class="chart" id="chart-{i}" role="img" aria-label="{html.escape(chart.summary)}"></div>
<script class="figure" type="application/json" data-target="chart-{i}">{_script_json(spec)}</script>
<details><summary>{html.escape(table_label)}</summary>
{_table_html(table, chart.summary)}
</details>
</figure>"""
        )
    body = "\n".join(parts)
    return f"""<!DOCTYPE html>
<html lang="{html.escape(lang)}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_STYLE}</style>
</head>
<body data-no-chart="{html.escape(no_chart)}">
<main>
<h1>{html.escape(title)}</h1>
<p class="intro">{html.escape(intro)}</p>
{body}
</main>
<script id="plotly-js" type="application/octet-stream">{_plotly_js_gzipped()}</script>
<script>{_LOADER}</script>
</body>
</html>
"""
