"""The models a server process keeps loaded, under a byte budget: a class that opens many
models must not grow a replica until the machine swaps or the kernel kills it.

Least recently used goes first; the model just loaded always stays, even alone over the
budget (it is in use). A dropped model is only forgotten here: a session drawing with it
keeps its own reference until its run ends, and the next one to ask loads it again.
"""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

import torch


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


class ModelShelf:
    """Loaded models by key, least recently used first, bounded by ``budget`` bytes. One load
    per key at a time: a second session asking for a model being loaded waits for it."""

    def __init__(self, budget: int):
        self.budget = budget
        self.total = 0
        self._items: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[Hashable, threading.Lock] = {}

    def kept_keys(self) -> list:
        with self._lock:
            return list(self._items)

    def _hit(self, key: Hashable, missing: object) -> object:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return missing
            self._items.move_to_end(key)
            return found[0]

    def get_or_load(
        self, key: Hashable, load: Callable[[], object], size: Callable[[object], int] = model_bytes
    ) -> tuple[object, list]:
        """The kept model of ``key``, else ``load()`` kept; and the keys it pushed out."""
        missing = object()
        value = self._hit(key, missing)
        if value is not missing:
            return value, []
        with self._lock:
            lock = self._loading.setdefault(key, threading.Lock())
        try:
            with lock:
                value = self._hit(key, missing)
                if value is not missing:
                    return value, []
                value = load()
                return value, self._put(key, value, size(value))
        finally:
            with self._lock:
                self._loading.pop(key, None)

    def _put(self, key: Hashable, value: object, size: int) -> list:
        dropped = []
        with self._lock:
            self._items[key] = (value, size)
            self.total += size
            while self.total > self.budget and len(self._items) > 1:
                old, (_, old_size) = self._items.popitem(last=False)
                self.total -= old_size
                dropped.append(old)
        if dropped:
            gc.collect()  # a model's modules may hold cycles: give the memory back now
        return dropped

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.total = 0
