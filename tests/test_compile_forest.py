"""The tree kernels give LightGBM's predictions to the bit (values, dtype, shape), lleaves-style:
random models (objectives, sizes, categorical splits, missing-value options, single-leaf trees,
random forests) against ``Booster.predict`` on rows with NaN, inf, tiny and extreme values."""

import pickle
import warnings
from unittest import mock

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import willump
from willump.compile import forest as forest_kernel
from willump.compile import trees as trees_kernel
from willump.compile.forms import Unsupported
from willump.compile.parallel import Workers
from willump.compile.trees import CompiledBooster, CompiledBoosterPredict

from answers import assert_compiled_as_written

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning", "ignore::UserWarning")
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
N_FEATURES, ROWS = 4, 160
# values that take every way through a node: missing, zero and near zero, beyond any threshold,
# category codes that are negative, fractional, beyond the bitsets or beyond int32
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-36, -1e-36, 1e-35, 1.0000000180025095e-35, -0.5, 0.5, 1e300,
           -1e300, 31.0, 32.0, 33.9, 64.0, 1000.0, 2.0**31, 2.0**31 - 1, -(2.0**31), -1.0, 5e-324]
OBJECTIVES = {
    "binary": {"objective": "binary"},
    "binary sigmoid": {"objective": "binary", "sigmoid": 0.5},
    "multiclass": {"objective": "multiclass", "num_class": 3},
    "multiclassova": {"objective": "multiclassova", "num_class": 3},
    "cross_entropy": {"objective": "cross_entropy"},
    "cross_entropy_lambda": {"objective": "cross_entropy_lambda"},
    "regression": {"objective": "regression"},
    "regression sqrt": {"objective": "regression", "reg_sqrt": True},
    "huber": {"objective": "huber"},
    "quantile": {"objective": "quantile", "alpha": 0.3},
    "poisson": {"objective": "poisson"},
    "gamma": {"objective": "gamma"},
    "tweedie": {"objective": "tweedie", "tweedie_variance_power": 1.4},
    "lambdarank": {"objective": "lambdarank"},
    "rank_xendcg": {"objective": "rank_xendcg"},
}
RANKING = ("lambdarank", "rank_xendcg")
QUERY = 20  # rows a query, for the ranking objectives


def labels(objective: str, X: np.ndarray, rng) -> np.ndarray:
    signal = np.nan_to_num(X[:, 1]) + np.nan_to_num(X[:, 2]) * 0.5 + rng.normal(size=len(X))
    if objective.startswith(("binary", "cross_entropy")):
        return (signal > 0).astype(float)
    if objective.startswith("multiclass"):
        return np.digitize(signal, [-0.5, 0.5]).astype(float)
    if objective in ("poisson", "gamma", "tweedie"):
        return np.abs(signal) + (0.1 if objective == "gamma" else 0.0)
    if objective in RANKING:  # relevance grades
        return np.digitize(signal, [-1.0, 0.0, 1.0, 2.0]).astype(float)
    return signal * 10


@st.composite
def models(draw):
    """(booster, rows to predict) of a random model."""
    objective = draw(st.sampled_from(sorted(OBJECTIVES)))
    seed = draw(st.integers(0, 2**16))
    categorical = draw(st.sampled_from([[], [0], [0, 3]]))
    params = {
        **OBJECTIVES[objective], "verbose": -1, "seed": seed, "num_threads": 1,
        # (trees of more than one word of leaves take several words)
        "num_leaves": draw(st.integers(2, 24) | st.integers(60, 90)), "max_depth": draw(st.sampled_from([-1, 1, 2, 5])),
        "min_data_in_leaf": draw(st.sampled_from([1, 5, 20, 400])),  # 400 rows: trees of one leaf
        "zero_as_missing": draw(st.booleans()), "use_missing": draw(st.booleans()),
        "min_data_per_group": 1, "cat_smooth": 1.0, "max_cat_to_onehot": draw(st.sampled_from([4, 64])),
        "boosting": draw(st.sampled_from(["gbdt", "gbdt", "rf", "dart"])),
    }
    if params["boosting"] == "rf":
        params.update(bagging_freq=1, bagging_fraction=0.7)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(ROWS, N_FEATURES)) * draw(st.sampled_from([1.0, 1e-30, 1e30]))
    X[rng.random(X.shape) < draw(st.sampled_from([0.0, 0.1, 0.3]))] = np.nan
    X[rng.random(X.shape) < 0.15] = 0.0
    for column in categorical:
        X[:, column] = rng.integers(0, draw(st.sampled_from([3, 40, 70])), ROWS)
    rounds = draw(st.integers(1, 8))
    queries = [QUERY] * (ROWS // QUERY) if objective in RANKING else None
    data = lgb.Dataset(X, labels(objective, X, rng), group=queries, categorical_feature=categorical)
    booster = lgb.train(params, data, num_boost_round=rounds)
    special = np.array(SPECIAL)
    extremes = rng.choice(special, size=(60, N_FEATURES))
    rows = np.vstack([X, extremes, np.where(rng.random((40, N_FEATURES)) < 0.5, extremes[:40], X[:40])])
    note(f"{objective} {params} rounds={rounds}")
    return booster, rows


# how the kernel scores a forest's trees: as it chooses; every tree walked; every tree it can by bits
LAYOUTS = [{"WORDS_A_TREE": forest_kernel.WORDS_A_TREE}, {"WORDS_A_TREE": 0}, {"LEVEL_NS": 1e200}]


def assert_same(ours: np.ndarray, theirs: np.ndarray) -> None:
    np.testing.assert_array_equal(ours, theirs, strict=True)


@SETTINGS
@given(models(), st.integers(-1, 9))
def test_forest_gives_lightgbms_predictions(model, iterations):
    booster, rows = model
    for layout in LAYOUTS:
        with mock.patch.multiple(forest_kernel, **layout):
            forest = trees_kernel.lightgbm_ensemble(booster, iterations)
        for raw in (False, True):
            expected = booster.predict(rows, num_iteration=iterations, raw_score=raw)
            batch = forest.predict(rows, raw=raw)
            assert_same(batch.reshape(expected.shape), expected)
            for r in (0, len(rows) - 1, ROWS + 3):
                assert_same(forest.predict(rows[r : r + 1], raw=raw).reshape(expected[r].shape), expected[r])


@settings(SETTINGS, max_examples=15)
@given(models())
def test_batches_split_over_workers_give_the_same_bits(model):
    booster, rows = model
    forest = trees_kernel.lightgbm_ensemble(booster)
    many = np.tile(rows, (6, 1))
    forest.minimum_rows = 512  # (enough rows for two parts)
    assert len(Workers(2).split(len(many), forest.minimum_rows)) == 2
    expected = booster.predict(many)
    assert_same(forest.predict(many, Workers(2)).reshape(expected.shape), expected)



@settings(SETTINGS, max_examples=15)
@given(models())
def test_a_pickled_ensemble_holds_its_buffer_once_and_scores_the_same(model):
    """What a saved function carries: the buffer alone, the forest's arrays its views again."""
    booster, rows = model
    forest = trees_kernel.lightgbm_ensemble(booster)
    pickled = pickle.dumps(forest)
    copy = pickle.loads(pickled)
    assert len(pickled) < forest._blob.nbytes + 2_000
    assert all(np.shares_memory(array, copy._blob) for array in copy.forest if array.size)
    for field, array in zip(forest.forest._fields, forest.forest):
        assert_same(getattr(copy.forest, field), array)
    assert_same(copy.predict(rows), booster.predict(rows).reshape(len(rows), -1))
    assert_same(copy.predict(rows[:1]), forest.predict(rows[:1]))

def test_trees_scored_by_bits_beside_trees_walked():
    """A model whose trees are in turn scored by bits (of one word and several) and walked sums both in order."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(3000, N_FEATURES))
    X[rng.random(X.shape) < 0.2] = np.nan
    y = labels("regression", X, rng)
    params = {"objective": "regression", "min_data_in_leaf": 1, "verbose": -1, "num_threads": 1}
    booster = None
    for leaves in (400, 8, 90, 300, 40):
        booster = lgb.train({**params, "num_leaves": leaves}, lgb.Dataset(X, y), num_boost_round=2, init_model=booster)
    sizes = [tree["num_leaves"] for tree in booster.dump_model()["tree_info"]]
    assert min(sizes) <= forest_kernel.WORD < 90 <= forest_kernel.WORDS_A_TREE * forest_kernel.WORD < max(sizes)
    with mock.patch.multiple(forest_kernel, **LAYOUTS[2]):
        forest = trees_kernel.lightgbm_ensemble(booster)
    words = forest.forest.trees[:, 3]  # (a tree's first word; -1: walked)
    assert (words >= 0).any() and (words < 0).any()
    rows = np.vstack([X, rng.choice(np.array(SPECIAL), size=(200, N_FEATURES))])
    expected = booster.predict(rows)
    assert_same(forest.predict(rows)[:, 0], expected)
    assert_same(forest.predict(rows, Workers(2))[:, 0], expected)
    for r in (0, 1, len(rows) - 1):
        assert_same(forest.predict(rows[r : r + 1])[:, 0], expected[r : r + 1])


def test_walked_blocks_of_a_batch_each_read_their_own_missing_values():
    """Trees walked in phases (deeper than ``PHASE``) over a batch of several blocks of rows, not a
    whole number of them, only one block holding NaN (a block skips the NaN test when it has none)."""
    rng = np.random.default_rng(12)
    X = rng.normal(size=(4000, N_FEATURES))
    X[rng.random(X.shape) < 0.1] = np.nan
    params = {"objective": "regression", "num_leaves": 200, "min_data_in_leaf": 1, "verbose": -1, "num_threads": 1}
    booster = lgb.train(params, lgb.Dataset(X, labels("regression", X, rng)), num_boost_round=5)
    with mock.patch.multiple(forest_kernel, WORDS_A_TREE=0):
        forest = trees_kernel.lightgbm_ensemble(booster)
    assert (forest.forest.trees[:, 3] < 0).all() and forest.forest.trees[:, 1].max() > forest_kernel.PHASE
    rows = np.nan_to_num(rng.normal(size=(2 * forest_kernel.ROWS_PER_BLOCK + 77, N_FEATURES)))
    rows[forest_kernel.ROWS_PER_BLOCK + 5 :: 7, 1] = np.nan  # (the second block and the rest)
    expected = booster.predict(rows)
    forest.minimum_rows = 100
    for workers in (None, Workers(2)):
        assert_same(forest.predict(rows, workers)[:, 0], expected)


def test_batches_score_small_trees_by_bits_and_walk_large_ones():
    """A batch scores trees by bits when the fitted costs say it is cheaper (the splits and words of
    trees of 15 leaves, over 5 features or 200) and walks them when not (trees of 255 leaves and depth
    8: 254 splits against 8 levels); single rows by bits either way."""
    rng = np.random.default_rng(5)
    layouts = {}
    for width, leaves in ((5, 15), (200, 15), (20, 255)):
        X = rng.normal(size=(3000, width))
        params = {"objective": "regression", "num_leaves": leaves, "max_depth": 8, "min_data_in_leaf": 2,
                  "verbose": -1, "num_threads": 1}
        booster = lgb.train(params, lgb.Dataset(X, X.sum(axis=1) + rng.normal(size=3000)), num_boost_round=100)
        ensemble = trees_kernel.lightgbm_ensemble(booster)
        layouts[width, leaves] = ensemble.forest.trees[:, 3]  # (first words in a batch; -1: walked)
        assert (ensemble.forest.trees[:, 6] >= 0).all()  # (a single row: by bits)
        assert_same(ensemble.predict(X[:500])[:, 0], booster.predict(X[:500]))
        for r in range(3):
            assert_same(ensemble.predict(X[r : r + 1])[:, 0], booster.predict(X[r : r + 1]))
    assert (layouts[5, 15] >= 0).all() and (layouts[200, 15] >= 0).all() and (layouts[20, 255] < 0).all()


def test_turns_count_a_deep_trees_phases():
    """The walked cost of a tree deeper than ``PHASE`` counts whole phases to each leaf (rows walk
    ``PHASE`` steps at a time): a chain of 10 splits, each with a leaf on its left, has leaves at
    depths 1-10 and 10; those at depth 9 and 10 take two phases."""
    splits = 10
    leaves = [forest_kernel.LEAF] * (splits + 1)  # (nodes 10-20)
    left = np.array([splits + 1 + i for i in range(splits)] + leaves, np.int64)
    right = np.array(list(range(1, splits)) + [splits] + leaves, np.int64)
    order, found, depths, turns = forest_kernel._preorders(left, right, np.array([0, len(left)], np.int64))
    phase = forest_kernel.PHASE
    assert (found[0], depths[0]) == (splits, splits)
    assert turns[0] == pytest.approx((8 * phase + 3 * 2 * phase) / 11)
    shallow = forest_kernel._preorders(np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([0, 3]))
    assert shallow[3][0] == 1  # (a tree of at most PHASE levels: its depth)


def fitted(kind, task: str, categorical_frame: bool = False, **params):
    """A model of ``kind`` fitted on a DataFrame to labels of ``task`` (an objective's name), and the frame."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame(rng.normal(size=(300, N_FEATURES)), columns=[f"f{i}" for i in range(N_FEATURES)])
    frame.iloc[rng.random(300) < 0.1, 1] = np.nan
    y = labels(task, frame.to_numpy(), rng)
    if kind is lgb.LGBMClassifier:
        y = np.array(["no", "yes", "maybe"])[y.astype(int)]
    if categorical_frame:
        frame["f0"] = pd.Categorical(np.array(list("abcdefgh"))[rng.integers(0, 8, 300)])
    queries = {"group": [QUERY] * (len(frame) // QUERY)} if kind is lgb.LGBMRanker else {}
    model = kind(n_estimators=12, num_leaves=9, min_child_samples=5, verbose=-1, **params).fit(frame, y, **queries)
    return model, frame


def inputs(frame: pd.DataFrame) -> list:
    """A DataFrame, its rows one at a time and as arrays of every dtype LightGBM takes."""
    numeric = frame.apply(lambda c: c.cat.codes if isinstance(c.dtype, pd.CategoricalDtype) else c)
    values = numeric.to_numpy(dtype=np.float64)
    extremes = np.random.default_rng(1).choice(np.array(SPECIAL), size=(30, values.shape[1]))
    with np.errstate(over="ignore"):  # (1e300 as float32: inf)
        narrow = extremes.astype(np.float32)
    frames = [frame, frame.iloc[[5]], frame.iloc[10:13]]
    if "f0" in numeric and not isinstance(frame["f0"].dtype, pd.CategoricalDtype):  # blocks of several dtypes
        mixed = frame.assign(f0=(frame["f0"] * 10).round().astype(np.int16), f2=frame["f2"] > 0,
                             f3=frame["f3"].astype(np.float32))
        frames += [mixed, mixed.iloc[[3]]]
    return frames + [values, values[[7]], np.vstack([values, extremes]), narrow,
                     np.nan_to_num(values[:20]).astype(np.int64), values[:20] > 0, np.asfortranarray(values)]


@pytest.mark.parametrize("kind, method, objective", [
    (lgb.LGBMClassifier, "predict_proba", "binary"), (lgb.LGBMClassifier, "predict", "binary"),
    (lgb.LGBMClassifier, "predict_proba", "multiclass"), (lgb.LGBMClassifier, "predict", "multiclass"),
    (lgb.LGBMRegressor, "predict", "regression"), (lgb.LGBMRegressor, "predict", "poisson"),
    (lgb.LGBMRanker, "predict", "lambdarank"), (lgb.LGBMRanker, "predict", "rank_xendcg"),
])
@pytest.mark.parametrize("categorical_frame", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_compiled_scikit_learn_models_use_the_tree_kernel(kind, method, objective, categorical_frame, workers):
    model, frame = fitted(kind, objective, categorical_frame,
                          **({} if kind is lgb.LGBMClassifier else {"objective": objective}))
    kernel = CompiledBooster(model, method, Workers(workers))
    assert kernel.ensemble is not None and kernel.how is None
    kernel.ensemble.minimum_rows = 64  # (so that two workers split the frame's rows)
    assert len(Workers(workers).split(len(frame), kernel.ensemble.minimum_rows)) == workers
    for X in inputs(frame):
        if categorical_frame and not isinstance(X, pd.DataFrame):
            with pytest.raises(Unsupported):
                kernel(X)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(kernel(X), getattr(model, method)(X))
            assert_same(kernel(X, raw_score=True), getattr(model, method)(X, raw_score=True))


def test_many_rows_of_a_large_batch_over_two_workers():
    model, frame = fitted(lgb.LGBMClassifier, "multiclass")
    big = pd.concat([frame] * 10, ignore_index=True)
    kernel = CompiledBooster(model, "predict_proba", Workers(2))
    kernel.ensemble.minimum_rows = 512
    assert len(Workers(2).split(len(big), kernel.ensemble.minimum_rows)) == 2
    assert_same(kernel(big), model.predict_proba(big))


def test_an_array_warns_as_scikit_learn_does_when_the_model_has_feature_names():
    named, frame = fitted(lgb.LGBMClassifier, "binary")
    unnamed = lgb.LGBMClassifier(n_estimators=3, verbose=-1).fit(frame.to_numpy(), named.predict(frame))
    values = frame.to_numpy()
    for model in (named, unnamed):
        kernel = CompiledBooster(model, "predict_proba")
        for _ in range(2):  # (warned every time, as "always" asks)
            with warnings.catch_warnings(record=True) as theirs:
                warnings.simplefilter("always")
                expected = model.predict_proba(values)
            with warnings.catch_warnings(record=True) as ours:
                warnings.simplefilter("always")
                assert_same(kernel(values), expected)
            assert [(w.category, str(w.message), w.filename) for w in ours] == \
                [(w.category, str(w.message), w.filename) for w in theirs]
            assert model is named or not theirs  # (a model fitted on an array never warns; nor does older LightGBM)


def test_a_model_the_tree_kernel_does_not_take_is_answered_by_its_booster():
    model, frame = fitted(lgb.LGBMRegressor, "regression", linear_tree=True)
    kernel = CompiledBooster(model, "predict")
    assert kernel.ensemble is None and "linear trees" in kernel.how
    for X in (frame, frame.iloc[[2]]):
        assert_same(kernel(X), model.predict(X))
    with pytest.raises(Unsupported, match="raw_score"):  # (LightGBM's own call answers)
        kernel(frame, raw_score=True)


def test_pandas_categories_unknown_to_the_model_and_missing_ones_are_missing():
    model, frame = fitted(lgb.LGBMClassifier, "binary", categorical_frame=True)
    other = frame.iloc[:6].copy()
    other["f0"] = pd.Categorical(["z", "a", None, "h", "b", "q"], categories=list("zahbq"))
    assert_same(CompiledBooster(model, "predict_proba")(other), model.predict_proba(other))


def test_model_string_options_the_kernel_does_not_know_are_refused():
    with pytest.raises(Unsupported, match="objective"):
        trees_kernel._link("lambdarank_custom_thing", {})
    with pytest.raises(Unsupported, match="sigmoid"):
        trees_kernel._link("binary sigmoid:0.333333", {"sigmoid": 1 / 3})


MODEL, FRAME = fitted(lgb.LGBMClassifier, "binary")


def positive_scores(df):
    features = df[["f0", "f1", "f2", "f3"]]
    return MODEL.predict_proba(features)[:, 1]


def test_a_pipeline_as_written_runs_the_tree_kernel():
    inputs = [FRAME, FRAME.iloc[[4]], FRAME.iloc[::-1], FRAME.iloc[7:9]]
    assert_compiled_as_written(positive_scores, inputs, "LGBMClassifier.predict_proba", assert_same)


RANKER, _ = fitted(lgb.LGBMRanker, "lambdarank", objective="lambdarank")


def top_rows(df, k=5):
    """A query's k best rows, as a ranking service picks them."""
    scores = RANKER.predict(df[["f0", "f1", "f2", "f3"]])
    return df.index[np.argsort(-scores, kind="stable")[:k]]


def test_a_ranking_function_as_written_runs_the_tree_kernel():
    inputs = [FRAME.iloc[:QUERY], FRAME.iloc[[4]], FRAME.iloc[::-1]]
    assert_compiled_as_written(top_rows, inputs, "LGBMRanker.predict", lambda ours, theirs: ours.equals(theirs))


def test_the_kernels_read_matrices_as_lightgbm_and_refuse_other_shapes():
    model, frame = fitted(lgb.LGBMRegressor, "regression")
    forest = trees_kernel.lightgbm_ensemble(model.booster_)
    values = np.ascontiguousarray(frame.to_numpy())
    for other in (values.astype(np.float32), np.asfortranarray(values), values[::2]):  # (float32 widened)
        assert_same(forest.predict(other)[:, 0], model.booster_.predict(other))
    for wrong in (values[:, :3].copy(), values[0]):
        with pytest.raises(ValueError, match="matrix of numbers with 4 columns"):
            forest.predict(wrong)



@settings(SETTINGS, max_examples=25)
@given(models(), st.sampled_from([None, -1, 0, 1, 3, 20]))
def test_booster_predict_gives_lightgbms_bits(model, iterations):
    booster, rows = model
    kernel = CompiledBoosterPredict(booster, "predict", Workers(2))
    kernel.ensemble.minimum_rows = 64  # (so that two workers split the rows)
    for raw in (False, True):
        expected = booster.predict(rows, raw_score=raw, num_iteration=iterations)
        assert_same(kernel(rows, raw_score=raw, num_iteration=iterations), expected)
        for r in (0, ROWS + 3):
            assert_same(kernel(rows[r : r + 1], raw_score=raw, num_iteration=iterations),
                        booster.predict(rows[r : r + 1], raw_score=raw, num_iteration=iterations))
    assert_same(kernel(rows, start_iteration=0), booster.predict(rows))


@pytest.mark.parametrize("method", ["predict_proba", "predict"])
def test_a_call_of_the_scikit_learn_api_at_another_iteration_is_compiled(method):
    model, frame = fitted(lgb.LGBMClassifier, "multiclass")
    kernel = CompiledBooster(model, method)
    for iterations in (1, 5, np.int64(7), 0, -1, 200, None, 1):
        assert_same(kernel(frame, num_iteration=iterations), getattr(model, method)(frame, num_iteration=iterations))
    assert len(kernel._other_iterations) <= forest_kernel.KEPT_ENSEMBLES
    for other in ({"start_iteration": 2}, {"num_iteration": 2.0}, {"num_iteration": True}):
        with pytest.raises(Unsupported):
            kernel(frame, **other)


def test_a_booster_loaded_from_a_file_is_compiled_and_rebuilt_when_it_trains_on(tmp_path):
    model, frame = fitted(lgb.LGBMClassifier, "binary", categorical_frame=True)
    model.booster_.save_model(tmp_path / "model.txt")
    booster = lgb.Booster(model_file=tmp_path / "model.txt")

    def scores(df):
        return booster.predict(df[["f0", "f1", "f2", "f3"]])

    def scores_at_an_iteration(df):  # (as notebooks call a model trained with early stopping)
        return booster.predict(df[["f0", "f1", "f2", "f3"]], num_iteration=booster.current_iteration() - 2)

    for function in (scores, scores_at_an_iteration):
        assert_compiled_as_written(function, [frame, frame.iloc[[4]], frame.iloc[::-1]], "Booster.predict", assert_same)
    kernel, compiled = CompiledBoosterPredict(booster, "predict"), 0
    for X in inputs(frame):  # (arrays of a model of pandas categories: LightGBM's own call)
        try:
            ours = kernel(X)
        except Unsupported:
            continue
        assert_same(ours, booster.predict(X))
        compiled += 1
    assert compiled == 3

    trained = lgb.train({"objective": "binary", "verbose": -1, "num_threads": 1},
                        lgb.Dataset(FRAME, MODEL.predict_proba(FRAME)[:, 1] > 0.5), num_boost_round=3,
                        keep_training_booster=True)
    values = FRAME.to_numpy()
    kernel = CompiledBoosterPredict(trained, "predict")
    assert_same(kernel(values), trained.predict(values))
    trained.update()  # (a fourth tree: the kernel no longer stands for the booster)
    assert not kernel.still_valid()
    trained.rollback_one_iter()
    assert kernel.still_valid()


def test_booster_predict_with_other_arguments_runs_as_lightgbm():
    booster, values = MODEL.booster_, FRAME.to_numpy()
    kernel = CompiledBoosterPredict(booster, "predict")
    for arguments in ({"start_iteration": 1}, {"pred_leaf": True}, {"pred_early_stop": True}):
        with pytest.raises(Unsupported):
            kernel(values, **arguments)
    with pytest.raises(Unsupported):  # (LightGBM raises for the wrong width: its own call does)
        kernel(values[:, :2])

    def leaves(X):
        return booster.predict(X, pred_leaf=True)

    optimized = willump.optimize(leaves)
    assert_same(optimized(values), leaves(values))
