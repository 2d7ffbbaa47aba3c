"""fit's decisions without the machine's speed: the timing decisions on injected timings, the
threshold boundary ("confidence at least the threshold" takes the small model's answer), and two
fits of the same data making the same decisions."""

import math

import numpy as np
import pandas as pd
import pytest
from lightgbm import LGBMClassifier
from sklearn.linear_model import LogisticRegression

import willump
from willump.optimizations import fit as fitting
from willump.optimizations.cascades import choose_threshold
from willump.optimizations.fit import MIN_SPEEDUP, PathCosts, expected_speedup_decision, serving_decision


def slow_feature(value):
    return math.sin(value) * 0.1 + sum(math.cos(value * i) for i in range(20)) * 1e-3


def make_rows(n, random_state):
    rng = np.random.default_rng(random_state)
    frame = pd.DataFrame({"x": rng.normal(scale=3.0, size=n), "w": rng.normal(size=n), "z": rng.normal(size=n)})
    y = (frame["x"] + 0.5 * frame["z"] + 0.3 * frame["w"] + rng.normal(scale=0.3, size=n) > 0).astype(int)
    return frame, y.to_numpy()


TRAIN, Y_TRAIN = make_rows(1500, 0)
VALID, Y_VALID = make_rows(1000, 1)
TEST, _ = make_rows(500, 2)


def scored(df):
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return pd.Series(model.predict_proba(np.hstack([cheap, costly]))[:, 1], index=df.index, name="p")


def three_ifvs(df):
    cheap = df[["x"]].to_numpy()
    middle = df[["w"]].to_numpy() * 2.0
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return model.predict_proba(np.hstack([cheap, middle, costly]))[:, 1]


def features(function, frame):
    columns = {"scored": [frame["x"], frame["z"].apply(slow_feature)],
               "three_ifvs": [frame["x"], frame["w"] * 2.0, frame["z"].apply(slow_feature)]}[function.__name__]
    return np.column_stack(columns)


def optimized(function, estimator, **options):
    """``function`` with ``estimator`` trained on its features as the global ``model``, fitted."""
    globals()["model"] = estimator.fit(features(function, TRAIN), Y_TRAIN)
    options = {"validation": (VALID, Y_VALID), "progress": False, **options}
    return willump.optimize(function).fit(TRAIN, y=Y_TRAIN, **options)


SCORED_COSTS = {"cheap": 1e-7, "costly": 1e-5}  # (what the machine measures, to 100x; given, to decide alike)


# --- the expected speed-up, on injected costs ------------------------------------------------


def test_the_expected_speedup_says_what_was_measured_when_the_small_model_answers_every_row():
    costs = PathCosts(preprocessing=0.2e-6, small_ifvs=1.1e-6, small_model=11e-6, other_ifvs=0.2e-6, full_model=0.2e-6)
    worth, speedup, reason = expected_speedup_decision(costs, answered=1.0, threshold=0.1)
    assert not worth and speedup == pytest.approx(1.7 / 12.3)
    assert reason == (
        "at threshold 0.1 the small model answers 100% of the validation rows; per row the cascade costs 12.3 us "
        "(preprocessing 0.2 us + its IFVs 1.1 us + small model 11 us) against 1.7 us for the full model's path "
        "(preprocessing 0.2 us + all IFVs 1.3 us + full model 0.2 us): expected speed-up 0.14x, below 1x"
    )
    assert "too few" not in reason


def test_the_expected_speedup_counts_the_rows_the_small_model_leaves():
    costs = PathCosts(preprocessing=0.5e-6, small_ifvs=1e-6, small_model=1e-6, other_ifvs=2e-6, full_model=0.5e-6)
    worth, speedup, reason = expected_speedup_decision(costs, answered=0.2, threshold=0.5)
    # exact path 4 us; the cascade 2.5 us for every row and 3 us more for the 80% it leaves
    assert not worth and speedup == pytest.approx(4 / (2.5 + 0.8 * 3))
    assert reason.startswith("at threshold 0.5 the small model answers 20% of the validation rows; per row the "
                             "cascade costs 4.9 us (")
    assert "+ 80% x 3 us for the rows it leaves to the full model's path) against 4 us" in reason
    assert reason.endswith("expected speed-up 0.82x, below 1x") and "too few" not in reason
    worth, speedup, reason = expected_speedup_decision(costs, answered=0.9, threshold=0.5)
    assert worth and speedup == pytest.approx(4 / 2.8) and reason.endswith("expected speed-up 1.43x")


def test_a_share_that_is_almost_all_rows_is_not_rounded_to_all():
    costs = PathCosts(preprocessing=0.0, small_ifvs=1e-6, small_model=1e-6, other_ifvs=2e-6, full_model=1e-6)
    reason = expected_speedup_decision(costs, answered=0.996, threshold=0.9)[2]
    assert "answers 99.6% of the validation rows" in reason and "+ 0.4% x 3 us for the rows it leaves" in reason


# --- the measured serving check, on injected timings -----------------------------------------


def test_serving_keeps_a_cascade_faster_on_the_whole_and_says_what_was_measured():
    exact, cascaded = {"batch": 10e-6, "single_row": 100e-6}, {"batch": 2e-6, "single_row": 150e-6}
    keep, reason = serving_decision(exact, cascaded)
    assert keep  # 5x in a batch, 0.67x row by row: 1.83x together
    assert reason == (
        "measured on the validation rows, the cascade takes 2 us per row against 10 us for the exact compiled "
        "path in a batch (5.00x) and 150 us against 100 us row by row (0.67x): 1.83x together (geometric mean), "
        "at least the 1.1x a cascade must reach"
    )


def test_serving_turns_off_a_cascade_that_only_ties_with_the_exact_path():
    # Speed-ups around 1x, as noise spreads the same cascade's over runs: off every time.
    for batch, single in [(1.0, 1.0), (1.05, 1.05), (0.95, 1.08), (1.2, 0.9), (1.09, 1.09)]:
        keep, reason = serving_decision({"batch": batch, "single_row": single}, {"batch": 1.0, "single_row": 1.0})
        assert not keep, (batch, single)
        assert reason.endswith(f"below the {MIN_SPEEDUP}x a cascade must reach")
    assert serving_decision({"batch": 1.1, "single_row": 1.1}, {"batch": 1.0, "single_row": 1.0})[0]
    assert not serving_decision({"batch": 4.0, "single_row": 0.25}, {"batch": 1.0, "single_row": 1.0})[0]


def test_a_function_served_one_way_is_timed_that_way_only():
    exact, cascaded = {"batch": 10e-6}, {"batch": 7e-6}
    keep, reason = serving_decision(exact, cascaded)
    assert keep and reason == (
        "measured on the validation rows, the cascade takes 7 us per row against 10 us for the exact compiled "
        "path in a batch (1.43x): 1.43x, at least the 1.1x a cascade must reach"
    )
    assert not serving_decision({"single_row": 100e-6}, {"single_row": 95e-6})[0]  # (1.05x)
    # The batch job keeps a cascade that "both" turns off for its slower single rows.
    both = {"batch": 1.5, "single_row": 0.64}
    assert not serving_decision(both, {"batch": 1.0, "single_row": 1.0})[0]
    assert serving_decision({"batch": both["batch"]}, {"batch": 1.0})[0]


@pytest.mark.parametrize("calls, sizes", [
    ("both", {"batch", "single_row"}), ("batches", {"batch"}), ("rows", {"single_row"}),
])
def test_fit_times_the_cascade_on_the_calls_it_is_told_of(monkeypatch, calls, sizes):
    timed = []
    decide = fitting.serving_decision
    monkeypatch.setattr(fitting, "serving_decision", lambda exact, cascaded: (timed.append(set(exact)), decide(exact, cascaded))[1])
    deciding(monkeypatch, "expected_speedup_decision", True)
    f = optimized(scored, LogisticRegression(), costs=SCORED_COSTS, calls=calls)
    summary = f.explain().attrs["summary"]
    assert timed == [sizes]
    assert {size for size in ("batch", "single_row") if f"measured_speedup_{size}" in summary} == sizes
    assert summary["speed"].startswith("checked on ") and f"(calls={calls!r})" in summary["speed"]


@pytest.mark.parametrize("calls", ["batch", "Both", None, True, ("batches",)])
def test_calls_other_than_the_three_ways_is_a_clear_error(calls):
    with pytest.raises(ValueError, match=r"calls must say how the fitted function will be called.*'batches', 'rows'"):
        optimized(scored, LogisticRegression(), costs=SCORED_COSTS, calls=calls)


# --- fit acts on what the decisions say -------------------------------------------------------


def deciding(monkeypatch, name, verdict):
    """Make fit's decision ``name`` say ``verdict``, with the reason it gives for what fit measured."""
    decide = getattr(fitting, name)

    def decided(*args):
        return (verdict, *decide(*args)[1:])

    monkeypatch.setattr(fitting, name, decided)


@pytest.mark.parametrize("worth, keep, outcome", [
    (False, None, "off: at threshold "),  # (then the serving check is not measured)
    (True, False, "off: measured on the validation rows, the cascade takes "),
    (True, True, "on"),
], ids=["not worth measuring", "measured slower", "measured faster"])
def test_fit_acts_on_what_its_speed_decisions_say(monkeypatch, worth, keep, outcome):
    deciding(monkeypatch, "expected_speedup_decision", worth)
    if keep is not None:
        deciding(monkeypatch, "serving_decision", keep)
    f = optimized(scored, LogisticRegression(), costs=SCORED_COSTS)
    summary = f.explain().attrs["summary"]
    assert summary["cascades"].startswith(outcome)
    assert ("threshold" in summary) == ("expected_speedup" in summary) == (outcome == "on")
    assert ("measured_speedup_batch" in summary) == ("measured_speedup_single_row" in summary) == worth
    f.reset_stats()
    result = f(TEST)
    if outcome == "on":
        assert f.stats["rows_small_model"] > 0
    else:
        assert "per row" in summary["cascades"] and f.stats["rows_small_model"] == 0
        pd.testing.assert_series_equal(result, f.py_func(TEST))


# --- the threshold boundary: confidence at least the threshold takes the small model's answer ---


def test_the_threshold_search_lets_the_small_model_answer_rows_exactly_at_the_threshold():
    def unchanged(output):
        return output

    def accuracy(y, output):
        return float(np.mean(y == output))

    y = np.array([1, 0, 1, 0, 1, 0])
    wrong_at = lambda rows: np.where(np.isin(np.arange(6), rows), 1 - y, y)  # noqa: E731
    # The small model is wrong on a row of confidence 0.8 exactly: at threshold 0.8 it answers that
    # row, so only 0.9 keeps the accuracy.
    confidences = np.array([0.95, 0.95, 0.95, 0.95, 0.8, 0.6])
    assert choose_threshold(unchanged, wrong_at([4, 5]), confidences, y, y, accuracy, 0.0) == (0.9, 1.0, 1 - 2 / 6)
    # Right on the rows of confidence 0.7 exactly: at threshold 0.7 it answers them too.
    confidences = np.array([0.95, 0.95, 0.95, 0.7, 0.7, 0.6])
    assert choose_threshold(unchanged, wrong_at([5]), confidences, y, y, accuracy, 0.0) == (0.7, 1.0, 1 - 1 / 6)


def test_serving_gives_the_small_models_answer_to_rows_exactly_at_the_threshold():
    f = optimized(scored, LogisticRegression(), costs=SCORED_COSTS, check_speed=False)
    small = f._fitted.small_model.predict_proba(TEST[["x"]].to_numpy())[:, 1]
    confidence = np.maximum(small, 1 - small)
    threshold = np.sort(confidence)[len(confidence) // 2]  # the confidence of a row
    at = confidence == threshold
    f.set_threshold(threshold)
    f.reset_stats()
    result, exact = f(TEST), f.py_func(TEST)
    assert f.stats["rows_small_model"] == (confidence >= threshold).sum()
    np.testing.assert_array_equal(result[at], small[at])
    assert not np.array_equal(small[at], exact[at])  # (the full model would answer otherwise)
    np.testing.assert_array_equal(result[confidence < threshold], exact[confidence < threshold])


# --- the same data, the same decisions ------------------------------------------------------


MEASURED = ("preprocessing_cost_per_row_us", "model_cost_per_row_us")  # measured even with costs= given


@pytest.mark.parametrize("estimator", [LogisticRegression(), LGBMClassifier(n_estimators=30, verbose=-1, random_state=0)],
                         ids=["linear", "trees"])
def test_two_fits_of_the_same_data_make_the_same_decisions(estimator):
    costs = {"cheap": 1e-7, "middle": 2e-7, "costly": 1e-5}
    fits = [optimized(three_ifvs, estimator, costs=costs, check_speed=False, accuracy_loss=0.02, random_state=4) for _ in range(2)]
    tables = [f.explain() for f in fits]
    pd.testing.assert_frame_equal(tables[0], tables[1])  # costs, importances, selected IFVs
    first, second = ({k: v for k, v in t.attrs["summary"].items() if k not in MEASURED} for t in tables)
    assert first == second  # threshold, validation scores, filter on or off, ...
    assert first["cascades"] == "on" and "threshold" in first
    np.testing.assert_array_equal(fits[0](TEST), fits[1](TEST))
    np.testing.assert_array_equal(fits[0].top_k(TEST, k=10), fits[1].top_k(TEST, k=10))


def test_fit_of_a_function_reading_the_models_input_after_it_says_why_nothing_is_fitted():
    """Without the model's input cut from the code around it there is no small model to train:
    fit ends saying so, and the function keeps its answers."""
    global shifted_model
    shifted_model = LogisticRegression().fit(TRAIN[["x", "z"]].to_numpy(), Y_TRAIN)

    def scored_and_shifted(df):
        X = np.hstack([df[["x"]].to_numpy(), df[["z"]].to_numpy()])
        p = shifted_model.predict_proba(X)[:, 1]
        return p + X[:, 0] * 0.0

    optimized = willump.optimize(scored_and_shifted)
    with pytest.warns(willump.WillumpWarning, match="validation split"):
        optimized.fit(TRAIN, y=Y_TRAIN, progress=False)
    summary = optimized.explain().attrs["summary"]
    assert "the model's input is used after the model call" in summary["cascades"]
    assert "the model's input is used after the model call" in summary["top_k_filter"]
    np.testing.assert_array_equal(optimized(TEST), scored_and_shifted(TEST))


CITIES = pd.CategoricalDtype(["lille", "lyon", "nice", "paris"])


def _city_rows(n, seed):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"city": rng.choice(CITIES.categories, n), "x": rng.normal(size=n), "z": rng.normal(size=n)})
    y = ((frame["city"] == "paris") ^ (rng.random(n) < 0.05) ^ ((frame["x"] > 1.8) & (frame["z"] > 1.0))).astype(int)
    return frame, y.to_numpy()


def _city_part(df):
    return pd.DataFrame({"city": df["city"].astype(CITIES)}, index=df.index)


def _number_part(df):
    return pd.DataFrame({"x": df["x"], "z": np.exp(df["z"])}, index=df.index)


def city_scores(df):
    c = _city_part(df)
    n = _number_part(df)
    return city_model.predict(pd.concat([c, n], axis=1))


def test_a_small_model_reads_pandas_categories_as_the_model_does():
    """IFVs of pandas categories reach the small LightGBM model as a DataFrame of categories (as
    floats they could not: "could not convert string to float"), and the cascade holds its target."""
    global city_model
    train, y_train = _city_rows(3000, 1)
    city_model = LGBMClassifier(n_estimators=50, verbose=-1, random_state=0).fit(
        pd.concat([_city_part(train), _number_part(train)], axis=1), y_train)
    f = willump.optimize(city_scores)
    valid, y_valid = _city_rows(2000, 2)
    f.fit(train, y=y_train, validation=(valid, y_valid), accuracy_loss=0.01, check_speed=False,
          costs={"c": 1e-7, "n": 1e-4}, progress=False)
    summary = f.explain().attrs["summary"]
    assert summary["cascades"] == "on" and list(f.explain()["selected"]) == [True, False], summary
    test, y_test = _city_rows(3000, 3)
    exact, cascaded = f.py_func(test), f(test)
    assert (exact == y_test).mean() - (cascaded == y_test).mean() <= 0.01
    assert f.stats["rows_small_model"] > 0 and cascaded.dtype == exact.dtype


def _zip_rows(n, seed, start=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"zip": rng.choice([75001, 69001, 13001, 59000], n), "x": rng.normal(size=n),
                          "z": rng.normal(size=n)}, index=pd.RangeIndex(start, start + n))
    y = (frame["zip"] == 75001) ^ (frame["x"] > 0.5) ^ (rng.random(n) < 0.05) ^ (frame["z"] > 2.3)
    return frame, y.astype(int).to_numpy()


def zip_scores(df):
    a = df[["zip"]].astype("category")  # (the caller's index)
    c = pd.Series(df["x"].to_numpy() * 2.0)  # (a RangeIndex from 0: stacked by position all the same)
    b = pd.Series(np.exp(df["z"].to_numpy()))
    return zip_model.predict(np.column_stack([a, c, b]))


def test_ifvs_of_categories_and_other_indexes_reach_the_small_model_by_position():
    """The small model's DataFrame takes the IFVs' columns by position, as the function's stacking does
    (pd.concat by index gave twice the rows for a batch whose index does not start at 0)."""
    global zip_model
    train, y_train = _zip_rows(3000, 1)
    zip_model = LGBMClassifier(n_estimators=60, verbose=-1, random_state=0).fit(
        np.column_stack([train[["zip"]].astype("category"), train["x"] * 2, np.exp(train["z"])]), y_train)
    f = willump.optimize(zip_scores)
    valid, y_valid = _zip_rows(2000, 2)
    f.fit(train, y=y_train, validation=(valid, y_valid), accuracy_loss=0.01, check_speed=False,
          costs={"a": 1e-7, "c": 1e-7, "b": 1e-4}, progress=False)
    assert f.explain().attrs["summary"]["cascades"] == "on"
    test, y_test = _zip_rows(1000, 3, start=5000)
    exact = f.py_func(test)
    assert f(test).shape == exact.shape and f(test.iloc[[5]]).shape == (1,)
    assert (exact == y_test).mean() - (f(test) == y_test).mean() <= 0.01
    top = f.top_k(test, k=50)
    assert len(top) == 50 and top.max() < len(test)


def clashing_scores(df):
    c = pd.DataFrame({"v[code]": df["city"].astype(CITIES)}, index=df.index)
    n = pd.DataFrame({"v[code]": df["x"]}, index=df.index)
    e = pd.DataFrame({"w": np.exp(df["z"])}, index=df.index)
    return city_model.predict(pd.concat([c, n, e], axis=1, ignore_index=True))


def test_ifv_column_names_the_small_model_refuses_do_not_stop_fit():
    """Equal names in two IFVs and characters LightGBM refuses in feature names: the small model reads
    columns named by position, so fit trains it (a LightGBMError once stopped fit)."""
    global city_model
    train, y_train = _city_rows(3000, 1)
    city_model = LGBMClassifier(n_estimators=50, verbose=-1, random_state=0).fit(
        pd.concat([train["city"].astype(CITIES), train["x"], np.exp(train["z"])], axis=1, ignore_index=True), y_train)
    f = willump.optimize(clashing_scores)
    valid, y_valid = _city_rows(2000, 2)
    f.fit(train, y=y_train, validation=(valid, y_valid), accuracy_loss=0.01, check_speed=False,
          costs={"c": 1e-7, "n": 1e-7, "e": 1e-4}, progress=False)
    assert "cannot be trained" not in f.explain().attrs["summary"]["cascades"], f.explain().attrs["summary"]
    test, _ = _city_rows(500, 3)
    assert f(test).shape == (500,)
