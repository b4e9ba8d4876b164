"""load(folder) on local Hugging Face folders: BERT in our encoder, GPT-2 in our decoder (its
parity with transformers: test_decoder_folders.py), the rest through transformers.

Tiny random models are built into temporary folders with transformers' own classes and
save_pretrained, each with a tokenizer beside it; nothing touches the network.
"""

import json
import shutil
import socket

import pytest
import torch
from transformers import (
    BertModel,
)

from model import LabModel, ModelLoadError, load
from model.analysis.tokens import hide_special_tokens, merge_subwords
from model.hf.fallback import HFLabModel
from tests.tolerance import assert_close_f32


@pytest.fixture(scope="module")
def folders(hf_folders):
    """name -> folder of a tiny random model with its tokenizer (built once per session)."""
    return hf_folders


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Every load here must work, or fail, without opening a connection."""

    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def assert_rows_sum_to_one(weights: torch.Tensor) -> None:
    rows = weights.sum(-1)
    assert_close_f32(rows, torch.ones_like(rows), atol=1e-5)


# --- BERT layout: our own encoder ------------------------------------------------------------


def test_bert_folder_runs_in_our_encoder_and_equals_transformers(folders):
    lm = load(folders["bert"], device="cpu")
    assert isinstance(lm, LabModel) and lm.kind == "encoder" and lm.max_len == 64
    text = "attention is all you need"
    trace = lm.trace(text, stages=True)
    assert trace.stages["encoder"]["weights"].shape == (2, 4, 7, 7)
    ref_model = BertModel.from_pretrained(folders["bert"], attn_implementation="eager").eval()
    with torch.inference_mode():
        ref = ref_model(input_ids=torch.tensor([lm.encode(text).ids]), output_attentions=True)
        hidden = lm.network.encode(torch.tensor([lm.encode(text).ids]))
    assert_close_f32(trace.attention["encoder"], torch.stack(ref.attentions)[:, 0], atol=1e-4)
    assert_close_f32(hidden, ref.last_hidden_state, atol=1e-4)


# --- fallback: transformers' own eager attention ---------------------------------------------


def test_an_encoder_our_code_cannot_map_falls_back_to_transformers(folders):
    lm = load(folders["distilbert"], device="cpu")
    assert isinstance(lm, HFLabModel) and lm.kind == "encoder"
    # It says what it cannot show, and why.
    assert "'distilbert' is not one Attention Lab maps" in lm.info["note"]
    assert "the four attention stages" in lm.info["note"]
    trace = lm.trace("the cat sat")
    assert trace.src_tokens == ["[CLS]", "the", "cat", "sat", "[SEP]"] and trace.tgt_tokens == []
    assert set(trace.attention) == {"encoder"}
    assert trace.attention["encoder"].shape == (2, 4, 5, 5)
    assert trace.attention["encoder"].dtype == torch.float32
    assert_rows_sum_to_one(trace.attention["encoder"])
    with pytest.raises(ValueError, match="does not generate"):
        lm.translate("the cat")


def test_gpt2_folder_traces_causal_decoder_attention(folders):
    lm = load(folders["gpt2"], device="cpu")
    assert isinstance(lm, LabModel) and lm.kind == "decoder" and lm.max_len == 48
    assert lm.info["engine"] == "attention-lab" and lm.info["model_type"] == "gpt2"
    trace = lm.trace("the cat sat", target=" on the mat")
    assert trace.src_tokens == [] and set(trace.attention) == {"decoder"}
    assert trace.tgt_tokens[:2] == ["the", "␣cat"]  # its " cat" piece, the space shown
    weights = trace.attention["decoder"]  # [layers, heads, L, L]
    n = len(trace.tgt_tokens)
    assert weights.shape == (2, 4, n, n)
    assert_rows_sum_to_one(weights)
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    assert weights[..., future].abs().max() == 0
    assert merge_subwords(trace).tgt_tokens == ["the", "cat", "sat", "on", "the", "mat"]
    # Its unknown token is also its end token, so it still counts as special.
    assert lm.input_tokenizer.special_tokens == {"<|endoftext|>"}


def test_gpt2_step_by_step_decoding_follows_the_traced_rows(folders):
    lm = load(folders["gpt2"], device="cpu")
    prompt = "hello world"
    n_prompt = len(lm.encode(prompt).ids)
    steps = list(lm.decode(prompt, max_new_tokens=6))
    assert len(steps) >= 2
    trace = lm.trace(prompt)  # teacher-forced on its own greedy output
    generated = trace.tgt_tokens[n_prompt:]
    assert [s.token for s in steps] == generated[: len(steps)]
    for k, step in enumerate(steps):
        row = step.attention["decoder"]  # [layers, heads, keys so far]
        assert row.shape == (2, 4, n_prompt + k)
        assert_rows_sum_to_one(row)
        torch.testing.assert_close(step.probs.sum(), torch.tensor(1.0))
        # Step k's query is position n_prompt - 1 + k of the teacher-forced pass.
        q = n_prompt - 1 + k
        assert_close_f32(row, trace.attention["decoder"][:, :, q, : q + 1], atol=1e-5)
    sampled = [s.token_id for s in lm.decode(prompt, "sample", 5, top_k=5, seed=1)]
    assert sampled == [s.token_id for s in lm.decode(prompt, "sample", 5, top_k=5, seed=1)]


def test_bart_folder_traces_encoder_decoder_and_cross_attention(folders):
    lm = load(folders["bart"], device="cpu")
    assert isinstance(lm, HFLabModel) and lm.kind == "encoder-decoder"
    trace = lm.trace("the cat sat", target="a dog ran")
    ns, nt = len(trace.src_tokens), len(trace.tgt_tokens)
    assert trace.src_tokens[0] == "<s>" and trace.src_tokens[-1] == "</s>"
    assert trace.tgt_tokens[0] == "</s>"  # BART's decoder starts from </s>
    assert trace.attention["encoder"].shape == (2, 4, ns, ns)
    assert trace.attention["decoder"].shape == (3, 4, nt, nt)
    assert trace.attention["cross"].shape == (3, 4, nt, ns)
    for weights in trace.attention.values():
        assert_rows_sum_to_one(weights)
    future = torch.triu(torch.ones(nt, nt, dtype=torch.bool), diagonal=1)
    assert trace.attention["decoder"][..., future].abs().max() == 0
    words = merge_subwords(trace)
    assert words.attention["cross"].shape == (3, 4, len(words.tgt_tokens), len(words.src_tokens))
    assert_rows_sum_to_one(words.attention["cross"])
    hidden, removed = hide_special_tokens(trace)
    assert "</s>" not in hidden.tgt_tokens and set(removed) == {"encoder", "decoder", "cross"}


def test_bart_decoding_yields_decoder_and_cross_rows_per_step(folders):
    lm = load(folders["bart"], device="cpu")
    ns = len(lm.encode("the cat sat").ids)
    steps = list(lm.decode("the cat sat", max_new_tokens=4))
    assert 1 <= len(steps) <= 4
    for k, step in enumerate(steps):
        assert step.attention["decoder"].shape == (3, 4, k + 1)
        assert step.attention["cross"].shape == (3, 4, ns)
        assert_rows_sum_to_one(step.attention["cross"])
    # translate() runs transformers' generate; the stepped decoding runs our own loop: same words
    free = list(lm.decode("the cat sat"))
    assert lm.translate("the cat sat") == lm.tgt_tokenizer.detokenize([s.token_id for s in free])
    greedy = lm.trace("the cat sat")  # teacher-forced on generate's own output
    assert greedy.tgt_tokens[0] == "</s>" and set(greedy.attention) == {
        "encoder",
        "decoder",
        "cross",
    }


def test_t5_folder_with_relative_positions_and_sentencepiece_pieces(folders):
    lm = load(folders["t5"], device="cpu")
    assert isinstance(lm, HFLabModel) and lm.kind == "encoder-decoder"
    assert lm.max_len == 512  # relative positions: no table, so the lab's default limit
    trace = lm.trace("the cat sat", target="a dog")
    assert trace.src_tokens[-1] == "</s>" and trace.tgt_tokens[0] == "<pad>"
    assert any(t.startswith("␣") for t in trace.src_tokens)  # "▁the" read as " the"
    assert not any("▁" in t for t in trace.src_tokens)
    for weights in trace.attention.values():
        assert_rows_sum_to_one(weights)
    assert merge_subwords(trace).src_tokens[:3] == ["the", "cat", "sat"]


def test_an_empty_prompt_is_refused_with_a_clear_message(folders):
    with pytest.raises(ValueError, match="empty"):
        load(folders["gpt2"], device="cpu").trace("")


# --- refusals: one clear ModelLoadError, never a traceback or a download ----------------------


def test_an_empty_folder_is_not_a_model(tmp_path):
    with pytest.raises(ModelLoadError, match="no config.json"):
        load(tmp_path)


def test_a_missing_path_says_there_is_no_folder_and_a_bare_name_is_an_unknown_model(tmp_path):
    with pytest.raises(ModelLoadError, match="there is no folder at"):
        load(tmp_path / "nowhere")
    with pytest.raises(ModelLoadError, match="unknown model 'gpt5'"):
        load("gpt5")


def test_a_config_without_weights_is_refused(tmp_path, folders):
    shutil.copy(folders["gpt2"] / "config.json", tmp_path / "config.json")
    with pytest.raises(ModelLoadError, match="no weights"):
        load(tmp_path)


def test_pickle_only_weights_are_refused(tmp_path, folders):
    shutil.copy(folders["gpt2"] / "config.json", tmp_path / "config.json")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(ModelLoadError, match="safetensors only"):
        load(tmp_path)


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_a_corrupt_weights_file_is_refused(tmp_path, folders, name):
    folder = tmp_path / name
    shutil.copytree(folders[name], folder)
    (folder / "model.safetensors").write_bytes(b"\x00\x01 this is not safetensors")
    with pytest.raises(ModelLoadError, match="model.safetensors|could not be loaded"):
        load(folder)


def test_custom_code_in_config_is_refused(tmp_path, folders):
    folder = tmp_path / "custom"
    shutil.copytree(folders["gpt2"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilModel"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="custom code"):
        load(folder)


def test_an_unknown_model_type_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    with pytest.raises(ModelLoadError, match="not usable"):
        load(tmp_path)


def test_a_model_without_its_tokenizer_is_refused(tmp_path, folders):
    folder = tmp_path / "bare"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(folders["bert"] / name, folder / name)
    with pytest.raises(ModelLoadError, match="tokenizer"):
        load(folder)
