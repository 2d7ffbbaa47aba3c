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
``column_str_method(frame, "column", "lower")`` (``frame.column.str.lower()`` to the same with
``attribute=True``), so that not even the column's
Series or its ``.str`` accessor is built (each costs about 10 µs for one row).
"""

import ast
import string
import threading

import numpy as np
import pandas as pd
from pandas.arrays import BooleanArray, IntegerArray, StringArray
from pandas.core.strings.accessor import StringMethods

from willump.compile.columns import check_attribute_column, column_read
from willump.compile.arrow import arrow_array, arrow_code_points, arrow_documents, is_arrow_strings
from willump.compile.forms import ReceiverKernel, Texts, Unsupported
from willump.compile.jit import njit
from willump.compile.unicode import CodePoints, encode


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
        documents, missing = _documents_and_missing(values)  # (decoded once while reading once)
        if missing is not None:
            raise Unsupported("a value that is not a str")
        return documents
    # (a string column's array lists its objects ten times faster from the ndarray holding them)
    texts = values._ndarray.tolist() if type(values) is StringArray else values.tolist()
    for value in texts:
        if type(value) is not str:
            raise Unsupported("a value that is not a str")
    return texts


def column_array(frame, column, attribute: bool = False):
    """The array of the one column named ``column`` of a DataFrame (no Series built), read as
    ``frame.column`` when ``attribute``; Unsupported otherwise."""
    if attribute:
        check_attribute_column(frame, column)
    if type(frame) is not pd.DataFrame:
        raise Unsupported(f"a column of a {type(frame).__name__}")
    at = _column_position(frame.columns, column)
    if at is None:
        raise Unsupported(f"the frame has no single column {column!r}")
    return frame._get_column_array(at)


_OBJECT = np.dtype(object)
_NOT_CONSTANT = object()
_positions = {}  # column name -> (the labels of the columns Index, position, label there) last found


def _column_position(columns: pd.Index, column) -> int | None:
    """The position of the one column named ``column``, or None (absent, or several)."""
    found = _column_found(columns, column)
    return None if found is None else found[0]


def _column_found(columns: pd.Index, column) -> tuple | None:
    """(position, the label there: the Series' name) of the one column named ``column``, or None
    (absent, or several).

    Row selections of one frame (``df.iloc[[i]]``) have new column Index objects
    sharing the same array of labels, which an Index never changes: a position found
    for those labels holds for all of them."""
    labels = columns._data if type(columns) is pd.Index else None
    known = _positions.get(column)
    if known is not None and known[0] is labels:
        return known[1:]
    if column not in columns:
        return None
    at = columns.get_loc(column)
    if type(at) is not int:
        return None
    found = (at, columns[at])
    if labels is not None:
        if len(_positions) >= 64:
            _positions.clear()
        _positions[column] = (labels, *found)
    return found


def column_str_method(frame, column, name: str, attribute: bool = False):
    """``frame[column].str.<name>()`` (``frame.<column>`` when ``attribute``), as written: what the
    rewritten call runs when not compiled."""
    series = getattr(frame, column) if attribute else frame[column]
    return getattr(series.str, name)()


column_str_method.operator_name = "StringMethods.lower"  # for explain_compilation
COLUMN_STR_METHODS = {"lower"}  # methods the rewrite applies to


class CompiledColumnLower:
    """``column_str_method(frame, column, "lower")`` as a ``Texts`` value, read from the frame's
    column array; for call sites whose result stays compiled."""

    @staticmethod
    def still_valid() -> bool:
        return True

    def __call__(self, frame, column, name, attribute=False):
        raise Unsupported("its result is used as a pandas Series")

    @staticmethod
    def defer(frame, column, name, attribute=False) -> Texts:
        if name != "lower":
            raise Unsupported(f".str.{name}()")
        values = column_array(frame, column, attribute)
        if frame.attrs:
            raise Unsupported("a frame with attrs (pandas passes them on to the column)")
        return _lowered(values, frame.index, column)


# --- s.str.len(), .count(literal), .contains(literal), .startswith(prefix) ----------------------

_METACHARACTERS = set(".^$*+?{}[]\\|()")
_ESCAPABLE = set(string.punctuation)  # a backslash before one of these is the character itself, in re and RE2


class StringMethod:
    """``x.str.len()``, ``x.str.count(pattern)``, ``x.str.contains(pattern)`` or ``x.str.startswith(prefix)``
    of a Series or of a frame's column, with constant arguments, as pandas computes it: the numbers
    per string (from code points: pyarrow's strings are read from their buffers), with pandas'
    dtype for the storage (int64, or float64 with NaN, for object and ``str``; Int64 for the
    NA-valued ``string``; bool, object with NaN, or boolean), index and name."""

    def __init__(self, method: str, patterns: tuple, column, attribute: bool = False):
        self.method, self.patterns, self.column = method, patterns, column  # column: None for a Series
        self.attribute = attribute  # the column read as ``frame.column``
        self.pattern_codes = encode(list(patterns))

    def leaf(self, value) -> tuple:
        """(the result's values, (index, name, whether the index is a view)) for the Series ``value``,
        or for ``value[column]``; Unsupported where pandas would do something else."""
        if self.column is None:
            if type(value) is not pd.Series:
                raise Unsupported(f".str of a {type(value).__name__}")
            values, index, name, viewed = value._values, value.index, value.name, False
        else:
            values = column_array(value, self.column, self.attribute)
            index, name, viewed = value.index, _column_found(value.columns, self.column)[1], True
        _check_metadata(value, name)
        return self._values(values), (index, name, viewed)

    def _values(self, values):
        if self.method == "count" and self.patterns == ("",) and is_arrow_strings(values):
            raise Unsupported("count('') of pyarrow strings (pyarrow counts UTF-8 bytes)")
        documents, missing = _documents_and_missing(values)
        counts = _method_counts(documents.codes, documents.offsets, *self.pattern_codes, _METHODS[self.method])
        dtype = values.dtype
        numbers = self.method in ("len", "count")
        if type(dtype) is pd.StringDtype and dtype.na_value is pd.NA:  # Int64, boolean
            kind = IntegerArray if numbers else BooleanArray
            data = counts if numbers else counts.astype(bool)
            return kind(data, np.zeros(len(data), bool) if missing is None else missing)
        if dtype == _OBJECT and missing is not None and missing.all():  # pandas' result: the values as they are
            return values.copy()
        if numbers:
            if missing is None:
                return counts
            result = counts.astype(np.float64)
            result[missing] = np.nan
            return result
        result = counts.astype(bool)
        if missing is None:
            return result
        if dtype == _OBJECT:  # True / False, and the missing value itself (None or NaN) where one is
            result = result.astype(object)
            result[missing] = values[missing]
        else:  # the str dtype: a missing value is False
            result[missing] = False
        return result


_METHODS = {"len": 0, "count": 1, "contains": 2, "startswith": 3}
_METHODS["equals"] = 4  # (only for comparisons, not a .str method)


def string_method(node: ast.expr) -> tuple | None:
    """(the name whose Series or column the call reads, a ``StringMethod``) for a call written
    ``name.str.<method>(...)`` or ``name["column"].str.<method>(...)`` (or ``name.column.str...``) with
    constant arguments pandas answers as the kernel does, or a comparison ``name["column"] == "literal"``
    (or ``!=``; or of ``name.column``),
    else None."""
    if isinstance(node, ast.Compare):
        return _string_comparison(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "isin":
        return _string_isin(node)
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or node.func.attr not in _METHODS:
        return None
    accessor = node.func.value
    if not (isinstance(accessor, ast.Attribute) and accessor.attr == "str"):
        return None
    read = column_read(accessor.value)
    if read is None and not isinstance(accessor.value, ast.Name):
        return None
    name, column, attribute = read or (accessor.value.id, None, False)
    patterns = _patterns(node.func.attr, node)
    return None if patterns is None else (name, StringMethod(node.func.attr, patterns, column, attribute))


def _string_comparison(node: ast.Compare) -> tuple | None:
    """``frame["column"] == "literal"`` or ``!=`` (or ``frame.column``): (frame's name, its StringComparison), else None."""
    if len(node.ops) != 1 or type(node.ops[0]) not in (ast.Eq, ast.NotEq):
        return None
    right, read = node.comparators[0], column_read(node.left)
    if not (isinstance(right, ast.Constant) and type(right.value) is str) or read is None:
        return None
    name, column, attribute = read
    return name, StringComparison(type(node.ops[0]) is ast.NotEq, right.value, column, attribute)


def _string_isin(node: ast.Call) -> tuple | None:
    """``name.isin(["a", "b"])`` or ``name["column"].isin(...)`` (a list, tuple or set of str literals):
    (the name, its StringIsin), else None."""
    values = node.args[0] if len(node.args) == 1 and not node.keywords else None
    if not isinstance(values, (ast.List, ast.Tuple, ast.Set)) or not values.elts or not all(
            isinstance(e, ast.Constant) and type(e.value) is str for e in values.elts):
        return None
    receiver = node.func.value
    read = column_read(receiver)
    if read is None and not isinstance(receiver, ast.Name):
        return None
    name, column, attribute = read or (receiver.id, None, False)
    return name, StringIsin(tuple(e.value for e in values.elts), column, attribute)


class StringComparison(StringMethod):
    """``column == "literal"`` (``!=`` when ``negated``) of strings: bools as pandas compares them, a
    missing value never equal (for object arrays, Python-backed and pyarrow ``str``; refused for the
    NA-valued ``string``, whose answer is ``boolean``)."""

    def __init__(self, negated: bool, literal: str, column, attribute: bool):
        super().__init__("equals", (literal,), column, attribute)
        self.negated = negated

    def _values(self, values):
        dtype = values.dtype
        if type(dtype) is pd.StringDtype and dtype.na_value is pd.NA:
            raise Unsupported("a comparison of the NA-valued string dtype (pandas gives boolean)")
        documents, missing = _documents_and_missing(values)
        equal = _method_counts(documents.codes, documents.offsets, *self.pattern_codes, _METHODS["equals"]).astype(bool)
        if missing is not None:
            equal[missing] = False
        return ~equal if self.negated else equal


_ISIN_ROWS = 256  # (from ~1,000 rows pandas' hash table of the literals is faster than comparing each)


class StringIsin(StringMethod):
    """``values.isin(literals)`` of strings: bools, True where a value is one of the literals, a missing
    value never (object arrays, Python-backed and pyarrow ``str`` and ``string``: numpy bools in each)."""

    def __init__(self, literals: tuple, column, attribute: bool):
        super().__init__("equals", literals, column, attribute)

    def _values(self, values):
        if len(values) > _ISIN_ROWS:
            raise Unsupported(f"more than {_ISIN_ROWS} rows (pandas' hash table is faster)")
        documents, missing = _documents_and_missing(values)
        found = _method_counts(documents.codes, documents.offsets, *self.pattern_codes, _METHODS["equals"]).astype(bool)
        if missing is not None:
            found[missing] = False
        return found


def _patterns(method: str, call: ast.Call) -> tuple | None:
    """The literal strings a method's constant arguments look for (a tuple), or None."""
    arguments = [a.value if isinstance(a, ast.Constant) else _NOT_CONSTANT for a in call.args]
    keywords = {k.arg: k.value.value if isinstance(k.value, ast.Constant) else _NOT_CONSTANT for k in call.keywords}
    if method == "len":
        return () if not arguments and not keywords else None
    if len(arguments) != 1 or None in keywords:
        return None
    pattern = arguments[0]
    if method == "startswith":
        if isinstance(call.args[0], ast.Tuple):
            pattern = tuple(e.value if isinstance(e, ast.Constant) else None for e in call.args[0].elts)
            return pattern if pattern and not keywords and all(type(p) is str for p in pattern) else None
        return (pattern,) if type(pattern) is str and not keywords else None
    if type(pattern) is not str:
        return None
    if method == "contains":
        regex = keywords.pop("regex", True)
        if keywords or type(regex) is not bool:
            return None
        return (pattern,) if not regex else _regex_free(pattern)
    return None if keywords else _regex_free(pattern)


def _regex_free(pattern: str) -> tuple | None:
    """(the string a regular expression matches, literally) for one without metacharacters but
    escaped punctuation, else None."""
    literal, escaped = [], False
    for character in pattern:
        if escaped:
            if character not in _ESCAPABLE:
                return None
            literal.append(character)
            escaped = False
        elif character == "\\":
            escaped = True
        elif character in _METACHARACTERS:
            return None
        else:
            literal.append(character)
    return None if escaped else ("".join(literal),)


class ReadOnce:
    """Within it, on this thread, each array's strings are read (decoded or encoded) once, for
    every kernel reading them: for a whole-call program's kernels, between which no other code
    runs that could change the arrays."""

    def __enter__(self):
        self.outer, _reading.arrays = getattr(_reading, "arrays", None), {}

    def __exit__(self, *exception):
        _reading.arrays = self.outer


_reading = threading.local()  # .arrays: id -> (array, its _documents_and_missing) within ReadOnce


def _documents_and_missing(values) -> tuple:
    """(the strings as code points, missing values '' , a bool mask of the missing or None) of a
    column's array: pyarrow's strings, pandas' Python-backed strings, or an object array of
    ``str`` with None or NaN for missing values; Unsupported otherwise."""
    arrays = getattr(_reading, "arrays", None)
    if arrays is None:
        return _read_documents_and_missing(values)
    known = arrays.get(id(values))
    if known is None or known[0] is not values:
        known = arrays[id(values)] = (values, _read_documents_and_missing(values))
    return known[1]


def _read_documents_and_missing(values) -> tuple:
    if is_arrow_strings(values):
        return arrow_code_points(values)
    if type(values) is StringArray:
        items = values._ndarray.tolist()
    elif type(values) is np.ndarray and values.dtype == _OBJECT:
        items = values.tolist()
    else:
        raise Unsupported(f".str of values stored as {values.dtype!r}")
    missing = [type(v) is not str for v in items]
    if any(missing):
        if not all(v is None or v is pd.NA or (type(v) is float and v != v) for v in items if type(v) is not str):
            raise Unsupported("a value that is neither a str nor missing (numpy's str_, numbers...)")
        items = ["" if m else v for v, m in zip(items, missing)]
        return CodePoints(*encode(items)), np.array(missing)
    return CodePoints(*encode(items)), None


def _check_metadata(obj, name) -> None:
    """Unsupported for what pandas would carry over to the result besides index and name, and for
    names other code would not compare with plain ``==``."""
    if obj.attrs or not obj.flags.allows_duplicate_labels:
        raise Unsupported("attrs or flags (pandas carries them over)")
    if type(name) not in (type(None), str, int, float):
        raise Unsupported(f"a name of type {type(name).__name__}")


@njit
def _method_counts(codes, offsets, pattern_codes, pattern_offsets, method):
    """Per document: its length (method 0), the non-overlapping occurrences of the pattern, from the
    left (1), whether it holds the pattern (2), starts with one of the patterns (3), or is one of
    the patterns (4)."""
    n = len(offsets) - 1
    out = np.zeros(n, np.int64)
    for d in range(n):
        start, end = offsets[d], offsets[d + 1]
        if method == 0:
            out[d] = end - start
            continue
        if method == 4:  # (one of the patterns)
            for p in range(len(pattern_offsets) - 1):
                p_start, size = pattern_offsets[p], pattern_offsets[p + 1] - pattern_offsets[p]
                if end - start == size:
                    k = 0
                    while k < size and codes[start + k] == pattern_codes[p_start + k]:
                        k += 1
                    if k == size:
                        out[d] = 1
                        break
            continue
        for p in range(len(pattern_offsets) - 1):
            p_start, size = pattern_offsets[p], pattern_offsets[p + 1] - pattern_offsets[p]
            i = start
            if method == 3:  # (only at the start, if the prefix fits)
                last = start if size <= end - start else start - 1
            else:
                last = end - size
            while i <= last:
                k = 0
                while k < size and codes[i + k] == pattern_codes[p_start + k]:
                    k += 1
                if k == size:
                    out[d] += 1
                    if method != 1:
                        break
                    i += max(size, 1)
                else:
                    i += 1
            if out[d] and method != 1:
                out[d] = 1
                break
    return out
