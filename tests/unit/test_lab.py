"""LabModel: text in, Trace and decoding steps out, for all three kinds of model."""

import pytest
import torch

from model import TransformerConfig, build_model
from model.runtime.decoding import filter_probs, greedy_decode
from model.runtime.lab import LabModel
from model.runtime.loading import ModelLoadError, load
from model.runtime.types import Encoded

WORDS = ["<pad>", "<bos>", "<eos>", "<unk>", *"abcdefghij"]


class WordTokenizer:
    """The smallest tokenizer that meets LabModel's contract, for these tests only."""

    pad_id, bos_id, eos_id = 0, 1, 2
    special_tokens = frozenset(WORDS[:4])

    def __init__(self, bos: bool):
        self.bos = bos

    def encode(self, text, max_len):
        words = text.split()
        ids = [WORDS.index(w) if w in WORDS else 3 for w in words]
        ids = ([1] if self.bos else []) + ids
        unknown = [w for w in words if w not in WORDS]
        return Encoded(ids[:max_len], self.tokens(ids[:max_len]), unknown, len(ids) > max_len)

    def encode_target(self, text, max_len):
        ids = [WORDS.index(w) for w in text.split()][:max_len]
        return Encoded(ids, self.tokens(ids))

    def tokens(self, ids):
        return [WORDS[i] for i in ids]

    def detokenize(self, ids):
        return " ".join(WORDS[i] for i in ids if WORDS[i] not in self.special_tokens)


def lab(kind, max_len=16, **sizes):
    torch.manual_seed(3)
    cfg = TransformerConfig(
        kind=kind,
        src_vocab_size=len(WORDS),
        tgt_vocab_size=len(WORDS),
        dropout=0.0,
        max_len=max_len,
        **sizes,
    )
    return LabModel(kind, build_model(cfg), WordTokenizer(bos=kind == "decoder"), device="cpu")


def test_stepping_through_greedy_decoding_gives_exactly_translate():
    lm = lab("encoder-decoder")
    steps = list(lm.decode("a b c"))
    ids, _ = greedy_decode(lm.network, torch.tensor([[4, 5, 6]]), 1, 2, len(steps))
    assert [s.token_id for s in steps] == ids[0].tolist()
    assert lm.translate("a b c") == WordTokenizer(False).detokenize([s.token_id for s in steps])
    assert steps[-1].tokens == [s.token for s in steps]


def test_each_step_carries_its_query_row_of_attention():
    lm = lab("encoder-decoder")
    for step in lm.decode("a b c d", max_new_tokens=4):
        assert step.attention["decoder"].shape == (2, 4, step.index + 1)  # <bos> + earlier outputs
        assert step.attention["cross"].shape == (2, 4, 4)
        torch.testing.assert_close(step.probs.sum(), torch.tensor(1.0))


def test_trace_is_teacher_forced_on_the_models_own_output_or_a_given_target():
    lm = lab("encoder-decoder")
    own = lm.trace("a b c")
    out = [s.token for s in lm.decode("a b c") if s.token != "<eos>"]
    assert own.src_tokens == ["a", "b", "c"]
    assert own.tgt_tokens == ["<bos>", *out]
    given = lm.trace("a b c", target="d e")
    assert given.tgt_tokens == ["<bos>", "d", "e"]
    assert given.attention["cross"].shape[-2:] == (3, 3)


def test_decoder_only_trace_covers_prompt_and_continuation():
    lm = lab("decoder")
    t = lm.trace("c a b", target="a b c")
    assert t.src_tokens == [] and t.tgt_tokens == ["<bos>", "c", "a", "b", "a", "b", "c"]
    assert set(t.attention) == {"decoder"}


def test_a_trace_without_predictions_skips_the_head_and_keeps_every_map():
    """The window view of a long text (ui.modern.window_maps) asks for the maps alone: a
    262k-token head over 1,024 positions was more work than Gemma 3's layers."""
    lm = lab("decoder")
    whole = lm.trace("a b c d", max_new_tokens=0)
    maps_only = lm.trace("a b c d", max_new_tokens=0, predictions=False)
    assert whole.predictions is not None and maps_only.predictions is None
    assert maps_only.tgt_tokens == whole.tgt_tokens
    torch.testing.assert_close(maps_only.attention["decoder"], whole.attention["decoder"])


def test_a_trace_of_the_first_layers_keeps_their_maps_and_runs_no_further():
    """The window view needs Gemma 3's first 6 layers of 18 (up to the first global one):
    the maps it keeps are the whole trace's, and a trace with predictions refuses the cut
    (its output head reads the last layer)."""
    lm = lab("decoder", n_decoder_layers=3)
    whole = lm.trace("a b c d", max_new_tokens=0, predictions=False)
    first = lm.trace("a b c d", max_new_tokens=0, predictions=False, n_layers=2)
    assert whole.attention["decoder"].shape[0] == 3 and first.attention["decoder"].shape[0] == 2
    torch.testing.assert_close(first.attention["decoder"], whole.attention["decoder"][:2])
    with pytest.raises(ValueError, match="predictions=False"):
        lm.trace("a b c d", max_new_tokens=0, n_layers=2)


def test_encoder_only_models_trace_but_refuse_to_generate():
    lm = lab("encoder")
    assert lm.trace("a b").attention["encoder"].shape == (2, 4, 2, 2)
    with pytest.raises(ValueError, match="does not generate"):
        next(lm.decode("a b"))


def test_overlong_and_unknown_input_is_reported_not_hidden():
    lm = lab("encoder", max_len=4)
    enc = lm.encode("a b zebra c d e")
    assert enc.truncated and enc.unknown == ["zebra"] and len(enc.ids) == 4
    assert lm.trace("a b zebra c d e").attention["encoder"].shape[-1] == 4


def test_sampling_is_repeatable_with_a_seed_and_respects_top_k():
    lm = lab("encoder-decoder")
    a = [s.token_id for s in lm.decode("a b", strategy="sample", seed=7, top_k=2)]
    b = [s.token_id for s in lm.decode("a b", strategy="sample", seed=7, top_k=2)]
    assert a == b
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    assert filter_probs(probs, 2, None).tolist() == pytest.approx([0.625, 0.375, 0, 0])
    assert filter_probs(probs, None, 0.7).tolist() == pytest.approx([0.625, 0.375, 0, 0])
    with pytest.raises(ValueError, match="temperature"):
        next(lm.decode("a", strategy="sample", temperature=0))


def test_unknown_model_names_and_folders_get_a_readable_error(tmp_path):
    with pytest.raises(ModelLoadError, match="unknown model 'nope'"):
        load("nope")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="not readable JSON"):
        load(tmp_path)
    (tmp_path / "config.json").write_text('{"hello": 1}')
    with pytest.raises(ModelLoadError, match="neither a project checkpoint"):
        load(tmp_path)


def test_every_cached_step_equals_recomputing_the_whole_prefix():
    lm = lab("encoder-decoder")
    steps = list(lm.decode("a b c d"))
    out = " ".join(s.token for s in steps if s.token != "<eos>")
    full = lm.trace("a b c d", target=out)  # one pass over <bos> y1 .. yn, no cache
    for step in steps:
        t = step.index
        for kind in ("decoder", "cross"):
            row = full.attention[kind][:, :, t, : step.attention[kind].shape[-1]]
            torch.testing.assert_close(step.attention[kind], row, atol=1e-5, rtol=1e-5)
        assert torch.all(full.attention["decoder"][:, :, t, t + 1 :] == 0)  # never the future
        if t < len(full.predictions.top_probs):  # the trace keeps each position's top-k
            top = torch.softmax(step.logits, -1).topk(full.predictions.top_ids.shape[1])
            torch.testing.assert_close(
                top.values, full.predictions.top_probs[t], atol=1e-5, rtol=1e-4
            )


def test_decoder_only_steps_read_the_same_logits_as_one_pass_over_prompt_and_output():
    """Each step puts only the newest position through the output head: what it chose from
    is still, to the float, the full pass's row at that position, so greedy is unchanged."""
    lm = lab("decoder")
    prompt = lm.encode("a b c d e").ids
    steps = list(lm.decode("a b c d e"))
    ids = prompt + [s.token_id for s in steps]
    with torch.inference_mode():
        full = lm.network(torch.tensor([ids])).logits[0]  # [L, vocab], every position
    for step in steps:
        row = full[len(prompt) - 1 + step.index]
        torch.testing.assert_close(step.logits, row, atol=1e-5, rtol=1e-5)
        assert step.token_id == int(row.argmax())


@pytest.mark.slow  # among the slowest of its folder (docs/benchmarks.md, the suite)
def test_beam_of_width_one_is_greedy():
    lm = lab("encoder-decoder")
    greedy = [s.token_id for s in lm.decode("a b c")]
    beam = [s.token_id for s in lm.decode("a b c", strategy="beam", beam_width=1)]
    assert beam == greedy


def test_beam_steps_show_the_live_hypotheses_best_first():
    lm = lab("encoder-decoder")
    steps = list(lm.decode("a b c d", strategy="beam", beam_width=3, max_new_tokens=6))
    for step in steps:
        scores = [score for _, score in step.beams]
        assert 1 <= len(step.beams) <= 3 and scores == sorted(scores, reverse=True)
        assert all(score <= 0 for score in scores)  # summed log-probabilities
    assert steps[-1].beams[0][0][: len(steps)] == [s.token for s in steps]


def test_switching_no_head_off_changes_nothing_and_a_head_off_changes_the_output():
    lm = lab("encoder-decoder")
    plain = list(lm.decode("a b c d", max_new_tokens=5))
    same = list(lm.decode("a b c d", max_new_tokens=5, head_mask=lm.head_mask()))
    assert [s.token_id for s in plain] == [s.token_id for s in same]
    torch.testing.assert_close(plain[0].probs, same[0].probs)
    cut = lm.head_mask(
        off=[("cross", 0, h) for h in range(4)] + [("cross", 1, h) for h in range(4)]
    )
    changed = list(lm.decode("a b c d", max_new_tokens=5, head_mask=cut))
    assert not torch.allclose(plain[0].probs, changed[0].probs)


def test_a_head_that_does_not_exist_is_refused_clearly():
    with pytest.raises(ValueError, match="no cross head 9 in layer 1"):
        lab("encoder-decoder").head_mask(off=[("cross", 0, 8)])
    with pytest.raises(ValueError, match="no cross head"):
        lab("decoder").head_mask(off=[("cross", 0, 0)])


def test_teacher_forcing_lines_up_true_prefixes_with_free_running():
    lm = lab("encoder-decoder")
    own = [s.token for s in lm.decode("a b c")]
    other = lm.teacher_forcing("a b c", "j j j")
    # At the first position both see the same prefix, <bos>, so they must agree there.
    assert other[0].true_prefix_end == "<bos>" and other[0].forced == other[0].free == own[0]
    assert [s.free for s in other] == own[: len(other)]
    assert [s.target for s in other] == ["j", "j", "j", "<eos>"]
    assert all(0 <= s.forced_prob <= 1 for s in other)
    with pytest.raises(ValueError, match="no tokens"):
        lm.teacher_forcing("a b c", "")


def test_decoder_only_teacher_forcing_starts_after_the_prompt():
    lm = lab("decoder")
    steps = lm.teacher_forcing("c a b", "a b c")
    assert [s.target for s in steps] == ["a", "b", "c", "<eos>"]
    assert steps[0].true_prefix_end == "b"  # the prompt's last token predicts the first answer
