"""Compiled ``series.map(mapping)``, for a dict or a Series used as a lookup table.

pandas turns the mapping into a Series, hashes its index and looks the values
up with ``get_indexer``: tens of microseconds a call, even for one row. Here
each value is looked up in a Python dict, which finds what pandas' index finds
when keys and values are of one kind: numbers (ints and floats compare by
value, NaN finds the one NaN key), bools, or strs; from ``BULK_ROWS`` numbers
looked up in a Series indexed by numbers, its index's ``get_indexer`` finds
them, as pandas does (a dict, key by key, is slower there). The result is built as
pandas builds it: the mapping's values at the found positions, NaN for a
missing key (ints then become float64, bools object), with the dtype pandas
infers for a dict's values. Anything else (other mapping types, ``na_action``,
categoricals, duplicate or mixed keys, ...) runs as written.

pandas' ``str`` dtype is compiled in both storages: Python's, and pyarrow's
(``ArrowStringArray``, what pandas infers for text where pyarrow is installed).
pyarrow-backed values are found among a Series' or table's keys in numba, by
their UTF-8 bytes (``arrow.Utf8Keys``; a few values, and values looked up in a
dict, are read as Python objects by pyarrow's own conversion); str results
pandas keeps in pyarrow are built, or taken, in pyarrow as pandas builds and
takes them. Where pandas would put a Python str that is not UTF-8 (a lone
surrogate) into pyarrow, it raises, and so the call runs as written.

A Series mapping's key -> position dict is built once and kept while the Series
has the same index (``key_positions``, which ``lookups`` shares for tables);
its values are read on every call, so values written into it in place are seen.
"""

import threading
import weakref
from itertools import repeat

import numpy as np
import pandas as pd
from pandas.arrays import ArrowStringArray, StringArray

from willump.compile.arrow import FEW_STRINGS, Utf8Keys, arrow_objects, pa
from willump.compile.forms import ReceiverKernel, Unsupported, series_of

try:  # the rules below are pandas 3's, where strings are inferred as its str dtype
    from pandas._config import using_string_dtype

    STR = pd.StringDtype(storage="python", na_value=np.nan)  # the str dtype without pyarrow
except (ImportError, TypeError):  # older pandas: every call runs as written
    using_string_dtype, STR = bool, None
ARROW_STR = None if pa is None or STR is None else pd.StringDtype(storage="pyarrow", na_value=np.nan)
_EXACT = 2**53  # larger ints are not all exact floats, and pandas compares ints with floats as floats
# numbers looked up in a Series from this many rows by its index's hash table (``get_indexer``: ~25 us a
# call, 0.01 us a row) rather than by a dict, key by key (~10 us a call, 0.07-0.3 us a row)
BULK_ROWS = 256
_INT64 = 2**63
_SOURCE_KINDS = {"i": "int", "u": "int", "f": "float", "b": "bool", "O": "str"}
_KEY_KINDS = {"int": "number", "float": "number", "bool": "bool", "str": "str"}  # the source kind's keys
_INDEX_DTYPES = {"number": ("int64", "float64"), "bool": ("bool",), "str": ("object", STR, ARROW_STR)}
_VALUE_DTYPES = (np.dtype(np.int64), np.dtype(np.float64), np.dtype(bool), np.dtype(object))


class CompiledMap(ReceiverKernel):
    """``series.map(mapping)`` for a dict or a Series."""

    def __call__(self, series, /, func=None, na_action=None, **options):
        if not using_string_dtype():
            raise Unsupported("pandas does not infer its str dtype (future.infer_string is off, or pandas < 3)")
        if options or na_action is not None:
            raise Unsupported("an option besides the mapping (na_action, engine, ...)")
        if type(func) not in (dict, pd.Series):
            raise Unsupported(f"a mapping of type {type(func).__name__} (only dict and Series are compiled)")
        if type(func) is pd.Series and _numbers_in_bulk(series, func):
            return _series(_from_series_in_bulk(func, series), series)
        kind, values = source(series)
        if not len(values):
            raise Unsupported("an empty Series")
        if not len(func):  # pandas maps through an empty float64 Series
            taken = np.full(len(values), np.nan)
        elif type(func) is dict:
            taken = _from_dict(func, kind, values)
        else:
            taken = _from_series(func, kind, values)
        if not isinstance(series.dtype, np.dtype):  # str: pandas maps through its extension array
            taken = _for_strings(taken)
        return _series(taken, series)


def source(series) -> tuple[str, list]:
    """('int', 'float', 'bool' or 'str', the values as Python objects), for the dtypes compiled
    (of a Series, or of an Index or array looked up as keys); more than a few pyarrow-backed strings
    are given as their ``ArrowStringArray``, which ``KeyPositions.find`` reads in numba."""
    dtype = series.dtype
    if isinstance(dtype, np.dtype):
        kind = _numpy_kind(dtype)
        if kind is None:
            raise Unsupported(f"a Series of dtype {dtype}")
    elif dtype == STR:
        kind = "str"
    elif dtype == ARROW_STR:
        array = series._values
        return "str", (array if len(array) > FEW_STRINGS else arrow_objects(array))
    else:
        raise Unsupported(f"a Series of dtype {dtype} (pandas maps it through its extension array)")
    values = series.tolist()
    if dtype == object:
        if not all(type(v) is str for v in values):
            raise Unsupported("an object Series with values that are not str")
        check_held_by_pyarrow(values)  # (pandas infers their dtype when it looks them up)
    return kind, values


def _numpy_kind(dtype: np.dtype) -> str | None:
    """The source kind of a numpy dtype ``source`` takes ('int', 'float', 'bool', 'str'), or None."""
    kind = _SOURCE_KINDS.get(dtype.kind)
    if dtype == np.uint64 or (kind == "float" and dtype.itemsize not in (4, 8)):
        return None
    return kind


def inferred_str():
    """The str dtype pandas infers for text now (``STR``, or ``ARROW_STR`` where pyarrow is installed
    and ``mode.string_storage`` does not say otherwise)."""
    dtype = pd.StringDtype(na_value=np.nan)
    if dtype == STR:
        return STR
    if dtype == ARROW_STR:
        return ARROW_STR
    raise Unsupported(f"pandas infers text as {dtype!r}")


def check_held_by_pyarrow(strs) -> None:
    """Unsupported where pandas would keep these Python strs in pyarrow and one is not UTF-8 (a lone
    surrogate): pandas raises UnicodeEncodeError then."""
    if inferred_str() is ARROW_STR:
        try:
            "".join(strs).encode()
        except UnicodeEncodeError:
            raise Unsupported("a str pyarrow cannot hold (a lone surrogate; pandas raises)") from None


def strings(values: list, dtype):
    """The str array of ``values`` (strs, None and NaN: its missing values) that pandas builds of
    ``dtype``, ``STR`` or ``ARROW_STR``."""
    if dtype is STR:
        return StringArray._from_sequence(values, dtype=STR)
    return ArrowStringArray(pa.array(values, type=pa.large_string(), from_pandas=True), dtype=ARROW_STR)


class _Keys:
    """What pandas' index of a mapping's keys compares them as: 'number', 'bool' or 'str'."""

    def __init__(self, keys):
        types = set(map(type, keys))
        if types <= {int, float}:
            self.kind = "number"
        elif types == {bool}:
            self.kind = "bool"
        elif types <= {str, float}:
            self.kind = "str"
        else:
            raise Unsupported(f"keys of types {sorted(t.__name__ for t in types)} (pandas compares them otherwise)")
        self.floats = float in types
        nans = [k for k in keys if k != k] if self.floats else []
        if len(nans) > 1:
            raise Unsupported("several NaN keys (pandas raises)")
        if self.kind == "str" and self.floats and sum(type(k) is float for k in keys) > len(nans):
            raise Unsupported("str and number keys (pandas compares them otherwise)")
        self.nan = nans[0] if nans else None
        ints = (keys if types == {int} else [k for k in keys if type(k) is int]) if int in types else ()
        self.widest = max(-min(ints), max(ints)) if ints else 0
        if self.widest >= _INT64:
            raise Unsupported("int keys beyond int64")

    def check(self, kind: str, values: list) -> None:
        """Unsupported unless a dict lookup of these values finds what pandas' get_indexer finds."""
        if self.kind != _KEY_KINDS[kind]:
            raise Unsupported(f"{self.kind} keys for {kind} values (pandas compares them otherwise)")
        if kind == "float" or (kind == "int" and self.floats):  # pandas compares as float64
            if self.widest > _EXACT or (kind == "int" and max(-min(values), max(values)) > _EXACT):
                raise Unsupported("ints beyond 2**53 compared with floats")


def _from_dict(mapping: dict, kind: str, values: list):
    """The mapping's values for ``values`` (NaN where a key is missing), as pandas' take gives them."""
    keys = _Keys(mapping)
    keys.check(kind, values)
    dtype = _dtype_of(mapping.values())
    if keys.kind == "str":  # pandas makes them an Index
        check_held_by_pyarrow([k for k in mapping if type(k) is str])
    if isinstance(values, ArrowStringArray):
        values = arrow_objects(values)
    get, nan = mapping.get, np.nan
    at_nan = mapping[keys.nan] if keys.nan is not None else nan
    taken = [get(v, nan) if v == v else at_nan for v in values]
    if dtype is STR or dtype is ARROW_STR:
        if dtype is ARROW_STR:  # pandas makes them a Series
            check_held_by_pyarrow([v for v in mapping.values() if type(v) is str])
        return strings(taken, dtype)
    if dtype.kind in "ib" and nan in taken:  # the dict's values hold no NaN: a key was missing
        dtype = np.dtype(np.float64 if dtype.kind == "i" else object)
    return np.array(taken, dtype=dtype)


def _dtype_of(values) -> object:
    """The dtype of ``pd.Series(list(values))``, for ints, floats, strs, bools and None."""
    types = set(map(type, values))
    if not types <= {int, float, str, bool, type(None)}:
        raise Unsupported(f"values of types {sorted(t.__name__ for t in types)}")
    if types <= {int, float, type(None)} and types & {int, float}:
        ints = (values if types == {int} else [v for v in values if type(v) is int]) if int in types else ()
        if ints and max(-min(ints), max(ints)) >= _INT64:
            raise Unsupported("int values beyond int64")
        return np.dtype(np.int64 if types == {int} else np.float64)
    if types == {bool}:
        return np.dtype(bool)
    if str in types and types <= {str, float, type(None)} and all(v != v for v in values if type(v) is float):
        return inferred_str()  # None and NaN are its missing values
    return np.dtype(object)


def _numbers_in_bulk(series, mapping: pd.Series) -> bool:
    """Whether ``series`` holds at least ``BULK_ROWS`` numbers (of a dtype ``source`` takes) and
    ``mapping`` is indexed by unique numbers: then its keys are found as pandas finds them. (Not an
    empty mapping: pandas maps through an empty float64 Series then, whatever its dtype.)"""
    dtype, index = series.dtype, mapping.index
    return (len(series) >= BULK_ROWS and len(mapping) > 0 and isinstance(dtype, np.dtype)
            and _numpy_kind(dtype) in ("int", "float") and index.dtype in (np.dtype(np.int64), np.dtype(np.float64))
            and mapping._values.dtype in _VALUE_DTYPES and index.is_unique)


def _from_series_in_bulk(mapping: pd.Series, series):
    """``series.map(mapping)``'s values as pandas' ``map_array`` takes them: the positions of the
    keys from the index's own hash table (``get_indexer``, built once per index), then ``take``."""
    positions = mapping.index.get_indexer(series._values)
    return take(mapping._values, positions, bool((positions < 0).any()))


def _from_series(mapping: pd.Series, kind: str, values: list):
    array = mapping._values
    if not (array.dtype in _VALUE_DTYPES or array.dtype == STR or array.dtype == ARROW_STR):
        raise Unsupported(f"a mapping of dtype {array.dtype}")
    if not mapping.index.is_unique:
        raise Unsupported("the mapping's index has duplicate keys (pandas raises)")
    positions = key_positions(mapping).find(kind, values)
    return take(array, np.asarray(positions, dtype=np.intp), -1 in positions)


class KeyPositions:
    """The key -> position dict of a unique index (of a Series mapping, or of a table looked up by
    ``lookups``), built once per index data: pandas indexes are immutable, and the indexes of frames
    made from one another (``df[cols]``, ``df.copy()``) are views of the same data."""

    def __init__(self, index):
        keys = index.tolist()
        self.keys = _Keys(keys)
        if index.dtype not in _INDEX_DTYPES[self.keys.kind]:
            raise Unsupported(f"{self.keys.kind} keys in an index of dtype {index.dtype}")
        self.positions = dict(zip(keys, range(len(keys))))
        self.at_nan = self.positions[self.keys.nan] if self.keys.nan is not None else -1
        self.utf8 = None  # the str keys' Utf8Keys, built when pyarrow-backed strings are first looked up
        data = _data(index)
        self.data = weakref.ref(data, lambda _, key=id(data): _tables.pop(key, None))

    def find(self, kind: str, values: list) -> list:
        """The position of each value (-1: not a key), as pandas' get_indexer finds it (for
        pyarrow-backed strings, an ``ArrowStringArray``: an array of them, found in numba)."""
        self.keys.check(kind, values)
        if isinstance(values, ArrowStringArray):
            if self.utf8 is None:
                self.utf8 = Utf8Keys(list(self.positions))
            return self.utf8.find(values, self.at_nan)
        find, at_nan = self.positions.get, self.at_nan
        if at_nan < 0:  # no NaN key: a NaN finds nothing, as any value that is not a key
            return list(map(find, values, repeat(-1)))
        return [find(v, -1) if v == v else at_nan for v in values]


_tables: dict = {}  # id(index data) -> KeyPositions, dropped with the data
_MAX_TABLES = 1024  # past it, the cache starts again
_lock = threading.Lock()


def key_positions(owner) -> KeyPositions:
    """The ``KeyPositions`` of ``owner.index``, built once per index data. The caller checked that it is unique."""
    index = owner.index
    data = _data(index)
    table = _tables.get(id(data))
    if table is None or table.data() is not data:
        table = KeyPositions(index)
        with _lock:
            if len(_tables) >= _MAX_TABLES:
                _tables.clear()
            _tables[id(data)] = table
    return table


def _data(index):
    """What an index and its views hold (pandas' ``_data``; the index itself where there is none)."""
    return getattr(index, "_data", index)


def take(values, positions: np.ndarray, missing: bool):
    """``values`` at ``positions`` along their last axis, NaN where a position is -1 (``missing``:
    there is one), with the dtype pandas' take_nd gives: ints become float64, bools object.
    ``values`` is a numpy array or a str ``StringArray`` or ``ArrowStringArray``, whose missing value is NaN."""
    if isinstance(values, ArrowStringArray):  # as its take(allow_fill=True): pyarrow's take, null for -1
        indices = pa.array(positions, mask=positions < 0) if missing else positions
        return values._from_pyarrow_array(values._pa_array.take(indices))
    array = values._ndarray if isinstance(values, StringArray) else values
    if array.shape[-1]:
        taken = array.take(positions, axis=-1)
    else:  # every position is -1
        taken = np.empty(array.shape[:-1] + positions.shape, dtype=array.dtype)
    if missing:
        if taken.dtype.kind in "iub":
            taken = taken.astype(np.float64 if taken.dtype.kind in "iu" else object)
        taken[..., positions < 0] = np.nan
    return values._from_backing_data(taken) if array is not values else taken


def _for_strings(taken):
    """What a str Series' map makes of the taken values (``StringArray._cast_pointwise_result``):
    arrays of one dtype stay; object ones are inferred again, and only bools and NaN are compiled."""
    if taken.dtype != object:
        return taken
    types = set(map(type, taken))
    if not types <= {bool, float} or not all(v != v for v in taken if type(v) is float):
        raise Unsupported("mixed values for a str Series (pandas infers their dtype again)")
    if types == {bool}:
        return taken.astype(bool)
    return taken if bool in types else np.full(len(taken), np.nan)


def _series(values, like: pd.Series) -> pd.Series:
    """``pd.Series(values, index=like.index, copy=False).__finalize__(like)``, as Series.map builds it.
    Arrays pandas would not infer again (all but object ones) skip the constructor's checks."""
    if values.dtype == object:
        result = pd.Series(values, index=like.index, copy=False)
    else:
        result = series_of(values, like.index, None)
    return result.__finalize__(like, method="map")
