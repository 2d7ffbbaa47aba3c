"""pandas string methods whose result feeds a compiled text kernel.

Two spellings are compiled: ``series.str.lower()`` (any Series), and
``frame["column"].str.lower()``, which call sites rewrite to
``column_str_method(frame, "column", "lower")`` so that, for one row, neither
the column's Series nor its ``.str`` accessor is built (each costs about 10 µs,
as much as the TF-IDF that reads the text).

``series.str.lower()`` builds a pandas Series, which for one row costs more
than the TF-IDF that reads it. When its result only reaches compiled
vectorizers, the call site keeps the lowercased ``str`` list instead; pandas
does the same ``str.lower`` per element (for object and Python-backed string
columns), so the vectorizer sees the same documents.
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
        if not (series.dtype == object or getattr(series.dtype, "storage", None) == "python"):
            raise Unsupported(f"strings stored as {series.dtype!r} (pandas may lowercase them another way)")
        values = series.tolist()
        if not all(type(v) is str for v in values):
            raise Unsupported("a value that is not a str")
        lowered = [v.lower() for v in values]
        index, name, dtype = series.index, series.name, series.dtype
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
        values = frame._get_column_array(position)
        if not (values.dtype == object or getattr(values.dtype, "storage", None) == "python"):
            raise Unsupported(f"strings stored as {values.dtype!r} (pandas may lowercase them another way)")
        if frame.attrs:
            raise Unsupported("a frame with attrs (pandas passes them on to the column)")
        texts = values.tolist()
        if not all(type(v) is str for v in texts):
            raise Unsupported("a value that is not a str")
        lowered = [t.lower() for t in texts]
        index, dtype = frame.index, values.dtype  # the Series is built from these, whatever later code does to frame
        return Texts(lowered, lambda: pd.Series(lowered, index=index, name=column, dtype=dtype))
