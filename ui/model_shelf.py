"""The models a server process keeps loaded, under a byte budget: a class that opens many
models must not grow a replica until the machine swaps or the kernel kills it.

Least recently used goes first; the model just loaded always stays, even alone over the
budget (it is in use). A dropped model is only forgotten here: a session drawing with it
keeps its own reference until its run ends, and the next one to ask loads it again.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable

import torch

from model.runtime.kept import ByteLRU


def model_bytes(lm) -> int:
    """The bytes of a loaded model's weights and buffers (a tensor shared by two names,
    such as tied embeddings, counted once)."""
    network = getattr(lm, "network", None) or getattr(lm, "hf_model", None)
    if not isinstance(network, torch.nn.Module):
        return 0
    seen: dict[int, int] = {}
    for tensor in (*network.parameters(), *network.buffers()):
        if tensor.device.type != "meta":
            seen[tensor.data_ptr()] = tensor.numel() * tensor.element_size()
    return sum(seen.values())


class ModelShelf(ByteLRU):
    """Loaded models by key, least recently used first, bounded by ``budget`` bytes: the
    lab's one byte-bounded cache (model.runtime.kept.ByteLRU), keeping the newest model
    even alone over the budget. One load per key at a time: a second session asking for a
    model being loaded waits for it."""

    def __init__(self, budget: int):
        super().__init__(budget, keep_newest=True)

    def get_or_load(
        self, key: Hashable, load: Callable[[], object], size: Callable[[object], int] = model_bytes
    ) -> tuple[object, list]:
        """The kept model of ``key``, else ``load()`` kept; and the keys it pushed out."""
        value, dropped = self.get_or_compute_dropped(key, load, size)
        if dropped:
            gc.collect()  # a model's modules may hold cycles: give the memory back now
        return value, dropped

    def clear(self) -> None:
        super().clear()
        gc.collect()
