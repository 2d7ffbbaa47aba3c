"""fit on functions whose model is a scikit-learn Pipeline, FeatureUnion or ColumnTransformer called as one.

Until willump splits their steps into IFVs, such a function has one feature vector: fit
succeeds, says why there is no cascade or filter, and the function stays exact.
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


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_fit_succeeds_says_why_and_stays_exact(name):
    global composite
    estimator, kind = COMPOSITES[name]
    regression = name == "regressor"
    y = FRAME["amount"].to_numpy() if regression else Y
    composite = estimator.fit(FRAME.iloc[:800], y[:800])
    function = predicted if regression else probability
    optimized = willump.optimize(function)
    optimized.fit(FRAME.iloc[:800], y=y[:800], validation=(FRAME.iloc[800:], y[800:]), cascades=not regression,
                  progress=False)
    summary = optimized.explain().attrs["summary"]
    for decision in ("cascades", "top_k_filter"):
        assert summary[decision].startswith(f"off: the model is a scikit-learn {kind}"), summary[decision]
        assert "does not split" in summary[decision]
    test = FRAME.iloc[800:]
    result = optimized(test)
    np.testing.assert_array_equal(result, function(test))
    assert result.dtype == function(test).dtype
    scores = composite.predict(test) if regression else composite.predict_proba(test)[:, 1]
    np.testing.assert_array_equal(optimized.top_k(test, k=25), np.argsort(-scores, kind="stable")[:25])


def test_a_column_transformer_feeding_a_lightgbm_model():
    """The step written as a statement of its own: one IFV still, no LightGBM dtype error."""
    global columns, booster
    columns = COLUMNS.fit(FRAME.iloc[:800])
    booster = LGBMRegressor(n_estimators=20, verbose=-1).fit(columns.transform(FRAME.iloc[:800]), FRAME["amount"][:800])

    def estimate(frame):
        X = columns.transform(frame)
        return booster.predict(X)

    optimized = willump.optimize(estimate)
    y = FRAME["amount"].to_numpy()
    optimized.fit(FRAME.iloc[:800], y=y[:800], validation=(FRAME.iloc[800:], y[800:]), cascades=False, progress=False)
    assert optimized.explain().attrs["summary"]["top_k_filter"] == (
        "off: the function has a single feature vector: there is nothing cheaper to compute first"
    )
    np.testing.assert_array_equal(optimized(FRAME.iloc[800:]), estimate(FRAME.iloc[800:]))


def test_a_small_model_that_cannot_be_trained_on_the_efficient_ifvs_is_said_not_raised():
    """Two IFVs of raw columns for a Pipeline that selects them by name: its clone cannot be trained
    on the efficient IFVs' matrix, so fit says so (and how to choose another small model)."""
    global composite
    composite = Pipeline([
        ("columns", ColumnTransformer([("text", TfidfVectorizer(), "text"), ("numbers", StandardScaler(), ["amount"])])),
        ("model", LogisticRegression()),
    ]).fit(FRAME.iloc[:800], Y[:800])

    def predict(frame):
        words = frame[["text"]]
        numbers = frame[["amount"]] * 1.0
        return composite.predict_proba(pd.concat([words, numbers], axis=1))[:, 1]

    optimized = willump.optimize(predict).fit(
        FRAME.iloc[:800], y=Y[:800], validation=(FRAME.iloc[800:], Y[800:]), progress=False,
        costs={"words": 1e-5, "numbers": 1e-7}, check_speed=False,
    )
    summary = optimized.explain().attrs["summary"]
    assert summary["cascades"] == summary["top_k_filter"]
    assert summary["cascades"].startswith("off: a small model like Pipeline cannot be trained on the efficient IFVs")
    assert "small_model=" in summary["cascades"]
    np.testing.assert_array_equal(optimized(FRAME.iloc[800:]), predict(FRAME.iloc[800:]))
