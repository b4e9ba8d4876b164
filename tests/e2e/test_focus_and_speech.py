"""What a keyboard user sees and a screen-reader user hears, beyond what axe-core checks.

- Focus stays on what is seen: with the sidebar collapsed (a phone, 200 % zoom) no Tab stop
  lies in it or off the screen; opening it moves the focus into it, Escape closes it and
  gives the focus back to its button.
- A chart's region: Tab meets its summary and table before its toolbar, and Chromium's
  accessibility tree reads them in that order (one explorer load per language serves both,
  and the Korean one then the switch back to English: Streamlit's own words in English again).

The sidebar, Streamlit's own words and a chart's region are drawn by the same code on every
page, so these checks use the toy's explorer (model=en2ko): a light page with Tab stops,
help buttons and charts, where a real model's page would add only its model's run; the
collapsed sidebar's checks, which need no chart, an exercise (no chart at all).
- (At 200 % zoom every page reflows, every Tab stop is on the screen, every page has its
  own title and in Korean names nothing in English, and the focus ring is seen on every
  kind of control, in pixels: the one page sweep, tests/e2e/test_accessibility.py, checks
  these on each page's one load.)
- The live region says what a press changed: the worked solution asked for. (A wrong
  answer, twice, then the worked solution, and the focus on the feedback after Check: the
  second student of tests/e2e/test_browser_practice.py, on the class-set page both students
  open; a decoding step said with its token: tests/e2e/test_keyboard.py, on its walk
  through decoding.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.pagechecks import accessible_names, live_text, mark_unseen
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("app-server-b")]  # see conftest.py

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 120_000

_SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  return app && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton]');
}"""


# Two animation frames: the a11y script re-applies its labels on the next one.
_NEXT_FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


def settle(tab, pressed: bool = True) -> None:
    tab.locator("[data-testid=stMain] h1").first.wait_for(timeout=TIMEOUT_MS)
    if pressed:
        tab.wait_for_timeout(400)  # a rerun starts a moment after a press
    tab.wait_for_function(_SETTLED_JS, timeout=TIMEOUT_MS)
    tab.evaluate(_NEXT_FRAMES_JS)


def open_page(
    browser,
    shared_context,
    app_url,
    path: str,
    lang: str,
    width: int,
    height: int,
    scale: float = 1,
):
    """The page in ``lang`` on a ``width`` × ``height`` screen: at a pixel ratio of 1 a tab of
    the worker's shared context (its renderer is warm: tests/e2e/conftest.py), at another
    ratio a context of its own (the ratio is the context's). Closed by ``close_page``."""
    if scale == 1:
        context, tab = shared_context, shared_context.new_page()
        tab.set_viewport_size({"width": width, "height": height})
    else:
        context = browser.new_context(
            viewport={"width": width, "height": height},
            device_scale_factor=scale,
            base_url=app_url,
        )
        tab = context.new_page()
    tab.set_default_navigation_timeout(TIMEOUT_MS)
    tab.goto(f"/{path}{'&' if '?' in path else '?'}lang={lang}")
    settle(tab, pressed=False)  # a load: its script run is under way once the h1 is drawn
    return context, tab


def close_page(context, tab) -> None:
    """What open_page opened: its context, or its tab of the shared context (a context that
    holds other tabs)."""
    (tab if len(context.pages) > 1 else context).close()


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


# A light page with Tab stops in its body: the sidebar and its expand button are the app's
# own, the same on every page (an exercise's boxes and buttons: no chart to lay out again at
# every screen size, the explorer's heatmaps would add only Chromium's work).
LIGHT_PAGE = "practice?seed=2026&topic=layernorm"


@pytest.fixture(scope="module")
def light_page(browser, shared_context, app_url):
    """``light_page(lang, screen)``: LIGHT_PAGE in ``lang`` on SMALL_SCREENS[screen], opened
    once per module (open_page: 200 % zoom in a context of its own, as its pixel ratio is the
    context's), so the live region's test reads the Korean phone's exercise the sidebar's
    test opened."""
    opened: dict = {}

    def page(lang: str, screen: str):
        if (lang, screen) not in opened:
            width, height, scale = SMALL_SCREENS[screen]
            opened[lang, screen] = open_page(
                browser, shared_context, app_url, LIGHT_PAGE, lang, width, height, scale
            )
        return opened[lang, screen][1]

    yield page
    for context, tab in opened.values():
        close_page(context, tab)


# each screen in one language: the sidebar and its button are the app's, whatever the words
@pytest.mark.parametrize(("lang", "screen"), [("en", "zoom200"), ("ko", "phone")])
def test_a_collapsed_sidebar_takes_no_tab_stop_and_escape_closes_it(light_page, lang, screen):
    """On a phone and at 200 % zoom, on an exercise (LIGHT_PAGE: any page with Tab stops in
    its body would do: the sidebar is the app's, the same on every page)."""
    tab = light_page(lang, screen)
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
    assert tab.evaluate("document.querySelector('[data-testid=stSidebar]').hasAttribute('inert')")


# --- what a screen reader hears ----------------------------------------------------------------


def test_asking_for_the_solution_is_said(light_page):
    """On the Korean phone's exercise (light_page, the collapsed sidebar's test's load:
    every exercise has the button, the live region is the app's)."""
    tab = light_page("ko", "phone")
    mark_unseen(tab)
    tab.get_by_role("button", name=translate("practice.show_solution", "ko")).click()
    assert live_text(tab) == translate("practice.solution_shown", "ko")


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


# width -> whether the panels stand side by side there (1024 px: beside the open sidebar)
SIDE_BY_SIDE = {1440: True, 1024: False, 390: False}


def norm_panels(tab, width: int) -> list[dict]:
    """The panels at ``width``: the tab narrowed to it (the stacking is CSS, a container
    query: no script run), once plotly has redrawn the charts at their new size."""
    if tab.viewport_size["width"] != width:
        tab.set_viewport_size({"width": width, "height": 900})
        tab.wait_for_timeout(500)
    tab.locator(".st-key-axes_bn_cols_chart .main-svg").first.wait_for(
        state="attached", timeout=TIMEOUT_MS
    )
    tab.wait_for_timeout(500)
    return tab.evaluate(_NORM_PANELS_JS)


def in_korean(tab) -> None:
    """The sidebar's language control pressed on the page as it is (a rerun of the same
    session, not a new load): on a phone its folded sidebar is opened first."""
    if tab.get_attribute("[data-testid=stSidebar]", "data-collapsed") == "true":
        tab.get_by_test_id("stExpandSidebarButton").click()
    tab.get_by_test_id("stSidebar").get_by_text("한국어", exact=True).click()
    tab.locator(
        "[data-testid=stMain] h1", has_text=translate("concepts.layernorm.title", "ko")
    ).wait_for(timeout=TIMEOUT_MS)
    settle(tab)


def test_the_norm_panels_stack_where_they_would_be_narrow(browser, shared_context, app_url):
    """Layer norm vs batch norm: three panels side by side on a wide screen; on a phone, and
    beside the sidebar at 1024 px, one under the other as wide as the page, each with the
    numbers in its cells (three panels in one figure were too crowded at 390 px). English
    is opened at 1440 px and narrowed; Korean is that phone's page switched in place by the
    sidebar's language control (the panels' layout is CSS, the words the language's), not
    a load of its own."""
    address = "concept_layernorm?model=en2ko"
    context, tab = open_page(browser, shared_context, app_url, address, "en", 1440, 900)
    try:
        seen = {("en", width): norm_panels(tab, width) for width in (1440, 1024, 390)}
        in_korean(tab)
        seen["ko", 390] = norm_panels(tab, 390)
    finally:
        close_page(context, tab)
    for (_, width), panels in seen.items():
        tops = [p["top"] for p in panels]
        if SIDE_BY_SIDE[width]:
            assert len({p["left"] for p in panels}) == 3 and max(tops) - min(tops) < 2, (
                width,
                panels,
            )
        else:
            assert len({p["left"] for p in panels}) == 1 and tops == sorted(tops), (width, panels)
            assert all(p["share"] > 0.9 for p in panels), (width, panels)
        assert all(p["numbers"] == panels[0]["numbers"] > 0 for p in panels), (width, panels)


# --- what a screen reader hears in the explorer's chart region --------------------------------

HEARD = ROOT / "tests" / "artifacts" / "explorer-chart-heard.md"
# The toy's explorer: its chart region is drawn by the same code as a real model's (the one
# page sweep, tests/e2e/test_accessibility.py, loads those), without a real model's run.
EXPLORER = "explorer?model=en2ko"


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


def walk_to_the_first_chart(context, tab, lang: str) -> dict:
    """Tab from the top to the first chart's region, open its table with Enter, and Tab
    on through the region: the stops met, in order, and where the focus was on the way."""
    tab.locator("[data-testid=stPlotlyChart] .modebar-btn").first.wait_for(
        state="attached", timeout=TIMEOUT_MS
    )
    first = None
    for _ in range(80):  # through the sidebar and the explorer's controls
        tab.keyboard.press("Tab")
        first = tab.evaluate(_CHART_STOP_JS)
        if first is not None:
            break
    walk = {"first": first, "label": tab.evaluate("document.activeElement.innerText")}
    if first != {"part": "disclosure", "chart": 0}:
        return walk
    tab.keyboard.press("Enter")  # open the table, by keyboard
    tab.locator("[data-testid=stExpander] [data-testid=stDataFrame]").first.wait_for(
        timeout=TIMEOUT_MS
    )
    settle(tab)
    walk["after_open"] = tab.evaluate(_CHART_STOP_JS)
    parts = ["disclosure"]
    for _ in range(30):
        tab.keyboard.press("Tab")
        now = tab.evaluate(_CHART_STOP_JS)
        if now is None or now["chart"] != 0:
            break
        if parts[-1] != now["part"]:
            parts.append(now["part"])
    walk["parts"] = parts
    return walk


@pytest.fixture(scope="module")
def explorer_walked(browser, shared_context, app_url):
    """``explorer_walked(lang)``: the explorer in ``lang``, once per module, after
    walk_to_the_first_chart: (its context, its tab, the walk). The tests of the first
    chart's region read it, so one load in each language serves them all."""
    opened: dict = {}

    def walked(lang: str):
        if lang not in opened:
            context, tab = open_page(browser, shared_context, app_url, EXPLORER, lang, 1440, 900)
            opened[lang] = (context, tab, walk_to_the_first_chart(context, tab, lang))
        return opened[lang]

    yield walked
    for context, tab, _ in opened.values():
        close_page(context, tab)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_tab_meets_a_charts_summary_and_table_before_its_toolbar(explorer_walked, lang):
    """Item 4 of issue 37: the summary (the disclosure's label) and the table speak for
    the chart, so the keyboard reaches them first and the chart's toolbar after them."""
    _, _, walk = explorer_walked(lang)
    first = walk["first"]
    assert first == {"part": "disclosure", "chart": 0}, f"first stop in the chart: {first}"
    assert translate("a11y.show_table", lang) in walk["label"], walk["label"]
    assert walk["after_open"] == first, "the focus left the disclosure on open"
    assert walk["parts"] == ["disclosure", "table", "toolbar"], walk["parts"]


def test_the_explorers_chart_region_speaks_through_its_summary_and_table(explorer_walked):
    """Recorded from Chromium's accessibility tree: the summary ("show as a table") and the
    table that stand for the chart come first, then the chart as one named figure whose
    drawing says nothing, and its toolbar. Read on the English explorer after the keyboard
    walk opened the first chart's table."""
    context, tab, walk = explorer_walked("en")
    assert "parts" in walk, f"the walk never opened the first chart's table: {walk}"
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


def test_switching_back_to_english_gives_streamlit_its_own_words_again(explorer_walked):
    """The sidebar's name and the help buttons' names (Streamlit's words, put into Korean by
    the app's script) go back to English; on the toy's Korean explorer, whose controls have
    help: the load the chart region's tests walked (explorer_walked), switched in place."""
    _, tab, _ = explorer_walked("ko")
    assert tab.get_attribute("[data-testid=stSidebar]", "aria-label") == translate(
        "a11y.sr.sidebar", "ko"
    )
    tab.locator("[data-testid=stSidebar] button", has_text="English").click()
    tab.locator("h1", has_text=translate("explorer.title", "en")).first.wait_for(timeout=TIMEOUT_MS)
    settle(tab)
    assert tab.get_attribute("[data-testid=stSidebar]", "aria-label") == "Sidebar"
    korean = translate("a11y.sr.help_for", "ko").replace("$1", "").strip()
    tab.wait_for_function(  # the script re-applies on the next frames after React's redraw
        """(korean) => ![...document.querySelectorAll('[data-testid=stTooltipHoverTarget] button')]
             .some(b => (b.getAttribute('aria-label') || '').includes(korean))""",
        arg=korean,
        timeout=10_000,
    )
    # the help icons' names (a button with a tooltip of its own is named by its text)
    helps = tab.evaluate(
        "[...document.querySelectorAll('[data-testid=stTooltipHoverTarget] button')]"
        ".map(b => b.getAttribute('aria-label')).filter(Boolean)"
    )
    assert any(h.startswith("Help for ") for h in helps), helps
    assert not any(korean in h for h in helps), helps
