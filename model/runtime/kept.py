"""The one way the lab keeps what it computed: ``ByteLRU``, bounded by bytes, below Streamlit.

Every large thing a page computes is kept in one of these (docs/ARCHITECTURE.md, "Keeping
what was computed"): the loaded models (``ui.models.MODELS``), traces and decoding runs
(``ui.models.TRACES``), figures as their JSON (``viz.memo.FIGURES``), what is derived from
a trace (``model.analysis.kept.KEPT``: merged words, rollouts, overviews, statistics
tables, keyed by the trace itself and gone when the trace goes) and a model's readings of
the texts it was last given (``LabModel.encode``). What is kept is handed out as the very
object (no copy, no pickle), so callers only read it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import torch


def budget_bytes(env: str, default_mb: int) -> int:
    """A cache's budget: $env in MiB when it is a number >= 0, else ``default_mb``."""
    try:
        mb = float(os.environ.get(env, ""))
    except ValueError:
        mb = default_mb
    if not math.isfinite(mb) or mb < 0:
        mb = default_mb
    return int(mb * 2**20)


def nbytes(value, _depth: int = 0) -> int:
    """About how many bytes ``value`` holds: tensors, arrays and text, inside dicts, lists,
    tuples and dataclasses (a Trace), however they are nested."""
    if _depth > 8:
        return 0
    if isinstance(value, torch.Tensor):
        return value.element_size() * value.nelement()
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, dict):
        return sum(nbytes(k, _depth + 1) + nbytes(v, _depth + 1) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(nbytes(v, _depth + 1) for v in value) + 8 * len(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(nbytes(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value))
    if hasattr(value, "__dict__"):
        return sum(nbytes(v, _depth + 1) for v in vars(value).values())
    return 8


class ByteLRU:
    """A least-recently-used cache bounded by bytes, not entries: what it keeps is handed
    out as the same object (no copy, no pickle), so callers treat it as read-only.

    One computation per key at a time: a second caller of the same key waits for the first
    one's value instead of computing it again (two students opening one long text).

    ``keep_newest``: the value just put stays even alone over the budget (a model in use);
    otherwise a value larger than the whole budget is not kept. Values may be keyed by a
    trace (``*_with``): they are dropped when that trace is collected."""

    def __init__(self, budget: int, keep_newest: bool = False):
        self.budget = budget
        self.keep_newest = keep_newest
        self.total = 0
        self._items: OrderedDict[object, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._computing: dict[object, threading.Lock] = {}
        self._traces: set[int] = set()  # ids of the traces values are kept with
        self._gone: list[int] = []  # traces collected since: their values go on the next call

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key) -> bool:
        return key in self._items

    def kept_keys(self) -> list:
        with self._lock:
            self._forget_gone()
            return list(self._items)

    def get(self, key, default=None):
        with self._lock:
            self._forget_gone()
            found = self._items.get(key)
            if found is None:
                return default
            self._items.move_to_end(key)
            return found[0]

    def put(self, key, value, size: int) -> list:
        """Keep ``value`` (``size`` bytes), dropping the least recently used until the rest
        fits; returns the keys dropped."""
        with self._lock:
            self._forget_gone()
            return self._put(key, value, size)

    def _put(self, key, value, size: int) -> list:
        dropped = []  # (lock held)
        old = self._items.pop(key, None)
        if old is not None:
            self.total -= old[1]
        if size > self.budget and not self.keep_newest:
            return dropped
        self._items[key] = (value, size)
        self.total += size
        while self.total > self.budget and len(self._items) > 1:
            gone, (_, gone_size) = self._items.popitem(last=False)
            self.total -= gone_size
            dropped.append(gone)
        return dropped

    def recount(self, key, value, size=nbytes) -> list:
        """Count ``value`` again after it grew in place (a decoding run read further), if
        ``key`` still holds this very object; returns the keys dropped to make room."""
        counted = size(value)
        with self._lock:
            found = self._items.get(key)
            if found is None or found[0] is not value:
                return []
            return self._put(key, value, counted)

    def get_or_compute(self, key, compute: Callable[[], object], size=nbytes):
        """The kept value of ``key``, else ``compute()`` kept with ``size(value)`` bytes."""
        return self.get_or_compute_dropped(key, compute, size)[0]

    def get_or_compute_dropped(
        self, key, compute: Callable[[], object], size=nbytes
    ) -> tuple[object, list]:
        """``get_or_compute``, and the keys keeping the new value pushed out."""
        missing = object()
        value = self.get(key, missing)
        if value is not missing:
            return value, []
        with self._lock:
            lock = self._computing.setdefault(key, threading.Lock())
        try:
            with lock:
                value = self.get(key, missing)
                if value is not missing:
                    return value, []
                value = compute()
                return value, self.put(key, value, size(value))
        finally:
            with self._lock:
                self._computing.pop(key, None)

    def discard(self, keep: Callable[[object], bool] = lambda key: False) -> None:
        """Drop every entry whose key ``keep`` does not accept (all of them by default)."""
        with self._lock:
            for key in [k for k in self._items if not keep(k)]:
                self.total -= self._items.pop(key)[1]

    def clear(self) -> None:
        self.discard()

    # --- values kept with a trace: they go when the trace goes ---

    def _trace_key(self, trace, key) -> tuple:
        tid = id(trace)
        with self._lock:
            self._forget_gone()  # a collected trace's id may be this new trace's now
            watched = tid in self._traces
            self._traces.add(tid)
        if not watched:  # told when the trace is collected (not before: ids are not reused)
            weakref.finalize(trace, self._gone.append, tid)
        return ("trace", tid, key)

    def _forget_gone(self) -> None:
        """Drop the values of traces collected since the last call (lock held). A finalizer
        only notes the id: it may run inside this cache's own lock."""
        while self._gone:
            tid = self._gone.pop()
            self._traces.discard(tid)
            for key in [k for k in self._items if _of_trace(k, tid)]:
                self.total -= self._items.pop(key)[1]

    def get_with(self, trace, key, default=None):
        return self.get(self._trace_key(trace, key), default)

    def put_with(self, trace, key, value) -> None:
        self.put(self._trace_key(trace, key), value, nbytes(value))

    def items_with(self, trace) -> list[tuple]:
        """(key, value) kept with ``trace``, least recently used first."""
        tid = id(trace)
        with self._lock:
            self._forget_gone()
            return [(k[2], v) for k, (v, _) in self._items.items() if _of_trace(k, tid)]

    def get_or_compute_with(self, trace, key, compute: Callable[[], object]):
        return self.get_or_compute(self._trace_key(trace, key), compute)


def _of_trace(key, tid: int) -> bool:
    return isinstance(key, tuple) and len(key) == 3 and key[0] == "trace" and key[1] == tid
