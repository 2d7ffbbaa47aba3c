"""``pd.to_datetime(series)`` of ISO 8601 text and ``series.dt.<field>`` (``willump.compile.datetimes``)
against pandas' own: the values, dtype, index and name pandas gives, text in every storage pandas keeps
it in (object, Python- and, with pyarrow installed, pyarrow-backed ``str``, chunked too), datetimes in
every unit; where pandas refuses the strings or reads them otherwise, the kernel refuses and the call
runs as written."""

import datetime

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import willump
from answers import answers, identity
from test_compile_kernels import hypothesis_settings
from willump.compile.datetimes import FIELDS, CompiledDatetimeField, CompiledToDatetime
from willump.compile.forms import Unsupported

try:
    import pyarrow as pa
except ImportError:
    pa = None

FORMS = ["%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"]
STORAGES = ["object", "str"] + (["pyarrow chunks"] if pa is not None else [])
SPOILED = [  # strings pandas refuses, reads as another format, or reads as missing
    "2017-13-07 09:30:38", "2017-02-29 09:30:38", "2017-11-31", "2017-11-07 24:00:00", "2017-11-07 09:60:00",
    "2017-11-07 09:30:60", "2017-11-07 09:30:38.5", " 2017-11-07 09:30:38", "2017/11/07 09:30:38", "",
    "2017-11-07 09:30", "２017-11-07", "2017-11-0７", None, np.nan, "NaT", "2017-11-07 09:30:38Z", "17-11-07",
]


def series_of(strings: list, storage: str, index=None, name="when") -> pd.Series:
    if storage == "object":
        return pd.Series(np.array(strings, dtype=object), index=index, name=name, dtype=object)
    if storage == "pyarrow chunks":  # several chunks, the last a slice
        half = len(strings) // 2
        chunks = [pa.array(strings[:half], pa.large_string()), pa.array(["x", *strings[half:]], pa.large_string())[1:]]
        array = pd.arrays.ArrowStringArray(pa.chunked_array(chunks, pa.large_string()))
        return pd.Series(array, index=index, name=name, dtype=pd.StringDtype("pyarrow", na_value=np.nan))
    return pd.Series(strings, index=index, name=name, dtype="str")


def kernel_or_refusal(series, **options) -> bool:
    """The kernel's Series is pandas' (True), or it refuses (False); where pandas raises it refuses."""
    try:
        expected = pd.to_datetime(series, **options)
    except Exception as error:
        note(f"pandas raises {error!r}")
        with pytest.raises(Unsupported):
            CompiledToDatetime()(series, **options)
        return False
    try:
        result = CompiledToDatetime()(series, **options)
    except Unsupported as why:
        note(f"refused: {why}")
        return False
    pd.testing.assert_series_equal(result, expected, check_exact=True)
    assert (result.index is series.index) == (expected.index is series.index)  # (a view through pandas' cache)
    assert result.index.is_(series.index) == expected.index.is_(series.index)
    return True


def written(moment: datetime.datetime, form: str) -> str:
    """``moment.strftime(form)`` with the year in four digits (strftime does not pad years before 1000)."""
    date = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    return date if form == "%Y-%m-%d" else date + form[8] + f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"


@st.composite
def timestamps(draw) -> list:
    """Strings of one form; some spoiled."""
    form = draw(st.sampled_from(FORMS))
    moments = draw(st.lists(st.datetimes(datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59)),
                            min_size=1, max_size=60))
    strings = [written(moment, form) for moment in moments]
    other_separator = strings[0].replace("T", " ") if "T" in strings[0] else strings[0].replace(" ", "T")
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        strings[draw(st.integers(0, len(strings) - 1))] = draw(st.sampled_from([*SPOILED, other_separator]))
    return strings


@hypothesis_settings(300)
@given(timestamps(), st.sampled_from(STORAGES), st.data())
def test_timestamps_are_read_as_pandas_reads_them(strings, storage, data):
    if storage != "object" and any(s is not None and not isinstance(s, str) for s in strings):
        strings = [None if s is not None and not isinstance(s, str) else s for s in strings]
    index = data.draw(st.sampled_from([None, "shuffled", "named"]))
    if index == "shuffled":
        index = pd.Index(data.draw(st.permutations(range(len(strings)))))
    elif index == "named":
        index = pd.RangeIndex(len(strings), name="row")
    series = series_of(strings, storage, index)
    options = data.draw(st.sampled_from([{}, {}, {"format": "%Y-%m-%d %H:%M:%S"}, {"format": "%Y-%m-%d"}, {"cache": False}]))
    kernel_or_refusal(series, **options)


def test_the_common_forms_compile():
    """The kernel answers (not only refuses) what people parse, in each storage."""
    for storage in STORAGES:
        for strings in (["2017-11-07 09:30:38", "2017-11-09 16:00:00"], ["2000-02-29", "1969-12-31"],
                        ["2017-11-07T09:30:38"], ["0001-01-01 00:00:00", "9999-12-31 23:59:59"]):
            assert kernel_or_refusal(series_of(strings, storage, index=[7, 3][: len(strings)])), (storage, strings)
    assert kernel_or_refusal(series_of(["2017-11-07 09:30:38"], "object"), format="%Y-%m-%d %H:%M:%S")


TICKS_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


@st.composite
def datetimes_of(draw) -> pd.Series:
    """A Series of datetimes in one unit, across the years it holds (before 1970 too), some missing."""
    unit = draw(st.sampled_from(list(TICKS_PER_SECOND)))
    limit = 9_223_372_035 if unit == "ns" else 253_402_300_799  # (years 1677-2262, else -9999 to 9999)
    moments = st.integers(-limit, limit) if unit == "ns" else st.integers(-377_705_116_800, limit) | st.sampled_from(
        [-62_167_219_200, -62_162_035_201, -62_162_035_200, -62_198_755_200])  # (0000-01-01, 03-01, -0001-01-01)
    seconds = draw(st.lists(moments, min_size=1, max_size=50))
    ticks = [s * TICKS_PER_SECOND[unit] + draw(st.integers(0, TICKS_PER_SECOND[unit] - 1)) for s in seconds]
    values = np.array(ticks, dtype=np.int64).astype(f"M8[{unit}]")
    if draw(st.integers(0, 5)) == 0:
        values[draw(st.integers(0, len(values) - 1))] = np.datetime64("NaT")
    index = draw(st.sampled_from([None, pd.Index(np.arange(len(values))[::-1]), pd.RangeIndex(len(values), name="r")]))
    return pd.Series(values, index=index, name=draw(st.sampled_from([None, "when"])))


@hypothesis_settings(300)
@given(datetimes_of(), st.sampled_from(FIELDS))
def test_fields_of_datetimes_are_pandas_fields(series, field):
    expected = getattr(series.dt, field)
    try:
        result = CompiledDatetimeField()(series, field)
    except Unsupported as why:
        note(f"refused: {why}")
        assert series.isna().any()
        return
    pd.testing.assert_series_equal(result, expected, check_exact=True)
    assert result.index is expected.index


def test_repeated_strings_pandas_caches_get_its_times_on_a_view_of_the_index():
    """Over 50 strings with repeats, pandas converts each once through a cache, and the result's index is
    another object than the Series' (renaming it must not rename the caller's): a view."""
    series = pd.Series(["2017-11-07 09:30:38"] * 60 + ["2018-01-01 00:00:00"])
    assert pd.to_datetime(series).index is not series.index
    for options in ({}, {"cache": False}, {"format": "%Y-%m-%d %H:%M:%S"}):  # (no ISO format given: no cache)
        assert kernel_or_refusal(series, **options)
    CompiledToDatetime()(series).index.name = "renamed"
    assert series.index.name is None


@pytest.mark.parametrize("rows", [50, 51, 70, 120, 5000, 5001, 6000])
@pytest.mark.parametrize("repeats", [1, 2, 3, 4])
def test_the_kernel_answers_as_pandas_where_it_caches_or_not(rows, repeats):
    """pandas' should_cache (over 50 strings, the first tenth at most 70% distinct), decided from the times."""
    strings = [written(datetime.datetime(2017, 11, 7) + datetime.timedelta(seconds=i // repeats), FORMS[0])
               for i in range(rows)]
    for storage in STORAGES:
        assert kernel_or_refusal(series_of(strings, storage))


CLICKS = pd.DataFrame({
    "click_time": ["2017-11-07 09:30:38", "2017-11-07 13:40:27", "2017-11-08 00:05:00", "2017-11-09 23:59:59"],
    "app": [3, 12, 3, 9],
})


def hour_and_day(df):
    X = df[["app"]].copy()
    when = pd.to_datetime(df["click_time"])
    X["hour"] = when.dt.hour
    X["day"] = when.dt.day
    X["weekday"] = pd.to_datetime(df["click_time"], format="%Y-%m-%d %H:%M:%S").dt.day_of_week
    return identity.predict(X)


@pytest.mark.parametrize("rows", [slice(None), slice(1, 2)])
def test_decorated_function_parses_timestamps(rows):
    f = willump.optimize(hour_and_day)
    result, expected = answers(f, CLICKS.iloc[rows])
    pd.testing.assert_frame_equal(result, expected, check_exact=True)
    sites = f.explain_compilation().query("operator in ['pandas.to_datetime', 'Series.dt']")
    assert len(sites) == 5 and (sites["status"] == "compiled").all(), sites.to_string()


def test_what_pandas_refuses_raises_as_written():
    f = willump.optimize(hour_and_day)
    spoiled = CLICKS.assign(click_time=["2017-11-07 09:30:38", "2017-02-30 10:00:00", "2017-11-08 00:05:00", "x"])
    assert answers(f, spoiled) is None  # (both raise the same error)
