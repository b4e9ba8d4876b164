"""Figures built once per distinct input: a warm revisit of a page reuses them.

Building a plotly figure validates every property it sets, which costs tens of milliseconds
a chart; a concept page has up to 13 charts whose inputs rarely change between reruns. The
builders here are pure (the figure depends only on the arguments, titles included, so the
language is part of the key), and no caller changes a figure after it is built, so the same
object can be handed out again.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from numbers import Number

import numpy as np
import torch

MAX_FIGURES = 48  # per builder: a few pages' charts in each language; the oldest go first


class _Unhashable(Exception):
    """An argument the key cannot describe: the figure is built without the cache."""


def _digest(array: np.ndarray) -> tuple:
    array = np.ascontiguousarray(array)
    return (
        "nd",
        array.dtype.str,
        array.shape,
        hashlib.blake2b(array.tobytes(), digest_size=16).digest(),
    )


def _key(value):
    """A hashable description of ``value``: arrays and tensors by their content."""
    if isinstance(value, torch.Tensor):
        return _digest(value.detach().cpu().numpy())
    if isinstance(value, np.ndarray):
        return _digest(value)
    if value is None or isinstance(value, (str, bool, int, float, np.generic)):
        return value
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, Number) and not isinstance(v, bool) for v in value):
            return _digest(np.asarray(value, dtype=float))  # long number lists: one digest
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((_key(k), _key(v)) for k, v in value.items()))
    raise _Unhashable(type(value).__name__)


def memo_figure(build):
    """Decorate a pure figure builder so equal arguments give the same (already built) figure."""
    store: OrderedDict = OrderedDict()
    lock = threading.Lock()

    @functools.wraps(build)
    def cached(*args, **kwargs):
        try:
            key = (_key(args), _key(tuple(sorted(kwargs.items()))))
        except _Unhashable:
            return build(*args, **kwargs)
        with lock:
            if key in store:
                store.move_to_end(key)
                return store[key]
        figure = build(*args, **kwargs)
        with lock:
            store[key] = figure
            while len(store) > MAX_FIGURES:
                store.popitem(last=False)
        return figure

    cached.cache_clear = store.clear
    return cached
