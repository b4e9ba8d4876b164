"""The blocks every model here is built from: FFN, Add & Norm, encoder and decoder layers."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from model.attention import AttentionConfig, MultiHeadAttention
from model.config import TransformerConfig
from model.masks import MaskSpec, drop_first_keys, within_window
from model.trace import Recorder


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation, the form GPT-2 was trained with."""
    return F.gelu(x, approximate="tanh")


ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": _gelu_tanh,
    "swiglu": F.silu,
    "geglu": _gelu_tanh,
}
GATED = ("swiglu", "geglu")  # act(W_1 x) ⊙ V x: a third matrix V, ``up``


class FeedForward(nn.Module):
    """Position-wise FFN(x) = W_2 act(W_1 x + b_1) + b_2, the same MLP at every position.

    "swiglu" (Shazeer 2020, LLaMA) gates it: W_2 (Swish(W_1 x) ⊙ V x), with a third matrix
    V (``up``); Swish = SiLU, x·σ(x). "geglu" (the same paper; Gemma) gates with GELU's
    tanh form instead: W_2 (GELU_tanh(W_1 x) ⊙ V x).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str, bias: bool = True):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias) if activation in GATED else None
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.activation = ACTIVATIONS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.activation(self.linear1(x))  # [B, L, d_ff]
        if self.up is not None:
            h = h * self.up(x)
        return self.linear2(self.dropout(h))


class RMSNorm(nn.Module):
    """x / RMS(x) · g, RMS(x) = sqrt(mean(x²) + eps) (Zhang & Sennrich 2019): LayerNorm
    without the centring and without a bias; LLaMA, Qwen2 and Mistral normalise this way.

    ``unit_offset`` (Gemma): g = 1 + w, with w stored centred on 0, and the gain applied in
    float32 before the cast back (LLaMA casts first, then scales)."""

    def __init__(self, d_model: int, eps: float, unit_offset: bool = False):
        super().__init__()
        self.unit_offset = unit_offset
        self.weight = nn.Parameter(torch.zeros(d_model) if unit_offset else torch.ones(d_model))
        self.eps = eps

    @property
    def gain(self) -> torch.Tensor:
        """g, what each normalised feature is multiplied by: w, or 1 + w (unit_offset)."""
        return 1.0 + self.weight if self.unit_offset else self.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.unit_offset:
            return (h * (1.0 + self.weight.float())).to(x.dtype)
        return self.weight * h.to(x.dtype)


def make_norm(cfg: TransformerConfig) -> nn.Module:
    """The config's normalisation over d_model: LayerNorm or RMSNorm."""
    if cfg.norm == "rms":
        return RMSNorm(cfg.d_model, cfg.layer_norm_eps, cfg.rms_unit_offset)
    return nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)


def recorded(ffn: nn.Module, rec: Recorder | None, kind: str) -> Callable:
    """The FFN, keeping its input in ``rec.inputs[kind]`` when the recorder asks for inputs."""

    def run(h: torch.Tensor) -> torch.Tensor:
        if rec is not None:
            rec.add_input(kind, h, h, None)
        return ffn(h)

    return run


class AddNorm(nn.Module):
    """Residual connection and LayerNorm around one sub-layer, in either placement.

    post-LN (the paper): LayerNorm(x + Sublayer(x)).
    pre-LN (GPT-2, Xiong et al. 2020): x + Sublayer(LayerNorm(x)); trains without warm-up.
    sandwich (Gemma 2 and 3; ``post_norm``): x + Norm_post(Sublayer(Norm_pre(x))), the
    branch normalised again before it joins the residual stream.
    """

    def __init__(
        self,
        d_model: int,
        eps: float,
        dropout: float,
        pre_norm: bool,
        rms: bool = False,
        *,
        unit_offset: bool = False,
        post_norm: bool = False,
    ):
        super().__init__()

        def norm() -> nn.Module:
            return RMSNorm(d_model, eps, unit_offset) if rms else nn.LayerNorm(d_model, eps=eps)

        self.norm = norm()
        self.post_norm = norm() if post_norm else None
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = pre_norm

    def forward(
        self,
        x: torch.Tensor,
        sublayer: Callable[[torch.Tensor], torch.Tensor],
        rec: Recorder | None = None,
        name: str = "",
    ) -> torch.Tensor:
        if self.pre_norm:
            h = self.norm(x)
            if rec is not None:
                rec.add_norm(name, x, h)
            branch = sublayer(h)
            if self.post_norm is not None:
                branch = self.post_norm(branch)
            return x + self.dropout(branch)
        y = x + self.dropout(sublayer(x))
        out = self.norm(y)
        if rec is not None:
            rec.add_norm(name, y, out)
        return out


def attention_config(
    cfg: TransformerConfig, layer: int | None = None, *, cross: bool = False
) -> AttentionConfig:
    """One attention layer's AttentionConfig, as the model's config says: key/value heads,
    d_k, biases, and (self-attention only) relative positions (RoPE or ALiBi, applied in the
    layer rather than added to the embeddings) and the score scale. ``layer``: a decoder
    layer, for its own rotary base (Gemma's local and global layers). ``cross``:
    cross-attention, which takes no positions (its keys are another sequence's) and the
    default 1/√d_k."""
    common = dict(
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        n_kv_heads=cfg.kv_heads,
        d_k=cfg.d_k,
        dropout=cfg.dropout,
        bias=cfg.qkv_bias,
        out_bias=cfg.out_bias,
    )
    if cross:
        return AttentionConfig(**common)
    return AttentionConfig(
        **common,
        positions=cfg.positions,
        rope_base=cfg.rope_base if layer is None else cfg.layer_rope_base(layer),
        rope_layout=cfg.rope_layout,
        scale=cfg.attention_scale,
    )


def self_attention(cfg: TransformerConfig, layer: int | None = None) -> MultiHeadAttention:
    """Self-attention as the config says (``attention_config``), with QK-norm where the
    config has it."""
    return MultiHeadAttention(
        attention_config(cfg, layer), q_norm=qk_norm(cfg), k_norm=qk_norm(cfg)
    )


def qk_norm(cfg: TransformerConfig) -> RMSNorm | None:
    """QK-norm's RMSNorm over one head's d_k features (its own gain), where the config has it."""
    return RMSNorm(cfg.d_k, cfg.layer_norm_eps, cfg.rms_unit_offset) if cfg.qk_norm else None


def add_norm(cfg: TransformerConfig) -> AddNorm:
    """Add & Norm as the config places it, with its kind of normalisation."""
    pre = cfg.norm_placement == "pre"
    return AddNorm(
        cfg.d_model,
        cfg.layer_norm_eps,
        cfg.dropout,
        pre,
        cfg.norm == "rms",
        unit_offset=cfg.rms_unit_offset,
        post_norm=cfg.sandwich_norm,
    )


def _feed_forward(cfg: TransformerConfig) -> tuple[FeedForward | None, AddNorm | None]:
    """The FFN sub-layer and its Add & Norm; none at all for an attention-only model (d_ff 0,
    as in Elhage et al. 2021's "attention-only transformers", where induction heads are read)."""
    if cfg.d_ff == 0:
        return None, None
    ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.dropout, cfg.ffn, cfg.ffn_bias)
    return ffn, add_norm(cfg)


class EncoderLayer(nn.Module):
    """Self-attention over the whole input, then the FFN; each wrapped in Add & Norm."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.self_attn = self_attention(cfg)
        self.attn_norm = add_norm(cfg)
        self.ffn, self.ffn_norm = _feed_forward(cfg)

    def forward(
        self,
        x: torch.Tensor,  # [B, L, D]
        mask: MaskSpec | torch.Tensor | None,  # [B, 1, L, L]
        rec: Recorder | None = None,
        name: str = "encoder.0",
        head_mask: dict[str, torch.Tensor] | None = None,  # kind -> [H], or [B, H]
    ) -> torch.Tensor:
        def attend(h: torch.Tensor) -> torch.Tensor:
            if rec is not None:
                rec.add_input("encoder", h, h, mask)
            attended = self.self_attn(
                h,
                h,
                h,
                mask,
                need_weights=False,
                record=rec is not None,
                head_mask=(head_mask or {}).get("encoder"),
                blocks=0 if rec is None else rec.summed_blocks,
                norm_stages=rec is not None and rec.want_stages,
            )
            if rec is not None:
                rec.add_attention("encoder", attended.record, mask)
            return attended.output

        x = self.attn_norm(x, attend, rec, f"{name}.self_attn")
        if self.ffn is None:  # attention-only (d_ff = 0)
            return x
        return self.ffn_norm(x, recorded(self.ffn, rec, "encoder_ffn"), rec, f"{name}.ffn")


class DecoderLayer(nn.Module):
    """Masked self-attention, then (with an encoder) cross-attention, then the FFN."""

    def __init__(self, cfg: TransformerConfig, cross: bool, index: int = 0):
        super().__init__()
        # Gemma 3's local layers see only their window; its global layers every earlier key
        self.window = cfg.layer_window(index) if cfg.layer_types is not None else None
        # ... and a sliding layer's key/value cache keeps only its window (Mistral's too)
        self.cache_window = cfg.layer_window(index)
        self.self_attn = self_attention(cfg, index)
        self.attn_norm = add_norm(cfg)
        self.cross_attn = MultiHeadAttention(attention_config(cfg, cross=True)) if cross else None
        self.cross_norm = add_norm(cfg) if cross else None
        self.ffn, self.ffn_norm = _feed_forward(cfg)

    def self_mask(self, mask: MaskSpec | torch.Tensor | None):
        """The model's self-attention mask as this layer applies it: narrowed to its own
        sliding window where it has one (``within_window``)."""
        return within_window(mask, self.window)

    def forward(
        self,
        y: torch.Tensor,  # [B, Lt, D]
        self_mask: MaskSpec | torch.Tensor | None,  # [B, 1, Lt, Lt_total]
        memory: torch.Tensor | None = None,  # [B, Ls, D] encoder output
        cross_mask: MaskSpec | torch.Tensor | None = None,  # [B, 1, Lt, Ls]
        rec: Recorder | None = None,
        name: str = "decoder.0",
        cache: dict | None = None,
        head_mask: dict[str, torch.Tensor] | None = None,  # kind -> [H], or [B, H]
    ) -> torch.Tensor:
        traced = rec is not None
        head_mask = head_mask or {}
        self_mask = self.self_mask(self_mask)
        self_cache = None if cache is None else cache.setdefault("self", {})
        if self_cache is not None and self.cache_window is not None:
            self_cache["window"] = self.cache_window
            # the keys its cache has let go: the model's mask still counts them
            held = self_cache["k"].shape[2] if "k" in self_cache else 0
            self_mask = drop_first_keys(self_mask, self_cache.get("seen", held) - held)

        def self_attend(h: torch.Tensor) -> torch.Tensor:
            if traced:
                rec.add_input("decoder", h, h, self_mask)
            attended = self.self_attn(
                h,
                h,
                h,
                self_mask,
                need_weights=False,
                record=traced,
                cache=self_cache,
                head_mask=head_mask.get("decoder"),
                blocks=0 if rec is None else rec.summed_blocks,
                norm_stages=traced and rec.want_stages,
            )
            if traced:
                rec.add_attention("decoder", attended.record, self_mask)
            return attended.output

        def cross_attend(h: torch.Tensor) -> torch.Tensor:
            if traced:
                rec.add_input("cross", h, memory, cross_mask)
            attended = self.cross_attn(
                h,
                memory,
                memory,
                cross_mask,
                need_weights=False,
                record=traced,
                cache=None if cache is None else cache.setdefault("cross", {}),
                static_kv=True,
                head_mask=head_mask.get("cross"),
                blocks=0 if rec is None else rec.summed_blocks,
            )
            if traced:
                rec.add_attention("cross", attended.record, cross_mask)
            return attended.output

        y = self.attn_norm(y, self_attend, rec, f"{name}.self_attn")
        if self.cross_attn is not None:
            if memory is None:
                raise ValueError("this decoder layer needs the encoder output (memory)")
            y = self.cross_norm(y, cross_attend, rec, f"{name}.cross_attn")
        if self.ffn is None:  # attention-only (d_ff = 0)
            return y
        return self.ffn_norm(y, recorded(self.ffn, rec, "decoder_ffn"), rec, f"{name}.ffn")
