"""Top-K queries: the exact path, the validated candidate shares, and the filter's plan (paper §4.3)."""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightgbm import LGBMClassifier, LGBMRegressor
from sklearn.linear_model import LogisticRegression, Ridge

import willump
from willump.optimizations.topk import MARGIN, QUERY_SHARES, candidate_shares
from willump.runtime.models import ranking_score
from willump.runtime.topk import FilterPlan, best


def rows(n, seed):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "c": rng.integers(0, 4, n)})
    y = (frame["a"] + 0.3 * frame["b"] + rng.normal(scale=0.5, size=n) > 0).astype(int).to_numpy()
    return frame, y


TRAIN, Y = rows(3000, 0)
VALID, Y_VALID = rows(2000, 1)
TEST, _ = rows(1500, 2)
FEATURES = ["a", "b", "c"]


def features(df):
    return np.hstack([df[["a"]].to_numpy(), df[["b"]].to_numpy(), df[["c"]].to_numpy() * 1.0])


def labels(df):
    cheap = df[["a"]].to_numpy()
    other = df[["b"]].to_numpy() * 1.0
    third = df[["c"]].to_numpy() * 1.0
    return model.predict(np.hstack([cheap, other, third]))


def local_model(df):
    chosen = models["current"]
    cheap = df[["a"]].to_numpy()
    other = df[["b"]].to_numpy() * 1.0
    third = df[["c"]].to_numpy() * 1.0
    return chosen.predict(np.hstack([cheap, other, third]))


@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, -1.0, 2.0, np.nan]), min_size=1, max_size=40),
    st.integers(1, 45),
)
def test_best_is_a_stable_argsort_of_the_negated_scores(scores, k):
    scores = np.array(scores)
    np.testing.assert_array_equal(best(scores, k), np.argsort(-scores, kind="stable")[:k])


@pytest.mark.parametrize("estimator", [
    LogisticRegression(), LGBMClassifier(n_estimators=20, verbose=-1), Ridge(), LGBMRegressor(n_estimators=20, verbose=-1),
])
@pytest.mark.parametrize("function", [labels, local_model])
def test_exact_top_k_ranks_by_the_models_scores(estimator, function):
    """Before fit, the model a global (scored as a plain call runs) or a local (IFV by IFV)."""
    target = Y if hasattr(estimator, "predict_proba") else TRAIN["a"].to_numpy() * 2 + TRAIN["c"]
    global model, models
    model = estimator.fit(features(TRAIN), target)
    models = {"current": model}
    optimized = willump.optimize(function)
    for k in (1, 10, 200, len(TEST)):
        expected = np.argsort(-ranking_score(model, features(TEST)), kind="stable")[:k]
        np.testing.assert_array_equal(optimized.top_k(TEST, k=k), expected)


def test_exact_top_k_follows_a_model_replaced_by_another_kind():
    global model
    optimized = willump.optimize(labels)
    model = Ridge().fit(features(TRAIN), TRAIN["a"])
    np.testing.assert_array_equal(optimized.top_k(TEST, k=20), np.argsort(-model.predict(features(TEST)), kind="stable")[:20])
    model = LogisticRegression().fit(features(TRAIN), Y)
    expected = np.argsort(-model.predict_proba(features(TEST))[:, 1], kind="stable")[:20]
    np.testing.assert_array_equal(optimized.top_k(TEST, k=20), expected)


def negative_class(df):
    return model.predict_proba(features(df))[:, 0]


def weighted(df):
    return model.predict_proba(features(df))[:, 1] * df["c"].to_numpy()


def positive_class_in_percent(df):
    return np.round(model.predict_proba(features(df))[:, 1] * 100)


@pytest.mark.parametrize("function, warned", [(negative_class, True), (weighted, True), (labels, False),
                                              (positive_class_in_percent, False)])
def test_top_k_warns_once_when_the_function_orders_rows_otherwise_than_it_ranks(function, warned):
    """top_k ranks by the positive class's probability: a function returning ``p[:, 0]`` or ``p * weight``
    would expect other rows, and is told so (once); labels or rounded probabilities are ordered alike."""
    global model
    model = LogisticRegression().fit(features(TRAIN), Y)
    optimized = willump.optimize(function)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimized.top_k(TEST.iloc[:1], k=1)  # (one row: nothing to tell apart yet)
        found = optimized.top_k(TEST, k=10)
        optimized.top_k(TEST, k=10)
    said = [w for w in caught if issubclass(w.category, willump.WillumpWarning) and "top_k ranks" in str(w.message)]
    assert len(said) == int(warned), [str(w.message) for w in said]
    np.testing.assert_array_equal(found, np.argsort(-model.predict_proba(features(TEST))[:, 1], kind="stable")[:10])


def test_candidate_shares_of_a_filter_that_ranks_as_the_full_model():
    scores = np.random.default_rng(0).normal(size=4000)
    sizes, shares, precisions = candidate_shares(scores, scores, target=0.95)
    assert list(sizes) == [250, 1000, 4000]
    for i, size in enumerate(sizes):
        for j, q in enumerate(QUERY_SHARES):
            k = round(q * size)
            if k < 1:
                assert np.isnan(shares[i, j])
                continue
            must = int(np.ceil(0.95 * k - 1e-9))
            assert shares[i, j] == min(np.ceil(MARGIN * must), size) / size
            assert precisions[i, j] >= 0.95


def test_candidate_shares_of_a_filter_that_knows_nothing_are_the_whole_batch():
    rng = np.random.default_rng(1)
    _, shares, _ = candidate_shares(rng.normal(size=2000), rng.normal(size=2000), target=0.95)
    assert np.nanmin(shares) > 0.5


def test_a_stricter_target_needs_at_least_as_many_candidates():
    rng = np.random.default_rng(2)
    full = rng.normal(size=3000)
    noisy = full + rng.normal(scale=0.3, size=3000)
    _, loose, _ = candidate_shares(full, noisy, target=0.8)
    _, strict, _ = candidate_shares(full, noisy, target=0.99)
    assert np.all(strict[~np.isnan(strict)] >= loose[~np.isnan(loose)])


def plan(shares):
    return FilterPlan([0], None, 0.95, 0.99, np.array([100, 400]), np.array([0.01, 0.1]), np.array(shares, dtype=float))


def test_the_plan_serves_the_cells_around_a_query_and_exactly_outside_them():
    p = plan([[0.2, 0.5], [0.1, 0.3]])
    cells = {"c_k": 1, "min_fraction": 0}  # (no floors: the validated cells alone)
    assert p.candidates(99, 1, **cells) is None  # a batch smaller than every validated one
    assert p.candidates(400, 80, **cells) is None  # k/n = 0.2, larger than every validated share
    assert p.candidates(400, 4, **cells) == 40  # a validated cell
    assert p.candidates(200, 2, **cells) == 40  # between batch sizes: the larger share of the two (0.2)
    assert p.candidates(1000, 50, **cells) == 300  # above the largest batch: its share, for k/n = 0.05 -> 0.1's
    assert p.candidates(100, 1, **cells) == 20
    assert plan([[0.2, np.nan], [0.1, 0.3]]).candidates(200, 20, **cells) is None  # a cell around it runs exactly
    assert plan([[0.2, 1.0], [0.1, 0.3]]).candidates(100, 10, **cells) is None  # the whole batch: exactly


def test_the_plan_keeps_at_least_the_papers_floors():
    p = plan([[0.02, 0.5], [0.01, 0.3]])
    assert p.candidates(4000, 4) == 200  # min_fraction 0.05 of 4000 above the validated 1%
    assert p.candidates(4000, 30) == 300  # c_k 10 * 30
    assert p.candidates(4000, 30, c_k=1, min_fraction=0.01) == 40  # lower floors: the validated 1%
    assert p.candidates(400, 40) is None  # 10 * 40 is the whole batch: exactly


def scored(df):
    cheap = df[["a"]].to_numpy()
    other = df[["b"]].to_numpy() * 1.0
    third = df[["c"]].to_numpy() * 1.0
    return model.predict_proba(np.hstack([cheap, other, third]))[:, 1]


def fitted_scored(**options):
    global model
    model = LogisticRegression().fit(features(TRAIN), Y)
    optimized = willump.optimize(scored)
    costs = {"cheap": 1e-7, "other": 1e-5, "third": 1e-5}
    return optimized.fit(TRAIN, y=Y, validation=(VALID, Y_VALID), progress=False, costs=costs, check_speed=False,
                         cascades=False, **options)


@pytest.mark.parametrize("target", [0.9, 0.95, 0.99])
def test_filtered_top_k_meets_its_precision_target_on_new_rows(target):
    optimized = fitted_scored(top_k_precision=target)
    summary = optimized.explain().attrs["summary"]
    assert summary["top_k_filter"] == "on" and summary["top_k_precision"] == target
    exact = np.argsort(-scored(TEST), kind="stable")
    plan = optimized._fitted.top_k_plan
    for n in (300, 800, len(TEST)):
        for k in (3, 10, 30, n // 100 or 1):
            optimized.reset_stats()
            chosen = optimized.top_k(TEST.iloc[:n], k=k)
            truth = np.argsort(-scored(TEST.iloc[:n]), kind="stable")[:k] if n < len(TEST) else exact[:k]
            assert len(set(chosen) & set(truth)) >= target * k, (n, k)
            keep = plan.candidates(n, k)
            assert optimized.stats["top_k_candidates"] == (n if keep is None else keep)


def test_explain_shows_the_reference_query_and_the_shares():
    summary = fitted_scored().explain().attrs["summary"]
    reference = summary["top_k_reference_query"]
    assert set(reference) == {"k_share", "batch_rows", "validated_share", "candidate_share", "expected_precision"}
    assert reference["expected_precision"] >= 0.95 and 0 < reference["validated_share"] <= reference["candidate_share"] < 1
    assert "99% of 200" in summary["top_k_rule"]
    assert set(summary["top_k_candidate_shares"]) == {125, 500, 2000}


@pytest.mark.parametrize("bad", [0, 1.5, -0.1, True, "0.9"])
def test_top_k_precision_is_checked(bad):
    with pytest.raises(ValueError, match="top_k_precision"):
        fitted_scored(top_k_precision=bad)


def test_too_few_validation_rows_leave_the_filter_off():
    global model
    model = LogisticRegression().fit(features(TRAIN), Y)
    optimized = willump.optimize(scored).fit(
        TRAIN, y=Y, validation=(VALID.iloc[:80], Y_VALID[:80]), progress=False, check_speed=False, cascades=False,
        costs={"cheap": 1e-7, "other": 1e-5, "third": 1e-5},
    )
    assert optimized.explain().attrs["summary"]["top_k_filter"].startswith("off: 80 validation rows are too few")
