"""Attention recomputed by hand from a layer's own weights, for the step-by-step page.

The model is run once with a Recorder that keeps each attention's input; then q, k and v are
recomputed from the layer's W_Q, W_K, W_V and every step (q·k, /√d_k, mask, softmax, Σ w·v,
concat, W_O) is done in the open. ``agrees`` says whether the hand-made result equals what
the model itself computed, so the page can show the match rather than claim it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from model.attention import repeat_kv
from model.positional import alibi_bias, apply_rope
from model.trace import Recorder


@dataclass
class Walkthrough:
    """One attention layer, every head, done by hand. Shapes in comments; CPU float32."""

    kind: str  # "encoder" (self-attention), "decoder" (masked self-attention) or "cross"
    tokens: list[str]
    x: torch.Tensor  # [L, D] the layer's input (after the pre-LN norm, where there is one)
    q: torch.Tensor  # [H, L, d_k]
    k: torch.Tensor  # [H, L, d_k]
    v: torch.Tensor  # [H, L, d_k]
    scores: torch.Tensor  # [H, L, L] q·k
    scaled: torch.Tensor  # [H, L, L] q·k / √d_k
    allowed: torch.Tensor  # [L, L] bool, True = may attend
    weights: torch.Tensor  # [H, L, L] softmax over allowed keys
    heads: torch.Tensor  # [H, L, d_k] Σ_j w_ij v_j
    concat: torch.Tensor  # [L, D] heads side by side
    w_o: torch.Tensor  # [D, D] as used: out = concat @ w_o + b_o
    out: torch.Tensor  # [L, D] concat @ W_O + b_o
    model_weights: torch.Tensor  # [H, L, L] what the model recorded
    model_out: torch.Tensor  # [L, D] the layer's own attention output
    bias: bool = True  # whether W_Q, W_K, W_V add a bias (q = x W_Q + b_Q)
    key_tokens: list[str] | None = None  # cross-attention: the encoder's tokens (else = tokens)
    memory: torch.Tensor | None = None  # [Lk, D] what keys and values are made from

    @property
    def d_k(self) -> int:
        return self.q.shape[-1]

    @property
    def n_heads(self) -> int:
        return self.q.shape[0]

    def weights_error(self) -> float:
        return float((self.weights - self.model_weights).abs().max())

    def out_error(self) -> float:
        return float((self.out - self.model_out).abs().max())

    def agrees(self, atol: float = 1e-4) -> bool:
        return self.weights_error() <= atol and self.out_agrees(atol * 10)

    def out_agrees(self, atol: float = 1e-3) -> bool:
        return self.out_error() <= atol


def walkthrough_kind(model_kind: str) -> str:
    """Which attention kind the page walks through for a model of ``model_kind``
    (encoder / decoder / encoder-decoder): the first stack's self-attention."""
    return "decoder" if model_kind == "decoder" else "encoder"


def _attention_module(network: nn.Module, kind: str, layer: int):
    stack = network.decoder if kind == "decoder" else network.encoder
    return stack.layers[layer].self_attn


@torch.inference_mode()
def record_inputs(lm, text: str) -> tuple[list[str], Recorder]:
    """One traced pass over ``text`` that keeps every self-attention's input."""
    network = lm.network
    enc = lm.encode(text)
    ids = torch.tensor([enc.ids], dtype=torch.long, device=lm.device)
    rec = Recorder(inputs=True)
    if lm.kind == "decoder":
        network.decode(ids, rec)
        tokens = lm.tgt_tokenizer.tokens(enc.ids)
    else:
        network.encode(ids, rec)
        tokens = enc.tokens
    return list(tokens), rec


def _by_hand(
    mha: nn.Module, seen: dict, query_tokens: list[str], key_tokens: list[str], kind: str
) -> Walkthrough:
    """Every head of one attention recomputed from its weights, beside what the model did."""
    x = seen["query"][0].float().cpu()  # [Lq, D]
    memory = seen["memory"][0].float().cpu()  # [Lk, D] (the same tensor as x for self-attention)
    n, m, h = x.shape[0], memory.shape[0], mha.n_heads
    d_k = mha.d_k  # d_model / h, unless the checkpoint sets its own head width

    def project(linear: nn.Linear, source: torch.Tensor, heads: int) -> torch.Tensor:
        """[L, D] -> [heads, L, d_k]: the projection, bias included, split into heads."""
        w = linear.weight.detach().float().cpu()
        b = linear.bias.detach().float().cpu() if linear.bias is not None else 0.0
        return (source @ w.T + b).view(source.shape[0], heads, d_k).transpose(0, 1)

    # Grouped-query models share each key/value head across a group of query heads.
    g = mha.n_kv_heads
    q = project(mha.q_proj, x, h)
    k = repeat_kv(project(mha.k_proj, memory, g)[None], h // g)[0]
    v = repeat_kv(project(mha.v_proj, memory, g)[None], h // g)[0]
    if mha.q_norm is not None:  # QK-norm: each head's queries and keys, before the rotation
        q, k = _rms(mha.q_norm, q), _rms(mha.k_norm, k)
    q_pos, k_pos = torch.arange(n), torch.arange(m)
    if mha.rope:  # rotary positions turn q and k before they meet (self-attention only)
        turn = {"base": mha.rope_base, "layout": mha.rope_layout}
        q, k = apply_rope(q, q_pos, **turn), apply_rope(k, k_pos, **turn)
    scores = q @ k.transpose(-1, -2)  # [H, Lq, Lk]
    scaled = scores / math.sqrt(d_k) if mha.scale is None else scores * mha.scale
    if mha.alibi:  # ALiBi: the distance penalty joins the scaled scores
        scaled = scaled + alibi_bias(h, q_pos, k_pos)
    mask = seen["mask"]
    allowed = (
        torch.ones(n, m, dtype=torch.bool)
        if mask is None
        else mask[0].expand(-1, n, m).reshape(-1, n, m)[0].cpu().bool()
    )
    weights = torch.softmax(scaled.masked_fill(~allowed, float("-inf")), dim=-1)
    weights = torch.nan_to_num(weights, nan=0.0)  # a query with no allowed key: zero weights
    heads = weights @ v  # [H, Lq, d_k]
    concat = heads.transpose(0, 1).reshape(n, h * d_k)  # [Lq, H·d_k]
    w_o = mha.out_proj.weight.detach().float().cpu().T  # [H·d_k, D]
    b_o = mha.out_proj.bias.detach().float().cpu() if mha.out_proj.bias is not None else 0.0
    out = concat @ w_o + b_o
    model_out = mha(seen["query"], seen["memory"], seen["memory"], mask, need_weights=False).output
    return Walkthrough(
        kind=kind,
        tokens=query_tokens,
        x=x,
        q=q,
        k=k,
        v=v,
        scores=scores,
        scaled=scaled,
        allowed=allowed,
        weights=weights,
        heads=heads,
        concat=concat,
        w_o=w_o,
        out=out,
        model_weights=torch.empty(0),  # filled in by the caller from the traced pass
        model_out=model_out[0].float().cpu(),
        bias=mha.q_proj.bias is not None,
        key_tokens=key_tokens,
        memory=memory,
    )


def _rms(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last axis with ``norm``'s eps and gain, on the CPU in float32."""
    gain = norm.gain.detach().float().cpu()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps) * gain


@torch.inference_mode()
def walkthrough(lm, text: str, layer: int) -> Walkthrough:
    """Every head of ``layer`` recomputed from its projection weights; see ``agrees``."""
    kind = walkthrough_kind(lm.kind)
    tokens, rec = record_inputs(lm, text)
    if not 0 <= layer < len(rec.inputs[kind]):
        raise ValueError(f"layer {layer} out of range 0..{len(rec.inputs[kind]) - 1}")
    mha = _attention_module(lm.network, kind, layer)
    wt = _by_hand(mha, rec.inputs[kind][layer], tokens, tokens, kind)
    wt.model_weights = rec.weights(kind, layer).cpu()  # what the traced pass recorded
    return wt


@torch.inference_mode()
def cross_walkthrough(lm, text: str, layer: int) -> Walkthrough:
    """Cross-attention of decoder ``layer`` by hand: queries from the decoder, keys and values
    from the encoder's output. The decoder reads the model's own greedy output shifted right
    (<bos> y1 .. yn), as on the explorer."""
    if lm.kind != "encoder-decoder":
        raise ValueError("only an encoder-decoder model has cross-attention")
    network, tgt = lm.network, lm.tgt_tokenizer
    enc = lm.encode(text)
    continuation = [s.token_id for s in lm.decode(text)]
    dec_in = [tgt.bos_id, *[i for i in continuation if i != tgt.eos_id]][: lm.max_len]
    src = torch.tensor([enc.ids], dtype=torch.long, device=lm.device)
    rec = Recorder(inputs=True)
    memory, valid = network.encode(src, rec)
    network.decode(torch.tensor([dec_in], dtype=torch.long, device=lm.device), memory, valid, rec)
    if not 0 <= layer < len(rec.inputs["cross"]):
        raise ValueError(f"layer {layer} out of range 0..{len(rec.inputs['cross']) - 1}")
    mha = network.decoder.layers[layer].cross_attn
    wt = _by_hand(
        mha, rec.inputs["cross"][layer], list(tgt.tokens(dec_in)), list(enc.tokens), "cross"
    )
    wt.model_weights = rec.weights("cross", layer).cpu()
    return wt


def layer_norm_module(network: nn.Module, name: str) -> nn.LayerNorm | None:
    """The LayerNorm behind a Trace.norms name ("encoder.0.self_attn", "decoder.final", ...)."""
    parts = name.split(".")
    stack = getattr(network, parts[0], None)
    if stack is None:
        return None
    if parts[1] == "final":
        return stack.final_norm
    layer = stack.layers[int(parts[1])]
    wrapper = {"self_attn": "attn_norm", "cross_attn": "cross_norm", "ffn": "ffn_norm"}[parts[2]]
    return getattr(layer, wrapper).norm
