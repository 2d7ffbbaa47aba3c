"""A LightGBM model fitted on a DataFrame, given a numpy array of looked-up features: compiled end to
end (``.map`` / ``.reindex`` lookups, the methods after them, the model), with the answer and the
warning scikit-learn's validation gives LightGBM (same message, category and place)."""

import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest

import willump

RNG = np.random.default_rng(7)
ROWS = 300
FRAME = pd.DataFrame({"song": RNG.integers(0, 50, ROWS), "user": RNG.integers(0, 30, ROWS), "age": RNG.normal(30, 5, ROWS)})
SONG_PLAYS = {i: float(RNG.integers(0, 1000)) for i in range(40)}  # songs 40-49 are missing
USER_SKIPS = pd.Series(RNG.random(30), index=range(30))
TRAIN = pd.DataFrame({
    "plays": FRAME["song"].map(SONG_PLAYS).fillna(0), "skips": FRAME["user"].map(USER_SKIPS), "age": FRAME["age"],
})
MODEL = lgb.LGBMClassifier(n_estimators=15, num_leaves=7, verbose=-1).fit(TRAIN, RNG.integers(0, 2, ROWS))
ARRAY_MODEL = lgb.LGBMClassifier(n_estimators=15, num_leaves=7, verbose=-1).fit(TRAIN.to_numpy(), MODEL.classes_[
    (MODEL.predict_proba(TRAIN)[:, 1] > 0.5).astype(int)])


def mapped(df):
    plays = df["song"].map(SONG_PLAYS).fillna(0)
    X = np.column_stack([plays.to_numpy(), df["user"].map(USER_SKIPS).to_numpy(), df["age"].to_numpy()])
    return MODEL.predict_proba(X)[:, 1]


def reindexed(df):
    skips = USER_SKIPS.reindex(df["user"]).to_numpy()
    X = np.column_stack([df["song"].map(SONG_PLAYS).fillna(0).to_numpy(), skips, df["age"].to_numpy()])
    return MODEL.predict(X)


def located(df):
    X = np.column_stack([USER_SKIPS.loc[df["user"]].to_numpy(), df["song"].map(SONG_PLAYS).fillna(0).to_numpy(),
                         df["age"].to_numpy()])
    return MODEL.predict_proba(X)[:, 1]


def without_names(df):
    X = np.column_stack([df["song"].map(SONG_PLAYS).fillna(0).to_numpy(), df["user"].map(USER_SKIPS).to_numpy(),
                         df["age"].to_numpy()])
    return ARRAY_MODEL.predict_proba(X)


def too_narrow(df):
    X = np.column_stack([df["song"].map(SONG_PLAYS).fillna(0).to_numpy(), df["age"].to_numpy()])
    return MODEL.predict_proba(X)


def run(function, frame):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = "value", function(frame)
        except Exception as error:  # noqa: BLE001 - compared with the original's
            result = "raised", f"{type(error).__name__}: {error}"
    return result, [(w.category, str(w.message), w.filename, w.lineno) for w in caught
                    if not issubclass(w.category, willump.WillumpWarning)]


@pytest.mark.parametrize("function", [mapped, reindexed, located, without_names])
def test_a_model_fitted_on_names_given_an_array_is_compiled(function):
    optimized = willump.optimize(function)
    for frame in (FRAME, FRAME.iloc[[4]], FRAME.iloc[7:12], FRAME.iloc[::-1]):
        (kind, value), warned = run(optimized, frame)
        (expected_kind, expected), expected_warned = run(function, frame)
        assert kind == expected_kind == "value"
        np.testing.assert_array_equal(value, expected, strict=True)
        assert warned == expected_warned
        if expected_warned or function is without_names:  # (LightGBM 4.4 does not warn for arrays yet)
            assert len(warned) == (function is not without_names)
    table = optimized.explain_compilation()
    model = table[table["operator"].str.startswith("LGBMClassifier")]
    assert (model["compiled_calls"] == 4).all() and len(model) == 1, table.to_string()


def test_an_array_lightgbm_refuses_raises_as_written():
    optimized = willump.optimize(too_narrow)
    assert run(optimized, FRAME) == run(too_narrow, FRAME)
    assert run(optimized, FRAME)[0][0] == "raised"
