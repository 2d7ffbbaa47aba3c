"""Linear models fitted on a DataFrame, given a DataFrame.

scikit-learn's ``validate_data`` checks the feature names, then ``check_array`` takes the array
pandas gives; its memory layout (one block: the block transposed; several: interleaved) decides
the order BLAS sums ``X @ coef_.T`` in. The compiled model must answer every frame scikit-learn
answers without a warning to the bit, and refuse (so scikit-learn runs, warns or raises) the rest.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from sklearn.linear_model import (
    LinearRegression, LogisticRegression, Ridge, RidgeClassifier, SGDClassifier,
)
from sklearn.svm import LinearSVC

import willump
from willump.compile.forms import Unsupported
from willump.compile.linear import CompiledLinearModel
from willump.compile.tables import CompiledSelection

rng = np.random.default_rng(3)
N = 300
COLUMNS = ["amount", "age", "ratio", "count"]
TRAIN = pd.DataFrame({
    "amount": rng.lognormal(3, 1, N), "age": rng.integers(18, 90, N),
    "ratio": rng.normal(size=N), "count": rng.integers(0, 6, N),
})
LABELS = np.array(["low", "mid", "high"])[rng.integers(0, 3, N)]
TARGET = TRAIN["amount"] * 0.3 - TRAIN["age"] + rng.normal(size=N)


def fitted_models():
    binary = LABELS == "low"
    return {
        "logistic": LogisticRegression(max_iter=2000).fit(TRAIN, binary),
        "logistic_3": LogisticRegression(max_iter=2000).fit(TRAIN, LABELS),
        "ridge": Ridge().fit(TRAIN, TARGET),
        "ridge_2d": Ridge().fit(TRAIN, np.column_stack([TARGET, -TARGET])),
        "linear": LinearRegression().fit(TRAIN, TARGET),
        "ridge_classifier": RidgeClassifier().fit(TRAIN, LABELS),
        "svc": LinearSVC().fit(TRAIN, binary),
        "sgd": SGDClassifier(random_state=0).fit(TRAIN, LABELS),
    }


MODELS = fitted_models()
METHODS = [(name, method) for name, model in MODELS.items() for method in ("predict", "predict_proba", "decision_function")
           if hasattr(model, method)]
REFUSED = "refused"


def answer(model, method, frame):
    """scikit-learn's answer, or REFUSED when it raises or warns."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = getattr(model, method)(frame)
        except Exception:
            return REFUSED
    return REFUSED if caught else result


def compiled_answer(kernel, frame):
    try:
        return kernel(frame)
    except Unsupported as why:
        note(f"refused: {why}")
        return REFUSED


def assert_same(got, expected):
    assert type(got) is type(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@st.composite
def frames(draw):
    """Frames like the training frame, spelt the ways they come: float64, int64, float32, bool or
    nullable columns, NaN and infinity, rows sliced out of a larger frame (a strided view),
    columns added one by one (several blocks), reordered, missing or extra."""
    rows = draw(st.integers(1, 30))
    finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
    value = st.one_of(finite, finite, finite, st.sampled_from([np.nan, np.inf, -np.inf]))
    columns = {}
    for name in COLUMNS:
        kind = draw(st.sampled_from(["float64", "float64", "int64", "int64", "float32", "bool", "Float64"]))
        if kind in ("int64", "bool"):
            values = np.array(draw(st.lists(st.integers(-1000, 1000), min_size=rows, max_size=rows)))
            columns[name] = values.astype(kind)
        else:
            column = pd.Series(draw(st.lists(value, min_size=rows, max_size=rows)), dtype="float64")
            columns[name] = column.astype(kind).to_numpy() if kind != "Float64" else column.astype(kind)
    names = list(COLUMNS)
    layout = draw(st.sampled_from(["dict", "assigned", "sliced", "reordered", "missing", "extra"]))
    if layout == "reordered":
        names = draw(st.permutations(names))
    elif layout == "missing":
        names.remove(draw(st.sampled_from(names)))
    frame = pd.DataFrame({name: columns[name] for name in names})
    if layout == "assigned":
        frame = pd.DataFrame({names[0]: columns[names[0]]})
        for name in names[1:]:
            frame[name] = columns[name]
    elif layout == "sliced":
        frame = pd.concat([frame, frame, frame], ignore_index=True).iloc[::3]
    elif layout == "extra":
        frame["other"] = 1.0
    return frame


@settings(max_examples=300, deadline=None)
@given(frame=frames(), which=st.sampled_from(METHODS))
def test_a_frame_gets_scikit_learns_answer_or_runs_scikit_learn(frame, which):
    name, method = which
    model = MODELS[name]
    note(f"dtypes {frame.dtypes.tolist()}, blocks {[b.dtype for b in frame._mgr.blocks]}")
    expected, got = answer(model, method, frame), compiled_answer(CompiledLinearModel(model, method), frame)
    if expected is REFUSED:
        assert got is REFUSED
    elif got is not REFUSED:
        assert_same(got, expected)
    plain = all(isinstance(frame[c].dtype, np.dtype) and frame[c].dtype.kind in "if" for c in frame)
    if list(frame.columns) == COLUMNS and plain and np.isfinite(frame.to_numpy(dtype=float)).all():
        assert got is not REFUSED  # every frame of numbers with the names seen in fit is compiled


@settings(max_examples=200, deadline=None)
@given(frame=frames(), which=st.sampled_from(METHODS), extra=st.integers(0, 4))
def test_selected_columns_of_a_wider_frame_get_the_selected_frames_answer(frame, which, extra):
    """``df[COLUMNS]`` kept as the columns where they are: the answer scikit-learn gives the selected frame."""
    name, method = which
    model = MODELS[name]
    wide = frame.copy()
    wide.insert(min(extra, wide.shape[1]), "extra", np.arange(len(frame), dtype=np.int64))  # (another block)
    try:
        selection = CompiledSelection.defer(wide, COLUMNS)
    except Unsupported:
        assert not set(COLUMNS) <= set(wide.columns)  # (a name missing: pandas raises)
        return
    expected = answer(model, method, wide[COLUMNS])
    got = compiled_answer(CompiledLinearModel(model, method), selection)
    if expected is REFUSED:
        assert got is REFUSED
    elif got is not REFUSED:
        assert_same(got, expected)
        assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("name, method", METHODS)
@pytest.mark.parametrize("rows", [slice(None), [7], slice(10, 200, 7), slice(None, None, -1)])
def test_training_frames_give_the_same_bits(name, method, rows):
    """The layouts pandas gives (one contiguous block, a strided view, a copy) keep BLAS's order."""
    model = MODELS[name]
    kernel = CompiledLinearModel(model, method)
    for frame in (TRAIN.iloc[rows], TRAIN.astype(float).iloc[rows], TRAIN.astype(float).iloc[rows].copy()):
        assert_same(kernel(frame), getattr(model, method)(frame))


def test_a_model_fitted_without_names_refuses_a_frame():
    model = Ridge().fit(TRAIN.to_numpy(), TARGET)
    with pytest.raises(Unsupported, match="without feature names"):
        CompiledLinearModel(model, "predict")(TRAIN)


def test_column_labels_that_are_not_str_are_refused():
    frame = TRAIN.copy()
    # scikit-learn finds no valid feature names, and warns (object dtype: with pyarrow installed, pandas
    # would otherwise store the labels as str)
    frame.columns = pd.Index([np.str_(c) for c in COLUMNS], dtype=object)
    assert answer(MODELS["ridge"], "predict", frame) is REFUSED
    with pytest.raises(Unsupported):
        CompiledLinearModel(MODELS["ridge"], "predict")(frame)


ridge = MODELS["ridge"]


def built_frame_prediction(df):
    X = pd.DataFrame({
        "amount": np.log1p(df["amount"]), "age": df["age"], "ratio": df["ratio"].clip(-1, 1), "count": df["count"],
    })
    return ridge.predict(X)


def test_a_frame_built_in_the_function_is_compiled_end_to_end():
    optimized = willump.optimize(built_frame_prediction)
    for rows in (TRAIN, TRAIN.iloc[[4]], TRAIN.iloc[::5]):
        assert_same(optimized(rows), built_frame_prediction(rows))
    table = optimized.explain_compilation().set_index("operator")
    assert table.loc["Ridge.predict", "status"] == "compiled"
    assert table.loc["Ridge.predict", "compiled_calls"] == 3
