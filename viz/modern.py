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


QK_PANELS_A_ROW = 3  # a phone's 390 px hold three panels' ticks; five ran together


def _legend_top(
    fig: go.Figure, height: int, top: int = 40, above: int = 6, bottom: int = 10
) -> go.Figure:
    """The legend in one row above the plot, ``above`` pixels over it (subplot titles sit in
    the first ~24 px, so figures with them pass more)."""
    y = 1 + above / max(1, height - top - bottom)  # paper coordinates of the plot area
    fig.update_layout(
        height=height,
        margin=dict(l=10, r=10, t=top, b=bottom),
        legend=dict(orientation="h", yanchor="bottom", y=y, xanchor="left", x=0),
    )
    return fig


# --- positions -----------------------------------------------------------------------------------


def length_summary(rows: list[dict], metric: str) -> pd.DataFrame:
    """Per scheme and length, over the seeds: mean, min, max and how many seeds (columns
    scheme, length, mean, low, high, seeds). Rows without a seed count as one seed."""
    frame = pd.DataFrame(rows)
    if "seed" not in frame:
        frame["seed"] = 0
    grouped = frame.groupby(["scheme", "length"])[metric]
    out = grouped.agg(["mean", "min", "max", "count"]).reset_index()
    return out.rename(columns={"min": "low", "max": "high", "count": "seeds"})


def _rgba(colour: str, alpha: float) -> str:
    colour = colour.lstrip("#")
    r, g, b = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


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
    """Accuracy against sequence length: per scheme the mean over seeds as a line and the
    range (lowest to highest seed) as a band around it; the trained lengths shaded."""
    summary = length_summary(rows, metric) if rows else pd.DataFrame()
    fig = go.Figure()
    lengths = sorted(summary["length"].unique()) if len(summary) else [1]
    fig.add_vrect(
        x0=min(lengths[0], 1) - 0.5,
        x1=train_max_len + 0.5,
        fillcolor="#2b6cb0",
        opacity=0.1,
        line_width=0,
        annotation_text=_esc(trained_label),
        annotation_position="top left",
    )
    present = set(summary["scheme"]) if len(summary) else set()
    for scheme in [s for s in SCHEME_ORDER if s in present]:
        part = summary[summary["scheme"] == scheme].sort_values("length")
        name = _esc(names.get(scheme, scheme))
        colour = SCHEME_COLOURS[scheme]
        if int(part["seeds"].max()) > 1:  # the range over seeds, as a band
            fig.add_trace(
                go.Scatter(
                    x=list(part["length"]) + list(part["length"])[::-1],
                    y=list(part["high"]) + list(part["low"])[::-1],
                    fill="toself",
                    mode="lines",
                    fillcolor=_rgba(colour, 0.15),
                    line=dict(width=0),
                    hoverinfo="skip",
                    showlegend=False,
                    legendgroup=name,
                )
            )
        fig.add_trace(
            go.Scatter(
                x=part["length"],
                y=part["mean"],
                name=name,
                legendgroup=name,
                mode="lines+markers",
                line=dict(color=colour),
                customdata=np.stack([part["low"], part["high"]], axis=-1),
                hovertemplate="%{x}: %{y:.3f} (%{customdata[0]:.2f}–%{customdata[1]:.2f})"
                + "<extra>"
                + name
                + "</extra>",
            )
        )
    fig.update_xaxes(title=_esc(x_title), tickmode="array", tickvals=lengths)
    fig.update_yaxes(title=_esc(y_title), range=[0, 1.02])
    return _legend_top(fig, height)


def length_table(rows: list[dict], *, metric: str, names: dict[str, str], length_header: str):
    """Schemes as rows, lengths as columns: "mean (lowest–highest seed)", the numbers behind
    ``length_figure``."""
    summary = length_summary(rows, metric)

    def cell(r) -> str:
        if r["seeds"] > 1:
            return f"{r['mean']:.2f} ({r['low']:.2f}–{r['high']:.2f})"
        return f"{r['mean']:.2f}"

    summary["cell"] = summary.apply(cell, axis=1)
    table = summary.pivot(index="scheme", columns="length", values="cell")
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
    height: int = 300,
) -> go.Figure:
    """One panel per scheme, three to a row: the score of a word with itself Δ tokens back,
    one line per query position (or ALiBi head); lines that coincide depend on distance alone.

    Three panels a row, not all five in one: on a phone five were 60 px wide each, their
    rotated distance ticks ran together and the legend lay on the panels' titles. ``height``
    is a row's."""
    frame = pd.DataFrame(rows)
    schemes = [s for s in SCHEME_ORDER if s in set(frame["scheme"])]
    n_cols = min(QK_PANELS_A_ROW, len(schemes))
    n_rows = math.ceil(len(schemes) / n_cols)
    fig = make_subplots(
        rows=n_rows,
        cols=n_cols,
        horizontal_spacing=0.08,
        vertical_spacing=0.5 / n_rows,  # a row's ticks, then the next row's titles (3 lines)
        subplot_titles=[_esc(names.get(s, s)) for s in schemes],
    )
    dashes = ("solid", "dash", "dot")
    for k, scheme in enumerate(schemes):
        row, col = k // n_cols + 1, k % n_cols + 1
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
                    showlegend=k == 0 or scheme == "alibi",
                    line=dict(color=SCHEME_COLOURS[scheme], dash=dashes[i % len(dashes)]),
                    hovertemplate="Δ=%{x}: %{y:.2f}<extra>" + _esc(label) + "</extra>",
                ),
                row=row,
                col=col,
            )
        # the distance named once a column, under its lowest panel; a few level ticks
        lowest = k + n_cols >= len(schemes)
        fig.update_xaxes(
            title=_esc(x_title) if lowest else None, nticks=4, tickangle=0, row=row, col=col
        )
        fig.update_yaxes(nticks=5, row=row, col=col)
    for row in range(1, n_rows + 1):
        fig.update_yaxes(title=_esc(y_title), row=row, col=1)
    # the legend above the first row's titles, with room for a second line on a phone; the
    # last row's distance title (two lines in a third of a phone) below it
    return _legend_top(fig, height * n_rows, top=140, above=52, bottom=70)


def _spaced_labels(angles: list[float], gap: float = 0.35) -> list[bool]:
    """Which points to label so labels do not pile up: the first, the last, and any point at
    least ``gap`` radians (around the circle) from the last one labelled."""
    keep, last = [], None
    for a in angles:
        if last is None:
            keep.append(True)
            last = a
            continue
        d = abs((a - last + math.pi) % (2 * math.pi) - math.pi)
        keep.append(d >= gap)
        if d >= gap:
            last = a
    if len(angles) > 1 and not keep[-1]:
        # the last position is always labelled; drop the labelled point it would sit on
        for j in range(len(angles) - 2, 0, -1):
            if keep[j]:
                d = abs((angles[-1] - angles[j] + math.pi) % (2 * math.pi) - math.pi)
                if d < gap:
                    keep[j] = False
                break
        keep[-1] = True
    return keep


@memo_figure
def rope_rotation_figure(
    pairs: dict[str, list[dict]],
    *,
    position_label: str,
    radii: tuple[float, ...] = (1.0, 0.62),
    height: int = 380,
) -> go.Figure:
    """Each pair of dimensions as a point on a circle, turned by p·θ_i at position p: a fast
    pair spins, a slow one barely moves. ``pairs``: legend name -> rope_rotation rows.

    Rotation keeps lengths (every point is at distance 1); the second pair is drawn on a
    smaller circle (``radii``) only so that its points, labels and arrow do not sit on the
    first pair's. Labels that would pile up are left out (hover shows every position)."""
    fig = go.Figure()
    circle = np.linspace(0, 2 * math.pi, 181)
    for i, (name, rows) in enumerate(pairs.items()):
        r = radii[i % len(radii)]
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        fig.add_trace(
            go.Scatter(
                x=r * np.cos(circle),
                y=r * np.sin(circle),
                mode="lines",
                hoverinfo="skip",
                line=dict(color="#ccc"),
                showlegend=False,
            )
        )
        xs, ys = [r * row["x"] for row in rows], [r * row["y"] for row in rows]
        angles = [row["angle"] for row in rows]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="markers+lines",
                text=[str(row["position"]) for row in rows],
                name=_esc(name),
                marker=dict(color=colour, size=9),
                line=dict(color=colour, width=1),
                customdata=angles,
                hovertemplate=_esc(position_label)
                + " %{text}: %{customdata:.2f} rad<extra>"
                + _esc(name)
                + "</extra>",
            )
        )
        keep = _spaced_labels(angles)
        out = 0.16 if i == 0 else 0.13  # labels outside each circle, off the arrow
        fig.add_trace(
            go.Scatter(
                x=[(r + out) * math.cos(a) for a, k in zip(angles, keep) if k],
                y=[(r + out) * math.sin(a) for a, k in zip(angles, keep) if k],
                text=[str(row["position"]) for row, k in zip(rows, keep) if k],
                mode="text",
                textfont=dict(color=colour, size=12),
                hoverinfo="skip",
                showlegend=False,
            )
        )
        fig.add_annotation(
            x=xs[-1],
            y=ys[-1],
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
    fig.update_xaxes(range=[-1.35, 1.35], zeroline=True, showgrid=False, title="x₂ᵢ")
    fig.update_yaxes(
        range=[-1.35, 1.35],
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


def byte_ticks(top: float, most: int = 5) -> list[float]:
    """Up to ``most`` + 1 round tick values from 0 to ``top`` in the unit human_bytes would
    use (1, 2, 2.5 or 5 times a power of ten of KiB, MiB, ...), so each label reads exactly."""
    if top <= 0:
        return [0.0]
    unit = 1024 ** min(4, max(0, int(math.log(top, 1024)))) if top >= 1 else 1
    span = top / unit
    base = 10 ** math.floor(math.log10(span / most)) if span / most > 0 else 1
    step = next(m * base for m in (1, 2, 2.5, 5, 10) if span / (m * base) <= most)
    if unit == 1:
        step = max(1, round(step))
    return [i * step * unit for i in range(int(span / step) + 1)]


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
            text=[human_bytes(size) for size in sizes.values()],
            textposition="outside",
            marker_color=[SERIES_COLOURS[i % len(SERIES_COLOURS)] for i in range(len(names))],
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    )
    top = max(sizes.values()) if sizes else 1
    ticks = byte_ticks(top * 1.2)
    # Byte ticks of our own: plotly's SI suffixes read "1B" for a billion, beside "4.0 GiB".
    fig.update_yaxes(
        title=_esc(y_title),
        range=[0, top * 1.2],
        tickmode="array",
        tickvals=ticks,
        ticktext=[human_bytes(tick) for tick in ticks],
    )
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


def signed(x: float, digits: int = 3) -> str:
    """A number as people write it: a real minus sign, −∞ for minus infinity (not the
    "-Infinity" a table prints), every value with the same ``digits`` decimals."""
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
    text = f"{x:.{digits}f}"
    if float(text) == 0:
        text = f"{0:.{digits}f}"  # no "-0.000"
    return text.replace("-", "−")


def online_steps_frame(steps: list, columns: dict[str, str]) -> pd.DataFrame:
    """One row per tile for one query: keys seen, max in the tile, running max before and
    after, the rescale factor exp(m_old - m_new), the running sum, the partial output.

    ``columns`` maps "tile", "keys", "tile_max", "m_old", "m_new", "rescale", "l", "partial".
    Numbers are text with three decimals each; the first tile's running max before is −∞.
    """
    out = []
    for i, s in enumerate(steps):
        partial = _as_array(s.partial).reshape(-1)
        out.append(
            {
                columns["tile"]: i + 1,
                columns["keys"]: f"{s.k_start}–{s.k_end - 1}",
                columns["tile_max"]: signed(float(np.max(_as_array(s.scores)))),
                columns["m_old"]: signed(float(_as_array(s.m_old).reshape(-1)[0])),
                columns["m_new"]: signed(float(_as_array(s.m_new).reshape(-1)[0])),
                columns["rescale"]: signed(float(_as_array(s.rescale).reshape(-1)[0])),
                columns["l"]: signed(float(_as_array(s.l).reshape(-1)[0])),
                columns["partial"]: "[" + ", ".join(signed(float(x)) for x in partial) + "]",
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
                text=[human_bytes(size) for size in memory[f"{key}_measured"]],
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
    ticks = binary_log_ticks(
        [
            size
            for series in ("full_measured", "tiled_measured", "full_formula", "output_bytes")
            for size in memory.get(series, ())
            if size and size > 0
        ]
    )
    # memory in KiB / MiB / GiB (powers of two, as memory is sold), not SI's "k, M"
    fig.update_yaxes(
        title=_esc(y_title),
        type="log",
        tickvals=ticks,
        ticktext=[human_bytes(tick).replace(".0 ", " ") for tick in ticks],
    )
    return _legend_top(fig, height)


def binary_log_ticks(values, most: int = 6) -> list[float]:
    """Powers of two spanning ``values`` on a log axis, at most ``most`` + 1 of them, every
    one a whole number of B, KiB, MiB or GiB."""
    if not values:
        return []
    lo, hi = math.floor(math.log2(min(values))), math.ceil(math.log2(max(values)))
    step = 1
    while (hi - lo) / step > most:
        step += 1
    return [2.0**k for k in range(lo - lo % step, hi + step, step)]


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
