"""Today's decoder-only checkpoints (LLaMA, Qwen2, Mistral, Gemma 3, GPT-2) mapped onto our
``DecoderModel``.

A LLaMA-family block is the paper's decoder layer with four changes our config names:
pre-LN with RMSNorm, the SwiGLU feed-forward, no biases (Qwen2 keeps them on q, k, v) and
rotary positions in the rotate-half layout with the checkpoint's own base. GPT-2 is a pre-LN
decoder with learned positions, a final LayerNorm, GELU's tanh form and Conv1D weights
(stored [in, out], the transpose of nn.Linear). Gemma 3 is LLaMA's block with GeGLU, four
norms a layer (before and after attention and the feed-forward network), RMSNorm's gain
1 + w, QK-norm, the embeddings scaled by √d_model, scores scaled by its
query_pre_attn_scalar, and sliding-window (local) layers between global ones, each kind
with its own rotary base. So the four stages, head ablation, the
KV cache, the logit lens, patching and attribution all run through our code on real weights;
``transformers_causal_lm`` loads transformers' own model on the same files, the reference
for parity tests and benchmarks.
"""

from __future__ import annotations

from pathlib import Path

import torch

from model.config import TransformerConfig
from model.hf.common import (
    HFTokenizer,
    empty_network,
    hf_kind,
    load_tokenizer,
    read_hf_config,
    read_weights,
    short_error,
    weight_files,
)
from model.runtime.types import ModelLoadError
from model.transformer import DecoderModel

LLAMA_TYPES = ("llama", "qwen2", "mistral")
GEMMA3_TYPES = ("gemma3_text",)
DECODER_TYPES = (*LLAMA_TYPES, *GEMMA3_TYPES, "gpt2")
# Gemma's feed-forward gate: GELU's tanh form, by any of transformers' names for it.
GEMMA_ACTIVATIONS = ("gelu_pytorch_tanh", "gelu_new", "gelu_fast")
GPT2_ACTIVATIONS = {
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "gelu": "gelu",
    "relu": "relu",
}
# Our module names -> the LLaMA family's, per decoder layer (weights; biases where present).
LLAMA_LAYER = {
    "self_attn.q_proj": "self_attn.q_proj",
    "self_attn.k_proj": "self_attn.k_proj",
    "self_attn.v_proj": "self_attn.v_proj",
    "self_attn.out_proj": "self_attn.o_proj",
    "attn_norm.norm": "input_layernorm",
    "ffn.linear1": "mlp.gate_proj",
    "ffn.up": "mlp.up_proj",
    "ffn.linear2": "mlp.down_proj",
    "ffn_norm.norm": "post_attention_layernorm",
}
# Gemma 3: the same projections, QK-norm, and a norm before and after each sub-layer.
GEMMA3_LAYER = {
    **{k: v for k, v in LLAMA_LAYER.items() if not k.endswith("_norm.norm")},
    "self_attn.q_norm": "self_attn.q_norm",
    "self_attn.k_norm": "self_attn.k_norm",
    "attn_norm.norm": "input_layernorm",
    "attn_norm.post_norm": "post_attention_layernorm",
    "ffn_norm.norm": "pre_feedforward_layernorm",
    "ffn_norm.post_norm": "post_feedforward_layernorm",
}
# GPT-2's Conv1D layers hold weight [in, out]: transposed for nn.Linear.
GPT2_LAYER = {
    "self_attn.out_proj": "attn.c_proj",
    "attn_norm.norm": "ln_1",
    "ffn.linear1": "mlp.c_fc",
    "ffn.linear2": "mlp.c_proj",
    "ffn_norm.norm": "ln_2",
}
GPT2_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
# Without a limit in the checkpoint's config, this many positions.
MAX_LEN_DEFAULT = 4096


def _rope(config) -> tuple[float, str]:
    """(base, rope type) from either config style: rope_parameters (transformers 5) or
    rope_theta + rope_scaling (older files)."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and params:
        base = params.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return float(base), str(params.get("rope_type", params.get("type", "default")))
    scaling = getattr(config, "rope_scaling", None) or {}
    kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
    return float(getattr(config, "rope_theta", 10000.0)), str(kind)


def _gemma_rope(config) -> tuple[float, float, str]:
    """(global base, local base, the first rope type that is not "default") of a Gemma 3
    config: transformers 5's rope_parameters per layer type, or the older rope_theta,
    rope_local_base_freq and rope_scaling."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and "full_attention" in params:
        full = params.get("full_attention") or {}
        local = params.get("sliding_attention") or {}
        kinds = [p.get("rope_type", p.get("type", "default")) for p in (full, local)]
        odd = next((k for k in kinds if k != "default"), "default")
        return (
            float(full.get("rope_theta", 1_000_000.0)),
            float(local.get("rope_theta", 10_000.0)),
            str(odd),
        )
    base, kind = _rope(config)
    return base, float(getattr(config, "rope_local_base_freq", 10_000.0)), kind


def _gemma_unmappable(config) -> str | None:
    """Why our decoder cannot run this Gemma 3 text config exactly, or None."""
    act = getattr(config, "hidden_activation", None) or getattr(config, "hidden_act", None)
    if act not in GEMMA_ACTIVATIONS:
        return f"activation {act!r} is not GELU's tanh form (GeGLU)"
    for name in ("attn_logit_softcapping", "final_logit_softcapping"):
        if getattr(config, name, None) is not None:
            return f"it soft-caps its logits ({name}), which our attention does not do"
    if getattr(config, "use_bidirectional_attention", False):
        return "its attention is bidirectional (an embedding model), not causal"
    _, _, rope_type = _gemma_rope(config)
    if rope_type != "default":
        return f"its rotary positions are rescaled ({rope_type!r}), which our RoPE does not do"
    kinds = set(getattr(config, "layer_types", None) or ())
    if kinds - {"sliding_attention", "full_attention"}:
        return f"its layer types {sorted(kinds)} are not sliding or full attention"
    heads, kv = config.num_attention_heads, getattr(config, "num_key_value_heads", None)
    if kv is not None and heads % kv:
        return "its query heads are not a multiple of its key/value heads"
    return None


def decoder_unmappable(config) -> str | None:
    """Why our decoder cannot run this config's weights exactly, or None when it can."""
    mt = config.model_type
    if mt not in DECODER_TYPES:
        return f"model_type {mt!r} is not one of {', '.join(DECODER_TYPES)}"
    if hf_kind(config) != "decoder":
        return "it is not used as a decoder-only language model"
    if mt == "gpt2":
        if getattr(config, "add_cross_attention", False):
            return "it has cross-attention"
        if config.activation_function not in GPT2_ACTIVATIONS:
            return f"activation {config.activation_function!r} is not mapped"
        if getattr(config, "scale_attn_by_inverse_layer_idx", False):
            return "it scales attention by the inverse layer index"
        if not getattr(config, "scale_attn_weights", True):
            return "its attention scores are not scaled by 1/√d_k"
        if config.n_embd % config.n_head:
            return "n_embd is not divisible by the number of heads"
        return None
    if mt in GEMMA3_TYPES:
        return _gemma_unmappable(config)
    if config.hidden_act != "silu":
        return f"activation {config.hidden_act!r} is not SiLU (SwiGLU)"
    _, rope_type = _rope(config)
    if rope_type != "default":
        return f"its rotary positions are rescaled ({rope_type!r}), which our RoPE does not do"
    if getattr(config, "pretraining_tp", 1) not in (None, 1):
        return "it splits its projections for tensor parallelism (pretraining_tp)"
    heads, kv = config.num_attention_heads, getattr(config, "num_key_value_heads", None)
    if kv is not None and heads % kv:
        return "its query heads are not a multiple of its key/value heads"
    return None


def _head_dim(config) -> int:
    value = getattr(config, "head_dim", None)
    return int(value) if value else config.hidden_size // config.num_attention_heads


def _sliding_window(config) -> int | None:
    """The attention window where the checkpoint uses one (Mistral; Qwen2 when switched on)."""
    window = getattr(config, "sliding_window", None)
    if not window:
        return None
    if config.model_type == "qwen2" and not getattr(config, "use_sliding_window", False):
        return None
    return int(window)


def decoder_max_len(config, tokenizer: HFTokenizer | None = None) -> int:
    """How many positions we run: the checkpoint's own limit (max_position_embeddings, GPT-2's
    n_positions), or its tokenizer's where that is smaller. A sliding window does not cut
    it: the mask hides keys that fall out of the window, as the checkpoint does."""
    limits = []
    for attr in ("n_positions", "max_position_embeddings"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value > 0:
            limits.append(value)
            break
    if not limits:
        limits.append(MAX_LEN_DEFAULT)
    if tokenizer is not None:
        tok_max = tokenizer.hf.model_max_length
        if isinstance(tok_max, int) and 0 < tok_max < 1_000_000:
            limits.append(tok_max)
    return min(limits)


def _llama_family(config, max_len: int) -> dict:
    """What LLaMA, Qwen2, Mistral and Gemma 3 configs share: a pre-LN RMSNorm decoder with
    rotate-half RoPE, sizes read from the same transformers fields, inference only."""
    return dict(
        kind="decoder",
        src_vocab_size=config.vocab_size,
        tgt_vocab_size=config.vocab_size,
        d_model=config.hidden_size,
        n_heads=config.num_attention_heads,
        n_kv_heads=getattr(config, "num_key_value_heads", None) or config.num_attention_heads,
        head_dim=_head_dim(config),
        n_encoder_layers=0,
        n_decoder_layers=config.num_hidden_layers,
        d_ff=config.intermediate_size,
        dropout=0.0,
        norm_placement="pre",
        norm="rms",
        positions="rope",
        rope_layout="half",
        max_len=max_len,
        layer_norm_eps=config.rms_norm_eps,
        pad_id=None,
    )


def gemma3_config(config, max_len: int) -> TransformerConfig:
    """Our config for a Gemma 3 text checkpoint: LLaMA's pre-LN decoder with Gemma's pieces."""
    global_base, local_base, _ = _gemma_rope(config)
    bias = bool(getattr(config, "attention_bias", False))
    layers = config.num_hidden_layers
    layer_types = list(getattr(config, "layer_types", None) or ["full_attention"] * layers)
    window = getattr(config, "sliding_window", None)
    if "sliding_attention" not in layer_types:
        window = None
    return TransformerConfig(
        **_llama_family(config, max_len),
        ffn="geglu",
        rms_unit_offset=True,
        sandwich_norm=True,
        qk_norm=True,
        query_pre_attn_scalar=float(getattr(config, "query_pre_attn_scalar", _head_dim(config))),
        rope_base=global_base,
        rope_local_base=local_base,
        qkv_bias=bias,
        out_bias=bias,
        ffn_bias=False,
        sliding_window=int(window) if window else None,
        layer_types=layer_types,
        scale_embedding=True,  # x √d_model, in the embedding's dtype
        tie_embeddings=bool(getattr(config, "tie_word_embeddings", True)),
    )


def decoder_config(config, max_len: int | None = None) -> TransformerConfig:
    """Our config for a LLaMA / Qwen2 / Mistral / Gemma 3 / GPT-2 checkpoint: a pre-LN decoder."""
    max_len = max_len or decoder_max_len(config)
    if config.model_type in GEMMA3_TYPES:
        return gemma3_config(config, max_len)
    if config.model_type == "gpt2":
        return TransformerConfig(
            kind="decoder",
            src_vocab_size=config.vocab_size,
            tgt_vocab_size=config.vocab_size,
            d_model=config.n_embd,
            n_heads=config.n_head,
            n_encoder_layers=0,
            n_decoder_layers=config.n_layer,
            d_ff=config.n_inner or 4 * config.n_embd,
            dropout=0.0,  # inference only
            ffn=GPT2_ACTIVATIONS[config.activation_function],
            norm_placement="pre",
            norm="layer",
            positions="learned",
            max_len=min(max_len, config.n_positions),
            layer_norm_eps=config.layer_norm_epsilon,
            scale_embedding=False,  # GPT-2 adds token and position embeddings unscaled
            tie_embeddings=bool(getattr(config, "tie_word_embeddings", True)),
            pad_id=None,  # never padded here; its pad (if any) is also a real token
        )
    base, _ = _rope(config)
    mt = config.model_type
    attention_bias = bool(getattr(config, "attention_bias", False))
    return TransformerConfig(
        **_llama_family(config, max_len),
        ffn="swiglu",
        rope_base=base,
        qkv_bias=True if mt == "qwen2" else attention_bias,
        out_bias=False if mt == "qwen2" else attention_bias,
        ffn_bias=bool(getattr(config, "mlp_bias", False)),
        sliding_window=_sliding_window(config),
        scale_embedding=False,
        tie_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
    )


def _strip(weights: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k.removeprefix(prefix): v for k, v in weights.items()}


def _pairs_llama(
    cfg: TransformerConfig, layer_names: dict[str, str] = LLAMA_LAYER
) -> dict[str, str]:
    pairs = {
        "embed.token.weight": "model.embed_tokens.weight",
        "decoder.final_norm.weight": "model.norm.weight",
    }
    if not cfg.tie_embeddings:
        pairs["head.weight"] = "lm_head.weight"
    params = {
        "self_attn.q_proj": cfg.qkv_bias,
        "self_attn.k_proj": cfg.qkv_bias,
        "self_attn.v_proj": cfg.qkv_bias,
        "self_attn.out_proj": cfg.out_bias,
        "ffn.linear1": cfg.ffn_bias,
        "ffn.up": cfg.ffn_bias,
        "ffn.linear2": cfg.ffn_bias,
    }
    for i in range(cfg.n_decoder_layers):
        for ours, theirs in layer_names.items():
            pairs[f"decoder.layers.{i}.{ours}.weight"] = f"model.layers.{i}.{theirs}.weight"
            if params.get(ours, False):  # norms have no bias
                pairs[f"decoder.layers.{i}.{ours}.bias"] = f"model.layers.{i}.{theirs}.bias"
    return pairs


def _map_gpt2(source: dict[str, torch.Tensor], cfg: TransformerConfig) -> tuple[dict, list[str]]:
    source = _strip(source, "transformer.")
    mapped, missing = {}, []

    def take(name: str) -> torch.Tensor | None:
        tensor = source.get(name)
        if tensor is None:
            missing.append(name)
        return tensor

    for ours, theirs in (
        ("embed.token.weight", "wte.weight"),
        ("embed.position.embedding.weight", "wpe.weight"),
        ("decoder.final_norm.weight", "ln_f.weight"),
        ("decoder.final_norm.bias", "ln_f.bias"),
    ):
        mapped[ours] = take(theirs)
    if not cfg.tie_embeddings:
        mapped["head.weight"] = take("lm_head.weight")
    d = cfg.d_model
    for i in range(cfg.n_decoder_layers):
        ours_l, theirs_l = f"decoder.layers.{i}", f"h.{i}"
        for ours, theirs in GPT2_LAYER.items():
            for param in ("weight", "bias"):
                tensor = take(f"{theirs_l}.{theirs}.{param}")
                if tensor is not None and param == "weight" and theirs in GPT2_CONV1D:
                    tensor = tensor.t()
                mapped[f"{ours_l}.{ours}.{param}"] = tensor
        # c_attn packs q, k and v side by side: [D, 3D] (Conv1D, so [in, out]).
        w, b = take(f"{theirs_l}.attn.c_attn.weight"), take(f"{theirs_l}.attn.c_attn.bias")
        if w is not None and b is not None:
            for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
                mapped[f"{ours_l}.self_attn.{name}.weight"] = w[:, j * d : (j + 1) * d].t()
                mapped[f"{ours_l}.self_attn.{name}.bias"] = b[j * d : (j + 1) * d]
    return {k: v for k, v in mapped.items() if v is not None}, missing


def map_decoder_weights(
    weights: dict[str, torch.Tensor], cfg: TransformerConfig, model_type: str
) -> dict[str, torch.Tensor]:
    """A checkpoint's state dict -> DecoderModel's (the stored dtype, contiguous; the
    loader casts to the dtype it runs in)."""
    if model_type == "gpt2":
        mapped, missing = _map_gpt2(weights, cfg)
    else:
        # A bare LlamaModel is saved without the "model." prefix.
        source = weights
        if not any(k.startswith("model.") for k in weights):
            source = {f"model.{k}": v for k, v in weights.items()}
        mapped, missing = {}, []
        names = GEMMA3_LAYER if model_type in GEMMA3_TYPES else LLAMA_LAYER
        for ours, theirs in _pairs_llama(cfg, names).items():
            tensor = source.get(theirs)
            if tensor is None:
                missing.append(theirs)
            else:
                mapped[ours] = tensor
    if missing:
        shown = ", ".join(missing[:4]) + (" ..." if len(missing) > 4 else "")
        raise ModelLoadError(f"the weights lack {len(missing)} {model_type} tensors: {shown}")
    if model_type == "gpt2":  # the learned table may be longer than the positions we run
        table = mapped["embed.position.embedding.weight"]
        mapped["embed.position.embedding.weight"] = table[: cfg.max_len]
    state = {k: v.contiguous() for k, v in mapped.items()}
    if cfg.tie_embeddings:  # one matrix reads and writes tokens
        state["head.weight"] = state["embed.token.weight"]
    return state


def build_decoder(folder: str | Path, config=None) -> tuple[DecoderModel, HFTokenizer]:
    """Our DecoderModel with a LLaMA / Qwen2 / Mistral / Gemma 3 / GPT-2 folder's weights,
    and its tokenizer."""
    folder = Path(folder)
    config = config if config is not None else read_hf_config(folder)
    reason = decoder_unmappable(config)
    if reason is not None:
        raise ModelLoadError(f"{folder} cannot run in our decoder: {reason}")
    tokenizer = load_tokenizer(folder)
    cfg = decoder_config(config, decoder_max_len(config, tokenizer))
    weights = read_weights(weight_files(folder))
    try:
        network = decoder_from_weights(weights, cfg, config.model_type)
    except RuntimeError as err:  # shapes that disagree with config.json
        raise ModelLoadError(
            f"{folder}: weights do not fit config.json ({short_error(err)})"
        ) from err
    return network, tokenizer


def decoder_from_weights(
    weights: dict[str, torch.Tensor], cfg: TransformerConfig, model_type: str
) -> DecoderModel:
    """Our DecoderModel holding a checkpoint's tensors (shared, not copied)."""
    state = map_decoder_weights(weights, cfg, model_type)
    network = empty_network(lambda: DecoderModel(cfg))  # its weights are replaced at once
    network.load_state_dict(state, strict=True, assign=True)
    if cfg.tie_embeddings:  # assign=True replaced the shared Parameter: share it again
        network.head.weight = network.embed.token.weight
    return network.eval()


def transformers_causal_lm(
    folder: str | Path, device: str | torch.device = "cpu", attn_implementation: str = "eager"
):
    """transformers' own causal LM on the same files: the reference for parity and speed."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(folder),
        local_files_only=True,
        trust_remote_code=False,
        use_safetensors=True,
        attn_implementation=attn_implementation,
        dtype=torch.float32,
    )
    return model.to(device).eval()
