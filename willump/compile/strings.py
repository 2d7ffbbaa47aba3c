"""pandas string methods whose result feeds a compiled text kernel.

``series.str.lower()`` builds a pandas Series, which for one row costs more
than the TF-IDF that reads it. When its result only reaches compiled
vectorizers, the call site keeps the lowercased ``str`` list instead; pandas
does the same ``str.lower`` per element (for object and Python-backed string
columns), so the vectorizer sees the same documents.

Strings kept by pyarrow (pandas' ``str`` dtype when pyarrow is installed) are read from
their buffers instead, as code points (``arrow``), and lowercased as pandas lowercases
them there (pyarrow's ``utf8_lower``).

The spelling ``frame["column"].str.lower()`` is rewritten by call sites to
``column_str_method(frame, "column", "lower")``, so that not even the column's
Series or its ``.str`` accessor is built (each costs about 10 µs for one row).
"""

import numpy as np
import pandas as pd
from pandas.arrays import StringArray
from pandas.core.strings.accessor import StringMethods

from willump.compile.arrow import arrow_array, arrow_documents, is_arrow_strings
from willump.compile.forms import ReceiverKernel, Texts, Unsupported
from willump.compile.unicode import CodePoints


class CompiledLower(ReceiverKernel):
    """``series.str.lower()`` as a ``Texts`` value, for call sites whose result stays compiled."""

    def __call__(self, accessor, /):
        raise Unsupported("its result is used as a pandas Series")

    @staticmethod
    def defer(accessor, /) -> Texts:
        series = getattr(accessor, "_orig", None)
        if type(accessor) is not StringMethods or type(series) is not pd.Series:
            raise Unsupported("a .str accessor of something other than a Series")
        return _lowered(series, series.index, series.name)


def _lowered(values, index, name) -> Texts:
    """The lowercased strings, standing for ``pd.Series(values, index, name=name).str.lower()``
    (rebuilt from the strings read now, whatever later code does to where they came from)."""
    lowered, dtype = lowercase_strings(values), values.dtype
    if isinstance(lowered, CodePoints):  # pandas' own lowercase of the arrow array as it is now
        held = arrow_array(values)
        return Texts(lowered, lambda: pd.Series(held, index=index, name=name, copy=False).str.lower())
    return Texts(lowered, lambda: pd.Series(lowered, index=index, name=name, dtype=dtype))


def lowercase_strings(values) -> list | CodePoints:
    """The strings of ``values`` (an array or Series) as pandas' ``.str.lower()`` lowercases them."""
    dtype = values.dtype
    if is_arrow_strings(values):
        return arrow_documents(values, lowercase=True)
    if not (dtype is _OBJECT or dtype == object or getattr(dtype, "storage", None) == "python"):
        raise Unsupported(f"strings stored as {dtype!r} (pandas may lowercase them another way)")
    return [t.lower() for t in strings(values)]


def strings(values) -> list | CodePoints:
    """The values of an array or Series as a list, all ``str``, or as code points for pyarrow's
    strings; Unsupported otherwise."""
    if is_arrow_strings(values):
        return arrow_documents(values)
    # (a string column's array lists its objects ten times faster from the ndarray holding them)
    texts = values._ndarray.tolist() if type(values) is StringArray else values.tolist()
    for value in texts:
        if type(value) is not str:
            raise Unsupported("a value that is not a str")
    return texts


def column_array(frame, column):
    """The array of the one column named ``column`` of a DataFrame (no Series built); Unsupported otherwise."""
    if type(frame) is not pd.DataFrame:
        raise Unsupported(f"a column of a {type(frame).__name__}")
    at = _column_position(frame.columns, column)
    if at is None:
        raise Unsupported(f"the frame has no single column {column!r}")
    return frame._get_column_array(at)


_OBJECT = np.dtype(object)
_positions = {}  # column name -> (the labels of the columns Index, position) last found


def _column_position(columns: pd.Index, column) -> int | None:
    """The position of the one column named ``column``, or None (absent, or several).

    Row selections of one frame (``df.iloc[[i]]``) have new column Index objects
    sharing the same array of labels, which an Index never changes: a position found
    for those labels holds for all of them."""
    labels = columns._data if type(columns) is pd.Index else None
    known = _positions.get(column)
    if known is not None and known[0] is labels:
        return known[1]
    if column not in columns:
        return None
    at = columns.get_loc(column)
    if type(at) is not int:
        return None
    if labels is not None:
        if len(_positions) >= 64:
            _positions.clear()
        _positions[column] = (labels, at)
    return at


def column_str_method(frame, column, name: str):
    """``frame[column].str.<name>()``, as written: what the rewritten call runs when not compiled."""
    return getattr(frame[column].str, name)()


column_str_method.operator_name = "StringMethods.lower"  # for explain_compilation
COLUMN_STR_METHODS = {"lower"}  # methods the rewrite applies to


class CompiledColumnLower:
    """``column_str_method(frame, column, "lower")`` as a ``Texts`` value, read from the frame's
    column array; for call sites whose result stays compiled."""

    @staticmethod
    def still_valid() -> bool:
        return True

    def __call__(self, frame, column, name):
        raise Unsupported("its result is used as a pandas Series")

    @staticmethod
    def defer(frame, column, name) -> Texts:
        if name != "lower":
            raise Unsupported(f".str.{name}()")
        values = column_array(frame, column)
        if frame.attrs:
            raise Unsupported("a frame with attrs (pandas passes them on to the column)")
        return _lowered(values, frame.index, column)
