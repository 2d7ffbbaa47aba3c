"""XGBoost models through the tree kernels give XGBoost's answers to the bit (values, dtype, shape):
random models (objectives, classes, depths, missing values, single-leaf trees, extreme scales) against its
own ``predict_proba`` / ``predict`` on rows with NaN, infinities and values float32 cannot hold."""

import importlib
import json
import os
import threading
import time
import warnings
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import willump
from willump.compile import forest as forest_kernel
from willump.compile import registry
from willump.compile.parallel import Workers

try:
    import xgboost
except ImportError:  # an optional dependency: pip install willump[xgboost]
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("xgboost is not installed (pip install willump[xgboost])", allow_module_level=True)
from willump.compile.forms import Unsupported  # noqa: E402
from willump.compile.tables import CompiledSelection  # noqa: E402
from willump.compile.xgbtrees import CompiledXGBoost, CompiledXGBoostBooster, DMatrixOf  # noqa: E402

compiled_selection = CompiledSelection.defer

from answers import assert_compiled_as_written, assert_same_outcome, outcome  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
N_FEATURES, ROWS = 4, 300
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e300, -1e300, 1e-300, 5e-324, 3.4e38, 1.0, -1.0, 0.5]
LAYOUTS = [{"WORDS_A_TREE": forest_kernel.WORDS_A_TREE}, {"WORDS_A_TREE": 0}, {"LEVEL_NS": 1e200}]
RANKING = ["rank:ndcg", "rank:pairwise", "rank:map"]
REGRESSION = ["reg:squarederror", "reg:squaredlogerror", "reg:pseudohubererror", "reg:absoluteerror", "reg:logistic",
              "count:poisson", "reg:gamma", "reg:tweedie"]


CLASSIFIER_METHODS = ["predict_proba", "predict"]


@st.composite
def models(draw):
    """(fitted model, its method, rows to answer) of a random XGBoost model."""
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(ROWS, N_FEATURES)) * draw(st.sampled_from([1.0, 1e-30, 1e30]))
    X[rng.random(X.shape) < draw(st.sampled_from([0.0, 0.1, 0.4]))] = np.nan
    X[rng.random(X.shape) < 0.1] = 0.0
    signal = np.nan_to_num(X[:, 0]) + (np.nan_to_num(X[:, 1]) > 0) + rng.normal(size=ROWS)
    params = {"n_estimators": draw(st.integers(1, 20)), "max_depth": draw(st.sampled_from([1, 3, 6, 10])),
              "learning_rate": draw(st.sampled_from([0.05, 0.3, 1.0])), "random_state": seed, "n_jobs": 1,
              "min_child_weight": draw(st.sampled_from([0.0, 1.0, 1000.0]))}  # (1000: trees of one leaf)
    if draw(st.booleans()):
        params["base_score"] = draw(st.sampled_from([0.1, 0.5, 0.73]))
    objective = draw(st.sampled_from(["binary:logistic", "multi:softprob", *REGRESSION, *RANKING]))
    if objective == "binary:logistic":
        model, method = xgboost.XGBClassifier(**params).fit(X, signal > 0.5), draw(st.sampled_from(CLASSIFIER_METHODS))
    elif objective == "multi:softprob":
        classes = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, draw(st.integers(3, 5)))[1:-1]))
        model, method = xgboost.XGBClassifier(**params).fit(X, classes), draw(st.sampled_from(CLASSIFIER_METHODS))
    elif objective in RANKING:  # (queries of 20 rows; relevance grades, or 0/1 for rank:map)
        grades = np.digitize(signal, [0.0, 1.0] if objective == "rank:map" else [-1.0, 0.0, 1.0, 2.0])
        model = xgboost.XGBRanker(objective=objective, **params).fit(X, np.minimum(grades, 1) if objective == "rank:map"
                                                                     else grades, qid=np.arange(ROWS) // 20)
        method = "predict"
    else:
        positive = (np.argsort(np.argsort(signal)) + 1) / (ROWS + 1)  # (in (0, 1): every objective's targets)
        model, method = xgboost.XGBRegressor(objective=objective, **params).fit(X, positive), "predict"
    extremes = rng.choice(np.array(SPECIAL), size=(40, N_FEATURES))
    rows = np.vstack([X, extremes, np.where(rng.random((40, N_FEATURES)) < 0.5, extremes, X[:40])])
    note(f"{type(model).__name__} {params}")
    return model, method, rows


def assert_same(ours: np.ndarray, theirs: np.ndarray) -> None:
    np.testing.assert_array_equal(ours, theirs, strict=True)
    assert ours.tobytes() == np.ascontiguousarray(theirs).tobytes()


@SETTINGS
@given(models())
def test_the_kernels_give_xgboosts_answers(model):
    model, method, rows = model
    expected = getattr(model, method)(rows)
    for layout in LAYOUTS:  # (as the kernel chooses, every tree walked, every tree by bits)
        with mock.patch.multiple(forest_kernel, **layout):
            kernel = CompiledXGBoost(model, method, Workers(2))
        kernel.ensemble.minimum_rows = 64  # (so that two workers split the rows)
        assert_same(kernel(rows), expected)
        for r in (0, ROWS + 1, len(rows) - 1):
            assert_same(kernel(rows[r : r + 1]), getattr(model, method)(rows[r : r + 1]))


FRAME = pd.DataFrame(np.random.default_rng(4).normal(size=(400, 3)), columns=["a", "b", "c"])
MODEL = xgboost.XGBClassifier(n_estimators=25, max_depth=4, random_state=0).fit(FRAME, FRAME["a"] + FRAME["b"] > 0)


def scores(df):
    features = df[["a", "b", "c"]]
    return MODEL.predict_proba(features)[:, 1]


def test_early_stopping_scores_as_its_best_iteration():
    y = FRAME["a"] - FRAME["b"] ** 2 > 0
    model = xgboost.XGBClassifier(n_estimators=200, learning_rate=0.5, early_stopping_rounds=3, random_state=0)
    model.fit(FRAME.iloc[:300], y[:300], eval_set=[(FRAME.iloc[300:], y[300:])], verbose=False)
    assert model.best_iteration + 1 < model.get_booster().num_boosted_rounds()
    assert_same(CompiledXGBoost(model, "predict_proba")(FRAME), model.predict_proba(FRAME))


def _range_models():
    """(model, its methods) of six rounds: binary, three classes, a regression with a link."""
    X = FRAME.to_numpy()
    y = (FRAME["a"] > 0).to_numpy(int) + (FRAME["b"] > 0.5).to_numpy(int)  # (0, 1 or 2)
    return [(xgboost.XGBClassifier(n_estimators=6, max_depth=3, random_state=0).fit(X, y > 0), CLASSIFIER_METHODS),
            (xgboost.XGBClassifier(n_estimators=6, max_depth=3, random_state=0).fit(X, y), CLASSIFIER_METHODS),
            (xgboost.XGBRegressor(n_estimators=6, objective="count:poisson", random_state=0).fit(X, y), ["predict"])]


RANGES = [(b, e) for e in range(1, 7) for b in range(e)] + [(3, 0), (0, 0), [1, 4], (np.int64(2), np.int32(5))]


def test_iteration_ranges_and_margins_give_xgboosts_answers():
    """Each range of rounds (an end of 0: all of them, as XGBoost reads it), and the margins
    ``predict(output_margin=True)`` gives, to the bit; ranges XGBoost refuses or scores otherwise
    (past its rounds, reversed, empty, not two ints) run as its call."""
    rows = np.vstack([FRAME.to_numpy()[:50], np.array(SPECIAL[:9]).reshape(3, 3)])
    for model, methods in _range_models():
        for method in methods:
            kernel = CompiledXGBoost(model, method)
            for iteration_range in RANGES:
                expected = getattr(model, method)(rows, iteration_range=iteration_range)
                assert_same(kernel(rows, iteration_range=iteration_range), expected)
                assert_same(kernel(rows[:1], iteration_range=iteration_range), expected[:1])
            if method == "predict":
                for iteration_range in (None, (1, 4)):
                    expected = model.predict(rows, output_margin=True, iteration_range=iteration_range)
                    assert_same(kernel(rows, output_margin=True, iteration_range=iteration_range), expected)
                    assert_same(kernel(rows[:1], output_margin=True, iteration_range=iteration_range), expected[:1])
            assert kernel._ensemble_of_range((1, 4)) is kernel._ensemble_of_range([1, 4])  # (built once)
            for refused in [(0, 7), (4, 2), (3, 3), (True, 4), (0.0, 4), (-1, 3), (0, 2, 4), 5]:
                with pytest.raises(Unsupported, match="iteration_range"):
                    kernel(rows, iteration_range=refused)
            with pytest.raises(Unsupported, match="base_margin"):
                kernel(rows, base_margin=np.zeros(len(rows)))


def early_stopped_scores(df):
    """Scores at the best iteration, as notebooks that stopped early write it."""
    return EARLY_STOPPED.predict_proba(df, iteration_range=(0, EARLY_STOPPED.best_iteration + 1))[:, 1]


EARLY_STOPPED = xgboost.XGBClassifier(n_estimators=200, learning_rate=0.5, early_stopping_rounds=3, random_state=0)
EARLY_STOPPED.fit(FRAME.iloc[:300], (FRAME["a"] - FRAME["b"] ** 2 > 0)[:300],
                  eval_set=[(FRAME.iloc[300:], (FRAME["a"] - FRAME["b"] ** 2 > 0)[300:])], verbose=False)


def test_a_call_with_the_best_iteration_range_runs_the_kernel():
    rounds = EARLY_STOPPED.get_booster().num_boosted_rounds()
    assert EARLY_STOPPED.best_iteration + 1 < rounds
    kernel = CompiledXGBoost(EARLY_STOPPED, "predict_proba")
    for iteration_range in ((2, 0), (0, rounds), (1, rounds)):  # (an end of 0: the best iteration's)
        assert_same(kernel(FRAME, iteration_range=iteration_range),
                    EARLY_STOPPED.predict_proba(FRAME, iteration_range=iteration_range))
    assert_compiled_as_written(early_stopped_scores, [FRAME, FRAME.iloc[[7]]], "XGBClassifier.predict_proba",
                               assert_same)


def test_a_function_as_written_runs_the_kernel():
    assert_compiled_as_written(scores, [FRAME, FRAME.iloc[[3]], FRAME.iloc[::-1]], "XGBClassifier.predict_proba",
                               assert_same)


def test_models_the_kernels_do_not_reproduce_run_as_xgboost_and_say_why():
    y = np.arange(len(FRAME)) % 2
    hinge = xgboost.XGBClassifier(n_estimators=3, objective="binary:hinge").fit(FRAME, y)
    with pytest.raises(Unsupported, match="binary:hinge"):
        CompiledXGBoost(hinge, "predict_proba")
    quantiles = xgboost.XGBRegressor(n_estimators=3, objective="reg:quantileerror", quantile_alpha=[0.1, 0.9])
    with pytest.raises(Unsupported, match="reg:quantileerror"):
        CompiledXGBoost(quantiles.fit(FRAME, y), "predict")
    for strategy in ("one_output_per_tree", "multi_output_tree"):
        two_targets = xgboost.XGBRegressor(n_estimators=3, multi_strategy=strategy).fit(FRAME, np.column_stack([y, 1 - y]))
        with pytest.raises(Unsupported, match="several targets"):
            CompiledXGBoost(two_targets, "predict")

    def hinge_scores(df):
        return hinge.predict_proba(df)

    optimized = willump.optimize(hinge_scores)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(optimized(FRAME), hinge_scores(FRAME))
    status = optimized.explain_compilation()["status"].iloc[0]
    assert "binary:hinge" in status, status


def test_a_ranker_given_its_qid_column_runs_as_xgboost():
    """XGBRanker's predict drops a frame's ``qid`` column (the query of each row) before scoring."""
    qid = np.arange(len(FRAME)) // 20
    ranker = xgboost.XGBRanker(n_estimators=5).fit(FRAME, np.digitize(FRAME["a"], [-1.0, 0.0, 1.0]), qid=qid)
    kernel = CompiledXGBoost(ranker, "predict")
    assert_same(kernel(FRAME), ranker.predict(FRAME))
    with pytest.raises(Unsupported, match="qid"):
        kernel(FRAME.assign(qid=qid))


def test_other_names_or_order_and_wrong_widths_run_as_xgboost():
    kernel = CompiledXGBoost(MODEL, "predict_proba")
    with pytest.raises(Unsupported):
        kernel(FRAME[["b", "a", "c"]])  # (XGBoost raises: feature names mismatch)
    with pytest.raises(Unsupported):
        kernel(FRAME.to_numpy()[:, :2])


def test_arrays_and_frames_whatever_the_names_seen_in_fit_are_compiled():
    """XGBoost reads an array given to a model fitted on names, and a frame given to one fitted
    without, by position and without a warning."""
    unnamed = xgboost.XGBClassifier(n_estimators=5, random_state=0).fit(FRAME.to_numpy(), FRAME["a"] > 0)
    for model, X in ((MODEL, FRAME.to_numpy()), (unnamed, FRAME), (unnamed, FRAME.iloc[[4]])):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert_same(CompiledXGBoost(model, "predict_proba")(X), model.predict_proba(X))


WIDE_INTS = np.array([0, 2**54, 2**54 + 2**31, 2**55, 2**54 + 2**30 + 1, -(2**63), 2**62 + 3], dtype=np.int64)


@pytest.mark.parametrize("rows", [slice(None), [4], [0, 4]])
def test_frame_columns_are_read_as_floats_as_xgboost_reads_them(rows):
    """Each column cast straight to float32 (2**54 + 2**30 + 1 is 2**54 + 2**31 so, 2**54 through a
    double, as pandas' interleaving of int64 beside float64 would make it), bools as 0 and 1,
    1e39 infinity: from a frame and from its selected columns."""
    rng = np.random.default_rng(0)
    train = pd.DataFrame({"a": WIDE_INTS[:4].repeat(20), "b": rng.normal(size=80), "c": rng.random(80) < 0.5,
                          "d": rng.integers(0, 9, 80).astype(np.uint8)})
    model = xgboost.XGBClassifier(n_estimators=4, max_depth=3).fit(train, (train.a >= 2**54 + 2**31) ^ train.c)
    frame = pd.DataFrame({"a": WIDE_INTS, "b": [0.1, 1e39, -1e39, np.nan, 0.0, 2.5, -0.3], "c": [True, False] * 3 + [True],
                          "d": np.arange(7, dtype=np.uint8)}).iloc[rows]
    kernel = CompiledXGBoost(model, "predict_proba")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected = model.predict_proba(frame)
        assert_same(kernel(frame), expected)
        assert_same(kernel(compiled_selection(frame.assign(other="x"), ["a", "b", "c", "d"])), expected)


def test_half_precision_rows_are_read_as_xgboost_reads_them():
    rows = np.vstack([FRAME.to_numpy(), [[np.nan, np.inf, 65504.0]]]).astype(np.float16)
    assert_same(CompiledXGBoost(MODEL, "predict_proba")(rows), MODEL.predict_proba(rows))


def test_a_missing_value_other_than_nan_runs_as_xgboost():
    zero_missing = xgboost.XGBClassifier(n_estimators=5, missing=0.0).fit(FRAME.round(1), FRAME["a"] > 0)
    with pytest.raises(Unsupported, match="missing=0.0"):
        CompiledXGBoost(zero_missing, "predict_proba")


def test_pruned_trees_are_scored_without_their_unreached_nodes():
    """The exact method with a large gamma prunes splits back; the JSON keeps their nodes."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    model = xgboost.XGBRegressor(n_estimators=20, tree_method="exact", gamma=5.0, max_depth=6)
    model.fit(X, X[:, 0] + 0.1 * rng.normal(size=2000))
    trees = json.loads(model.get_booster().save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]
    assert sum(int(tree["tree_param"]["num_deleted"]) for tree in trees) > 0
    rows = np.vstack([X[:300], np.full((1, 5), np.nan)])
    assert_same(CompiledXGBoost(model, "predict")(rows), model.predict(rows))


def test_threads_meeting_xgboost_first_together_all_get_its_kernel(monkeypatch):
    """The optional library's kernels are registered once; a thread arriving while another imports
    them waits instead of being told the model is not compiled."""
    for key in [key for key in registry.METHOD_KERNELS if key[0].__module__.startswith("xgboost")]:
        monkeypatch.delitem(registry.METHOD_KERNELS, key)
    monkeypatch.setitem(registry.OPTIONAL_MODULES, "xgboost", "willump.compile.xgbtrees")
    slow_import = importlib.import_module

    def import_module(name):
        time.sleep(0.2)
        return slow_import(name)

    monkeypatch.setattr(registry.importlib, "import_module", import_module)
    found = [None, None]

    def find(k):
        found[k] = registry.kernel_for(MODEL.predict_proba)

    threads = [threading.Thread(target=find, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(isinstance(kernel, CompiledXGBoost) and why is None for kernel, why in found), found


def test_xgboosts_other_classes_are_named_as_xgboosts():
    """A class willump does not compile runs as written; the status names the library (LightGBM's
    Booster, a class of the same name as XGBoost's, is compiled)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    forest = xgboost.XGBRFClassifier(n_estimators=3, max_depth=2).fit(frame, frame["a"] > 0)

    def predict(df):
        return forest.predict_proba(df)

    optimized = willump.optimize(predict)
    np.testing.assert_array_equal(optimized(frame), predict(frame))
    statuses = optimized.explain_compilation()["status"].str.cat(sep=" | ")
    assert "xgboost's XGBRFClassifier.predict_proba is not an operator willump compiles" in statuses, statuses


# XGBoost's own API: xgboost.train's Booster, DMatrix, inplace_predict.

@SETTINGS
@given(models(), st.sampled_from([False, True]))
def test_the_booster_api_gives_xgboosts_answers(model, margin):
    """``booster.predict(DMatrix(X))`` and ``booster.inplace_predict(X)`` (values or margins) of random
    boosters, to the bit, batches and single rows."""
    model, _, rows = model
    booster = model.get_booster()
    predict = CompiledXGBoostBooster(booster, "predict", Workers(2))
    inplace = CompiledXGBoostBooster(booster, "inplace_predict")
    predict.ensemble.minimum_rows = 64  # (so that two workers split the rows)
    for X in (rows, rows[:1], rows[-1:], rows[:ROWS]):
        try:
            expected = booster.predict(xgboost.DMatrix(X), output_margin=margin)
        except xgboost.core.XGBoostError:  # (a DMatrix refuses infinities, unlike inplace_predict)
            with pytest.raises(Unsupported):
                predict(DMatrixOf(X, {}), output_margin=margin)
        else:
            assert_same(predict(DMatrixOf(X, {}), output_margin=margin), expected)
        kind = "margin" if margin else "value"
        assert_same(inplace(X, predict_type=kind), booster.inplace_predict(X, predict_type=kind))


NATIVE_TRAIN = xgboost.DMatrix(FRAME.iloc[:300], label=FRAME["a"].iloc[:300] * FRAME["b"].iloc[:300] > 0)
NATIVE_VALID = xgboost.DMatrix(FRAME.iloc[300:], label=FRAME["a"].iloc[300:] * FRAME["b"].iloc[300:] > 0)
NATIVE = xgboost.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.5}, NATIVE_TRAIN, num_boost_round=200,
                       evals=[(NATIVE_VALID, "valid")], early_stopping_rounds=3, verbose_eval=False)
NUMERIC = xgboost.train({"objective": "multi:softprob", "num_class": 3}, xgboost.DMatrix(
    FRAME.to_numpy(), label=np.digitize(FRAME["a"], [-0.5, 0.5])), num_boost_round=8)  # (no feature names)


def native_predict(df):
    return NATIVE.predict(xgboost.DMatrix(df))


def native_dmatrix_bound(df):
    dtest = xgboost.DMatrix(df[["a", "b", "c"]], nthread=1)
    return NATIVE.predict(dtest, iteration_range=(0, 10))


def native_inplace(df):
    return NATIVE.inplace_predict(df, predict_type="margin")


def numeric_classes(df):
    return NUMERIC.predict(xgboost.DMatrix(df.to_numpy()))


def numpy_to_named(df):  # (XGBoost raises: the DMatrix has no feature names, the booster has)
    return NATIVE.predict(xgboost.DMatrix(df.to_numpy()))


def reordered(df):  # (XGBoost raises: the names are not the booster's, in order)
    return NATIVE.inplace_predict(df[["b", "a", "c"]])


def changed_between(df):  # (the frame changes after the DMatrix copied it)
    data = xgboost.DMatrix(df)
    df["a"] = 0.0
    return NATIVE.predict(data)


@pytest.mark.parametrize("function", [native_predict, native_dmatrix_bound, native_inplace, numeric_classes,
                                      numpy_to_named, reordered, changed_between])
def test_functions_of_the_booster_api_answer_as_written(function):
    optimized = willump.optimize(function)
    for rows in (FRAME, FRAME.iloc[[7]], FRAME.iloc[::-3]):
        for _ in range(2):
            assert_same_outcome(outcome(optimized, rows.copy()), outcome(function, rows.copy()))
    if function in (native_predict, native_dmatrix_bound, native_inplace, numeric_classes):
        table = optimized.explain_compilation()
        assert (table["status"] == "compiled").all(), table.to_string()


def test_every_round_is_the_booster_default():
    """``xgboost.train`` with early stopping: ``Booster.predict`` scores every round (the scikit-learn
    API, its best iteration)."""
    assert NATIVE.best_iteration + 1 < NATIVE.num_boosted_rounds()
    kernel = CompiledXGBoostBooster(NATIVE, "predict")
    assert_same(kernel(DMatrixOf(FRAME, {})), NATIVE.predict(xgboost.DMatrix(FRAME)))
    assert not np.array_equal(NATIVE.predict(xgboost.DMatrix(FRAME)),
                              NATIVE.predict(xgboost.DMatrix(FRAME), iteration_range=(0, NATIVE.best_iteration + 1)))


def test_a_booster_trained_further_is_read_again():
    booster = xgboost.train({"objective": "reg:squarederror"}, NATIVE_TRAIN, num_boost_round=3)
    kernel = CompiledXGBoostBooster(booster, "inplace_predict")
    assert kernel.still_valid()
    booster.update(NATIVE_TRAIN, iteration=3)
    assert not kernel.still_valid()
    assert_same(CompiledXGBoostBooster(booster, "inplace_predict")(FRAME), booster.inplace_predict(FRAME))

@pytest.mark.parametrize("api", ["scikit-learn", "booster"])
def test_a_saved_function_carries_xgboosts_arrays(tmp_path, api):
    """As LightGBM's (``test_persistence_trees``): ``willump.load`` does not read the trees again."""
    from test_persistence_trees import _kernels, _reloaded

    rng = np.random.default_rng(5)
    X = rng.normal(size=(ROWS, N_FEATURES))
    model = xgboost.XGBClassifier(n_estimators=15, max_depth=3).fit(X, (X[:, 0] > 0).astype(int))
    booster = model.get_booster()

    def probabilities(rows):
        return model.predict_proba(rows)[:, 1]

    def predictions(rows):
        return booster.inplace_predict(rows)

    predict = probabilities if api == "scikit-learn" else predictions
    optimized = willump.optimize(predict)
    optimized.save(tmp_path / "xgboost.willump")
    assert np.array_equal(willump.load(tmp_path / "xgboost.willump")(X), predict(X))
    rebuilt, state = _reloaded(optimized._shipped(carry=True)[1])
    [(owner, _, ensemble)] = state["carried"]
    assert type(owner) is (xgboost.XGBClassifier if api == "scikit-learn" else xgboost.Booster)
    assert [kernel.ensemble for kernel in _kernels(rebuilt)] == [ensemble] * len(_kernels(rebuilt))
    assert np.array_equal(rebuilt(X), predict(X))
