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
import scipy.sparse as sp
import sklearn
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.linear_model import (
    ARDRegression, BayesianRidge, ElasticNet, HuberRegressor, Lars, Lasso, LassoCV, LinearRegression, LogisticRegression,
    LogisticRegressionCV, OrthogonalMatchingPursuit, PassiveAggressiveClassifier, Perceptron, QuantileRegressor, Ridge,
    RidgeClassifier, RidgeCV, SGDClassifier, SGDRegressor,
)
from sklearn.svm import LinearSVC, LinearSVR

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
    """Every linear model family the kernel compiles, as notebooks fit them (their convergence
    warnings aside: the answers are what is compared)."""
    binary = LABELS == "low"
    scaled = (TRAIN - TRAIN.mean()) / TRAIN.std()
    models = {
        "logistic": LogisticRegression(max_iter=2000).fit(TRAIN, binary),
        "logistic_3": LogisticRegression(max_iter=2000).fit(TRAIN, LABELS),
        "logistic_cv": LogisticRegressionCV(cv=3, max_iter=2000).fit(TRAIN, LABELS),
        "ridge": Ridge().fit(TRAIN, TARGET),
        "ridge_2d": Ridge().fit(TRAIN, np.column_stack([TARGET, -TARGET])),
        "ridge_cv": RidgeCV().fit(TRAIN, TARGET),
        "linear": LinearRegression().fit(TRAIN, TARGET),
        "lasso": Lasso(alpha=0.1).fit(TRAIN, TARGET),
        "lasso_cv": LassoCV(cv=3).fit(TRAIN, TARGET),
        "elastic_net": ElasticNet(alpha=0.1, fit_intercept=False).fit(TRAIN, TARGET),
        "lars": Lars().fit(TRAIN, TARGET),
        "omp": OrthogonalMatchingPursuit().fit(TRAIN, TARGET),
        "bayesian_ridge": BayesianRidge().fit(TRAIN, TARGET),
        "ard": ARDRegression().fit(TRAIN, TARGET),
        "huber": HuberRegressor(max_iter=1000).fit(TRAIN, TARGET),
        "quantile": QuantileRegressor(alpha=0.0).fit(TRAIN, TARGET),
        "linear_svr": LinearSVR(random_state=0).fit(scaled, TARGET),
        "sgd_regressor": SGDRegressor(random_state=0).fit(scaled, TARGET),
        "ridge_classifier": RidgeClassifier().fit(TRAIN, LABELS),
        "svc": LinearSVC().fit(TRAIN, binary),
        "sgd": SGDClassifier(random_state=0).fit(TRAIN, LABELS),
        "sgd_log": SGDClassifier(loss="log_loss", random_state=0).fit(scaled, LABELS),  # (one-vs-rest probabilities)
        "sgd_log_binary": SGDClassifier(loss="log_loss", random_state=0).fit(scaled, binary),
        "sgd_huber": SGDClassifier(loss="modified_huber", random_state=0).fit(scaled, LABELS),  # (refused)
        "perceptron": Perceptron(random_state=0).fit(scaled, LABELS),
        "passive_aggressive": PassiveAggressiveClassifier(random_state=0).fit(scaled, binary),
    }
    if "multi_class" in LogisticRegression().get_params():  # (scikit-learn < 1.7: one-vs-rest or multinomial)
        models["logistic_ovr"] = LogisticRegression(multi_class="ovr", max_iter=2000).fit(TRAIN, LABELS)
        models["logistic_liblinear"] = LogisticRegression(solver="liblinear").fit(TRAIN, LABELS)
        models["logistic_multinomial_binary"] = LogisticRegression(multi_class="multinomial", max_iter=2000).fit(TRAIN, binary)
    return models


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # (convergence, deprecations)
    MODELS = fitted_models()
METHODS = [(name, method) for name, model in MODELS.items() for method in ("predict", "predict_proba", "decision_function")
           if hasattr(model, method) and (name, method) != ("sgd_huber", "predict_proba")]
REFUSED = "refused"
# scikit-learn before 1.9 validates a frame of object and nullable (extension) columns to an array of
# objects and multiplies it by its coefficients; numpy's matmul of objects (2.0 to 2.4 at least) frees
# a product twice when a multiplication fails (None * 0.5), and the process crashes later. scikit-learn
# 1.9 refuses such frames before. Those scikit-learn versions are not asked such frames here.
MATMULS_OBJECTS = tuple(int(part) for part in sklearn.__version__.split(".")[:2]) < (1, 9)


def scikit_learn_can_answer(frame) -> bool:
    """Whether scikit-learn's answer to ``frame`` can be asked without numpy's double free above."""
    kinds = {"object" if dtype == object else isinstance(dtype, np.dtype) for dtype in frame.dtypes}
    return not (MATMULS_OBJECTS and {"object", False} <= kinds)


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
        kind = draw(st.sampled_from(["float64", "float64", "int64", "int64", "float32", "bool", "Float64", "object"]))
        if kind == "object":  # (numbers replace put in a text column; None, which numpy reads as NaN)
            columns[name] = np.array(draw(st.lists(st.sampled_from([0, 1, -2.5, 1e6, None, np.float64(0.1), 2**60 + 1, 1 + 2j]),
                                                   min_size=rows, max_size=rows)), dtype=object)
        elif kind in ("int64", "bool"):
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
    assume(scikit_learn_can_answer(frame))
    expected, got = answer(model, method, frame), compiled_answer(CompiledLinearModel(model, method), frame)
    if expected is REFUSED:
        assert got is REFUSED
    elif got is not REFUSED:
        assert_same(got, expected)
    kinds = {frame[c].dtype.kind if isinstance(frame[c].dtype, np.dtype) else "extension" for c in frame}
    plain = kinds <= set("bif")  # (bools alone or among numbers: get_dummies')
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
    assume(scikit_learn_can_answer(wide[COLUMNS]))
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


def test_probabilities_of_a_modified_huber_loss_run_as_written():
    model = MODELS["sgd_huber"]
    with pytest.raises(Unsupported, match="modified_huber"):
        CompiledLinearModel(model, "predict_proba")(TRAIN)
    optimized = willump.optimize(huber_probabilities)
    assert_same(optimized(TRAIN), huber_probabilities(TRAIN))
    assert optimized.explain_compilation()["status"].str.contains("modified_huber").all()


def huber_probabilities(frame):
    return MODELS["sgd_huber"].predict_proba(frame)


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


def unnamed_regressors():
    """The regressors of ``fitted_models`` fitted on arrays (no feature names: sparse rows have none)."""
    scaled = ((TRAIN - TRAIN.mean()) / TRAIN.std()).to_numpy()
    return {name: clone(MODELS[name]).fit(scaled if name in ("sgd_regressor", "linear_svr") else TRAIN.to_numpy(float), TARGET)
            for name in ("lasso", "elastic_net", "sgd_regressor", "linear_svr", "huber", "ridge_cv")}


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # (convergence)
    UNNAMED = unnamed_regressors()


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(UNNAMED)), values=st.lists(st.floats(-1e6, 1e6), min_size=4, max_size=40),
       density=st.floats(0.0, 1.0))
def test_sparse_rows_get_the_regressors_answer(name, values, density):
    """CSR rows (ElasticNet's and SGDRegressor's own sparse product, LinearModel's for the rest)."""
    model = UNNAMED[name]
    dense = np.array(values[: len(values) // 4 * 4]).reshape(-1, 4)
    dense[np.random.default_rng(len(values)).random(dense.shape) > density] = 0.0
    rows = sp.csr_matrix(dense)
    assert_same(CompiledLinearModel(model, "predict")(rows), model.predict(rows))


def reversed_selection(df):
    return MODELS["ridge"].predict(df[COLUMNS])


def reversed_and_filled(df):
    return MODELS["logistic"].predict_proba(df[COLUMNS].fillna(0))[:, 1]


def reversed_after_drop(df):
    return MODELS["linear"].predict(df.drop(columns=["other"])[COLUMNS])


@settings(max_examples=60, deadline=None)
@given(order=st.permutations(COLUMNS), rows=st.integers(1, 300), seed=st.integers(0, 2**32 - 1),
       copied=st.booleans())
def test_columns_of_one_block_in_any_order_get_the_same_bits(order, rows, seed, copied):
    """Columns of one float64 block taken a constant negative step apart (``df[["b", "a"]]`` of a consolidated
    frame) are, in pandas, a view of the block with that step, which numpy multiplies without BLAS: the
    kernels read that view, not a copy, whose product BLAS sums in another order."""
    values = np.random.default_rng(seed).normal(scale=100, size=(rows, len(order)))
    frame = pd.DataFrame(values, columns=list(order)).assign(other=1.0)  # (one block, then another)
    frame = frame.copy() if copied else pd.DataFrame({name: frame[name].to_numpy() for name in frame})
    for function in (reversed_selection, reversed_and_filled, reversed_after_drop):
        optimized = willump.optimize(function)
        for part in (frame, frame.iloc[[rows // 2]]):
            expected = function(part)
            got = optimized(part)
            assert got.tobytes() == expected.tobytes(), function.__name__
        assert set(optimized.explain_compilation()["status"]) == {"compiled"}


def concatenated_series(df):
    return MODELS["logistic_3"].predict_proba(pd.concat([df["amount"], df["age"], df["ratio"], df["count"]], axis=1))


def test_a_frame_concatenated_from_series_is_read_as_pandas_builds_it():
    """``pd.concat([...series], axis=1)`` feeding only the model is kept as its columns: the model's kernel reads
    the DataFrame pandas builds of them (not refused as a frame without the names seen in fit)."""
    optimized = willump.optimize(concatenated_series)
    for rows in (TRAIN, TRAIN.iloc[[3]], TRAIN.iloc[::-7]):
        assert optimized(rows).tobytes() == concatenated_series(rows).tobytes()
    assert set(optimized.explain_compilation()["status"]) == {"compiled"}, optimized.explain_compilation()
