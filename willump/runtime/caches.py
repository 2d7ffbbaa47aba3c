"""Feature-level caches (paper §4.5) and, for comparison, end-to-end prediction caches.

Feature level: for each remote table an optimized function reads, an LRU cache
of the rows it fetched, keyed by the lookup key (the key column of the IFV that
looks it up: a user id, a song id). A lookup fetches only the keys its cache
misses, in one round trip. The cache holds each row as Redis stored it and the
lookup decodes cached and fetched rows together, exactly as it decodes rows
fetched all at once, so every result (values, dtypes, memory layout, and so
every float computed from it) is the one the undecorated function gets. Keys
that are not in the table are cached too (as absent).

End to end (``cache="prediction"``): the function's result per batch, keyed by
the batch's rows; a single-row call's per row, as Clipper caches predictions.

Memory: at most ``capacity`` rows per table; each costs its stored bytes plus
about 200 bytes (key, bytes object, LRU entry). A prediction cache entry (a batch)
costs its result's bytes plus about 250 bytes and the key's values per row.
"""

import collections
import functools
import math
import threading

import numpy as np
import pandas as pd

from willump.runtime.calls import count_cached

MISSING = object()  # a key the cache does not hold
_NAN = "__willump_nan_key"  # every NaN key is the same key


class LRUCache:
    """A thread-safe mapping of at most ``capacity`` entries, least recently used evicted first."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._entries = collections.OrderedDict()
        self._lock = threading.Lock()
        self.version = None  # what the cached values came from (a table's version)

    def get_many(self, keys: list) -> list:
        """The value of each key, or ``MISSING``; found keys become the most recently used."""
        entries = self._entries
        found = []
        with self._lock:
            for key in keys:
                value = entries.get(key, MISSING)
                if value is not MISSING:
                    entries.move_to_end(key)
                found.append(value)
        return found

    def put_many(self, items) -> None:
        entries = self._entries
        with self._lock:
            for key, value in items:
                entries[key] = value
                entries.move_to_end(key)
            while len(entries) > self.capacity:
                entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class LookupCaches:
    """One function's caches: an ``LRUCache`` per table, started again when the table
    had rows put through it since."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._tables = {}  # table -> LRUCache (tables are few and live as long as the function)
        self._lock = threading.Lock()

    def for_table(self, table) -> LRUCache:
        cache = self._tables.get(table)
        if cache is None:
            with self._lock:
                cache = self._tables.setdefault(table, LRUCache(self.capacity))
        if cache.version != table.version:
            cache.clear()
            cache.version = table.version
        return cache

    def clear(self) -> None:
        for cache in list(self._tables.values()):
            cache.clear()


class PredictionCache:
    """End-to-end caching, for comparison: the function's result per batch, keyed by the batch's
    rows (every column of its one DataFrame argument); a single-row call's result is its row's, as
    Clipper caches predictions. Not per row of a batch: a model's floats for a row depend on the
    batch it is computed in (BLAS sums one row and a matrix of rows in different orders), and on
    how pandas holds the batch (a C- or an F-ordered block), so only the same batch, held the same
    way, has the same result."""

    def __init__(self, capacity: int):
        self.cache = LRUCache(capacity)

    def clear(self) -> None:
        self.cache.clear()

    def serve(self, arguments: dict, compute, variant=None):
        """``compute(arguments)``, from the cache when the same batch was computed before by the
        same ``variant`` of serving."""
        if len(arguments) != 1:
            return compute(arguments)
        frame = next(iter(arguments.values()))
        keys = row_keys(frame) if type(frame) is pd.DataFrame else None
        if not keys:
            return compute(arguments)
        key = (variant, _layout(frame), *keys)
        (found,) = self.cache.get_many([key])
        if found is not MISSING:
            count_cached(len(keys), 0)
            return found.copy(order="K")  # (the caller may change what it is given)
        count_cached(0, len(keys))
        value = compute(arguments)
        if _numbers(value, len(keys)):
            self.cache.put_many([(key, value.copy(order="K"))])
        return value


def _layout(frame: pd.DataFrame) -> tuple:
    """How pandas holds the frame's columns (their blocks' positions, dtypes and strides): the
    arrays built from it, and so a model's floats, can differ between two frames of equal values."""
    return tuple((block.mgr_locs.as_array.tobytes(), str(block.dtype), getattr(block.values, "strides", None))
                 for block in frame._mgr.blocks)


def row_keys(frame: pd.DataFrame, columns=None) -> list | None:
    """One hashable key per row of ``frame`` (of its ``columns``, default all): the column
    names and dtypes, then the row's values. None when a name is not one column, or a value is
    of a kind whose equal values may be other inputs (a tuple of 1 and 1.0, a Decimal of 1.0 and 1.00,
    Timestamps in two time zones): those rows are not keyed."""
    if columns is None:
        if not frame.columns.is_unique:
            return None
        series = [frame.iloc[:, j] for j in range(frame.shape[1])]
    else:
        series = [frame[c] for c in columns]  # (KeyError for a missing column)
        if any(type(s) is not pd.Series for s in series):
            return None
    head = (tuple(s.name for s in series), tuple(str(s.dtype) for s in series))
    try:
        return [(head, *row) for row in zip(*map(_key_values, series))]
    except _NotKeyed:
        return None


def _key_values(series: pd.Series) -> list:
    values = series.tolist()
    kind = series.dtype.kind
    numpy = isinstance(series.dtype, np.dtype)
    if kind in "iub" and numpy:
        return values
    if kind == "f" and numpy:  # (-0.0 equals 0.0, but 1 / -0.0 is not 1 / 0.0)
        return [_NAN if v != v else (_NEGATIVE_ZERO if v == 0 and math.copysign(1.0, v) < 0 else v) for v in values]
    # Strings, objects and extension arrays: 1, 1.0 and True are equal keys, but not the same input.
    return [v if type(v) is str else _object_key(v) for v in values]


def _object_key(value) -> tuple:
    """(type name, value[, True for -0.0]) of a value that is the same input as every value equal to it."""
    kind = type(value)
    if _missing(value):
        return kind.__name__, _NAN
    if kind not in _KEYED_OBJECTS and not issubclass(kind, (np.integer, np.floating, np.bool_)):
        raise _NotKeyed
    if value == 0 and isinstance(value, (float, np.floating)) and math.copysign(1.0, value) < 0:
        return kind.__name__, value, True
    return kind.__name__, value


_KEYED_OBJECTS = (int, float, bool, str, bytes, np.str_, np.bytes_)
_NEGATIVE_ZERO = "__willump_negative_zero_key"


class _NotKeyed(Exception):
    """A value ``row_keys`` does not key."""


def key_values(keys: list, position: int) -> list:
    """The values of column ``position`` that ``row_keys`` made ``keys`` of (None for a missing one)."""
    if not keys:
        return []
    floats = _float_kind(keys[0][0][1][position])  # (there, and only there, _NAN is NaN)
    values = [key[position + 1] for key in keys]
    if floats:
        return [None if v is _NAN else (-0.0 if v is _NEGATIVE_ZERO else v) for v in values]
    return [(None if v[1] is _NAN else v[1]) if type(v) is tuple else v for v in values]


@functools.lru_cache(maxsize=256)
def _float_kind(dtype: str) -> bool:
    """Whether the dtype named ``dtype`` is numpy's of kind "f", as ``_key_values`` reads it."""
    try:
        found = pd.api.types.pandas_dtype(dtype)
        return isinstance(found, np.dtype) and found.kind == "f"
    except Exception:  # (a name pandas cannot read back here)
        return dtype.lower().startswith("float")


def _missing(value) -> bool:
    return value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and math.isnan(value))


def _numbers(value, n: int) -> bool:
    """Is ``value`` a result of numbers with a row per input row (a numpy array), which a copy keeps?"""
    return type(value) is np.ndarray and value.ndim in (1, 2) and value.shape[0] == n and value.dtype.kind in "biuf"
