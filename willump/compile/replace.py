"""``series.replace(...)`` and ``frame.replace(...)``: pandas' answers without its block machinery (a Series
~130-550 µs a call on a few rows; a frame ~80-200 µs).

pandas' ``replace`` (``Block.replace_list``) first leaves out the keys a block's dtype cannot hold
(``can_hold_element``: a str in a float column, infinity in an int one), finds each remaining pair's
matches in the original values, then puts the replacements in order (a later pair wins where both match;
nothing chains), and changes the dtype only where a replacement that matched cannot be held: a ``str``
column becomes object, an int64 one float64. Compiled, as pandas computes them:

- text: ``str`` values (object, or pandas' ``str`` dtype of either storage; None and NaN missing, left
  as they are) with ``str`` keys (numbers match none) and ``str``, number or NaN replacements: a dict of
  the pairs, the ``str`` dtype kept where every replacement that matched is a ``str`` or NaN (object
  otherwise, with pandas' missing values), up to 256 rows;
- numbers: float64 values with int or float keys (NaN matches NaN, 0.0 matches -0.0) and number
  replacements, or int64 ones with int keys: numpy's comparisons and puts (an int64 column a float
  matched made float64, as pandas coerces it);
- a frame, block by block: a block holding none of the keys, or matching none, is shared as pandas
  shares it (``copy(deep=False)``), the others replaced in a new block of their dtype and place; the
  spellings pandas sends to ``replace_list`` (lists, a dict) consolidate the blocks after, as pandas
  does, so that a model reading the frame sees pandas' layout; dicts by column (``{"col": {key: new}}``)
  each column's Series replace, set as pandas' ``_replace_columnwise`` sets it.

Spellings: ``replace(dict)``, ``replace(key, value)``, ``replace([keys], value)``, ``replace([keys],
[values])``, and the dicts by column. Other values (bools, None, NA), ``regex``, ``inplace``, attrs, a
dtype pandas would change for a frame's block of several columns (it splits the block), and the
NA-valued ``string`` dtype run as written.
"""

import numpy as np
import pandas as pd
from pandas._libs.lib import is_scalar
from pandas.core.dtypes.cast import can_hold_element
from pandas.core.internals.blocks import new_block_2d
from pandas.core.internals.managers import BlockManager

from willump.compile.forms import ReceiverKernel, Unsupported, python_number, series_of
from willump.compile.frames import UNCHANGED, consolidate, frame_of_manager, plain_frame, with_columns_set
from willump.compile.maps import ARROW_STR, STR, strings

_MANY_ROWS = 256  # text: beyond, pandas' vectorized comparisons are faster than a dict, value by value
_EXACT = 2**53  # ints beyond are not all exact float64s
_INT64 = 2**63
_NUMBERS = (np.dtype(np.float64), np.dtype(np.int64))


class CompiledReplace(ReceiverKernel):
    """``series.replace(to_replace, value)``."""

    def __call__(self, series, /, to_replace=None, value=pd.api.extensions.no_default, **options):
        if options:
            raise Unsupported("options (inplace, regex)")
        if type(series) is not pd.Series or series.attrs or not series.flags.allows_duplicate_labels:
            raise Unsupported("a Series subclass, attrs or flags")
        values = series._values
        replaced = _replaced(values, _pairs(to_replace, value))
        return series_of(values.copy() if replaced is None else replaced, series.index.view(), series.name)


class CompiledFrameReplace(ReceiverKernel):
    """``frame.replace(to_replace, value)``: each block as pandas' ``Block.replace`` (a key and a value)
    or ``Block.replace_list`` (the other spellings, the blocks consolidated after) makes it: a block
    holding none of the keys, or matching none, shared as pandas shares it (``copy(deep=False)``),
    the others replaced in a new block of their dtype and place (Unsupported where pandas would
    change a dtype and split the block)."""

    def __call__(self, frame, /, to_replace=None, value=pd.api.extensions.no_default, **options):
        if options:
            raise Unsupported("options (inplace, regex)")
        frame = plain_frame(frame, numbers=False)
        if not frame.size:
            raise Unsupported("an empty frame")
        columnwise = _columnwise(frame.columns, to_replace, value)
        if columnwise is not None:  # (DataFrame._replace_columnwise: each column's Series.replace, set in turn)
            arrays = {}
            for position, pairs in columnwise:
                replaced = _replaced(frame._mgr.iget_values(position), pairs)
                arrays[position] = UNCHANGED if replaced is None else replaced
            return with_columns_set(frame, arrays)
        pairs = _pairs(to_replace, value)
        manager = frame._mgr
        blocks = tuple(_replaced_block(block, pairs) for block in manager.blocks)
        result = BlockManager(blocks, manager.axes, verify_integrity=False)
        if value is pd.api.extensions.no_default or type(to_replace) is list:  # (replace_list's spellings)
            consolidate(result)
        return frame_of_manager(result)


def _columnwise(columns: pd.Index, to_replace, value) -> list | None:
    """[(position, pairs)] of the columns a spelling of dicts by column names (``{"col": {key: new}}``,
    ``({"col": key}, new)``, ``(key, {"col": new})``, ``({"col": key}, {"col": new})``) replaces, in their
    order; None for the other spellings."""
    if value is pd.api.extensions.no_default:
        if type(to_replace) is not dict or not any(type(v) is dict for v in to_replace.values()):
            return None
        if not all(type(v) is dict for v in to_replace.values()):
            raise Unsupported("nested and flat replacements mixed (pandas raises)")
        mapping = {name: (list(keys), list(keys.values())) for name, keys in to_replace.items()}
    elif type(to_replace) is dict and type(value) is dict:
        mapping = {name: (to_replace[name], value[name]) for name in to_replace if name in value}
    elif type(to_replace) is dict:
        mapping = {name: (key, value) for name, key in to_replace.items()}
    elif type(value) is dict and is_scalar(to_replace) and to_replace is not None:
        mapping = {name: (to_replace, new) for name, new in value.items()}
    else:
        return None
    return [(position, _pairs(*mapping[name])) for position, name in enumerate(columns) if name in mapping]


def _replaced_block(block, pairs: list):
    values = block.values
    replaced = _replaced(values, pairs)
    if replaced is None:
        return block.copy(deep=False)
    if replaced.dtype == values.dtype:
        return block.make_block_same_class(replaced)
    return new_block_2d(replaced.reshape(1, -1), block.mgr_locs)  # (a str column an object one: a number put)


def _pairs(to_replace, value) -> list:
    """[(key, replacement)] in pandas' order, of the spellings compiled: scalars only."""
    if value is pd.api.extensions.no_default:
        if type(to_replace) is not dict:
            raise Unsupported("to_replace without a value, other than a dict")
        pairs = list(to_replace.items())
    elif type(to_replace) is list:
        if type(value) is list:
            if len(value) != len(to_replace):
                raise Unsupported("lists of other lengths (pandas raises)")
            pairs = list(zip(to_replace, value))
        else:
            pairs = [(key, value) for key in to_replace]
    else:
        pairs = [(to_replace, value)]
    if not pairs or not all(is_scalar(key) and key is not None and is_scalar(new) for key, new in pairs):
        raise Unsupported("a spelling of replace not compiled (other than keys and values, None a key, or none)")
    return pairs


def _replaced(values, pairs: list):
    """A new array of ``values`` (a Series' or a block's) with the pairs put as pandas puts them, or None
    where none matches: pairs whose key the dtype cannot hold are left out first (``Block.replace_list``)."""
    pairs = [(key, new) for key, new in pairs if _held(values, key)]
    if not pairs:
        return None
    if values.dtype in _NUMBERS:
        return _replaced_numbers(values, pairs)
    if values.ndim == 2:  # an object block of several columns: each replaced alike
        rows = [_replaced_text(row, pairs) for row in values]
        if all(row is None for row in rows):
            return None
        return np.vstack([row if row is not None else np.array(original) for row, original in zip(rows, values)])
    return _replaced_text(values, pairs)


def _held(values, key) -> bool:
    """pandas' ``can_hold_element(values, key)``, which depends on the dtype: kept for numpy's dtypes."""
    if not isinstance(values.dtype, np.dtype):
        return can_hold_element(values, key)
    cache_key = (values.dtype, type(key), repr(key))
    held = _HELD.get(cache_key)
    if held is None:
        if len(_HELD) >= _KEPT:
            _HELD.clear()
        held = _HELD[cache_key] = can_hold_element(values, key)
    return held


_HELD, _KEPT = {}, 1024


def _number(value):
    """A Python int or float (numpy's float64 and int64 as the numbers they hold), else None."""
    value = python_number(value)
    return value if type(value) in (int, float) else None


def _replaced_numbers(array: np.ndarray, pairs: list):
    """A float64 or int64 array's values replaced, or None where no key matches. An int64 column (one: a
    Series', or a block of one column) a float replacement matched becomes float64 there, as pandas'
    ``coerce_to_target_dtype`` makes it, the later pairs put in that (pairs whose key float64 cannot hold
    skipped); Unsupported where pandas would make it another dtype or split the block."""
    floats = array.dtype == np.float64
    numbers = [(_number(key), new) for key, new in pairs]
    for key, _ in numbers:
        if key is None or (floats and type(key) is int and not -_EXACT <= key <= _EXACT):
            raise Unsupported("keys other than numbers, or ints beyond float64's exact ints")
        if not floats and type(key) is not int:
            raise Unsupported("an int64 column with keys other than ints")
    masks = [np.isnan(array) if key != key else array == key for key, _ in numbers]
    matched = [(key, new, mask) for (key, new), mask in zip(numbers, masks) if mask.any()]
    if not matched:
        return None
    result = array.copy()
    for key, new, mask in matched:
        number = _number(new)
        if result.dtype == np.int64 and type(number) is float and not (number.is_integer() and -_INT64 <= number < _INT64):
            if number.is_integer():
                raise Unsupported("a whole float beyond int64 put in an int64 column (pandas raises or makes it object)")
            if array.ndim == 2 and len(array) > 1:
                raise Unsupported("a float put in an int64 block of several columns (pandas splits the block)")
            result = result.astype(np.float64)
        floats = result.dtype == np.float64
        if floats and array.dtype == np.int64 and not _held(result, key):
            continue  # (made float64 by an earlier pair: a key it cannot hold is skipped, as pandas skips it)
        if number is None or (floats and type(number) is int and not -_EXACT <= number <= _EXACT):
            raise Unsupported("a replacement other than a number, or an int beyond float64's exact ints")
        if not floats and type(number) is int and not -_INT64 <= number < _INT64:
            raise Unsupported("an int an int64 column cannot hold (pandas makes it object)")
        result[mask] = number
    return result


def _replaced_text(values, pairs: list):
    """The text's values replaced (None where none matches): pandas' ``str`` array of them where every
    replacement that matched is a ``str`` (and for an object array), else an object array with pandas'
    missing values. Keys that are numbers (not NaN) match no text: left out."""
    dtype = values.dtype
    target = STR if dtype == STR else ARROW_STR if ARROW_STR is not None and dtype == ARROW_STR else None
    if target is None and dtype != object:
        raise Unsupported(f"a column of dtype {dtype}")
    if len(values) > _MANY_ROWS:
        raise Unsupported(f"more than {_MANY_ROWS} rows of text (pandas compares them faster)")
    pairs = [(key, new) for key, new in pairs if not (_number(key) is not None and key == key)]
    if not all(type(key) is str for key, _ in pairs):
        raise Unsupported("keys other than str and numbers")
    values = values.tolist()
    for v in values:
        if type(v) is not str and not (v is None or (type(v) is float and v != v)):
            raise Unsupported("values that are neither str nor missing")
    present = set(values)
    pairs = [(key, new) for key, new in pairs if key in present]
    if not pairs:
        return None
    if not all(type(new) is str or _number(new) is not None for _, new in pairs):
        raise Unsupported("replacements other than str and numbers")
    replacements = dict(pairs)
    replaced = [replacements.get(v, v) if type(v) is str else v for v in values]
    # (a pair that matched and put a number makes it object, even if a later one puts a str)
    if target is not None and all(type(new) is str or new != new for _, new in pairs):
        return strings(replaced, target)
    result = np.empty(len(replaced), object)  # (an object Series, or a str one a number was put in)
    result[:] = replaced
    return result
