"""``frame[columns]`` read only by compiled calls stays the frame's columns (``SelectedColumns``): the
model's kernel reads them where they are, and the answer is the one the function as written gives
(values, dtype, shape, exception), whatever runs in between or reads the selection."""

import inspect
import re
import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer, make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

import willump

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")
RNG = np.random.default_rng(0)
FRAME = pd.DataFrame(RNG.normal(size=(300, 5)), columns=["a", "b", "c", "d", "e"])
FRAME["count"] = RNG.integers(0, 5, 300)
FRAME["kind"] = pd.Categorical(RNG.choice(["x", "y", "z"], 300))
FEATURES = ["a", "b", "c", "count"]
Y = (FRAME["a"] + FRAME["count"] > 2).to_numpy()
BOOSTED = lgb.LGBMClassifier(n_estimators=30, verbose=-1).fit(FRAME[FEATURES], Y)
FOREST = RandomForestClassifier(n_estimators=20, random_state=0).fit(FRAME[FEATURES], Y)
NATIVE = HistGradientBoostingClassifier(max_iter=10, categorical_features="from_dtype").fit(FRAME[["a", "kind"]], Y)
LINEAR = LogisticRegression().fit(FRAME[FEATURES], Y)
SCALED = make_pipeline(StandardScaler(), LogisticRegression()).fit(FRAME[FEATURES], Y)


def boosted_direct(df):
    return BOOSTED.predict_proba(df[FEATURES])[:, 1]


def forest_bound(df):
    X = df[FEATURES]
    return FOREST.predict_proba(X)[:, 1]


def native_literal(df):
    X = df[["a", "kind"]]
    return NATIVE.predict_proba(X)[:, 1]


def scaled(df):
    return SCALED.predict_proba(df[FEATURES])[:, 1]


def linear(df):  # (a kernel that reads frames, not kept columns: given the selected frame)
    return LINEAR.predict_proba(df[FEATURES])[:, 1]


def changed_in_between(df):
    X = df[FEATURES]
    df["a"] = 0.0  # (the selection was taken before: the model reads the old values)
    return FOREST.predict_proba(X)[:, 1]


def read_by_python(df):
    X = df[FEATURES]
    return FOREST.predict_proba(X)[:, 1] + X["a"].to_numpy()


def read_in_a_comprehension(df):  # (read at any time: never kept)
    X = df[FEATURES]
    return [model.predict_proba(X)[:, 1] for model in (FOREST,)][0]


def selection_of_a_selection(df):
    X = df[FEATURES]
    return BOOSTED.predict_proba(X[FEATURES])[:, 1]


BOOSTER = BOOSTED.booster_


def best_iteration(df):  # (an attribute read as a value runs nothing kept: the selection stays columns)
    return BOOSTER.predict(df[FEATURES], num_iteration=BOOSTER.best_iteration)


def attribute_missing(df):  # (raising where the function as written raises)
    return BOOSTER.predict(df[FEATURES], num_iteration=BOOSTER.best_iterations)


MIXED = FEATURES + ["kind"]
ENCODED = make_pipeline(ColumnTransformer([
    ("scaled", StandardScaler(), ["a", "b"]), ("kinds", OneHotEncoder(sparse_output=False, handle_unknown="ignore"), ["kind"]),
], remainder="passthrough"), LogisticRegression()).fit(FRAME[MIXED], Y)
CATEGORIES = make_pipeline(make_column_transformer(
    (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan), ["kind"]),
    remainder="passthrough", verbose_feature_names_out=False,
), HistGradientBoostingClassifier(max_iter=10, categorical_features=["kind"])).set_output(transform="pandas").fit(FRAME[MIXED], Y)


def column_transformer(df):  # (its branches read the selection's columns where the frame has them)
    return ENCODED.predict_proba(df[MIXED])[:, 1]


def column_transformer_frames(df):
    return CATEGORIES.predict_proba(df[MIXED])[:, 1]


MISSING = FEATURES + ["zz"]


def missing_column(df):
    return FOREST.predict_proba(df[MISSING])[:, 1]


ROWS = [FRAME, FRAME.iloc[[7]], FRAME.iloc[::-1], FRAME.iloc[100:140]]


def assert_answers_as_written(optimized, function, inputs: list) -> None:
    """The same answers (values to the bit, dtype, shape) or the same exception, input by input."""
    for rows in inputs:
        ours, theirs = answers(optimized, rows), answers(function, rows)
        if isinstance(theirs, Exception):
            assert type(ours) is type(theirs) and str(ours) == str(theirs)
        else:
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and ours.tobytes() == theirs.tobytes()


def answers(function, rows):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return function(rows.copy())
        except Exception as error:
            return error


NUMBERS, COUNTS = ["a", "b", "c"], ["count"]
NOT_THERE = ["count", "nope"]


def summed_names(df):  # (Kaggle's df[NUMERIC + CATEGORICAL])
    return LINEAR.predict_proba(df[NUMBERS + COUNTS])[:, 1]


def summed_names_raising(df):  # (a column the frame does not have: pandas' KeyError as written)
    return LINEAR.predict_proba(df[NUMBERS + NOT_THERE])[:, 1]


@pytest.mark.parametrize("function", [summed_names, summed_names_raising])
def test_a_sum_of_column_lists_is_a_selection(function):
    optimized = willump.optimize(function)
    assert_answers_as_written(optimized, function, ROWS)
    table = optimized.explain_compilation().set_index("call")
    row = table.loc[f"df[NUMBERS + {'COUNTS' if function is summed_names else 'NOT_THERE'}]"]
    assert row["operator"] == "getitem" and row["calls"] == len(ROWS)
    assert row["compiled_calls"] == len(ROWS) * (function is summed_names)


@pytest.mark.parametrize("function, kept", [
    (boosted_direct, True), (forest_bound, True), (native_literal, True), (scaled, True), (linear, True),
    (changed_in_between, True), (read_by_python, False), (read_in_a_comprehension, False),
    (selection_of_a_selection, True), (missing_column, True), (best_iteration, True), (attribute_missing, True),
    (column_transformer, True), (column_transformer_frames, True),
])
def test_selections_give_the_answers_as_written(function, kept):
    optimized = willump.optimize(function)
    others = [FRAME.rename(columns={"a": "A"}), FRAME.assign(b=FRAME["b"].astype(np.float32)),
              pd.concat([FRAME, FRAME[["a"]]], axis=1), pd.concat({"x": FRAME}, axis=1), FRAME.iloc[:0]]
    assert_answers_as_written(optimized, function, ROWS + others)  # (a name missing or repeated, two levels, no rows)
    table = optimized.explain_compilation()
    selections = table[table["call"].str.fullmatch(r"\w+\[(FEATURES|MISSING|MIXED|\['a', 'kind'\])\]")]  # (frame[columns])
    written = len(re.findall(r"\w+\[(FEATURES|MISSING|MIXED|\[.a., .kind.\])\]", inspect.getsource(function)))
    assert len(selections) == written and bool(selections["kept"].all()) is kept, table
    if function not in (missing_column, attribute_missing):
        models = table[table["operator"].str.contains("predict", na=False)]
        assert models["status"].str.startswith("compiled").all() and (models["compiled_calls"] >= len(ROWS)).all(), table


@pytest.mark.parametrize("function, selected", [(forest_bound, FEATURES), (column_transformer, MIXED)])
def test_a_selection_kept_costs_less_than_the_frame_it_stands_for(function, selected):
    """The selection's frame is never built when the kernels read the columns."""
    optimized = willump.optimize(function)
    optimized(FRAME.iloc[[3]])
    built = []
    original = pd.DataFrame.__getitem__

    def counted(frame, key):
        built.append(key)
        return original(frame, key)

    pd.DataFrame.__getitem__ = counted
    try:
        optimized(FRAME.iloc[[3]])
        assert built == []
        function(FRAME.iloc[[3]])
        assert built[0] == selected
    finally:
        pd.DataFrame.__getitem__ = original


TEXT = "words"  # (a name holding one column's name: the selection stays pandas' own, as text programs read it)
WORDS = FRAME.assign(words=np.where(FRAME["a"] > 0, "good day", "bad day"))
VECTORIZER = TfidfVectorizer().fit(WORDS[TEXT])
READER = LogisticRegression().fit(VECTORIZER.transform(WORDS[TEXT]), Y)


def text_by_name(df):
    return READER.predict_proba(VECTORIZER.transform(df[TEXT]))[:, 1]


def test_a_name_holding_one_column_is_not_a_kept_selection():
    optimized = willump.optimize(text_by_name)
    np.testing.assert_array_equal(optimized(WORDS), text_by_name(WORDS))
    calls = optimized.explain_compilation()["call"].tolist()
    assert "df[TEXT]" not in calls, calls


def selection_as_a_receiver(df):
    return BOOSTED.predict_proba(df[["a", "b", "c"]].assign(count=df["count"]))[:, 1]


def selection_copied(df):
    X = df[FEATURES].copy()
    X["a"] = X["a"].clip(-1, 1)
    return FOREST.predict_proba(X)[:, 1]


def dropped(df):
    return BOOSTED.predict_proba(df.drop(columns=["d", "e", "kind"]))[:, 1]


def dropped_by_axis(df):
    X = df.drop(["d", "e", "kind"], axis=1)
    return FOREST.predict_proba(X)[:, 1]


def dropped_and_copied(df):
    X = df.drop(columns=["d", "e", "kind"]).copy()
    return FOREST.predict_proba(X)[:, 1]


@pytest.mark.parametrize("function", [selection_copied, dropped_and_copied])
def test_frames_made_for_python_are_pandas_own(function):
    """A selection or drop read as a frame (its copy) is built as pandas builds it, without pandas' ~250 us
    of checks on one row; the answers are the ones as written."""
    optimized = willump.optimize(function)
    others = [FRAME.rename(columns={"a": "A"}), FRAME.drop(columns=["e"]), FRAME.iloc[:0]]
    assert_answers_as_written(optimized, function, ROWS + others)
    table = optimized.explain_compilation()
    assert "DataFrame.copy" in table["operator"].tolist(), table.to_string()
    assert (table["status"].str.startswith("compiled") & (table["compiled_calls"] >= len(ROWS))).all(), table.to_string()
    made = table["call"].str.fullmatch(r"df\[(FEATURES|\[[^\]]*\])\]|df\.drop\(.*\)")  # (the frame made for Python)
    assert made.any(), table.to_string()


def assigned_for_the_model(df):  # (the frame assign makes, read only by the model: its columns)
    X = df[["a", "b", "c"]].assign(count=df["count"] + 0)
    return BOOSTED.predict_proba(X)[:, 1]


def concatenated_for_the_model(df):
    extra = pd.DataFrame({"c": df["c"] * 1.0, "count": df["count"] + 0})
    return FOREST.predict_proba(pd.concat([df[["a", "b"]], extra], axis=1))[:, 1]


def concatenated_and_assigned(df):
    X = pd.concat([df[["a", "b"]], df[["c"]]], axis=1).assign(count=df["count"] * 1)
    return BOOSTED.predict_proba(X)[:, 1]


@pytest.mark.parametrize("function", [assigned_for_the_model, concatenated_for_the_model, concatenated_and_assigned,
                                      selection_as_a_receiver, dropped, dropped_by_axis])
def test_frames_put_together_for_a_model_stay_columns(function):
    """``assign``, ``pd.concat(axis=1)`` and ``drop(columns=...)`` read only by a model's kernel hand it
    their columns (the frame is never built); the answers are the ones as written, exceptions included."""
    optimized = willump.optimize(function)
    shifted = FRAME.set_axis(FRAME.index + 1000)
    others = [FRAME.rename(columns={"a": "A"}), FRAME.assign(count=FRAME["count"].astype(np.float32)), FRAME.iloc[:0],
              shifted, FRAME.iloc[[3, 3]], FRAME.astype({"c": "Float64"})]
    assert_answers_as_written(optimized, function, ROWS + others)
    table = optimized.explain_compilation()
    together = table[table["operator"].isin(["DataFrame.assign", "pandas.concat", "DataFrame.drop", "getitem"])]
    assert len(together) and together["kept"].all(), table.to_string()
    optimized(FRAME.iloc[[3]])
    built = []
    original = pd.DataFrame.__init__

    def counted(frame, *args, **kwargs):
        built.append(args[:1])
        original(frame, *args, **kwargs)

    pd.DataFrame.__init__ = counted
    try:
        optimized(FRAME.iloc[[3]])
        assert built == [], built  # (_from_mgr builds frames through __init__ too)
    finally:
        pd.DataFrame.__init__ = original
