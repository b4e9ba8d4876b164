"""Shared by every AppTest: a page that asks for a translation no catalog has fails its test.

The page helpers (open a page, read its charts) are in ``tests/app/helpers.py``.
"""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(autouse=True)
def no_missing_translations(request, caplog):
    """Any test here fails if the page asked for a key that no catalog has (a test of the
    fallback itself is marked ``missing_translation_expected``)."""
    caplog.set_level(logging.WARNING, logger="ui.i18n")
    yield
    if request.node.get_closest_marker("missing_translation_expected"):
        return
    missing = [r.getMessage() for r in caplog.get_records("call") if r.name == "ui.i18n"]
    assert missing == []
