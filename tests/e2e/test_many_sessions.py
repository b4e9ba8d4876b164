"""A class at once: 4 browser sessions typing and stepping together against one server.

Cross-talk is one session's input drawn in another's page: it shows as soon as two sessions'
script runs overlap, and the barrier makes all four press Enter at the same moment (four
runs at once on a 2-core machine, each with 3 others' words to catch). Four catch it as
surely as eight or sixteen did, in half the time of eight; `make bench` (bench.loadtest)
still times sixteen.

The students' browsers ask for reduced motion, which the lab honours (ui/a11y.py: nothing
animates): the status and loading animations, redrawn frame by frame while four pages wait
for their runs, took about 15 of this test's 50 Chromium CPU-s on the cores the server needs,
and say nothing about whose words a page shows."""

from __future__ import annotations

import json
import threading

import pytest

from bench.classcore import chromium_for_tests
from bench.loadtest import run_sessions

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("app-server-b")]

SESSIONS = 4


def test_four_students_at_once_each_see_only_their_own_sentence(app_url, artifacts_dir):
    chromium = chromium_for_tests()
    if not chromium.exists():
        pytest.skip(f"needs Debian's Chromium at {chromium}: apt-get install -y chromium")
    pytest.importorskip("playwright.async_api")
    # Its own thread: the async API needs an event loop the sync fixtures do not own.
    out: dict = {}
    worker = threading.Thread(
        target=lambda: out.update(run_sessions(app_url, SESSIONS, chromium, reduced_motion=True))
    )
    worker.start()
    worker.join()
    (artifacts_dir / "many-sessions.json").write_text(json.dumps(out, indent=2))
    assert out["errors"] == []  # checked first: a session that timed out has no timings
    assert out["mixed"] == []  # nobody saw another student's words or digits
    assert out["explorer_enter"]["n"] == SESSIONS
    assert out["decoding_step"]["n"] == SESSIONS * 3
    print(  # after the checks: with no timings there is nothing to print
        f"\n{SESSIONS} sessions: Enter->heatmap p50 {out['explorer_enter']['p50_s']:.2f} s "
        f"p95 {out['explorer_enter']['p95_s']:.2f} s; Step p50 {out['decoding_step']['p50_s']:.2f} s "
        f"p95 {out['decoding_step']['p95_s']:.2f} s; all p50 {out['all']['p50_s']:.2f} s "
        f"p95 {out['all']['p95_s']:.2f} s"
    )
