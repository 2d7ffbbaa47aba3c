"""pandas string methods whose result feeds a compiled text kernel.

``series.str.lower()`` builds a pandas Series, which for one row costs more
than the TF-IDF that reads it. When its result only reaches compiled
vectorizers, the call site keeps the lowercased ``str`` list instead; pandas
does the same ``str.lower`` per element (for object and Python-backed string
columns), so the vectorizer sees the same documents.
"""

import pandas as pd
from pandas.core.strings.accessor import StringMethods

from willump.compile.forms import Texts, Unsupported


class CompiledLower:
    """``series.str.lower()`` as a ``Texts`` value, for call sites whose result stays compiled.

    One instance serves every accessor: it is passed as the first argument (``takes_receiver``).
    """

    takes_receiver = True

    @staticmethod
    def still_valid() -> bool:
        return True

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
