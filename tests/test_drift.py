"""The serving-time drift guard (``willump.runtime.drift``): a stream that shifts away from the
validation rows raises one alarm, counted in ``stats``; with ``on_drift="exact"`` the answers are the
undecorated function's from then on; a stream that does not shift raises none."""

import warnings

import cloudpickle
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import chi2_contingency, ks_2samp
from sklearn.linear_model import LogisticRegression

import willump
from willump.runtime.calls import Stats
from willump.runtime.drift import DEFAULT_WINDOW, DriftGuard, _kolmogorov_smirnov, _two_proportion_p
from answers import define
from test_cascade_programs import NEUTRAL, SHAPES, _namespace, corpus, whole_calls
from test_cascades import TRAIN, VALID, Y_TRAIN, Y_VALID, fitted, make_rows, scored, slow_feature
from test_compile_kernels import hypothesis_settings


def guarded(**options):
    """``scored`` fitted with the cascade on whatever the machine's speed."""
    return fitted(scored, check_speed=False, **options)


def unshifted(n, random_state):
    return make_rows(n, random_state)[0]


def shifted(n, random_state):
    """Rows whose cheap feature is a tenth of its usual scale: the small model is unsure of most."""
    return make_rows(n, random_state, spread=0.3)[0]


def serve_in_batches(f, rows, size):
    return [f(rows.iloc[i:i + size]) for i in range(0, len(rows), size)]


def drift_warnings(caught) -> list:
    return [w for w in caught if issubclass(w.category, willump.WillumpWarning) and "drifted" in str(w.message)]


def test_a_shifted_stream_raises_one_alarm_counted_in_stats():
    f = guarded()
    assert f.explain().attrs["summary"]["cascades"] == "on"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        serve_in_batches(f, unshifted(3000, 10), 250)
        assert f.stats["drift_checks"] == 9 and f.stats["drift_alarms"] == 0  # (full at 1,000 rows, then every 250)
        assert not drift_warnings(caught)
        serve_in_batches(f, shifted(3000, 11), 250)
    (alarm,) = drift_warnings(caught)
    message = str(alarm.message)
    assert "validation: " in message and "call fit again" in message and "on_drift='warn'" in message
    assert alarm.filename == __file__  # (attributed to the caller's line)
    stats = f.stats
    assert stats["drift_alarms"] == 1 and 9 < stats["drift_checks"] < 9 + 12
    assert stats["rows_seen"] == 6000 and stats["rows_small_model"] + stats["rows_full_model"] == 6000
    guard = f.explain().attrs["summary"]["drift_guard"]
    assert guard["alarms"] == 1 and guard["alarm"] == message and guard["serving"] == "cascaded"
    assert guard["window"] == DEFAULT_WINDOW and guard["on_drift"] == "warn" and "p < 5e-06" in guard["bound"]
    small = stats["rows_small_model"]
    f(unshifted(500, 12))  # (on_drift="warn": the cascade keeps serving)
    assert f.stats["rows_small_model"] > small and f.stats["drift_alarms"] == 1


def test_on_drift_exact_serves_the_undecorated_answers_after_the_alarm():
    f = guarded(on_drift="exact")
    before = unshifted(300, 20)
    assert not f(before).equals(f.py_func(before))  # (the cascade's answers are not the exact ones)
    with pytest.warns(willump.WillumpWarning, match="Serving is exact from now on"):
        serve_in_batches(f, shifted(1500, 21), 100)
    assert f.stats["drift_alarms"] == 1
    small = f.stats["rows_small_model"]
    for rows in (unshifted(400, 22), shifted(50, 23), unshifted(1, 24)):
        pd.testing.assert_series_equal(f(rows), f.py_func(rows), check_exact=True)
        exact_top = np.argsort(-f.py_func(rows).to_numpy(), kind="stable")[:5]
        np.testing.assert_array_equal(f.top_k(rows, k=5), exact_top)
    # no row went to the small model, and the full model ranked every row of each top-K query (no filter)
    assert f.stats["rows_small_model"] == small and f.stats["top_k_candidates"] == 400 + 50 + 1
    summary = f.explain().attrs["summary"]
    assert summary["cascades"].startswith("off: exact since the drift alarm")
    assert summary["top_k_filter"].startswith("off: exact since the drift alarm")
    assert summary["drift_guard"]["serving"].startswith("exact since the drift alarm")
    f.fit(TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False, check_speed=False,
          on_drift="exact")  # a new fit: a new guard, cascaded again
    assert f.explain().attrs["summary"]["cascades"] == "on"
    f(before)
    assert f.stats["rows_small_model"] > 0 and f.explain().attrs["summary"]["drift_guard"]["alarms"] == 0


def features(df):
    return np.hstack([df[["x"]].to_numpy(), df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)])


SCORES = LogisticRegression().fit(features(TRAIN), Y_TRAIN)


def scores(df):
    """``scored`` returning a numpy array, which the prediction cache keeps."""
    cheap = df[["x"]].to_numpy()
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return SCORES.predict_proba(np.hstack([cheap, costly]))[:, 1]


def test_the_prediction_cache_does_not_give_cascaded_results_once_serving_is_exact():
    f = willump.optimize(scores, cache_size=100, cache="prediction").fit(
        TRAIN, y=Y_TRAIN, validation=(VALID, Y_VALID), progress=False, check_speed=False, on_drift="exact",
        drift_window=100,
    )
    rows = unshifted(50, 30)
    cascaded = f(rows)
    assert not np.array_equal(cascaded, f.py_func(rows))
    np.testing.assert_array_equal(f(rows), cascaded)
    assert f.stats["cache_hits"] == 50
    with pytest.warns(willump.WillumpWarning, match="drifted"):
        serve_in_batches(f, shifted(200, 31), 50)
    np.testing.assert_array_equal(f(rows), f.py_func(rows))


def test_an_unshifted_stream_raises_no_alarm_over_many_windows():
    f = guarded()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="willump: the served rows have drifted", category=willump.WillumpWarning)
        for random_state in range(100, 140):  # 40 windows, single rows among the batches
            rows = unshifted(1000, random_state)
            serve_in_batches(f, rows.iloc[:990], 330)
            serve_in_batches(f, rows.iloc[990:], 1)
    stats = f.stats
    assert stats["rows_seen"] == 40_000 and stats["drift_alarms"] == 0
    assert stats["drift_checks"] > 100


def test_single_row_calls_fill_the_window():
    f = guarded(drift_window=100)
    rows = unshifted(150, 40)
    for i in range(99):
        f(rows.iloc[[i]])
    assert f.stats["drift_checks"] == 0
    f(rows.iloc[[99]])
    assert f.stats["drift_checks"] == 1  # full: tested
    for i in range(100, 150):
        f(rows.iloc[[i]])
    assert f.stats["drift_checks"] == 3  # then every 25 rows
    moved = shifted(100, 41)
    with pytest.warns(willump.WillumpWarning, match="drifted"):
        for i in range(100):
            f(moved.iloc[[i]])
            if f.stats["drift_alarms"]:
                break
    assert f.stats["drift_alarms"] == 1 and f.stats["rows_seen"] == 150 + i + 1


def text_scores(filename: str, **options):
    """The text pipeline of ``test_cascade_programs`` (its whole call is one program), fitted with the
    cascade on whatever the machine's speed."""
    pipeline = define(SHAPES["scores"], _namespace(), filename)
    train, y_train = corpus(800, 0)
    valid, y_valid = corpus(400, 1)
    f = willump.optimize(pipeline).fit(
        pd.DataFrame({"text": train}), y=y_train, validation=(pd.DataFrame({"text": valid}), y_valid),
        progress=False, check_speed=False, **options,
    )
    assert f.explain().attrs["summary"]["cascades"] == "on"
    return f


def test_the_text_program_shows_its_rows_to_the_guard():
    f = text_scores("<drift: cascaded text program>", top_k=False, drift_window=200)
    before = whole_calls(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", willump.WillumpWarning)
        for i in range(4):
            f(pd.DataFrame({"text": corpus(100, 50 + i)[0]}))
    assert whole_calls(f) == before + 4 and f.stats["drift_checks"] == 3 and f.stats["drift_alarms"] == 0
    rng = np.random.default_rng(3)
    neutral = [" ".join(rng.choice(NEUTRAL, 6)) for _ in range(300)]  # no sentiment word: the small model is unsure
    with pytest.warns(willump.WillumpWarning, match="drifted"):
        f(pd.DataFrame({"text": neutral}))
    assert whole_calls(f) == before + 5 and f.stats["drift_alarms"] == 1


def test_the_plan_survives_pickling_and_the_window_starts_empty():
    """The plan travels; the window and the checks counted do not (as calls' counters do not): a call's
    check leaves the function's pickle, and so the name Dask workers share it by, as it was."""
    f = guarded(drift_window=100)
    name = f._shipped()[0]
    f(unshifted(180, 60))
    guard = f._fitted.drift
    assert guard.checks == 1 and f._shipped()[0] == name
    restored = cloudpickle.loads(cloudpickle.dumps(f))
    kept = restored._fitted.drift
    np.testing.assert_array_equal(kept.validation, guard.validation)
    assert (kept.window, kept.on_drift, kept.validation_rows, kept.checks) == (100, "warn", 1500, 0)
    restored.reset_stats()
    restored(unshifted(99, 61))
    assert restored.stats["drift_checks"] == 0  # (the window starts empty on load)
    restored(unshifted(1, 62))
    assert restored.stats["drift_checks"] == 1


def test_a_fallback_survives_saving_and_loading(tmp_path):
    f = guarded(on_drift="exact", drift_window=100)
    with pytest.warns(willump.WillumpWarning, match="drifted"):
        f(shifted(200, 70))
    f.save(tmp_path / "drifted.willump")
    loaded = willump.load(tmp_path / "drifted.willump")
    rows = unshifted(300, 71)
    pd.testing.assert_series_equal(loaded(rows), loaded.py_func(rows), check_exact=True)
    assert loaded.explain().attrs["summary"]["drift_guard"]["alarms"] == 1


def test_set_threshold_moves_the_share_the_guard_expects():
    f = guarded()
    small_input = VALID[["x"]].to_numpy()
    confidences = f._fitted.small_model.predict_proba(small_input).max(axis=1)
    guard = f.explain().attrs["summary"]["drift_guard"]
    threshold = f.explain().attrs["summary"]["threshold"]
    assert abs(guard["validation_answered_share"] - np.mean(confidences >= threshold)) <= 1e-3
    f.set_threshold(None)
    assert f.explain().attrs["summary"]["drift_guard"]["serving"] == "cascades are off: nothing to guard"
    f(unshifted(1000, 80))
    assert f.stats["drift_checks"] == 0
    f.set_threshold(0.6)
    guard = f.explain().attrs["summary"]["drift_guard"]
    assert abs(guard["validation_answered_share"] - np.mean(confidences >= 0.6)) <= 1e-3
    f(unshifted(1000, 81))
    assert f.stats["drift_checks"] == 1 and f.stats["drift_alarms"] == 0


def test_on_drift_none_turns_the_guard_off_and_the_options_are_checked():
    f = guarded(on_drift=None)
    assert f._fitted.drift is None
    assert f.explain().attrs["summary"]["drift_guard"] == "off: on_drift=None"
    f(shifted(3000, 90))
    assert f.stats["drift_checks"] == 0
    unfitted = willump.optimize(scored)
    for options, message in [({"on_drift": "raise"}, "on_drift must be"), ({"on_drift": True}, "on_drift must be"),
                             ({"drift_window": 3}, "drift_window must be"), ({"drift_window": 10.5}, "drift_window"),
                             ({"drift_window": True}, "drift_window")]:
        with pytest.raises(ValueError, match=message):
            unfitted.fit(make_rows(100, 0)[0], y=make_rows(100, 0)[1], progress=False, **options)
    uncascaded = fitted(scored, check_speed=False, cascades=False)
    assert uncascaded.explain().attrs["summary"]["drift_guard"] == "off: no cascade to guard"


# --- the tests and their bound, on constructed numbers ------------------------------------


def test_the_share_test_is_the_chi_square_test_of_the_two_by_two_table():
    for answered, rows, expected, validation_rows in [(600, 1000, 0.7, 1500), (30, 100, 0.25, 400), (5, 40, 0.2, 50)]:
        table = [[answered, rows - answered], [expected * validation_rows, (1 - expected) * validation_rows]]
        p = chi2_contingency(table, correction=False).pvalue
        assert _two_proportion_p(answered / rows, rows, expected, validation_rows) == pytest.approx(p, rel=1e-9)
    assert _two_proportion_p(1.0, 100, 1.0, 200) == 1.0  # (every row answered, in both)


def test_the_distance_is_the_two_sample_kolmogorov_smirnov_statistic():
    rng = np.random.default_rng(0)
    for shift in (0.0, 0.05, 0.1):
        recent, validation = np.sort(rng.beta(5, 2, 1000) - shift), np.sort(rng.beta(5, 2, 800))
        distance, p = _kolmogorov_smirnov(recent, validation, len(validation))
        reference = ks_2samp(recent, validation, method="asymp")
        assert distance == pytest.approx(reference.statistic, abs=1e-12)
        assert p == pytest.approx(reference.pvalue, rel=0.2, abs=1e-12)


def test_a_check_of_unshifted_rows_false_alarms_at_most_at_alpha_and_a_shift_is_seen():
    rng = np.random.default_rng(1)
    validation = rng.beta(5, 2, 1500)

    def alarm_rate(draw, alpha):
        alarms = 0
        for _ in range(300):
            guard = DriftGuard(validation, window=500, alpha=alpha)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", willump.WillumpWarning)
                guard.observe(draw(500), 0.8, Stats())
            alarms += guard.alarm is not None
        return alarms / 300

    assert alarm_rate(lambda n: rng.beta(5, 2, n), alpha=0.05) <= 0.05 + 0.03  # (3 standard errors)
    assert alarm_rate(lambda n: rng.beta(3.5, 2, n), alpha=1e-5) >= 0.95  # (12 pp fewer rows answered)


@hypothesis_settings(max_examples=200)
@given(window=st.integers(4, 40), batches=st.lists(st.integers(1, 90), max_size=12))
def test_the_window_holds_the_last_rows_and_is_tested_when_due(window, batches):
    guard = DriftGuard(np.linspace(0, 1, 50), window=window, alpha=0.0)  # (alpha 0: never an alarm)
    stats, served, fresh, checks = Stats(), [], 0, 0
    for size in batches:
        values = np.arange(len(served), len(served) + size) / 1000
        guard.observe(values, 0.5, stats)
        served.extend(values)
        fresh += size
        if len(served) >= window and fresh >= window // 4:
            checks, fresh = checks + 1, 0
    held = min(window, len(served))
    np.testing.assert_array_equal(np.sort(guard._recent[:held] if held < window else guard._recent),
                                  np.array(served[len(served) - held:]))
    assert stats.snapshot()["drift_checks"] == checks == guard.checks


def test_validation_beyond_the_sample_is_kept_as_quantiles():
    confidences = np.random.default_rng(2).random(50_000)
    guard = DriftGuard(confidences)
    assert len(guard.validation) == 1000 and guard.validation_rows == 50_000
    for threshold in (0.1, 0.5, 0.93):
        assert guard.expected_share(threshold) == pytest.approx(np.mean(confidences >= threshold), abs=1e-3)
