"""TransformedTargetRegressor read as its steps: the regressor's predict, then the inverse.

``ttr.predict(X)`` held in a global or closure variable is written out as its regressor's
``predict`` (compiled by the kernels, read as its steps when it is a Pipeline) followed by
``target_inverse``; the optimized function must return what scikit-learn returns (values, dtype,
shape) or raise what it raises, and a meta-estimator willump cannot read must say why.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.compose import TransformedTargetRegressor
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, QuantileTransformer, StandardScaler

import willump
from answers import assert_same_outcome as assert_same, assert_same_warned_outcome, outcome, warned_outcome
from willump.compile.meta import target_inverse

rng = np.random.default_rng(5)
N = 400
FRAME = pd.DataFrame({"credit": rng.lognormal(10, 1, N), "income": rng.lognormal(9, 1, N), "children": rng.integers(0, 4, N)})
AMOUNT = FRAME["credit"] * 0.05 + FRAME["income"] * 0.01 + rng.lognormal(5, 1, N)


def features(df):
    return pd.DataFrame({"log_credit": np.log1p(df["credit"]), "log_income": np.log1p(df["income"]),
                         "children": df["children"].clip(upper=2)})


def regressors():
    """TransformedTargetRegressors as scikit-learn's documentation and notebooks write them."""
    return {
        "log1p": TransformedTargetRegressor(regressor=Ridge(), func=np.log1p, inverse_func=np.expm1),
        "log": TransformedTargetRegressor(regressor=LinearRegression(), func=np.log, inverse_func=np.exp),
        "identity": TransformedTargetRegressor(regressor=Ridge()),
        "scaler": TransformedTargetRegressor(regressor=Ridge(), transformer=StandardScaler()),
        "quantile": TransformedTargetRegressor(
            regressor=make_pipeline(StandardScaler(), Ridge()),
            transformer=QuantileTransformer(n_quantiles=100, output_distribution="normal"),
        ),
        "pipeline": TransformedTargetRegressor(regressor=make_pipeline(StandardScaler(), Ridge()), func=np.sqrt, inverse_func=np.square),
        "column_target": TransformedTargetRegressor(regressor=Ridge(), func=np.log1p, inverse_func=np.expm1),
        "two_targets": TransformedTargetRegressor(regressor=Ridge(), func=np.log1p, inverse_func=np.expm1),
        "unvalidated": TransformedTargetRegressor(
            regressor=Ridge(), transformer=FunctionTransformer(np.log1p, np.expm1, validate=False)),
    }


def targets(name):
    if name == "column_target":
        return AMOUNT.to_numpy()[:, None]  # 2-D with one column: no squeeze
    if name == "two_targets":
        return np.column_stack([AMOUNT, AMOUNT * 2])
    return AMOUNT


FITTED = {name: model.fit(features(FRAME), targets(name)) for name, model in regressors().items()}


def predicting(model):
    """The user's function, with ``model`` in a closure variable, and its optimized version."""
    def predict(df):
        X = features(df)
        return model.predict(X)

    with warnings.catch_warnings():
        warnings.simplefilter("error", willump.WillumpWarning)  # nothing is left as one call
        return predict, willump.optimize(predict)


OPTIMIZED = {name: predicting(model) for name, model in FITTED.items()}


@pytest.mark.parametrize("name", sorted(FITTED))
def test_the_regressor_is_compiled_and_the_answers_are_scikit_learns(name):
    function, optimized = OPTIMIZED[name]
    for rows in (FRAME, FRAME.iloc[[3]], FRAME.iloc[::-7]):
        assert_same(optimized(rows), function(rows))
    table = optimized.explain_compilation().set_index("operator")
    assert table.loc["Ridge.predict" if name != "log" else "LinearRegression.predict", "status"] == "compiled"
    assert not table["call"].str.contains("__willump").any()
    assert (table["status"] == "compiled").all(), table


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(
        st.one_of(st.floats(0, 1e7), st.floats(-1e308, 1e308), st.just(np.nan)),
        st.one_of(st.floats(0, 1e7), st.floats(-1e308, 1e308)), st.integers(0, 9),
    ), min_size=1, max_size=5),
    name=st.sampled_from(sorted(FITTED)),
)
def test_any_rows_give_scikit_learns_answer_or_error(rows, name):
    """Huge amounts overflow the prediction to infinity (FunctionTransformer's check then raises),
    logs of negative amounts give NaN (scikit-learn raises), others give the inverse's warnings."""
    function, optimized = OPTIMIZED[name]
    frame = pd.DataFrame(rows, columns=["credit", "income", "children"])
    assert_same_warned_outcome(warned_outcome(optimized, frame), warned_outcome(function, frame))


@settings(max_examples=200, deadline=None)
@given(
    predictions=st.lists(st.one_of(st.floats(-800, 800), st.sampled_from([np.nan, np.inf, -np.inf, 1e308])),
                         min_size=1, max_size=6),
    name=st.sampled_from(["log1p", "log", "identity", "scaler", "quantile", "unvalidated"]),
    shape=st.sampled_from(["1-D", "column"]),
    dtype=st.sampled_from(["float64", "float32"]),
)
def test_the_inverse_is_scikit_learns_for_any_prediction(predictions, name, shape, dtype):
    """``target_inverse`` against ``TransformedTargetRegressor.predict`` itself, its regressor
    answering ``predictions``: float32, NaN, infinity, overflow in the inverse."""
    model = FITTED[name]
    with np.errstate(over="ignore"):  # (1e308 as float32 is infinity)
        prediction = np.array(predictions).astype(dtype)
    prediction = prediction if shape == "1-D" else prediction[:, None]

    class Answering:
        def predict(self, X):
            return prediction

    regressor, model.regressor_ = model.regressor_, Answering()
    try:
        expected = warned_outcome(model.predict, FRAME.iloc[:1])
    finally:
        model.regressor_ = regressor
    assert_same_warned_outcome(warned_outcome(target_inverse, model, prediction), expected)


def test_a_regressor_refitted_after_decoration_runs_as_written():
    global refitted
    refitted = TransformedTargetRegressor(regressor=Ridge(), func=np.log1p, inverse_func=np.expm1).fit(features(FRAME), AMOUNT)

    def predict(df):
        X = features(df)
        return refitted.predict(X)

    optimized = willump.optimize(predict)
    before = optimized(FRAME)
    refitted.fit(features(FRAME), AMOUNT * 3)
    with pytest.warns(willump.WillumpWarning, match="changed after decoration"):
        after = optimized(FRAME)
    assert_same(after, predict(FRAME))
    assert not np.array_equal(after, before)


def test_a_regressor_fitted_after_decoration_is_read_once_fitted():
    global late
    late = TransformedTargetRegressor(regressor=Ridge(), func=np.log1p, inverse_func=np.expm1)

    def predict(df):
        X = features(df)
        return late.predict(X)

    with pytest.warns(willump.WillumpWarning, match="not fitted when the function was decorated"):
        optimized = willump.optimize(predict)
    late.fit(features(FRAME), AMOUNT)
    assert_same(optimized(FRAME.iloc[[0]]), predict(FRAME.iloc[[0]]))
    table = optimized.explain_compilation().set_index("operator")
    assert table.loc["Ridge.predict", "status"] == "compiled"


def test_a_regressor_at_the_end_of_a_pipeline_is_read_too():
    global piped
    piped = make_pipeline(StandardScaler(), FITTED["log1p"])

    def predict(df):
        X = features(df)
        return piped.predict(X)

    piped.steps[-1] = ("regressor", TransformedTargetRegressor(regressor=Ridge(), func=np.log1p, inverse_func=np.expm1))
    piped.fit(features(FRAME), AMOUNT)
    optimized = willump.optimize(predict)
    for rows in (FRAME, FRAME.iloc[[5]]):
        assert_same(optimized(rows), predict(rows))
    compilation = optimized.explain_compilation()
    assert set(compilation["operator"]) == {
        "Ridge.predict", "StandardScaler.transform", "element-wise expression", "pandas.DataFrame"}
    assert set(compilation["status"]) == {"compiled"}, compilation


MODELS = {"amount": FITTED["log1p"]}


def by_key(df):
    X = features(df)
    return MODELS["amount"].predict(X)


def test_a_meta_estimator_run_as_one_call_says_why():
    """Held in a dict, it is known only when the function runs: the status says how to write it."""
    optimized = willump.optimize(by_key)
    assert_same(optimized(FRAME), by_key(FRAME))
    table = optimized.explain_compilation().set_index("operator")
    assert table.loc["TransformedTargetRegressor.predict", "status"] == (
        "plain Python: a TransformedTargetRegressor runs as one call here: willump reads its predict as its steps "
        "only when it is called as <variable>.predict(X), first in its statement, on a global or closure variable "
        "holding it (not an attribute such as self.pipe, a local variable or an item of a dict); one fitted only "
        "after decorating is read on the first call after fitting, and one left as one call for another reason is "
        "named by a WillumpWarning at decoration"
    )
