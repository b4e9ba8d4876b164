"""The one page sweep: every page, in both languages, at a desk and on small screens, each
page drawn once per language and every per-page check run on that drawing.

- WCAG 2.2 AA by axe-core (``axe-playwright-python``, offline) at 1440 px and at 390 px:
  serious and critical violations (and moderate ones) fail; the minor ones go to the report,
  tests/artifacts/accessibility.md (and docs/accessibility.md when the whole matrix ran),
  which the README links. ``<html lang>`` is the page's language, and so is the address's
  ``?lang=``.
- Every page has its own title in its language; a Korean page names nothing in English for
  assistive technology (Chromium's accessibility tree, as a screen reader gets it).
- A disabled control's label keeps its contrast: the explorer's head list with a mean of
  heads (its chrome address, agg=mean), axe's color-contrast rule at 1440 px.
- The page's chrome at 1440 and 1024 px (what tests/e2e/test_browser_chrome.py checked):
  drawn without a traceback, its title in its language, in Korean no English title and none
  of Streamlit's own English, no control or formula cut off; the training page's uploader,
  the explorer's chart toolbar and the home page's early plotly.js. With LAB_SCREENSHOTS=1
  (`make screenshots`), the first screen in tests/artifacts/chrome-<page>-<lang>-<width>.png.
- The family page's token-cost table at 1440 px and on a phone: a Korean sentence's tokens
  read as Korean (MiniLM's jamo), no byte stand-ins on the page; with LAB_SCREENSHOTS=1,
  the table in tests/artifacts/token-cost-<lang>-<width>.png.
- The focus ring is seen on every kind of control (pagechecks.CONTROLS, on the English desk
  visit of the page that has it): a screenshot of the control focused differs from one
  unfocused by a ring at least 2 px wide, at 3:1 or more against what was there before.
- On a phone (390 px): every target at least 24 × 24 px, no chart text past its chart, no
  tick labels run together, no formula that scrolls unseen; then 720 px (a 1440 px screen at 200 % zoom): the sidebar
  stays collapsed, the page reflows, every Tab stop is on the screen.

Each page is drawn once per language, at 1440 px; the 1024 px, phone and 200 % checks
follow on the same tab narrowed. The sweep goes language by language: the first page of a
language, and every address with a query, is loaded at its address; every other page is
reached in-app, by its sidebar link pressed with the keyboard, as a student moves between
pages (the session keeps the language; the address must still say it). That skips the
frontend's boot, about 1 CPU-s of Chromium a page. The page left is hidden while the tab
widens from 720 px, so its charts are not redrawn for nothing, and the checks wait for the
new page's title and the end of its run (Streamlit keeps the old page's elements until
then). After a test that broke off before its last step (a timeout, a crash), the next
page is loaded at its address again.

The app knows nothing of the window's width (its layout is
CSS, and Streamlit collapses the sidebar below its breakpoint on a resize as on a load), so
a narrowed tab draws what a phone's first load draws, without the page's second script
run; tests/e2e/test_focus_and_speech.py opens a page on a phone and at 200 % from the start
(the sidebar collapsed from the first frame).

No check reads a screenshot, so a plain run takes none (each is a raster of the screen,
0.1-0.2 CPU-s); a failed test keeps its tab as it was in tests/artifacts/failed-<test>.png.

The checks themselves are in tests/e2e/pagechecks.py. A new check of every page goes there
and into a visit below, never into a new loop over the pages (see the README's Tests).
"""

from __future__ import annotations

import pytest

from bench.browser import app_pages
from tests.e2e.conftest import SCREENSHOTS, keep_if_failed
from tests.e2e.pagechecks import (
    CHROME_ADDRESSES,
    PAGE_CHECKS,
    RING_PAGES,
    ROOT,
    TITLES,
    allowed_english,
    english_names,
    focus_ring_problems,
    phone_problems,
    text_problems,
    token_cost_problems,
    watch_problems,
    zoom_problems,
)
from ui.i18n import LANGUAGES, translate

pytestmark = pytest.mark.browser

TIMEOUT_MS = 120_000
DESK, NARROW_DESK = {"width": 1440, "height": 900}, {"width": 1024, "height": 900}
PHONE, ZOOM200 = {"width": 390, "height": 844}, {"width": 720, "height": 450}
AXE_WIDTHS = (DESK["width"], PHONE["width"])
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
EXTRA_RULES = {"heading-order": {"enabled": True}}  # best-practice, not a WCAG tag
FAILING = {"moderate", "serious", "critical"}

PAGES = list(app_pages())  # every page's address, from app.py: a new page is checked too
# Each page at its plain address (every check), then the chrome of the addresses that show
# another state of a page (a typed sentence, MiniLM in the sidebar).
# Every page is swept on the sidebar's first-visit default: SmolLM2 in English, Gemma 3 in
# Korean, where they are installed.
CASES = [(path, "") for path in PAGES] + list(CHROME_ADDRESSES.items())
IDS = [f"{path or 'home'}{'-' + query.split('&')[0] if query else ''}" for path, query in CASES]

# Drawn: the script run is over, nothing is still loading, every chart has its SVG.
_SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton]')) return false;
  return [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
    .every(c => c.querySelector('.main-svg'));
}"""


# Two animation frames: the a11y script re-applies its labels on the next one.
_NEXT_FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


def settle(tab) -> None:
    tab.locator("[data-testid=stMain] h1").first.wait_for(timeout=TIMEOUT_MS)
    tab.wait_for_function(_SETTLED_JS, timeout=TIMEOUT_MS)
    tab.evaluate("document.fonts.ready")
    tab.evaluate(_NEXT_FRAMES_JS)


# Which charts fill their box (plotly sized to its column; a hidden one has no box).
_FILLED_JS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')].map(c => {
  const svg = c.querySelector('.main-svg'), box = c.getBoundingClientRect().width;
  return box > 0 && !!svg && Math.abs(svg.getBoundingClientRect().width - box) < 1;
})"""
# Reflowed: every chart that filled its box before the resize fills its new box again
# (Streamlit hands plotly the new width a few frames after the column changed, and plotly
# redraws), and no transition is under way (the sidebar sliding shut below its breakpoint).
_REFLOWED_JS = """(filled) => {
  const charts = [...document.querySelectorAll('[data-testid=stPlotlyChart]')];
  const redrawn = charts.every((c, i) => {
    if (!filled[i]) return true;
    const svg = c.querySelector('.main-svg'), box = c.getBoundingClientRect().width;
    return !box || (!!svg && Math.abs(svg.getBoundingClientRect().width - Math.max(box, 150)) < 1);
  });
  const moving = document.getAnimations().some(a => a.playState === 'running'
    && a.effect && a.effect.getComputedTiming().endTime !== Infinity);
  return redrawn && !moving;
}"""


# The page on screen hidden while the tab widens: a page about to be left is not re-laid out
# and redrawn at 1440 px for nothing (the in-app twin of the about:blank before a load).
# The style sits in the body, so its removal is a change the a11y script sees and re-applies
# its labels on (it skips hidden headings when it numbers their levels).
_HIDE_MAIN_JS = """() => { const s = document.createElement('style'); s.id = 'sweep-leaving';
  s.textContent = '[data-testid=stMain] { display: none !important; }'; document.body.append(s); }"""
_SHOW_MAIN_JS = "() => document.getElementById('sweep-leaving')?.remove()"


def reach(tab, path: str, query: str, lang: str) -> None:
    """The page at 1440 px, settled: reached in-app, by its sidebar link pressed with the
    keyboard, when the last test left a page of this language settled on this tab (the
    session keeps the language); else (the first page of a language, an address with a query,
    after a test that broke off before its last step) loaded at its address. A key, not the pointer: no pointer pressed
    in the page, a focused control shows :focus-visible (the focus ring check)."""
    came_from, tab.left_settled = getattr(tab, "left_settled", None), None
    link = tab.locator(f'[data-testid=stSidebarNav] a[href$="/{path}"]')
    tab.problems.clear()
    if path in TITLES and path and not query and came_from == lang and link.count() == 1:
        tab.evaluate(_HIDE_MAIN_JS)
        tab.set_viewport_size(DESK)
        # the sidebar opens again above its breakpoint: its link takes focus once it is open
        tab.evaluate(_NEXT_FRAMES_JS)
        tab.wait_for_function(_REFLOWED_JS, arg=[], timeout=TIMEOUT_MS)
        link.wait_for(state="visible", timeout=TIMEOUT_MS)
        link.focus()
        tab.wait_for_function("(a) => document.activeElement === a", arg=link.element_handle())
        tab.keyboard.press("Enter")
        # Streamlit keeps the last page's elements until the new run ends: the new page's
        # title, then the run over (settle), so no check reads the page left
        title = translate(TITLES[path], lang)[:12]
        tab.locator("[data-testid=stMain] h1", has_text=title).first.wait_for(
            state="attached", timeout=TIMEOUT_MS
        )
        tab.evaluate(_SHOW_MAIN_JS)
        settle(tab)
    else:
        # the last page left first: widened on screen, it would re-lay out its charts
        tab.goto("about:blank")
        tab.set_viewport_size(DESK)
        tab.goto(f"/{path}?{query + '&' if query else ''}lang={lang}")
        settle(tab)


def narrow(tab, viewport: dict) -> None:
    """The tab at another width: columns and charts reflow (CSS and plotly's own resize, no
    script run); waited for by what the reflow ends in, then the page is settled again."""
    filled = tab.evaluate(_FILLED_JS)
    tab.set_viewport_size(viewport)
    tab.evaluate(_NEXT_FRAMES_JS)  # the resize seen by the page's observers
    tab.wait_for_function(_REFLOWED_JS, arg=filled, timeout=TIMEOUT_MS)
    settle(tab)


@pytest.fixture(scope="module")
def desk(shared_context, app_url):
    """One tab for the whole sweep (of the worker's shared context): each page opened at
    1440 px, then narrowed to 1024, 390 and 720; pages and languages change, the tab stays."""
    tab = shared_context.new_page()
    tab.set_viewport_size(DESK)
    tab.set_default_navigation_timeout(TIMEOUT_MS)  # a busy 2-core machine loads slowly
    yield shared_context, watch_problems(tab, app_url)
    tab.close()


@pytest.fixture
def kept(request, desk, artifacts_dir):
    """The sweep's tab for one test; if the test fails, the tab as it was is kept in
    tests/artifacts/failed-<test>.png (keep_if_failed), as the ``page`` fixture keeps its own."""
    yield desk
    keep_if_failed(request, desk[1], artifacts_dir)


@pytest.fixture(scope="module")
def axe():
    sync = pytest.importorskip("axe_playwright_python.sync_playwright")
    return sync.Axe()


@pytest.fixture(scope="module")
def report(artifacts_dir):
    """Collects every axe run's minor violations; written once the module is done."""
    runs: list[tuple[str, str, int, list[dict]]] = []
    yield runs
    text = render_report(runs)
    (artifacts_dir / "accessibility.md").write_text(text)
    if len(runs) == len(PAGES) * len(LANGUAGES) * len(AXE_WIDTHS):  # the whole matrix
        (ROOT / "docs" / "accessibility.md").write_text(text)


@pytest.fixture(scope="module")
def titles() -> dict[tuple[str, str], str]:
    """(language, path) -> the tab's title, as the sweep found it."""
    return {}


def render_report(runs: list[tuple[str, str, int, list[dict]]]) -> str:
    lines = [
        "# Accessibility: axe-core on every page",
        "",
        "Written by `tests/e2e/test_accessibility.py` (see the README's Accessibility "
        f"section): axe-core, tags {', '.join(TAGS)}, every page in "
        f"{' and '.join(LANGUAGES)} at {' and '.join(f'{w} px' for w in AXE_WIDTHS)} wide, "
        f"plus {', '.join(EXTRA_RULES)}, after the charts are drawn. Moderate, serious and "
        "critical violations fail the suite; the minor ones are listed here.",
        "",
        f"{len(runs)} page views checked.",
        "",
        "| page | language | width | rule | impact | nodes | first node |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    found = 0
    for path, lang, width, violations in runs:
        for v in violations:
            found += 1
            target = " ".join(str(x) for x in v["nodes"][0]["target"])[:80].replace("|", "\\|")
            lines.append(
                f"| /{path} | {lang} | {width} | `{v['id']}` | {v['impact']} "
                f"| {len(v['nodes'])} | `{target}` |"
            )
    if not found:
        lines.append("| – | – | – | none | – | – | – |")
    return "\n".join(lines) + "\n"


def describe(v: dict) -> str:
    nodes = "\n".join(
        f"    {' '.join(map(str, n['target']))[:160]}\n      {n.get('failureSummary', '')[:300]}"
        for n in v["nodes"][:5]
    )
    return f"{v['id']} ({v['impact']}, {len(v['nodes'])} nodes): {v['help']}\n{nodes}"


def run_axe(tab, axe, options: dict) -> list[dict]:
    """axe-core's violations on the page as it is now. Its script (0.5 MB) goes into a page
    once: the phone run finds it there from the desk run on the same load. Only violations
    are asked for, so axe keeps no node lists of what passed."""
    if not tab.evaluate("typeof window.axe !== 'undefined'"):
        tab.evaluate(axe.axe_script)
    options = {**options, "resultTypes": ["violations"]}
    return tab.evaluate("(options) => axe.run(document, options)", options)["violations"]


def axe_problems(tab, axe, report, path: str, lang: str) -> list[str]:
    """axe-core on the page as it is now; minor findings to the report, the rest returned."""
    width = tab.viewport_size["width"]
    violations = run_axe(
        tab, axe, {"runOnly": {"type": "tag", "values": TAGS}, "rules": EXTRA_RULES}
    )
    report.append((path, lang, width, [v for v in violations if v["impact"] not in FAILING]))
    return [f"{width} px: {describe(v)}" for v in violations if v["impact"] in FAILING]


def disabled_label_problems(tab, axe) -> list[str]:
    """The explorer with a mean of heads (its chrome address, at 1440 px): its head list is
    disabled, and Streamlit fades a disabled label to 2.6:1, which axe counts as a serious
    contrast failure (the label is not on the plain address's page, so axe there misses it)."""
    if not tab.locator("[data-testid=stSelectbox] input:disabled").count():
        return ["no disabled head list with a mean of heads"]
    violations = run_axe(tab, axe, {"runOnly": {"type": "rule", "values": ["color-contrast"]}})
    return [describe(v) for v in violations]


def chrome_problems(tab, path: str, lang: str, clipped, name: str, artifacts_dir) -> list[str]:
    """The page's chrome at 1440 px, then the same page at 1024 (Streamlit's layout is CSS: a
    narrower window reflows it without a rerun); the tab is left at 1024 px."""
    found = []
    title = translate(TITLES[path], lang)
    if not tab.locator("[data-testid=stMain] h1", has_text=title[:12]).count():
        found.append(f"no title “{title}”")
    found += text_problems(tab, path, lang)
    for viewport in (DESK, NARROW_DESK):
        if viewport is NARROW_DESK:
            narrow(tab, viewport)
        width = viewport["width"]
        if SCREENSHOTS:  # the first screen, for a person to look at (`make screenshots`)
            tab.screenshot(path=artifacts_dir / f"chrome-{name}-{lang}-{width}.png")
        found += [f"cut at {width} px: {c}" for c in clipped(tab)]
    if path in PAGE_CHECKS:  # last: a hovered chart shows its toolbar
        found += PAGE_CHECKS[path](tab, lang)
    return found


@pytest.mark.timeout(600)  # a page load, two axe runs and every check, on a busy machine
@pytest.mark.parametrize(("path", "query"), CASES, ids=IDS)
@pytest.mark.parametrize("lang", list(LANGUAGES))  # outermost: a language's pages in a row
def test_every_page_in_both_languages_on_every_screen(
    kept, axe, report, titles, clipped_controls, clipped_formulas, artifacts_dir,
    path, query, lang,
):  # fmt: skip
    plain = not query
    name = IDS[CASES.index((path, query))]
    found: dict[str, list[str]] = {}
    context, tab = kept
    reach(tab, path, query, lang)
    if plain:
        # the address keeps the language (a link shared or reloaded opens in it)
        if f"lang={lang}" not in tab.url.split("?", 1)[-1].split("&"):
            found["address"] = [tab.url]
        # the page says its own language, so a screen reader picks the right voice
        if tab.evaluate("document.documentElement.lang") != lang:
            found["html lang"] = [tab.evaluate("document.documentElement.lang")]
        found["axe at a desk"] = axe_problems(tab, axe, report, path, lang)
        titles[(lang, path)] = tab.title()
        if lang == "ko":
            found["English names"] = english_names(context, tab, _allowed())
        if lang == "en" and path in RING_PAGES:  # before anything on the page is clicked
            found["focus ring"] = focus_ring_problems(tab, path)
    token_cost = plain and path == "concept_family"
    if token_cost:
        shot = artifacts_dir / f"token-cost-{lang}-{DESK['width']}.png" if SCREENSHOTS else None
        found["token cost"] = token_cost_problems(tab, lang, shot)
    if path == "explorer" and query:  # a mean of heads: the head list is disabled
        found["disabled label"] = disabled_label_problems(tab, axe)
    if path in TITLES and (query or path not in CHROME_ADDRESSES):
        clipped = lambda t: clipped_controls(t) + clipped_formulas(t)  # noqa: E731
        found["chrome"] = chrome_problems(tab, path, lang, clipped, name, artifacts_dir)
        found["console"] = list(tab.problems)
    if plain:
        tab.mouse.move(0, 0)  # no chart left hovered (the toolbar check hovers one)
        narrow(tab, PHONE)
        found["axe on a phone"] = axe_problems(tab, axe, report, path, lang)
        found["phone"] = phone_problems(tab)
        if token_cost:
            shot = (
                artifacts_dir / f"token-cost-{lang}-{PHONE['width']}.png" if SCREENSHOTS else None
            )
            found["token cost"] += token_cost_problems(tab, lang, shot)
        narrow(tab, ZOOM200)
        found["200 % zoom"] = zoom_problems(tab)
        found["console"] = list(tab.problems)
        tab.left_settled = lang  # the next page in this language can be reached from here
    found = {what: lines for what, lines in found.items() if lines}
    assert not found, f"/{path}?{query} in {lang}:\n" + "\n".join(
        f"{what}:\n  " + "\n  ".join(lines) for what, lines in found.items()
    )


_ALLOWED: set[str] = set()


def _allowed() -> set[str]:
    """allowed_english(), read once (it reads every catalog and example file)."""
    if not _ALLOWED:
        _ALLOWED.update(allowed_english())
    return _ALLOWED


def test_every_page_has_its_own_title_in_its_language(titles):
    """After the sweep: no two pages share a title, each ends with the lab's name in its
    language, and the explorer's says what it is ("Attention Explorer · Attention Lab")."""
    if len(titles) < len(PAGES) * len(LANGUAGES):
        pytest.skip("the sweep above did not visit every page in every language in this run")
    for lang in LANGUAGES:
        own = {path: title for (lg, path), title in titles.items() if lg == lang}
        assert len(set(own.values())) == len(PAGES), f"pages share a title: {own}"
        lab = translate("a11y.page_title", lang, page="").strip(" ·")
        assert all(title.endswith(lab) for title in own.values()), own
        assert own["explorer"] == translate(
            "a11y.page_title", lang, page=translate("nav.explorer", lang)
        )
    assert titles[("en", "explorer")] == "Attention Explorer · Attention Lab"
