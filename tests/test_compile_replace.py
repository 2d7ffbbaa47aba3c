"""``series.replace(...)`` gives pandas' own Series (values, dtype, the str storage, missing values, a
view of the index, name) for text and numbers, in every spelling: property-tested against pandas."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import willump
from willump.compile.forms import Unsupported
from willump.compile.replace import CompiledReplace

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
WORDS = ["Dr", "Mr", "Mrs", "", "é", "Rare"]
NUMBERS = [0.0, -0.0, 1.0, 2.5, np.inf, -np.inf, np.nan, 7]
STR_DTYPES = [object, "str", pd.StringDtype("python", na_value=np.nan)]


@st.composite
def spellings(draw, keys, replacements):
    """(args of replace): a dict, a key and a value, keys and a value, or keys and values."""
    pairs = draw(st.lists(st.tuples(st.sampled_from(keys), st.sampled_from(replacements)), min_size=1, max_size=4))
    spelling = draw(st.sampled_from(["dict", "scalar", "list", "lists"]))
    if spelling == "dict":
        return (dict(pairs),)
    if spelling == "scalar":
        return pairs[0]
    if spelling == "list":
        return [key for key, _ in pairs], pairs[0][1]
    return [key for key, _ in pairs], [new for _, new in pairs]


@st.composite
def text_replaces(draw):
    rows = draw(st.integers(1, 8))
    values = draw(st.lists(st.sampled_from(WORDS + [None, np.nan]), min_size=rows, max_size=rows))
    dtype = draw(st.sampled_from(STR_DTYPES))
    series = pd.Series(values, dtype=dtype, name=draw(st.sampled_from([None, "title"])),
                       index=draw(st.sampled_from([None, [f"p{i}" for i in range(rows)]])))
    replacements = WORDS + ["Other", 0, 1, 2.5] + draw(st.sampled_from([[], [None], [np.nan], [True]]))
    return series, draw(spellings(WORDS + ["Rev"] + draw(st.sampled_from([[], [1], [np.nan]])), replacements))


@st.composite
def number_replaces(draw):
    rows = draw(st.integers(1, 8))
    if draw(st.booleans()):
        series = pd.Series(draw(st.lists(st.sampled_from(NUMBERS), min_size=rows, max_size=rows)), dtype=np.float64)
        keys, replacements = NUMBERS + [np.float64(2.5)], NUMBERS + [np.int64(3), 2**60, "big", True, None]
    else:
        series = pd.Series(draw(st.lists(st.sampled_from([0, 1, 7, -3, 2**62]), min_size=rows, max_size=rows)),
                           dtype=np.int64)
        keys, replacements = [0, 1, 7, np.int64(-3), 1.0, 2**62], [5, -1, np.int64(9), 2**63, 2.5, np.nan, "x"]
    return series, draw(spellings(keys, replacements))


def _pandas(series, args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return series.replace(*args), None, caught
        except Exception as error:  # noqa: BLE001
            return None, error, caught


def assert_replaced_as_pandas(series, args):
    expected, error, warned = _pandas(series, args)
    try:
        answer = CompiledReplace()(series, *args)
    except Unsupported:
        return False
    assert error is None and not warned, (error, warned)
    pd.testing.assert_series_equal(answer, expected, check_exact=True, check_index_type=True)
    assert answer.dtype == expected.dtype and type(answer.array) is type(expected.array)
    if expected.dtype == object:
        assert [type(v) for v in answer] == [type(v) for v in expected]
    elif expected.dtype.kind == "f":
        assert answer.to_numpy().tobytes() == expected.to_numpy().tobytes()  # (-0.0, NaN)
    assert answer.index is not series.index and answer.index.equals(series.index)
    assert np.shares_memory(np.asarray(answer.index), np.asarray(series.index)) == np.shares_memory(
        np.asarray(expected.index), np.asarray(series.index))
    return True


@SETTINGS
@given(text_replaces())
def test_text_replaced_as_pandas(case):
    series, args = case
    compiled = assert_replaced_as_pandas(series, args)
    pairs = list(args[0].items()) if len(args) == 1 else list(zip(args[0], args[1])) if type(args[1]) is list else [
        (k, args[1]) for k in (args[0] if type(args[0]) is list else [args[0]])]
    plain = all(type(k) is str and (type(v) is str or type(v) in (int, float) and v == v) for k, v in pairs)
    assert compiled or not plain or (type(args[0]) is list and type(args[1]) is list and len(args[0]) != len(args[1]))


@SETTINGS
@given(number_replaces())
def test_numbers_replaced_as_pandas(case):
    assert_replaced_as_pandas(*case)


def test_the_float_spellings_notebooks_use_are_compiled():
    ratios = pd.Series([1.0, np.inf, -np.inf, np.nan, -0.0], index=[3, 1, 4, 1, 5], name="ratio")
    for args in [([np.inf, -np.inf], np.nan), ([np.inf, -np.inf], 0), ({np.inf: 1e9}, ), (np.nan, 0.0), (0, 1)]:
        assert assert_replaced_as_pandas(ratios, args), args


def titles(df):
    title = df["Name"].str.extract(r" ([A-Za-z]+)\.", expand=False)
    title = title.replace(["Dr", "Rev", "Col", "Major", "Capt", "Countess", "Lady", "Sir", "Jonkheer", "Don"], "Rare")
    title = title.replace({"Mlle": "Miss", "Ms": "Miss", "Mme": "Mrs"})
    return title.map({"Mr": 1, "Miss": 2, "Mrs": 3, "Master": 4, "Rare": 5}).fillna(0)


def test_a_notebooks_title_cell_is_compiled_to_pandas_answer():
    people = pd.DataFrame({"Name": ["Braund, Mr. Owen", "Cumings, Mrs. John", "Heikkinen, Miss. Laina", "Futrelle, Dr. Jacques",
                                    "Aubart, Mme. Leontine", "Nobody"]})
    optimized = willump.optimize(titles)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        for rows in (people, people.iloc[[3]], people.iloc[[4]], people.iloc[[5]]):
            pd.testing.assert_series_equal(optimized(rows), titles(rows), check_exact=True)
    table = optimized.explain_compilation()
    replaces = table[table.call.str.contains(r"title\.replace")]
    assert len(replaces) == 2 and (replaces.status == "compiled").all(), replaces.status.tolist()


@pytest.mark.parametrize("series, args, options", [
    (pd.Series(["a"]), ("a", "b"), {"regex": True}),
    (pd.Series(["a"]), ("a", "b"), {"inplace": True}),
    (pd.Series(["a"], dtype="string"), ("a", "b"), {}),  # (NA-valued: its own rules)
    (pd.Series(["a"] * 300), ("a", "b"), {}),  # (more rows: pandas compares them faster)
    (pd.Series([True, False]), (True, False), {}),
    (pd.Series([1.0]), ({1.0: 2.0}, 5), {}),  # (pandas raises)
])
def test_other_replaces_run_as_written(series, args, options):
    with pytest.raises(Unsupported):
        CompiledReplace()(series, *args, **options)
