"""A LightGBM model trained on pandas categorical columns is given the matrix LightGBM builds
(``_data_from_pandas``: each category's code in the training categories, NaN for any other) without
pandas' ``set_categories``: property-tested against LightGBM's own conversion, then end to end."""

import warnings
from unittest import mock

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightgbm.basic import _data_from_pandas

import willump
from willump.compile import trees as trees_kernel
from willump.compile.trees import ModelCategories

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
NUMBER_DTYPES = [np.float64, np.float32, np.int8, np.int64, np.uint16, np.bool_]
WORDS = ["a", "b", "c", "dd", "é", "", "x y", "1"]
INTS = [0, 1, 2, 7, -3, 2**40]


def _categories_dtype(draw, kind):
    if kind is str:
        return draw(st.sampled_from([object, "str", pd.StringDtype("python")]))
    return draw(st.sampled_from([np.int64, np.int32, np.uint8])) if kind is int else np.float64


@st.composite
def categorical_column(draw, rows: int):
    """(training categories, the column): values of the training kind or others, missing ones,
    categories inferred, in another order or with unseen ones, ordered or not."""
    kind = draw(st.sampled_from([str, int, float]))
    pool = {str: WORDS, int: INTS, float: [0.5, 1.0, -2.25]}[kind]
    trained = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool), unique=True))
    if kind is int and 2**40 in trained and draw(st.booleans()):
        trained.remove(2**40)
    seen = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=len(pool), unique=True))
    if kind is int:
        seen = [v for v in seen if 0 <= v < 256] or [0]  # (categories of uint8 too)
    values = draw(st.lists(st.sampled_from(seen + [None]), min_size=rows, max_size=rows))
    dtype = _categories_dtype(draw, kind)
    categories = pd.Index(draw(st.permutations(seen)), dtype=dtype)
    ordered = draw(st.booleans())
    if draw(st.booleans()):
        column = pd.Series(values, dtype=object).astype(pd.CategoricalDtype(categories, ordered=ordered))
    else:  # (as astype("category") infers them: sorted, of the values' dtype)
        column = pd.Series([v for v in values if v is not None] or seen[:1], dtype=dtype).astype("category")
    return sorted(trained, key=str), column


@st.composite
def frames(draw):
    rows = draw(st.integers(1, 12))
    columns, trained = {}, []
    for i in range(draw(st.integers(0, 3))):
        dtype = draw(st.sampled_from(NUMBER_DTYPES))
        values = draw(st.lists(st.integers(-100, 100), min_size=rows, max_size=rows))
        columns[f"n{i}"] = np.array(values).astype(dtype)
    for i in range(draw(st.integers(1, 3))):
        categories, column = draw(categorical_column(rows))
        if len(column) != rows:
            column = column.iloc[np.arange(rows) % len(column)].reset_index(drop=True)
        columns[f"c{i}"], trained = column, trained + [categories]
    names = draw(st.permutations(list(columns)))
    return pd.DataFrame({name: columns[name] for name in names}), trained


@SETTINGS
@given(frames())
def test_the_codes_are_those_of_lightgbms_own_conversion(drawn):
    frame, trained = drawn
    ours = ModelCategories(trained).matrix(frame, frame.shape[1])
    theirs = _data_from_pandas(frame, "auto", "auto", trained)[0].astype(np.float64)
    categorical = [c for c in frame if isinstance(frame[c].dtype, pd.CategoricalDtype)]
    plain = all(_matched_kinds(frame[c].cat.categories, t) for c, t in zip(categorical, trained))
    if ours is None:
        assert not plain, "a str or int categorical column went through pandas"
    else:
        assert ours.dtype == np.float64 and ours.shape == theirs.shape
        assert np.array_equal(ours, theirs, equal_nan=True)


def _matched_kinds(categories: pd.Index, trained: list) -> bool:
    values = categories.tolist()
    if all(type(v) is str for v in trained):
        return (categories.dtype == object or isinstance(categories.dtype, pd.StringDtype)) and all(
            type(v) is str for v in values)
    return all(type(v) is int for v in trained) and categories.dtype.kind in "iu"


def test_a_frame_of_other_columns_or_categories_is_left_to_lightgbm():
    trained = [["a", "b"]]
    model_categories = ModelCategories(trained)
    categorical = pd.Series(["a", "b"], dtype="category")
    assert model_categories.matrix(pd.DataFrame({"c": categorical, "n": [1.0, 2.0]}), 2) is not None
    for frame in (pd.DataFrame({"c": categorical, "n": pd.array([1, 2], dtype="Int64")}),  # nullable numbers
                  pd.DataFrame({"c": categorical, "n": ["1", "2"]}),  # text LightGBM refuses
                  pd.DataFrame({"c": categorical, "d": categorical}),  # more categorical columns than trained
                  pd.DataFrame([["a", 1.0]], columns=["c", "c"]).astype({"c": "category"})):
        assert model_categories.matrix(frame, 2) is None
    assert ModelCategories([["a", 1]]).matrix(pd.DataFrame({"c": categorical}), 1) is None  # (mixed kinds)


def _fitted():
    rng = np.random.default_rng(5)
    n = 600
    frame = pd.DataFrame({"amount": rng.normal(size=n), "city": rng.choice(["paris", "rome", "oslo", "lima"], n),
                          "device": rng.choice([3, 5, 8], n), "visits": rng.integers(0, 20, n)})
    y = ((frame.amount + (frame.city == "rome") - (frame.device == 5)) > 0.3).astype(int)
    for column in ("city", "device"):
        frame[column] = frame[column].astype("category")
    model = lgb.LGBMClassifier(n_estimators=25, num_leaves=7, min_child_samples=5, min_data_per_group=5,
                               cat_smooth=1, verbose=-1).fit(frame, y)
    return model, frame


MODEL, TRAIN = _fitted()
CATEGORICAL = ["city", "device"]


def score(frame):
    X = frame.copy()
    for column in CATEGORICAL:
        X[column] = X[column].astype("category")
    return MODEL.predict_proba(X)[:, 1]


def test_a_notebooks_categorical_cast_then_lightgbm_is_compiled_to_the_bit():
    raw = TRAIN.astype({"city": object, "device": np.int64})
    unseen = raw.iloc[:5].assign(city=["paris", "berlin", None, "oslo", "lima"], device=[3, 4, 5, 8, 9])
    optimized = willump.optimize(score)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        optimized(raw.iloc[:3])
        with mock.patch.object(trees_kernel, "_data_from_pandas", side_effect=AssertionError("through pandas")):
            for frame in (raw, raw.iloc[[4]], raw.iloc[[9]], unseen, unseen.iloc[[1]]):
                expected = score(frame)
                answer = optimized(frame)
                assert answer.dtype == expected.dtype and np.array_equal(answer, expected)
    assert "compiled" in set(optimized.explain_compilation().status)
