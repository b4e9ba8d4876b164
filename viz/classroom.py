"""The class dashboard's chart: how each item's answers are distributed, as stacked bars.

Pure: a per-item summary (classroom.Classroom.item_summary) in, a plotly Figure out.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

# Outcome -> colour: colour-blind-safe (Okabe-Ito), with 3:1 contrast against white.
OUTCOME_COLOURS = {
    "first_try": "#0072B2",
    "later": "#56B4E9",
    "wrong": "#D55E00",
    "untried": "#8C8C8C",
}


def outcome_counts(summary: pd.DataFrame) -> pd.DataFrame:
    """Per item: students right first try, right later, still wrong, not tried (they add up)."""
    return pd.DataFrame(
        {
            "first_try": summary["first_try_correct"],
            "later": summary["correct"] - summary["first_try_correct"],
            "wrong": summary["tried"] - summary["correct"],
            "untried": summary["students"] - summary["tried"],
        }
    ).astype(int)


def outcomes_figure(
    summary: pd.DataFrame, item_labels: list[str], outcome_labels: dict[str, str], title: str
) -> go.Figure:
    """Stacked horizontal bars, one per item (first item on top), one segment per outcome."""
    counts = outcome_counts(summary)
    y = list(range(len(counts)))
    fig = go.Figure()
    for outcome, colour in OUTCOME_COLOURS.items():
        fig.add_bar(
            x=counts[outcome],
            y=y,
            orientation="h",
            name=html.escape(outcome_labels[outcome]),
            marker_color=colour,
            hovertemplate="%{x}<extra>" + html.escape(outcome_labels[outcome]) + "</extra>",
        )
    fig.update_layout(
        barmode="stack",
        title=dict(text=html.escape(title)),
        height=120 + 34 * len(y),
        margin=dict(l=10, r=10, t=60, b=30),
        legend=dict(orientation="h", y=-0.15),
        xaxis=dict(title=None, dtick=1 if counts.sum(axis=1).max() <= 12 else None),
        yaxis=dict(
            tickmode="array",
            tickvals=y,
            ticktext=[html.escape(label) for label in item_labels],
            autorange="reversed",
        ),
    )
    return fig
