"""``series.replace(...)`` gives pandas' own Series (values, dtype, the str storage, missing values, a
view of the index, name) for text and numbers, in every spelling: property-tested against pandas."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import willump
from sklearn.ensemble import RandomForestClassifier
from willump.compile.forms import Unsupported
from willump.compile.replace import CompiledFrameReplace, CompiledReplace

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
        keys, replacements = NUMBERS + [np.float64(2.5), "x", True, 2**60 + 1], NUMBERS + [np.int64(3), 2**60, "big", True, None]
    else:
        series = pd.Series(draw(st.lists(st.sampled_from([0, 1, 7, -3, 2**62]), min_size=rows, max_size=rows)),
                           dtype=np.int64)
        keys, replacements = [0, 1, 7, np.int64(-3), 1.0, 2**62, np.inf, 0.5, "x"], [5, -1, np.int64(9), 2**63, 2.5, np.nan, "x"]
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


def test_an_int_column_a_float_is_put_in_becomes_float64_as_in_pandas():
    """Home Credit's anomaly: ``df["DAYS_EMPLOYED"].replace({365243: np.nan})`` makes the int64 column float64."""
    days = pd.Series([-100, 365243, -3000, 2**60 + 1, 2**53 + 2, 2**62], name="DAYS_EMPLOYED")
    for args in [({365243: np.nan},), (365243, np.nan), ([365243, -100], [np.nan, 7]), ({-3000: 0, 365243: 0.5},),
                 ([365243, 2**53 + 2], [1.5, 7]), (2**62, 1.5), ([365243, 2**60 + 1], [0.5, 1])]:  # (keys a double holds)
        assert assert_replaced_as_pandas(days, args), args
    for args in [(365243, 1e19), (365243, -1e19)]:  # (pandas raises, or makes it object)
        assert not assert_replaced_as_pandas(days, args), args
    frame = pd.DataFrame({"DAYS_EMPLOYED": days, "ratio": [0.5, 1.0, 2.0, 3.0, 4.0, 5.0]})
    answer = CompiledFrameReplace()(frame, {365243: np.nan})
    pd.testing.assert_frame_equal(answer, frame.replace({365243: np.nan}), check_exact=True)
    assert layout(answer) == layout(frame.replace({365243: np.nan}))


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


COLUMN_KINDS = {
    "float64": lambda rows, d: np.array(d(st.lists(st.sampled_from(NUMBERS + [-999.0]), min_size=rows, max_size=rows)), float),
    "int64": lambda rows, d: np.array(d(st.lists(st.sampled_from([0, 1, 7, -999, 2**62]), min_size=rows, max_size=rows))),
    "bool": lambda rows, d: np.array(d(st.lists(st.booleans(), min_size=rows, max_size=rows))),
    "float32": lambda rows, d: np.array(d(st.lists(st.sampled_from([0.0, 2.5, np.inf, np.nan]), min_size=rows, max_size=rows)),
                                        np.float32),
    "str": lambda rows, d: pd.array(d(st.lists(st.sampled_from(WORDS + ["?", None]), min_size=rows, max_size=rows)), "str"),
    "object": lambda rows, d: np.array(d(st.lists(st.sampled_from(WORDS + ["?", None, np.nan]), min_size=rows, max_size=rows)),
                                       object),
    "datetime": lambda rows, d: pd.date_range("2020-01-01", periods=rows).to_numpy(),
    "Int64": lambda rows, d: pd.array(d(st.lists(st.sampled_from([0, 1, None]), min_size=rows, max_size=rows)), "Int64"),
}
FRAME_KEYS = NUMBERS + [-999, "?", "Dr", "", "Mr", 1, -999.0] * 2 + [True, None, 2**62]
FRAME_REPLACEMENTS = NUMBERS + ["Rare", "", 0, -1, None, True, 2**63]


@st.composite
def frame_replaces(draw):
    """(frame, args of replace): columns of several dtypes, in one block per dtype (pandas' constructor) or a
    block per column (set one by one), maybe a slice of a longer frame."""
    rows = draw(st.integers(1, 6))
    common = ["float64", "float64", "int64", "str", "object", "bool"]  # (the others rarer: mostly left as they are)
    kinds = draw(st.lists(st.sampled_from(common * 3 + sorted(COLUMN_KINDS)), min_size=1, max_size=6))
    columns = {f"c{i}": COLUMN_KINDS[kind](rows, draw) for i, kind in enumerate(kinds)}
    if draw(st.booleans()):
        frame = pd.DataFrame(columns, index=draw(st.sampled_from([None, [f"r{i}" for i in range(rows)]])))
    else:
        frame = pd.DataFrame(index=range(rows))
        for name, values in columns.items():
            frame[name] = values
    if draw(st.booleans()):
        frame = pd.concat([frame, frame]).iloc[::2]
    if draw(st.integers(0, 2)) == 0:  # (a dict by column: each column's own Series.replace, set in turn)
        names = draw(st.lists(st.sampled_from(list(frame.columns) + ["absent"]), min_size=1, max_size=3, unique=True))
        spelling = draw(st.sampled_from(["nested", "keys", "values", "both"]))
        keys, news = st.sampled_from(FRAME_KEYS), st.sampled_from(FRAME_REPLACEMENTS)
        if spelling == "nested":
            return frame, ({n: draw(st.dictionaries(keys, news, min_size=1, max_size=3)) for n in names},)
        if spelling == "keys":
            return frame, ({n: draw(keys) for n in names}, draw(news))
        if spelling == "values":
            return frame, (draw(keys), {n: draw(news) for n in names})
        return frame, ({n: draw(keys) for n in names}, {n: draw(news) for n in names})
    return frame, draw(spellings(FRAME_KEYS, FRAME_REPLACEMENTS))


def layout(frame: pd.DataFrame) -> list:
    return [(str(b.dtype), b.mgr_locs.as_array.tolist()) for b in frame._mgr.blocks]


def column_memory(frame: pd.DataFrame) -> list:
    return [np.asarray(frame._get_column_array(i)) for i in range(frame.shape[1])]


@settings(SETTINGS, max_examples=600)
@given(frame_replaces())
def test_frames_replaced_as_pandas(case):
    """Values, dtypes, storage, the blocks pandas makes (consolidated after a list's replace), and which
    columns share the frame's memory (a block holding none of the keys, or matching none)."""
    frame, args = case
    expected, error, warned = _pandas(frame, args)
    try:
        answer = CompiledFrameReplace()(frame, *args)
    except Unsupported:
        return
    assert error is None and not warned, (error, warned)
    pd.testing.assert_frame_equal(answer, expected, check_exact=True, check_index_type=True, check_column_type=True)
    assert layout(answer) == layout(expected)
    assert [type(answer[c].array) for c in answer] == [type(expected[c].array) for c in expected]
    for mine, theirs, original in zip(column_memory(answer), column_memory(expected), column_memory(frame)):
        assert np.shares_memory(mine, original) == np.shares_memory(theirs, original)
        if theirs.dtype == object:
            assert [type(v) for v in mine] == [type(v) for v in theirs]
        elif theirs.dtype.kind == "f":
            assert mine.tobytes() == theirs.tobytes()


def test_the_frame_spellings_notebooks_use_are_compiled():
    """``X.replace([np.inf, -np.inf], np.nan)`` over ratios beside ints, bools and text; ``replace("?", np.nan)``
    where no text holds it; a dict of titles."""
    frame = pd.DataFrame({"ratio": [1.0, np.inf, -np.inf], "count": [1, 2, 3], "flag": [True, False, True],
                          "title": ["Mr", "Dr", "Mrs"]})
    frame["late"] = [0.5, np.inf, 2.0]
    for args in [([np.inf, -np.inf], np.nan), ("?", np.nan), ({"Dr": "Rare"},), (np.inf, 0.0), (-999, np.nan),
                 ({"title": {"Mr": 0, "Mrs": 1, "Dr": 2}, "count": {1: 10}},), ({"ratio": np.inf}, 0.0),
                 (np.inf, {"ratio": 0.0, "late": -1.0})]:
        answer = CompiledFrameReplace()(frame, *args)
        pd.testing.assert_frame_equal(answer, frame.replace(*args), check_exact=True)
        assert layout(answer) == layout(frame.replace(*args)), args


@pytest.mark.parametrize("args, options", [
    (({"title": {"Dr": "Rare"}, "count": 3},), {}),  # (nested and flat mixed: pandas raises)
    (({"ratio": {np.inf: 0.0}},), {"inplace": True}),
    ((-999, np.nan), {"inplace": True}),
    ((1, np.nan), {}),  # (an int matched and NaN put: pandas splits the block and makes the column float64)
    (([1], {"count": 100}), {}),  # (a list and a dict: pandas reads the dict's keys as the values)
    (("Dr", None), {}),
])
def test_other_frame_replaces_run_as_written(args, options):
    frame = pd.DataFrame({"ratio": [1.0, np.inf], "count": [1, 2], "other": [3, 4], "title": ["Mr", "Dr"]})
    with pytest.raises(Unsupported):
        CompiledFrameReplace()(frame, *args, **options)


PASSENGERS = pd.DataFrame({
    "PassengerId": range(8), "Name": ["a"] * 8, "Ticket": ["t"] * 8, "Cabin": [None, "C85"] * 4,
    "Pclass": [3, 1, 3, 1, 3, 3, 1, 2], "Sex": ["male", "female", "female", "female", "male", "male", "male", "female"],
    "Age": [22.0, 38.0, np.nan, 35.0, 35.0, np.nan, 54.0, 2.0], "Fare": [7.25, 71.28, 7.92, 53.1, 8.05, 8.46, 51.86, 21.08],
    "Embarked": ["S", "C", "S", None, "S", "Q", "S", "S"],
})
DROPPED = ["PassengerId", "Name", "Ticket", "Cabin"]
SEXES, PORTS = {"male": 0, "female": 1}, {"S": 0, "C": 1, "Q": 2}
FOREST = RandomForestClassifier(n_estimators=10, random_state=0).fit(
    PASSENGERS.drop(columns=DROPPED).replace({"Sex": SEXES, "Embarked": PORTS}).fillna({"Age": 30.0, "Embarked": 0}),
    [0, 1, 1, 1, 0, 0, 0, 1])


def guarded_forest(df):
    if len(df) == 0:
        return np.array([], dtype=np.int64)
    X = df.drop(columns=DROPPED)
    X = X.replace({"Sex": {"male": 0, "female": 1}, "Embarked": {"S": 0, "C": 1, "Q": 2}})
    X = X.fillna({"Age": 30.0, "Embarked": 0})
    return FOREST.predict(X)


def test_a_titanic_cell_replacing_text_by_numbers_is_compiled_to_the_forest():
    """Numbers put in text columns by a dict of columns (object columns), filled by a dict, read by the
    forest as scikit-learn converts them: every call compiled, the answers the cell's."""
    optimized = willump.optimize(guarded_forest)
    for rows in [PASSENGERS] + [PASSENGERS.iloc[[i]] for i in range(len(PASSENGERS)) if i != 3]:
        np.testing.assert_array_equal(optimized(rows), guarded_forest(rows), strict=True)
    table = optimized.explain_compilation()
    assert (table.status == "compiled").all(), table[["call", "status"]].to_string()
    assert set(table.operator) >= {"DataFrame.drop", "DataFrame.replace", "DataFrame.fillna",
                                   "RandomForestClassifier.predict"}
    for function in (guarded_forest, optimized):  # (a row whose only port is missing keeps a str column: pandas warns)
        with pytest.warns(Warning, match="not supported as a fill value") as caught:
            function(PASSENGERS.iloc[[3]])
        assert caught[0].filename == __file__
