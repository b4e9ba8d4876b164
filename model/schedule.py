"""Learning-rate schedules: the paper's warm-up (Noam) and linear warm-up + cosine decay.

Both are plain functions of the step, so they plot directly and plug into
``torch.optim.lr_scheduler.LambdaLR`` (give the optimizer lr=1.0 for Noam: the schedule
is the whole learning rate).
"""

from __future__ import annotations

import math
from collections.abc import Callable


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lrate = factor · d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) (paper eq. 3).

    Rises linearly for ``warmup`` steps, peaks at factor · (d_model · warmup)^-0.5, then
    decays as 1/√step. Step < 1 counts as 1 (LambdaLR starts at step 0).
    """
    if d_model <= 0 or warmup <= 0:
        raise ValueError("d_model and warmup must be positive")
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def warmup_cosine_lr(
    step: int, warmup: int, total: int, peak: float = 1.0, final: float = 0.0
) -> float:
    """Linear warm-up from 0 to ``peak`` over ``warmup`` steps, then cosine down to ``final``."""
    if total <= 0 or warmup < 0:
        raise ValueError("total must be positive and warmup non-negative")
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return final + 0.5 * (peak - final) * (1.0 + math.cos(math.pi * progress))


def noam_lambda(d_model: int, warmup: int, factor: float = 1.0) -> Callable[[int], float]:
    """``LambdaLR(opt, noam_lambda(...))`` with the optimizer's lr set to 1.0."""
    return lambda step: noam_lr(step, d_model, warmup, factor)


def warmup_cosine_lambda(warmup: int, total: int, final: float = 0.0) -> Callable[[int], float]:
    """Multiplier for LambdaLR: the optimizer's lr is the peak."""
    return lambda step: warmup_cosine_lr(step, warmup, total, 1.0, final)
