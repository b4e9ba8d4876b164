"""The step-by-step decoding page, run headless through AppTest."""

from __future__ import annotations

import pytest
import torch
from streamlit.testing.v1 import AppTest

from model import load
from model.runtime.decoding import DecodingRun
from tests.app.helpers import APP, chart, open_page
from ui.i18n import translate
from ui.models import TRACES


def decoding(**query: str) -> AppTest:
    return open_page("decoding", **{"model": "en2ko", **query})


def press(at: AppTest, key: str, times: int = 1) -> AppTest:
    label = translate(f"decoding.{key}", "en")
    for _ in range(times):
        next(b for b in at.button if b.label == label).click().run()
    return at


def output_tokens(at: AppTest) -> str:
    prefix = translate("decoding.output_so_far", "en", tokens="")
    (line,) = [m.value for m in at.markdown if m.value.startswith(prefix)]
    return line[len(prefix) :]


@pytest.fixture
def read_lazily(monkeypatch):
    """Runs decoded only as far as the page reads them, as a real model's are (ui.models
    decodes a toy's whole run at once), and no thread decoding ahead: what the page shows
    is what it decoded itself. No run of an earlier test is kept."""
    monkeypatch.setattr("ui.models.WHOLE_RUN_MAX", 0)
    monkeypatch.setattr("ui.preload.decode_ahead", lambda run: None)
    TRACES.discard(lambda key: not (isinstance(key, tuple) and key[0] == "decode"))


def kept_run(text: str) -> DecodingRun:
    (run,) = [
        TRACES.get(k)
        for k in TRACES.kept_keys()
        if isinstance(k, tuple) and k[:4] == ("decode", "en2ko", "auto", text)
    ]
    return run


def position(at: AppTest) -> str:
    (bar,) = at.get("progress")
    return bar.proto.text


def test_step_three_times_back_once_and_reset(read_lazily):
    """Read lazily: step 0 is drawn after one decoded step, each press decodes one more, and
    until the run has ended the page says only how long it can be."""
    at = decoding(text="I study math at school")
    assert not at.exception and not at.error
    assert translate("decoding.intro", "en") in [c.value for c in at.caption]  # reads a source
    run = kept_run("I study math at school")
    assert run.decoded == 1 and run.total is None
    upto = translate("decoding.total_upto", "en", n=run.budget)
    assert position(at) == translate("decoding.position", "en", step=0, total=upto)
    press(at, "step", 3)
    assert at.session_state["step"] == 3 and at.query_params["step"] == "3"
    assert run.decoded == 3
    assert position(at) == translate("decoding.position", "en", step=3, total=upto)
    press(at, "back")
    assert at.session_state["step"] == 2 and run.decoded == 3
    assert output_tokens(at).split("` `")[0].strip("` ") == "나"
    press(at, "reset")
    assert at.session_state["step"] == 0
    assert translate("decoding.press_step", "en") in [i.value for i in at.info]


def test_stepping_to_the_end_gives_exactly_the_translation(read_lazily):
    """A link to a step past the end, read lazily: the run is decoded to its end, the step
    is the last one, and the length shown is the run's own."""
    at = decoding(text="I study math at school", step="40")
    steps = at.session_state["step"]
    shown = [tok.strip() for tok in output_tokens(at).split("`") if tok.strip()]
    expected = [s.token for s in load("en2ko").decode("I study math at school")]
    assert shown == expected and steps == len(expected)
    assert position(at) == translate("decoding.position", "en", step=steps, total=steps)
    press(at, "step")  # past the end: stays at the end
    assert at.session_state["step"] == steps


def test_the_rest_of_a_run_is_decoded_ahead_once_no_page_is_running(monkeypatch):
    """ui.preload.decode_ahead: one thread per run, waiting for the pages (no quiet time
    here), decodes the steps a whole run has, in the run every reader shares."""
    from tests.unit.test_decoding_run import assert_same_steps
    from ui import preload

    torch.set_num_threads(1)  # bit-equal decodes (tests/unit/test_decoding_run.py: one_thread)
    monkeypatch.setattr(preload, "QUIET_S", 0.0)
    with preload.script_run():  # a page ran, and ended
        pass
    lm = load("en2ko")
    text = "I study math at school"
    run = DecodingRun(lm.decode(text), lm.new_token_budget(text), lm.tgt_tokenizer.eos_id)
    run.upto(1)
    preload.decode_ahead(run)
    threads = list(preload._AHEAD)
    preload.decode_ahead(run)  # already taken: no second thread
    assert not run.take_ahead()
    for thread in threads:
        thread.join(60)
    assert run.done
    assert_same_steps(run.upto(run.total), list(lm.decode(text)))


def test_the_mask_gains_a_row_per_step_and_the_future_stays_grey():
    at = decoding(text="I study math at school")
    for step in (1, 2, 3):
        press(at, "step")
        spec = chart(at, "mask_chart")
        assert len(spec["layout"]["yaxis"]["tickvals"]) == step  # one row per generated token
        # From the second step on, earlier rows have a future: drawn by the grey layer.
        assert len(spec["data"]) == (1 if step == 1 else 2)
        assert spec["layout"]["shapes"][0]["y0"] == step - 1.5  # the new row is outlined


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_every_strategy_generates_and_steps(strategy):
    at = decoding(text="my friend read a book at the library yesterday", strategy=strategy)
    assert not at.exception and not at.error
    press(at, "step", 2)
    assert at.session_state["step"] == 2
    if strategy == "beam":
        assert translate("decoding.beam_rank", "en") in at.dataframe[0].value.columns


def test_sampling_with_a_seed_repeats_itself():
    first = decoding(
        text="I study math at school", strategy="sample", seed="7", temp="1.5", step="5"
    )
    second = decoding(
        text="I study math at school", strategy="sample", seed="7", temp="1.5", step="5"
    )
    assert output_tokens(first) == output_tokens(second)


def test_the_link_restores_strategy_and_step():
    at = decoding(text="I study math at school", strategy="beam", width="3", step="2")
    assert at.segmented_control(key="strategy").value == "beam"
    assert at.slider(key="width").value == 3 and at.session_state["step"] == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "input.empty"), ("<i>I</i> study math", "input.markup_literal")],
)
def test_bad_and_empty_source_text_gets_a_message(text, message):
    at = decoding(text=text)
    assert not at.exception
    shown = [w.value for w in at.warning] + [i.value for i in at.info]
    assert translate(message, "en") in shown


def test_unknown_words_are_named_with_suggestions():
    at = decoding(text="I studdy math at schooll")
    assert not at.exception
    (warning,) = [w.value for w in at.warning]
    assert "studdy" in warning and "study" in warning


def test_switching_heads_off_shows_both_outputs():
    at = decoding(text="I study math at school")
    at.button_group(key="off_cross").set_value([("cross", 0, h) for h in range(4)]).run()
    assert not at.exception
    assert translate("decoding.ablation_result", "en") in [h.value for h in at.subheader]


def test_teacher_forcing_compares_true_prefixes_with_free_running():
    at = decoding(text="I study math at school")
    frame = at.dataframe[-1].value
    assert translate("decoding.forced", "en") in frame.columns
    assert frame[translate("decoding.expected", "en")].tolist()[-1] == "<eos>"
    # a token that differs from the expected one is marked in text, not by colour alone
    expected = frame[translate("decoding.expected", "en")].tolist()
    for column in (translate("decoding.forced", "en"), translate("decoding.free", "en")):
        for got, want in zip(frame[column].tolist(), expected):
            assert got in (want, "—") or got == f"✗ {got[2:]}" and got[2:] != want, (got, want)


def test_a_decoder_only_model_steps_without_cross_attention():
    at = decoding(model="sort", text="3 1 2")
    press(at, "step", 2)
    assert not at.exception and not at.error
    captions = [c.value for c in at.caption]
    assert translate("decoding.no_cross", "en") in captions
    # its intro speaks of the prompt as its own input, not of a source read by cross-attention
    assert translate("decoding.intro_decoder", "en") in captions
    assert translate("decoding.intro", "en") not in captions


def test_an_encoder_only_model_is_sent_to_a_model_that_generates():
    at = decoding(model="minilm")
    assert not at.exception
    assert translate("decoding.encoder_only", "en") in [i.value for i in at.info]


def test_a_folder_transformers_runs_steps_with_greedy_and_sampling_only(hf_folders):
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/decoding.py")
    at.query_params.update({"model": "folder", "text": "the cat sat"})
    at.session_state["model_folder"] = str(hf_folders["bart"])  # GPT-2 now runs in our engine
    at.run()
    assert not at.exception and not at.error
    reason = translate("models.fallback.layout", "en", layout="BART")
    note = translate("models.fallback_note", "en", model_type="BART", reason=reason)
    assert note in [c.value for c in at.caption]
    assert at.segmented_control(key="strategy").options == [
        translate("decoding.strategy.greedy", "en"),
        translate("decoding.strategy.sample", "en"),
    ]
    press(at, "step")
    assert at.session_state["step"] == 1


def test_a_steps_charts_download_as_one_html_file_in_the_pages_language():
    at = decoding(text="I study math at school", lang="ko")
    assert not at.get("download_button")  # step 0: nothing drawn, nothing to save
    at = decoding(text="I study math at school", lang="ko", step="2")
    (button,) = at.get("download_button")
    assert button.proto.label == translate("chart.export_html", "ko")
    assert button.proto.deferred_file_id  # made when clicked
