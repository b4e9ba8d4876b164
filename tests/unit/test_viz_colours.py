"""Colours a reader needs: head colours apart under colour-vision deficiency, enough contrast.

Deuteranopia (the most common colour-vision deficiency) is simulated with Machado, Oliveira
and Fernandes (2009), severity 1, on linear RGB; distances are CIE76 ΔE*ab in CIELAB (D65).
"""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path

import numpy as np
import pytest

from ui.a11y import FOCUS_COLOUR
from viz.attention import PROBABILITY_SCALE, attention_heatmap
from viz.headview import HEAD_COLOURS, head_colour

ROOT = Path(__file__).resolve().parents[2]

MACHADO = {
    "deuteranopia": np.array(
        [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.011820, 0.042940, 0.968881],
        ]
    ),
    "protanopia": np.array(
        [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ]
    ),
}
MIN_DELTA_E = 15.0  # clearly different at a glance (a just-noticeable difference is ~2.3)
MAX_HEADS = 12  # MiniLM's 12 heads, the most of any model the lab ships


def linear(hex_colour: str) -> np.ndarray:
    c = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def lab(rgb_linear: np.ndarray) -> np.ndarray:
    xyz = (
        np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
        @ rgb_linear
        / np.array([0.95047, 1.0, 1.08883])
    )
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def contrast(a: str, b: str) -> float:
    la, lb = (float(linear(c) @ [0.2126, 0.7152, 0.0722]) for c in (a, b))
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def mixed(fg: str, bg: str, alpha: float) -> str:
    f, g = (np.array([int(c[i : i + 2], 16) for i in (1, 3, 5)]) for c in (fg, bg))
    return "#" + "".join(f"{round(alpha * x + (1 - alpha) * y):02x}" for x, y in zip(f, g))


@pytest.mark.parametrize("deficiency", list(MACHADO))
def test_head_colours_stay_apart_under_simulated_colour_blindness(deficiency):
    colours = [head_colour(h) for h in range(MAX_HEADS)]
    assert len(set(colours)) == MAX_HEADS
    seen = {c: lab(np.clip(MACHADO[deficiency] @ linear(c), 0, 1)) for c in colours}
    close = [
        f"{a} ~ {b}: ΔE {np.linalg.norm(seen[a] - seen[b]):.1f}"
        for a, b in itertools.combinations(colours, 2)
        if np.linalg.norm(seen[a] - seen[b]) < MIN_DELTA_E
    ]
    assert close == []


def test_the_simulation_catches_a_red_green_pair():
    """The check can fail: D3's green and red, apart to normal vision, merge for a deuteranope."""
    green, red = "#2ca02c", "#d62728"
    sim = [lab(np.clip(MACHADO["deuteranopia"] @ linear(c), 0, 1)) for c in (green, red)]
    assert np.linalg.norm(lab(linear(green)) - lab(linear(red))) > 50
    assert np.linalg.norm(sim[0] - sim[1]) < MIN_DELTA_E


def test_head_colours_and_focus_ring_have_3_to_1_contrast_on_white():
    low = {c: round(contrast(c, "#ffffff"), 2) for c in HEAD_COLOURS if contrast(c, "#ffffff") < 3}
    assert low == {}
    assert contrast(FOCUS_COLOUR, "#ffffff") >= 3 and contrast(FOCUS_COLOUR, "#f0f2f6") >= 3


def test_attention_heatmaps_use_a_perceptually_uniform_scale():
    assert PROBABILITY_SCALE.lower().removesuffix("_r") in {"viridis", "cividis"}
    fig = attention_heatmap(np.eye(3), list("abc"), list("abc"))
    weights = [tr for tr in fig.data if len({c[1] for c in tr.colorscale}) > 1]
    assert len(weights) == 1
    from plotly.colors import sequential

    assert [c[1] for c in weights[0].colorscale][-1].lower() == sequential.Viridis[-1].lower()


def test_theme_text_contrast_is_at_least_4_5_to_1():
    theme = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]
    text, primary = theme["textColor"], theme["primaryColor"]
    assert contrast(text, "#ffffff") >= 4.5
    # captions are the text colour at 60 % opacity, on white and on the sidebar's grey
    for background in ("#ffffff", "#f0f2f6"):
        assert contrast(mixed(text, background, 0.6), background) >= 4.5
    # a selected pill: the primary colour on its own 10 % tint
    assert contrast(primary, mixed(primary, "#ffffff", 0.1)) >= 4.5


def test_curves_and_streamlit_themed_charts_use_the_same_safe_colours():
    from viz.concepts import SERIES_COLOURS, SERIES_DASHES

    theme = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["theme"]
    assert set(theme["chartCategoricalColors"]) <= set(HEAD_COLOURS)
    assert set(SERIES_COLOURS) <= set(HEAD_COLOURS)
    # two curves drawn side by side differ in pattern too, not in colour alone
    assert all(a != b for a, b in itertools.pairwise(SERIES_DASHES))


def test_the_drawn_token_is_marked_by_pattern_and_bold_label_not_by_colour_alone():
    from viz.decoding import next_token_figure

    before = np.array([0.5, 0.3, 0.2])
    fig = next_token_figure(
        before, before, ["a", "b", "c"], 1, k=3, names=("before", "after"), axis="p"
    )
    after, drawn = fig.data[1], fig.data[2]
    order = [int(i) for i in np.argsort(-before)]
    chosen_at = order.index(1)
    # the drawn token's bar is its own series, hatched, in the same slot as the others: the
    # legend's swatch shows the hatch whichever token was drawn (not only the most likely)
    assert list(drawn.x) == [chosen_at] and drawn.marker.pattern.shape == "/"
    assert drawn.offsetgroup == after.offsetgroup and not after.marker.pattern.shape
    assert after.y[chosen_at] is None and all(
        after.y[i] is not None for i in (0, 2) if i != chosen_at
    )
    ticks = fig.layout.xaxis.ticktext
    assert ticks[chosen_at] == "<b>b</b>" and [
        t for i, t in enumerate(ticks) if i != chosen_at
    ] == ["a", "c"]
