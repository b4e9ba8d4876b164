"""What the one page sweep (tests/e2e/test_accessibility.py) checks on each page it draws.

Every check takes a tab whose page is drawn and returns what a reader would find wrong, as
short lines (empty: nothing); none of them loads a page. A new check of every page belongs
here, added to the sweep's visit of the screen it is about, not in a new loop over the
pages: each page load costs seconds, a check on a loaded page milliseconds.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np

from model.hf.pieces import _bytes_to_unicode
from ui.i18n import LANGUAGES, load_catalog, translate

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 120_000
HANGUL = re.compile(r"[\uac00-\ud7a3]")

# The addresses test_browser_chrome.py checked with a state of their own (a typed sentence,
# MiniLM in the sidebar) where the plain address shows another: the sweep checks the chrome
# of these as well as of every page's plain address. url path -> query. The explorer's
# shows a mean of heads too, so its head list is disabled (the sweep checks that label's
# contrast on the same load).
CHROME_ADDRESSES = {
    "explorer": "model=en2ko&text=I+study+math+at+school&agg=mean",
    "concept_attention": "model=minilm",
    "concept_positional": "model=minilm",
    "concept_layernorm": "model=minilm",
    "concept_warmup": "model=minilm",
    "concept_family": "model=minilm",
}
# url path -> the catalog key of the page's title (its h1, in the page's language)
TITLES = {
    "": "home.title",
    "explorer": "explorer.title",
    "decoding": "decoding.title",
    "training": "training.title",
    "concept_attention": "concepts.attention.title",
    "concept_positional": "concepts.positional.title",
    "concept_layernorm": "concepts.layernorm.title",
    "concept_warmup": "concepts.warmup.title",
    "concept_family": "concepts.family.title",
    "practice": "practice.title",
    "find_the_bug": "bugs.title",
    "modern": "modern.title",
    "mechanisms": "mech.title",
}


# Opened at a page's own address (/explorer), Streamlit's frontend first probes
# /explorer/_stcore/health and /explorer/_stcore/host-config for a base path, gets 404,
# then falls back to the root. Those two misses are Streamlit's, not the app's.
_BASE_PATH_PROBE = re.compile(r"/[^/?]+/_stcore/(health|host-config)$")
_RESOURCE_404 = "Failed to load resource: the server responded with a status of 404 (Not Found)"


def _offsite(url: str, app_url: str) -> bool:
    return not url.startswith((app_url, "data:", "blob:", "about:"))


def watch_problems(tab, app_url: str):
    """``tab.problems``: console errors, uncaught exceptions and any request that leaves the
    app's own server (the lab must work offline), from now on; ``tab`` is returned."""
    tab.problems = []
    probes = []

    def on_console(msg) -> None:
        if msg.type != "error":
            return
        if msg.text == _RESOURCE_404 and probes:
            probes.pop()  # the console's echo of one base-path probe
            return
        tab.problems.append(msg.text)

    tab.on(
        "response",
        lambda r: r.status == 404 and _BASE_PATH_PROBE.search(r.url) and probes.append(r.url),
    )
    tab.on("console", on_console)
    tab.on("pageerror", lambda exc: tab.problems.append(f"uncaught: {exc}"))
    tab.on(
        "request",
        lambda req: _offsite(req.url, app_url) and tab.problems.append(f"off-site: {req.url}"),
    )
    return tab


class LanguageTab:
    """``tab(lang)``: one tab at ``address`` (a path with its query), loaded in the first
    language asked for, then switched in place by the sidebar's language control: a rerun of
    the same session, as a reader switches, not a second load. ``close()`` closes it."""

    def __init__(self, context, app_url: str, address: str):
        self.context, self.app_url, self.address = context, app_url, address
        self.page = None
        self.lang: str | None = None

    def __call__(self, lang: str):
        if self.page is None:
            self.page = watch_problems(self.context.new_page(), self.app_url)
            self.page.goto(f"{self.address}&lang={lang}")
        elif self.lang != lang:
            switch_language(self.page, lang)
        self.lang = lang
        return self.page

    def close(self) -> None:
        if self.page is not None:
            self.page.close()


def switch_language(tab, lang: str) -> None:
    """The sidebar's language control pressed on the page as it is."""
    tab.get_by_test_id("stSidebar").get_by_text(LANGUAGES[lang], exact=True).click()


# --- small screens: a phone, and 200 % zoom ---------------------------------------------

SMALL_TARGETS_JS = """() => {
  const out = [];
  const controls = 'button, a[href], [role=button], [role=tab], [role=switch], [role=radio], select';
  for (const el of document.querySelectorAll(controls)) {
    if (el.closest('[inert]') || !el.checkVisibility({ visibilityProperty: true, opacityProperty: true })) continue;
    if (el.matches('[data-testid=stSkipToContent]')) continue;  // seen only while focused
    if (el.closest('label') && el.matches('input')) continue;   // its label is the target
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    if (r.width < 23.5 || r.height < 23.5) {
      out.push(`${el.getAttribute('aria-label') || el.innerText.trim().slice(0, 30) || el.tagName} ${r.width.toFixed(0)}×${r.height.toFixed(0)}`);
    }
  }
  return [...new Set(out)];
}"""


# Text drawn in a chart (titles, legends, tick labels) that reaches past the chart's box,
# on any side: a title above the top edge is cut as surely as a label past the right one.
OVERFLOW_JS = """() => {
  const out = [];
  for (const chart of document.querySelectorAll('[data-testid=stPlotlyChart]')) {
    const box = chart.getBoundingClientRect();
    if (!box.width) continue;
    for (const text of chart.querySelectorAll('svg text')) {
      if (!text.textContent.trim() || !text.checkVisibility()) continue;
      const r = text.getBoundingClientRect();
      if (!r.width) continue;
      const over = Math.max(box.left - r.left, r.right - box.right, box.top - r.top, r.bottom - box.bottom);
      if (over > 1) {
        out.push(`${chart.getAttribute('aria-label').slice(0, 40)}: “${text.textContent.slice(0, 40)}” ${over.toFixed(0)} px`);
      }
    }
  }
  return out;
}"""


# Neighbouring tick labels of one axis that run into each other: level ones whose boxes
# overlap, rotated ones whose parallel lines lie closer than 0.6 of their font size (the
# letters touch; a rotated label's box is larger than its letters, so boxes cannot say). The
# FFN's 16 fixed ticks of 1,536 units and a five-panel row, at 390 px, ran together so.
TICKS_TOGETHER_JS = r"""() => {
  const out = [];
  for (const chart of document.querySelectorAll('[data-testid=stPlotlyChart]')) {
    if (!chart.getBoundingClientRect().width) continue;
    for (const axis of chart.querySelectorAll('g.xaxislayer-above, g.yaxislayer-above')) {
      const across = axis.classList.contains('xaxislayer-above');
      const labels = [...axis.querySelectorAll('text')].filter(t => t.textContent.trim()
        && t.checkVisibility() && t.getBoundingClientRect().width);
      for (let i = 1; i < labels.length; i++) {
        const [a, b] = [labels[i - 1], labels[i]];
        const [ra, rb] = [a.getBoundingClientRect(), b.getBoundingClientRect()];
        const turn = /rotate\((-?[\d.]+)/.exec(a.getAttribute('transform') || '');
        const angle = turn ? Math.abs(Number(turn[1])) % 180 : 0;
        let together;
        if (angle < 1) {
          together = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left) > 1
            && Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top) > 1;
        } else {
          const step = across ? Math.abs((rb.left + rb.right - ra.left - ra.right) / 2)
            : Math.abs((rb.top + rb.bottom - ra.top - ra.bottom) / 2);
          const size = parseFloat(getComputedStyle(a).fontSize) || 12;
          together = step * Math.sin(angle * Math.PI / 180) < 0.6 * size;
        }
        if (together) {
          out.push(`${chart.getAttribute('aria-label').slice(0, 40)}: “${a.textContent.slice(0, 20)}” and “${b.textContent.slice(0, 20)}”`);
          break;
        }
      }
    }
  }
  return out;
}"""


# A formula wider than its column that neither shows it scrolls nor can be scrolled by keyboard.
HIDDEN_SCROLL_JS = """() => [...document.querySelectorAll('[data-testid=stMain] .katex-display')]
  .filter(d => d.scrollWidth > d.clientWidth + 1)
  .filter(d => d.getAttribute('tabindex') !== '0' || !getComputedStyle(d).backgroundImage.includes('gradient'))
  .map(d => d.textContent.slice(0, 40))"""


# The content reflows (WCAG 1.4.10): the page does not scroll sideways, and nothing in the
# main column reaches past its right edge unless it sits in a region that scrolls by itself
# (a wide formula or table, with its cue; a chart's drawing is checked by OVERFLOW_JS) or is
# clipped by a box inside the column (a slider's hidden range input, at the end of its track).
REFLOW_JS = """() => {
  const out = [];
  const page = [document.scrollingElement, ...document.querySelectorAll(
    '[data-testid=stApp], [data-testid=stAppViewContainer], [data-testid=stMain], [data-testid=stMainBlockContainer]')];
  for (const el of page) {
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'hidden') {
      out.push(`the page scrolls sideways: ${el.getAttribute('data-testid') || el.tagName} ${el.scrollWidth} > ${el.clientWidth} px`);
    }
  }
  const main = document.querySelector('[data-testid=stMain]');
  const edge = main.getBoundingClientRect().right;
  const scrollsItself = (el) => {
    for (let a = el.parentElement; a && a !== main; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if ((o === 'auto' || o === 'scroll') && a.scrollWidth > a.clientWidth) return true;
      if ((o === 'hidden' || o === 'clip') && a.getBoundingClientRect().right <= edge + 1) return true;
    }
    return false;
  };
  const skip = 'svg, iframe, [data-testid=stDataFrame], .katex-display, .katex-mathml, pre, .lab-sr-only';
  for (const el of main.querySelectorAll('*')) {
    if (el.children.length && !el.matches('p, span, button, label, a, li, code')) continue;
    if (el.closest(skip) || !el.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
    const r = el.getBoundingClientRect();
    if (r.width && r.right > edge + 1 && !scrollsItself(el)) {
      out.push(`${(el.textContent || el.tagName).trim().slice(0, 40)}: ${Math.round(r.right - edge)} px past the edge`);
    }
  }
  return out;
}"""


# Every Tab stop, focused in turn as Tab would (the browser scrolls it into view): those
# that are still not on the screen (off to a side, or in a collapsed sidebar).
UNSEEN_STOPS_JS = """() => {
  const out = [];
  const stops = 'a[href], button:not([disabled]), input:not([disabled]):not([type=hidden]), '
    + 'textarea, select, summary, iframe, [tabindex]:not([tabindex="-1"])';
  for (const el of document.querySelectorAll(stops)) {
    if (el.closest('[inert]') || el.tabIndex < 0 || !el.checkVisibility({visibilityProperty: true})) continue;
    el.focus();
    if (document.activeElement !== el) continue;
    const r = el.getBoundingClientRect();
    const seen = r.width > 0 && r.height > 0 && r.left >= -1 && r.right <= innerWidth + 1
      && r.bottom > 0 && r.top < innerHeight;
    if (!seen) {
      const name = (el.getAttribute('aria-label') || el.innerText || el.tagName).trim().slice(0, 40);
      out.push(`${name} at (${Math.round(r.left)}, ${Math.round(r.top)}), ${Math.round(r.width)}×${Math.round(r.height)}`);
    }
  }
  document.activeElement?.blur();
  return out;
}"""


def phone_problems(tab) -> list[str]:
    """At 390 px: every target at least 24 × 24 px, no chart text past its chart, no tick
    labels run together, no formula that scrolls unseen."""
    # two frames: the lab's script (ui/a11y.py) thins crowded tick labels on the next one
    tab.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    found = [f"target under 24 × 24 px: {s}" for s in tab.evaluate(SMALL_TARGETS_JS)]
    found += [f"chart text past its chart: {s}" for s in tab.evaluate(OVERFLOW_JS)]
    found += [f"tick labels run together: {s}" for s in tab.evaluate(TICKS_TOGETHER_JS)]
    found += [f"formula scrolls unseen: {s}" for s in tab.evaluate(HIDDEN_SCROLL_JS)]
    return found


def zoom_problems(tab) -> list[str]:
    """A 1440 px screen at 200 % zoom (720 CSS px): the sidebar collapsed (so it takes no Tab
    stop), every stop on the screen once focused, no text past its chart, no sideways scroll."""
    found = []
    if tab.get_attribute("[data-testid=stSidebar]", "data-collapsed") != "true":
        found.append("the sidebar is open at 200 % zoom")
    found += [f"chart text past its chart: {s}" for s in tab.evaluate(OVERFLOW_JS)]
    found += tab.evaluate(REFLOW_JS)
    found += [f"Tab stop off the screen: {s}" for s in tab.evaluate(UNSEEN_STOPS_JS)]
    return found


# --- the focus ring, in pixels ---------------------------------------------------------------

# (page, what to focus: a selector, the box the reader sees around it: a selector or None):
# every kind of control, on a page that has it. The sweep checks them on its English desk
# visit of each page, before anything there is clicked.
CONTROLS = {
    "toggle": ("concept_warmup", "[data-testid=stCheckbox] input", "[data-testid=stCheckbox]"),
    "radio": ("find_the_bug", "[data-testid=stRadio] input", "[data-testid=stRadio] label"),
    "text input": (
        "decoding",
        "[data-testid=stTextInput] input",
        "[data-testid=stTextInputRootElement]",
    ),
    "select box": (
        "decoding",
        "[data-testid=stSidebar] [data-testid=stSelectbox] input",
        ".react-aria-ComboBox > div",
    ),
    "button": ("practice", "[data-testid=stMain] [data-testid=stBaseButton-secondary]", None),
    "slider": (
        "concept_positional",
        "[data-testid=stSlider] input[type=range]",
        "div:has(> div > input[type=range])",
    ),
    "tab": ("concept_positional", "[data-testid=stTabs] [role=tab]", None),
    "link": ("practice", "[data-testid=stMain] [data-testid=stPageLink-NavLink]", None),
    "multiselect": (
        "concept_positional",
        "[data-testid=stMultiSelect] input",
        ".react-aria-ComboBox > div",
    ),
}
RING_PAGES = {path for path, _, _ in CONTROLS.values()}


def _luminance(rgb: np.ndarray) -> np.ndarray:
    c = rgb.astype(float) / 255
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return c @ np.array([0.2126, 0.7152, 0.0722])


def _shot(tab, box) -> np.ndarray:
    from PIL import Image

    png = tab.screenshot(clip=box, animations="disabled", caret="hide")
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def ring_pixels(before: np.ndarray, after: np.ndarray) -> int:
    """How many pixels changed at 3:1 or more against what was there before."""
    lo, hi = (
        np.minimum(_luminance(before), _luminance(after)),
        np.maximum(_luminance(before), _luminance(after)),
    )
    return int(((hi + 0.05) / (lo + 0.05) >= 3).sum())


def ring_problem(tab, kind: str) -> str | None:
    """Focus ``kind``'s control by keyboard focus: None if a ring 2 px wide at 3:1 appears
    all round the box the reader sees, else what was seen (pixels, not computed styles: a
    ring on a hidden input or cut by a parent shows in the style and not on the screen)."""
    _, target, seen = CONTROLS[kind]
    control = tab.locator(target).first
    control.focus()
    tab.evaluate(  # in the middle of the screen, so the ring all round is on it
        "document.activeElement.scrollIntoView({block: 'center', inline: 'center'});"
        "document.activeElement.blur()"
    )
    tab.wait_for_timeout(300)
    # the box the reader sees around the control: the nearest one holding it
    box = tab.evaluate(
        """([target, seen]) => {
          const el = document.querySelector(target);
          const box = ((seen && el.closest(seen)) || el).getBoundingClientRect();
          return {x: box.x, y: box.y, width: box.width, height: box.height};
        }""",
        [target, seen],
    )
    pad = 8
    clip = {
        "x": max(0, box["x"] - pad),
        "y": max(0, box["y"] - pad),
        "width": box["width"] + 2 * pad,
        "height": box["height"] + 2 * pad,
    }
    before = _shot(tab, clip)
    # no pointer has been pressed in this page, so a focused control shows :focus-visible
    tab.evaluate("(t) => document.querySelector(t).focus({preventScroll: true})", target)
    tab.wait_for_timeout(200)
    if not tab.evaluate("document.activeElement.matches(':focus-visible')"):
        return f"{kind}: focused, but not :focus-visible"
    after = _shot(tab, clip)
    perimeter = 2 * (box["width"] + box["height"])
    # a ring 2 px wide all round: at least 2 × the perimeter at 3:1 (a 1 px border or a
    # ring on a hidden input changes far fewer pixels)
    if ring_pixels(before, after) < 2 * perimeter * 0.9:
        return (
            f"{kind}: {ring_pixels(before, after)} pixels changed at 3:1, "
            f"a 2 px ring round {box['width']:.0f}×{box['height']:.0f} needs {2 * perimeter:.0f}"
        )
    return None


def focus_ring_problems(tab, path: str) -> list[str]:
    """Every kind of control in CONTROLS that ``path`` has, focused in turn; the focus and
    the scroll are put back afterwards, so the page's other checks see it as loaded."""
    found = [ring_problem(tab, kind) for kind, (at, _, _) in CONTROLS.items() if at == path]
    tab.evaluate(
        "document.activeElement?.blur();"
        "[document.scrollingElement, ...document.querySelectorAll("
        "'[data-testid=stMain], [data-testid=stMain] *')]"
        ".forEach(e => { if (e.scrollTop) e.scrollTop = 0; })"
    )
    return [f for f in found if f]


# --- what a screen reader is told ------------------------------------------------------------

# Roles whose name is content, not the interface's words: table cells hold tokens.
CONTENT_ROLES = {"StaticText", "InlineTextBox", "row", "gridcell", "cell", "rowheader", "LineBreak"}
ENGLISH_WORD = re.compile(r"[A-Za-z]{3,}")
QUOTED = re.compile(r"‘[^’]*’")  # a token or a sentence the reader typed, quoted


def allowed_english() -> set[str]:
    """English the Korean UI says on purpose: terms in the Korean catalogs (PNG, FlashAttention,
    Attention Lab) and the English example sentences that are the models' input."""
    words: set[str] = set()
    for text in load_catalog("ko").values():
        words.update(w.lower() for w in ENGLISH_WORD.findall(text))
    for path in (ROOT / "assets").rglob("*.json"):
        if "i18n" in path.parts:
            continue
        words.update(w.lower() for w in ENGLISH_WORD.findall(path.read_text(encoding="utf-8")))
    return words


def accessible_names(context, tab) -> list[tuple[str, str]]:
    """(role, name) of every node a screen reader is given, from Chromium's accessibility tree."""
    cdp = context.new_cdp_session(tab)
    nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
    by_id = {n["nodeId"]: n for n in nodes}
    out = []
    stack = [nodes[0]["nodeId"]]  # the root; walked depth first, in reading order
    while stack:
        node = by_id.get(stack.pop())
        if node is None:
            continue
        stack.extend(reversed(node.get("childIds", [])))
        if node.get("ignored"):
            continue
        role = node.get("role", {}).get("value", "")
        name = (node.get("name") or {}).get("value", "")
        if name and role not in CONTENT_ROLES:
            out.append((role, name))
    return out


def english_names(context, tab, allowed: set[str]) -> list[str]:
    """What a Korean page names in English for assistive technology (words outside
    ``allowed``: allowed_english())."""
    found = []
    for role, name in accessible_names(context, tab):
        words = [w for w in ENGLISH_WORD.findall(QUOTED.sub("", name)) if w.lower() not in allowed]
        if words:
            found.append(f"{role} “{name[:80]}” ({', '.join(words[:4])})")
    return found


# --- what the live region says ---------------------------------------------------------------


def live_text(tab) -> str:
    """The live region's text once it has been said (it is emptied, then filled)."""
    tab.wait_for_function(
        """() => {
          const live = document.getElementById('lab-live');
          return live && live.textContent && live.dataset.seen !== 'yes';
        }""",
        timeout=TIMEOUT_MS,
    )
    return tab.evaluate(
        """() => { const live = document.getElementById('lab-live');
                   live.dataset.seen = 'yes'; return live.textContent; }"""
    )


def mark_unseen(tab) -> None:
    """Forget what the live region said, so the next announcement (even the same text) is new."""
    tab.evaluate(
        """() => { const live = document.getElementById('lab-live');
                   live.dataset.seen = 'yes';
                   new MutationObserver((_, o) => { if (live.textContent) { delete live.dataset.seen; o.disconnect(); } })
                     .observe(live, {childList: true, characterData: true, subtree: true}); }"""
    )


# --- the page's chrome in its language -----------------------------------------------------


def text_problems(page, path: str, lang: str) -> list[str]:
    """What a reader would see wrong in the page's text: a traceback, or in Korean, no Korean
    or the English title."""
    text = page.get_by_test_id("stMain").inner_text()
    found = ["a traceback"] if "Traceback" in text else []
    if lang == "ko" and not HANGUL.search(text):
        found.append("no Korean")
    if lang == "ko" and translate(TITLES[path], "en") in text:
        found.append("the English title")
    return found


def korean_uploader_problems(page, lang: str) -> list[str]:
    """The training page's uploader in Korean: Korean button, Korean size limit, no "Upload"."""
    if lang != "ko":
        return []
    uploader = page.get_by_test_id("stFileUploader")
    button = uploader.locator("button")
    label = button.evaluate(
        "b => getComputedStyle(b.querySelector('[data-testid=stMarkdownContainer]'), '::after')"
        ".content"
    )
    found = []
    if label != f'"{translate("chrome.upload_button", "ko")}"':
        found.append(f"uploader button says {label}")
    shown = page.get_by_test_id("stMain").inner_text()
    if "Upload" in shown or "per file" in shown:
        found.append("Streamlit's English uploader text")
    if translate("training.upload_limit", "ko", mb=20) not in shown:
        found.append("no Korean size limit")
    return found


def fullscreen_problems(page, lang: str) -> list[str]:
    """The first chart's toolbar: our translated camera button, no Fullscreen button."""
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.hover()
    chart.locator("button.modebar-btn[data-title]").first.wait_for(timeout=TIMEOUT_MS)
    titles = chart.locator("button.modebar-btn:visible").evaluate_all(
        "bs => bs.map(b => b.getAttribute('data-title'))"
    )
    found = []
    if translate("chart.toolbar.download_png", lang) not in titles:
        found.append(f"no translated camera button in {titles}")
    if "Fullscreen" in titles:
        found.append("a Fullscreen button")
    return found


def chart_code_problems(page, lang: str) -> list[str]:
    """The home page draws no chart, yet the browser has fetched plotly.js (ui.warm): the
    first chart page a student opens does not wait for its 4.7 MB after the server's run."""
    fetched = page.evaluate(
        "performance.getEntriesByType('resource').some(e => /PlotlyChart\\.[^/]+\\.js$/"
        ".test(e.name))"
    )
    return [] if fetched else ["plotly.js not fetched ahead of the first chart"]


# Byte stand-ins a raw byte-level piece would show (ì í ë Ġ Ċ ...), SentencePiece's ▁, and the
# replacement character a cut UTF-8 sequence decodes to. The lab's own marks stay.
MOJIBAKE = {c for b, c in _bytes_to_unicode().items() if b >= 0x80 or b <= 0x20} | {"▁", "\ufffd"}
MOJIBAKE -= {"·", "×", "÷"}  # the lab's own part mark and the table's signs


def mojibake_in(text: str) -> list[str]:
    """The byte stand-ins in ``text``, a byte's own part mark (" · 1/3") aside."""
    return sorted({c for c in re.sub(r" · \d+/\d+", "", text) if c in MOJIBAKE})


def token_cost_problems(page, lang: str, shot: Path | None) -> list[str]:
    """The family page's token-cost table: a Korean sentence's tokens read as Korean (MiniLM's
    jamo for 안), never as byte stand-ins; the table saved as ``shot`` (none: not saved)."""
    table = page.get_by_test_id("stTable").filter(
        has_text=translate("tokens.cost.col.korean", lang)
    )
    table.wait_for(timeout=TIMEOUT_MS)
    found = [] if "ᄋ | ##ᅡ | ##ᆫ" in table.inner_text() else ["no MiniLM jamo for 안"]
    found += [
        f"byte stand-in {c!r}" for c in mojibake_in(page.get_by_test_id("stMain").inner_text())
    ]
    if shot:
        table.scroll_into_view_if_needed()
        table.screenshot(path=shot)
    return found


# Checks of one page that need it loaded and nothing else, after the others (a hovered chart
# shows its toolbar): run in the same visit.
PAGE_CHECKS = {
    "training": korean_uploader_problems,
    "explorer": fullscreen_problems,
    "": chart_code_problems,
}
