"""A lab network run layer by layer, so an analysis can read, edit and split its residual stream.

The logit lens, activation patching and direct logit attribution all need what a normal
forward keeps to itself: the stream after every layer, each head's output before W_O, and
the stream as a sum of the parts that wrote into it. Hooks on the modules would do it, but
a model is shared by every browser session; this runner calls the same modules in the same
order with its own state per call, so two sessions' interventions can never meet.
Tests hold its logits equal to the model's own forward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from model.attention import MultiHeadAttention, scaled_dot_product_attention
from model.layers import AddNorm, RMSNorm
from model.masks import attention_mask
from model.transformer import DecoderModel, EncoderDecoderModel

Site = tuple[str, str, int]  # ("resid", stack, i) | ("heads", kind, layer)
Edit = Callable[[Site, torch.Tensor], torch.Tensor]


class NotADecoder(ValueError):
    """The model has no decoder of our own to read (encoder-only, or run by transformers)."""


def check_network(network) -> DecoderModel | EncoderDecoderModel:
    if not isinstance(network, (DecoderModel, EncoderDecoderModel)):
        raise NotADecoder(
            "this analysis needs a decoder that runs Attention Lab's own code "
            "(en2ko, reverse, sort, induction or a model trained here)"
        )
    return network


@dataclass
class Run:
    """What one layer-by-layer pass saw (batch first everywhere)."""

    logits: torch.Tensor  # [B, Lt, vocab]
    resid: dict[str, list[torch.Tensor]] = field(default_factory=dict)  # stack -> L + 1 x [B, L, D]
    heads: dict[tuple[str, int], torch.Tensor] = field(default_factory=dict)  # [B, H, Lq, d_k]
    attention: dict[str, list[torch.Tensor]] = field(default_factory=dict)  # kind -> [B,H,Lq,Lk]
    # The decoder's final stream (what the output projection reads) as a sum of named
    # parts [B, Lt, D]: embeddings, one per head, W_O biases, FFNs, LayerNorm betas.
    parts: dict[str, torch.Tensor] = field(default_factory=dict)


class _State:
    def __init__(self, edit: Edit | None, decompose: bool):
        self.edit = edit
        self.decompose = decompose
        self.tracking = False  # parts are kept for the decoder stream only
        self.run = Run(logits=torch.empty(0))

    def site(self, site: Site, x: torch.Tensor) -> torch.Tensor:
        if self.edit is not None:
            x = self.edit(site, x)
        if site[0] == "resid":
            self.run.resid.setdefault(site[1], []).append(x)
        else:
            self.run.heads[(site[1], site[2])] = x
        return x

    def add(self, parts: dict[str, torch.Tensor]) -> None:
        if self.tracking:
            self.run.parts.update(parts)

    def layer_norm(self, norm: nn.Module, z: torch.Tensor, name: str) -> torch.Tensor:
        """LayerNorm(z) or RMSNorm(z); the parts go through it as the linear (LayerNorm:
        affine) map it is for this z."""
        out = norm(z)
        if self.tracking and isinstance(norm, RMSNorm):  # no centring, no bias
            rms = (z.pow(2).mean(dim=-1, keepdim=True) + norm.eps).sqrt()
            for key, part in self.run.parts.items():
                self.run.parts[key] = part / rms * norm.gain
        elif self.tracking:
            sigma = (z.var(dim=-1, unbiased=False, keepdim=True) + norm.eps).sqrt()
            for key, part in self.run.parts.items():
                self.run.parts[key] = (part - part.mean(-1, keepdim=True)) / sigma * norm.weight
            self.run.parts[f"norm.{name}"] = norm.bias.expand_as(z)
        return out


def _attend(
    mha: MultiHeadAttention,
    query: torch.Tensor,
    memory: torch.Tensor,
    mask: torch.Tensor | None,
    kind: str,
    layer: int,
    st: _State,
) -> torch.Tensor:
    q, k, v, bias = mha.project(query, memory, memory)  # [B, H, L, d_k], positions applied
    heads, weights = scaled_dot_product_attention(q, k, v, mask, bias=bias, scale=mha.scale)
    st.run.attention.setdefault(kind, []).append(weights)
    heads = st.site(("heads", kind, layer), heads)
    out = mha.out_proj(mha.merge_heads(heads))
    if st.tracking:
        w = mha.out_proj.weight  # [D, H·d_k]; head h owns input columns h*d_k .. (h+1)*d_k
        parts = {
            f"{kind}.{layer}.{h}": heads[:, h] @ w[:, h * mha.d_k : (h + 1) * mha.d_k].T
            for h in range(mha.n_heads)
        }
        if mha.out_proj.bias is not None:
            parts[f"{kind}.{layer}.bias"] = mha.out_proj.bias.expand_as(out)
        st.add(parts)
    return out


def _add_norm(
    an: AddNorm, x: torch.Tensor, sub: Callable[[torch.Tensor], torch.Tensor], st: _State, name: str
) -> torch.Tensor:
    if an.pre_norm and an.post_norm is not None:  # x + Norm(Sublayer(Norm(x))) (Gemma)
        before = set(st.run.parts) if st.tracking else set()
        branch = sub(an.norm(x))
        out = an.post_norm(branch)
        if st.tracking:  # the branch's own parts, through the norm as the linear map it is here
            rms = (branch.pow(2).mean(dim=-1, keepdim=True) + an.post_norm.eps).sqrt()
            for key in set(st.run.parts) - before:
                st.run.parts[key] = st.run.parts[key] / rms * an.post_norm.gain
        return x + out
    if an.pre_norm:  # x + Sublayer(LayerNorm(x)): the norm only touches the branch
        return x + sub(an.norm(x))
    return st.layer_norm(an.norm, x + sub(x), name)  # LayerNorm(x + Sublayer(x))


def _ffn(layer: nn.Module, x: torch.Tensor, st: _State, name: str) -> torch.Tensor:
    if layer.ffn is None:
        return x

    def sub(h: torch.Tensor) -> torch.Tensor:
        out = layer.ffn(h)
        st.add({f"ffn.{name}": out})
        return out

    return _add_norm(layer.ffn_norm, x, sub, st, f"{name}.ffn")


def _own_mask(layer: nn.Module, mask: torch.Tensor | None) -> torch.Tensor | None:
    """The self-attention mask as this layer applies it (a Gemma 3 local layer's window)."""
    return layer.self_mask(mask) if hasattr(layer, "self_mask") else mask


def _stack(
    layers: nn.ModuleList,
    final_norm: nn.LayerNorm | None,
    x: torch.Tensor,
    mask: torch.Tensor,
    stack: str,
    st: _State,
    memory: torch.Tensor | None = None,
    cross_mask: torch.Tensor | None = None,
    first: int = 0,
) -> torch.Tensor:
    """The stack's layers from ``first`` on; ``x`` is the stream they read (the embeddings,
    or the stream after layer ``first``)."""
    x = st.site(("resid", stack, first), x)
    if st.tracking:
        st.run.parts = {"embed": x}
    for i, layer in enumerate(layers):
        if i < first:
            continue
        x = _add_norm(
            layer.attn_norm,
            x,
            lambda h, i=i, layer=layer: _attend(
                layer.self_attn, h, h, _own_mask(layer, mask), stack, i, st
            ),
            st,
            f"{stack}.{i}.self_attn",
        )
        if getattr(layer, "cross_attn", None) is not None:
            x = _add_norm(
                layer.cross_norm,
                x,
                lambda h, i=i, layer=layer: _attend(
                    layer.cross_attn, h, memory, cross_mask, "cross", i, st
                ),
                st,
                f"{stack}.{i}.cross_attn",
            )
        x = _ffn(layer, x, st, f"{stack}.{i}")
        x = st.site(("resid", stack, i + 1), x)
    if final_norm is not None:
        x = st.layer_norm(final_norm, x, f"{stack}.final")
    return x


@torch.no_grad()
def run(
    network,
    ids: torch.Tensor,
    src_ids: torch.Tensor | None = None,
    edit: Edit | None = None,
    decompose: bool = False,
    logits_at: int | None = None,
    start: tuple[int, torch.Tensor] | None = None,
) -> Run:
    """One pass of a decoder-only (ids) or encoder-decoder (src_ids, decoder ids) network.

    ``edit(site, tensor)`` may replace the stream after embedding / layer i
    (("resid", "encoder" | "decoder", i), i = 0 .. layers) or a layer's head outputs before
    W_O (("heads", "encoder" | "decoder" | "cross", layer), [B, H, L, d_k]).
    ``logits_at``: the logits of that decoder position only ([B, 1, vocab]); a 262k-token
    vocabulary (Gemma 3) costs more to project onto than the layers below it.
    ``start=(i, stream)``: a decoder-only pass that begins from ``stream`` [B, L, D], the
    decoder's stream after layer i (its resid site i), skipping the layers below: an edit at
    site i or above sees what a whole pass over the same input would show it.
    """
    network = check_network(network)
    st = _State(edit, decompose)
    memory = cross_mask = None
    if isinstance(network, EncoderDecoderModel):
        if src_ids is None:
            raise ValueError("an encoder-decoder model needs the source ids")
        valid = network.valid(src_ids)
        memory = _stack(
            network.encoder.layers,
            network.encoder.final_norm,
            network.src_embed(src_ids),
            attention_mask(valid, valid),
            "encoder",
            st,
        )
        self_mask, cross_mask, _ = network._decoder_masks(ids, None, valid)
        embed, head = network.tgt_embed, network.generator
    else:
        self_mask, _, _ = network._decoder_masks(ids, None, None)
        embed, head = network.embed, network.head
    if start is not None and memory is not None:
        raise ValueError("start= is for decoder-only networks")
    first, x = (0, embed(ids)) if start is None else start
    st.tracking = decompose
    y = _stack(
        network.decoder.layers,
        network.decoder.final_norm,
        x,
        self_mask,
        "decoder",
        st,
        memory,
        cross_mask,
        first,
    )
    st.run.logits = head(y if logits_at is None else y[:, logits_at : logits_at + 1])
    return st.run


def unembed(network, x: torch.Tensor, vocab: slice = slice(None)) -> torch.Tensor:
    """The decoder's way out: final LayerNorm (pre-LN models) and the output projection;
    ``vocab``: only those rows of the output matrix, a slice of the logits (the logit lens
    reads a 262k-token vocabulary a slice at a time)."""
    norm = check_network(network).decoder.final_norm
    return (x if norm is None else norm(x)) @ output_matrix(network)[vocab].T


def output_matrix(network) -> torch.Tensor:
    """W_U [vocab, D]: the output projection the logits are read with."""
    network = check_network(network)
    head = network.generator if isinstance(network, EncoderDecoderModel) else network.head
    return head.weight
