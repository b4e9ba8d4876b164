"""Self-contained HTML views (no CDN, no network): the head view and highlighted text.

Data goes in as JSON inside the page and tokens are written with ``textContent``, so
whatever a person typed is shown literally and never parsed as HTML.
"""

from __future__ import annotations

import json

import numpy as np

# One colour per head, the same in every view. Chosen (greedy max-min) so that every pair
# stays apart under simulated deuteranopia and protanopia (Machado et al. 2009: ΔE*ab ≥ 19
# for these 12) and each line has 3:1 contrast on white (WCAG 1.4.11); the test is
# tests/unit/test_viz_colours.py.
HEAD_COLOURS = [
    "#2277bb",
    "#ff4400",
    "#0000ff",
    "#773333",
    "#009999",
    "#6666ff",
    "#889966",
    "#992200",
    "#772277",
    "#0044aa",
    "#ee3344",
    "#5511cc",
]

MIN_WEIGHT = 0.01  # lines below this are invisible anyway; leaving them out keeps pages small


def _json_for_script(data: object) -> str:
    """JSON that cannot close the <script> it sits in (a token may contain "</script>")."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _as_array(values) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float32)


def head_colour(head: int) -> str:
    return HEAD_COLOURS[head % len(HEAD_COLOURS)]


def head_view_html(
    attention,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    head_labels: list[str],
    hint: str,
    active_heads: list[int] | None = None,
) -> str:
    """Two token columns joined by lines, opacity = weight, colour = head ([H, Lq, Lk] in).

    Clicking a head's swatch switches it on or off; hovering a token keeps only its lines.
    """
    a = _as_array(attention)
    h, i, j = np.nonzero(a >= MIN_WEIGHT)
    links = np.stack([h, i, j, np.round(a[h, i, j] * 1000)], axis=1).astype(int).tolist()
    data = {
        "q": list(query_tokens),
        "k": list(key_tokens),
        "links": links,  # [head, query, key, weight x 1000]
        "heads": list(head_labels),
        "colours": [head_colour(x) for x in range(a.shape[0])],
        "active": list(range(a.shape[0])) if active_heads is None else list(active_heads),
        "hint": hint,
    }
    rows = max(len(query_tokens), len(key_tokens))
    return _HEAD_VIEW.replace("__DATA__", _json_for_script(data)).replace(
        "__HEIGHT__", str(_svg_height(rows))
    )


def _svg_height(rows: int) -> int:
    return 30 + 22 * rows


def head_view_height(n_tokens: int, n_heads: int) -> int:
    """Pixel height the whole head view needs (for st.components.v1.html): swatches + lines."""
    swatch_rows = 1 + n_heads // 8
    return _svg_height(n_tokens) + 26 * swatch_rows + 30


def highlighted_text_html(tokens: list[str], weights, *, focus: int | None, caption: str) -> str:
    """Tokens as a sentence, each shaded by its weight (0..1); the focus token outlined."""
    data = {
        "tokens": list(tokens),
        "weights": [round(float(w), 4) for w in _as_array(weights)],
        "focus": focus,
        "caption": caption,
    }
    return _HIGHLIGHT.replace("__DATA__", _json_for_script(data))


_STYLE = """
<style>
  body { margin: 0; font-family: "Source Sans Pro", "Noto Sans CJK KR", sans-serif;
         font-size: 14px; color: #31333f; background: transparent; }
  .tok { cursor: default; }
  .hint { font-size: 12px; color: #6b6b76; margin: 2px 0 6px; }
  .swatch { display: inline-flex; align-items: center; gap: 4px; margin: 0 8px 4px 0;
            cursor: pointer; user-select: none; font-size: 12px; }
  .swatch span.box { width: 12px; height: 12px; border-radius: 2px; display: inline-block; }
  .swatch.off { opacity: 0.35; }
  button.swatch { border: 0; background: none; font: inherit; font-size: 12px; color: inherit;
                  padding: 2px 4px; border-radius: 4px; }
  button.swatch:focus-visible { outline: 3px solid #1a5fb4; outline-offset: 1px; }
</style>
"""

_HEAD_VIEW = (
    "<!doctype html><html><head><meta charset='utf-8'>"
    + _STYLE
    + """</head><body>
<div id="heads"></div><div class="hint" id="hint"></div>
<svg id="view" width="100%" height="__HEIGHT__"></svg>
<script>
const D = __DATA__;
const NS = "http://www.w3.org/2000/svg";
const svg = document.getElementById("view");
const active = new Set(D.active);
let focus = null;  // {side: "q"|"k", index}
document.getElementById("hint").textContent = D.hint;

const headsDiv = document.getElementById("heads");
D.heads.forEach((label, h) => {
  // a button, so a keyboard reaches it (Tab) and toggles it (Enter, Space)
  const s = document.createElement("button");
  s.type = "button";
  s.className = "swatch" + (active.has(h) ? "" : " off");
  s.setAttribute("aria-pressed", String(active.has(h)));
  const box = document.createElement("span");
  box.className = "box"; box.style.background = D.colours[h];
  box.setAttribute("aria-hidden", "true");
  const text = document.createElement("span");
  text.textContent = label;
  s.append(box, text);
  s.addEventListener("click", () => {
    active.has(h) ? active.delete(h) : active.add(h);
    s.className = "swatch" + (active.has(h) ? "" : " off");
    s.setAttribute("aria-pressed", String(active.has(h)));
    draw();
  });
  headsDiv.appendChild(s);
});

function draw() {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const width = svg.getBoundingClientRect().width || 600;
  const leftX = Math.min(180, width * 0.3), rightX = width - leftX, top = 16, step = 22;
  for (const [h, i, j, w] of D.links) {
    if (!active.has(h)) continue;
    if (focus && ((focus.side === "q" && focus.index !== i) || (focus.side === "k" && focus.index !== j))) continue;
    const line = document.createElementNS(NS, "line");
    line.setAttribute("x1", leftX + 6); line.setAttribute("y1", top + i * step);
    line.setAttribute("x2", rightX - 6); line.setAttribute("y2", top + j * step);
    line.setAttribute("stroke", D.colours[h]);
    line.setAttribute("stroke-width", 2.2);
    line.setAttribute("stroke-opacity", w / 1000);
    svg.appendChild(line);
  }
  const column = (tokens, x, anchor, side) => tokens.forEach((tok, index) => {
    const t = document.createElementNS(NS, "text");
    t.setAttribute("x", x); t.setAttribute("y", top + index * step + 4);
    t.setAttribute("text-anchor", anchor);
    t.setAttribute("class", "tok");
    const on = focus && focus.side === side && focus.index === index;
    t.setAttribute("font-weight", on ? "700" : "400");
    t.textContent = tok;
    t.addEventListener("mouseenter", () => { focus = {side, index}; draw(); });
    t.addEventListener("mouseleave", () => { focus = null; draw(); });
    svg.appendChild(t);
  });
  column(D.q, leftX, "end", "q");
  column(D.k, rightX, "start", "k");
}
draw();
window.addEventListener("resize", draw);
</script></body></html>"""
)

_HIGHLIGHT = (
    "<!doctype html><html><head><meta charset='utf-8'>"
    + _STYLE
    + """<style>
  .sent { line-height: 2.1; display: flex; flex-wrap: wrap; }  /* no spaces between the
     tokens' spans, so a long text wraps only as flex items do */
  .w { padding: 2px 4px; margin: 0 2px; border-radius: 4px; white-space: pre; }
  .focus { outline: 2px solid #ff4b4b; }
</style></head><body>
<div class="sent" id="sent"></div><div class="hint" id="cap"></div>
<script>
const D = __DATA__;
const sent = document.getElementById("sent");
D.tokens.forEach((tok, i) => {
  const s = document.createElement("span");
  const w = D.weights[i];
  s.className = "w" + (i === D.focus ? " focus" : "");
  s.style.background = `rgba(31, 119, 180, ${Math.min(1, w).toFixed(3)})`;
  s.style.color = w > 0.55 ? "white" : "#31333f";
  s.title = w.toFixed(3);
  s.textContent = tok;
  sent.appendChild(s);
});
document.getElementById("cap").textContent = D.caption;
// On a narrow screen the text runs longer than its frame: keep the chosen token in view.
const chosen = sent.querySelector(".focus");
if (chosen && chosen.getBoundingClientRect().bottom > window.innerHeight) {
  // this frame's own scroll only (scrollIntoView would scroll the page around it too)
  window.scrollTo(0, chosen.offsetTop - window.innerHeight / 2);
}
</script></body></html>"""
)
