"""Compiled ``table.loc[keys]`` and ``table.reindex(keys)``: rows of an in-memory table by key.

pandas answers a one-row lookup in about 100 µs: it builds an Index of the keys,
asks the table index's hash engine for their positions, and takes each block
through its generic reindexing machinery. Here the positions come from the
key -> position dict ``series.map`` uses (``maps.key_positions``: built once
per table and kept while the table has the same index, so it finds what
pandas' get_indexer finds), and each block's values are taken with numpy into
a block of the same columns, as pandas' ``reindex_indexer`` does. The result
is pandas' own: the same values and dtypes (for ``reindex``, a missing key
gives a NaN row: ints become float64, bools object), columns, index and name.

Compiled: a DataFrame or Series with a unique index of ints, floats or strs
(pandas' ``Index`` or ``RangeIndex``) and numpy int, float, bool or object
columns or pandas' str dtype (Python's or pyarrow's storage), looked up with a list of keys all of
one type (int, float or str) or an array, Index or Series of such keys. Any
other table, key or option runs as written; so does ``.loc`` with a missing
key (pandas raises KeyError) or a single key.

Block values are read on every call, so a replaced column or a value written
in place is seen; a new index (``table.index = ...``) builds a new dict.
"""

import numpy as np
import pandas as pd
from pandas.arrays import ArrowStringArray, StringArray
from pandas.core.indexes.base import ensure_index
from pandas.core.indexing import _LocIndexer
from pandas.core.internals.blocks import new_block

from willump.compile import frames
from willump.compile.forms import ReceiverKernel, Unsupported
from willump.compile.maps import (
    _INT64, ARROW_STR, STR, check_held_by_pyarrow, inferred_str, key_positions, source, strings, take,
    using_string_dtype,
)

_LIST_KINDS = {int: "int", float: "float", str: "str"}  # the element type of a list of keys -> its kind
_KEY_CONTAINERS = (np.ndarray, pd.Index, pd.RangeIndex, pd.Series)
_FLAT = (pd.Index, pd.RangeIndex)  # table indexes compiled (not a MultiIndex, dates, categories, ...)


def loc_lookup(indexer, keys):
    """``table.loc[keys]``, as written: call sites rewrite that subscript to ``loc_lookup(table.loc, keys)``
    (``table.loc`` is still evaluated before ``keys``)."""
    return indexer[keys]


loc_lookup.operator_name = "DataFrame.loc"  # for explain_compilation (Series.loc too)


class CompiledLoc:
    """``loc_lookup(table.loc, keys)`` for keys that are all in the table."""

    @staticmethod
    def still_valid() -> bool:
        return True

    def __call__(self, indexer, keys):
        if type(indexer) is not _LocIndexer or indexer.axis not in (None, 0):
            raise Unsupported("a .loc indexer along another axis, or not pandas' own")
        table = indexer.obj
        positions = _positions(table, keys)
        if -1 in positions:
            raise Unsupported("a key is not in the table (pandas raises KeyError)")
        positions = np.array(positions, dtype=np.intp)
        return _rows(table, positions, False, table.index.take(positions))


class CompiledReindex(ReceiverKernel):
    """``table.reindex(keys)`` for a DataFrame or Series (the keys passed alone, positionally,
    as ``index=`` or, for a DataFrame, as ``labels=``); a DataFrame's ``reindex(columns=names,
    fill_value=number)`` (``frames.reindex_columns``)."""

    def __call__(self, table, /, *args, **kwargs):
        if not args and "columns" in kwargs and set(kwargs) <= {"columns", "fill_value"}:
            return frames.reindex_columns(table, kwargs["columns"], kwargs.get("fill_value"))
        names = ("labels", "index") if type(table) is pd.DataFrame else ("index",)
        if len(args) + len(kwargs) != 1 or (kwargs and next(iter(kwargs)) not in names):
            raise Unsupported("an option besides the keys (columns, method, fill_value, axis, copy, ...)")
        keys = args[0] if args else next(iter(kwargs.values()))
        positions = _positions(table, keys)
        missing = -1 in positions
        positions = np.array(positions, dtype=np.intp)
        result = _rows(table, positions, missing, _reindexed(table.index, keys))
        return result.__finalize__(table, method="reindex")


def _positions(table, keys) -> list:
    """The row position of each key (-1: not in the table), as pandas' get_indexer finds them."""
    if type(table) not in (pd.DataFrame, pd.Series):
        raise Unsupported(f"a table of type {type(table).__name__}")
    if not using_string_dtype():
        raise Unsupported("pandas does not infer its str dtype (future.infer_string is off, or pandas < 3)")
    index = table.index
    if type(index) not in _FLAT:
        raise Unsupported(f"a table indexed by a {type(index).__name__}")
    if not index.is_unique:
        raise Unsupported("the table's index has duplicate keys (pandas raises, or .loc repeats rows)")
    for block in table._mgr.blocks:
        values = block.values
        if not (_taken_by_numpy(values) or _str_array(values)):
            raise Unsupported(f"a column of dtype {values.dtype}")
    kind, values = _keys(keys)
    if not len(index):  # no key of any kind
        return [-1] * len(values)
    return key_positions(table).find(kind, values) if len(values) else []


def _str_array(values) -> bool:
    """Whether these block values are pandas' str dtype, in either storage (``maps.take`` takes both)."""
    return (type(values) is StringArray and values.dtype == STR) or (
        type(values) is ArrowStringArray and values.dtype == ARROW_STR)


def _taken_by_numpy(values) -> bool:
    """Whether pandas takes these block values as ``maps.take`` does (numpy's take, NaN for -1)."""
    return type(values) is np.ndarray and values.dtype.kind in "iufbO"


def _keys(keys) -> tuple[str, list]:
    """(their kind as ``maps.source`` names it, the keys as Python objects), for the keys compiled."""
    if type(keys) is list:
        if not keys:
            return "int", keys  # (no kind is compared: nothing is looked up)
        types = set(map(type, keys))
        kind = _LIST_KINDS.get(types.pop()) if len(types) == 1 else None
        if kind is None:
            raise Unsupported("keys that are not all ints, all floats or all strs")
        if kind == "int" and not -_INT64 <= min(keys) <= max(keys) < _INT64:
            raise Unsupported("int keys beyond int64")
        if kind == "str":  # (pandas makes them an Index)
            check_held_by_pyarrow(keys)
        return kind, keys
    if type(keys) not in _KEY_CONTAINERS:
        raise Unsupported(f"keys of type {type(keys).__name__} (a single key, a mask, a slice, ...)")
    if keys.ndim != 1:
        raise Unsupported("keys in more than one dimension")
    kind, values = source(keys)
    if kind == "bool":
        raise Unsupported("bool keys (.loc takes them as a mask)")
    return kind, values


def _reindexed(index: pd.Index, keys) -> pd.Index:
    """The index of ``table.reindex(keys)``, as ``Index.reindex`` builds it from the keys."""
    if isinstance(keys, pd.Index):
        target = keys
    elif not len(keys):
        target = index[:0]
    elif type(keys) is list:
        if type(keys[0]) is str:
            values = strings(keys, inferred_str())
        else:
            values = np.array(keys, dtype=np.int64 if type(keys[0]) is int else np.float64)
        target = pd.Index._simple_new(values, name=index.name)
    else:
        target = ensure_index(keys)
    return index._wrap_reindex_result(target, None, not hasattr(keys, "name"))


def _rows(table, positions: np.ndarray, missing: bool, index: pd.Index):
    """The table's rows at ``positions`` (-1: a NaN row) with this index, as pandas'
    ``_reindex_with_indexers`` builds them: each block taken on its own."""
    manager = table._mgr
    if manager.ndim == 1:
        result = manager.from_array(take(manager.blocks[0].values, positions, missing), index)
    else:
        blocks = [new_block(take(b.values, positions, missing), b._mgr_locs, ndim=2) for b in manager.blocks]
        result = manager.from_blocks(blocks, [manager.axes[0].view(), index])
    return table._constructor_from_mgr(result, axes=result.axes).__finalize__(table)
