"""``pd.get_dummies`` of a DataFrame: the frame pandas builds, without factorizing each column.

pandas' get_dummies (``pandas/core/reshape/encoding.py``) takes the columns to encode (``columns``, or
every object, str and category column) and the others (``data.drop(columns, axis=1)``, or the blocks
of the others), and for each encoded column builds a frame of one column per level, the column's
sorted distinct values (missing values none, or a last ``nan`` level with ``dummy_na``), named
``<prefix><prefix_sep><level>``, by ``DataFrame(matrix, index=..., columns=Index(names), dtype=...)``
from a column-major matrix; ``concat(..., axis=1)`` puts them side by side. On a few rows most of its
time goes to factorizing each column into a Categorical (1.9 ms of a Titanic notebook's one-row call).

Here the levels are Python's sorted set of the values, and every other step is pandas' own call or
builds what it builds (``frames``: the others' frame as pandas' drop, each level matrix as one block of
its transpose, the parts side by side as pandas' concat_horizontal), so the frame is pandas' own:
columns, dtypes, blocks and index (tested against pandas). Compiled: a DataFrame (unique ``str`` column names, no attrs or
flags) whose encoded columns hold Python ``str`` values and missing values (None, NaN) in object or
``str`` columns, or numpy ints; ``prefix`` None, a str, a list or a dict; ``prefix_sep`` a str;
``dummy_na``, ``drop_first``; ``dtype`` None or a numpy number or bool dtype. Everything else
(categories, the NA-valued ``string`` dtype, ``sparse``, a Series, other values) runs as written.
"""

import numpy as np
import pandas as pd

from willump.compile import frames
from willump.compile.forms import Unsupported

_OPTIONS = ("prefix", "prefix_sep", "dummy_na", "columns", "sparse", "drop_first", "dtype")
_MANY_ROWS = 2048  # beyond, pandas' hash tables factorize faster than Python's set and dict (even at ~5,000 rows of 8 columns)


class CompiledGetDummies:
    """``pd.get_dummies(frame, ...)`` (``get_dummies``)."""

    def __call__(self, data=None, *args, **kwargs):
        return get_dummies(data, **_options(args, kwargs))

    @staticmethod
    def still_valid() -> bool:
        return True


def _options(args: tuple, kwargs: dict) -> dict:
    """get_dummies' options by name, as Python binds them (Unsupported where it raises)."""
    if len(args) > len(_OPTIONS) or set(kwargs) - set(_OPTIONS) or set(kwargs) & set(_OPTIONS[:len(args)]):
        raise Unsupported("arguments get_dummies does not take")
    return {**dict(zip(_OPTIONS, args)), **kwargs}


def get_dummies(data, prefix=None, prefix_sep="_", dummy_na=False, columns=None, sparse=False, drop_first=False,
                dtype=None) -> pd.DataFrame:
    frame = frames.plain_frame(data, numbers=False)
    if sparse is not False or type(prefix_sep) is not str or type(dummy_na) is not bool or type(drop_first) is not bool:
        raise Unsupported("sparse, or prefix_sep, dummy_na or drop_first other than a str and bools")
    if len(frame) > _MANY_ROWS:
        raise Unsupported(f"more than {_MANY_ROWS} rows (pandas factorizes them faster)")
    dtype = _dummy_dtype(dtype)
    names = frame.columns.tolist()
    encoded = _encoded(frame, names, columns)
    prefixes = _prefixes(prefix, encoded)
    parts = [] if len(encoded) == len(names) else [_others(frame, encoded, columns)]
    index = frame.index.view()  # (the index of the encoded columns' frame, which pandas takes first)
    for (name, array), named in zip(encoded, prefixes):
        parts.append(_dummies(array, index, named, prefix_sep, dummy_na, drop_first, dtype))
    try:
        return frames.concat_columns(parts)  # (pandas' concat_horizontal of the parts' blocks)
    except Unsupported:  # (repeated index labels, repeated names...)
        return pd.concat(parts, axis=1)


def _nan_str(dtype) -> bool:
    """pandas' default ``str`` dtype (NaN for missing values), whose dummies are numpy bools."""
    return isinstance(dtype, pd.StringDtype) and dtype.na_value is not pd.NA


def _dummy_dtype(dtype) -> np.dtype:
    if dtype is None:
        return np.dtype(bool)
    try:
        found = pd.api.types.pandas_dtype(dtype)
    except TypeError:
        raise Unsupported(f"dtype {dtype!r} (pandas raises)") from None
    if not isinstance(found, np.dtype) or found.kind not in "biuf":
        raise Unsupported(f"dtype {found}")
    return found


def _encoded(frame: pd.DataFrame, names: list, columns) -> list:
    """(name, array) of each column to encode: ``columns``, or the object and ``str`` ones (none of
    the other dtypes pandas encodes: categories, the NA-valued ``string``, pyarrow's)."""
    if columns is None:
        arrays = [frame._mgr.iget_values(i) for i in range(len(names))]
        encoded = [(n, a) for n, a in zip(names, arrays) if not isinstance(a, np.ndarray) or a.dtype == object]
    else:
        if type(columns) is not list or not all(type(c) is str for c in columns) or len(set(columns)) != len(columns):
            raise Unsupported("columns other than a list of distinct str")
        position = {name: i for i, name in enumerate(names)}
        if not all(c in position for c in columns):
            raise Unsupported("a column the frame does not have (pandas raises)")
        encoded = [(c, frame._mgr.iget_values(position[c])) for c in columns]
    if any(not isinstance(a, np.ndarray) and not _nan_str(a.dtype) for _, a in encoded):
        raise Unsupported("a column of categories or another extension dtype")
    return encoded


def _prefixes(prefix, encoded: list) -> list:
    """Each encoded column's prefix, as get_dummies reads ``prefix``."""
    if prefix is None:
        return [name for name, _ in encoded]
    if type(prefix) is str:
        return [prefix] * len(encoded)
    if type(prefix) is list and len(prefix) == len(encoded):
        return prefix
    if type(prefix) is dict and len(prefix) == len(encoded) and all(name in prefix for name, _ in encoded):
        return [prefix[name] for name, _ in encoded]
    raise Unsupported("prefix other than a str, or a list or dict of one per column (pandas raises)")


def _others(frame: pd.DataFrame, encoded: list, columns) -> pd.DataFrame:
    """The columns not encoded, as get_dummies takes them: ``data.drop(columns, axis=1)``, or the blocks
    of the columns of other dtypes."""
    if columns is not None:
        try:
            return frames.drop_columns(frame, list(columns))
        except Unsupported:
            return frame.drop(columns, axis=1)
    manager = frame._mgr._get_data_subset(lambda array: not (array.dtype == object or _nan_str(array.dtype)))
    manager = manager.copy(deep=False)
    return frame._constructor_from_mgr(manager, axes=manager.axes).__finalize__(frame)


def _dummies(array, index: pd.Index, prefix, prefix_sep: str, dummy_na: bool, drop_first: bool,
             dtype: np.dtype) -> pd.DataFrame:
    """``_get_dummies_1d`` of one column: its levels and codes found here, then its steps."""
    levels, codes = _levels(array)
    if not dummy_na and not levels or drop_first and len(levels) + dummy_na == 1:
        return pd.DataFrame(index=index)
    if dummy_na:  # (a NaN inserted into an Index of ints makes it floats: "x_0.0")
        codes[codes == -1] = len(levels)
        levels = [*(map(float, levels) if array.dtype.kind in "iu" else levels), np.nan]
    names = frames.column_names(tuple(f"{prefix}{prefix_sep}{level}" for level in levels))  # (pandas' Index of them)
    matrix = np.zeros(shape=(len(codes), len(levels)), dtype=dtype, order="F")
    matrix[np.arange(len(codes)), codes] = 1
    if not dummy_na:
        matrix[codes == -1] = 0
    if drop_first:
        matrix, names = matrix[:, 1:], names[1:]
    return frames.matrix_frame(matrix, names, index)  # (pandas' DataFrame(matrix, index, columns, dtype) of it)


def _levels(array) -> tuple:
    """(sorted distinct values, the code of each value: its level's position, -1 when missing), as
    pandas' factorize sorts them: Python str or int values, missing values None or float NaN."""
    if isinstance(array, np.ndarray) and array.dtype.kind in "iu":
        values = present = array.tolist()
    else:
        values = array.tolist() if isinstance(array, np.ndarray) else list(array.to_numpy(dtype=object))
        present = [v for v in values if type(v) is str]
        if len(present) != len(values) and not all(
                type(v) is str or v is None or type(v) is float and v != v for v in values):
            raise Unsupported("values other than str and missing values (None, NaN)")
    levels = sorted(set(present))
    position = {level: i for i, level in enumerate(levels)}
    return levels, np.array([position.get(v, -1) for v in values], dtype=np.intp)
