"""``pd.to_datetime(series)`` of timestamps written as ISO 8601 text, ``2017-11-07 09:30:38``, and
the fields of datetimes, ``series.dt.hour``.

pandas guesses a format from the first string and parses every string with it, about 300 us
for one row (most of it the guess). The strings willump reads are the fixed-width forms that
guess gives ``%Y-%m-%d %H:%M:%S``, ``%Y-%m-%dT%H:%M:%S`` or ``%Y-%m-%d``: every string of one
form, the form of the first, each date and time a valid one. They are parsed in numba into the
microseconds pandas' ``datetime64[us]`` holds. Anything else (missing values, other forms, an
invalid date, which pandas refuses) runs as written.

A field of a Series of naive datetimes (``series.dt.hour``: pandas builds a DatetimeIndex, its
field, then a Series, ~60 us for one row) is computed in numba from the integers pandas holds,
with the calendar arithmetic of Hinnant's civil dates; with a missing value (pandas gives floats
then) it runs as written.
"""

import numpy as np
import pandas as pd
from pandas._libs import lib

from willump.compile.arrow import is_arrow_strings, utf8_buffers
from willump.compile.forms import Unsupported, series_of
from willump.compile.jit import njit

# The forms, by the width of their text: the format pandas guesses (or is given) for them.
_FORMATS = {19: ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S"), 10: ("%Y-%m-%d",)}
_SEPARATORS = {"%Y-%m-%d %H:%M:%S": ord(" "), "%Y-%m-%dT%H:%M:%S": ord("T"), "%Y-%m-%d": 0}


class CompiledToDatetime:
    """``pd.to_datetime(series)`` (``format=`` one of the forms read here, ``cache=`` either way)
    of a Series of such strings: pandas' ``datetime64[us]`` Series, with the Series' index (a view of
    it where pandas goes through its cache of repeated strings) and name."""

    def __call__(self, arg=None, /, *options, format=None, cache=True, **keywords):
        if options or keywords:
            raise Unsupported(f"to_datetime options {sorted(keywords) or 'given by position'}")
        if type(arg) is not pd.Series or arg.attrs or not arg.flags.allows_duplicate_labels or not len(arg):
            raise Unsupported("a value other than a Series of strings with rows and no attrs or flags")
        codes = _fixed_width_codes(arg)
        form = _form(codes, format)
        microseconds = np.empty(len(codes), dtype=np.int64)
        if not _parse(codes, _SEPARATORS[form], microseconds):
            raise Unsupported(f"a string that is not a valid date of the form {form}")
        checked = _checked_for_caching(len(codes)) if cache and format is None else 0
        cached = checked and len(np.unique(microseconds[:checked])) <= checked * 0.7
        # (through its cache, pandas maps the strings to their times: the same times, on a view of the index)
        return series_of(microseconds.view("M8[us]"), arg.index.view() if cached else arg.index, arg.name)

    @staticmethod
    def still_valid() -> bool:
        return True


def _checked_for_caching(rows: int) -> int:
    """How many first strings pandas' ``should_cache`` looks at when no format is given (0: none, it does not
    cache): over 50 rows, a tenth of them, at most 500. It caches when no more than 70% of those are
    distinct (strings of one form are as distinct as their times; pandas' own check iterates the strings,
    ~135 us for 2,000)."""
    if rows <= 50:
        return 0
    return rows // 10 if rows <= 5000 else 500


def _fixed_width_codes(series: pd.Series) -> np.ndarray:
    """The strings' characters as a (rows, width) array of codes, all of one width; Unsupported for
    missing values, values other than strings and strings of several widths."""
    dtype = series.dtype
    if is_arrow_strings(series):
        return _arrow_codes(series.array._pa_array)
    if type(dtype) is pd.StringDtype:
        values = series.array._ndarray
    elif dtype == object:
        values = series._values
    else:
        raise Unsupported(f"a Series of dtype {dtype}")
    if not lib.is_string_array(values, skipna=False):
        raise Unsupported("missing values, or values other than strings")
    text = np.asarray(values, dtype=str)
    width = text.dtype.itemsize // 4
    return text.view(np.uint32).reshape(len(text), width)  # (shorter strings end in NULs: not a date)


def _arrow_codes(chunked) -> np.ndarray:
    """The UTF-8 bytes of pyarrow strings of one width, as (rows, width)."""
    rows = []
    for chunk in chunked.chunks:
        data, bounds, present = utf8_buffers(chunk)
        if present is not None:
            raise Unsupported("missing values")
        widths = np.diff(bounds)
        if not len(widths):
            continue
        if not widths[0] or (widths != widths[0]).any() or rows and widths[0] != rows[0].shape[1]:
            raise Unsupported("empty strings, or strings of several lengths")
        rows.append(data[bounds[0] : bounds[-1]].reshape(len(widths), widths[0]))
    return rows[0] if len(rows) == 1 else np.concatenate(rows)


def _form(codes: np.ndarray, format) -> str:
    """The format pandas parses the strings with: ``format``, else the one it guesses from the first."""
    forms = _FORMATS.get(codes.shape[1], ())
    if format is not None:
        if format not in forms:
            raise Unsupported(f"format {format!r} (other than the forms read here, for strings of this length)")
        return format
    if len(forms) == 1:
        return forms[0]
    if forms and codes[0, 10] in (ord(" "), ord("T")):
        return forms[0] if codes[0, 10] == ord(" ") else forms[1]
    raise Unsupported("strings of another form")


@njit
def _parse(codes, separator, microseconds) -> bool:
    """Fill ``microseconds`` (since the epoch) from ``YYYY-MM-DD`` and, where ``separator`` is not 0,
    ``<separator>HH:MM:SS``; False at the first string of another form or an invalid date or time."""
    for row in range(codes.shape[0]):
        text = codes[row]
        if text[4] != 45 or text[7] != 45:  # '-'
            return False
        year, month, day = _number(text, 0, 4), _number(text, 5, 2), _number(text, 8, 2)
        if year < 0 or month < 1 or month > 12 or day < 1 or day > _days_in_month(year, month):
            return False
        seconds = _days_from_civil(year, month, day) * 86400
        if separator:
            if text[10] != separator or text[13] != 58 or text[16] != 58:  # ':'
                return False
            hour, minute, second = _number(text, 11, 2), _number(text, 14, 2), _number(text, 17, 2)
            if hour < 0 or hour > 23 or minute < 0 or minute > 59 or second < 0 or second > 59:
                return False
            seconds += hour * 3600 + minute * 60 + second
        microseconds[row] = seconds * 1_000_000
    return True


@njit(inline="always")
def _number(text, start, digits) -> int:
    """The decimal number written at ``text[start:start + digits]``, or -1 where a character is not a digit."""
    value = 0
    for i in range(start, start + digits):
        digit = np.int64(text[i]) - 48
        if digit < 0 or digit > 9:
            return -1
        value = value * 10 + digit
    return value


@njit(inline="always")
def _days_in_month(year, month) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


@njit(inline="always")
def _days_from_civil(year, month, day) -> int:
    """Days since 1970-01-01 of a date of the proleptic Gregorian calendar (Howard Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400  # (floor division: Hinnant's C rounds toward zero, and adjusts for it)
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


# series.dt.<field>

FIELDS = ("year", "month", "day", "hour", "minute", "second", "day_of_week", "day_of_year", "quarter")
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_NAT = np.iinfo(np.int64).min


def datetime_field(series, field: str):
    """``series.dt.<field>`` as written: the callee of a rewritten field of datetimes."""
    return getattr(series.dt, field)


datetime_field.operator_name = "Series.dt"  # for explain_compilation


class CompiledDatetimeField:
    """``series.dt.<field>`` of a Series of naive numpy datetimes without missing values: pandas'
    int32 Series, with the Series' index and name."""

    def __call__(self, series, field: str):
        dtype = getattr(series, "dtype", None)
        if type(series) is not pd.Series or not isinstance(dtype, np.dtype) or dtype.kind != "M":
            raise Unsupported("a value other than a Series of naive numpy datetimes")
        if series.attrs or not series.flags.allows_duplicate_labels or not len(series):
            raise Unsupported("no rows, or attrs or flags (pandas carries them over)")
        unit = np.datetime_data(dtype)[0]
        if unit not in _PER_SECOND:
            raise Unsupported(f"datetimes in {unit}")
        values = np.empty(len(series), dtype=np.int32)
        if not _fields(series._values.view(np.int64), _PER_SECOND[unit], FIELDS.index(field), values):
            raise Unsupported("a missing value (pandas gives floats)")
        return series_of(values, series.index, series.name)

    @staticmethod
    def still_valid() -> bool:
        return True


@njit
def _fields(ticks, per_second, field, values) -> bool:
    """Fill ``values`` with field number ``field`` (of FIELDS) of the datetimes ``ticks`` (``per_second``
    a second); False at the first missing one."""
    for row in range(len(ticks)):
        if ticks[row] == _NAT:
            return False
        seconds = ticks[row] // per_second
        days, second_of_day = seconds // 86400, seconds % 86400
        if field >= 3 and field <= 5:
            values[row] = (second_of_day // 3600, second_of_day // 60 % 60, second_of_day % 60)[field - 3]
        elif field == 6:
            values[row] = (days + 3) % 7  # (1970-01-01 was a Thursday; Monday is 0)
        else:
            year, month, day = _civil_from_days(days)
            if field == 7:
                values[row] = days - _days_from_civil(year, 1, 1) + 1
            elif field == 8:
                values[row] = (month - 1) // 3 + 1
            else:
                values[row] = (year, month, day)[field]
    return True


@njit(inline="always")
def _civil_from_days(days):
    """(year, month, day) of the proleptic Gregorian calendar, ``days`` after 1970-01-01 (Hinnant's algorithm)."""
    shifted = days + 719468
    era = shifted // 146097  # (floor division, as above)
    day_of_era = shifted - era * 146097
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + 3 if shifted_month < 10 else shifted_month - 9
    return year_of_era + era * 400 + (month <= 2), month, day
