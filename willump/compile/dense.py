"""Compiled ``numpy.hstack`` / ``numpy.column_stack`` / ``pd.concat(axis=1)`` of the dense blocks features arrive in.

``np.hstack`` turns each block into an array (``atleast_1d``) and concatenates
along the columns (the rows of 1-D blocks). For a few rows its dispatch and
checks cost more than the copy; this does the same steps directly for blocks
of numbers or bools: ndarrays, numpy scalars, and pandas Series or DataFrames whose columns
are numpy numbers (converted as numpy converts them). Anything else, and any
option, runs as written. ``pd.concat(axis=1)`` builds its DataFrame directly (``frames``); of Series,
when only kernels (a model) read the frame, it hands the Series' arrays on (``ConcatenatedColumns``)
instead of building it.
"""

import numpy as np
import pandas as pd

from willump.compile import frames
from willump.compile.forms import Deferred, Unsupported, materialized

_KINDS = "biuf"  # bools, ints, unsigned ints and floats


class CompiledNumpyHstack:
    """``numpy.hstack(blocks)``; Unsupported for other blocks or options."""

    def __call__(self, blocks, **options):
        if options or type(blocks) not in (list, tuple) or not blocks:
            raise Unsupported("numpy.hstack options, or blocks not written as a list or tuple")
        arrays = [_array(block) for block in blocks]
        if any(a.dtype.kind not in _KINDS for a in arrays):
            raise Unsupported("blocks of other than bool, integer or float values")
        return np.concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1)

    @staticmethod
    def still_valid() -> bool:
        return True


class CompiledSelect:
    """``np.select(condlist, choicelist, default=0)`` of Series (a comparison's bools, numbers), arrays and
    numbers: numpy's own select of the Series' arrays (numpy reads a Series of a numpy dtype as that array,
    ~40 us a Series on one row)."""

    def __call__(self, condlist, choicelist, default=0):
        if type(condlist) not in (list, tuple) or type(choicelist) not in (list, tuple):
            raise Unsupported("conditions or choices not written as a list or tuple")
        return np.select([_values(c) for c in condlist], [_values(c) for c in choicelist], _values(default))

    @staticmethod
    def still_valid() -> bool:
        return True


def _values(value):
    """A Series of a numpy dtype as numpy reads it (its array); numpy arrays and Python or numpy numbers as they are."""
    if type(value) is pd.Series and isinstance(value.dtype, np.dtype) and value.dtype.kind in _KINDS:
        return value._values
    if type(value) is np.ndarray or type(value) in (int, float, bool) or isinstance(value, (np.number, np.bool_)):
        return value
    raise Unsupported(f"np.select of a {type(value).__name__}")


def _array(block) -> np.ndarray:
    """The block as ``np.atleast_1d`` makes it."""
    kind = type(block)
    if kind is pd.Series or kind is pd.DataFrame:
        dtypes = [block.dtype] if kind is pd.Series else block.dtypes.tolist()
        if not all(isinstance(d, np.dtype) for d in dtypes):
            raise Unsupported("a pandas block with extension dtypes")
    elif kind is not np.ndarray and not isinstance(block, np.generic):
        raise Unsupported(f"a block of type {kind.__name__}")
    array = np.asanyarray(block)
    return array.reshape(1) if array.ndim == 0 else array


class CompiledColumnStack:
    """``numpy.column_stack(blocks)``: 1-D blocks as columns, 2-D blocks as they are, concatenated
    along the columns; Unsupported for other blocks or options."""

    def __call__(self, blocks, /, *options, **keywords):
        if options or keywords or type(blocks) not in (list, tuple) or not blocks:
            raise Unsupported("numpy.column_stack options, or blocks not written as a list or tuple")
        arrays = [_array(block) for block in blocks]
        if any(a.dtype.kind not in _KINDS for a in arrays):
            raise Unsupported("blocks of other than bool, integer or float values")
        if any(a.ndim > 2 for a in arrays):
            raise Unsupported("blocks of more than two dimensions")
        return np.concatenate([a if a.ndim == 2 else a.reshape(-1, 1) for a in arrays], axis=1)

    @staticmethod
    def still_valid() -> bool:
        return True


class ConcatenatedColumns(Deferred):
    """``pd.concat(series, axis=1, ...)`` kept as its columns: the DataFrame is built by the call as
    written, when something besides a kernel needs it (or before code that may change the Series runs)."""

    stands_for = pd.DataFrame

    def __init__(self, columns: list, build):
        self.columns, self._build = columns, build

    def protect(self) -> None:
        self.materialize()

    def matrix(self, dtype: np.dtype) -> np.ndarray:
        """The columns side by side as ``dtype``, as ``DataFrame.to_numpy(dtype)`` gives the values."""
        if self._real is not None:
            return self._real.to_numpy(dtype=dtype, copy=False)
        matrix = np.empty((len(self.columns[0]), len(self.columns)), dtype)
        for position, column in enumerate(self.columns):
            matrix[:, position] = column
        return matrix

    @property
    def dtypes(self) -> list:
        return [c.dtype for c in self.columns]


class CompiledConcat:
    """``pd.concat(objs, axis=1)`` of Series and DataFrames with one unique index: the DataFrame pandas
    builds (``frames.concat_columns``), or, feeding only kernels (a model), Series' columns handed on
    as they are."""

    def __call__(self, objs, /, **options):
        return frames.concat_columns(objs, _keys(options))

    @staticmethod
    def defer(objs, /, **options) -> ConcatenatedColumns:
        if set(options) - {"axis", "keys"} or options.get("axis") not in (1, "columns"):
            raise Unsupported("pd.concat options other than axis=1 and keys")
        if type(objs) not in (list, tuple) or not objs:
            raise Unsupported("objects not written as a list or tuple")
        if not all(type(s) is pd.Series for s in objs):  # DataFrames among them: their columns, else the DataFrame
            keys = _keys(options)
            if keys is None:
                try:
                    return frames.kept_columns(objs, lambda: _concatenated([materialized(o) for o in objs], options))
                except Unsupported:
                    pass
            return frames.concat_columns(objs, keys)
        keys = options.get("keys")
        if keys is not None and (type(keys) not in (list, tuple) or len(keys) != len(objs)):
            raise Unsupported("keys other than one per Series")
        index = objs[0].index
        if not index.is_unique or not all(s.index is index or s.index.equals(index) for s in objs[1:]):
            raise Unsupported("Series with different or repeated index labels (pandas aligns them)")
        if not all(isinstance(s.dtype, np.dtype) and s.dtype.kind in _KINDS for s in objs):
            raise Unsupported("Series of other than bool, integer or float values")
        columns = [s._values for s in objs]
        return ConcatenatedColumns(columns, lambda: _concatenated(objs, options))

    @staticmethod
    def still_valid() -> bool:
        return True


def _keys(options: dict):
    """The keys of ``pd.concat(..., axis=1, keys=...)``; Unsupported for other options."""
    if set(options) - {"axis", "keys"} or options.get("axis") not in (1, "columns") or type(options.get("axis")) is bool:
        raise Unsupported("pd.concat options other than axis=1 and keys")
    return options.get("keys")


def _concatenated(objs, options: dict) -> pd.DataFrame:
    """The DataFrame ``pd.concat(objs, **options)`` gives, built directly where that is compiled."""
    try:
        return frames.concat_columns(objs, _keys(options))
    except Unsupported:
        return pd.concat(objs, **options)
