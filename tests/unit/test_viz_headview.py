"""The HTML views: typed text stays text, nothing is fetched, invisible lines are left out."""

import json
import re

import torch

from viz.headview import MIN_WEIGHT, head_colour, head_view_html, highlighted_text_html

EVIL = ["</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>", "&amp;"]


def embedded_data(page: str) -> dict:
    return json.loads(re.search(r"const D = (.*);\n", page).group(1))


def test_typed_text_cannot_break_out_of_the_script_or_become_markup():
    page = head_view_html(torch.rand(2, 3, 3), EVIL, EVIL, head_labels=["h0", "h1"], hint="hover")
    assert "</script><script>" not in page and "<img" not in page
    assert embedded_data(page)["q"] == EVIL  # still the literal text, shown via textContent
    assert "innerHTML" not in page
    text = highlighted_text_html(EVIL, [0.2, 0.5, 0.3], focus=1, caption="<b>c</b>")
    assert "<img" not in text and "<b>c</b>" not in text
    assert embedded_data(text)["tokens"] == EVIL


def test_views_load_nothing_from_the_network():
    page = head_view_html(torch.rand(1, 2, 2), ["a", "b"], ["a", "b"], head_labels=["h"], hint="")
    assert not re.search(r"(src|href)\s*=", page)
    assert "https://" not in page


def test_head_view_keeps_visible_links_with_their_weights_and_head_colours():
    a = torch.zeros(2, 2, 2)
    a[0, 0, 1] = 0.75
    a[1, 1, 0] = MIN_WEIGHT / 2  # too faint to draw
    data = embedded_data(head_view_html(a, ["x", "y"], ["x", "y"], head_labels=["A", "B"], hint=""))
    assert data["links"] == [[0, 0, 1, 750]]
    assert data["colours"] == [head_colour(0), head_colour(1)] and head_colour(0) != head_colour(1)
    assert data["active"] == [0, 1]
