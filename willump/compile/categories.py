"""``series.astype("category")``, ``series.astype(CategoricalDtype(categories))`` and ``pd.cut(series,
edges)``: pandas' categorical Series, without factorizing the values or building a dtype on every call.

pandas' cast to ``"category"`` (``Categorical(values, dtype=CategoricalDtype())``) factorizes the values,
sorts the distinct ones into the categories and builds a new ``CategoricalDtype`` and its Index: ~170 µs
for a column of one row, most of a LightGBM notebook's one-row call that casts its text columns in a
``for column in CATEGORICAL:`` loop. Here the dtype pandas built for a set of distinct values (of a
Series' dtype and pandas' text options) is kept for a set of up to 64 values, each answer a copy of its
own, and a value's code is looked up in a dict: the answer is pandas' own dtype, and codes of pandas'
dtype (``coerce_indexer_dtype``) in a Series of a view of the Series' index and its name. A given
``CategoricalDtype`` with categories is the result's dtype itself, as pandas gives it back; codes are
pandas' ``get_indexer_for`` of its categories (a value among none of them runs as written: pandas
warns). Compiled: a Series of at most 256 rows, without attrs, of Python ``str`` values (object or
pandas' string dtypes; None, NaN and NA missing) or of numpy ints, cast to categories of the same kind
(str or int); others (floats, categories of other kinds, more rows, where pandas' hash tables factorize
faster) run as written.

``pd.cut`` of a float64 or int64 Series by edges written as a list or tuple of numbers or given as an
array (not a number of bins, which depends on the values): pandas' first answer for those edges and
options gives the edges it searched and the dtype of its categories (~100-300 µs a call building
them: labels, intervals); later calls search the same edges with pandas' own ``searchsorted`` and
mark the values outside them missing as it does (``_bins_to_cuts``).
"""

import ast
import inspect

import numpy as np
import pandas as pd
from pandas._config import using_string_dtype
from pandas.core.dtypes.cast import coerce_indexer_dtype

from willump.compile.forms import ReceiverKernel, Unsupported, series_of
from willump.compile.frames import plain_frame
from willump.compile.maps import check_held_by_pyarrow

_MANY_ROWS = 256  # (beyond, pandas' hash tables factorize ints and pyarrow strings faster than Python's set and dict)
_FEW_CATEGORIES = 64  # the most distinct values whose pandas dtype is kept (more: pandas' own cast, nothing kept)
_KEPT = 1024  # the most dtypes kept (all forgotten when full)


class CompiledAstypeCategory(ReceiverKernel):
    """``series.astype(dtype)`` for ``"category"`` and ``CategoricalDtype``."""

    def __init__(self):
        self._inferred = {}  # (Series dtype, text options, ordered, frozenset of values) -> (dtype, {value: code})

    def __call__(self, series, /, dtype=None, **options):
        if options or not categorical_dtype(dtype):
            raise Unsupported(f"astype to {dtype!r}, or options (only 'category' and CategoricalDtype are compiled)")
        check_castable(series)
        kind, values = _values(series)
        if type(dtype) is str or dtype.categories is None:  # (a CategoricalDtype equals "category")
            return self._inferred_categories(series, dtype, kind, values)
        return _given_categories(series, dtype, kind, values)

    def _inferred_categories(self, series: pd.Series, dtype, kind: type, values: list) -> pd.Series:
        """The categories pandas infers for these values: its dtype for a set of a few values kept from
        its own answer (copied for each answer: a user may name its categories' Index)."""
        distinct = frozenset(v for v in values if type(v) is kind)
        if not distinct:
            raise Unsupported("no values, only missing ones")
        if len(distinct) > _FEW_CATEGORIES:
            return series.astype(dtype)
        text = _text_options() if series.dtype == object else None
        key = (series.dtype, text, type(dtype) is not str and dtype.ordered is True, distinct)
        kept = self._inferred.get(key)
        if kept is None:  # (pandas' categories and their dtype for this set kept, once it took them)
            answer = series.astype(dtype)
            if len(self._inferred) >= _KEPT:
                self._inferred.clear()
            categories = _copied(answer.dtype)
            self._inferred[key] = categories, {v: code for code, v in enumerate(categories.categories.tolist())}
            return answer
        categories, lookup = kept
        return _categorical_series(series, [lookup.get(v, -1) for v in values], _copied(categories),
                                   series.index.view())


def _text_options() -> tuple:
    """The pandas options the dtype it infers for text depends on (object values' categories, str labels')."""
    return using_string_dtype(), pd.get_option("mode.string_storage")


def _copied(dtype: pd.CategoricalDtype) -> pd.CategoricalDtype:
    """A dtype of its own, over a view of the categories (pandas gives each answer one: a user may
    name an answer's categories)."""
    return pd.CategoricalDtype._from_fastpath(dtype.categories.view(), dtype.ordered)


def check_castable(series) -> None:
    """Unsupported unless ``series`` is a plain Series of at most ``_MANY_ROWS`` rows of numpy ints,
    object or pandas' string dtypes."""
    if type(series) is not pd.Series or series.attrs or not series.flags.allows_duplicate_labels:
        raise Unsupported("a Series subclass, attrs or flags")
    if len(series) > _MANY_ROWS:
        raise Unsupported(f"more than {_MANY_ROWS} rows (pandas factorizes them faster)")
    dtype = series.dtype
    if not (isinstance(dtype, np.dtype) and dtype.kind in "iuO" or isinstance(dtype, pd.StringDtype)):
        raise Unsupported(f"a Series of dtype {dtype}")


def _given_categories(series: pd.Series, dtype: pd.CategoricalDtype, kind: type, values: list) -> pd.Series:
    """Cast to a given dtype: each value's code by pandas' own ``get_indexer_for`` of the categories (the
    Index keeps its hash table), the dtype itself the answer's, as pandas gives it."""
    categories = dtype.categories
    if _kind_of(categories) is not kind:
        raise Unsupported("categories of another kind than the values (or not all str or all int)")
    codes = categories.get_indexer_for(series._values)
    if any(code < 0 and type(v) is kind for code, v in zip(codes.tolist(), values)):
        raise Unsupported("values not among the categories (pandas warns: deprecated)")
    if series.dtype == object and kind is str:
        check_held_by_pyarrow([v for v in values if type(v) is str])  # (pandas infers their dtype)
    return _categorical_series(series, codes, dtype, series.index.view())


def may_cast_to_categories(call) -> bool:
    """Whether ``x.astype(...)`` as written may be a cast to categories (the only ones compiled here, so
    others are plain calls, without a call site's cost): not to a builtin type's name, numpy's attribute or
    a string other than "category", nor a dict of those."""
    written = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "dtype"), None)
    return _may_be_categorical(written)


def _may_be_categorical(node) -> bool:
    if isinstance(node, ast.Constant):
        return node.value == "category"
    if isinstance(node, ast.Name):
        return node.id not in _BUILTIN_TYPES
    if isinstance(node, ast.Attribute):
        return not (isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"))
    if isinstance(node, ast.Dict):
        return any(_may_be_categorical(value) for value in node.values)
    return node is not None


_BUILTIN_TYPES = {"float", "int", "str", "bool", "complex", "object", "bytes"}


def categorical_dtype(dtype) -> bool:
    """``"category"`` or a ``CategoricalDtype``, the casts compiled here."""
    return (type(dtype) is str and dtype == "category") or type(dtype) is pd.CategoricalDtype


def _values(series: pd.Series) -> tuple:
    """(str or int, the Series' values as Python objects): str values with None, NaN or NA missing
    (object and pandas' string dtypes), or numpy ints."""
    if series.dtype.kind in "iu":
        return int, series._values.tolist()
    values = series.tolist()
    for value in values:
        if type(value) is not str and not (value is None or value is pd.NA or (type(value) is float and value != value)):
            raise Unsupported("values that are neither str nor missing")
    return str, values


def _kind_of(categories: pd.Index) -> type | None:
    """str for categories of str (object or pandas' string dtypes), int for numpy ints, else None:
    the kinds whose matching in pandas' hash tables is Python's equality (``inferred_type`` is kept
    by the Index)."""
    dtype = categories.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return int
    if isinstance(dtype, pd.StringDtype) or (dtype == object and categories.inferred_type == "string"):
        return str
    return None


def _categorical_series(series: pd.Series, codes, dtype: pd.CategoricalDtype, index: pd.Index) -> pd.Series:
    """A Series of codes (-1 missing) in ``dtype``, of pandas' codes dtype, with that index and the
    Series' name."""
    codes = coerce_indexer_dtype(np.asarray(codes, np.int64), dtype.categories)
    return series_of(pd.Categorical.from_codes(codes, dtype=dtype, validate=False), index, series.name)


ASTYPE = CompiledAstypeCategory()  # (one for every call site: registry's, and expressions' cast to a name's dtype)


class CompiledFrameAstype(ReceiverKernel):
    """``frame.astype("category")``, ``astype(CategoricalDtype(...))`` or ``astype({column: dtype, ...})``
    of such casts (or none, a missing value: the column copied): pandas' ``DataFrame.astype`` for dtypes
    given by column or of an extension, step by step (each column cast, ``concat``, the frame's column
    names set), each cast by ``ASTYPE``; every column is checked before any is cast (a refusal runs the
    whole call as written, once)."""

    def __call__(self, frame, /, dtype=None, **options):
        if options:
            raise Unsupported("options (copy, errors)")
        frame = plain_frame(frame, numbers=False)
        casts = _casts(frame, dtype)
        columns = list(frame.items())
        for (_, column), cast in zip(columns, casts):
            if cast is not None:
                check_castable(column)
        columns = [column.copy(deep=False) if cast is None else ASTYPE(column, cast)
                   for (_, column), cast in zip(columns, casts)]
        result = pd.DataFrame(pd.concat(columns, axis=1))
        result.columns = frame.columns
        return result


def _casts(frame: pd.DataFrame, dtype) -> list:
    """The dtype each column is cast to (None: copied), as ``DataFrame.astype`` reads ``dtype``;
    Unsupported where a cast is not to categories, or pandas raises or takes a shortcut."""
    if type(dtype) is dict:
        casts = [None if _missing(cast) else cast for cast in map(dtype.get, frame.columns)]
        if not set(dtype) <= set(frame.columns) or not all(cast is None or categorical_dtype(cast) for cast in casts):
            raise Unsupported("a name that is no column's (pandas raises), or casts not to categories")
        return casts
    if not categorical_dtype(dtype) or not frame.shape[1]:
        raise Unsupported(f"astype to {dtype!r} (only casts to categories are compiled)")
    if any(isinstance(block.dtype, pd.CategoricalDtype) for block in frame._mgr.blocks):
        raise Unsupported("categorical columns already")
    return [dtype] * frame.shape[1]


def _missing(cast) -> bool:
    """Whether pandas reads a column's dtype as none given (its ``isna`` of the value: None, any NaN)."""
    if categorical_dtype(cast) or type(cast) is str:
        return False
    missing = pd.isna(cast)
    if not isinstance(missing, (bool, np.bool_)):
        raise Unsupported("a dtype pandas reads as an array")
    return bool(missing)


class CompiledCut:
    """``pd.cut(x, bins, right=True, labels=None, retbins=False, precision=3, include_lowest=False,
    duplicates="raise", ordered=True)``."""

    _parameters = inspect.signature(pd.cut).parameters
    _names, _defaults = list(_parameters), {name: p.default for name, p in _parameters.items()}

    def __init__(self):
        self._edges = {}  # (x's dtype, bins, labels, options) -> (the edges searched, the categories' dtype or None)

    def __call__(self, /, *args, **kwargs):
        given = dict(zip(self._names, args))
        if len(args) > len(self._names) or set(kwargs) & set(given) or not set(kwargs) <= self._defaults.keys() or (
                len({**given, **kwargs}.keys() & {"x", "bins"}) < 2):
            raise Unsupported("arguments pd.cut does not take (it raises)")
        options = {**self._defaults, **given, **kwargs}
        x = options.pop("x")
        if type(x) is not pd.Series or x.dtype not in _CUT_DTYPES or options.pop("retbins") is not False:
            raise Unsupported("a cut of other than a Series of numpy floats or ints of up to 64 bits, or retbins")
        key = (x.dtype, _text_options(), _edges_key(options["bins"]), _labels_key(options["labels"]),
               *_options_key(options))
        kept = self._edges.get(key)
        if kept is None:  # (pandas' answer; its edges and dtype kept for the next calls, when few and moderate)
            answer, edges = pd.cut(x, retbins=True, **options)
            if not _keepable(edges, answer.dtype, options["labels"]):
                return answer
            if len(self._edges) >= _KEPT:
                self._edges.clear()
            self._edges[key] = edges, _copied(answer.dtype) if isinstance(answer.dtype, pd.CategoricalDtype) else None
            return answer
        edges, dtype = kept
        codes, missing = _interval_codes(x, edges, options["right"], options["include_lowest"])
        if dtype is not None:
            codes[missing] = -1
            return _categorical_series(x, codes, _copied(dtype), x.index)  # (pandas' cut gives the Series' own index)
        if missing.any():  # (labels=False: the codes, float64 with NaN where a value is outside the edges)
            codes = codes.astype(np.float64)
            codes[missing] = np.nan
        return series_of(codes, x.index, x.name)

    @staticmethod
    def still_valid() -> bool:
        return True


_CUT_DTYPES = {np.dtype(t) for t in (np.float64, np.float32, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16,
                                     np.uint32)}


def _keepable(edges: np.ndarray, dtype, labels) -> bool:
    """Whether pandas' answer for these edges is the same each call without building its labels: a few
    edges (a new array of thousands each call would be kept for nothing), and intervals pandas labels
    without overflowing (huge edges warn, or collapse into fewer categories, on every call)."""
    if len(edges) > _FEW_CATEGORIES + 1:
        return False
    if labels is None:
        finite = edges[np.isfinite(edges)] if edges.dtype.kind == "f" else edges
        moderate = not len(finite) or float(np.abs(finite.astype(np.float64)).max()) < 1e200
        return moderate and len(dtype.categories) == len(edges) - 1
    return True


def _interval_codes(x: pd.Series, edges: np.ndarray, right: bool, include_lowest: bool) -> tuple:
    """(each value's interval, from 0, as int64; where it is missing or outside the edges), as
    ``_bins_to_cuts`` finds them: the numpy ``searchsorted`` pandas' ``Index.searchsorted`` makes
    for numbers (int values cast to the edges' int dtype when they all fit in it, as pandas casts them)."""
    values = searched = x._values
    if edges.dtype.kind in "iu" and values.dtype.kind in "iu":  # (algorithms.searchsorted: ints searched as the edges')
        bounds = np.iinfo(edges.dtype)
        if (values >= bounds.min).all() and (values <= bounds.max).all():
            searched = values.astype(edges.dtype)
    ids = np.searchsorted(edges, searched, side="left" if right else "right").astype(np.intp, copy=False)
    if include_lowest:
        ids[values == edges[0]] = 1
    missing = (ids == len(edges)) | (ids == 0)
    if x.dtype.kind == "f":
        missing |= np.isnan(values)
    return ids - 1, missing


def _number_key(value):
    """A key telling apart what pandas reads differently: int from float (and bool), -0.0 from 0.0."""
    if type(value) is int:
        return int, value
    if type(value) is float:
        return float, value.hex()
    raise Unsupported(f"an edge or label of type {type(value).__name__}")


def _edges_key(bins) -> tuple:
    """Edges as a list or tuple of Python numbers, or a 1-D numpy array of numbers (not a count of bins)."""
    if type(bins) in (list, tuple):
        return tuple(map(_number_key, bins))
    if type(bins) is np.ndarray and bins.ndim == 1 and bins.dtype.kind in "iuf":
        return bins.dtype.str, bins.tobytes()
    raise Unsupported("bins other than a list, tuple or array of edges")


def _labels_key(labels) -> tuple:
    if labels is None or labels is False:
        return (labels,)
    if type(labels) not in (list, tuple):
        raise Unsupported("labels other than None, False or a list or tuple")
    if len(set(labels)) != len(labels):  # (pandas' categories are then the distinct labels, sorted)
        raise Unsupported("labels given more than once")
    return tuple((str, label) if type(label) is str else _number_key(label) for label in labels)


def _options_key(options: dict) -> tuple:
    right, precision, include_lowest, duplicates, ordered = (
        options[name] for name in ("right", "precision", "include_lowest", "duplicates", "ordered"))
    if not (type(right) is type(include_lowest) is type(ordered) is bool and type(precision) is int
            and type(duplicates) is str):
        raise Unsupported("options of other types than pandas' defaults")
    return right, precision, include_lowest, duplicates, ordered
