"""Tiny GGUF files written with gguf.GGUFWriter, for tests that read GGUFs (no download).

Each holds a random 2-layer model of one architecture (llama, mistral, qwen2, gpt2, gemma3)
in llama.cpp's own names and layout, quantised to the type asked for (gguf's numpy
quantiser for F16, BF16, Q8_0, Q4_0, Q4_1; K-quants have no numpy quantiser, so their blocks
are random bytes with small, finite scales), and a tokenizer of llama.cpp's kind: byte-level
BPE ("gpt2") with a few merges, or SentencePiece ("llama") with byte fallback.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CORPUS_PIECES = ["▁t", "he", "▁the", "▁c", "at", "▁cat", "▁s", "▁sat", "▁o", "n", "▁on", "▁m"]
BYTE_MERGES = ["Ġ t", "h e", "Ġt he", "Ġ c", "a t", "Ġc at", "Ġ s", "Ġs at", "o n", "Ġ m"]
# ggml's bytes per block for the K-quants, and where each block's float16 scales sit.
# (bytes per block, offsets of its float16 scales, scale size for weights of about 0.1)
_K_BLOCKS = {
    "Q4_K": (144, (0, 2), 3e-4),
    "Q5_K": (176, (0, 2), 1.5e-4),
    "Q6_K": (210, (208,), 6e-5),
}


def _alphabet() -> list[str]:
    from model.hf.gguf_tokenizer import byte_alphabet

    return [byte_alphabet()[b] for b in range(256)]


def byte_level_vocab() -> tuple[list[str], list[int], list[str]]:
    """(tokens, types, merges): <|endoftext|> and <|im_start|> (control), 256 bytes, merges."""
    tokens = ["<|endoftext|>", "<|im_start|>", *_alphabet()]
    tokens += [m.replace(" ", "") for m in BYTE_MERGES if m.replace(" ", "") not in tokens]
    types = [3, 3] + [1] * (len(tokens) - 2)
    return tokens, types, list(BYTE_MERGES)


def sentencepiece_vocab() -> tuple[list[str], list[int], list[float]]:
    """(tokens, types, scores): <unk> <s> </s>, 256 byte tokens, letters and a few pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    letters = ["▁", *"abcdefghijklmnopqrstuvwxyz"]
    tokens += letters + CORPUS_PIECES
    types += [1] * (len(letters) + len(CORPUS_PIECES))
    scores = [0.0] * 259 + [-100.0 - i for i in range(len(letters))]
    scores += [-1.0 - i for i in range(len(CORPUS_PIECES))]
    return tokens, types, scores


def _quantised(data: np.ndarray, qtype_name: str, rng: np.random.Generator):
    """(array to write, raw_dtype) for one float32 tensor in the asked type (1-D tensors
    and tensors whose rows do not fit the blocks stay F32, as llama.cpp keeps norms)."""
    import gguf

    qtype = gguf.GGMLQuantizationType[qtype_name]
    block, _ = gguf.GGML_QUANT_SIZES[qtype]
    if data.ndim == 1 or qtype_name == "F32" or data.shape[-1] % block:
        return data.astype(np.float32), None
    if qtype_name in _K_BLOCKS:
        size, scale_at, scale = _K_BLOCKS[qtype_name]
        rows, n_blocks = data.shape[0], data.shape[1] // block
        raw = rng.integers(0, 256, size=(rows, n_blocks, size), dtype=np.uint8)
        scales = rng.uniform(0.5 * scale, 1.5 * scale, (rows, n_blocks, len(scale_at)))
        scales = scales.astype(np.float16)
        for j, at in enumerate(scale_at):
            raw[:, :, at : at + 2] = scales[:, :, j : j + 1].view(np.uint8)
        return raw.reshape(rows, n_blocks * size), qtype
    return gguf.quants.quantize(data.astype(np.float32), qtype), qtype


def write_tiny_gguf(
    path: Path,
    arch: str = "llama",
    quant: str = "F32",
    *,
    d_model: int = 64,
    n_heads: int = 4,
    n_kv: int = 2,
    d_ff: int = 128,
    layers: int = 2,
    head_dim: int | None = None,
    tied: bool = False,
    seed: int = 0,
    chat_template: str | None = None,
) -> Path:
    """A random model of ``arch`` ("llama", "mistral", "qwen2", "gpt2", "gemma3"; "qwen3",
    which only transformers reads) in one GGUF."""
    import gguf

    rng = np.random.default_rng(seed)
    d_ff = 4 * d_model if arch == "gpt2" else d_ff
    gguf_arch = "llama" if arch == "mistral" else arch
    writer = gguf.GGUFWriter(str(path), gguf_arch)
    writer.add_name("mistral" if arch == "mistral" else f"tiny-{arch}")
    byte_level = arch in ("qwen2", "qwen3", "gpt2")
    if byte_level:
        tokens, types, merges = byte_level_vocab()
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("qwen2" if arch.startswith("qwen") else "gpt-2")
        writer.add_token_merges(merges)
        writer.add_bos_token_id(0)
        writer.add_eos_token_id(0)
    else:
        tokens, types, scores = sentencepiece_vocab()
        writer.add_tokenizer_model("llama")
        writer.add_token_scores(scores)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_unk_token_id(0)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if chat_template:
        writer.add_chat_template(chat_template)
    vocab = len(tokens)
    # Gemma 3 files get head_dim 256 by default: transformers scales its scores by
    # 1/sqrt(256) whatever the file says (llama.cpp, and our conversion, by 1/sqrt(head_dim))
    # (and Qwen3 files 128, transformers' default, which a Qwen3 GGUF does not state)
    head_dim = head_dim or {"gemma3": 256, "qwen3": 128}.get(arch, d_model // n_heads)
    writer.add_block_count(layers)
    writer.add_embedding_length(d_model)
    writer.add_feed_forward_length(d_ff)
    writer.add_head_count(n_heads)

    def w(*shape, scale=0.08):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    tensors: dict[str, np.ndarray] = {}
    if arch == "gpt2":
        # transformers' GPT-2 from a GGUF keeps 1024 positions and a 4 x d_model MLP
        writer.add_context_length(1024)
        writer.add_layer_norm_eps(1e-5)
        tensors["token_embd.weight"] = w(vocab, d_model)
        tensors["position_embd.weight"] = w(1024, d_model, scale=0.02)
        tensors["output_norm.weight"] = 1 + w(d_model, scale=0.1)
        tensors["output_norm.bias"] = w(d_model, scale=0.1)
        for i in range(layers):
            b = f"blk.{i}."
            for norm in ("attn_norm", "ffn_norm"):
                tensors[b + norm + ".weight"] = 1 + w(d_model, scale=0.1)
                tensors[b + norm + ".bias"] = w(d_model, scale=0.1)
            for name, shape in (
                ("attn_qkv", (3 * d_model, d_model)),
                ("attn_output", (d_model, d_model)),
                ("ffn_up", (d_ff, d_model)),
                ("ffn_down", (d_model, d_ff)),
            ):
                tensors[b + name + ".weight"] = w(*shape)
                tensors[b + name + ".bias"] = w(shape[0], scale=0.02)
    else:
        writer.add_context_length(128)
        writer.add_head_count_kv(n_kv)
        writer.add_layer_norm_rms_eps(1e-6)
        writer.add_rope_freq_base(1_000_000.0 if arch.startswith("qwen") else 10000.0)
        if arch == "gemma3":
            writer.add_key_length(head_dim)
            writer.add_value_length(head_dim)
            writer.add_sliding_window(16)
        elif not arch.startswith("qwen"):
            writer.add_rope_dimension_count(head_dim)
        tensors["token_embd.weight"] = w(vocab, d_model)
        tensors["output_norm.weight"] = 1 + w(d_model, scale=0.1)
        for i in range(layers):
            b = f"blk.{i}."
            tensors[b + "attn_norm.weight"] = 1 + w(d_model, scale=0.1)
            tensors[b + "ffn_norm.weight"] = 1 + w(d_model, scale=0.1)
            tensors[b + "attn_q.weight"] = w(n_heads * head_dim, d_model)
            tensors[b + "attn_k.weight"] = w(n_kv * head_dim, d_model)
            tensors[b + "attn_v.weight"] = w(n_kv * head_dim, d_model)
            tensors[b + "attn_output.weight"] = w(d_model, n_heads * head_dim)
            tensors[b + "ffn_gate.weight"] = w(d_ff, d_model)
            tensors[b + "ffn_up.weight"] = w(d_ff, d_model)
            tensors[b + "ffn_down.weight"] = w(d_model, d_ff)
            if arch == "qwen2":
                for name, n in (("attn_q", n_heads), ("attn_k", n_kv), ("attn_v", n_kv)):
                    tensors[b + name + ".bias"] = w(n * head_dim, scale=0.05)
            if arch in ("gemma3", "qwen3"):
                tensors[b + "attn_q_norm.weight"] = 1 + w(head_dim, scale=0.1)
                tensors[b + "attn_k_norm.weight"] = 1 + w(head_dim, scale=0.1)
            if arch == "gemma3":
                tensors[b + "post_attention_norm.weight"] = 1 + w(d_model, scale=0.1)
                tensors[b + "post_ffw_norm.weight"] = 1 + w(d_model, scale=0.1)
    if not tied:
        tensors["output.weight"] = w(vocab, d_model)
    for name, data in tensors.items():
        quant_here = quant if name != "position_embd.weight" else "F32"
        array, raw = _quantised(data, quant_here, rng)
        writer.add_tensor(name, array, raw_dtype=raw)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
