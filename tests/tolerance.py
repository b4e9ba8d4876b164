"""Tolerances for two float32 computations of the same numbers, relative to their size.

Two float32 paths to the same values (another summation order, a fused kernel, our model
beside transformers') differ by rounding errors that grow with the size of the numbers they
pass through: float32 keeps about 7 significant digits, so logits near 13 carry about 13
times the error of probabilities. A fixed ``atol`` with ``rtol=0`` fails on rounding alone
once values are large (1.05e-5 against 1e-5 on logits near 13), and ``rtol`` alone is too
strict near zero, where a value that came from cancelling large terms keeps their error.
So the tolerance here is ``atol`` for values of size 1 and below, scaled by the largest
magnitude involved above that: never looser than before for probabilities and attention
weights, and a real mistake (a wrong mask, a missing term) is still off by far more.
"""

from __future__ import annotations

import torch


def f32_tolerance(atol: float, *values) -> float:
    """``atol`` times the largest magnitude among ``values`` (tensors, arrays or numbers),
    and never less than ``atol``."""
    scale = 1.0
    for value in values:
        t = torch.as_tensor(value)
        if t.numel():
            scale = max(scale, t.detach().abs().max().item())
    return atol * scale


def assert_close_f32(actual, expected, atol: float, *, scale=(), msg=None) -> None:
    """``actual`` equals ``expected`` within float32 rounding: ``atol`` for values of size
    1, scaled by the largest of ``expected`` (and of ``scale``: the terms a sum was made of,
    whose rounding it keeps even where they cancel)."""
    actual, expected = torch.as_tensor(actual), torch.as_tensor(expected)
    tol = f32_tolerance(atol, expected, *scale)
    torch.testing.assert_close(actual, expected, atol=tol, rtol=0, msg=msg)
