"""Cascades and top-K filter models: fit, serving, explain, stats, errors (paper §4.2-4.3)."""

import math
import re
import warnings

import cloudpickle
import numpy as np
import pandas as pd
import pytest
from lightgbm import LGBMClassifier
from sklearn.exceptions import DataConversionWarning
from sklearn.linear_model import LogisticRegression, Ridge

import willump
from willump.optimizations.cascades import choose_threshold
from willump.optimizations.selection import select_efficient


def slow_feature(value):
    """A per-row Python function: an expensive feature generator."""
    return math.sin(value) * 0.1 + sum(math.cos(value * i) for i in range(20)) * 1e-3


def make_rows(n, random_state=0, spread=3.0):
    rng = np.random.default_rng(random_state)
    x = rng.normal(scale=spread, size=n)
    z = rng.normal(size=n)
    y = (x + 0.5 * z + rng.normal(scale=0.3, size=n) > 0).astype(int)
    return pd.DataFrame({"x": x, "z": z}, index=rng.permutation(n) + 1000), y


def train_model(function, frame, y, estimator):
    """Fit ``estimator`` on what ``function`` feeds its model and install it as the global ``model``."""
    class Capture:
        def predict(self, X):
            self.X = X
            return np.zeros((len(X), 2))

        predict_proba = predict

    capture = globals()["model"] = Capture()
    function(frame)
    globals()["model"] = estimator.fit(capture.X, y)


def scored(df):
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return pd.Series(model.predict_proba(np.hstack([cheap, costly]))[:, 1], index=df.index, name="p")


def labelled(df):
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return model.predict(np.hstack([cheap, costly]))


TRAIN, Y_TRAIN = make_rows(3000, 0)
VALID, Y_VALID = make_rows(1500, 1)
TEST, Y_TEST = make_rows(1000, 2)


def fitted(function, **options):
    """``function`` fitted; its cascade and filter are on whenever their targets hold (``check_speed=False``):
    these tests check what is served, not the machine's speed (test_fit_decisions checks the timing decisions)."""
    train_model(function, TRAIN, Y_TRAIN, LogisticRegression())
    optimized = willump.optimize(function)
    options = {"check_speed": False, **options}
    return optimized.fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False, **options)


# --- Algorithm 1 and the threshold, on constructed numbers ------------------------------


def test_algorithm_1_takes_the_most_cost_effective_first():
    costs = [1.0, 10.0, 2.0, 30.0]
    importances = [5.0, 20.0, 8.0, 30.0]
    # effectiveness: 5, 2, 4, 1 -> order 0, 2, 1, 3; half of total cost is 21.5
    assert select_efficient(costs, importances, gamma=0.1) == [0, 2, 1]


def test_algorithm_1_stops_below_gamma_times_the_chosen_average():
    costs = [1.0, 1.0, 1.0, 1.0, 10.0]
    importances = [10.0, 9.0, 1.0, 1.0, 1.0]
    # after 0 and 1 the average is 9.5; 1.0 < 0.25 * 9.5 stops the search
    assert select_efficient(costs, importances, gamma=0.25) == [0, 1]
    assert select_efficient(costs, importances, gamma=0.05) == [0, 1, 2, 3]


def test_algorithm_1_skips_what_would_pass_half_the_total_cost():
    costs = [7.0, 5.0, 1.0]
    importances = [70.0, 10.0, 1.0]
    # 0 alone is more than half of 13: skipped; 1 and 2 fit under 6.5
    assert select_efficient(costs, importances, gamma=0.0) == [1, 2]
    assert select_efficient([5.0], [1.0]) == []


def unchanged(output):
    return output  # (what is scored: the model's output itself)


def test_threshold_is_the_lowest_on_the_grid_within_the_loss():
    y = np.array([1, 1, 0, 0, 1, 0, 1, 0, 1, 0])
    full = y.copy()  # the full model is always right
    small = np.array([1, 1, 0, 0, 0, 1, 0, 1, 1, 0])  # wrong on rows 4-7
    confidences = np.array([0.95, 0.95, 0.95, 0.95, 0.55, 0.65, 0.75, 0.85, 0.95, 0.95])
    accuracy = lambda t, p: float(np.mean(t == p))  # noqa: E731
    # Rows 4..7 must go to the full model: only a threshold above 0.85 does that.
    assert choose_threshold(unchanged, small, confidences, full, y, accuracy, 0.0) == (0.9, 1.0, 0.6)
    # Allowing one error in ten lets 0.85 be answered by the small model: threshold 0.8.
    assert choose_threshold(unchanged, small, confidences, full, y, accuracy, 0.1)[0] == 0.8
    # A small model wrong on every row: no threshold qualifies.
    assert choose_threshold(unchanged, 1 - y, np.full(10, 0.99), full, y, accuracy, 0.0) is None


# --- serving ------------------------------------------------------------------------------


def test_fit_chooses_the_cheap_decisive_ifv_and_explains_it():
    f = fitted(scored)
    table = f.explain()
    assert list(table.columns) == ["ifv", "cost_per_row_us", "importance", "cost_effectiveness", "selected"]
    assert list(table["ifv"]) == ["cheap", "costly"]
    assert list(table["selected"]) == [True, False]
    assert table.loc[1, "cost_per_row_us"] > table.loc[0, "cost_per_row_us"]
    summary = table.attrs["summary"]
    assert summary["cascades"].startswith("on") and summary["top_k_filter"] == "on"
    assert summary["threshold"] in [round(0.1 * i, 1) for i in range(1, 11)]
    assert summary["cascade_validation_score"] >= summary["full_model_validation_score"] - 0.001
    assert 0 < summary["small_model_fraction"] < 1
    assert summary["metric"] == "roc_auc"  # the function returns scores


def test_output_order_type_and_index_for_confident_unsure_and_mixed_batches():
    f = fitted(scored)
    threshold = f.explain().attrs["summary"]["threshold"]
    confident = TEST[TEST["x"].abs() > 8]  # far from the boundary
    unsure = TEST[TEST["x"].abs() < 0.05]
    assert len(confident) and len(unsure)
    for batch, small_rows in [(confident, len(confident)), (unsure, 0), (TEST, None)]:
        f.reset_stats()
        result = f(batch)
        exact = f.py_func(batch)
        assert isinstance(result, pd.Series) and result.name == "p" and result.dtype == exact.dtype
        pd.testing.assert_index_equal(result.index, batch.index)
        stats = f.stats
        assert stats["rows_seen"] == len(batch)
        assert stats["rows_small_model"] + stats["rows_full_model"] == len(batch)
        if small_rows is not None:
            assert stats["rows_small_model"] == small_rows
        # Rows sent to the full model get exactly the full model's answer.
        sent = np.maximum(result, 1 - result) < threshold
        np.testing.assert_allclose(result[sent], exact[sent], rtol=0, atol=1e-12)
    assert f.stats["rows_small_model"] > 0 and f.stats["rows_full_model"] > 0


def test_a_confident_batch_computes_no_expensive_ifv(monkeypatch):
    f = fitted(scored)
    calls = []
    monkeypatch.setattr(pd.Series, "apply", lambda self, *a, **k: calls.append(len(self)) or pd.Series.map(self, *a))
    f(TEST[TEST["x"].abs() > 8])
    assert calls == []
    f(TEST[TEST["x"].abs() < 0.05])
    assert calls and all(c <= (TEST["x"].abs() < 0.05).sum() for c in calls)


def test_single_rows_match_the_batch_answer():
    f = fitted(scored)
    batch = f(TEST)
    for position in [0, 17, 500, 999]:
        row = f(TEST.iloc[[position]])
        assert isinstance(row, pd.Series) and len(row) == 1 and row.index[0] == TEST.index[position]
        assert row.iloc[0] == pytest.approx(batch.iloc[position], abs=1e-12)


def test_set_threshold_trades_rows_answered_for_exactness_and_can_turn_cascades_off(monkeypatch):
    f = fitted(scored)
    chosen = f.explain().attrs["summary"].get("threshold")
    exact = f.py_func(TEST)
    small = pd.Series(f._fitted.small_model.predict_proba(TEST[["x"]].to_numpy())[:, 1], index=TEST.index, name="p")
    answered = []
    for threshold in [0, 0.5, 0.8, 0.95, 1]:
        assert f.set_threshold(threshold) is f
        f.reset_stats()
        result = f(TEST)
        sure = np.maximum(small, 1 - small) >= threshold
        assert f.stats["rows_small_model"] == sure.sum()
        pd.testing.assert_series_equal(result[sure], small[sure], rtol=0, atol=1e-12)
        pd.testing.assert_series_equal(result[~sure], exact[~sure], rtol=0, atol=1e-12)
        answered.append(sure.sum())
        summary = f.explain().attrs["summary"]
        assert summary["cascades"] == "on" and summary["threshold"] == threshold
        assert summary["fit_threshold"] == chosen and summary["threshold_rule"] == "set by hand with set_threshold"
        assert "cascade_validation_score" not in summary and "measured_speedup_batch" not in summary
    assert answered[0] == len(TEST) and answered == sorted(answered, reverse=True) and answered[-1] < answered[1]
    calls = []  # at 0 the small model answers every row: the costly IFV is never computed
    f.set_threshold(0)
    monkeypatch.setattr(pd.Series, "apply", lambda self, *a, **k: calls.append(len(self)) or pd.Series.map(self, *a))
    f(TEST)
    assert calls == []
    monkeypatch.undo()
    f.set_threshold(None)
    pd.testing.assert_series_equal(f(TEST), exact)
    assert f.explain().attrs["summary"]["cascades"] == "off: turned off with set_threshold(None)"


def test_set_threshold_needs_a_small_model_and_a_threshold_from_0_to_1():
    train_model(scored, TRAIN, Y_TRAIN, LogisticRegression())
    with pytest.raises(ValueError, match="call fit"):
        willump.optimize(scored).set_threshold(0.5)
    f = fitted(scored)
    for bad in [-0.1, 1.5, True, "0.5", float("nan")]:
        with pytest.raises(ValueError, match="threshold must be a number from 0"):
            f.set_threshold(bad)
    off = fitted(scored, cascades=False)
    with pytest.raises(ValueError, match=r"no small model to cascade with: not requested \(cascades=False\)"):
        off.set_threshold(0.5)


def test_labels_are_scored_by_accuracy_and_keep_their_dtype():
    f = fitted(labelled)
    assert f.explain().attrs["summary"]["metric"] == "accuracy"
    result, exact = f(TEST), f.py_func(TEST)
    assert result.dtype == exact.dtype and result.shape == exact.shape
    assert np.mean(result == Y_TEST) >= np.mean(exact == Y_TEST) - 0.01


def test_multi_class():
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"x": rng.normal(scale=3, size=3000), "z": rng.normal(size=3000)})
    y = np.digitize(frame["x"] + 0.2 * frame["z"], [-2.0, 2.0])  # three classes
    train_model(labelled, frame.iloc[:2000], y[:2000], LogisticRegression(max_iter=500))
    f = willump.optimize(labelled).fit(
        frame.iloc[:2000], y=y[:2000], validation=(frame.iloc[2000:], y[2000:]), check_speed=False, progress=False
    )
    assert f.explain().attrs["summary"]["cascades"].startswith("on")
    result = f(frame.iloc[2000:])
    assert set(np.unique(result)) <= {0, 1, 2}
    assert np.mean(result == y[2000:]) >= np.mean(f.py_func(frame.iloc[2000:]) == y[2000:]) - 0.01
    with pytest.raises(ValueError, match="binary classifier or a regressor"):
        f.top_k(frame, k=5)


def regression(df):
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return model.predict(np.hstack([cheap, costly]))


def test_regression_top_k_and_no_cascades():
    y = TRAIN["x"].to_numpy() * 2 + TRAIN["z"].to_numpy()
    train_model(regression, TRAIN, y, Ridge())
    f = willump.optimize(regression)
    exact = np.argsort(-f.py_func(TEST), kind="stable")[:10]
    np.testing.assert_array_equal(f.top_k(TEST, k=10), exact)  # before fit: exact
    with pytest.raises(ValueError, match="cascades=False"):
        f.fit(TRAIN, y=y, validation=(VALID, VALID["x"] * 2 + VALID["z"]), progress=False)
    f.fit(TRAIN, y=y, validation=(VALID, VALID["x"] * 2 + VALID["z"]), cascades=False, progress=False,
          check_speed=False)
    assert f.explain().attrs["summary"]["cascades"].startswith("off")
    np.testing.assert_array_equal(f(TEST), f.py_func(TEST))  # no cascade: exact
    chosen = f.top_k(TEST, k=10)
    assert len(chosen) == 10 and len(set(chosen) & set(exact)) >= 0.95 * 10
    assert f.stats["top_k_candidates"] == f._fitted.top_k_plan.candidates(len(TEST), 10) < len(TEST)
    np.testing.assert_array_equal(f.top_k(TEST, k=5000), np.argsort(-f.py_func(TEST), kind="stable"))  # clamped


def test_top_k_of_a_classifier_ranks_the_positive_class():
    f = fitted(scored)
    exact = np.argsort(-f.py_func(TEST).to_numpy(), kind="stable")[:20]
    chosen = f.top_k(TEST, k=20)
    assert len(set(chosen) & set(exact)) >= 19
    assert f.stats["top_k_queries"] == 1


def test_fit_is_deterministic_under_random_state():
    first = fitted(scored, random_state=3)
    second = fitted(scored, random_state=3)
    for key in ["threshold", "efficient_ifvs", "small_model_fraction"]:
        assert first.explain().attrs["summary"][key] == second.explain().attrs["summary"][key]
    pd.testing.assert_series_equal(first(TEST), second(TEST))


def test_fitted_state_survives_pickling():
    f = fitted(scored)
    f(TEST)
    restored = cloudpickle.loads(cloudpickle.dumps(f))
    assert restored.stats == f.stats
    pd.testing.assert_series_equal(restored(TEST), f(TEST))
    pd.testing.assert_frame_equal(restored.explain(), f.explain())
    np.testing.assert_array_equal(restored.top_k(TEST, k=7), f.top_k(TEST, k=7))


def test_explain_before_fit():
    f = willump.optimize(scored)
    table = f.explain()
    assert list(table["ifv"]) == ["cheap", "costly"] and not table["selected"].any()
    assert table.attrs["summary"]["fitted"] is False


def test_cascades_need_enough_validation_rows_of_several_classes():
    """A threshold chosen on a handful of rows, or on rows of one class, says nothing of new rows: no cascade
    (fitted on 5 held-out KKBox rows, a stranger's cascade lost 0.03 accuracy against a target of 0.001)."""
    train_model(scored, TRAIN, Y_TRAIN, LogisticRegression())
    f = willump.optimize(scored)
    f.fit(TRAIN, y=Y_TRAIN, validation=(VALID[:99], Y_VALID[:99]), progress=False, check_speed=False)
    assert f.explain().attrs["summary"]["cascades"] == (
        "off: 99 validation rows are too few to validate a cascade (at least 100 are needed)")
    f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, np.ones_like(Y_VALID)), progress=False, check_speed=False)
    assert f.explain().attrs["summary"]["cascades"].startswith("off: the validation labels are all 1: ")
    f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False, check_speed=False, costs={"cheap": 1e-7, "costly": 1e-4})
    assert f.explain().attrs["summary"]["cascades"] == "on"  # (the same rows, labelled)


def test_holding_out_validation_rows_warns():
    train_model(scored, TRAIN, Y_TRAIN, LogisticRegression())
    f = willump.optimize(scored)
    with pytest.warns(willump.WillumpWarning, match="conservative"):
        f.fit(TRAIN, y=Y_TRAIN, validation_fraction=0.3, progress=False)
    assert f.explain().attrs["summary"]["validation_rows"] == 900


def test_bad_arguments():
    train_model(scored, TRAIN, Y_TRAIN, LogisticRegression())
    f = willump.optimize(scored)
    with pytest.raises(ValueError, match="2999 labels but the inputs have 3000 rows"):
        f.fit(TRAIN, y=Y_TRAIN[:-1], validation=(VALID, Y_VALID), progress=False)
    with pytest.raises(ValueError, match="validation y has 10 labels"):
        f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID[:10]), progress=False)
    with pytest.raises(ValueError, match="regression target"):
        f.fit(TRAIN, y=TRAIN["x"].to_numpy() * 1.5, validation=(VALID, Y_VALID), progress=False)
    with pytest.raises(ValueError, match="validation must be a pair"):
        f.fit(TRAIN, y=Y_TRAIN, validation=VALID, progress=False)
    with pytest.warns(DataConversionWarning):  # (a column vector, raveled as scikit-learn's estimators do)
        f.fit(TRAIN, y=Y_TRAIN.reshape(-1, 1), validation=(VALID, Y_VALID), progress=False, check_speed=False, top_k=False)
    with pytest.raises(ValueError, match=r"y must hold one label per row \(a 1-D array\); got an array of shape \(3000, 2\)"):
        f.fit(TRAIN, y=np.stack([Y_TRAIN, Y_TRAIN], axis=1), validation=(VALID, Y_VALID), progress=False)
    with pytest.raises(TypeError, match=r"fit takes the labels by keyword: scored.fit\(<the function's arguments for "
                       r"the training rows>, y=labels\); the 2 given by position are the function's own"):
        f.fit(TRAIN, Y_TRAIN)  # (as scikit-learn's fit(X, y))
    named = np.where(Y_TRAIN == 1, "yes", "no")  # (labels the model was not fitted on: a cascade would answer them)
    with pytest.raises(ValueError, match=r"y holds labels LogisticRegression does not predict \('(no|yes)', '(no|yes)'\)"):
        f.fit(TRAIN, y=named, validation=(VALID, Y_VALID), progress=False)
    with pytest.raises(ValueError, match=r"the validation y holds labels .* \(nan\); its classes_ are \[0, 1\]"):
        f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, np.where(np.arange(len(Y_VALID)) == 3, np.nan, Y_VALID)), progress=False)
    with pytest.raises(ValueError, match="accuracy_loss"):
        f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), accuracy_loss=2, progress=False)
    for option, value, said in [("accuracy_loss", "0.01", r"accuracy_loss must be in \[0, 1\); got '0.01'"),
                                ("gamma", -1, "gamma must be a finite number >= 0"), ("gamma", np.nan, "gamma must be"),
                                ("cascades", "yes", "cascades must be True or False; got 'yes'"),
                                ("top_k", None, "top_k must be True or False"), ("check_speed", 1, "check_speed must be")]:
        with pytest.raises(ValueError, match=said):
            f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False, **{option: value})
    with pytest.raises(ValueError, match="metric must be a callable"):
        f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), metric="auc", progress=False)
    for k in [0, -3, 2.5]:
        with pytest.raises(ValueError, match="k must be a positive integer"):
            f.top_k(TEST, k=k)
    globals()["model"] = LogisticRegression()
    with pytest.raises(ValueError, match="not fitted"):
        f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False)


MEMBERS = pd.DataFrame({"user": np.arange(50), "age": np.random.default_rng(0).integers(15, 60, 50)})
SONGS = pd.DataFrame({"song": np.arange(80), "length": np.random.default_rng(1).normal(200, 30, 80)})


def joined(df):
    df = df.merge(MEMBERS, on="user", how="left")
    df = df.merge(SONGS, on="song", how="left")
    return model.predict_proba(df[["signal", "age", "length"]])[:, 1]


def test_lightgbm_with_table_lookups_fits_and_serves():
    rng = np.random.default_rng(7)
    frame = pd.DataFrame({"user": rng.integers(0, 60, 4000), "song": rng.integers(0, 90, 4000), "signal": rng.normal(size=4000)})
    y = (frame["signal"] + rng.normal(scale=0.5, size=4000) > 0).astype(int).to_numpy()
    train_model(joined, frame.iloc[:2500], y[:2500], LGBMClassifier(n_estimators=30, verbose=-1, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", willump.WillumpWarning)
        f = willump.optimize(joined).fit(
            frame.iloc[:2500], y=y[:2500], validation=(frame.iloc[2500:3500], y[2500:3500]), progress=False,
            check_speed=False,  # (this test is about the filtered path itself, not whether it pays)
        )
    summary = f.explain().attrs["summary"]
    assert summary["importance"].startswith("permutation")
    test = frame.iloc[3500:]
    result, exact = f(test), f.py_func(test)
    assert result.shape == exact.shape and result.dtype == exact.dtype
    exact_top = np.argsort(-exact, kind="stable")[:10]
    chosen = f.top_k(test, k=10)  # 500 rows: the filter keeps what fit validated for k/n = 2%
    assert f.stats["top_k_candidates"] == f._fitted.top_k_plan.candidates(len(test), 10) < len(test)
    table = f.explain_compilation()  # the models fit trained are answered by the tree kernel too
    trained = table[table["call"].str.contains("top-K filter model")]
    assert len(trained) == 1 and trained["status"].iloc[0] == "compiled" and trained["calls"].iloc[0] > 0, table
    assert trained["operator"].iloc[0] == "LGBMClassifier.predict_proba" and trained["line"].isna().all(), table
    assert len(set(chosen) & set(exact_top)) >= 0.95 * 10
    assert np.all(np.diff(exact[chosen]) <= 0)  # the candidates are ranked by the full model's own scores
    # Rows the cascade sends to the full model get exactly its answer.
    sent = np.maximum(result, 1 - result) < summary["threshold"] if "threshold" in summary else np.ones(len(test), bool)
    np.testing.assert_allclose(result[sent], exact[sent], rtol=0, atol=1e-12)



def test_a_threshold_that_passes_only_by_luck_of_the_validation_rows_is_not_chosen():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    full = y.copy()
    full[:20] = 1 - full[:20]  # the full model is wrong on 20 rows
    small = y.copy()
    small[20:40] = 1 - small[20:40]  # the small model on 20 others: the same accuracy
    confidences = np.where(np.arange(400) < 40, 0.75, 0.95)
    accuracy = lambda t, p: float(np.mean(t == p))  # noqa: E731
    # On these rows the swap costs nothing, so the plain rule answers everything from the small model...
    assert choose_threshold(unchanged, small, confidences, full, y, accuracy, 0.0)[0] == 0.1
    # ...but 40 rows changing hands can cost several points on other rows: the bootstrap sends them on.
    assert choose_threshold(unchanged, small, confidences, full, y, accuracy, 0.0, bootstrap=200)[0] == 0.8


def test_fit_logs_its_stages(caplog):
    with caplog.at_level("INFO", logger="willump"):
        fitted(scored)
    messages = [r.getMessage() for r in caplog.records if r.name == "willump"]
    assert any("features computed" in m for m in messages)
    assert any("threshold chosen" in m for m in messages)
    assert any(m.startswith("fit: done") for m in messages)


def features_of(frame):
    return np.column_stack([frame["x"], frame["z"].apply(slow_feature)])


def booster_scores(df):
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return booster.predict(np.hstack([cheap, costly]))


def test_lightgbm_booster_probabilities_are_scores():
    import lightgbm

    global booster
    booster = lightgbm.train({"objective": "binary", "verbose": -1, "seed": 0}, lightgbm.Dataset(features_of(TRAIN), Y_TRAIN), 30)
    f = willump.optimize(booster_scores).fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False)
    assert f.explain().attrs["summary"]["metric"] == "roc_auc"
    result = f(TEST)
    assert result.shape == (len(TEST),) and result.dtype == np.float64


def margins(df):
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return model.decision_function(np.hstack([cheap, costly]))


def test_multi_class_margins():
    from sklearn.svm import LinearSVC

    y3, valid3 = np.digitize(TRAIN["x"], [-2, 2]), np.digitize(VALID["x"], [-2, 2])
    globals()["model"] = LinearSVC().fit(features_of(TRAIN), y3)
    f = willump.optimize(margins).fit(TRAIN, y=y3, validation=(VALID, valid3), progress=False)
    assert f.explain().attrs["summary"]["metric"] == "roc_auc"
    assert f(TEST).shape == (len(TEST), 3)


def frames_with_fresh_index(df):
    cheap = df[["x"]].reset_index(drop=True)
    costly = pd.DataFrame({"s": df["z"].apply(slow_feature).to_numpy()})
    return model.predict_proba(pd.concat([cheap, costly], axis=1))[:, 1]


def test_reused_rows_get_the_index_their_generator_gives():
    globals()["model"] = LogisticRegression().fit(pd.DataFrame({"x": TRAIN["x"], "s": TRAIN["z"].apply(slow_feature)}), Y_TRAIN)
    f = willump.optimize(frames_with_fresh_index).fit(
        TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), check_speed=False, progress=False
    )
    assert f.explain().attrs["summary"]["cascades"].startswith("on")
    result, exact = f(TEST), f.py_func(TEST)
    sent = np.maximum(result, 1 - result) < f.explain().attrs["summary"]["threshold"]
    assert sent.any()
    np.testing.assert_allclose(result[sent], exact[sent], rtol=0, atol=1e-12)


def batch_statistic(df):
    centered = df["z"] - df["z"].mean()
    cheap = df[["x"]].to_numpy()
    costly = centered.apply(slow_feature).to_numpy().reshape(-1, 1)
    return model.predict_proba(np.hstack([cheap, costly]))[:, 1]


def test_features_that_depend_on_the_batch_turn_the_optimizations_off():
    globals()["model"] = LogisticRegression().fit(features_of(TRAIN), Y_TRAIN)
    f = willump.optimize(batch_statistic).fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False)
    summary = f.explain().attrs["summary"]
    assert "depends on the other rows" in summary["cascades"] and "depends on the other rows" in summary["top_k_filter"]
    np.testing.assert_array_equal(f(TEST), f.py_func(TEST))


def with_column_names(df, columns):
    cheap = df[[columns[0]]].to_numpy()
    costly = df[columns[1]].apply(slow_feature).to_numpy().reshape(-1, 1)
    return model.predict_proba(np.hstack([cheap, costly]))[:, 1]


def test_an_argument_as_long_as_a_small_batch_is_not_cut_to_rows():
    globals()["model"] = LogisticRegression().fit(features_of(TRAIN), Y_TRAIN)
    names = ["x", "z"]
    f = willump.optimize(with_column_names).fit(
        TRAIN, names, y=Y_TRAIN, validation=((VALID, names), Y_VALID), check_speed=False, progress=False
    )
    assert f.explain().attrs["summary"]["cascades"] == "on"
    batch = pd.concat([TEST[TEST["x"].abs() > 8].head(1), TEST[TEST["x"].abs() < 0.05].head(1)])
    result = f(batch, names)
    assert result.shape == (2,) and result[1] == pytest.approx(f.py_func(batch, names)[1], abs=1e-12)


def test_top_k_options_are_checked():
    f = fitted(scored)
    with pytest.raises(ValueError, match="c_k"):
        f.top_k(TEST, k=10, c_k=0.5)
    with pytest.raises(ValueError, match="c_k"):
        f.top_k(TEST, k=10, c_k=float("nan"))
    with pytest.raises(ValueError, match="min_fraction"):
        f.top_k(TEST, k=10, min_fraction=2)
    with pytest.raises(ValueError, match="positive integer"):
        f.top_k(TEST, k=True)
    assert len(f.top_k(TEST, k=10, c_k=1, min_fraction=0)) == 10
    assert len(f.top_k(TEST.iloc[:0], k=3)) == 0


def test_stats_count_rows_when_cascades_are_off():
    globals()["model"] = LogisticRegression().fit(features_of(TRAIN), Y_TRAIN)
    f = willump.optimize(batch_statistic).fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False)
    f(TEST)
    assert f.stats["rows_seen"] == len(TEST) == f.stats["rows_full_model"]


def test_cascades_are_one_decision_for_every_query_size():
    f = fitted(scored)  # (the decision from timings of both sizes: test_fit_decisions)
    assert f.explain().attrs["summary"]["cascades"] == "on"
    f.reset_stats()
    batch = f(TEST.iloc[:50])
    for i in range(5):  # a row's answer does not depend on the rows queried with it
        assert f(TEST.iloc[[i]]).iloc[0] == pytest.approx(batch.iloc[i], abs=1e-12)
    assert f.stats["rows_small_model"] > 0


def with_noise(df):
    cheap = df[["x"]].to_numpy()
    noise = df[["w"]].to_numpy()
    costly = df["z"].apply(slower_feature).to_numpy().reshape(-1, 1)
    return pd.Series(model.predict_proba(np.hstack([cheap, noise, costly]))[:, 1], index=df.index, name="p")


def slower_feature(value):
    """Costly enough that a nearest-neighbour small model pays for itself."""
    return sum(math.cos(value * i) for i in range(1500)) * 1e-3


def noisy(frame, random_state):
    return frame.assign(w=np.random.default_rng(random_state).normal(scale=1000.0, size=len(frame)))


def test_a_shorter_prefix_of_the_efficient_ifvs_cascades_when_the_whole_set_cannot(monkeypatch):
    # gamma=0 takes the noise column w into the efficient set after x. A nearest-neighbour
    # small model on (x, w) measures distance by the noise and is sure of almost no row (0.2%):
    # too few to pay for itself; on x alone, with labels that x decides, it is sure of most rows.
    # The expected speed-up decides, from the given costs and the small model's measured cost
    # (~7 us per row): it pays on (x, w) only below 0.3 us, and on x alone above 150 us.
    from sklearn.neighbors import KNeighborsClassifier
    from willump.optimizations import fit as fitting

    decide = fitting.serving_decision  # (the measured serving check: test_fit_decisions)
    monkeypatch.setattr(fitting, "serving_decision", lambda exact, cascaded: (True, decide(exact, cascaded)[1]))
    train, valid, test = noisy(TRAIN, 10), noisy(VALID, 11), noisy(TEST, 12)
    y_train, y_valid = (train["x"] > 0).astype(int).to_numpy(), (valid["x"] > 0).astype(int).to_numpy()
    train_model(with_noise, train, y_train, LogisticRegression())
    f = willump.optimize(with_noise).fit(
        train, y=y_train, validation=(valid, y_valid), gamma=0.0, small_model=KNeighborsClassifier(n_neighbors=50),
        costs={"cheap": 1e-7, "noise": 1e-7, "costly": 1.5e-4}, progress=False,
    )
    summary = f.explain().attrs["summary"]
    attempts = summary["cascade_attempts"]
    assert [a["ifvs"] for a in attempts] == [["cheap", "noise"], ["cheap"]]
    assert attempts[0]["outcome"].startswith("at threshold 0.7 the small model answers 0.2% of the validation rows")
    assert attempts[1]["outcome"] == "cascades on" and summary["cascades"] == "on"
    assert summary["efficient_ifvs"] == ["cheap"] and list(f.explain()["selected"]) == [True, False, False]
    assert summary["cascade_validation_score"] >= summary["full_model_validation_score"] - 0.001
    f.reset_stats()
    result = f(test)
    assert f.stats["rows_small_model"] > 0
    assert isinstance(result, pd.Series) and result.index.equals(test.index)
    exact = with_noise(test)
    sure = np.maximum(result, 1 - result) >= summary["threshold"]
    # a row that differs from the exact answer is one the small model was sure of
    assert (sure | (result == exact)).all() and not result.equals(exact)


def test_when_no_prefix_cascades_fit_reports_the_whole_set_and_every_attempt():
    from sklearn.dummy import DummyClassifier

    train, valid, test = noisy(TRAIN, 10), noisy(VALID, 11), noisy(TEST, 12)
    train_model(with_noise, train, Y_TRAIN, LogisticRegression())
    f = willump.optimize(with_noise).fit(
        train, y=Y_TRAIN, validation=(valid, Y_VALID), gamma=0.0, small_model=DummyClassifier(), progress=False
    )
    summary = f.explain().attrs["summary"]
    assert [a["ifvs"] for a in summary["cascade_attempts"]] == [["cheap", "noise"], ["cheap"]]
    assert all(a["outcome"] != "cascades on" for a in summary["cascade_attempts"])
    assert summary["cascades"].endswith("nor did any shorter prefix of the efficient IFVs cascade")
    assert summary["efficient_ifvs"] == ["cheap", "noise"] and list(f.explain()["selected"]) == [True, True, False]
    assert "threshold" not in summary
    pd.testing.assert_series_equal(f(test), with_noise(test))


def test_the_prefix_search_tries_longest_first_under_a_stricter_bootstrap_and_restores_the_whole_set():
    from willump.optimizations.fit import Fitted, _choose_cascade

    fitted = Fitted(["a", "b", "c", "d"], selected=[2, 0, 3], small_model="whole")
    calls = []

    def small_on(selected):
        return f"model on {selected}", f"input on {selected}"

    def attempt(small_valid_X, confidence):
        calls.append((list(fitted.selected), fitted.small_model, small_valid_X, confidence))
        if len(calls) == 1:  # a threshold, then too slow: the real helpers set and clear these
            fitted.threshold, fitted.cascade_reason = None, "slower"
            return {"metric": "roc_auc", "expected_speedup_seen": 0.8}
        fitted.cascade_reason = f"no threshold {len(calls)}"
        return {"metric": "roc_auc", "attempt": len(calls)}

    assert _choose_cascade(fitted, "whole input", small_on, attempt) == "whole input"
    assert calls == [
        ([2, 0, 3], "whole", "whole input", 0.95),
        ([2, 0], "model on [2, 0]", "input on [2, 0]", 1 - 0.05 / 2),
        ([2], "model on [2]", "input on [2]", 1 - 0.05 / 2),
    ]
    assert fitted.selected == [2, 0, 3] and fitted.small_model == "whole" and fitted.threshold is None
    assert fitted.cascade_reason == "slower; nor did any shorter prefix of the efficient IFVs cascade"
    assert fitted.summary["expected_speedup_seen"] == 0.8 and "attempt" not in fitted.summary
    assert [a["ifvs"] for a in fitted.summary["cascade_attempts"]] == [["c", "a", "d"], ["c", "a"], ["c"]]
    assert fitted.summary["efficient_ifvs"] == ["c", "a", "d"]

    calls.clear()
    fitted = Fitted(["a", "b", "c", "d"], selected=[2, 0, 3], small_model="whole")

    def second_cascades(small_valid_X, confidence):
        calls.append(confidence)
        if len(calls) == 2:
            fitted.threshold = 0.7
            return {"threshold": 0.7}
        fitted.cascade_reason = "no threshold"
        return {"metric": "roc_auc"}

    assert _choose_cascade(fitted, "whole input", small_on, second_cascades) == "input on [2, 0]"
    assert fitted.cascading and fitted.small_model == "model on [2, 0]" and fitted.cascade_reason is None
    assert fitted.summary["threshold"] == 0.7 and fitted.summary["efficient_ifvs"] == ["c", "a"]
    assert [a["outcome"] for a in fitted.summary["cascade_attempts"]] == ["no threshold", "cascades on"]


PAIRED_A, PAIRED_B = np.random.default_rng(4).normal(size=(2, 3000, 2))
PAIRED_Y = (PAIRED_A[:, 0] + 0.05 * PAIRED_B[:, 0] > 0).astype(int)
PAIRED = LogisticRegression().fit(np.hstack([PAIRED_A, PAIRED_B]), PAIRED_Y)


def paired(a, b):
    fa = a * 1.0
    fb = b * 1.0
    return PAIRED.predict(np.hstack([fa, fb]))


def test_row_arguments_of_different_lengths_raise_what_the_function_raises():
    """After fit the small model may answer a's row without b being read: a call whose row arguments
    disagree runs as written (numpy's ValueError), not as a cascade."""
    f = willump.optimize(paired).fit(PAIRED_A[:2000], PAIRED_B[:2000], y=PAIRED_Y[:2000], progress=False,
                                     validation=((PAIRED_A[2000:], PAIRED_B[2000:]), PAIRED_Y[2000:]),
                                     check_speed=False, costs={"fa": 1e-6, "fb": 1e-5}, accuracy_loss=0.02)
    assert f.explain().attrs["summary"]["cascades"] == "on"
    for a, b in [(PAIRED_A[:1], PAIRED_B[:10]), (PAIRED_A[:10], PAIRED_B[:1]), (PAIRED_A[:5], 1.0)]:
        with pytest.raises(ValueError) as expected:
            paired(a, b)
        with pytest.raises(ValueError, match=re.escape(str(expected.value))):
            f(a, b)
    f.reset_stats()
    f(PAIRED_A[2000:], PAIRED_B[2000:])
    assert f.stats["rows_small_model"] > 0


def parsed(df):
    cheap = df[["x"]].to_numpy()
    costly = pd.to_numeric(df["z"]).apply(slow_feature).to_numpy().reshape(-1, 1)
    return model.predict(np.hstack([cheap, costly]))


def as_text(frame):
    return frame.assign(z=frame["z"].astype(str))


def test_an_error_in_the_rows_a_cascade_or_filter_chose_is_the_functions_own():
    """A feature failing on a row the full model answers raises the function's error for the batch
    (pandas names the row's position in it), not the error of the rows the cascade computed."""
    train_model(parsed, as_text(TRAIN), Y_TRAIN, LogisticRegression())
    f = willump.optimize(parsed).fit(as_text(TRAIN), y=Y_TRAIN, validation=(as_text(VALID), Y_VALID),
                                     progress=False, check_speed=False)
    summary = f.explain().attrs["summary"]
    assert summary["cascades"] == "on" and summary["top_k_filter"] == "on"
    x = TEST["x"].to_numpy()
    f.reset_stats()
    f.top_k(as_text(TEST), k=5)
    assert 0 < f.stats["top_k_candidates"] < len(TEST)
    for bad_row, call in [(int(np.argmin(np.abs(x))), f), (int(np.argmax(x)), lambda b: f.top_k(b, k=5))]:
        batch = as_text(TEST)
        batch.iloc[bad_row, batch.columns.get_loc("z")] = "oops"
        with pytest.raises(ValueError, match=f"position {bad_row}$") as expected:
            parsed(batch)
        with pytest.raises(ValueError, match=re.escape(str(expected.value))):
            call(batch)
    assert f(as_text(TEST)).tolist() == f(as_text(TEST)).tolist()  # (and it still serves)


def test_a_model_refitted_or_replaced_after_fit_is_answered_exactly():
    """The small model and the filter stand for the model fit saw: once it is refitted in place (a nightly
    retrain) or its name rebound, calls are the function's, with one warning, until fit runs again."""
    global model
    f = fitted(scored)
    f(TEST)
    assert f.stats["rows_small_model"] > 0
    seen = model
    train_model(scored, TRAIN, 1 - Y_TRAIN, LogisticRegression())  # (the name rebound to another model)
    f.reset_stats()
    with pytest.warns(willump.WillumpWarning, match="refitted or replaced since fit"):
        pd.testing.assert_series_equal(f(TEST), scored(TEST), check_exact=True)
    assert f.stats["rows_small_model"] == 0
    assert f.top_k(TEST, k=5).tolist() == list(np.argsort(-scored(TEST).to_numpy(), kind="stable")[:5])
    model = seen
    f(TEST)
    assert f.stats["rows_small_model"] > 0  # (fit's model again)
    train_model(scored, TRAIN, 1 - Y_TRAIN, model)  # (refitted in place: the same object)
    assert model is seen
    f.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (warned once per fit)
        pd.testing.assert_series_equal(f(TEST), scored(TEST), check_exact=True)
    assert f.stats["rows_small_model"] == 0
    f.fit(TRAIN, y=1 - Y_TRAIN, validation=(VALID, 1 - Y_VALID), progress=False, check_speed=False)
    f(TEST)
    assert f.stats["rows_small_model"] > 0
    train_model(scored, TRAIN, 1 - Y_TRAIN, LogisticRegression())  # (refitted to the same model: the same pickle)
    f.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(TEST)
    assert f.stats["rows_small_model"] > 0


def negative_class(df):
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return model.predict_proba(np.hstack([cheap, costly]))[:, 0]


def named_labels(df):
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return np.where(model.predict(np.hstack([cheap, costly])) == 1, "yes", "no")


@pytest.mark.parametrize("function, same_as", [(negative_class, scored), (named_labels, labelled)])
def test_the_default_metric_scores_the_models_output_not_what_the_function_makes_of_it(function, same_as):
    """y holds the model's labels: the ROC AUC of ``p[:, 0]`` against them is inverted (a worse cascade would
    score better), and names are never equal to them (every cascade would tie at 0): fit scores the model's
    output, so these functions get the threshold of the functions returning it as it is."""
    expected, summary = (fitted(f).explain().attrs["summary"] for f in (same_as, function))
    assert summary["cascades"] == expected["cascades"] == "on"
    for key in ("metric", "full_model_validation_score", "threshold", "cascade_validation_score"):
        assert summary[key] == expected[key], key
