"""Figures built once per distinct input: a warm revisit of a page reuses them.

Building a plotly figure validates every property it sets, which costs tens of milliseconds
a chart; a concept page has up to 13 charts whose inputs rarely change between reruns. The
builders here are pure (the figure depends only on the arguments, titles included, so the
language is part of the key). What is kept is the figure's JSON, one string: a Figure's
tree of plotly objects, dicts and lists (hundreds of objects a chart, thousands for a page)
kept alive for the whole process would be walked by every full garbage collection, in the
middle of somebody's page. A hit hands out a KeptFigure of its own: sent as that JSON, or,
once a caller looks inside, a Figure built from it without validating again (it was
validated when first built), so a caller may change its copy.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import json
from numbers import Number

import numpy as np
import plotly.graph_objects as go
import torch

# the lab's one byte-bounded cache (model.runtime.kept), re-exported for ui and the tests
from model.runtime.kept import ByteLRU, budget_bytes, nbytes  # noqa: F401

FIGURE_CACHE_ENV = "ATTENTION_LAB_FIGURE_CACHE_MB"
# Every builder's kept figures together: about 50 MB for each of 20 students (README).
DEFAULT_FIGURE_CACHE_MB = 1024


_BUILDERS = itertools.count()
FIGURES = ByteLRU(budget_bytes(FIGURE_CACHE_ENV, DEFAULT_FIGURE_CACHE_MB))


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
    if isinstance(value, range):  # the x of a curve over a vector's dimensions or a depth
        return ("range", value.start, value.stop, value.step)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(x, Number) and not isinstance(x, bool) for x in value):
            return _digest(np.asarray(value, dtype=float))  # long number lists: one digest
        return (type(value).__name__, tuple(_key(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((_key(name), _key(item)) for name, item in value.items()))
    raise _Unhashable(type(value).__name__)


def json_arrays(value):
    """Plotly's JSON writes numeric arrays as base64 ("bdata"): numpy arrays again, as the
    figure first held them (a caller reading ``fig.data[0].z`` sees numbers, not text)."""
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            shape = value.get("shape")
            if shape:
                array = array.reshape([int(n) for n in str(shape).split(",")])
            return array
        return {name: json_arrays(item) for name, item in value.items()}
    if isinstance(value, list):
        return [json_arrays(item) for item in value]
    return value


def figure_from_json(spec: str) -> go.Figure:
    """A Figure from the JSON of one that was validated when it was built: not again."""
    return go.Figure(json_arrays(json.loads(spec)), skip_invalid=False, _validate=False)


# Layout changes a kept figure takes without being rebuilt: ui.charts sets the font.
_LAYOUT_PATHS = {"font_family": ("font", "family")}


class KeptFigure(go.Figure):
    """A figure handed out again: its JSON, until somebody looks inside. Rebuilding a big
    Figure from JSON costs several times what sending it does, and a page only sends it:
    ``to_dict`` (what st.plotly_chart asks for) and a font change (ui.charts) are answered
    from the JSON; anything else first builds the real Figure, which then behaves as one."""

    _LAZY = frozenset({"to_dict", "update_layout", "_kept", "_build", "__class__", "__dict__"})

    def __init__(self, spec: str):  # the Figure itself is built on first use (_build)
        object.__setattr__(self, "_kept", {"spec": spec, "layout": {}, "built": False})

    def __getattribute__(self, name):
        if name not in KeptFigure._LAZY:
            kept = object.__getattribute__(self, "_kept")
            if not kept["built"]:
                object.__getattribute__(self, "_build")()
        return object.__getattribute__(self, name)

    def _build(self) -> None:
        kept = object.__getattribute__(self, "_kept")
        kept["built"] = True
        go.Figure.__init__(
            self, json_arrays(json.loads(kept["spec"])), skip_invalid=False, _validate=False
        )
        if kept["layout"]:
            go.Figure.update_layout(self, **kept["layout"])

    def update_layout(self, dict1=None, overwrite=False, **kwargs):
        kept = object.__getattribute__(self, "_kept")
        if kept["built"] or dict1 or overwrite or not set(kwargs) <= _LAYOUT_PATHS.keys():
            if not kept["built"]:
                self._build()
            return go.Figure.update_layout(self, dict1, overwrite, **kwargs)
        kept["layout"].update(kwargs)
        return self

    def to_dict(self) -> dict:
        kept = object.__getattribute__(self, "_kept")
        if kept["built"]:
            return go.Figure.to_dict(self)
        figure = json.loads(kept["spec"])
        for name, value in kept["layout"].items():
            *parents, leaf = _LAYOUT_PATHS[name]
            node = figure.setdefault("layout", {})
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        return figure


def memo_figure(build):
    """Decorate a pure figure builder so equal arguments give the figure built before (kept
    as its JSON, in FIGURES: every builder's figures share one byte budget, the least
    recently used go first; each call gets a Figure of its own)."""
    name = (build.__module__, build.__qualname__, next(_BUILDERS))  # each its own keys

    @functools.wraps(build)
    def cached(*args, **kwargs):
        try:
            key = (name, _key(args), _key(tuple(sorted(kwargs.items()))))
        except _Unhashable:
            return build(*args, **kwargs)
        spec = FIGURES.get(key)
        if spec is not None:
            return KeptFigure(spec)
        figure = build(*args, **kwargs)
        spec = figure.to_json(validate=False)
        FIGURES.put(key, spec, len(spec))
        return figure

    def kept() -> dict:  # for tests: this builder's kept figures, oldest first
        return {key: FIGURES.get(key) for key in FIGURES.kept_keys() if key[0] == name}

    cached.cache_clear = lambda: FIGURES.discard(lambda key: key[0] != name)
    cached.cache_store = kept
    return cached
