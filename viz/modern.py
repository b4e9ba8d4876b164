"""Figures for "Attention since 2017": length generalisation, q·k against distance, RoPE's
rotation, key/value-cache sizes, FlashAttention's online softmax, attention sinks.

Pure functions (numbers in, plotly Figure or DataFrame out); every visible string is passed
in by the caller, already translated, and escaped here before plotly reads it.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.attention import PROBABILITY_SCALE, _as_array
from viz.concepts import SERIES_COLOURS
from viz.memo import memo_figure

SCHEME_ORDER = ("sinusoidal", "learned", "rope", "alibi", "none")
SCHEME_COLOURS = dict(zip(SCHEME_ORDER, SERIES_COLOURS))


def _esc(text: str) -> str:
    return html.escape(str(text or ""), quote=False)


def _legend_top(fig: go.Figure, height: int, top: int = 40, above: int = 6) -> go.Figure:
    """The legend in one row above the plot, ``above`` pixels over it (subplot titles sit in
    the first ~24 px, so figures with them pass more)."""
    y = 1 + above / max(1, height - top - 10)  # paper coordinates of the plot area
    fig.update_layout(
        height=height,
        margin=dict(l=10, r=10, t=top, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=y, xanchor="left", x=0),
    )
    return fig


# --- positions -----------------------------------------------------------------------------------


@memo_figure
def length_figure(
    rows: list[dict],
    *,
    metric: str,
    train_max_len: int,
    names: dict[str, str],
    x_title: str,
    y_title: str,
    trained_label: str,
    height: int = 380,
) -> go.Figure:
    """Accuracy against sequence length, one line per scheme, the trained lengths shaded."""
    frame = pd.DataFrame(rows)
    fig = go.Figure()
    lengths = sorted(frame["length"].unique()) if len(frame) else [1]
    fig.add_vrect(
        x0=min(lengths[0], 1) - 0.5,
        x1=train_max_len + 0.5,
        fillcolor="#2b6cb0",
        opacity=0.1,
        line_width=0,
        annotation_text=_esc(trained_label),
        annotation_position="top left",
    )
    for scheme in [s for s in SCHEME_ORDER if s in set(frame.get("scheme", []))]:
        part = frame[frame["scheme"] == scheme].sort_values("length")
        fig.add_trace(
            go.Scatter(
                x=part["length"],
                y=part[metric],
                name=_esc(names.get(scheme, scheme)),
                mode="lines+markers",
                line=dict(color=SCHEME_COLOURS[scheme]),
                hovertemplate="%{x}: %{y:.3f}<extra>"
                + _esc(names.get(scheme, scheme))
                + "</extra>",
            )
        )
    fig.update_xaxes(title=_esc(x_title), tickmode="array", tickvals=lengths)
    fig.update_yaxes(title=_esc(y_title), range=[0, 1.02])
    return _legend_top(fig, height)


def length_table(rows: list[dict], *, metric: str, names: dict[str, str], length_header: str):
    """Schemes as rows, lengths as columns: the numbers behind ``length_figure``."""
    frame = pd.DataFrame(rows)
    table = frame.pivot(index="scheme", columns="length", values=metric)
    table = table.reindex([s for s in SCHEME_ORDER if s in table.index])
    table.index = [names.get(s, s) for s in table.index]
    table.columns = [f"{length_header} {c}" for c in table.columns]
    return table


@memo_figure
def qk_distance_figure(
    rows: list[dict],
    *,
    names: dict[str, str],
    series_names: dict[str, str],
    x_title: str,
    y_title: str,
    height: int = 340,
) -> go.Figure:
    """One panel per scheme: the score of a word with itself Δ tokens back, one line per
    query position (or ALiBi head); lines that coincide depend on distance alone."""
    frame = pd.DataFrame(rows)
    schemes = [s for s in SCHEME_ORDER if s in set(frame["scheme"])]
    fig = make_subplots(
        rows=1,
        cols=len(schemes),
        horizontal_spacing=0.04,
        subplot_titles=[_esc(names.get(s, s)) for s in schemes],
    )
    dashes = ("solid", "dash", "dot")
    for col, scheme in enumerate(schemes, start=1):
        part = frame[frame["scheme"] == scheme]
        for i, series in enumerate(dict.fromkeys(part["series"])):
            line = part[part["series"] == series]
            label = series_names.get(series, series)
            fig.add_trace(
                go.Scatter(
                    x=line["distance"],
                    y=line["score"],
                    mode="lines",
                    name=_esc(label),
                    legendgroup=_esc(label),
                    showlegend=col == 1 or scheme == "alibi",
                    line=dict(color=SCHEME_COLOURS[scheme], dash=dashes[i % len(dashes)]),
                    hovertemplate="Δ=%{x}: %{y:.2f}<extra>" + _esc(label) + "</extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title=_esc(x_title), row=1, col=col)
    fig.update_yaxes(title=_esc(y_title), row=1, col=1)
    return _legend_top(fig, height, top=72, above=30)


@memo_figure
def rope_rotation_figure(
    pairs: dict[str, list[dict]], *, position_label: str, height: int = 380
) -> go.Figure:
    """Each pair of dimensions as a point on the unit circle, turned by p·θ_i at position p:
    a fast pair spins, a slow one barely moves. ``pairs``: legend name -> rope_rotation rows."""
    fig = go.Figure()
    circle = np.linspace(0, 2 * math.pi, 181)
    fig.add_trace(
        go.Scatter(
            x=np.cos(circle),
            y=np.sin(circle),
            mode="lines",
            hoverinfo="skip",
            line=dict(color="#ccc"),
            showlegend=False,
        )
    )
    for i, (name, rows) in enumerate(pairs.items()):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        xs, ys = [r["x"] for r in rows], [r["y"] for r in rows]
        labels = [str(r["position"]) for r in rows]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers+text+lines",
                text=labels,
                textposition="top center",
                name=_esc(name),
                marker=dict(color=colour, size=9),
                line=dict(color=colour, width=1),
                customdata=[r["angle"] for r in rows],
                hovertemplate=_esc(position_label)
                + " %{text}: %{customdata:.2f} rad<extra>"
                + _esc(name)
                + "</extra>",
            )
        )
        last = rows[-1]
        fig.add_annotation(
            x=last["x"],
            y=last["y"],
            ax=0,
            ay=0,
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=2,
            arrowcolor=colour,
        )
    fig.update_xaxes(range=[-1.3, 1.3], zeroline=True, showgrid=False, title="x₂ᵢ")
    fig.update_yaxes(
        range=[-1.3, 1.3],
        zeroline=True,
        showgrid=False,
        title="x₂ᵢ₊₁",
        scaleanchor="x",
        scaleratio=1,
    )
    return _legend_top(fig, height)


# --- key/value cache -----------------------------------------------------------------------------


def human_bytes(n: float) -> str:
    """1536 -> "1.5 KiB": powers of two, as memory is sold."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


@memo_figure
def kv_bytes_figure(
    sizes: dict[str, float], *, y_title: str, title: str = "", height: int = 300
) -> go.Figure:
    """Bars of cache bytes (MHA / GQA / MQA), each labelled in KiB / MiB / GiB."""
    names = list(sizes)
    fig = go.Figure(
        go.Bar(
            x=[_esc(n) for n in names],
            y=list(sizes.values()),
            text=[human_bytes(v) for v in sizes.values()],
            textposition="outside",
            marker_color=[SERIES_COLOURS[i % len(SERIES_COLOURS)] for i in range(len(names))],
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    )
    top = max(sizes.values()) if sizes else 1
    fig.update_yaxes(title=_esc(y_title), range=[0, top * 1.2])
    fig.update_layout(
        title=dict(text=_esc(title)) if title else None,
        height=height,
        margin=dict(l=10, r=10, t=40 if title else 20, b=10),
    )
    return fig


@memo_figure
def cache_rows_figure(
    keys: np.ndarray, *, tokens: list[str], title: str, x_title: str, height: int | None = None
) -> go.Figure:
    """One layer's cached keys for one head [steps, d_k]: one row per decoded token, the
    newest at the bottom, highlighted."""
    from viz.attention import token_label

    z = _as_array(keys)
    n = z.shape[0]
    bound = float(np.abs(z).max()) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=z,
            zmin=-bound,
            zmax=bound,
            zmid=0,
            colorscale="RdBu_r",
            showscale=False,
            hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.add_shape(
        type="rect",
        x0=-0.5,
        x1=z.shape[1] - 0.5,
        y0=n - 1.5,
        y1=n - 0.5,
        line=dict(color="#d62728", width=2),
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(n)),
        ticktext=[token_label(t) for t in tokens],
        range=[n - 0.5, -0.5],
    )
    fig.update_xaxes(title=_esc(x_title), showticklabels=False)
    fig.update_layout(
        title=dict(text=_esc(title), font=dict(size=13)),
        height=height or 120 + 18 * n,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


# --- FlashAttention's online softmax -------------------------------------------------------------


def online_steps_frame(steps: list, columns: dict[str, str]) -> pd.DataFrame:
    """One row per tile for one query: keys seen, max in the tile, running max before and
    after, the rescale factor exp(m_old - m_new), the running sum, the partial output.

    ``columns`` maps "tile", "keys", "tile_max", "m_old", "m_new", "rescale", "l", "partial".
    """
    out = []
    for i, s in enumerate(steps):
        partial = _as_array(s.partial).reshape(-1)
        out.append(
            {
                columns["tile"]: i + 1,
                columns["keys"]: f"{s.k_start}–{s.k_end - 1}",
                columns["tile_max"]: float(np.max(_as_array(s.scores))),
                columns["m_old"]: float(_as_array(s.m_old).reshape(-1)[0]),
                columns["m_new"]: float(_as_array(s.m_new).reshape(-1)[0]),
                columns["rescale"]: float(_as_array(s.rescale).reshape(-1)[0]),
                columns["l"]: float(_as_array(s.l).reshape(-1)[0]),
                columns["partial"]: "[" + ", ".join(f"{x:.3f}" for x in partial) + "]",
            }
        )
    return pd.DataFrame(out)


@memo_figure
def online_softmax_figure(
    steps: list,
    scores,
    final_out,
    *,
    upto: int,
    titles: tuple[str, str],
    key_title: str,
    dim_title: str,
    max_label: str,
    final_label: str,
    partial_label: str,
    height: int = 360,
) -> go.Figure:
    """Left: every key's score, the tiles seen so far in colour, and the running max after
    each of them as a step line. Right: the partial output after tile ``upto`` beside the
    ordinary attention output (they meet at the last tile)."""
    s = _as_array(scores).reshape(-1)
    shown = steps[: max(1, min(upto, len(steps)))]
    seen_to = shown[-1].k_end
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.6, 0.4],
        horizontal_spacing=0.1,
        subplot_titles=[_esc(t) for t in titles],
    )
    colours = [SERIES_COLOURS[(i % (len(SERIES_COLOURS) - 1)) + 1] for i in range(len(steps))]
    bar_colours = ["#d0d0d0"] * len(s)
    for i, st in enumerate(steps):
        for j in range(st.k_start, st.k_end):
            if j < seen_to:
                bar_colours[j] = colours[i]
    fig.add_trace(
        go.Bar(
            x=list(range(len(s))),
            y=s,
            marker_color=bar_colours,
            showlegend=False,
            hovertemplate="%{x}: %{y:.3f}<extra></extra>",
        ),
        row=1,
        col=1,
    )
    mx, my = [], []
    for st in shown:
        m = float(_as_array(st.m_new).reshape(-1)[0])
        mx += [st.k_start - 0.5, st.k_end - 0.5]
        my += [m, m]
    fig.add_trace(
        go.Scatter(
            x=mx,
            y=my,
            mode="lines",
            name=_esc(max_label),
            line=dict(color="#000", dash="dash", shape="hv"),
        ),
        row=1,
        col=1,
    )
    partial = _as_array(shown[-1].partial).reshape(-1)
    final = _as_array(final_out).reshape(-1)
    dims = list(range(len(final)))
    fig.add_trace(
        go.Bar(x=dims, y=final, name=_esc(final_label), marker_color="#999"), row=1, col=2
    )
    fig.add_trace(
        go.Bar(x=dims, y=partial, name=_esc(partial_label), marker_color="#1f77b4"), row=1, col=2
    )
    fig.update_xaxes(title=_esc(key_title), row=1, col=1)
    fig.update_xaxes(title=_esc(dim_title), tickmode="array", tickvals=dims, row=1, col=2)
    fig.update_layout(barmode="group")
    return _legend_top(fig, height, top=72, above=30)


@memo_figure
def memory_figure(
    memory: dict[str, list[float]],
    *,
    names: dict[str, str],
    x_title: str,
    y_title: str,
    height: int = 340,
) -> go.Figure:
    """Peak bytes against n on log-log axes: measured points; dashed, ordinary attention's
    formula and (under the tiled points) the output alone. ``names`` maps "full" and "tiled"
    to legend names."""
    fig = go.Figure()
    for i, key in enumerate(("full", "tiled")):
        colour = SERIES_COLOURS[i]
        fig.add_trace(
            go.Scatter(
                x=memory["n"],
                y=memory[f"{key}_measured"],
                mode="markers",
                name=_esc(names[key]),
                marker=dict(color=colour, size=9),
                text=[human_bytes(v) for v in memory[f"{key}_measured"]],
                hovertemplate="n=%{x}: %{text}<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=memory["n"],
                y=memory["full_formula" if key == "full" else "output_bytes"],
                mode="lines",
                showlegend=False,
                line=dict(color=colour, dash="dash"),
                hoverinfo="skip",
            )
        )
    # One label a decade on y and the measured n on x: plotly's default minor labels on
    # log axes read as a column of "1"s.
    fig.update_xaxes(
        title=_esc(x_title),
        type="log",
        tickvals=list(memory["n"]),
        ticktext=[str(int(n)) for n in memory["n"]],
    )
    fig.update_yaxes(title=_esc(y_title), type="log", dtick=1, exponentformat="SI")
    return _legend_top(fig, height)


# --- attention sinks -----------------------------------------------------------------------------


@memo_figure
def sink_figure(
    share,
    *,
    sink_names: list[str],
    layer_title: str,
    head_title: str,
    value_name: str,
    height: int = 300,
) -> go.Figure:
    """[layers, heads, sinks] shares as one heatmap per sink, layers as rows (numbered from 1,
    like the explorer's), colour range fixed to [0, 1]."""
    z = _as_array(share)
    n_layers, n_heads, n_sinks = z.shape
    layers, heads = list(range(1, n_layers + 1)), list(range(1, n_heads + 1))  # as people count
    fig = make_subplots(
        rows=1, cols=n_sinks, horizontal_spacing=0.06, subplot_titles=[_esc(s) for s in sink_names]
    )
    for i in range(n_sinks):
        fig.add_trace(
            go.Heatmap(
                z=z[..., i],
                zmin=0,
                zmax=1,
                colorscale=PROBABILITY_SCALE,
                showscale=i == n_sinks - 1,
                x=heads,
                y=layers,
                texttemplate="%{z:.2f}",
                textfont=dict(size=9),
                colorbar=dict(thickness=12),
                hovertemplate=_esc(layer_title)
                + " %{y} · "
                + _esc(head_title)
                + " %{x}<br>"
                + _esc(value_name)
                + ": %{z:.3f}<extra></extra>",
            ),
            row=1,
            col=i + 1,
        )
        fig.update_xaxes(title=_esc(head_title), tickmode="array", tickvals=heads, row=1, col=i + 1)
        fig.update_yaxes(
            tickmode="array",
            tickvals=layers,
            autorange="reversed",
            title=_esc(layer_title) if i == 0 else None,
            row=1,
            col=i + 1,
        )
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=40, b=10))
    return fig
