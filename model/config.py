"""One dataclass describes every model in the lab: the toy models and mapped pretrained ones."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

Kind = Literal["encoder-decoder", "encoder", "decoder"]
POSITIONS = ("sinusoidal", "learned", "rope", "alibi", "none")
NORMS = ("layer", "rms")
FFNS = ("relu", "gelu", "gelu_tanh", "swiglu", "geglu")
LAYER_TYPES = ("sliding_attention", "full_attention")
ROPE_LAYOUTS = ("interleaved", "half")


@dataclass
class TransformerConfig:
    """Hyper-parameters, named as in "Attention Is All You Need" (Vaswani et al., 2017).

    The defaults are the paper's post-LN base layout at toy size, so a model built from a
    bare config is the textbook one.
    """

    kind: Kind = "encoder-decoder"
    src_vocab_size: int = 64  # encoder vocabulary (unused by decoder-only models)
    tgt_vocab_size: int = 64  # decoder vocabulary, and the output head of every kind
    d_model: int = 64
    n_heads: int = 4
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    d_ff: int = 256  # 0: attention-only, no feed-forward sub-layer at all
    dropout: float = 0.1
    # The feed-forward sub-layer: W_2 act(W_1 x) with ReLU (the paper), GELU (BERT) or
    # GELU's tanh form (GPT-2); "swiglu" is W_2 (Swish(W_1 x) ⊙ V x) (Shazeer 2020; LLaMA),
    # "geglu" W_2 (GELU_tanh(W_1 x) ⊙ V x) (Shazeer 2020; Gemma).
    ffn: Literal["relu", "gelu", "gelu_tanh", "swiglu", "geglu"] | None = None  # None: "relu"
    # The older name of ``ffn``, read from saved checkpoints; it always mirrors ``ffn``, which
    # wins when both are given (so dataclasses.replace(cfg, ffn=...) works).
    activation: str | None = None
    norm_placement: Literal["post", "pre"] = "post"  # post-LN as in the paper; pre-LN as GPT-2
    # LayerNorm (Ba et al. 2016: centre, scale, shift) or RMSNorm (Zhang & Sennrich 2019:
    # scale by the root mean square only, no centring, no bias; LLaMA, Qwen2, Mistral).
    norm: Literal["layer", "rms"] = "layer"
    # Gemma's RMSNorm: the gain is (1 + w), w stored centred on 0 (so a fresh norm is the
    # identity gain), and the product is taken in float32 before the cast back.
    rms_unit_offset: bool = False
    # Pre-LN with a second norm on each sub-layer's output before the residual add
    # (x + Norm_post(Sublayer(Norm_pre(x)))): Gemma 2 and 3's "sandwich" of four norms a layer.
    sandwich_norm: bool = False
    # QK-norm: RMSNorm over each head's queries and keys (d_k wide, its own gain) before the
    # rotary positions (Dehghani et al. 2023; Gemma 3): bounds the logits q·k can reach.
    qk_norm: bool = False
    # The scores are q·k / √query_pre_attn_scalar where set (Gemma), else q·k / √d_k.
    query_pre_attn_scalar: float | None = (
        None  # Where order comes from: added to the embeddings ("sinusoidal", the paper; "learned",
    )
    # BERT / GPT-2), applied inside self-attention ("rope", rotary; "alibi", a linear
    # distance bias per head), or nowhere ("none").
    positions: Literal["sinusoidal", "learned", "rope", "alibi", "none"] = "sinusoidal"
    # Key/value heads: None = n_heads (the paper); fewer = grouped-query attention, each
    # shared by n_heads / n_kv_heads query heads; 1 = multi-query attention.
    n_kv_heads: int | None = None
    # Per-head width of queries and keys; None = d_model / n_heads (the paper).
    head_dim: int | None = None
    # Bias terms: on the q/k/v projections, on W_O, in the feed-forward layers. The paper
    # and BERT have them all; LLaMA none; Qwen2 only on q, k, v.
    qkv_bias: bool = True
    out_bias: bool = True
    ffn_bias: bool = True
    # Rotary positions: the base of θ_i = base^(-2i/d_k), and which dimensions form a pair:
    # "interleaved" (2i, 2i+1), as in the RoPE paper, or "half" (i, i + d_k/2), the
    # rotate-half form of GPT-NeoX and LLaMA checkpoints.
    rope_base: float = 10000.0
    rope_layout: Literal["interleaved", "half"] = "interleaved"
    max_len: int = 128
    # Mistral's sliding window: a query sees only the last ``sliding_window`` keys up to
    # itself (None = every earlier key).
    sliding_window: int | None = None
    # Per decoder layer, "sliding_attention" (the window above) or "full_attention" (every
    # earlier key): Gemma 3's local and global layers. None: every layer as sliding_window says.
    layer_types: list[str] | None = None
    # The rotary base of the sliding-window layers (Gemma 3: 10,000, its global layers
    # 1,000,000); None: rope_base everywhere.
    rope_local_base: float | None = None
    layer_norm_eps: float = 1e-5
    scale_embedding: bool = True  # multiply token embeddings by sqrt(d_model), paper §3.4
    tie_embeddings: bool = True  # share decoder input embedding and output projection
    share_src_tgt_embeddings: bool = False  # one table for both sides (needs one vocabulary)
    # BERT-style extras, so pretrained encoders map onto the same blocks.
    type_vocab_size: int = 0  # token-type (segment) embeddings; 0 = none
    embedding_norm: bool = False  # LayerNorm right after the embedding sum (BERT)
    # False: an encoder that ends at its last hidden state, as pretrained encoders shipped
    # without a language-model head do (MiniLM); no [vocab]-wide logits are computed.
    output_head: bool = True
    pad_id: int | None = 0  # None: no padding id (pretrained decoders run unpadded)

    def __post_init__(self) -> None:
        if self.kind not in ("encoder-decoder", "encoder", "decoder"):
            raise ValueError(f"unknown model kind {self.kind!r}")
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.d_ff < 0:
            raise ValueError(f"d_ff must be 0 (attention-only) or positive, not {self.d_ff}")
        self.ffn = self.ffn or self.activation or "relu"
        self.activation = self.ffn
        if self.ffn not in FFNS:
            raise ValueError(f"ffn must be one of {', '.join(FFNS)}, not {self.ffn!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm must be 'layer' or 'rms', not {self.norm!r}")
        if self.rope_layout not in ROPE_LAYOUTS:
            raise ValueError(
                f"rope_layout must be 'interleaved' or 'half', not {self.rope_layout!r}"
            )
        if self.rope_base <= 0:
            raise ValueError(f"rope_base must be positive, not {self.rope_base}")
        if self.head_dim is not None and self.head_dim < 1:
            raise ValueError(f"head_dim must be at least 1, not {self.head_dim}")
        if self.norm_placement not in ("post", "pre"):
            raise ValueError(f"norm_placement must be 'post' or 'pre', not {self.norm_placement!r}")
        if self.positions not in POSITIONS:
            raise ValueError(
                f"positions must be one of {', '.join(POSITIONS)}, not {self.positions!r}"
            )
        if self.n_kv_heads is not None and (self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads):
            raise ValueError(
                f"n_kv_heads={self.n_kv_heads} must be at least 1 and divide n_heads={self.n_heads}"
            )
        if self.positions == "rope" and self.d_k % 2:
            raise ValueError(f"rotary positions need an even d_k, got {self.d_k}")
        if self.share_src_tgt_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError("shared source/target embeddings need equal vocabulary sizes")
        if self.layer_types is not None:
            self.layer_types = list(self.layer_types)
            if len(self.layer_types) != self.n_decoder_layers:
                raise ValueError(
                    f"layer_types names {len(self.layer_types)} layers, the decoder has "
                    f"{self.n_decoder_layers}"
                )
            odd = sorted(set(self.layer_types) - set(LAYER_TYPES))
            if odd:
                raise ValueError(f"layer_types must be {' or '.join(LAYER_TYPES)}, not {odd}")
            if "sliding_attention" in self.layer_types and not self.sliding_window:
                raise ValueError("sliding_attention layers need a sliding_window")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"sliding_window must be at least 1, not {self.sliding_window}")
        if self.sandwich_norm and self.norm_placement != "pre":
            raise ValueError("sandwich_norm wraps pre-LN sub-layers: it needs norm_placement='pre'")
        if self.query_pre_attn_scalar is not None and self.query_pre_attn_scalar <= 0:
            raise ValueError(
                f"query_pre_attn_scalar must be positive, not {self.query_pre_attn_scalar}"
            )
        if self.rope_local_base is not None and self.rope_local_base <= 0:
            raise ValueError(f"rope_local_base must be positive, not {self.rope_local_base}")
        if not self.output_head and self.kind != "encoder":
            raise ValueError("only an encoder may go without an output head: decoders generate")

    @property
    def d_k(self) -> int:
        """Per-head width of queries and keys (= d_v): head_dim, else d_model / n_heads."""
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """Key/value heads actually built: n_kv_heads, or n_heads when it is None."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def attention_scale(self) -> float | None:
        """The factor on q·k when it is not 1/√d_k (query_pre_attn_scalar^-1/2), else None."""
        if self.query_pre_attn_scalar is None or self.query_pre_attn_scalar == self.d_k:
            return None
        return self.query_pre_attn_scalar**-0.5

    def is_sliding(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` attends through the sliding window."""
        if self.sliding_window is None:
            return False
        return self.layer_types is None or self.layer_types[layer] == "sliding_attention"

    def layer_window(self, layer: int) -> int | None:
        """The sliding window of decoder layer ``layer`` (None: every earlier key)."""
        return self.sliding_window if self.is_sliding(layer) else None

    def layer_rope_base(self, layer: int) -> float:
        """The rotary base of decoder layer ``layer``: the local base on sliding layers."""
        if self.rope_local_base is not None and self.is_sliding(layer):
            return self.rope_local_base
        return self.rope_base

    def kv_cache_values(self, n_tokens: int, all_global: bool = False) -> int:
        """Numbers a key/value cache must hold after ``n_tokens`` so that the next query sees
        every key it may attend: 2 (K and V) · kv_heads · d_k per position, every position
        in a global layer, the last ``sliding_window`` in a sliding one (``all_global``: as
        if every layer were global). Times the bytes per number, what Gemma 3's pattern of
        local layers saves."""
        per_position = 2 * self.kv_heads * self.d_k
        kept = 0
        for layer in range(self.n_decoder_layers):
            window = None if all_global else self.layer_window(layer)
            kept += n_tokens if window is None else min(n_tokens, window)
        return per_position * kept

    @property
    def shared_window(self) -> int | None:
        """The window every layer shares (Mistral), None where layers differ or have none."""
        return self.sliding_window if self.layer_types is None else None

    @property
    def has_encoder(self) -> bool:
        return self.kind in ("encoder-decoder", "encoder")

    @property
    def has_decoder(self) -> bool:
        return self.kind in ("encoder-decoder", "decoder")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TransformerConfig:
        """Build from JSON, refusing unknown keys so a damaged config is caught early."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config keys: {', '.join(unknown)}")
        return cls(**data)
