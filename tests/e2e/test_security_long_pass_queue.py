"""One student cannot stall the others, in Chromium against a served replica (issue 46; the
security test of "a long paste beside short requests", here rather than in tests/security/
to share this folder's one Chromium; tests/security/test_long_pass_queue.py holds the queue's
rules without a browser).

One replica, started as `make serve` starts each (ATTENTION_LAB_SERVED=1, the models root in
ATTENTION_LAB_MODELS). A first student pastes a long text (2,048 tokens, far past the 512
where a pass becomes a long one) into a deep, thin decoder from the root; while it runs, two
more paste texts of their own, one reading the page in Korean and one in English, and each
is told their place in the queue; a fourth student's short sentence is drawn meanwhile, with
no queue at all. The queued ones cancel (the one behind moves up), and the first one too, so
the pass stops at its next layer and no CPU is spent on the rest of it.

The students' browsers ask for reduced motion, which the lab honours (ui/a11y.py): the
running and loading animations of four pages waiting on a busy server were redrawn frame by
frame (a fifth of this test's Chromium CPU-s) and show nothing about the queue."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import time
from pathlib import Path
from urllib.parse import urlencode

import pytest

from deploy.ports import free_port
from deploy.serve import healthy, streamlit_command
from tests.e2e.pagechecks import watch_problems
from ui.i18n import translate

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOKENS = 2048
# Deep and thin: many layers, so the pass takes minutes on two busy cores (the test needs it
# running while three more pages arrive, a minute each on a loaded machine) yet stops within
# a layer once cancelled, long before its end.
LAYERS = 480
WAIT_MS = 240_000


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """A served replica with one long-input folder in its models root: (url, the texts)."""
    from bench.longinput import text_of
    from tests.hf_folders import build_decoder_folder

    base = tmp_path_factory.mktemp("long-queue")
    folder = base / "models" / "long"
    build_decoder_folder(
        "llama",
        folder,
        max_position_embeddings=2 * TOKENS,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        num_key_value_heads=1,
        hidden_size=32,
        intermediate_size=64,
    )
    texts = [text_of(folder, TOKENS, seed=seed) for seed in range(3)]  # three, so none joins
    port = free_port()
    env = {
        **os.environ,
        "ATTENTION_LAB_SERVED": "1",
        "ATTENTION_LAB_MODELS": str(base / "models"),
        "ATTENTION_LAB_PRELOAD": "0",
    }
    log = base / "server.log"
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(log, "w"))
        command = streamlit_command(port, launcher=("streamlit",))
        server = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
        stack.callback(server.wait, 15)
        stack.callback(server.terminate)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while not healthy(url):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield url, texts


def student(browser, url: str, lang: str, model: str, text: str):
    context = browser.new_context(
        viewport={"width": 1440, "height": 900}, base_url=url, reduced_motion="reduce"
    )
    tab = watch_problems(context.new_page(), url)
    tab.goto("/explorer?" + urlencode({"model": model, "lang": lang, "text": text}))
    return context, tab


def shown(tab, text: str | re.Pattern, timeout_ms: int = WAIT_MS) -> None:
    try:
        tab.get_by_text(text, exact=False).first.wait_for(timeout=timeout_ms)
    except Exception as err:  # noqa: BLE001 - say what the page showed instead
        raise AssertionError(f"{text!r} not shown; the page: {tab.inner_text('body')}") from err


@pytest.mark.timeout(900)  # four pages, one of them loading a 480-layer model, on busy cores
def test_a_long_paste_queues_the_next_ones_with_their_place_and_short_inputs_still_draw(
    browser, replica
):
    url, (first_text, ko_text, en_text) = replica
    contexts = []
    try:
        # The first long paste runs: its bar counts attention layers.
        ctx, first = student(browser, url, "en", "folder:long", first_text)
        contexts.append(ctx)
        first.get_by_test_id("stProgress").wait_for(timeout=WAIT_MS)
        bar = first.get_by_test_id("stProgress").inner_text()
        assert f" of {LAYERS}" in bar, bar  # "Reading 2049 tokens: attention layer 3 of 480…"

        # A second, in Korean, waits first in the queue and is told so.
        ctx, ko = student(browser, url, "ko", "folder:long", ko_text)
        contexts.append(ctx)
        shown(ko, translate("background.queued", "ko", place=1))
        # A third, in English, waits behind it.
        ctx, en = student(browser, url, "en", "folder:long", en_text)
        contexts.append(ctx)
        shown(en, translate("background.queued", "en", place=2))

        # A short sentence on the same replica is drawn meanwhile, and never queued.
        ctx, short = student(browser, url, "en", "en2ko", "I study math")
        contexts.append(ctx)
        short.locator("[data-testid=stPlotlyChart] .main-svg").first.wait_for(timeout=WAIT_MS)
        assert "queue" not in short.get_by_test_id("stMain").inner_text()
        # ... while the long pass still runs, its bar still counting layers
        bar = translate("explorer.pass_progress", "en", tokens="§", done="§", n=LAYERS)
        bar = re.compile(re.escape(bar).replace("§", r"\d+"))
        shown(first, bar, 60_000)

        # The Korean student cancels: told so in Korean, offered to start again; the one
        # behind moves up.
        ko.get_by_role("button", name=translate("background.cancel", "ko")).click()
        shown(ko, translate("background.cancelled", "ko"))
        assert ko.get_by_role("button", name=translate("background.start_again", "ko")).count()
        shown(en, translate("background.queued", "en", place=1))
        en.get_by_role("button", name=translate("background.cancel", "en")).click()
        shown(en, translate("background.cancelled", "en"))

        # The first one cancels its running pass, which stops at its next layer.
        first.get_by_role("button", name=translate("background.cancel", "en")).click()
        shown(first, translate("background.cancelled", "en"))
        for tab in (first, ko, en, short):
            assert tab.problems == [], tab.problems
    finally:
        for ctx in contexts:
            ctx.close()
