"""Positional information, the paper's way and the ways that came after it.

Added to the token embeddings (absolute): the paper's fixed sinusoids, or a learned table
(BERT, GPT-2). Applied inside attention (relative): rotary positions (RoPE, Su et al. 2021)
rotate each query and key by an angle proportional to its position, so q·k depends only on
the distance; ALiBi (Press et al. 2022) adds a per-head penalty linear in the distance to the
scores. "none" gives a model with no positional signal at all (a causal mask still leaks
order into a decoder).
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn


def sinusoidal_encoding(max_len: int, d_model: int, interleaved: bool = True) -> torch.Tensor:
    """The paper's table, [max_len, d_model]: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos.

    ``interleaved=False`` gives the other common layout (all sines, then all cosines); it
    carries the same information in a different column order. (tensor2tensor also puts sines
    before cosines, but spaces its frequencies differently: i/(d/2 - 1) instead of 2i/d.)
    """
    if max_len < 0 or d_model <= 0:
        raise ValueError(f"need max_len >= 0 and d_model > 0, got {max_len}, {d_model}")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # [L, 1]
    # 1 / 10000^(2i/d) for i = 0 .. ceil(d/2)-1, computed in float64 for exact tables.
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model)
    )
    angles = position * inv_freq  # [L, ceil(d/2)]
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    if interleaved:
        pe[:, 0::2] = torch.sin(angles)
        pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    else:
        half = angles.shape[1]
        pe[:, :half] = torch.sin(angles)
        pe[:, half:] = torch.cos(angles[:, : d_model - half])
    return pe.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds nothing learnable: the table is a buffer, so it moves with .to(device)."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # [B, L] -> [B, L, D]
        return self.pe[positions]


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position; cannot go past max_len (unlike the sinusoids)."""

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.embedding = nn.Embedding(max_len, d_model)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # [B, L] -> [B, L, D]
        return self.embedding(positions)

    @property
    def table(self) -> torch.Tensor:
        return self.embedding.weight


ABSOLUTE = ("sinusoidal", "learned")  # added to the embeddings
RELATIVE = ("rope", "alibi")  # applied inside self-attention
SCHEMES = (*ABSOLUTE, *RELATIVE, "none")


def build_positional(kind: str, max_len: int, d_model: int) -> nn.Module | None:
    """The module added to the token embeddings; None for schemes that add nothing there."""
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(max_len, d_model)
    if kind == "learned":
        return LearnedPositionalEmbedding(max_len, d_model)
    if kind in (*RELATIVE, "none"):
        return None
    raise ValueError(f"unknown positional encoding {kind!r}")


# --- rotary positions (RoPE) ------------------------------------------------------------------


def rope_frequencies(d_k: int, base: float = 10000.0) -> torch.Tensor:
    """θ_i = base^(-2i/d_k) for the d_k/2 pairs of dimensions (2i, 2i+1): the paper's rates."""
    if d_k <= 0 or d_k % 2:
        raise ValueError(f"rotary positions need an even d_k, got {d_k}")
    return torch.exp(torch.arange(0, d_k, 2, dtype=torch.float64) * (-math.log(base) / d_k))


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> torch.Tensor:
    """Rotate each pair of dimensions of x [..., L, d_k] by the angle positions[L] · θ_i.

    A rotation by p·θ of q and by s·θ of k leaves q·k a function of (p - s) alone, so
    attention scores see only relative distance, and cached keys keep their rotation.
    ``layout`` says which dimensions pair up: "interleaved" (2i, 2i+1), the RoPE paper's, or
    "half" (i, i + d_k/2), the rotate-half form LLaMA-family checkpoints were trained with.
    The two are the same rotation on permuted dimensions, so weights fit only their own.
    """
    if layout not in ("interleaved", "half"):
        raise ValueError(f"unknown rotary layout {layout!r}; use 'interleaved' or 'half'")
    d_k = x.shape[-1]
    if d_k <= 0 or d_k % 2:
        raise ValueError(f"rotary positions need an even d_k, got {d_k}")
    # θ_i built on x's device: a host-to-device copy per call would stall a GPU's stream
    angles = rope_angles(positions.to(x.device), d_k, base, exact=x.dtype == torch.float64)
    return rotate(x, torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype), layout)


def rope_angles(
    positions: torch.Tensor, d_k: int, base: float, exact: bool = False
) -> torch.Tensor:
    """positions[L] · θ_i as [L, d_k/2], θ_i = 1 / base^(2i/d_k). In float32 step by step as
    transformers' rotary embeddings compute them, so a checkpoint's rotations are its own:
    with float64 angles Gemma 3 270M's logits at 681 tokens were 1.7e-4 from transformers',
    with these 7e-5 (near position 680 a float32 angle is ~1e-5 rad off the exact one).
    ``exact``: in float64 (float64 inputs, for the pages that check RoPE's algebra)."""
    dtype = torch.float64 if exact else torch.float32
    dims = torch.arange(0, d_k, 2, dtype=torch.int64, device=positions.device).to(dtype)
    inv_freq = 1.0 / (base ** (dims / d_k))
    return positions.to(dtype)[:, None] * inv_freq[None, :]


@functools.lru_cache(maxsize=16)
def rope_table(
    start: int, n: int, d_k: int, base: float, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) [n, d_k/2] of positions start .. start + n - 1: the same numbers as
    ``apply_rope`` computes, kept for the layers of one forward (every layer rotates the
    same positions), read-only and shared."""
    positions = torch.arange(start, start + n, device=device)
    angles = rope_angles(positions, d_k, base, exact=dtype == torch.float64)
    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """x [..., L, d_k] rotated pair by pair by angles with cos / sin [L, d_k/2]."""
    d_k = x.shape[-1]
    if layout == "half":
        first, second = x[..., : d_k // 2], x[..., d_k // 2 :]
        return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


# --- ALiBi --------------------------------------------------------------------------------------


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """One slope per head: 2^(-8/n), 2^(-16/n), ... 2^(-8) for n a power of two.

    Otherwise (the paper's rule): the slopes of the nearest lower power of two n', then every
    other slope of 2n' until there are n.
    """
    if n_heads <= 0:
        raise ValueError(f"need at least one head, got {n_heads}")

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    lower = 2 ** math.floor(math.log2(n_heads))
    slopes = power_of_two(lower)
    if lower < n_heads:
        slopes += power_of_two(2 * lower)[0::2][: n_heads - lower]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(n_heads: int, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
    """[H, Lq, Lk] additive score bias: -slope_h · |q - k| for query / key positions.

    In a causal decoder the mask hides every k > q, so this is the paper's -m · (q - k); an
    encoder gets the symmetric form used for bidirectional models.
    """
    dist = (q_positions[:, None] - k_positions[None, :]).abs().to(torch.float32)  # [Lq, Lk]
    return -alibi_slopes(n_heads).to(dist.device)[:, None, None] * dist
