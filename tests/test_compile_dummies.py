"""``pd.get_dummies`` of a DataFrame (``willump.compile.dummies``) gives pandas' own frame: columns, dtypes,
blocks, index; where pandas raises the kernel refuses (the call then raises as written). Checked on random
frames and options against pandas, and inside decorated functions as notebooks write them."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from sklearn.linear_model import LogisticRegression

import willump
from answers import identity
from test_compile_frames import assert_same_frame
from test_compile_kernels import hypothesis_settings
from willump.compile import dummies
from willump.compile.forms import Unsupported

WORDS = ["male", "female", "S", "C", "Q", "", "é", "Zz", "a b", "10"]


@st.composite
def column(draw, rows: int):
    kind = draw(st.sampled_from(["object", "str", "int", "float", "mixed", "bool", "category", "Int64"]))
    if kind == "category":
        return pd.Categorical(draw(st.lists(st.sampled_from(WORDS), min_size=rows, max_size=rows)))
    if kind == "Int64":
        return pd.array(draw(st.lists(st.sampled_from([1, 2, None]), min_size=rows, max_size=rows)), dtype="Int64")
    if kind == "int":
        return np.array(draw(st.lists(st.integers(-3, 3), min_size=rows, max_size=rows)), dtype="int64")
    if kind == "float":
        return np.array(draw(st.lists(st.sampled_from([0.5, np.nan, 2.0]), min_size=rows, max_size=rows)))
    if kind == "bool":
        return np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)))
    missing = [None, np.nan] if kind == "object" else [np.nan]
    pool = WORDS + missing + ([1, 2.5] if kind == "mixed" else [])
    values = draw(st.lists(st.sampled_from(pool), min_size=rows, max_size=rows))
    return pd.array(values, dtype="str") if kind == "str" else np.array(values, dtype=object)


@st.composite
def case(draw):
    rows = draw(st.sampled_from([0, 1, 1, 2, 3, 7]))
    names = draw(st.lists(st.sampled_from(["Sex", "Embarked", "Pclass", "Age", "Title"]), min_size=1, max_size=4,
                          unique=True))
    frame = pd.DataFrame({name: draw(column(rows)) for name in names},
                         index=draw(st.sampled_from([pd.RangeIndex(rows), pd.Index(range(5, 5 + rows)) * 2])))
    options = {}
    if draw(st.booleans()):
        options["columns"] = draw(st.lists(st.sampled_from(names + ["Missing"]), max_size=3, unique=True))
    if draw(st.integers(0, 3)) == 0:
        options["prefix"] = draw(st.sampled_from(["p", ["a", "b"], {"Sex": "s", "Embarked": "e"}, None]))
    if draw(st.integers(0, 3)) == 0:
        options["prefix_sep"] = draw(st.sampled_from(["=", "", "_"]))
    for option in ("dummy_na", "drop_first"):
        if draw(st.booleans()):
            options[option] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        options["dtype"] = draw(st.sampled_from([float, int, "uint8", np.float32, bool, None, object]))
    return frame, options


@hypothesis_settings(max_examples=400)
@given(case())
def test_the_kernel_builds_pandas_frame_or_refuses(case):
    frame, options = case
    note(repr(options))
    note(repr(frame.dtypes.to_dict()))
    try:
        expected = pd.get_dummies(frame, **options)
    except Exception as error:
        note(f"pandas raises {error!r}")
        with pytest.raises((Unsupported, type(error))):
            dummies.get_dummies(frame, **options)
        return
    try:
        result = dummies.get_dummies(frame, **options)
    except Unsupported as why:
        note(f"refused: {why}")
        encoded = options.get("columns") or frame
        kinds = {frame[c].dtype.kind if isinstance(frame[c].dtype, np.dtype) else str(frame[c].dtype) for c in encoded}
        assert kinds & {"f", "b", "category", "Int64"} or options.get("columns") is None and any(
            str(dtype) in ("category", "Int64") for dtype in frame.dtypes) or any(
            frame[c].map(type).isin([int, float]).any() for c in frame if frame[c].dtype == object) or (
            options.get("dtype") is object), why  # (floats, bools, mixed values, categories: pandas' own)
        return
    assert_same_frame(result, expected)
    assert (result.index is frame.index) == (expected.index is frame.index)
    assert result.index.is_(frame.index) == expected.index.is_(frame.index)


class Survival:
    """A model whose answer is its input frame's values, as it reads them."""

    def predict(self, X):
        return np.asarray(X, dtype=float).sum(axis=1)


model = Survival()
TRAIN_COLUMNS = ["Pclass", "Age", "Sex_female", "Sex_male", "Embarked_C", "Embarked_Q", "Embarked_S"]
PASSENGERS = pd.DataFrame({
    "Pclass": [3, 1, 3, 1, 2, 3], "Sex": ["male", "female", "female", "female", "male", "male"],
    "Age": [22.0, 38.0, np.nan, 35.0, 27.0, np.nan], "Embarked": ["S", "C", "S", None, "Q", "S"],
})


def notebook_cell(df):
    X = df[["Pclass", "Sex", "Age", "Embarked"]].copy()
    X["Age"] = X["Age"].fillna(28.0)
    X = pd.get_dummies(X, columns=["Sex", "Embarked"])
    return model.predict(X.reindex(columns=TRAIN_COLUMNS, fill_value=0))


def every_text_column(df):
    return identity.predict(pd.get_dummies(df, drop_first=True, dtype=float))


@pytest.mark.parametrize("function", [notebook_cell, every_text_column])
def test_a_decorated_function_answers_as_pandas(function):
    optimized = willump.optimize(function)
    for rows in (PASSENGERS, PASSENGERS.iloc[[3]], PASSENGERS.iloc[::-1], PASSENGERS.iloc[:0]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", willump.WillumpWarning)
            result = optimized(rows)
        expected = function(rows)
        if isinstance(expected, pd.DataFrame):
            assert_same_frame(result, expected)
        else:
            np.testing.assert_array_equal(result, expected, strict=True)
    table = optimized.explain_compilation().set_index("operator")
    assert table.loc["pandas.get_dummies", "compiled_calls"] == 4, table.loc["pandas.get_dummies", "status"]


def train_columns(df):
    X = df[["Pclass", "Sex", "Age", "Embarked"]].copy()
    X["Age"] = X["Age"].fillna(28.0)
    return pd.get_dummies(X, columns=["Sex", "Embarked"])


CLASSIFIER = LogisticRegression(max_iter=1000).fit(train_columns(PASSENGERS), [0, 1, 1, 1, 0, 0])


def titanic(df):  # (scikit-learn's model reads get_dummies' bool columns among the numbers)
    X = df[["Pclass", "Sex", "Age", "Embarked"]].copy()
    X["Age"] = X["Age"].fillna(28.0)
    X = pd.get_dummies(X, columns=["Sex", "Embarked"])
    X = X.reindex(columns=TRAIN_COLUMNS, fill_value=0)
    return CLASSIFIER.predict_proba(X)[:, 1]


def test_a_titanic_cell_is_compiled_call_by_call():
    optimized = willump.optimize(titanic)
    for i in range(len(PASSENGERS)):
        np.testing.assert_array_equal(optimized(PASSENGERS.iloc[[i]]), titanic(PASSENGERS.iloc[[i]]), strict=True)
    np.testing.assert_array_equal(optimized(PASSENGERS), titanic(PASSENGERS), strict=True)
    table = optimized.explain_compilation()
    assert (table["status"] == "compiled").all(), table[["call", "status"]].to_string()
    assert "DataFrame.copy" in table["operator"].tolist()


def no_such_column(df):
    return identity.predict(pd.get_dummies(df, columns=["Cabin"]))


def test_what_pandas_raises_for_is_raised():
    optimized = willump.optimize(no_such_column)
    with pytest.raises(KeyError) as raised, warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        optimized(PASSENGERS)
    with pytest.raises(KeyError) as expected:
        no_such_column(PASSENGERS)
    assert str(raised.value) == str(expected.value)
    assert "more than" not in optimized.explain_compilation().set_index("operator").loc["pandas.get_dummies", "status"]
