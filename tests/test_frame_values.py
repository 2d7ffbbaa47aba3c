"""``frame[columns].values`` and ``.to_numpy()`` (``willump.compile.frames.CompiledValues``): the array
pandas gives (values to the bit, dtype, shape, memory order, whether it is read-only and whether it
shares the frame's memory) without building the selected frame; through ``willump.optimize``, the
function's answer or exception as written, with the model given the array."""

import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeRegressor

import willump
from answers import assert_same_outcome, outcome
from test_compile_frames import NAMES, frames_of
from test_compile_kernels import hypothesis_settings
from willump.compile.forms import Unsupported
from willump.compile.frames import SelectedColumns, selection_values

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")


def block_arrays(frame: pd.DataFrame) -> list:
    return [block.values for block in frame._mgr.blocks]


def assert_same_array(result: np.ndarray, expected: np.ndarray, frame: pd.DataFrame) -> None:
    """The same values, dtype, shape and layout, read-only alike, sharing the frame's memory alike."""
    assert type(result) is np.ndarray and result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected, strict=True)
    for flag in ("writeable", "c_contiguous", "f_contiguous"):
        assert getattr(result.flags, flag) == getattr(expected.flags, flag), flag
    if min(expected.shape) > 1:  # (a dimension of one has no stride to speak of)
        assert result.strides == expected.strides
    for values in block_arrays(frame):
        assert np.shares_memory(result, values) == np.shares_memory(expected, values)


@st.composite
def any_frame(draw):
    """A frame built column by column or from a dict (``frames_of``: several blocks), or from one
    2-D array (one block, in the order pandas keeps it: the array's transpose), or consolidated."""
    how = draw(st.sampled_from(["columns", "array", "consolidated"]))
    if how == "columns":
        return draw(frames_of())
    rows, width = draw(st.sampled_from([1, 2, 5])), draw(st.integers(1, 5))
    dtype = draw(st.sampled_from(["float64", "float32", "int64", "bool"]))
    values = np.arange(rows * width).reshape(rows, width) * 0.37
    frame = pd.DataFrame(values.astype(dtype), columns=NAMES[:width])
    if how == "consolidated":
        frame["extra"] = np.arange(rows)
        frame = frame.copy()  # (copy consolidates the blocks)
    return frame


@hypothesis_settings(300)
@given(any_frame(), st.data())
def test_the_array_of_a_selection_is_pandas_own(frame, data):
    names = list(dict.fromkeys(frame.columns))
    labels = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
    selection = SelectedColumns(frame, labels, [frame.columns.get_loc(label) for label in labels])
    if not frame.columns.is_unique:
        return
    expected = frame[labels].values
    try:
        result = selection_values(selection)
    except Unsupported as why:
        note(f"refused: {why}")
        assert expected.dtype.kind not in "biuf" or any(d.kind not in "biuf" for d in frame[labels].dtypes)
        return
    assert_same_array(result, expected, frame)
    assert_same_array(frame[labels].to_numpy(), expected, frame)


# Through willump.optimize, as people write it (model.predict(X.values) is in most Kaggle notebooks).

RNG = np.random.default_rng(3)
ROWS = pd.DataFrame(RNG.normal(size=(400, 4)), columns=["a", "b", "c", "d"])
ROWS["n"] = RNG.integers(0, 7, 400)
ROWS["flag"] = RNG.random(400) > 0.5
ROWS["kind"] = RNG.choice(["x", "y"], 400)
ROWS.loc[::9, "b"] = np.nan
FEATURES = ["a", "b", "n"]
LABELS = (ROWS["a"] + ROWS["n"] > 3).to_numpy()
BOOSTED = lgb.LGBMClassifier(n_estimators=20, verbose=-1).fit(ROWS[FEATURES].values, LABELS)
LINEAR = LogisticRegression().fit(ROWS[["a", "c", "n"]].to_numpy(), LABELS)
TREE = DecisionTreeRegressor(max_depth=4, random_state=0).fit(ROWS[["a", "c", "d"]].values, ROWS["n"])


def boosted_values(df):
    return BOOSTED.predict_proba(df[FEATURES].values)[:, 1]


def linear_to_numpy(df):
    return LINEAR.predict_proba(df[["a", "c", "n"]].to_numpy())


def bound_then_predicted(df):
    X = df[["a", "c", "d"]]
    return TREE.predict(X.values)


def array_bound_then_predicted(df):
    X = df[FEATURES].values
    return BOOSTED.predict(X)


def to_float32(df):
    return BOOSTED.predict_proba(df[FEATURES].to_numpy(dtype=np.float32))


def written_into(df):
    X = df[["a", "c", "d"]].values  # (one block: read-only, pandas raises)
    X[:, 0] = 0.0
    return TREE.predict(X)


def with_bools(df):  # (bools and numbers: an array of objects)
    return LINEAR.predict(df[["a", "flag", "n"]].values)


def with_strings(df):
    return LINEAR.predict(df[["a", "kind", "n"]].values)


def series_values(df):
    return LINEAR.predict(np.column_stack([df["a"].values, df["c"].to_numpy(), df["n"].values]))


def dict_values_untouched(df):
    scale = {"a": 2.0}
    return TREE.predict(df[["a", "c", "d"]].values * list(scale.values())[0])


FUNCTIONS = [boosted_values, linear_to_numpy, bound_then_predicted, array_bound_then_predicted, to_float32,
             written_into, with_bools, with_strings, series_values, dict_values_untouched]
INPUTS = {"one row": ROWS.iloc[[4]], "all": ROWS, "reversed": ROWS.iloc[::-1], "no rows": ROWS.iloc[:0],
          "missing column": ROWS.drop(columns=["a"])}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_models_given_the_values_answer_as_written(function):
    optimized = willump.optimize(function)
    for name, rows in INPUTS.items():
        for _ in range(2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected, result = outcome(function, rows), outcome(optimized, rows)
            assert_same_outcome(result, expected)


@pytest.mark.parametrize("function", [boosted_values, linear_to_numpy, bound_then_predicted,
                                      array_bound_then_predicted, series_values])
def test_the_values_and_the_model_compile(function):
    optimized = willump.optimize(function)
    optimized(ROWS.iloc[[4]])
    optimized(ROWS)
    sites = optimized.explain_compilation()
    assert (sites["status"] == "compiled").all(), sites.to_string()
    assert sites["operator"].isin(["DataFrame/Series.values", "DataFrame/Series.to_numpy"]).any(), sites.to_string()
    assert (sites["compiled_calls"] == 2).all(), sites.to_string()


@pytest.mark.parametrize("function, selection", [(boosted_values, "df[FEATURES]"),
                                                 (linear_to_numpy, "df[['a', 'c', 'n']]")])
def test_the_selection_is_not_built(function, selection):
    """``df[F].values`` and ``.to_numpy()`` read the columns where they are: the selection's site keeps them."""
    optimized = willump.optimize(function)
    optimized(ROWS.iloc[[4]])
    sites = optimized.explain_compilation().set_index("call")
    assert sites.loc[selection, "kept"], sites.to_string()
    assert sites.loc[sites.index.str.startswith(selection + "."), "status"].eq("compiled").all(), sites.to_string()
    assert sites.index.str.startswith(selection + ".").any(), sites.to_string()


def test_a_dict_values_call_is_not_a_frame_site():
    optimized = willump.optimize(dict_values_untouched)
    optimized(ROWS.iloc[[4]])
    assert not optimized.explain_compilation()["call"].str.startswith("scale.values").any()
