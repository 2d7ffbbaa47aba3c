"""IFV importance: the drop in a validation score when an IFV's columns are permuted together (issue 28).

One scale-free measure for every model: a TF-IDF block is ranked by what it does to
the model's answers, not by the size of its values.
"""

import csv
import warnings

import lightgbm
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightgbm import LGBMClassifier, LGBMRegressor
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.svm import LinearSVC

import willump
from willump.analysis.importance import (
    MAX_ROWS,
    PERMUTATIONS,
    ColumnsUnknown,
    block_shuffler,
    column_blocks,
    permutation_importances,
)

model = None  # the model the decorated functions call: set by install_model
VECTORIZER = None  # the SMS word TF-IDF: set by the sms fixture


def importances_of(model, values, y, random_state=0):
    """(importances, how) of the IFV ``values`` (side by side in the model's input) on rows labelled ``y``."""
    X = np.hstack(values)
    return permutation_importances(model, X, y, column_blocks(values, X), random_state)


def install_model(function, frame, y, estimator):
    """Train ``estimator`` on what ``function`` feeds its model, and make it the global ``model`` it calls."""
    class Recorder:
        def predict_proba(self, X):
            self.X = X
            return np.zeros((X.shape[0], 2))

    recorder = globals()["model"] = Recorder()
    function(frame)
    globals()["model"] = estimator.fit(recorder.X, y)


def fitted_importances(function, train, y_train, valid, y_valid) -> dict:
    """{IFV name: importance} after fitting ``function`` (speed checks off: the importances do not depend on them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        optimized = willump.optimize(function).fit(
            train, y=y_train, validation=(valid, y_valid), check_speed=False, progress=False
        )
    table = optimized.explain()
    assert table.attrs["summary"]["importance"].startswith("permutation")
    return dict(zip(table["ifv"], table["importance"]))


# --- the case: word TF-IDF + a raw length, logistic regression, real SMS text --------------------


@pytest.fixture(scope="module")
def sms(datasets):
    messages = pd.read_csv(
        datasets / "sms_spam" / "SMSSpamCollection", sep="\t", header=None, names=["label", "text"],
        quoting=csv.QUOTE_NONE,
    )
    spam = (messages["label"] == "spam").to_numpy().astype(int)
    globals()["VECTORIZER"] = TfidfVectorizer().fit(messages["text"].iloc[:3000])
    return messages[["text"]], spam


def words_and_length(df):
    words = VECTORIZER.transform(df["text"])
    length = sp.csr_matrix(df["text"].str.len().to_numpy(dtype=float).reshape(-1, 1))
    return model.predict_proba(sp.hstack([words, length], format="csr"))[:, 1]


def sms_importances(frame, y) -> dict:
    install_model(words_and_length, frame.iloc[:3000], y[:3000], LogisticRegression(max_iter=2000))
    return fitted_importances(words_and_length, frame.iloc[:3000], y[:3000], frame.iloc[3000:4500], y[3000:4500])


def test_a_tfidf_block_ranks_above_a_raw_length_that_tells_less_about_spam(sms):
    frame, spam = sms
    importances = sms_importances(frame, spam)
    assert importances["words"] > 2 * importances["length"]


def test_a_raw_length_ranks_first_when_the_label_is_about_length(sms):
    frame, _ = sms
    long_message = (frame["text"].str.len() > frame["text"].str.len().median()).to_numpy().astype(int)
    importances = sms_importances(frame, long_message)
    assert importances["length"] > 2 * importances["words"]


# --- every kind of model: a strong IFV, a weaker one, noise -----------------------------------------------


def three_ifvs(n, random_state, task):
    """IFV values (strong: 2 columns, weak: 1, noise: 3) and labels for ``task``."""
    rng = np.random.default_rng(random_state)
    strong, weak, noise = rng.normal(size=(n, 2)), rng.normal(size=(n, 1)), rng.normal(size=(n, 3))
    signal = 2 * strong.sum(axis=1) + 1.5 * weak[:, 0] + rng.normal(scale=0.5, size=n)
    if task == "binary":
        y = (signal > 0).astype(int)
    elif task == "multiclass":
        y = np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3]))
    else:
        y = signal
    return [strong, weak, noise], y


def booster(objective, **params):
    class Booster:  # lightgbm.train behind fit(X, y)
        def fit(self, X, y):
            data = lightgbm.Dataset(X, y)
            parameters = {"objective": objective, "verbose": -1, "seed": 0, "num_threads": 1, **params}
            return lightgbm.train(parameters, data, 50)

    return Booster()


MODELS = {
    "binary": [
        ("ROC AUC", LogisticRegression()),
        ("ROC AUC", LGBMClassifier(n_estimators=50, verbose=-1, random_state=0, n_jobs=1)),
        ("ROC AUC", booster("binary")),
        ("ROC AUC", KNeighborsClassifier(n_neighbors=15)),
        ("ROC AUC", MLPClassifier(hidden_layer_sizes=(16,), max_iter=500, random_state=0)),
        ("ROC AUC", LinearSVC()),
    ],
    "multiclass": [
        ("log loss", LogisticRegression()),
        ("log loss", LGBMClassifier(n_estimators=50, verbose=-1, random_state=0, n_jobs=1)),
        ("log loss", booster("multiclass", num_class=3)),
        ("log loss", KNeighborsClassifier(n_neighbors=15)),
        ("accuracy", LinearSVC()),
    ],
    "regression": [
        ("R²", Ridge()),
        ("R²", LGBMRegressor(n_estimators=50, verbose=-1, random_state=0, n_jobs=1)),
        ("R²", KNeighborsRegressor(n_neighbors=15)),
    ],
}


@pytest.mark.parametrize(
    "task, measured, estimator",
    [
        pytest.param(task, measured, estimator, id=f"{task}-{type(estimator).__name__}")
        for task, models in MODELS.items()
        for measured, estimator in models
    ],
)
def test_every_model_ranks_the_ifvs_by_what_they_contribute(task, measured, estimator):
    train, y_train = three_ifvs(3000, 0, task)
    valid, y_valid = three_ifvs(1500, 1, task)
    trained = estimator.fit(np.hstack(train), y_train)
    (strong, weak, noise), how = importances_of(trained, valid, y_valid)
    assert measured in how and f"{PERMUTATIONS} seeded permutations of 1500 validation rows" in how
    assert strong > weak > noise >= 0
    assert noise < 0.2 * weak


@pytest.mark.parametrize("scaled", [0, 1, 2])
def test_scaling_an_ifv_by_1000_and_retraining_a_linear_model_keeps_the_ranking(scaled):
    train, y_train = three_ifvs(3000, 0, "binary")
    valid, y_valid = three_ifvs(1500, 1, "binary")

    def importances(factor):
        def scale(values):
            return [v * (factor if i == scaled else 1) for i, v in enumerate(values)]

        trained = LogisticRegression(C=1e4, max_iter=10_000).fit(np.hstack(scale(train)), y_train)
        return importances_of(trained, scale(valid), y_valid)[0]

    plain, scaled_up = importances(1), importances(1000)
    assert np.argsort(plain).tolist() == np.argsort(scaled_up).tolist()
    np.testing.assert_allclose(scaled_up, plain, rtol=0.05, atol=1e-4)


def test_the_same_random_state_gives_the_same_importances_on_a_sample_of_a_large_validation_set():
    train, y_train = three_ifvs(3000, 0, "binary")
    valid, y_valid = three_ifvs(MAX_ROWS + 2000, 1, "binary")
    trained = LogisticRegression().fit(np.hstack(train), y_train)
    first, how = importances_of(trained, valid, y_valid, random_state=3)
    again, _ = importances_of(trained, valid, y_valid, random_state=3)
    assert first == again
    assert f"of {MAX_ROWS} validation rows" in how
    other, _ = importances_of(trained, valid, y_valid, random_state=4)
    assert other != first  # another sample and other permutations
    assert np.argsort(other).tolist() == np.argsort(first).tolist()


# --- DataFrame IFVs of mixed dtypes -----------------------------------------------------------------------


def mixed_frames(n, random_state):
    """IFV frames (place: category and int; account: bool and float; note: str noise) and labels."""
    rng = np.random.default_rng(random_state)
    city = rng.choice(["oslo", "lima", "pune", "kyiv"], size=n)
    visits = rng.integers(0, 10, size=n)
    member = rng.random(n) < 0.5
    spend = rng.normal(size=n)
    place = pd.DataFrame({"city": pd.Categorical(city), "visits": visits})
    account = pd.DataFrame({"member": member, "spend": spend})
    note = pd.DataFrame({"note": pd.array(rng.choice(["a", "b", "c"], size=n), dtype="string")})
    signal = 3 * (city == "oslo") - 3 * (city == "lima") + 0.3 * (visits - 5) + 0.8 * member + rng.normal(size=n)
    return [place, account, note], (signal > 0.5).astype(int)


def test_dataframe_ifvs_of_mixed_dtypes_are_permuted_by_name_and_keep_their_dtypes():
    columns = ["spend", "city", "note", "member", "visits"]  # not the IFVs' order
    encoded = ColumnTransformer(
        [("categories", OneHotEncoder(handle_unknown="ignore"), ["city", "note"])], remainder=StandardScaler()
    )
    frames, y = mixed_frames(3000, 0)
    trained = make_pipeline(encoded, LogisticRegression()).fit(pd.concat(frames, axis=1)[columns], y)
    valid_frames, y_valid = mixed_frames(1500, 1)
    X = pd.concat(valid_frames, axis=1)[columns]
    blocks = column_blocks(valid_frames, X)
    assert [list(X.columns[b]) for b in blocks] == [["city", "visits"], ["spend", "member"], ["note"]]
    (place, account, note), _ = permutation_importances(trained, X, y_valid, blocks, 0)
    assert place > account > note >= 0

    order = np.random.default_rng(0).permutation(len(X))
    shuffled = block_shuffler(X, blocks[0])(order)
    assert shuffled.dtypes.equals(X.dtypes) and shuffled.index.equals(X.index)
    pd.testing.assert_frame_equal(shuffled[["spend", "note", "member"]], X[["spend", "note", "member"]])
    np.testing.assert_array_equal(shuffled["city"].to_numpy(), X["city"].to_numpy()[order])
    np.testing.assert_array_equal(shuffled["visits"].to_numpy(), X["visits"].to_numpy()[order])


# --- properties -------------------------------------------------------------------------------------------

FORMATS = {
    "dense": lambda X: X,
    "csr": sp.csr_matrix,
    "csc": sp.csc_matrix,
    "frame": lambda X: pd.DataFrame(X, index=np.arange(len(X))[::-1] * 3),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    widths=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    rows=st.integers(2, 40),
    seed=st.integers(0, 2**32 - 1),
    fmt=st.sampled_from(sorted(FORMATS)),
    data=st.data(),
)
def test_shuffling_a_block_moves_its_rows_together_in_every_format(widths, rows, seed, fmt, data):
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(rows, sum(widths))) * (rng.random((rows, sum(widths))) < 0.5)
    X = FORMATS[fmt](dense)
    blocks = column_blocks([np.zeros((rows, w)) for w in widths], X)
    block = blocks[data.draw(st.integers(0, len(widths) - 1))]
    order = rng.permutation(rows)
    shuffled = block_shuffler(X, block)(order)
    expected = dense.copy()
    expected[:, block] = dense[order][:, block]
    assert type(shuffled) is type(X)
    if sp.issparse(X):
        assert shuffled.format == X.format
        shuffled = shuffled.toarray()
    elif fmt == "frame":
        assert shuffled.index.equals(X.index)
    np.testing.assert_array_equal(np.asarray(shuffled), expected)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    used=st.integers(1, 3),
    ignored=st.integers(1, 3),
    rows=st.integers(30, 150),
    seed=st.integers(0, 2**32 - 1),
    fmt=st.sampled_from(sorted(FORMATS)),
    regression=st.booleans(),
    ignored_first=st.booleans(),
)
def test_an_ifv_the_model_ignores_has_importance_zero(used, ignored, rows, seed, fmt, regression, ignored_first):
    rng = np.random.default_rng(seed)
    read, unread = rng.normal(size=(rows, used)), rng.normal(size=(rows, ignored))
    values, position, start = ([unread, read], 1, ignored) if ignored_first else ([read, unread], 0, 0)
    signal = read.sum(axis=1) + rng.normal(scale=0.3, size=rows)
    y = signal if regression else (signal > np.median(signal)).astype(int)
    X = FORMATS[fmt](np.hstack(values))
    keep = ColumnTransformer([("used", "passthrough", list(range(start, start + used)))], remainder="drop")
    trained = make_pipeline(keep, LinearRegression() if regression else LogisticRegression()).fit(X, y)
    importances, _ = permutation_importances(trained, X, y, column_blocks(values, X), seed)
    assert importances[1 - position] == 0.0
    assert importances[position] > 0


@settings(max_examples=60, deadline=None)
@given(
    widths=st.lists(st.integers(1, 3), min_size=2, max_size=4),
    renamed=st.integers(0, 3),
    extra=st.integers(-1, 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_column_blocks_partition_the_columns_or_say_they_cannot(widths, renamed, extra, seed):
    rng = np.random.default_rng(seed)
    values = [
        pd.DataFrame(np.zeros((3, w)), columns=[f"ifv{i}_{j}" for j in range(w)]) for i, w in enumerate(widths)
    ]
    X = pd.concat(values, axis=1)
    X = X[X.columns[rng.permutation(X.shape[1])]]
    X.columns = [f"renamed{j}" if j < renamed else name for j, name in enumerate(X.columns)]
    if extra > 0:
        X["derived"] = 0.0
    elif extra < 0:
        X = X.iloc[:, 1:]
    try:
        blocks = column_blocks(values, X)
    except ColumnsUnknown as unknown:
        assert "cannot tell which columns come from which IFV" in str(unknown)
        assert renamed or extra
        return
    assert sorted(np.concatenate(blocks).tolist()) == list(range(X.shape[1]))
    if not renamed and extra <= 0:  # every column still named by its IFV
        for value, block in zip(values, blocks):
            assert set(X.columns[block]) <= set(value.columns)


# --- fit -------------------------------------------------------------------------------------------------


def derived_columns(df):
    first = pd.DataFrame({"x": df["p"] * 2, "y": df["q"] + 1})
    second = pd.DataFrame({"z": df["r"] * 3})
    both = pd.concat([first, second], axis=1)
    X = pd.DataFrame({"sum": both["x"] + both["z"], "y": both["y"]})
    return model.predict_proba(X)[:, 1]


def test_fit_says_why_when_it_cannot_tell_which_columns_come_from_which_ifv():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(2000, 3)), columns=["p", "q", "r"])
    y = (frame.sum(axis=1) > 0).to_numpy().astype(int)
    install_model(derived_columns, frame.iloc[:1500], y[:1500], LogisticRegression())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        optimized = willump.optimize(derived_columns)
        optimized.fit(frame.iloc[:1500], y=y[:1500], validation=(frame.iloc[1500:], y[1500:]), progress=False)
    assert [ifv.name for ifv in optimized.graph.ifvs] == ["first", "second"]
    summary = optimized.explain().attrs["summary"]
    for reason in (summary["cascades"], summary["top_k_filter"]):
        assert "cannot tell which columns come from which IFV" in reason
    assert summary["importance"] == "not measured"
    assert optimized.explain()["importance"].isna().all()
    test = frame.iloc[1500:]
    np.testing.assert_array_equal(optimized(test), derived_columns(test))
