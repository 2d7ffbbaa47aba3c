"""``series.astype("category")`` and ``series.astype(CategoricalDtype(categories))``: pandas' categorical
Series, without factorizing the values or building a dtype on every call.

pandas' cast to ``"category"`` (``Categorical(values, dtype=CategoricalDtype())``) factorizes the values,
sorts the distinct ones into the categories and builds a new ``CategoricalDtype`` and its Index: ~170 µs
for a column of one row, most of a LightGBM notebook's one-row call that casts its text columns in a
``for column in CATEGORICAL:`` loop. Here the dtype pandas built for a set of distinct values (of a
Series' dtype) is kept, and a value's code is looked up in a dict: the answer is pandas' own dtype, and
codes of pandas' dtype (``coerce_indexer_dtype``) in a Series of the Series' index and name. A given
``CategoricalDtype`` with categories is the result's dtype itself, as pandas gives it back; the codes of
its categories are kept by dtype (a value among none of them runs as written: pandas warns). Compiled: a Series of at most 2,048 rows, without attrs, of Python
``str`` values (object or pandas' string dtypes; None, NaN and NA missing) or of numpy ints, cast to
categories of the same kind (str or int); others (floats, categories of other kinds, more rows, where
pandas' hash tables factorize faster) run as written.
"""

import numpy as np
import pandas as pd
from pandas.core.dtypes.cast import coerce_indexer_dtype

from willump.compile.forms import ReceiverKernel, Unsupported, series_of
from willump.compile.frames import plain_frame
from willump.compile.maps import check_held_by_pyarrow

_MANY_ROWS = 2048  # (as get_dummies' levels: beyond, pandas factorizes faster than Python's set and dict)
_KEPT = 4096  # the most dtypes kept for sets of distinct values, or given dtypes (all forgotten when full)


class CompiledAstypeCategory(ReceiverKernel):
    """``series.astype(dtype)`` for ``"category"`` and ``CategoricalDtype``."""

    def __init__(self):
        self._inferred = {}  # (Series dtype, ordered, frozenset of values) -> (CategoricalDtype, {value: code})
        self._given = {}  # id of a given CategoricalDtype -> (that dtype, {category: code})

    def __call__(self, series, /, dtype=None, **options):
        if options or not categorical_dtype(dtype):
            raise Unsupported(f"astype to {dtype!r}, or options (only 'category' and CategoricalDtype are compiled)")
        if type(series) is not pd.Series or series.attrs or not series.flags.allows_duplicate_labels:
            raise Unsupported("a Series subclass, attrs or flags")
        if len(series) > _MANY_ROWS:
            raise Unsupported(f"more than {_MANY_ROWS} rows (pandas factorizes them faster)")
        kind, values = _values(series)
        if type(dtype) is str or dtype.categories is None:  # (a CategoricalDtype equals "category")
            return self._inferred_categories(series, dtype, kind, values)
        categories, lookup = self._given_categories(dtype)
        if lookup is None or kind is not _kind_of(categories.categories):
            raise Unsupported("categories of another kind than the values (or not all str or all int)")
        codes = [lookup.get(v, -1) for v in values]
        if any(code < 0 and type(v) is kind for code, v in zip(codes, values)):
            raise Unsupported("values not among the categories (pandas warns: deprecated)")
        if series.dtype == object and kind is str:
            check_held_by_pyarrow([v for v in values if type(v) is str])  # (pandas infers their dtype)
        return _categorical_series(series, codes, categories)

    def _inferred_categories(self, series: pd.Series, dtype, kind: type, values: list) -> pd.Series:
        """The categories pandas infers for these values: its dtype for a set of values kept from its own answer."""
        distinct = frozenset(v for v in values if type(v) is kind)
        if not distinct:
            raise Unsupported("no values, only missing ones")
        key = (series.dtype, type(dtype) is not str and dtype.ordered is True, distinct)
        kept = self._inferred.get(key)
        if kept is None:  # (pandas' categories and their dtype for this set kept, once it took them)
            answer = series.astype(dtype)
            _forget_when_full(self._inferred)
            categories = answer.dtype
            self._inferred[key] = categories, {v: code for code, v in enumerate(categories.categories.tolist())}
            return answer
        categories, lookup = kept
        return _categorical_series(series, [lookup.get(v, -1) for v in values], categories)

    def _given_categories(self, dtype: pd.CategoricalDtype) -> tuple:
        """(dtype, {category: code}, or None when they are not all str or all int), kept by dtype."""
        kept = self._given.get(id(dtype))
        if kept is None or kept[0] is not dtype:
            _forget_when_full(self._given)
            categories = dtype.categories
            lookup = {v: code for code, v in enumerate(categories.tolist())} if _kind_of(categories) else None
            kept = self._given[id(dtype)] = dtype, lookup
        return kept


def categorical_dtype(dtype) -> bool:
    """``"category"`` or a ``CategoricalDtype``, the casts compiled here."""
    return (type(dtype) is str and dtype == "category") or type(dtype) is pd.CategoricalDtype


def _values(series: pd.Series) -> tuple:
    """(str or int, the Series' values as Python objects): str values with None, NaN or NA missing
    (object and pandas' string dtypes), or numpy ints."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return int, series._values.tolist()
    if not (dtype == object or isinstance(dtype, pd.StringDtype)):
        raise Unsupported(f"a Series of dtype {dtype}")
    values = series.tolist()
    for value in values:
        if type(value) is not str and not (value is None or value is pd.NA or (type(value) is float and value != value)):
            raise Unsupported("values that are neither str nor missing")
    return str, values


def _kind_of(categories: pd.Index) -> type | None:
    """str for categories of str (object or pandas' string dtypes), int for numpy ints, else None:
    the kinds whose matching in pandas' hash tables is Python's equality."""
    dtype = categories.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return int
    if (dtype == object or isinstance(dtype, pd.StringDtype)) and all(type(v) is str for v in categories.tolist()):
        return str
    return None


def _categorical_series(series: pd.Series, codes: list, dtype: pd.CategoricalDtype) -> pd.Series:
    """The Series pandas' astype gives: codes (-1 missing) in its dtype, the Series' index and name."""
    codes = coerce_indexer_dtype(np.array(codes, np.int64), dtype.categories)
    return series_of(pd.Categorical.from_codes(codes, dtype=dtype, validate=False), series.index, series.name)


def _forget_when_full(kept: dict) -> None:
    if len(kept) >= _KEPT:
        kept.clear()


ASTYPE = CompiledAstypeCategory()  # (one for every call site: registry's, and expressions' cast to a name's dtype)


class CompiledFrameAstype(ReceiverKernel):
    """``frame.astype("category")``, ``astype(CategoricalDtype(...))`` or ``astype({column: dtype, ...})``
    with such a cast among the dtypes: pandas' ``DataFrame.astype`` for dtypes given by column or of an
    extension, step by step (each column cast, ``concat``, the frame's column names set), each categorical
    cast by ``ASTYPE`` and other casts by pandas; a categorical cast ``ASTYPE`` refuses runs the whole
    call as written (pandas may warn, pointing at the caller's line)."""

    def __call__(self, frame, /, dtype=None, **options):
        if options:
            raise Unsupported("options (copy, errors)")
        frame = plain_frame(frame, numbers=False)
        casts = _casts(frame, dtype)
        columns = [column.copy(deep=False) if cast is None else ASTYPE(column, cast) if categorical_dtype(cast)
                   else column.astype(dtype=cast) for (_, column), cast in zip(frame.items(), casts)]
        result = pd.DataFrame(pd.concat(columns, axis=1))
        result.columns = frame.columns
        return result


def _casts(frame: pd.DataFrame, dtype) -> list:
    """The dtype each column is cast to (None: copied), as ``DataFrame.astype`` reads ``dtype``;
    Unsupported where no column is cast to categories, or pandas raises or takes a shortcut."""
    if type(dtype) is dict and any(categorical_dtype(d) for d in dtype.values()):
        if not set(dtype) <= set(frame.columns):
            raise Unsupported("a name that is no column's (pandas raises)")
        return [None if _missing(cast) else cast for cast in map(dtype.get, frame.columns)]
    if not categorical_dtype(dtype) or not frame.shape[1]:
        raise Unsupported(f"astype to {dtype!r} (only casts to categories are compiled)")
    if any(isinstance(block.dtype, pd.CategoricalDtype) for block in frame._mgr.blocks):
        raise Unsupported("categorical columns already")
    return [dtype] * frame.shape[1]


def _missing(cast) -> bool:
    """Whether pandas reads a column's dtype as none given (its ``isna``: None, NaN)."""
    return cast is None or (type(cast) is float and cast != cast)
