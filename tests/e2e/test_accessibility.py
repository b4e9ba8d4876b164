"""WCAG 2.2 AA on every page, in both languages, at a desk and on a phone: axe-core.

axe-core comes inside ``axe-playwright-python`` (offline). Each page is opened once per
language in one shared tab of one browser, against the suite's one server; after its
charts are drawn, axe runs at 1440 px, then the same tab is narrowed to 390 px (a phone,
or a desktop at 200 % zoom) and axe runs again. Serious and critical violations fail the
test; moderate and minor ones go to the report, tests/artifacts/accessibility.md (and
docs/accessibility.md when the whole matrix ran), which the README links.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.browser import app_pages
from ui.i18n import LANGUAGES

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 120_000
WIDTHS = {1440: 900, 390: 844}  # width: height; 390 × 844 is a phone
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
EXTRA_RULES = {"heading-order": {"enabled": True}}  # best-practice, not a WCAG tag
FAILING = {"moderate", "serious", "critical"}


PAGES = list(app_pages())  # every page's address, from app.py: a new page is checked too

# Drawn: the script run is over, nothing is still loading, every chart has its SVG.
_SETTLED_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  if (document.querySelector('[data-testid=stStatusWidget], [data-testid=stSkeleton]')) return false;
  return [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
    .every(c => c.querySelector('.main-svg'));
}"""


def settle(tab) -> None:
    tab.locator("[data-testid=stMain] h1").first.wait_for(timeout=TIMEOUT_MS)
    tab.wait_for_function(_SETTLED_JS, timeout=TIMEOUT_MS)
    tab.evaluate("document.fonts.ready")
    tab.wait_for_timeout(300)  # the a11y script re-applies on the next animation frame


@pytest.fixture(scope="module")
def tab(browser, app_url):
    """One tab for the whole module: pages, languages and widths change, the tab stays."""
    context = browser.new_context(viewport={"width": 1440, "height": 900}, base_url=app_url)
    context.set_default_navigation_timeout(TIMEOUT_MS)  # a busy 2-core machine loads slowly
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def axe():
    sync = pytest.importorskip("axe_playwright_python.sync_playwright")
    return sync.Axe()


@pytest.fixture(scope="module")
def report(artifacts_dir):
    """Collects every run's violations; written once the module is done."""
    runs: list[tuple[str, str, int, list[dict]]] = []
    yield runs
    text = render_report(runs)
    (artifacts_dir / "accessibility.md").write_text(text)
    if len(runs) == len(PAGES) * len(LANGUAGES) * len(WIDTHS):  # the whole matrix
        (ROOT / "docs" / "accessibility.md").write_text(text)


def render_report(runs: list[tuple[str, str, int, list[dict]]]) -> str:
    lines = [
        "# Accessibility: axe-core on every page",
        "",
        "Written by `tests/e2e/test_accessibility.py` (see the README's Accessibility "
        f"section): axe-core, tags {', '.join(TAGS)}, every page in "
        f"{' and '.join(LANGUAGES)} at {' and '.join(f'{w} px' for w in WIDTHS)} wide, "
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


@pytest.mark.parametrize("lang", list(LANGUAGES))
@pytest.mark.parametrize("path", PAGES)
def test_no_moderate_serious_or_critical_violations(tab, axe, report, path, lang):
    tab.set_viewport_size({"width": 1440, "height": WIDTHS[1440]})
    tab.goto(f"/{path}?lang={lang}")
    settle(tab)
    serious = []
    for width, height in WIDTHS.items():
        tab.set_viewport_size({"width": width, "height": height})
        settle(tab)
        # the page says its own language, so a screen reader picks the right voice
        assert tab.evaluate("document.documentElement.lang") == lang
        result = axe.run(
            tab,
            options={
                "runOnly": {"type": "tag", "values": TAGS},
                "rules": EXTRA_RULES,
                "resultTypes": ["violations"],
            },
        )
        violations = result.response["violations"]
        report.append((path, lang, width, [v for v in violations if v["impact"] not in FAILING]))
        serious += [f"{width} px: {describe(v)}" for v in violations if v["impact"] in FAILING]
    assert not serious, f"/{path}?lang={lang}\n" + "\n".join(serious)


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_a_disabled_widgets_label_keeps_its_contrast(tab, axe, lang):
    """The explorer with a mean of heads: its head list is disabled, and Streamlit fades a
    disabled label to 2.6:1, which axe counts as a serious contrast failure."""
    tab.set_viewport_size({"width": 1440, "height": WIDTHS[1440]})
    tab.goto(f"/explorer?lang={lang}&agg=mean")
    settle(tab)
    assert tab.locator("[data-testid=stSelectbox] input:disabled").count() >= 1
    result = axe.run(tab, options={"runOnly": {"type": "rule", "values": ["color-contrast"]}})
    assert not result.response["violations"], describe(result.response["violations"][0])
