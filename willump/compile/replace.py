"""``series.replace(...)``: pandas' Series, without its block machinery (~130-550 µs a call on a few rows).

pandas' ``replace`` (``Block.replace_list``) finds each pair's matches in the original values first, then
puts the replacements in order (a later pair wins where both match; nothing chains), and changes the
dtype only where a replacement that matched cannot be held: a ``str`` Series becomes object, an int64
one float64. Compiled, as pandas computes them:

- text: a Series of Python ``str`` (object, or pandas' ``str`` dtype of either storage; None and NaN
  missing, left as they are) with ``str`` keys and ``str`` or number replacements: a dict of the pairs,
  the ``str`` dtype kept where every replacement that matched is a ``str`` (object otherwise, with
  pandas' missing values), up to 256 rows;
- numbers: a float64 Series with int or float keys (NaN matches NaN, 0.0 matches -0.0) and number
  replacements, or an int64 one with int keys and int replacements: numpy's comparisons and puts.

Spellings: ``replace(dict)``, ``replace(key, value)``, ``replace([keys], value)``, ``replace([keys],
[values])``. Other values (bools, None, NA), ``regex``, ``inplace``, attrs, and the NA-valued ``string``
dtype run as written.
"""

import numpy as np
import pandas as pd

from willump.compile.forms import ReceiverKernel, Unsupported, python_number, series_of
from willump.compile.maps import ARROW_STR, STR, strings

_MANY_ROWS = 256  # text: beyond, pandas' vectorized comparisons are faster than a dict, value by value
_EXACT = 2**53  # ints beyond are not all exact float64s
_INT64 = 2**63


class CompiledReplace(ReceiverKernel):
    """``series.replace(to_replace, value)``."""

    def __call__(self, series, /, to_replace=None, value=pd.api.extensions.no_default, **options):
        if options:
            raise Unsupported("options (inplace, regex)")
        if type(series) is not pd.Series or series.attrs or not series.flags.allows_duplicate_labels:
            raise Unsupported("a Series subclass, attrs or flags")
        pairs = _pairs(to_replace, value)
        dtype = series.dtype
        if dtype == np.float64 or dtype == np.int64:
            values = _replaced_numbers(series._values, pairs)
        else:
            values = _replaced_text(series, pairs)
        return series_of(values, series.index.view(), series.name)


def _pairs(to_replace, value) -> list:
    """[(key, replacement)] in pandas' order, of the spellings compiled."""
    if value is pd.api.extensions.no_default:
        if type(to_replace) is not dict:
            raise Unsupported("to_replace without a value, other than a dict")
        return list(to_replace.items())
    if type(to_replace) is list:
        if type(value) is list:
            if len(value) != len(to_replace):
                raise Unsupported("lists of other lengths (pandas raises)")
            return list(zip(to_replace, value))
        return [(key, value) for key in to_replace]
    if type(to_replace) in (list, dict, tuple, set) or type(value) in (list, dict, tuple, set):
        raise Unsupported("a spelling of replace not compiled")
    return [(to_replace, value)]


def _number(value):
    """A Python int or float (numpy's float64 and int64 as the numbers they hold), else None."""
    value = python_number(value)
    return value if type(value) in (int, float) else None


def _replaced_numbers(array: np.ndarray, pairs: list) -> np.ndarray:
    """A float64 or int64 array's values replaced, its dtype kept (Unsupported where pandas would change it)."""
    floats = array.dtype == np.float64
    numbers = [(_number(key), _number(new)) for key, new in pairs]
    for key, new in numbers:
        if key is None or new is None:
            raise Unsupported("keys or replacements other than numbers")
        if floats and any(type(n) is int and not -_EXACT <= n <= _EXACT for n in (key, new)):
            raise Unsupported("an int beyond float64's exact ints")
        if not floats and (type(key) is not int or type(new) is not int or not -_INT64 <= new < _INT64):
            raise Unsupported("an int64 Series with other than int64 keys and replacements (pandas may change the dtype)")
    masks = [np.isnan(array) if key != key else array == key for key, _ in numbers]
    result = array.copy()
    for (_, new), mask in zip(numbers, masks):
        result[mask] = new
    return result


def _replaced_text(series: pd.Series, pairs: list):
    """The text's values replaced: pandas' ``str`` array of them where every replacement that matched
    is a ``str`` (and for an object Series), else an object array with pandas' missing values."""
    dtype = series.dtype
    target = STR if dtype == STR else ARROW_STR if ARROW_STR is not None and dtype == ARROW_STR else None
    if target is None and dtype != object:
        raise Unsupported(f"a Series of dtype {dtype}")
    if len(series) > _MANY_ROWS:
        raise Unsupported(f"more than {_MANY_ROWS} rows of text (pandas compares them faster)")
    if not all(type(key) is str and (type(new) is str or _number(new) is not None and new == new) for key, new in pairs):
        raise Unsupported("keys other than str, or replacements other than str and numbers")
    replacements = dict(pairs)
    values = series.tolist()
    for v in values:
        if type(v) is not str and not (v is None or (type(v) is float and v != v)):
            raise Unsupported("values that are neither str nor missing")
    replaced = [replacements.get(v, v) if type(v) is str else v for v in values]
    present = set(values)  # (a pair that matched and put a number makes it object, even if a later one puts a str)
    if target is not None and all(type(new) is str or key not in present for key, new in pairs):
        return strings(replaced, target)
    result = np.empty(len(replaced), object)  # (an object Series, or a str one a number was put in)
    result[:] = replaced
    return result
