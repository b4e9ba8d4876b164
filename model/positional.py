"""Positional information: the paper's fixed sinusoids, or a learned table (BERT, GPT-2)."""

from __future__ import annotations

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


def build_positional(kind: str, max_len: int, d_model: int) -> nn.Module:
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(max_len, d_model)
    if kind == "learned":
        return LearnedPositionalEmbedding(max_len, d_model)
    raise ValueError(f"unknown positional encoding {kind!r}")
