"""Checkpoint folders: safetensors + json round trip, tied weights, and every way a file can break."""

import json

import pytest
import torch
from safetensors import safe_open

from model import TransformerConfig, build_model, load
from model.runtime.checkpoint import WEIGHTS, load_checkpoint, save_checkpoint
from model.runtime.tokenizer import task_tokenizers
from model.runtime.types import ModelLoadError
from model.tasks import reverse, sort


def tiny(kind="encoder-decoder", vocab=40):
    torch.manual_seed(0)
    cfg = TransformerConfig(
        kind=kind,
        src_vocab_size=vocab,
        tgt_vocab_size=vocab,
        d_model=16,
        n_heads=2,
        n_encoder_layers=1,
        n_decoder_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=32,
    )
    return build_model(cfg)


@pytest.fixture
def folder(tmp_path):
    src, tgt = task_tokenizers(reverse)
    save_checkpoint(tmp_path, tiny(vocab=len(tgt)), src, tgt, {"task": "reverse", "seed": 1})
    return tmp_path


def test_round_trip_gives_the_same_outputs_and_info(folder):
    src, tgt = task_tokenizers(reverse)
    original = tiny(vocab=len(tgt)).eval()
    lm = load_checkpoint(folder, "cpu", "mine")
    ids = torch.tensor([[5, 6, 7, 8]])
    torch.testing.assert_close(lm.network(ids, ids).logits, original(ids, ids).logits)
    assert lm.name == "mine" and lm.kind == "encoder-decoder"
    assert lm.info["task"] == "reverse" and lm.info["metrics"]["seed"] == 1
    assert lm.src_tokenizer.vocab == src.vocab
    assert load(folder, device="cpu").translate("a b") == lm.translate("a b")


def test_tied_weights_are_stored_once_and_tied_again_on_load(folder):
    with safe_open(folder / WEIGHTS, "pt") as f:
        keys = set(f.keys())
    assert ("generator.weight" in keys) != ("tgt_embed.token.weight" in keys)
    net = load_checkpoint(folder, "cpu").network
    assert net.generator.weight.data_ptr() == net.tgt_embed.token.weight.data_ptr()


def test_decoder_only_checkpoints_have_no_source_side(tmp_path):
    _, tok = task_tokenizers(sort)
    save_checkpoint(tmp_path, tiny("decoder", len(tok)), None, tok, {"task": "sort"})
    lm = load_checkpoint(tmp_path, "cpu")
    assert lm.kind == "decoder" and lm.src_tokenizer is None
    assert lm.encode("3 1").tokens == ["<bos>", "3", "1", "<sep>"]


@pytest.mark.parametrize("missing", ["model.safetensors", "config.json", "vocab.json"])
def test_a_missing_file_is_named(folder, missing):
    (folder / missing).unlink()
    with pytest.raises(ModelLoadError, match=f"has no {missing}"):
        load_checkpoint(folder, "cpu")


def test_a_truncated_weights_file_is_reported(folder):
    data = (folder / WEIGHTS).read_bytes()
    (folder / WEIGHTS).write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="truncated"):
        load_checkpoint(folder, "cpu")
    (folder / WEIGHTS).write_bytes(b"")
    with pytest.raises(ModelLoadError, match="truncated"):
        load_checkpoint(folder, "cpu")


def test_an_oversized_weights_file_is_refused_before_reading(folder):
    with open(folder / WEIGHTS, "ab") as f:
        f.write(b"\0" * (2 * 2**20))
    with pytest.raises(ModelLoadError, match="far more than"):
        load_checkpoint(folder, "cpu")


def test_weights_of_another_shape_are_reported(folder):
    config = json.loads((folder / "config.json").read_text())
    config["d_ff"] = 24
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="another model"):
        load_checkpoint(folder, "cpu")


def test_broken_config_and_vocabulary_are_reported(folder):
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "colour": "red"}))
    with pytest.raises(ModelLoadError, match="not a valid model config"):
        load_checkpoint(folder, "cpu")
    (folder / "config.json").write_text(json.dumps({**config, "tgt_vocab_size": 99}))
    with pytest.raises(ModelLoadError, match="does not match"):
        load_checkpoint(folder, "cpu")
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "vocab.json").write_text("[1, 2")
    with pytest.raises(ModelLoadError, match="vocab.json is not a valid vocabulary"):
        load_checkpoint(folder, "cpu")


def test_a_config_implying_a_huge_model_is_refused_before_building_it(folder):
    config = json.loads((folder / "config.json").read_text())
    # ~90 billion parameters: building it would take the shared server's memory down.
    config.update(d_model=8192, n_heads=8, n_encoder_layers=48, n_decoder_layers=48, d_ff=32768)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="opens models up to"):
        load_checkpoint(folder, "cpu")


def test_a_weights_file_over_the_size_limit_is_refused_before_reading(folder, monkeypatch):
    monkeypatch.setattr("model.runtime.checkpoint.MAX_WEIGHT_BYTES", 1000)
    monkeypatch.setattr("model.runtime.checkpoint.HEADER_SLACK", 0)
    with pytest.raises(ModelLoadError, match="opens models up to"):
        load_checkpoint(folder, "cpu")
