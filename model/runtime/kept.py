"""What is computed from a trace and kept while the trace lives (an overview, a rollout, a
table): below Streamlit, so the attention view (model.analysis.view) keeps its own work."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict


class KeptWithTrace:
    """The last ``kept`` values computed from each trace (an overview, a rollout, a table),
    least recently used first; keyed weakly, so they go when the trace cache lets the trace
    go and need no byte budget of their own. Values are shared: callers only read them."""

    def __init__(self, kept: int):
        self.kept = kept
        self._items: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, trace, key, default=None):
        with self._lock:
            found = self._items.get(trace)
            if found is None or key not in found:
                return default
            found.move_to_end(key)
            return found[key]

    def items(self, trace) -> list[tuple]:
        """(key, value) kept for ``trace``, least recently used first."""
        with self._lock:
            return list(self._items.get(trace, {}).items())

    def put(self, trace, key, value) -> None:
        with self._lock:
            found = self._items.setdefault(trace, OrderedDict())
            found[key] = value
            found.move_to_end(key)
            while len(found) > self.kept:
                found.popitem(last=False)

    def get_or_compute(self, trace, key, compute):
        """The kept value, else ``compute()`` kept now (two callers may both compute it)."""
        found = self.get(trace, key)
        if found is None:
            found = compute()
            self.put(trace, key, found)
        return found
