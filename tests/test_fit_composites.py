"""fit on functions whose model is a scikit-learn Pipeline, FeatureUnion or ColumnTransformer called as one.

The composite is read as its steps: each FeatureUnion / ColumnTransformer branch is an IFV, and
fit trains the small model as a clone of the final estimator on the efficient branches. Where a
composite stays one call (here: with transformer_weights), the function has one feature
vector, and fit says why there is no cascade or filter.
"""

import numpy as np
import pandas as pd
import pytest
from lightgbm import LGBMClassifier, LGBMRegressor
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

import willump

rng = np.random.default_rng(0)
N = 1200
FRAME = pd.DataFrame({
    "amount": rng.lognormal(size=N), "age": rng.integers(18, 90, N),
    "city": rng.choice(["paris", "lyon", "nice"], N),
    "text": rng.choice(["good service", "late again", "great food", "never again", "ok"], N),
})
Y = ((np.log(FRAME["amount"]) + (FRAME["city"] == "nice") + rng.normal(scale=0.5, size=N)) > 0.5).astype(int).to_numpy()
COLUMNS = ColumnTransformer([
    ("numbers", StandardScaler(), ["amount", "age"]),
    ("city", OneHotEncoder(handle_unknown="ignore"), ["city"]),
    ("text", TfidfVectorizer(), "text"),
])
UNION = make_pipeline(
    FunctionTransformer(lambda frame: frame["text"]),
    FeatureUnion([("words", TfidfVectorizer()), ("chars", TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3)))]),
)

COMPOSITES = {
    "pipeline_logistic": (Pipeline([("columns", COLUMNS), ("model", LogisticRegression())]), "Pipeline"),
    "pipeline_lightgbm": (Pipeline([("columns", COLUMNS), ("model", LGBMClassifier(n_estimators=20, verbose=-1))]), "Pipeline"),
    "feature_union": (make_pipeline(UNION, LogisticRegression()), "Pipeline"),
    "regressor": (make_pipeline(COLUMNS, Ridge()), "Pipeline"),
}


def probability(frame):
    return composite.predict_proba(frame)[:, 1]


def predicted(frame):
    return composite.predict(frame)


BRANCHES = {
    "pipeline_logistic": ["columns__numbers", "columns__city", "columns__text"],
    "pipeline_lightgbm": ["columns__numbers", "columns__city", "columns__text"],
    "feature_union": ["pipeline__featureunion__words", "pipeline__featureunion__chars"],
    "regressor": ["columntransformer__numbers", "columntransformer__city", "columntransformer__text"],
}
# Seconds per row each branch costs, given (the decisions then do not depend on this machine's speed).
COSTS = {"numbers": 1e-7, "city": 1e-7, "text": 1e-5, "words": 1e-7, "chars": 1e-5}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_fit_splits_the_branches_and_cascades_on_a_clone_of_the_final_estimator(name):
    global composite
    estimator, _ = COMPOSITES[name]
    regression = name == "regressor"
    y = FRAME["amount"].to_numpy() if regression else Y
    composite = estimator.fit(FRAME.iloc[:800], y[:800])
    function = predicted if regression else probability
    optimized = willump.optimize(function)
    assert [ifv.name for ifv in optimized.graph.ifvs] == BRANCHES[name]
    costs = {branch: COSTS[branch.rsplit("__", 1)[1]] for branch in BRANCHES[name]}
    optimized.fit(FRAME.iloc[:800], y=y[:800], validation=(FRAME.iloc[800:], y[800:]), cascades=not regression,
                  progress=False, costs=costs, check_speed=False)
    summary = optimized.explain().attrs["summary"]
    test = FRAME.iloc[800:]
    exact = function(test)
    if regression:
        assert summary["cascades"] == "off: regression: cascades need classes"
        np.testing.assert_array_equal(optimized(test), exact)
    else:
        assert summary["cascades"].startswith("on"), summary["cascades"]
        final = composite.steps[-1][1]
        small = optimized._fitted.small_model
        assert type(small) is type(final) and small is not final
        assert {**small.get_params(), "random_state": None} == {**final.get_params(), "random_state": None}
        cascaded = optimized(test)
        assert cascaded.dtype == exact.dtype and cascaded.shape == exact.shape
        agreement = np.mean((cascaded > 0.5) == (exact > 0.5))
        assert agreement >= 0.97, agreement
        calls = optimized.explain_compilation()["call"]  # (the cascade's own sites too, as the user names them)
        assert not calls.str.contains("__willump").any(), calls.tolist()
    scores = composite.predict(test) if regression else composite.predict_proba(test)[:, 1]
    best = np.argsort(-scores, kind="stable")[:25]
    assert len(set(optimized.top_k(test, k=25)) & set(best)) >= 24  # (the filter keeps top_k_precision=0.95)


def test_a_composite_left_as_one_call_is_one_feature_vector_and_fit_says_why():
    global composite
    columns = ColumnTransformer([("numbers", StandardScaler(), ["amount", "age"]), ("city", OneHotEncoder(sparse_output=False), ["city"])],
                                transformer_weights={"numbers": 2.0, "city": 1.0})
    composite = Pipeline([("columns", columns), ("model", LogisticRegression())])
    composite.fit(FRAME.iloc[:800], Y[:800])
    with pytest.warns(willump.WillumpWarning, match="runs as one call .transformer_weights"):
        optimized = willump.optimize(probability)
    optimized.fit(FRAME.iloc[:800], y=Y[:800], validation=(FRAME.iloc[800:], Y[800:]), progress=False)
    summary = optimized.explain().attrs["summary"]
    assert summary["cascades"].startswith("off: the function has a single feature vector"), summary["cascades"]
    np.testing.assert_array_equal(optimized(FRAME.iloc[800:]), probability(FRAME.iloc[800:]))


def test_a_column_transformer_with_pandas_output_cascades_on_its_branches_frames():
    """Branches whose frames stay their columns while served are IFVs like any other: fit builds
    the frames, the small model is trained and served on them."""
    global composite
    columns = ColumnTransformer([
        ("numbers", StandardScaler(), ["amount", "age"]), ("city", OneHotEncoder(sparse_output=False, handle_unknown="ignore"), ["city"]),
    ]).set_output(transform="pandas")
    composite = Pipeline([("columns", columns), ("model", LogisticRegression())]).fit(FRAME.iloc[:800], Y[:800])
    optimized = willump.optimize(probability)
    assert [ifv.name for ifv in optimized.graph.ifvs] == ["columns__numbers", "columns__city"]
    test = FRAME.iloc[800:]
    np.testing.assert_array_equal(optimized(test), probability(test))
    optimized.fit(FRAME.iloc[:800], y=Y[:800], validation=(test, Y[800:]), progress=False,
                  costs={"columns__numbers": 1e-7, "columns__city": 1e-5}, check_speed=False)
    summary = optimized.explain().attrs["summary"]
    assert summary["cascades"].startswith("on"), summary["cascades"]
    cascaded, exact = optimized(test), probability(test)
    assert cascaded.dtype == exact.dtype and cascaded.shape == exact.shape
    assert np.mean((cascaded > 0.5) == (exact > 0.5)) >= 0.97
    for row in range(3):  # a row alone is answered as in the batch
        np.testing.assert_allclose(optimized(test.iloc[[row]]), cascaded[row:row + 1], rtol=1e-12)


def test_a_column_transformer_feeding_a_lightgbm_model():
    """The ColumnTransformer's transform written as a statement of its own: its branches are IFVs."""
    global columns, booster
    columns = COLUMNS.fit(FRAME.iloc[:800])
    booster = LGBMRegressor(n_estimators=20, verbose=-1).fit(columns.transform(FRAME.iloc[:800]), FRAME["amount"][:800])

    def estimate(frame):
        X = columns.transform(frame)
        return booster.predict(X)

    optimized = willump.optimize(estimate)
    assert [ifv.name for ifv in optimized.graph.ifvs] == ["numbers", "city", "text"]
    y = FRAME["amount"].to_numpy()
    optimized.fit(FRAME.iloc[:800], y=y[:800], validation=(FRAME.iloc[800:], y[800:]), cascades=False, progress=False)
    np.testing.assert_array_equal(optimized(FRAME.iloc[800:]), estimate(FRAME.iloc[800:]))


def test_a_small_model_that_cannot_be_trained_on_the_efficient_ifvs_is_said_not_raised():
    """Two IFVs of raw columns for a Pipeline that selects them by name, called from a dict (so
    willump cannot read it at decoration and it stays one call): its clone cannot be trained on
    the efficient IFVs' matrix, so fit says so (and how to choose another small model)."""
    global models
    models = {"current": Pipeline([
        ("columns", ColumnTransformer([("text", TfidfVectorizer(), "text"), ("numbers", StandardScaler(), ["amount"])])),
        ("model", LogisticRegression()),
    ]).fit(FRAME.iloc[:800], Y[:800])}

    def predict(frame):
        words = frame[["text"]]
        numbers = frame[["amount"]] * 1.0
        return models["current"].predict_proba(pd.concat([words, numbers], axis=1))[:, 1]

    optimized = willump.optimize(predict).fit(
        FRAME.iloc[:800], y=Y[:800], validation=(FRAME.iloc[800:], Y[800:]), progress=False,
        costs={"words": 1e-5, "numbers": 1e-7}, check_speed=False,
    )
    summary = optimized.explain().attrs["summary"]
    assert summary["cascades"] == summary["top_k_filter"]
    assert summary["cascades"].startswith("off: a small model like Pipeline cannot be trained on the efficient IFVs")
    assert "small_model=" in summary["cascades"]
    np.testing.assert_array_equal(optimized(FRAME.iloc[800:]), predict(FRAME.iloc[800:]))


def test_a_passthrough_remainder_is_a_feature_vector_fit_can_take_rows_of():
    """``remainder="passthrough"`` hands its columns on unread (``SelectedColumns``) to the compiled join;
    fit and the cascade computing that branch alone get the columns as the frame scikit-learn passes on."""
    global passthrough
    encoded = ColumnTransformer([("city", OneHotEncoder(handle_unknown="ignore"), ["city"])], remainder="passthrough")
    passthrough = make_pipeline(encoded, LogisticRegression(max_iter=1000)).fit(
        FRAME.iloc[:800][["city", "amount", "age"]], Y[:800])

    def chance(frame):
        return passthrough.predict_proba(frame[["city", "amount", "age"]])[:, 1]

    optimized = willump.optimize(chance)
    assert len(optimized.graph.ifvs) == 2
    optimized.fit(FRAME.iloc[:800], y=Y[:800], validation=(FRAME.iloc[800:], Y[800:]), progress=False)
    for rows in (FRAME.iloc[800:], FRAME.iloc[[900]]):
        answers = optimized(rows)
        assert answers.shape == chance(rows).shape
    optimized.fit(FRAME.iloc[:800], y=Y[:800], validation=(FRAME.iloc[800:], Y[800:]), cascades=False, top_k=False,
                  progress=False)
    np.testing.assert_array_equal(optimized(FRAME.iloc[800:]), chance(FRAME.iloc[800:]))
