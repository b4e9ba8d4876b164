"""What assistive technology needs from the frame, which Streamlit does not give by itself.

One small style sheet and script, sent once per run from app.py (``render_a11y``):

- ``<html lang>`` follows the UI language (WCAG 3.1.1), so a screen reader reads Korean
  pages with a Korean voice; it changes when the language is switched.
- The sectioned sidebar navigation is a valid list for assistive technology: Streamlit puts
  each section's ``div`` between the ``ul`` and its ``li``s; the ``ul`` is made
  presentational and every section a list of its own, named by its header.
- A region that scrolls sideways (a wide formula on a phone) can be reached and scrolled
  with the keyboard (it gets ``tabindex="0"``).
- Buttons whose text our style sheet replaces (the uploader's "Upload") keep a name, and
  labels lose the icon shortcodes (":material/translate:") Streamlit leaves in aria-label.
- Focus is always visible; nothing animates for readers who asked for reduced motion;
  long links wrap; on a phone a row of metrics stays a row and wide tables scroll; charts
  side by side line up below summaries of different lengths.

- Heading levels follow each other without a gap (``aria-level`` on a heading that skips).
- Focus stays on what is seen: a collapsed sidebar is ``inert`` (out of the Tab order at
  every width); opening it moves focus into it, Escape closes it and gives focus back to
  its button. Controls whose real input is hidden (toggles, radios, checkboxes) or whose
  ring a parent clips (text boxes, select boxes) draw the ring on the box that is seen.
- What Streamlit says to assistive technology in English ("Skip to main content", "Help
  for …", "Expand sidebar", "progress", "Press Enter to submit form", "6 options
  available.") is said in the page's language: ``sr_patterns`` from the catalogs.
- One polite live region (``announce``) says what a press changed, and can move the focus
  to the new content.

The script only adds attributes (and swaps Streamlit's English strings) on what React drew
and re-applies them when React draws again (a MutationObserver); it never moves or removes
Streamlit's nodes. The live region is the lab's own node, outside React's tree.
"""

from __future__ import annotations

import itertools
import json
import re

import streamlit as st

from ui.i18n import LANGUAGES, current_language, t, translate

FOCUS_COLOUR = "#1a5fb4"  # 6.5:1 on white, 5.9:1 on the sidebar's grey: a visible ring

A11Y_CSS = f"""
:focus-visible {{ outline: 3px solid {FOCUS_COLOUR} !important; outline-offset: 2px; }}
/* a toggle's, radio's or checkbox's input is hidden: its ring goes on the label that is seen */
label:has(input:focus-visible), label[data-focus-visible] {{
  outline: 3px solid {FOCUS_COLOUR} !important; outline-offset: 2px; border-radius: 4px;
}}
/* a text box's or select box's own ring is cut to its 1 px border by the box around it:
   the ring is drawn inside the box's border, where nothing clips it */
[data-testid$="RootElement"]:has(:is(input, textarea):focus-visible),
[data-testid="stNumberInputContainer"]:has(input:focus-visible),
.react-aria-ComboBox > div:has(input:focus-visible) {{
  outline: 3px solid {FOCUS_COLOUR} !important; outline-offset: -3px;
}}
[data-testid$="RootElement"] :is(input, textarea):focus-visible,
[data-testid="stNumberInputContainer"] input:focus-visible,
.react-aria-ComboBox input:focus-visible {{ outline: none !important; }}
/* a slider's range input is hidden: the ring goes round its thumb */
[data-testid="stSlider"] div:has(> div > input[type="range"]:focus-visible) {{
  outline: 3px solid {FOCUS_COLOUR} !important; outline-offset: 2px;
}}
/* the sidebar's collapse button is shown on hover only: also while the focus is in it */
[data-testid="stSidebar"]:focus-within [data-testid="stSidebarCollapseButton"] {{
  visibility: visible !important; display: inline-flex !important;
}}
/* a tab's ring is drawn inside it: the tab list clips what lies outside */
[role="tab"]:focus-visible {{ outline-offset: -3px; }}
/* every target at least 24 × 24 px (2.5.8): help "?", heading links, a multiselect's
   "Remove" and "Open", the tab list's scroll arrows, the chart toolbar's buttons */
[data-testid="stTooltipHoverTarget"] button, [data-testid="stHeaderActionElements"] a,
[data-testid="stMultiSelect"] button, [data-testid^="stTabsScroll"] {{
  min-width: 24px !important; min-height: 24px !important;
  display: inline-flex; align-items: center; justify-content: center;
}}
[data-testid="stPlotlyChart"] .modebar-btn {{ min-height: 24px; min-width: 24px; }}
/* On a phone (or at 200 % zoom) the chart toolbar covers titles and legends: it shows
   while the chart is touched, hovered or has the keyboard focus, and never takes a tap
   meant for what lies under it otherwise */
@media (max-width: 640px), (hover: none) {{
  [data-testid="stPlotlyChart"] .modebar-container {{ opacity: 0; pointer-events: none; }}
  [data-testid="stPlotlyChart"]:hover .modebar-container,
  [data-testid="stPlotlyChart"]:focus-within .modebar-container {{
    opacity: 1; pointer-events: auto;
  }}
}}
/* charts side by side: a chart's "show as a table" and the chart itself go to the foot of
   their column, so the charts of a row line up however long each summary above them is */
[data-testid="stColumn"] [data-testid="stVerticalBlock"] > [data-testid="stLayoutWrapper"]:has(
  > [data-testid="stExpander"]):has(
  + [data-testid="stElementContainer"]:last-child [data-testid="stPlotlyChart"]) {{
  margin-top: auto;
}}
/* columns of charts that need room (in a container keyed "stack_narrow_…") stack whenever
   the container is under 900 px (a 1024 px screen beside the sidebar, 200 % zoom), not
   only on a phone as Streamlit's own columns do */
[class*="st-key-stack_narrow_"] {{ container-type: inline-size; }}
@container (max-width: 900px) {{
  [class*="st-key-stack_narrow_"] [data-testid="stHorizontalBlock"] {{ flex-direction: column; }}
  [class*="st-key-stack_narrow_"] [data-testid="stColumn"] {{
    width: 100% !important; min-width: 100% !important; flex: 1 1 auto !important;
  }}
}}
/* the lab's live region: read out, not seen */
.lab-sr-only {{
  position: absolute !important; width: 1px; height: 1px; padding: 0; margin: -1px;
  overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0;
}}
[data-testid="stElementContainer"]:has([data-lab-announce]) {{ display: none; }}
.katex-display[tabindex="0"]:focus-visible {{ outline-offset: 0; }}
/* a formula wider than the screen shows that it scrolls: a shadow at each edge with more
   to see (the white covers sit on the content and move with it) */
.katex-display[tabindex="0"], [data-testid="stMain"] pre[tabindex="0"] {{
  background:
    linear-gradient(to right, #fff 30%, rgba(255, 255, 255, 0)) left / 40px 100% no-repeat local,
    linear-gradient(to left, #fff 30%, rgba(255, 255, 255, 0)) right / 40px 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%, rgba(0, 0, 0, 0.35), transparent) left / 16px 100% no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%, rgba(0, 0, 0, 0.35), transparent) right / 16px 100% no-repeat scroll;
  scrollbar-width: thin;
}}
[data-testid="stMarkdownContainer"] a {{ overflow-wrap: anywhere; }}
/* a caption is drawn at 60 % opacity: its inline code takes the caption's near-black, since
   the code green at 60 % falls to 3:1 */
[data-testid="stCaptionContainer"] code {{ color: inherit; }}
/* a disabled widget's label stays readable: Streamlit fades it to 40 % (2.6:1 on white);
   62 % is 5.3:1 and still lighter than a live label */
[data-testid="stElementContainer"]:has(input:disabled, [role="slider"][aria-disabled="true"])
  [data-testid="stWidgetLabel"] {{ color: rgba(17, 17, 17, 0.62); }}
/* long links wrap instead of ending in an ellipsis (a page link's label included) */
[data-testid="stPageLink-NavLink"] span, [data-testid="stPageLink-NavLink"] p,
[data-testid="stPageLink-NavLink"] [data-testid="stMarkdownContainer"] {{
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
}}
[data-testid="stPageLink-NavLink"] {{ height: auto; }}
/* a static table wider than the screen scrolls inside itself instead of cutting columns */
[data-testid="stTable"] {{ overflow-x: auto; max-width: 100%; }}
/* Phones and 200 % zoom: a row of metrics stays one row, not three screen-high stacks, so
   the exercise below it starts on the first screen */
@media (max-width: 640px) {{
  [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stMetric"]) {{
    flex-wrap: nowrap !important; gap: 0.75rem;
  }}
  [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stMetric"])
    > [data-testid="stColumn"] {{ min-width: 0 !important; width: auto !important; flex: 1 1 0 !important; }}
  [data-testid="stMetricValue"] {{ font-size: 1.6rem; }}
  [data-testid="stMetricLabel"] * {{
    white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  }}
}}
@media (prefers-reduced-motion: reduce) {{
  *, *::before, *::after {{
    animation-duration: 0.01ms !important;
    animation-iteration-count: 1 !important;
    transition-duration: 0.01ms !important;
    scroll-behavior: auto !important;
  }}
}}
"""

_SCRIPT = r"""
(() => {
  const cfg = %s;
  const w = window;
  w.__a11yLab = cfg;
  document.documentElement.lang = cfg.lang;
  cfg.sr = cfg.sr.map(([re, to]) => [new RegExp(re), to]);
  cfg.back = cfg.back.map(([re, to]) => [new RegExp(re), to]);
  if (w.__a11yLabObserver) { w.__a11yLabApply(); return; }
  const set = (el, name, value) => { if (el.getAttribute(name) !== value) el.setAttribute(name, value); };
  const say = (text) => {  // Streamlit's English, in the page's language (or null)
    for (const [re, to] of w.__a11yLab.sr) if (re.test(text)) return text.replace(re, to);
    return null;
  };
  const unsay = (text) => {  // on an English page: a translation left behind, in English
    for (const [re, to] of w.__a11yLab.back) if (re.test(text)) return text.replace(re, to);
    return null;
  };
  const live = () => {
    let region = document.getElementById('lab-live');
    if (!region) {
      region = document.createElement('div');
      region.id = 'lab-live';
      region.className = 'lab-sr-only';
      region.setAttribute('role', 'status');
      region.setAttribute('aria-live', 'polite');
      region.setAttribute('aria-atomic', 'true');
      document.body.appendChild(region);
    }
    set(region, 'aria-label', w.__a11yLab.live);
    return region;
  };
  const idle = () => document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state') === 'notRunning';
  // Say ``text`` in the live region (again, even when it is the same text as last time);
  // then, once the run is over, move the focus to ``focus`` (a selector) if given.
  w.__labAnnounce = (text, focus) => {
    const region = live();
    region.textContent = '';
    setTimeout(() => { region.textContent = text; }, 150);
    if (!focus) return;
    let tries = 0;
    const move = () => {
      const target = [...document.querySelectorAll(focus)].pop();
      if (target && idle()) {
        if (!target.matches('a, button, input, select, textarea, [tabindex]')) target.setAttribute('tabindex', '-1');
        target.focus({ preventScroll: false });
      } else if (tries++ < 100) setTimeout(move, 100);
    };
    setTimeout(move, 50);
  };
  const sidebar = { open: null };
  const SIDEBAR = '[data-testid=stSidebar]';
  const EXPAND = '[data-testid=stExpandSidebarButton]';
  const COLLAPSE = '[data-testid=stSidebarCollapseButton] button';
  const focusable = 'a[href], button:not([disabled]), input:not([disabled]), textarea, select, [tabindex]:not([tabindex="-1"])';
  const placeSidebar = () => {
    const bar = document.querySelector(SIDEBAR);
    if (!bar) return;
    const open = bar.getAttribute('data-collapsed') !== 'true';
    if (open) { if (bar.hasAttribute('inert')) bar.removeAttribute('inert'); }
    else if (!bar.hasAttribute('inert')) bar.setAttribute('inert', '');
    if (sidebar.open === null || sidebar.open === open) { sidebar.open = open; return; }
    sidebar.open = open;
    const active = document.activeElement;
    if (open && (!active || active === document.body || active.closest(EXPAND))) {
      let tries = 0;  // its contents may be drawn a few frames after it opens
      const enter = () => {
        const first = [...bar.querySelectorAll(focusable)].find(e => e.checkVisibility({ visibilityProperty: true }));
        if (first) first.focus();
        if ((!first || document.activeElement !== first) && tries++ < 40) setTimeout(enter, 50);
      };
      enter();
    } else if (!open && (!active || active === document.body || bar.contains(active))) {
      document.querySelector(EXPAND)?.focus();
    }
  };
  document.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape' || e.defaultPrevented) return;
    const bar = document.querySelector(SIDEBAR);
    if (!bar || bar.getAttribute('data-collapsed') === 'true') return;
    const active = document.activeElement;
    if (!bar.contains(active) || active.getAttribute('aria-expanded') === 'true') return;
    const button = bar.querySelector(COLLAPSE) || document.querySelector(COLLAPSE);
    if (button) { e.preventDefault(); button.click(); }
  });
  // What we replaced, so a switch back to English (React does not redraw a string it thinks
  // it already wrote) restores Streamlit's own words: node -> {attribute: [english, said]}.
  const replaced = new WeakMap();
  const reword = (node, name, current, write) => {
    const seen = replaced.get(node) || {};
    const [english, said] = seen[name] || [];
    const own = current === said ? english : current;  // React may have written anew
    const now = say(own);
    if (now !== null) {
      seen[name] = [own, now];
      replaced.set(node, seen);
      if (current !== now) write(now);
    } else {
      // Back to Streamlit's words. A label React redrew while the old language's script
      // still ran is translated under no record of ours: read back from the catalog.
      const english = unsay(own) ?? own;
      if (current !== english) write(english);
    }
  };
  const translateText = (root) => {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.nodeValue.trim()) continue;
      reword(node, 'text', node.nodeValue.trim(), (text) => { node.nodeValue = text; });
    }
  };
  const apply = () => {
    const c = w.__a11yLab;
    set(document.documentElement, 'lang', c.lang);
    live();
    placeSidebar();
    for (const name of ['aria-label', 'placeholder', 'title', 'aria-description']) {
      for (const el of document.querySelectorAll(`[${name}]`)) {
        if (el.closest('.js-plotly-plot')) continue;  // the toolbar has its own locale
        reword(el, name, el.getAttribute(name), (text) => el.setAttribute(name, text));
      }
    }
    for (const el of document.querySelectorAll('[data-testid=stSkipToContent], [data-testid=InputInstructions], [aria-live]:not(#lab-live), [role=status]:not(#lab-live), [role=log]')) {
      translateText(el);
    }
    // Heading levels in order: a page's st.subheader (h3) right under its title (h1) is
    // said as level 2, so a screen reader's list of headings skips no level.
    const open = [];  // the headings this one sits under: [its own level, the level said]
    for (const h of document.querySelectorAll('h1, h2, h3, h4, h5, h6')) {
      if (!h.checkVisibility()) continue;
      const own = Number(h.tagName[1]);
      while (open.length && open[open.length - 1][0] >= own) open.pop();
      const level = open.length ? open[open.length - 1][1] + 1 : Math.min(own, 1);
      if (level !== own) set(h, 'aria-level', String(level));
      else if (h.hasAttribute('aria-level')) h.removeAttribute('aria-level');
      open.push([own, level]);
    }
    // A chart speaks through its name (the summary) and the table before it: the drawing's
    // nodes (unnamed graphics, loose axis text) are hidden from assistive technology.
    for (const svg of document.querySelectorAll('[data-testid=stPlotlyChart] svg.main-svg')) {
      set(svg, 'aria-hidden', 'true');
    }
    // A heatmap's numbers are drawn only where every cell can hold its number (a phone's
    // narrow cells made them overlap); the hover and the table still give each value.
    for (const layer of document.querySelectorAll('[data-testid=stPlotlyChart] g.hm')) {
      const labels = [...layer.querySelectorAll('.heatmap-label text')];
      if (labels.length < 2 || labels[0].style.display === 'none') continue;
      const boxes = labels.map(l => l.getBBox());
      const gap = (values) => {
        const sorted = [...new Set(values.map(x => Math.round(x)))].sort((a, b) => a - b);
        let least = Infinity;
        for (let i = 1; i < sorted.length; i++) least = Math.min(least, sorted[i] - sorted[i - 1]);
        return least;
      };
      const wide = gap(boxes.map(b => b.x + b.width / 2)), high = gap(boxes.map(b => b.y + b.height / 2));
      if (boxes.some(b => b.width > wide - 2 || b.height > high)) {
        for (const l of labels) l.style.display = 'none';
      }
    }
    // Tick labels closer than their letters allow (a long sentence's tokens on a phone) are
    // thinned to every k-th, k from the spacing the chart has now; the hover still names
    // every token. Labels thinned before are shown again first, for a chart grown wider.
    for (const axis of document.querySelectorAll('[data-testid=stPlotlyChart] g.xaxislayer-above, [data-testid=stPlotlyChart] g.yaxislayer-above')) {
      const labels = [...axis.querySelectorAll('text')].filter(l => l.textContent.trim());
      for (const l of labels) if (l.hasAttribute('data-lab-thinned')) { l.removeAttribute('data-lab-thinned'); l.style.removeProperty('display'); }
      if (labels.length < 3) continue;
      const [a, b] = [labels[0].getBoundingClientRect(), labels[1].getBoundingClientRect()];
      if (!a.width || !b.width) continue;
      const across = axis.classList.contains('xaxislayer-above');
      const step = across ? Math.abs((b.left + b.right - a.left - a.right) / 2)
        : Math.abs((b.top + b.bottom - a.top - a.bottom) / 2);
      const turn = /rotate\((-?[\d.]+)/.exec(labels[0].getAttribute('transform') || '');
      const angle = (turn ? Math.abs(Number(turn[1])) %% 180 : 0) * Math.PI / 180;
      const size = parseFloat(getComputedStyle(labels[0]).fontSize) || 12;
      const need = angle > 0.02 ? 1.25 * size / Math.sin(angle)  // lines 1.25 em apart (Hangul is a full em)
        : 4 + Math.max(...labels.map(l => (across ? l.getBoundingClientRect().width : l.getBoundingClientRect().height)));
      const k = step > 0 ? Math.ceil(need / step) : 1;
      if (k < 2) continue;
      labels.forEach((l, i) => { if (i %% k) { l.setAttribute('data-lab-thinned', ''); l.style.display = 'none'; } });
    }
    // "show as a table": the table is named after the chart it stands for
    for (const frame of document.querySelectorAll('[data-testid=stExpander] [data-testid=stDataFrame]')) {
      const summary = frame.closest('[data-testid=stExpander]').querySelector('summary');
      const words = summary && [...summary.querySelectorAll('[data-testid=stMarkdownContainer]')]
        .map(e => e.innerText.trim()).join(' ');
      const said = words && words.replace(` (${c.showTable})`, '');
      if (said) { set(frame, 'role', 'group'); set(frame, 'aria-label', c.tableName.replace('{summary}', said)); }
    }
    // an icon beside a label's words is decoration: "memory icon" is not read out
    for (const el of document.querySelectorAll('span[role=img][aria-label$=" icon"]')) {
      const owner = el.parentElement?.closest('p, label, button, a, li, summary, [data-testid=stWidgetLabel], [data-testid=stMarkdownContainer], [data-testid=stAlertContainer], [role=option], [data-baseweb=select]');
      if (owner && owner.textContent.replace(el.textContent, '').trim()) set(el, 'aria-hidden', 'true');
    }
    for (const ul of document.querySelectorAll('[data-testid=stSidebarNavItems]')) {
      const sections = [...ul.children].filter(e => e.tagName === 'DIV');
      if (!sections.length) continue;
      set(ul, 'role', 'none');
      sections.forEach((section, i) => {
        set(section, 'role', 'list');
        const header = section.querySelector('[data-testid=stNavSectionHeader]');
        if (header) {
          if (!header.id) header.id = 'lab-nav-section-' + i;
          set(header, 'role', 'none');
          set(section, 'aria-labelledby', header.id);
        }
      });
    }
    for (const [selector, label] of [['.katex-display', c.formula], ['[data-testid=stMain] pre', c.code],
        ['[data-testid=stTable], [data-testid=stTable] > div', c.table]]) {
      for (const el of document.querySelectorAll(selector)) {
        if (el.scrollWidth > el.clientWidth + 1) {
          set(el, 'tabindex', '0'); set(el, 'role', 'group'); set(el, 'aria-label', label);
        } else if (el.getAttribute('tabindex') === '0') {
          el.removeAttribute('tabindex'); el.removeAttribute('role'); el.removeAttribute('aria-label');
        }
      }
    }
    // a label's icon shortcode is drawn as an icon but read out as ":material/translate:"
    for (const el of document.querySelectorAll('[aria-label*=":material/"]')) {
      set(el, 'aria-label', el.getAttribute('aria-label').replace(/:material\/[a-z0-9_]+:\s*/g, ''));
    }
    for (const b of document.querySelectorAll('[data-testid=stFileUploaderDropzone] button')) {
      set(b, 'aria-label', c.upload);
    }
  };
  let queued = false;
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; apply(); }); } };
  w.__a11yLabApply = apply;
  w.__a11yLabObserver = new MutationObserver(later);
  w.__a11yLabObserver.observe(document.body, {
    childList: true, subtree: true, characterData: true,
    attributes: true, attributeFilter: ['data-collapsed', 'aria-label', 'placeholder'],
  });
  w.addEventListener('resize', later);
  apply();
})();
"""


def a11y_html(lang: str, labels: dict[str, str]) -> str:
    """The style sheet and script for ``lang``; ``labels``: texts the script writes."""
    config = json.dumps({"lang": lang, **labels}, ensure_ascii=False)
    config = config.replace("<", "\\u003c").replace(">", "\\u003e")  # cannot close <script>
    return f"<style>{A11Y_CSS}</style><script>{_SCRIPT % config}</script>"


# Streamlit's own English strings for assistive technology (and a few seen ones), each a
# catalog key whose English text is what Streamlit writes; "$1" stands for a part kept.
SR_KEYS = (
    "a11y.sr.skip",
    "a11y.sr.sidebar",
    "a11y.sr.collapse_sidebar",
    "a11y.sr.expand_sidebar",
    "a11y.sr.app_pages",
    "a11y.sr.help_for",
    "a11y.sr.open",
    "a11y.sr.close",
    "a11y.sr.link_to_heading",
    "a11y.sr.progress",
    "a11y.sr.clear_all",
    "a11y.sr.clear_value",
    "a11y.sr.remove",
    "a11y.sr.option_available",
    "a11y.sr.options_available",
    "a11y.sr.no_options",
    "a11y.sr.enter_submit",
    "a11y.sr.enter_apply",
    "a11y.sr.ctrl_enter_submit",
    "a11y.sr.ctrl_enter_apply",
    "a11y.sr.choose_option",
    "a11y.sr.choose_options",
    "a11y.sr.show_hide_columns",
    "a11y.sr.download_csv",
    "a11y.sr.search",
    "a11y.sr.fullscreen",
    "a11y.sr.main_menu",
    "a11y.sr.increment",
    "a11y.sr.decrement",
    "a11y.sr.selected_values",
    "a11y.sr.file_upload",
    "a11y.sr.scroll_tabs_left",
    "a11y.sr.scroll_tabs_right",
)


def sr_patterns(lang: str) -> list[tuple[str, str]]:
    """(JavaScript regex of Streamlit's English string, the text in ``lang``) pairs; none
    for English. "$1" in a catalog text is the part of the string that is kept (a label,
    a count)."""
    if lang == "en":
        return []
    pairs = []
    for key in SR_KEYS:
        english = translate(key, "en")
        pattern = re.escape(english).replace(re.escape("$1"), "(.+?)")
        pairs.append((f"^{pattern}$", translate(key, lang)))
    return pairs


def sr_back_patterns(lang: str) -> list[tuple[str, str]]:
    """On an English page: (JavaScript regex of each other language's text, Streamlit's
    English) pairs, so a translation left on a node React redrew during the switch (a help
    button said "Model 도움말" after a switch to English, one time in three) is put back."""
    if lang != "en":
        return []
    pairs = []
    for other in LANGUAGES:
        if other == "en":
            continue
        for key in SR_KEYS:
            said = translate(key, other)
            pattern = re.escape(said).replace(re.escape("$1"), "(.+?)")
            pairs.append((f"^{pattern}$", translate(key, "en")))
    return pairs


def render_a11y() -> None:
    """Call once per run, from the frame, after the language is known."""
    lang = current_language()
    labels = {
        "upload": t("chrome.upload_button"),
        "formula": t("a11y.formula"),
        "code": t("a11y.code"),
        "table": t("a11y.table"),
        "live": t("a11y.sr.live"),
        "tableName": t("a11y.table_name", summary="{summary}"),
        "showTable": t("a11y.show_table"),
        "sr": sr_patterns(lang),
        "back": sr_back_patterns(lang),
    }
    st.html(a11y_html(lang, labels), unsafe_allow_javascript=True)


def announce(text: str, *, focus: str | None = None) -> None:
    """Say ``text`` in the page's polite live region (a screen reader reads it out once),
    and, when ``focus`` is a CSS selector, move the keyboard focus to the last element it
    matches once the run is drawn (the feedback after Check, the class after Join).

    Call it in the run that follows the press, only when something changed, and last in
    the page or fragment (so no element after it moves); the same text said twice in a
    row is read out twice (a second identical wrong answer).
    """
    st.html(announce_html(text, focus, next(_COUNTER)), unsafe_allow_javascript=True)


def announce_html(text: str, focus: str | None, n: int) -> str:
    """The element ``announce`` sends: ``n`` makes each one new, so its script runs again.
    ``text`` may hold a student's tokens: JSON with "<" and ">" escaped cannot leave the
    script."""
    args = json.dumps([text, focus], ensure_ascii=False)
    args = args.replace("<", "\\u003c").replace(">", "\\u003e")
    return (
        f'<span data-lab-announce="{int(n)}" hidden></span>'
        f"<script>window.__labAnnounce && window.__labAnnounce(...{args});</script>"
    )


_COUNTER = itertools.count()
