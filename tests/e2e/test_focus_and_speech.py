"""What a keyboard user sees and a screen-reader user hears, beyond what axe-core checks.

- Focus stays on what is seen: with the sidebar collapsed (a phone, 200 % zoom) no Tab stop
  lies in it or off the screen; opening it moves the focus into it, Escape closes it and
  gives the focus back to its button.
- (At 200 % zoom every page reflows, every Tab stop is on the screen, and every page has its
  own title and in Korean names nothing in English: the one page sweep,
  tests/e2e/test_accessibility.py, checks these on each page's one load.)
- The focus ring is seen on every kind of control: a screenshot of the control focused
  differs from one unfocused by a ring at least 2 px wide, at 3:1 or more against what was
  there before (pixels, not computed styles: a ring on a hidden input or cut by a parent
  shows in the style and not on the screen).
- The live region says what a press changed: a decoding step, a wrong answer (twice), the
  worked solution; after Check the focus is on the feedback.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

import practice
from tests.e2e.pagechecks import accessible_names
from ui.i18n import translate

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 120_000

_SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton]');
}"""


def settle(tab) -> None:
    tab.locator("[data-testid=stMain] h1").first.wait_for(timeout=TIMEOUT_MS)
    tab.wait_for_timeout(400)  # a rerun starts a moment after a press
    tab.wait_for_function(_SETTLED_JS, timeout=TIMEOUT_MS)
    tab.wait_for_timeout(300)  # the a11y script re-applies on the next animation frame


def open_page(browser, app_url, path: str, lang: str, width: int, height: int, scale: float = 1):
    context = browser.new_context(
        viewport={"width": width, "height": height},
        device_scale_factor=scale,
        base_url=app_url,
    )
    context.set_default_navigation_timeout(TIMEOUT_MS)
    tab = context.new_page()
    tab.goto(f"/{path}{'&' if '?' in path else '?'}lang={lang}")
    settle(tab)
    return context, tab


# --- focus on what is seen -------------------------------------------------------------------

_FOCUS_JS = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const r = el.getBoundingClientRect();
  return {
    name: (el.getAttribute('aria-label') || el.innerText || el.value || el.tagName).trim().slice(0, 60),
    inSidebar: !!el.closest('[data-testid=stSidebar]'),
    expand: !!el.closest('[data-testid=stExpandSidebarButton]'),
    seen: r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > 0
      && r.left < innerWidth && r.top < innerHeight,
  };
}"""

# a phone, and a 1440 px desktop at 200 % zoom (720 CSS px wide, twice the pixels)
SMALL_SCREENS = {"phone": (390, 844, 1), "zoom200": (720, 450, 2)}


@pytest.mark.parametrize("screen", list(SMALL_SCREENS))
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_collapsed_sidebar_takes_no_tab_stop_and_escape_closes_it(browser, app_url, lang, screen):
    width, height, scale = SMALL_SCREENS[screen]
    context, tab = open_page(browser, app_url, "decoding", lang, width, height, scale)
    try:
        assert tab.get_attribute("[data-testid=stSidebar]", "data-collapsed") == "true"
        stops = []
        for _ in range(25):  # past the header and well into the page
            tab.keyboard.press("Tab")
            now = tab.evaluate(_FOCUS_JS)
            if now is None:
                continue
            stops.append(now)
            assert not now["inSidebar"], f"Tab stopped in the collapsed sidebar: {now}"
        expand = [s for s in stops if s["expand"]]
        assert expand, f"the expand button was never reached: {stops}"

        tab.focus("[data-testid=stExpandSidebarButton]")
        tab.keyboard.press("Enter")
        tab.wait_for_function(
            "document.querySelector('[data-testid=stSidebar]').dataset.collapsed === 'false'"
        )
        tab.wait_for_timeout(400)
        now = tab.evaluate(_FOCUS_JS)
        assert now and now["inSidebar"] and now["seen"], f"focus not in the open sidebar: {now}"
        tab.keyboard.press("Tab")
        now = tab.evaluate(_FOCUS_JS)
        assert now and now["inSidebar"], f"the next Tab left the open sidebar: {now}"

        tab.keyboard.press("Escape")
        tab.wait_for_function(
            "document.querySelector('[data-testid=stSidebar]').dataset.collapsed === 'true'"
        )
        tab.wait_for_timeout(400)
        now = tab.evaluate(_FOCUS_JS)
        assert now and now["expand"], f"Escape did not give the focus back to its button: {now}"
        assert tab.evaluate(
            "document.querySelector('[data-testid=stSidebar]').hasAttribute('inert')"
        )
    finally:
        context.close()


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


# (page, what to focus: a selector, the box the reader sees around it: a selector or None)
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


# The pages those controls are on: each opened once for all of its kinds.
CONTROL_PAGES = sorted({path for path, _, _ in CONTROLS.values()})


def ring_problem(tab, kind: str) -> str | None:
    """Focus ``kind``'s control by keyboard focus: None if a ring 2 px wide at 3:1 appears
    all round the box the reader sees, else what was seen."""
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
    # no pointer has been used in this tab, so a focused control shows :focus-visible
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


@pytest.mark.parametrize("path", CONTROL_PAGES)
def test_the_focus_ring_is_seen_on_every_kind_of_control(browser, app_url, path):
    """Every kind of control in CONTROLS, on the page that has it (one load per page)."""
    context, tab = open_page(browser, app_url, path, "en", 1440, 900)
    try:
        found = [ring_problem(tab, kind) for kind, (at, _, _) in CONTROLS.items() if at == path]
    finally:
        context.close()
    assert not [f for f in found if f], found


# --- what a screen reader hears ----------------------------------------------------------------


def live_text(tab, previous: str | None = None) -> str:
    """The live region's text once it has been said (it is emptied, then filled)."""
    tab.wait_for_function(
        """(previous) => {
          const live = document.getElementById('lab-live');
          return live && live.textContent && live.dataset.seen !== 'yes';
        }""",
        arg=previous,
        timeout=TIMEOUT_MS,
    )
    return tab.evaluate(
        """() => { const live = document.getElementById('lab-live');
                   live.dataset.seen = 'yes'; return live.textContent; }"""
    )


def _mark_unseen(tab) -> None:
    """Forget what the live region said, so the next announcement (even the same text) is new."""
    tab.evaluate(
        """() => { const live = document.getElementById('lab-live');
                   live.dataset.seen = 'yes';
                   new MutationObserver((_, o) => { if (live.textContent) { delete live.dataset.seen; o.disconnect(); } })
                     .observe(live, {childList: true, characterData: true, subtree: true}); }"""
    )


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_decoding_step_is_said_with_its_token(browser, app_url, lang):
    context, tab = open_page(browser, app_url, "decoding", lang, 1440, 900)
    try:
        assert tab.locator("#lab-live[aria-live=polite]").count() == 1
        _mark_unseen(tab)
        tab.get_by_role("button", name=translate("decoding.step", lang)).click()
        said = live_text(tab)
        template = re.escape(
            translate("decoding.say_step", lang, step=1, total="TOTAL", token="TOKEN")
        )
        pattern = template.replace("TOTAL", r"\d+").replace("TOKEN", "(.+)")
        match = re.fullmatch(pattern, said)
        assert match, f"{said!r} is not the step's sentence"
        # the token said is the one the page shows as chosen
        shown = tab.locator("[data-testid=stMain] code").all_inner_texts()
        assert match.group(1) in shown, (match.group(1), shown)
    finally:
        context.close()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_wrong_answers_the_solution_and_the_focus_after_check_are_said(browser, app_url, lang):
    seed, topic = 2026, "layernorm"  # set 2026 opens on the layernorm kind (numbers)
    context, tab = open_page(
        browser, app_url, f"practice?seed={seed}&topic={topic}", lang, 1440, 900
    )
    not_right = translate("practice.not_right", lang)
    ex = practice.make(*practice.item(seed, topic, 0))
    wrong = ", ".join(f"{v + 1:.3f}" for v in ex.answer[0])
    try:
        check = tab.get_by_role("button", name=translate("practice.check", lang))
        field = translate("practice.field.out", lang, step="").strip()[:8]
        tab.locator(f"[data-testid=stForm] input[aria-label^='{field}']").first.fill(wrong)
        _mark_unseen(tab)
        check.click()
        first = live_text(tab)
        # a wrong answer says so in words, and the focus is on the feedback
        assert first.startswith(not_right), first
        tab.wait_for_function(
            "document.activeElement && document.activeElement.closest('.st-key-practice_feedback')"
        )
        # the same wrong answer again: said again, now with the worked solution
        _mark_unseen(tab)
        check.click()
        second = live_text(tab)
        assert second.startswith(first.split(".")[0]), (first, second)
        assert second.endswith(translate("practice.solution_shown", lang)), second
        # and the feedback seen says it in words too, not only in red
        assert tab.locator(".st-key-practice_feedback").get_by_text(not_right).count()
    finally:
        context.close()


def test_asking_for_the_solution_is_said(browser, app_url):
    context, tab = open_page(browser, app_url, "practice", "ko", 1440, 900)
    try:
        _mark_unseen(tab)
        tab.get_by_role("button", name=translate("practice.show_solution", "ko")).click()
        assert live_text(tab) == translate("practice.solution_shown", "ko")
    finally:
        context.close()


# The layer-norm page's three panels (input, LayerNorm, BatchNorm): where they stand, how
# wide they are, and whether each still shows the numbers in its cells.
_NORM_PANELS_JS = """() => {
  // the page's text column: a panel as wide as the text around it
  const width = document.querySelector('[data-testid=stMain] [data-testid=stMarkdownContainer]').getBoundingClientRect().width;
  return ['raw', 'ln_rows', 'bn_cols'].map(part => {
    const chart = document.querySelector(`.st-key-axes_${part}_chart [data-testid=stPlotlyChart]`);
    const r = chart.getBoundingClientRect();
    const numbers = [...chart.querySelectorAll('.heatmap-label text')].filter(t => t.style.display !== 'none');
    return {left: Math.round(r.left), top: Math.round(r.top), share: r.width / width, numbers: numbers.length};
  });
}"""


@pytest.mark.parametrize(("width", "side_by_side"), [(390, False), (1024, False), (1440, True)])
def test_the_norm_panels_stack_where_they_would_be_narrow(browser, app_url, width, side_by_side):
    """Layer norm vs batch norm: three panels side by side on a wide screen; on a phone, and
    beside the sidebar at 1024 px, one under the other as wide as the page, each with the
    numbers in its cells (three panels in one figure were too crowded at 390 px)."""
    for lang in ("en", "ko") if width == 390 else ("en",):
        context, tab = open_page(
            browser, app_url, "concept_layernorm?model=en2ko", lang, width, 900
        )
        try:
            tab.locator(".st-key-axes_bn_cols_chart .main-svg").first.wait_for(
                state="attached", timeout=TIMEOUT_MS
            )
            tab.wait_for_timeout(500)
            panels = tab.evaluate(_NORM_PANELS_JS)
        finally:
            context.close()
        tops = [p["top"] for p in panels]
        if side_by_side:
            assert len({p["left"] for p in panels}) == 3 and max(tops) - min(tops) < 2, panels
        else:
            assert len({p["left"] for p in panels}) == 1 and tops == sorted(tops), panels
            assert all(p["share"] > 0.9 for p in panels), panels
        assert all(p["numbers"] == panels[0]["numbers"] > 0 for p in panels), panels


# --- what a screen reader hears in the explorer's chart region --------------------------------

HEARD = ROOT / "tests" / "artifacts" / "explorer-chart-heard.md"


def test_the_explorers_chart_region_speaks_through_its_summary_and_table(browser, app_url):
    """Recorded from Chromium's accessibility tree: the summary ("show as a table") and the
    table that stand for the chart come first, then the chart as one named figure whose
    drawing says nothing, and its toolbar."""
    context, tab = open_page(browser, app_url, "explorer", "en", 1440, 900)
    try:
        chart = tab.locator("[data-testid=stPlotlyChart]").first
        chart.wait_for(timeout=TIMEOUT_MS)
        tab.wait_for_timeout(500)
        # open "show as a table" below the first chart
        expander = tab.locator("[data-testid=stExpander]", has=tab.locator("summary")).filter(
            has_text=translate("a11y.show_table", "en")
        )
        expander.first.locator("summary").click()
        settle(tab)
        tab.locator("[data-testid=stExpander] [data-testid=stDataFrame]").first.wait_for(
            timeout=TIMEOUT_MS
        )
        tab.wait_for_timeout(500)
        heard = tab.evaluate(
            """() => {
              const chart = document.querySelector('[data-testid=stPlotlyChart]');
              const svgs = [...chart.querySelectorAll('svg.main-svg')];
              const frame = document.querySelector('[data-testid=stExpander] [data-testid=stDataFrame]');
              return {figure: chart.getAttribute('aria-label'), role: chart.getAttribute('role'),
                      hidden: svgs.every(s => s.getAttribute('aria-hidden') === 'true'),
                      table: frame.getAttribute('aria-label')};
            }"""
        )
        names = accessible_names(context, tab)
    finally:
        context.close()
    assert heard["role"] == "figure" and heard["hidden"], heard
    assert heard["table"] == translate("a11y.table_name", "en", summary=heard["figure"])
    # no unnamed graphics: every image or graphics node a reader meets has a name
    assert ("figure", heard["figure"]) in names
    # in the tree's order: the disclosure (the summary), the table, then the chart with
    # its toolbar
    show = f"{heard['figure']} ({translate('a11y.show_table', 'en')})"
    disclosure = next(i for i, (_, name) in enumerate(names) if name == show)
    table = names.index(("group", heard["table"]))
    figure = names.index(("figure", heard["figure"]))
    assert disclosure < table < figure, names[disclosure : figure + 1]
    # between the table and the chart only the table's toolbar and column headers: no
    # graphics, no loose axis text (an unnamed node would not be listed; a named one would
    # show its role here)
    inside = names[table + 1 : figure]
    assert {role for role, _ in inside} == {"button", "columnheader"}, inside
    toolbar = []
    for role, name in names[figure + 1 :]:
        if role != "button":
            break
        toolbar.append((role, name))
    assert toolbar, names[figure:]
    region = [f"- {role}: “{name}”" for role, name in names[disclosure : figure + 1] + toolbar]
    HEARD.parent.mkdir(parents=True, exist_ok=True)
    HEARD.write_text("\n".join(region) + "\n")


# Where the focus is in a chart's region: the "show as a table" disclosure, the table in
# it, or the chart's toolbar; with the number of the chart it belongs to (the disclosure
# and its table sit just before their chart).
_CHART_STOP_JS = """() => {
  const el = document.activeElement;
  if (!el || el === document.body || el.closest('[data-testid=stSidebar]')) return null;
  const charts = [...document.querySelectorAll('[data-testid=stPlotlyChart]')];
  const chart = el.closest('[data-testid=stPlotlyChart]');
  if (chart) return {part: el.closest('.modebar') ? 'toolbar' : 'chart', chart: charts.indexOf(chart)};
  const expander = el.closest('[data-testid=stExpander]');
  if (!expander) return null;
  let next = expander.closest('[data-testid=stElementContainer], [data-testid=stLayoutWrapper]');
  next = next && next.nextElementSibling;
  const own = next && next.querySelector('[data-testid=stPlotlyChart]');
  if (!own) return null;
  const part = el.closest('summary') ? 'disclosure' : el.closest('[data-testid=stDataFrame]') ? 'table' : 'other';
  return {part, chart: charts.indexOf(own)};
}"""


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_tab_meets_a_charts_summary_and_table_before_its_toolbar(browser, app_url, lang):
    """Item 4 of issue 37: the summary (the disclosure's label) and the table speak for
    the chart, so the keyboard reaches them first and the chart's toolbar after them."""
    context, tab = open_page(browser, app_url, "explorer", lang, 1440, 900)
    try:
        tab.locator("[data-testid=stPlotlyChart] .modebar-btn").first.wait_for(
            state="attached", timeout=TIMEOUT_MS
        )
        first = None
        for _ in range(80):  # through the sidebar and the explorer's controls
            tab.keyboard.press("Tab")
            first = tab.evaluate(_CHART_STOP_JS)
            if first is not None:
                break
        assert first == {"part": "disclosure", "chart": 0}, f"first stop in the chart: {first}"
        label = tab.evaluate("document.activeElement.innerText")
        assert translate("a11y.show_table", lang) in label, label
        tab.keyboard.press("Enter")  # open the table, by keyboard
        tab.locator("[data-testid=stExpander] [data-testid=stDataFrame]").first.wait_for(
            timeout=TIMEOUT_MS
        )
        settle(tab)
        assert tab.evaluate(_CHART_STOP_JS) == first, "the focus left the disclosure on open"
        parts = ["disclosure"]
        for _ in range(30):
            tab.keyboard.press("Tab")
            now = tab.evaluate(_CHART_STOP_JS)
            if now is None or now["chart"] != 0:
                break
            if parts[-1] != now["part"]:
                parts.append(now["part"])
        assert parts == ["disclosure", "table", "toolbar"], parts
    finally:
        context.close()


def test_switching_back_to_english_gives_streamlit_its_own_words_again(browser, app_url):
    context, tab = open_page(browser, app_url, "decoding", "ko", 1440, 900)
    try:
        assert tab.get_attribute("[data-testid=stSidebar]", "aria-label") == translate(
            "a11y.sr.sidebar", "ko"
        )
        tab.locator("[data-testid=stSidebar] button", has_text="English").click()
        tab.locator("h1", has_text=translate("nav.decoding", "en")).first.wait_for(
            timeout=TIMEOUT_MS
        )
        settle(tab)
        assert tab.get_attribute("[data-testid=stSidebar]", "aria-label") == "Sidebar"
        korean = translate("a11y.sr.help_for", "ko").replace("$1", "").strip()
        tab.wait_for_function(  # the script re-applies on the next frames after React's redraw
            """(korean) => ![...document.querySelectorAll('[data-testid=stTooltipHoverTarget] button')]
                 .some(b => (b.getAttribute('aria-label') || '').includes(korean))""",
            arg=korean,
            timeout=10_000,
        )
        helps = tab.evaluate(
            "[...document.querySelectorAll('[data-testid=stTooltipHoverTarget] button')]"
            ".map(b => b.getAttribute('aria-label'))"
        )
        assert any(h.startswith("Help for ") for h in helps), helps
        assert not any(korean in h for h in helps), helps
    finally:
        context.close()
