"""The Korean words the front-end hook puts in place of Streamlit's English ones."""

from __future__ import annotations

import re

from ui.a11y import SR_KEYS, sr_patterns
from ui.i18n import translate


def test_every_streamlit_string_has_korean_words_that_match_its_english():
    pairs = sr_patterns("ko")
    assert len(pairs) == len(SR_KEYS)
    for (pattern, korean), key in zip(pairs, SR_KEYS, strict=True):
        english = translate(key, "en").replace("$1", "42")
        assert re.fullmatch(pattern, english), (key, pattern)
        assert korean != translate(key, "en"), f"{key} is not translated"


def test_help_and_counts_keep_their_label_and_number():
    pairs = dict(sr_patterns("ko"))
    said = {
        re.sub(pattern, korean.replace("$1", r"\1"), text)
        for text in ("Help for 모델", "6 options available.")
        for pattern, korean in pairs.items()
        if re.fullmatch(pattern, text)
    }
    assert said == {"모델 도움말", "선택지 6개가 있습니다."}


def test_english_pages_keep_streamlit_s_own_words():
    assert sr_patterns("en") == []


def test_an_announcement_cannot_close_its_script():
    from ui.a11y import announce_html

    html = announce_html("Step 1: ‘</script><b>’", ".st-key-x", 3)
    assert html.count("</script>") == 1 and "<b>" not in html
    assert 'data-lab-announce="3"' in html
