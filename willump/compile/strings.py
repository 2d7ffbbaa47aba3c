"""pandas string methods whose result feeds a compiled text kernel.

``series.str.lower()`` builds a pandas Series, which for one row costs more
than the TF-IDF that reads it. When its result only reaches compiled
vectorizers, the call site keeps the lowercased ``str`` list instead; pandas
does the same ``str.lower`` per element (for object and Python-backed string
columns), so the vectorizer sees the same documents.

The spelling ``frame["column"].str.lower()`` is rewritten by call sites to
``column_str_method(frame, "column", "lower")``, so that not even the column's
Series or its ``.str`` accessor is built (each costs about 10 µs for one row).
"""

import pandas as pd
from pandas.core.strings.accessor import StringMethods

from willump.compile.forms import ReceiverKernel, Texts, Unsupported


class CompiledLower(ReceiverKernel):
    """``series.str.lower()`` as a ``Texts`` value, for call sites whose result stays compiled."""

    def __call__(self, accessor, /):
        raise Unsupported("its result is used as a pandas Series")

    @staticmethod
    def defer(accessor, /) -> Texts:
        series = getattr(accessor, "_orig", None)
        if type(accessor) is not StringMethods or type(series) is not pd.Series:
            raise Unsupported("a .str accessor of something other than a Series")
        return _lowered(series, series.dtype, series.index, series.name)


def _lowered(values, dtype, index, name) -> Texts:
    """The lowercased strings, standing for ``pd.Series(values, index, name=name, dtype=dtype).str.lower()``
    (rebuilt from the strings read now, whatever later code does to where they came from)."""
    if not (dtype == object or getattr(dtype, "storage", None) == "python"):
        raise Unsupported(f"strings stored as {dtype!r} (pandas may lowercase them another way)")
    texts = values.tolist()
    if not all(type(v) is str for v in texts):
        raise Unsupported("a value that is not a str")
    lowered = [t.lower() for t in texts]
    return Texts(lowered, lambda: pd.Series(lowered, index=index, name=name, dtype=dtype))


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
        if type(frame) is not pd.DataFrame or name != "lower":
            raise Unsupported(f"a column of a {type(frame).__name__}")
        position = frame.columns.get_loc(column) if column in frame.columns else None
        if type(position) is not int:
            raise Unsupported(f"the frame has no single column {column!r}")
        if frame.attrs:
            raise Unsupported("a frame with attrs (pandas passes them on to the column)")
        values = frame._get_column_array(position)
        return _lowered(values, values.dtype, frame.index, column)
