"""scikit-learn's tree models compiled (``willump.compile.sktrees``).

Random fitted models of every family answer random inputs (values on the trees' thresholds and
next to them, NaN, infinities, values beyond float32, large integers, unknown categories) with
the bits, dtype and shape of the model's own method, for batches and single rows, on one worker
or two; where scikit-learn raises or warns, the kernel refuses so that the call runs as written.
"""

import warnings
from unittest import mock

import joblib
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    AdaBoostClassifier, AdaBoostRegressor, BaggingClassifier, BaggingRegressor, ExtraTreesClassifier, ExtraTreesRegressor, GradientBoostingClassifier, GradientBoostingRegressor,
    HistGradientBoostingClassifier, HistGradientBoostingRegressor, IsolationForest, RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import willump
from test_compile_kernels import hypothesis_settings
from willump.compile import forest, registry
from willump.compile.forms import Unsupported
from willump.compile.parallel import SERIAL, Workers
from willump.compile.sktrees import METHODS, CompiledTrees
from willump.compile.tables import CompiledSelection

ROWS, GRID = 80, 6  # training rows; values on a grid of this many steps, so that trees split on them
# (scikit-learn < 1.6 boosts with SAMME.R by default, which is not compiled; >= 1.8 has SAMME only, no parameter)
SAMME = {"algorithm": "SAMME"} if "algorithm" in AdaBoostClassifier().get_params() else {}


def samme_adaboost(*args, **kwargs) -> AdaBoostClassifier:
    return AdaBoostClassifier(*args, **kwargs, **SAMME)

CLASSIFIERS = {
    "tree": lambda d, seed: DecisionTreeClassifier(
        max_depth=d(st.sampled_from([None, 1, 3])), max_features=d(st.sampled_from([None, "sqrt"])),
        min_samples_leaf=d(st.sampled_from([1, 3])), random_state=seed),
    "forest": lambda d, seed: RandomForestClassifier(
        n_estimators=d(st.integers(1, 6)), max_depth=d(st.sampled_from([None, 2, 4])),
        max_features=d(st.sampled_from(["sqrt", 1.0, 2])), bootstrap=d(st.booleans()), random_state=seed, n_jobs=1),
    "extra": lambda d, seed: ExtraTreesClassifier(
        n_estimators=d(st.integers(1, 6)), max_depth=d(st.sampled_from([None, 3])), random_state=seed),
    "boosting": lambda d, seed: GradientBoostingClassifier(
        n_estimators=d(st.integers(1, 6)), max_depth=d(st.integers(1, 3)), learning_rate=d(st.sampled_from([0.1, 0.3, 1.0])),
        init=d(st.sampled_from([None, "zero"])), subsample=d(st.sampled_from([1.0, 0.7])), random_state=seed),
    "histogram": lambda d, seed: HistGradientBoostingClassifier(
        max_iter=d(st.integers(1, 6)), max_leaf_nodes=d(st.sampled_from([2, 5, 15])), min_samples_leaf=2,
        learning_rate=d(st.sampled_from([0.1, 0.5])), early_stopping=False, random_state=seed),
    "bagging": lambda d, seed: BaggingClassifier(
        DecisionTreeClassifier(max_depth=d(st.sampled_from([None, 1, 3]))), n_estimators=d(st.integers(1, 6)),
        max_samples=d(st.sampled_from([1.0, 0.5, 6])), max_features=d(st.sampled_from([1.0, 0.5, 1])),
        bootstrap=d(st.booleans()), bootstrap_features=d(st.booleans()), random_state=seed),
    "adaboost": lambda d, seed: samme_adaboost(
        DecisionTreeClassifier(max_depth=d(st.sampled_from([1, 2, None]))), n_estimators=d(st.integers(1, 8)),
        learning_rate=d(st.sampled_from([1.0, 0.5, 2.0])), random_state=seed),
}
REGRESSORS = {
    "tree": lambda d, seed: DecisionTreeRegressor(
        max_depth=d(st.sampled_from([None, 1, 3])), criterion=d(st.sampled_from(["squared_error", "absolute_error"])),
        random_state=seed),
    "forest": lambda d, seed: RandomForestRegressor(
        n_estimators=d(st.integers(1, 6)), max_depth=d(st.sampled_from([None, 3])), max_features=d(st.sampled_from([1.0, 2])),
        random_state=seed),
    "extra": lambda d, seed: ExtraTreesRegressor(n_estimators=d(st.integers(1, 6)), max_depth=d(st.sampled_from([None, 3])),
                                                 random_state=seed),
    "boosting": lambda d, seed: GradientBoostingRegressor(
        n_estimators=d(st.integers(1, 6)), max_depth=d(st.integers(1, 3)), learning_rate=d(st.sampled_from([0.1, 0.7])),
        loss=d(st.sampled_from(["squared_error", "absolute_error", "huber", "quantile"])), init=d(st.sampled_from([None, "zero"])),
        random_state=seed),
    "histogram": lambda d, seed: HistGradientBoostingRegressor(
        max_iter=d(st.integers(1, 6)), max_leaf_nodes=d(st.sampled_from([2, 5, 15])), min_samples_leaf=2,
        loss=d(st.sampled_from(["squared_error", "poisson", "absolute_error"])), early_stopping=False, random_state=seed),
    "bagging": lambda d, seed: BaggingRegressor(
        n_estimators=d(st.integers(1, 6)), max_samples=d(st.sampled_from([1.0, 0.5])),
        max_features=d(st.sampled_from([1.0, 0.5, 1])), bootstrap_features=d(st.booleans()), random_state=seed),
    "adaboost": lambda d, seed: AdaBoostRegressor(
        DecisionTreeRegressor(max_depth=d(st.sampled_from([1, 3]))), n_estimators=d(st.integers(1, 8)),
        loss=d(st.sampled_from(["linear", "square", "exponential"])), random_state=seed),
}

def isolation_forest(d, seed):
    return IsolationForest(
        n_estimators=d(st.integers(1, 8)), max_samples=d(st.sampled_from(["auto", 0.5, 1.0, 20])),
        max_features=d(st.sampled_from([1.0, 0.5, 0.8])), contamination=d(st.sampled_from(["auto", 0.1])),
        bootstrap=d(st.booleans()), random_state=seed)


TWO = Workers(2)
SPECIAL = [np.nan, np.inf, -np.inf, 1e39, -1e39, 3.4028235e38, 3.4028236e38, -0.0, 1e-46, 2.0 ** 24 + 1, 1e300]


@st.composite
def fitted_models(draw, family: str):
    """(model, training matrix): a random model of ``family`` fitted on grid values, NaN among them
    where the family learns from missing values."""
    d = draw
    seed = d(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    width = d(st.integers(1, 4))
    X = rng.integers(0, GRID, (ROWS, width)) / 2
    classification = d(st.booleans()) if family in REGRESSORS else True
    if classification:
        classes = d(st.sampled_from([2, 3, 4]))
        labels = np.array(d(st.sampled_from([["no", "yes", "maybe", "later"], [3, -1, 7, 0]])))[:classes]
        y = labels[rng.integers(0, classes, ROWS)]
        y[:classes] = labels  # every class present
    else:
        y = X.sum(axis=1) + rng.normal(size=ROWS)
        y = np.abs(y) + 0.5  # (poisson needs positive targets)
    categorical = family == "histogram" and d(st.booleans())
    if family == "isolation":
        model = isolation_forest(d, seed)
    else:
        model = (CLASSIFIERS if classification else REGRESSORS)[family](d, seed)
    if categorical:
        model.set_params(categorical_features=[0])
    if d(st.booleans()):
        X[rng.random((ROWS, width)) < 0.1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model.fit(X, y)
        except ValueError:  # missing values not supported by this model: learn without them
            X = np.nan_to_num(X, nan=0.0)
            model.fit(X, y)
    return model, X


def thresholds(model) -> np.ndarray:
    """Every split threshold of the model (inputs on and next to them cross the comparisons)."""
    if hasattr(model, "_predictors"):
        return np.concatenate([p.nodes["num_threshold"] for it in model._predictors for p in it])
    if hasattr(model, "tree_"):
        return model.tree_.threshold
    return np.concatenate([e.tree_.threshold for e in np.ravel(model.estimators_)])


@st.composite
def inputs(draw, model, X):
    """A batch of rows of the model's width: training values, thresholds and their neighbours, specials."""
    cuts = thresholds(model)
    pool = np.unique(np.concatenate([
        X.ravel(), cuts, np.nextafter(cuts, np.inf), np.nextafter(cuts, -np.inf),
        np.float32(cuts).astype(np.float64), [7.0, -1.0, 2.25, 300.0],
    ]))
    ordinary = st.sampled_from(pool.tolist())
    values = st.one_of(*[ordinary] * 8, st.sampled_from(SPECIAL)) if draw(st.booleans()) else ordinary  # (specials: rare)
    rows = draw(st.integers(1, 40))  # (more than a kernel's lanes, sometimes)
    return np.array(draw(st.lists(values, min_size=rows * X.shape[1], max_size=rows * X.shape[1]))).reshape(rows, -1)


def assert_same(actual, expected, context=""):
    """Same type, dtype, shape and bits (strings and labels: equal)."""
    assert type(actual) is type(expected), f"{context}: {type(actual)} != {type(expected)}"
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
        f"{context}: {actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}")
    if expected.dtype.kind in "fc":
        assert np.ascontiguousarray(actual).tobytes() == np.ascontiguousarray(expected).tobytes(), (
            f"{context}\n{actual!r}\n{expected!r}")
    else:
        assert np.array_equal(actual, expected), f"{context}\n{actual!r}\n{expected!r}"


def library_answer(model, method, X):
    """The model's own answer, or None when it raises or warns."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return getattr(model, method)(X)
        except Exception:
            return None


def check_answers(model, X, workers_list=(SERIAL, TWO)):
    """Every compiled method answers ``X`` (and its first row) as the model does, or refuses where it
    refuses: its trees scored as the kernel chooses, every tree walked, and every tree it can by bits."""
    for method in METHODS[type(model)]:
        layouts = [(w, {"WORDS_A_TREE": forest.WORDS_A_TREE}) for w in workers_list]  # (as the kernel chooses)
        layouts += [(SERIAL, {"WORDS_A_TREE": 0}), (SERIAL, {"LEVEL_NS": 1e200})]  # (walked; by bits)
        for workers, layout in layouts:
            with mock.patch.multiple(forest, **layout):
                kernel = CompiledTrees(model, method, workers)
            for ensemble in ensembles_of(kernel):
                ensemble.minimum_rows = 1  # (so that two workers split even a few rows)
            for rows in (X, X[:1]):
                expected = library_answer(model, method, rows)
                context = f"{type(model).__name__}.{method} workers={workers.count} {layout}\n{rows!r}"
                if expected is None:
                    with pytest.raises(Unsupported):
                        kernel(rows)
                else:
                    assert_same(kernel(rows), expected, context)


def ensembles_of(kernel) -> list:
    """The kernel's ensembles (a Bagging model's: each of its jobs')."""
    jobs = getattr(kernel.ensemble, "jobs", None)
    return [kernel.ensemble] if jobs is None else [e for ensembles in jobs.values() for e in ensembles]


def family_test(family: str):
    @hypothesis_settings(max_examples=40)
    @given(st.data())
    def test(data):
        model, X = data.draw(fitted_models(family))
        note(repr(model))
        check_answers(model, data.draw(inputs(model, X)))

    return test


test_decision_trees = family_test("tree")
test_random_forests = family_test("forest")
test_extra_trees = family_test("extra")
test_gradient_boosting = family_test("boosting")
test_hist_gradient_boosting = family_test("histogram")
test_isolation_forests = family_test("isolation")
test_bagged_trees = family_test("bagging")
test_adaboost = family_test("adaboost")


@hypothesis_settings(max_examples=20)
@given(st.data())
def test_other_input_dtypes_convert_as_scikit_learn_converts(data):
    family = data.draw(st.sampled_from(sorted(CLASSIFIERS)))
    model, X = data.draw(fitted_models(family))
    dtype = data.draw(st.sampled_from([np.float32, np.int64, np.int32, np.uint8]))
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    values = [0, 1, 2, 3, int(info.max), int(info.min) if np.dtype(dtype).kind != "f" else 0]
    if dtype == np.int64:
        values += [2 ** 24 + 1, 2 ** 53 + 1, 2 ** 62 + 3]
    rows = data.draw(st.integers(1, 6))
    matrix = np.array(data.draw(st.lists(st.sampled_from(values), min_size=rows * X.shape[1], max_size=rows * X.shape[1])),
                      dtype=dtype).reshape(rows, -1)
    check_answers(model, matrix, (SERIAL,))
    check_answers(model, np.asfortranarray(matrix), (SERIAL,))


@pytest.mark.parametrize("make", [
    lambda: DecisionTreeClassifier(random_state=0), lambda: RandomForestClassifier(n_estimators=10, random_state=0),
    lambda: ExtraTreesRegressor(n_estimators=10, random_state=0), lambda: GradientBoostingClassifier(n_estimators=10),
    lambda: HistGradientBoostingClassifier(max_iter=10), lambda: HistGradientBoostingRegressor(max_iter=10, categorical_features=[1]),
])
def test_large_batches_span_blocks_lanes_and_workers(make):
    rng = np.random.default_rng(5)
    X = np.round(rng.normal(size=(600, 5)), 1)
    y = X[:, 0] + X[:, 1] ** 2 > 0.5
    X[:, 1] = np.abs(np.round(X[:, 1] * 3))  # (a few categories)
    model = make().fit(X, y if hasattr(make(), "predict_proba") else X[:, 0] - X[:, 2])
    batch = np.round(rng.normal(size=(3000, 5)), 1)
    batch[:, 1] = np.abs(np.round(batch[:, 1] * 3))
    missing = np.where(rng.random(batch.shape) < 0.05, np.nan, batch)
    if library_answer(model, "predict", missing) is not None:  # NaN where the model takes it
        batch = missing
    for method in METHODS[type(model)]:
        expected = getattr(model, method)(batch)
        for workers in (SERIAL, TWO):
            kernel = CompiledTrees(model, method, workers)
            kernel.ensemble.minimum_rows = 1000
            assert len(workers.split(len(batch), kernel.ensemble.minimum_rows)) == workers.count
            assert_same(kernel(batch), expected, method)


NAMED = pd.DataFrame({
    "count": np.arange(40) % 7, "amount": np.linspace(-3, 5, 40), "ratio": (np.arange(40) % 5) / 4.0,
})
NAMED_TARGET = np.where(NAMED["amount"] + NAMED["count"] > 3, "high", "low")


@pytest.mark.parametrize("kind", [DecisionTreeClassifier, RandomForestClassifier, ExtraTreesClassifier,
                                  GradientBoostingClassifier, HistGradientBoostingClassifier, BaggingClassifier,
                                  samme_adaboost])
def test_dataframes_are_read_as_validate_data_reads_them(kind):
    model = kind(random_state=0).fit(NAMED, NAMED_TARGET)
    frame = NAMED.iloc[::3]  # int64 and float64 blocks: pandas interleaves them into one float64 array
    for method in METHODS[type(model)]:
        kernel = CompiledTrees(model, method)
        assert_same(kernel(frame), getattr(model, method)(frame), method)
        assert_same(kernel(frame.iloc[[2]]), getattr(model, method)(frame.iloc[[2]]), method)
        with pytest.raises(Unsupported):  # scikit-learn raises on other names or order
            kernel(frame[["amount", "count", "ratio"]])
        with pytest.raises(Unsupported):  # and warns for an array given to a model fitted on names
            kernel(frame.to_numpy())
        with pytest.raises(Unsupported):
            kernel(frame.astype({"count": "Int64"}))  # (an extension dtype: converted by scikit-learn)


def classifier_fitted_on(train: pd.DataFrame, family: str, draw, seed: int):
    """A random classifier of ``family`` (or an isolation forest) fitted on the frame, labels at random."""
    y = np.where(np.random.default_rng(seed).random(len(train)) < 0.5, "no", "yes")
    model = isolation_forest(draw, seed) if family == "isolation" else CLASSIFIERS[family](draw, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(train, y)


DUMMY_DTYPES = ["bool", "bool", "int64", "float64", "float32", "int8", "uint8"]
BIG = {"int64": [2 ** 24 + 1, 2 ** 53 + 1, 2 ** 62 + 3, -(2 ** 63)], "float64": [np.nan, 1e39, 2.0 ** 24 + 1, 0.1],
       "float32": [np.nan, 0.1]}


def column_of(dtype: str, values: list) -> np.ndarray:
    return np.array(values).astype(dtype) if dtype != "bool" else np.array(values) % 2 == 1


@hypothesis_settings(max_examples=40)
@given(st.data())
def test_frames_with_bool_columns_are_cast_as_scikit_learn_casts_them(data):
    """``pd.get_dummies``' bool columns alone or beside numbers: scikit-learn casts the frame first, to the
    dtype its check is given (float32 for trees, float64 for histogram boosting, the frame's common dtype
    for Bagging and AdaBoost), block by block (an int64 straight to float32); the kernels read the same
    matrix, from a frame or from selected columns."""
    family = data.draw(st.sampled_from(sorted(CLASSIFIERS) + ["isolation"]))
    dtypes = data.draw(st.lists(st.sampled_from(DUMMY_DTYPES), min_size=1, max_size=4).filter(lambda d: "bool" in d))
    seed = data.draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    names = [f"c{i}" for i in range(len(dtypes))]
    train = pd.DataFrame({n: column_of(d, rng.integers(0, GRID, ROWS)) for n, d in zip(names, dtypes)})
    model = classifier_fitted_on(train, family, data.draw, seed)
    rows = data.draw(st.integers(1, 12))
    values = {d: st.sampled_from(list(range(GRID)) + BIG.get(d, [])) for d in set(dtypes)}
    frame = pd.DataFrame({n: column_of(d, data.draw(st.lists(values[d], min_size=rows, max_size=rows)))
                          for n, d in zip(names, dtypes)})
    note(f"{model!r}\n{frame.dtypes.tolist()}\n{frame!r}")
    check_answers(model, frame, (SERIAL,))
    wide = frame.assign(other=np.arange(rows))  # (another block beside the selected columns)
    for method in METHODS[type(model)]:
        expected = library_answer(model, method, wide[names])
        got = CompiledTrees(model, method)(CompiledSelection.defer(wide, names)) if expected is not None else None
        if expected is not None:
            assert_same(got, expected, method)


OBJECT_VALUES = [0, 1, 2, 3, 2.5, -1.0, np.nan, None, 2**53 + 1, 2**62 + 3, 1e39, np.float64(3.0), "2.5"]


@hypothesis_settings(max_examples=40)
@given(st.data())
def test_object_columns_of_numbers_are_converted_as_numpy_converts_them(data):
    """Numbers ``replace`` put in a text column (an object column) beside numbers: scikit-learn's check hands
    numpy pandas' interleaved objects to convert (float32 for trees, float64 for histogram boosting):
    Python ints beyond float64, None as NaN, numbers float32 cannot hold, a number written as text."""
    family = data.draw(st.sampled_from(["tree", "forest", "extra", "histogram", "bagging", "isolation"]))
    seed = data.draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    kinds = data.draw(st.lists(st.sampled_from(["object", "int64", "float64"]), min_size=1, max_size=4).filter(
        lambda k: "object" in k))
    names = [f"c{i}" for i in range(len(kinds))]

    def column(kind, values):
        return np.array(values, dtype=object) if kind == "object" else np.array(values).astype(kind)

    train = pd.DataFrame({n: column(k, rng.integers(0, GRID, ROWS).tolist()) for n, k in zip(names, kinds)})
    model = classifier_fitted_on(train, family, data.draw, seed)
    rows = data.draw(st.integers(1, 8))
    values = {"object": st.sampled_from(list(range(GRID)) + OBJECT_VALUES), "int64": st.sampled_from([0, 2, 5, 2**62 + 3]),
              "float64": st.sampled_from([0.0, 2.5, np.nan, np.inf])}
    frame = pd.DataFrame({n: column(k, data.draw(st.lists(values[k], min_size=rows, max_size=rows)))
                          for n, k in zip(names, kinds)})
    note(f"{model!r}\n{frame!r}")
    check_answers(model, frame, (SERIAL,))


def test_object_columns_of_a_model_with_categorical_features_run_as_written():
    """scikit-learn's encoder compares a categorical feature's objects as they are ("1.0" is no category
    1.0): objects are not converted for HistGradientBoosting with categorical features."""
    train = pd.DataFrame({"a": [0.0, 1.0, 4.0] * 20, "b": np.arange(60.0)})
    model = HistGradientBoostingRegressor(max_iter=5, categorical_features=[0]).fit(train, np.arange(60.0))
    frame = pd.DataFrame({"a": np.array(["0.0", "1.0", "4.0"], dtype=object), "b": [1.0, 2.0, 3.0]})
    with pytest.raises(Unsupported):
        CompiledTrees(model, "predict")(frame)


def test_a_bool_frames_cast_that_overflows_runs_as_written():
    """An isolation forest takes infinity (scikit-learn >= 1.6), but numpy warns when scikit-learn's cast
    of the frame to float32 makes one of a finite value: the kernel refuses, the call as written warns
    (or raises, where scikit-learn refuses infinity)."""
    model = IsolationForest(random_state=0).fit(pd.DataFrame({"a": np.arange(50.0) % 7, "b": np.arange(50) % 3 == 1}))
    frame = pd.DataFrame({"a": [1e39, 2.0], "b": [True, False]})
    with pytest.warns(RuntimeWarning, match="overflow"):
        try:
            model.score_samples(frame)
        except ValueError as error:  # (scikit-learn < 1.6)
            assert "infinity" in str(error)
    for given_frame in (frame, CompiledSelection.defer(frame.assign(other=1), ["a", "b"])):
        with pytest.raises(Unsupported, match="cannot hold"):
            CompiledTrees(model, "score_samples")(given_frame)
    assert_same(CompiledTrees(model, "score_samples")(frame.iloc[[1]]), model.score_samples(frame.iloc[[1]]))


THREADED = pd.DataFrame({"a": np.sin(np.arange(400)), "b": np.cos(np.arange(400) * 0.7), "c": np.arange(400) % 9})
THREADED_TARGET = (THREADED["a"] + 0.3 * THREADED["b"] + 0.05 * THREADED["c"] > 0.2).to_numpy()


@pytest.mark.parametrize("kind, method", [
    (RandomForestClassifier, "predict_proba"), (ExtraTreesClassifier, "predict_proba"),
    (RandomForestRegressor, "predict"), (RandomForestClassifier, "predict"),
])
def test_a_forest_on_threads_is_compiled_with_the_sum_of_one_job(kind, method):
    """scikit-learn's threads add the trees in the order they finish: its answers vary in the last
    bits from call to call. The kernel gives the tree-order sum (one job's answer), one of them."""
    target = THREADED_TARGET if kind is not RandomForestRegressor else THREADED["a"] * THREADED["c"]
    model = kind(n_estimators=40, min_samples_leaf=3, n_jobs=2, random_state=0).fit(THREADED, target)
    threaded_answers = [getattr(model, method)(THREADED) for _ in range(5)]
    compiled = CompiledTrees(model, method)(THREADED)
    with joblib.parallel_config(n_jobs=2):  # (a forest of n_jobs=None in a context of two jobs: the same)
        in_context = CompiledTrees(model.set_params(n_jobs=None), method)(THREADED)
    one_job = getattr(model.set_params(n_jobs=1), method)(THREADED)
    assert_same(compiled, one_job, method)
    assert_same(in_context, one_job, method)
    largest = 1.0 if method == "predict_proba" else np.abs(target).max()  # (a leaf's value, at most)
    for threaded in threaded_answers:  # (40 values added in another order: within 40 ulps of the largest)
        assert threaded.dtype == compiled.dtype and threaded.shape == compiled.shape
        if method == "predict_proba" or kind is RandomForestRegressor:
            np.testing.assert_allclose(threaded, compiled, rtol=0, atol=40 * np.finfo(float).eps * largest)


@pytest.mark.parametrize("kind, method", [(BaggingClassifier, "predict_proba"), (BaggingClassifier, "predict"),
                                          (BaggingRegressor, "predict")])
def test_bagging_on_several_jobs_adds_their_sums_as_scikit_learn_does(kind, method):
    """A Bagging model's jobs are its estimators in fixed chunks: each job's sum, then the jobs'
    sums added, so its answer is the same on every call, and the kernel gives it to the bit."""
    target = THREADED_TARGET if kind is BaggingClassifier else THREADED["a"] * THREADED["c"]
    model = kind(n_estimators=9, max_features=0.7, random_state=0).fit(THREADED, target)
    kernel = CompiledTrees(model, method)
    answers = {}
    for jobs in (1, 2, 3):
        with joblib.parallel_config(backend="threading", n_jobs=jobs):
            answers[jobs] = getattr(model, method)(THREADED)
            assert_same(kernel(THREADED), answers[jobs], f"{jobs} jobs")
            assert_same(kernel(THREADED.iloc[[5]]), getattr(model, method)(THREADED.iloc[[5]]), f"{jobs} jobs")
    assert sorted(kernel.ensemble.jobs) == [1, 2, 3]
    if kind is BaggingRegressor:  # (here the jobs' sums differ from one sum: the test tells them apart)
        assert not np.array_equal(answers[1], answers[3])


def test_adaboost_by_default_is_compiled_where_it_is_samme():
    """scikit-learn < 1.6 boosts with SAMME.R by default (log-probabilities, not compiled: named);
    later versions with SAMME, compiled."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (SAMME.R's deprecation)
        model = AdaBoostClassifier(n_estimators=5, random_state=0).fit(THREADED, THREADED_TARGET)
    kernel, reason = registry.kernel_for(model.predict_proba)
    if getattr(model, "algorithm", "SAMME") == "SAMME.R":
        assert kernel is None and "SAMME.R" in reason, reason
    else:
        assert_same(kernel(THREADED), model.predict_proba(THREADED))


def test_bagging_of_other_estimators_runs_as_written_and_says_why():
    model = BaggingClassifier(LogisticRegression(), n_estimators=3, random_state=0).fit(THREADED, THREADED_TARGET)
    kernel, reason = registry.kernel_for(model.predict_proba)
    assert kernel is None and "estimators other than DecisionTreeClassifier" in reason, reason


def test_a_forest_of_all_the_cores_is_compiled_in_a_decorated_function():
    model = RandomForestClassifier(n_estimators=30, min_samples_leaf=2, n_jobs=-1, random_state=0).fit(
        THREADED, THREADED_TARGET)

    def score(frame):
        return model.predict_proba(frame)[:, 1]

    optimized = willump.optimize(score)
    inputs = [THREADED, THREADED.iloc[[7]]]
    answers = [optimized(rows) for rows in inputs]
    table = optimized.explain_compilation()
    assert table["status"].tolist() == ["compiled"], table
    model.set_params(n_jobs=1)
    for rows, answer in zip(inputs, answers):
        assert_same(answer, score(rows))


def test_refitting_or_setting_a_parameter_rebuilds_the_kernel():
    model = GradientBoostingClassifier(n_estimators=3, random_state=0).fit(NAMED, NAMED_TARGET)
    kernel = CompiledTrees(model, "decision_function")
    assert kernel.still_valid()
    model.set_params(learning_rate=0.5)
    assert not kernel.still_valid()
    assert_same(CompiledTrees(model, "decision_function")(NAMED), model.decision_function(NAMED))


def test_a_forest_whose_list_of_trees_changes_rebuilds_the_kernel():
    model = RandomForestClassifier(n_estimators=4, random_state=0).fit(NAMED, NAMED_TARGET)
    kernel = CompiledTrees(model, "predict_proba")
    model.estimators_.pop()  # (in place: the list is the same object)
    assert not kernel.still_valid()
    assert_same(CompiledTrees(model, "predict_proba")(NAMED), model.predict_proba(NAMED))


def test_unsupported_models_are_explained():
    multi = DecisionTreeRegressor().fit(NAMED, np.column_stack([NAMED["amount"], NAMED["ratio"]]))
    custom_init = GradientBoostingRegressor(init=DecisionTreeRegressor(max_depth=1), n_estimators=2).fit(NAMED, NAMED["amount"])
    dates = NAMED.assign(count=pd.Categorical(pd.Timestamp("2026-01-01") + pd.to_timedelta(NAMED["count"], unit="D")))
    date_categories = HistGradientBoostingClassifier(max_iter=2, categorical_features="from_dtype").fit(
        dates, NAMED_TARGET)
    for model, why in ((multi, "several outputs"), (custom_init, "init estimator"),
                       (date_categories, "neither all numbers nor all strings")):
        kernel, reason = registry.kernel_for(model.predict)
        assert kernel is None and why in reason, reason


def test_sparse_input_runs_as_written_and_is_named_so():
    """A ColumnTransformer's sparse output (one-hot categories) reaches a forest: scikit-learn's call."""
    global sparse_pipeline
    frame = NAMED.assign(kind=np.where(NAMED["amount"] > 0, "high", "low"))
    sparse_pipeline = Pipeline([
        ("columns", ColumnTransformer([("kind", OneHotEncoder(), ["kind"]), ("amount", StandardScaler(), ["amount"])],
                                      sparse_threshold=1.0)),
        ("forest", RandomForestClassifier(n_estimators=5, random_state=0)),
    ]).fit(frame, NAMED_TARGET)

    def probability(df):
        return sparse_pipeline.predict_proba(df)[:, 1]

    optimized = willump.optimize(probability)
    assert_same(optimized(frame), probability(frame))
    status = optimized.explain_compilation().set_index("operator").loc["RandomForestClassifier.predict_proba", "status"]
    assert status == "plain Python: this input: input of type sparse matrix", status


def test_hist_gradient_boosting_categories_are_encoded_as_its_preprocessor_encodes_them():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.integers(0, 8, 300), rng.normal(size=300), rng.integers(0, 3, 300)]).astype(float)
    X[rng.random(300) < 0.1, 0] = np.nan
    y = (X[:, 0] % 3 == 1) ^ (X[:, 1] > 0)
    model = HistGradientBoostingClassifier(categorical_features=[0, 2], max_iter=10, random_state=0).fit(X, y)
    probe = np.array([[c, v, k] for c in (np.nan, -1.0, 0.0, -0.0, 2.0, 2.5, 7.0, 8.0, 300.0, 1e20) for v in (-1.0, 0.5, np.inf)
                      for k in (0.0, 1.0, 5.0)])
    check_answers(model, probe)
    with pytest.raises(Unsupported):  # the OrdinalEncoder raises on infinity
        CompiledTrees(model, "predict")(np.array([[np.inf, 0.0, 1.0]]))


LABELS = ["NAmes", "CollgCr", "OldTown", "Edwards", "Somerst", "Gilbert", "", "ñandú", "1Story", "None"]


@hypothesis_settings(max_examples=25)
@given(st.data())
def test_hist_gradient_boosting_string_categories_are_encoded_as_its_preprocessor_encodes_them(data):
    """``categorical_features="from_dtype"`` (the default) on pandas categorical columns of strings: given
    those, string or object columns, unknown labels, missing ones, other category orders, batches and rows."""
    d = data.draw
    seed = d(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    known = d(st.lists(st.sampled_from(LABELS), min_size=1, max_size=6, unique=True))
    labels = np.array(known + [None] * d(st.integers(0, 2)), dtype=object)
    frame = pd.DataFrame({"kind": pd.Categorical(rng.choice(labels, ROWS)), "size": rng.integers(0, GRID, ROWS) / 2,
                          "other": pd.Categorical(rng.choice(["a", "b", "c"], ROWS))})
    kind = d(st.sampled_from([HistGradientBoostingClassifier, HistGradientBoostingRegressor]))
    target = (frame["kind"].cat.codes.to_numpy() % 2) ^ (frame["size"].to_numpy() > 1)
    model = kind(max_iter=d(st.integers(1, 6)), max_leaf_nodes=d(st.sampled_from([3, 15])), min_samples_leaf=2,
                 categorical_features="from_dtype", random_state=seed).fit(frame, target)
    note(f"{model!r} categories {known}")
    pool = np.array(LABELS + [None, np.nan], dtype=object)  # (labels unknown to the model among them)
    rows = pd.DataFrame({"kind": rng.choice(pool, 30), "size": rng.choice([0.0, 1.5, 2.0, np.nan, 7.0], 30),
                         "other": rng.choice(np.array(["a", "c", "z", None], dtype=object), 30)})
    spelled = d(st.sampled_from(["category", "object", "str", "other order"]))
    if spelled == "category":
        rows = rows.astype({"kind": "category", "other": "category"})
    elif spelled == "str":
        rows = rows.astype({"kind": "str", "other": "str"})
    elif spelled == "other order":
        rows["kind"] = pd.Categorical(rows["kind"], categories=sorted(LABELS, reverse=True))
        rows["other"] = rows["other"].astype("category")
    for method in METHODS[kind]:
        kernel = CompiledTrees(model, method, d(st.sampled_from([SERIAL, TWO])))
        kernel.ensemble.minimum_rows = 1
        for X in (rows, rows.iloc[[0]], frame):
            expected = library_answer(model, method, X)
            if expected is None:
                with pytest.raises(Unsupported):
                    kernel(X)
            else:
                assert_same(kernel(X), expected, f"{method} {spelled}\n{X!r}")


# End to end: pipelines as users write them.
CREDIT = pd.DataFrame({
    "income": np.linspace(1e4, 2e5, 400), "age": (np.arange(400) * 7) % 60 + 18.0,
    "region": np.array(["north", "south", "east", "west", "centre"])[np.arange(400) % 5],
    "contract": np.array(["cash", "revolving"])[(np.arange(400) // 3) % 2],
})
CREDIT.loc[::17, "income"] = np.nan
DEFAULTED = ((CREDIT["age"] < 30) ^ (CREDIT["region"] == "east")).to_numpy()
PIPE = Pipeline([
    ("columns", ColumnTransformer([
        ("categories", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan), ["region", "contract"]),
        ("numbers", SimpleImputer(), ["income", "age"]),
    ])),
    ("model", HistGradientBoostingClassifier(categorical_features=[0, 1], max_iter=20, random_state=0)),
]).fit(CREDIT, DEFAULTED)
FOREST = RandomForestClassifier(n_estimators=20, min_samples_leaf=3, random_state=0).fit(
    CREDIT[["income", "age"]].fillna(0), DEFAULTED)


BAGGED = Pipeline([  # (scikit-learn's Bagging example: a decision tree bagged over half the rows and features)
    ("columns", ColumnTransformer([
        ("categories", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["region", "contract"]),
        ("numbers", SimpleImputer(strategy="median"), ["income", "age"]),
    ])),
    ("model", BaggingClassifier(DecisionTreeClassifier(), n_estimators=15, max_samples=0.5, max_features=0.5,
                                random_state=0)),
]).fit(CREDIT, DEFAULTED)


def bagged_predict(df):
    return BAGGED.predict_proba(df)[:, 1]


BOOSTED_STUMPS = samme_adaboost(DecisionTreeClassifier(max_depth=1), n_estimators=60, random_state=0).fit(
    CREDIT[["income", "age"]].fillna(0), DEFAULTED)  # (scikit-learn's "Two-class AdaBoost" example)


def stumps_predict(df):
    return BOOSTED_STUMPS.predict(df[["income", "age"]].fillna(0))


NATIVE = HistGradientBoostingClassifier(max_iter=20, categorical_features="from_dtype", random_state=0).fit(
    CREDIT.astype({"region": "category", "contract": "category"}), DEFAULTED)


def native_categories(df):
    return NATIVE.predict_proba(df)[:, 1]


def pipeline_predict(df):
    return PIPE.predict_proba(df)[:, 1]


def forest_predict(df):
    features = df[["income", "age"]].fillna(0)
    return FOREST.predict_proba(features)[:, 1]


@pytest.mark.parametrize("function,operator", [(pipeline_predict, "HistGradientBoostingClassifier.predict_proba"),
                                               (native_categories, "HistGradientBoostingClassifier.predict_proba"),
                                               (forest_predict, "RandomForestClassifier.predict_proba"),
                                               (bagged_predict, "BaggingClassifier.predict_proba"),
                                               (stumps_predict, "AdaBoostClassifier.predict")])
def test_pipelines_as_users_write_them_are_compiled_and_exact(function, operator):
    optimized = willump.optimize(function, workers=2)
    unseen = CREDIT.assign(region=CREDIT["region"].replace("west", "islands"))
    for rows in (CREDIT, unseen, CREDIT.iloc[[0]], unseen.iloc[[3]], CREDIT.iloc[[17]]):
        assert_same(optimized(rows), function(rows))
    table = optimized.explain_compilation()
    status = table.loc[table["operator"] == operator, "status"].tolist()
    assert status == ["compiled"], table


# Anomaly detection as scikit-learn's examples write it: an IsolationForest alone or after a scaler.
NUMBERS = CREDIT[["income", "age"]].fillna(0)
DETECTOR = IsolationForest(n_estimators=30, random_state=0).fit(NUMBERS)
SCALED_DETECTOR = Pipeline([("scale", StandardScaler()),
                            ("detect", IsolationForest(max_features=0.5, random_state=0))]).fit(NUMBERS)


def anomaly_scores(df):
    return DETECTOR.score_samples(df[["income", "age"]].fillna(0))


def outliers(df):
    return SCALED_DETECTOR.predict(df[["income", "age"]].fillna(0))


def scaled_scores(df):
    return SCALED_DETECTOR.score_samples(df[["income", "age"]].fillna(0))


@pytest.mark.parametrize("function,operator", [(anomaly_scores, "IsolationForest.score_samples"),
                                               (outliers, "IsolationForest.predict"),
                                               (scaled_scores, "IsolationForest.score_samples")])
def test_anomaly_detection_as_users_write_it_is_compiled_and_exact(function, operator):
    optimized = willump.optimize(function, workers=2)
    for rows in (CREDIT, CREDIT.iloc[[0]], CREDIT.iloc[[17]], CREDIT.assign(age=CREDIT["age"] * 1e3)):
        assert_same(optimized(rows), function(rows))
    table = optimized.explain_compilation()
    assert table.loc[table["operator"] == operator, "status"].tolist() == ["compiled"], table
    with pytest.raises(ValueError, match="outlier detector: call the function without fit"):
        optimized.fit(CREDIT, y=DEFAULTED, progress=False)
    assert_same(optimized(CREDIT), function(CREDIT))  # (nothing changed by the refused fit)


def test_an_isolation_forest_in_a_joblib_context_of_several_jobs_sums_in_tree_order():
    kernel = CompiledTrees(DETECTOR, "decision_function")
    with joblib.parallel_config(n_jobs=2):  # (its threads add the trees' depths in the order they finish)
        threaded = DETECTOR.decision_function(NUMBERS)
        compiled = kernel(NUMBERS)
    assert_same(compiled, DETECTOR.decision_function(NUMBERS))  # (one job: tree order)
    np.testing.assert_allclose(threaded, compiled, rtol=1e-12)




def test_the_status_counts_the_calls_that_ran_as_written_after_compiled_ones():
    """A row scikit-learn refuses (infinity) runs as written; later compiled calls keep saying so."""
    model = GradientBoostingRegressor(n_estimators=5, random_state=0).fit(NAMED, NAMED["amount"])

    def predict(frame):
        return model.predict(frame)

    optimized = willump.optimize(predict)
    refused = NAMED.iloc[:3].assign(amount=[np.inf, 1.0, 2.0])
    for _ in range(2):
        with pytest.raises(ValueError):
            optimized(refused)
    for rows in (NAMED, NAMED.iloc[[1]], NAMED.iloc[[2]]):
        assert_same(optimized(rows), predict(rows))
    status = optimized.explain_compilation()["status"].item()
    assert status.startswith("compiled, 2 of 5 calls plain Python (the last: this input: "), status
