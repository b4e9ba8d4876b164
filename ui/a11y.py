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
  long links wrap; on a phone a row of metrics stays a row and wide tables scroll.

The script only adds attributes to what React drew and re-applies them when React draws
again (a MutationObserver); it never moves or removes Streamlit's nodes.
"""

from __future__ import annotations

import json

import streamlit as st

from ui.i18n import current_language, t

FOCUS_COLOUR = "#1a5fb4"  # 6.5:1 on white, 5.9:1 on the sidebar's grey: a visible ring

A11Y_CSS = f"""
:focus-visible {{ outline: 3px solid {FOCUS_COLOUR} !important; outline-offset: 2px; }}
.katex-display[tabindex="0"]:focus-visible {{ outline-offset: 0; }}
[data-testid="stMarkdownContainer"] a {{ overflow-wrap: anywhere; }}
/* a caption is drawn at 60 % opacity: its inline code takes the caption's near-black, since
   the code green at 60 % falls to 3:1 */
[data-testid="stCaptionContainer"] code {{ color: inherit; }}
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
  if (w.__a11yLabObserver) { w.__a11yLabApply(); return; }
  const set = (el, name, value) => { if (el.getAttribute(name) !== value) el.setAttribute(name, value); };
  const apply = () => {
    const c = w.__a11yLab;
    set(document.documentElement, 'lang', c.lang);
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
        ['[data-testid=stTable]', c.table]]) {
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
  w.__a11yLabObserver.observe(document.body, { childList: true, subtree: true });
  w.addEventListener('resize', later);
  apply();
})();
"""


def a11y_html(lang: str, labels: dict[str, str]) -> str:
    """The style sheet and script for ``lang``; ``labels``: texts the script writes."""
    config = json.dumps({"lang": lang, **labels}, ensure_ascii=False)
    config = config.replace("<", "\\u003c").replace(">", "\\u003e")  # cannot close <script>
    return f"<style>{A11Y_CSS}</style><script>{_SCRIPT % config}</script>"


def render_a11y() -> None:
    """Call once per run, from the frame, after the language is known."""
    labels = {
        "upload": t("chrome.upload_button"),
        "formula": t("a11y.formula"),
        "code": t("a11y.code"),
        "table": t("a11y.table"),
    }
    st.html(a11y_html(current_language(), labels), unsafe_allow_javascript=True)
