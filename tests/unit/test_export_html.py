"""A view as a file (viz.export_html): one HTML page that needs no network, carries each
chart's caption, summary and table, and stays under 5 MB at any input length."""

from __future__ import annotations

import re

import numpy as np
import torch

from model.analysis.view import AttentionView
from model.masks import MaskSpec
from model.trace import AttentionRecord, Trace, block_edges
from viz.attention import attention_heatmap, overview_heatmap
from viz.export_html import MAX_BYTES, ExportedChart, view_html


def causal_trace(n: int) -> Trace:
    gen = torch.Generator().manual_seed(0)
    q = [torch.randn(2, n, 8, generator=gen)]
    k = [torch.randn(2, n, 8, generator=gen)]
    record = AttentionRecord(q, k, MaskSpec(n, n, causal=True))
    return Trace([], [f"w{i}" for i in range(n)], records={"decoder": record})


def test_a_short_views_file_holds_its_chart_summary_caption_and_table_and_nothing_to_fetch():
    view = AttentionView(causal_trace(6), "decoder", aggregate="mean")
    q, k = view.tokens
    fig = attention_heatmap(view.map(), q, k, mask=view.mask(), title="Layer 1 · mean")
    page = view_html(
        "Attention Explorer · 레이어 1",
        [ExportedChart(fig, "Layer 1: 'w3' attends most to 'w0'", "A **caption** </script>")],
        lang="ko",
        intro="typed <b>text</b>",
        table_label="표로 보기",
    )
    assert page.startswith("<!DOCTYPE html>") and '<html lang="ko">' in page
    assert "Layer 1: &#x27;w3&#x27; attends most to &#x27;w0&#x27;" in page
    assert "A caption &lt;/script&gt;" in page and "typed &lt;b&gt;text&lt;/b&gt;" in page
    assert "<summary>표로 보기</summary>" in page
    assert re.search(r"<td>w5</td>", page)  # the table: one row a cell, tokens named
    # nothing from elsewhere: no script, style or font by address
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "cdn." not in page.lower()
    # the figure's JSON cannot end its own <script> element
    figures = re.findall(r'<script class="figure"[^>]*>(.*?)</script>', page, flags=re.S)
    assert len(figures) == 1 and "</" not in figures[0]


def test_a_long_inputs_overview_and_window_fit_in_under_5_mb():
    """4,096 tokens: the 256 x 256 overview and a 256 x 256 window, each with its table."""
    rng = np.random.default_rng(0)
    edges = block_edges(4096, 256)
    overview = overview_heatmap(np.tril(rng.random((256, 256))), edges, edges, title="overview")
    tokens = [f"token{i}" for i in range(4096)]
    window = attention_heatmap(
        rng.random((256, 256)), tokens[:256], tokens[1000:1256], start=(0, 1000)
    )
    page = view_html(
        "long",
        [ExportedChart(overview, "overview said", "caption"), ExportedChart(window, "window")],
    )
    assert len(page.encode("utf-8")) < MAX_BYTES
    assert page.count('<table class="data">') == 2
