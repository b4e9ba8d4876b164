"""LLaMA, Qwen2, Mistral and GPT-2 folders run in our own decoder, equal to transformers.

Each family's tiny random model is built with transformers itself (2 layers, hidden 64,
8 query heads sharing 2 key/value heads where the layout has them) and saved with
save_pretrained beside a small byte-level tokenizer; ``load(folder)`` must give the logits
and every layer's attention of transformers' eager implementation, and decoding with the
key/value cache must pick the same tokens as recomputing everything.
"""

import socket

import pytest
import torch

from model import LabModel, load
from model.analysis.attribution import attribute
from model.analysis.circuit import output_matrix, run
from model.analysis.lens import logit_lens
from model.analysis.walkthrough import walkthrough
from model.hf.decoder import transformers_causal_lm
from model.hf.fallback import HFLabModel
from tests.hf_folders import DECODER_TYPES, build_decoder_folder
from tests.lens_check import assert_lens_ends_in_the_models_output

TEXT = "the cat sat on the mat"
TARGET = " a dog ran in the park"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """model type -> folder, built once for this module (plus a LLaMA with its own head_dim)."""
    out = {mt: build_decoder_folder(mt, tmp_path_factory.mktemp(mt)) for mt in DECODER_TYPES}
    out["llama-head_dim"] = build_decoder_folder(
        "llama", tmp_path_factory.mktemp("llama_head_dim"), head_dim=16
    )
    return out


@pytest.fixture(scope="module")
def models(folders):
    """name -> (our LabModel, transformers' eager model) on the same files."""
    return {
        name: (load(folder, device="cpu"), transformers_causal_lm(folder))
        for name, folder in folders.items()
    }


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Every load here must work without opening a connection."""

    def refuse(*args, **kwargs):
        raise AssertionError("a network connection was attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    """Equal within 1e-4, relative to the values' size where they are large."""
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


NAMES = [*DECODER_TYPES, "llama-head_dim"]


@pytest.mark.parametrize("name", NAMES)
def test_logits_and_every_layers_attention_equal_transformers_eager(models, name):
    lm, ref = models[name]
    assert isinstance(lm, LabModel) and lm.kind == "decoder"
    assert lm.info["engine"] == "attention-lab" and lm.info["model_type"] == name.split("-")[0]
    trace = lm.trace(TEXT, target=TARGET, stages=True)
    ids = torch.tensor([lm.encode(TEXT).ids + lm.tgt_tokenizer.encode_target(TARGET, 64).ids])
    assert trace.tgt_tokens == lm.tgt_tokenizer.tokens(ids[0].tolist())
    with torch.inference_mode():
        theirs = ref(input_ids=ids, output_attentions=True)
        fast = lm.network(ids).logits  # the fused-kernel path, no weights kept
    n = ids.shape[1]
    assert trace.attention["decoder"].shape == (2, 8 if name != "gpt2" else 4, n, n)
    # The trace keeps each position's top-k and each next token's own probability.
    probs = torch.softmax(theirs.logits[0], -1)
    top = probs.topk(trace.predictions.top_ids.shape[1], dim=-1)
    close(trace.predictions.top_probs, top.values)
    close(trace.predictions.next_probs, probs[:-1].gather(1, ids[0, 1:, None])[:, 0])
    close(trace.attention["decoder"], torch.stack(theirs.attentions)[:, 0])
    close(fast[0], theirs.logits[0])
    # The four stages end in the same weights; the mask hides every later key.
    stages = trace.stages["decoder"]
    close(stages["weights"], trace.attention["decoder"])
    future = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    assert torch.isinf(stages["masked"][..., future]).all()


def test_the_layouts_are_read_from_each_config(models):
    llama, qwen, mistral, gpt2 = (models[mt][0].config for mt in DECODER_TYPES)
    for cfg in (llama, qwen, mistral):
        assert (cfg.norm, cfg.ffn, cfg.positions, cfg.rope_layout) == (
            "rms",
            "swiglu",
            "rope",
            "half",
        )
        assert (cfg.n_heads, cfg.kv_heads, cfg.norm_placement) == (8, 2, "pre")
    assert qwen.rope_base == 1_000_000.0 and llama.rope_base == 10_000.0
    # Qwen2: biases on q, k, v only; LLaMA: none; Qwen2.5 ties its embeddings, LLaMA not.
    q_attn, l_attn = (
        models[mt][0].network.decoder.layers[0].self_attn for mt in ("qwen2", "llama")
    )
    assert q_attn.q_proj.bias is not None and q_attn.out_proj.bias is None
    assert l_attn.q_proj.bias is None and l_attn.out_proj.bias is None
    assert qwen.tie_embeddings and not llama.tie_embeddings
    net = models["qwen2"][0].network
    assert net.head.weight is net.embed.token.weight
    # Mistral's sliding window (32 here) is a mask, not a cut: it reads its 128 positions.
    assert models["mistral"][0].max_tokens == 128 and mistral.sliding_window == 32
    assert (gpt2.norm, gpt2.ffn, gpt2.positions) == ("layer", "gelu_tanh", "learned")
    assert models["llama-head_dim"][0].config.d_k == 16


@pytest.mark.parametrize("name", NAMES)
def test_cached_greedy_decoding_equals_full_recomputation_and_generate(models, name):
    lm, ref = models[name]
    steps = list(lm.decode(TEXT, max_new_tokens=8))
    assert len(steps) >= 1
    prompt = lm.encode(TEXT).ids
    seq = list(prompt)
    with torch.inference_mode():
        for step in steps:  # no cache: the whole sequence again for every token
            logits = lm.network(torch.tensor([seq])).logits[0, -1]
            assert int(logits.argmax()) == step.token_id
            close(step.logits, logits)
            seq.append(step.token_id)
        generated = ref.generate(
            input_ids=torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=len(steps),
            do_sample=False,
            pad_token_id=lm.tgt_tokenizer.pad_id,
        )[0, len(prompt) :]
    assert [s.token_id for s in steps] == generated.tolist()[: len(steps)]
    # Each step's attention row is that query's row of one full traced pass.
    trace = lm.trace(TEXT)
    for k, step in enumerate(steps):
        q = len(prompt) - 1 + k
        close(step.attention["decoder"], trace.attention["decoder"][:, :, q, : q + 1])


@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2"])
def test_switching_a_head_off_equals_zeroing_its_columns_of_w_o_in_transformers(models, name):
    lm, _ = models[name]
    ref = transformers_causal_lm(load_folder(lm))
    layer, head = 1, 2
    d_k = lm.config.d_k
    with torch.no_grad():
        if name == "gpt2":  # Conv1D: [in, out], so the head's rows
            ref.transformer.h[layer].attn.c_proj.weight[head * d_k : (head + 1) * d_k] = 0
        else:
            ref.model.layers[layer].self_attn.o_proj.weight[:, head * d_k : (head + 1) * d_k] = 0
        ids = torch.tensor([lm.encode(TEXT).ids])
        ours = lm.network(ids, head_mask=lm.head_mask(off=[("decoder", layer, head)])).logits
        plain = lm.network(ids).logits
        close(ours, ref(input_ids=ids).logits)
    assert not torch.allclose(ours, plain)


def load_folder(lm: LabModel) -> str:
    return lm.info["folder"]


@pytest.mark.parametrize("name", ["llama", "qwen2", "gpt2", "llama-head_dim"])
def test_lens_runner_and_attribution_read_these_models(models, name):
    lm, _ = models[name]
    ids = torch.tensor([lm.encode(TEXT).ids])
    r = run(lm.network, ids, decompose=True)
    with torch.inference_mode():
        close(r.logits, lm.network(ids).logits)
    # The final stream as a sum of parts, through RMSNorm / LayerNorm, gives every logit.
    close(sum(r.parts.values()) @ output_matrix(lm.network).T, r.logits)
    lens = logit_lens(lm, TEXT, k=3)
    assert_lens_ends_in_the_models_output(lm, lens, TEXT)
    a = attribute(lm, TEXT)
    assert sum(h.direct for h in a.heads) + a.rest == pytest.approx(a.logit, abs=1e-3)
    assert len(a.heads) == 2 * lm.config.n_heads


@pytest.mark.parametrize("name", ["llama", "qwen2", "llama-head_dim"])
def test_the_q_k_walkthrough_recomputes_rotate_half_grouped_heads(models, name):
    lm, _ = models[name]
    wt = walkthrough(lm, TEXT, layer=1)
    assert wt.agrees(), (wt.weights_error(), wt.out_error())
    assert wt.q.shape[0] == 8 and wt.q.shape[-1] == lm.config.d_k


def test_a_layout_our_decoder_cannot_run_falls_back_with_a_note(tmp_path):
    folder = build_decoder_folder("llama", tmp_path / "gelu", hidden_act="gelu")
    lm = load(folder, device="cpu")
    assert isinstance(lm, HFLabModel) and lm.info["engine"] == "transformers"
    assert "'gelu' is not SiLU" in lm.info["note"] and "head ablation" in lm.info["note"]
    trace = lm.trace(TEXT, target=TARGET)
    assert trace.attention["decoder"].shape[:2] == (2, 8)


def test_an_empty_prompt_is_refused_with_a_clear_message(models):
    lm, _ = models["qwen2"]  # its tokenizer adds nothing to an empty text
    with pytest.raises(ValueError, match="empty"):
        lm.trace("")
    with pytest.raises(ValueError, match="empty"):
        list(lm.decode(""))


# --- the config switches on their own ---------------------------------------------------------


def test_the_two_rotary_layouts_are_one_rotation_on_permuted_dimensions():
    from model.positional import apply_rope

    x = torch.randn(2, 3, 5, 8)  # [B, H, L, d_k]
    positions = torch.arange(5)
    # Dimension i of the half layout pairs with i + 4; interleaved pairs 2i with 2i + 1.
    to_interleaved = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])
    half = apply_rope(x, positions, base=500.0, layout="half")
    inter = apply_rope(x[..., to_interleaved], positions, base=500.0, layout="interleaved")
    torch.testing.assert_close(half[..., to_interleaved], inter)
    assert not torch.allclose(half, apply_rope(x, positions, base=500.0))  # layouts differ


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("norm", "batch", "norm must be 'layer' or 'rms'"),
        ("ffn", "tanh", "ffn must be one of relu, gelu, gelu_tanh, swiglu"),
        ("rope_layout", "spiral", "rope_layout must be 'interleaved' or 'half'"),
        ("rope_base", 0.0, "rope_base must be positive"),
    ],
)
def test_a_bad_layout_switch_is_refused_with_a_message(field, value, message):
    from model.config import TransformerConfig

    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{field: value})


def test_saved_configs_with_the_old_activation_key_load_as_their_ffn():
    from model.config import TransformerConfig

    cfg = TransformerConfig.from_dict({"kind": "decoder", "activation": "gelu"})
    assert (cfg.ffn, cfg.norm, cfg.qkv_bias, cfg.rope_layout) == (
        "gelu",
        "layer",
        True,
        "interleaved",
    )
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg


def test_pieces_are_written_back_as_the_text_they_spell(models):
    from model.analysis.tokens import written_text

    lm, _ = models["llama"]
    tokens = lm.encode(TEXT).tokens
    assert tokens[:3] == ["<s>", "the", "␣cat"]  # byte-level pieces as people read them
    assert written_text(lm.tgt_tokenizer, tokens, lm.tgt_tokenizer.special_tokens) == TEXT
    # Korean and an emoji, which the tiny vocabulary spells in bytes: each token shows the
    # character it holds a part of, never a byte stand-in, and the trace is written back.
    korean = "안녕 🙂"
    trace = lm.trace(korean, target="")
    assert any(" · " in t for t in trace.tgt_tokens)
    assert not any(c in t for t in trace.tgt_tokens for c in "ìíëðŁĠ")
    assert (
        written_text(lm.tgt_tokenizer, trace.tgt_tokens, lm.tgt_tokenizer.special_tokens) == korean
    )


def test_an_empty_network_skips_random_init_and_leaves_it_on_for_the_next_model():
    """The network a checkpoint is loaded into is built on the meta device without its
    random init; a model built afterwards (or beside it) is initialised as before."""
    import threading

    from model.hf.common import empty_network

    other: list[torch.Tensor] = []
    started, go_on = threading.Event(), threading.Event()

    def build():
        started.set()
        go_on.wait(5)  # another thread builds a toy while this one is inside the mode
        return torch.nn.Linear(8, 8)

    def toy():
        started.wait(5)
        torch.manual_seed(0)
        other.append(torch.nn.Linear(8, 8).weight.detach().clone())
        go_on.set()

    torch.manual_seed(0)
    expected = torch.nn.Linear(8, 8).weight.detach().clone()

    worker = threading.Thread(target=toy)
    worker.start()
    empty = empty_network(build)
    worker.join()
    assert empty.weight.device.type == "meta"
    assert torch.equal(other[0], expected)  # the toy's own random init ran, seeded as ever
    after = torch.nn.Linear(8, 8).weight
    assert after.device.type == "cpu" and after.std() > 0
