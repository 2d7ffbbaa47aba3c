"""Votes, stacks and calibrated classifiers read as their steps: each estimator's answer, then the
vote, the final estimator or the calibration.

``voting.predict_proba(X)`` (a VotingClassifier or VotingRegressor) held in a global or closure
variable is written out as each fitted estimator's method (compiled by the kernels, read as its
steps when it is a Pipeline) followed by ``vote``; a StackingClassifier's or StackingRegressor's
as each estimator's answer, ``stack`` and the final estimator's method; a CalibratedClassifierCV's
as each calibrated classifier's estimator's response and ``calibrate``. The optimized function
must return what scikit-learn returns (values, dtype, shape) or raise what it raises.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    GradientBoostingRegressor, HistGradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor,
    StackingClassifier, StackingRegressor, VotingClassifier, VotingRegressor,
)
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

try:
    from sklearn.frozen import FrozenEstimator as FROZEN  # (scikit-learn >= 1.6)
except ImportError:
    FROZEN = None

import willump
from answers import assert_same_outcome as assert_same, assert_same_warned_outcome, outcome, warned_outcome
from willump.compile.meta import vote, voted_method

rng = np.random.default_rng(11)
N = 500
FRAME = pd.DataFrame({"income": rng.lognormal(9, 1, N), "debt": rng.lognormal(8, 1.2, N), "age": rng.integers(18, 80, N)})
RATIO = FRAME["debt"] / FRAME["income"]
DEFAULTED = (RATIO + rng.normal(0, 0.3, N) > 0.6).astype(int).to_numpy()
GRADE = np.select([RATIO < 0.2, RATIO < 0.6], ["A", "B"], "C")  # three classes, strings
AMOUNT = (FRAME["debt"] * 0.3 + FRAME["age"] * 10).to_numpy()


def scaled_logistic():
    return make_pipeline(StandardScaler(), LogisticRegression())


def voters():
    """Votes as scikit-learn's documentation and Kaggle notebooks write them."""
    forest = RandomForestClassifier(n_estimators=20, min_samples_leaf=3, random_state=0)
    boosted = HistGradientBoostingClassifier(max_iter=20, random_state=0)
    return {
        "soft": (VotingClassifier([("lr", scaled_logistic()), ("rf", forest), ("hgb", boosted)], voting="soft"), DEFAULTED),
        "soft_weights": (VotingClassifier(
            [("lr", scaled_logistic()), ("rf", forest), ("hgb", boosted)], voting="soft", weights=[2, 1, 3]), DEFAULTED),
        "hard": (VotingClassifier(
            [("lr", scaled_logistic()), ("dt", DecisionTreeClassifier(max_depth=3, random_state=0)), ("nb", GaussianNB())]),
            DEFAULTED),
        "hard_weights": (VotingClassifier(
            [("lr", scaled_logistic()), ("rf", forest), ("nb", GaussianNB())], weights=[1, 2, 1]), DEFAULTED),
        "dropped": (VotingClassifier(
            [("lr", scaled_logistic()), ("unused", "drop"), ("rf", forest)], voting="soft", weights=[1, 5, 2]), DEFAULTED),
        "strings": (VotingClassifier([("lr", scaled_logistic()), ("rf", forest), ("hgb", boosted)], voting="soft"), GRADE),
        "strings_hard": (VotingClassifier([("lr", scaled_logistic()), ("rf", forest), ("hgb", boosted)]), GRADE),
        "regressor": (VotingRegressor([
            ("ridge", make_pipeline(StandardScaler(), Ridge())), ("rf", RandomForestRegressor(n_estimators=20, random_state=0)),
            ("gb", GradientBoostingRegressor(n_estimators=20, random_state=0)),
        ], weights=[1, 2, 2]), AMOUNT),
        "stack": (StackingClassifier(
            [("lr", scaled_logistic()), ("rf", forest), ("hgb", boosted)], final_estimator=LogisticRegression()), DEFAULTED),
        "stack_passthrough": (StackingClassifier(
            [("rf", forest), ("unused", "drop"), ("nb", GaussianNB())], final_estimator=scaled_logistic(),
            passthrough=True), DEFAULTED),
        "stack_strings": (StackingClassifier(
            [("lr", scaled_logistic()), ("rf", forest)], final_estimator=RandomForestClassifier(n_estimators=10, random_state=1),
            stack_method="predict_proba"), GRADE),
        "stack_regressor": (StackingRegressor(
            [("ridge", make_pipeline(StandardScaler(), Ridge())), ("rf", RandomForestRegressor(n_estimators=20, random_state=0))],
            final_estimator=Ridge()), AMOUNT),
    }


FITTED = {name: model.fit(FRAME, target) for name, (model, target) in voters().items()}


def methods(model):
    if isinstance(model, (VotingRegressor, StackingRegressor)):
        return ["predict"]
    if isinstance(model, CalibratedClassifierCV):
        return ["predict", "predict_proba"]
    if isinstance(model, StackingClassifier):
        return [m for m in ("predict", "predict_proba", "decision_function") if hasattr(model, m)]
    return ["predict", "predict_proba"] if model.voting == "soft" else ["predict"]


def predicting(model, method):
    """The user's function, with ``model`` in a closure variable, and its optimized version."""
    def predict(df):
        X = df[["income", "debt", "age"]]
        return model.predict(X)

    def predict_proba(df):
        X = df[["income", "debt", "age"]]
        return model.predict_proba(X)

    def decision_function(df):
        X = df[["income", "debt", "age"]]
        return model.decision_function(X)

    function = {"predict": predict, "predict_proba": predict_proba, "decision_function": decision_function}[method]
    with warnings.catch_warnings():
        warnings.simplefilter("error", willump.WillumpWarning)  # nothing is left as one call
        return function, willump.optimize(function)


def calibrated_classifiers():
    """CalibratedClassifierCV as scikit-learn's probability-calibration examples write it."""
    forest = RandomForestClassifier(n_estimators=20, min_samples_leaf=3, random_state=0)
    fitted = {
        "sigmoid_forest": (CalibratedClassifierCV(forest, method="sigmoid", cv=3), DEFAULTED),
        "isotonic_pipeline": (CalibratedClassifierCV(scaled_logistic(), method="isotonic", cv=3), DEFAULTED),
        "one_model": (CalibratedClassifierCV(HistGradientBoostingClassifier(max_iter=20), cv=3, ensemble=False), DEFAULTED),
        "multiclass_strings": (CalibratedClassifierCV(forest, method="isotonic", cv=3), GRADE),
        "naive_bayes": (CalibratedClassifierCV(GaussianNB(), cv=2), DEFAULTED),
    }
    return {name: model.fit(FRAME, target) for name, (model, target) in fitted.items()}


CALIBRATED = calibrated_classifiers()
if FROZEN is not None:  # (scikit-learn >= 1.6: a model fitted before, calibrated on other rows)
    CALIBRATED["frozen"] = CalibratedClassifierCV(FROZEN(
        RandomForestClassifier(n_estimators=10, random_state=0).fit(FRAME[:250], DEFAULTED[:250]))).fit(
        FRAME[250:], DEFAULTED[250:])


ALL = {**FITTED, **CALIBRATED}
OPTIMIZED = {(name, method): predicting(model, method) for name, model in ALL.items() for method in methods(model)}


def model_calls(model) -> int:
    """The model calls written out for a vote, a stack (its final estimator's too) or a calibration."""
    if isinstance(model, CalibratedClassifierCV):
        return len(model.calibrated_classifiers_)
    return len(model.estimators_) + isinstance(model, (StackingClassifier, StackingRegressor))


@pytest.mark.parametrize("name, method", sorted(OPTIMIZED))
def test_each_estimator_is_compiled_and_the_answers_are_scikit_learns(name, method):
    function, optimized = OPTIMIZED[(name, method)]
    for rows in (FRAME, FRAME.iloc[[3]], FRAME.iloc[::-7]):
        assert_same(optimized(rows), function(rows))
    table = optimized.explain_compilation()
    assert not table["call"].str.contains("__willump").any()
    models = table[table["operator"].str.contains(r"\.predict|\.decision_function")]
    assert len(models) == model_calls(ALL[name]), table
    uncompiled = table[(table["status"] != "compiled") & ~table["operator"].str.startswith("GaussianNB")]
    assert uncompiled.empty, table


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(st.tuples(
        st.one_of(st.floats(0, 1e7), st.floats(-1e308, 1e308), st.just(np.nan)),
        st.one_of(st.floats(0, 1e7), st.just(np.inf)), st.integers(-5, 120),
    ), min_size=1, max_size=5),
    key=st.sampled_from(sorted(OPTIMIZED)),
)
def test_any_rows_give_scikit_learns_answer_or_error(rows, key):
    """NaN or infinity make the logistic regression raise (the forests take NaN): the same error."""
    function, optimized = OPTIMIZED[key]
    frame = pd.DataFrame(rows, columns=["income", "debt", "age"])
    assert_same_warned_outcome(warned_outcome(optimized, frame), warned_outcome(function, frame))


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from([name for name in sorted(FITTED) if not name.startswith("stack")]),
    data=st.data(),
    weights=st.one_of(st.none(), st.lists(st.sampled_from([0.5, 1, 2, 3]), min_size=3, max_size=3)),
)
def test_the_vote_is_scikit_learns_for_any_answers(name, data, weights):
    """``vote`` against the estimator's own method, its estimators answering drawn values: ties in
    probabilities and in counts of votes, weights."""
    model = FITTED[name]
    rows = data.draw(st.integers(1, 4))
    classes = len(getattr(model, "classes_", [None]))
    asked = voted_method(model, "predict")
    fitted_estimators, saved_weights = model.estimators_, model.weights
    answers = []
    for _ in fitted_estimators:
        if asked == "predict_proba":
            values = data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1 / 3, 0.75, 1.0]), min_size=rows * classes,
                                        max_size=rows * classes))
            answers.append(np.array(values).reshape(rows, classes))
        elif isinstance(model, VotingRegressor):
            answers.append(np.array(data.draw(st.lists(st.floats(-1e6, 1e6), min_size=rows, max_size=rows))))
        else:
            answers.append(np.array(data.draw(st.lists(st.integers(0, classes - 1), min_size=rows, max_size=rows))))

    class Answering:
        def __init__(self, answer):
            self.answer = answer

        def predict(self, X):
            return self.answer

        predict_proba = predict

    model.estimators_ = [Answering(answer) for answer in answers]
    model.weights = weights
    try:
        for method in methods(model):
            expected = outcome(getattr(model, method), FRAME.iloc[:rows])
            assert_same(outcome(vote, model, method, answers), expected)
    finally:
        model.estimators_, model.weights = fitted_estimators, saved_weights


def test_hard_voting_has_no_predict_proba_as_in_scikit_learn():
    model = FITTED["hard"]

    def probabilities(df):
        return model.predict_proba(df)

    optimized = willump.optimize(probabilities)
    assert_same(outcome(optimized, FRAME), outcome(probabilities, FRAME))
    assert outcome(optimized, FRAME)[0] is AttributeError


def test_weights_set_after_decoration_are_the_votes_weights():
    global reweighted
    reweighted = VotingClassifier([("lr", scaled_logistic()), ("nb", GaussianNB())], voting="soft").fit(FRAME, DEFAULTED)

    def predict(df):
        return reweighted.predict_proba(df)[:, 1]

    optimized = willump.optimize(predict)
    before = optimized(FRAME)
    reweighted.set_params(weights=[1, 4])
    after = optimized(FRAME)
    assert_same(after, predict(FRAME))
    assert not np.array_equal(after, before)


def test_a_vote_changed_after_decoration_runs_as_written():
    global changing
    changing = VotingClassifier([("lr", scaled_logistic()), ("dt", DecisionTreeClassifier(max_depth=2))],
                                voting="soft").fit(FRAME, DEFAULTED)

    def predict(df):
        return changing.predict(df)

    optimized = willump.optimize(predict)
    assert_same(optimized(FRAME), predict(FRAME))
    changing.set_params(voting="hard")  # (now each estimator's predict is counted)
    with pytest.warns(willump.WillumpWarning, match="changed after decoration"):
        assert_same(optimized(FRAME), predict(FRAME))
    changing.set_params(voting="soft")
    assert_same(optimized(FRAME), predict(FRAME))
    changing.fit(FRAME, 1 - DEFAULTED)  # (refitted: new estimators_; warned once already)
    assert_same(optimized(FRAME), predict(FRAME))


def test_a_vote_at_the_end_of_a_pipeline_is_read_too():
    global piped
    piped = make_pipeline(StandardScaler(), voters()["soft"][0]).fit(FRAME, DEFAULTED)

    def predict(df):
        return piped.predict_proba(df)[:, 1]

    with warnings.catch_warnings():
        warnings.simplefilter("error", willump.WillumpWarning)
        optimized = willump.optimize(predict)
    for rows in (FRAME, FRAME.iloc[[9]]):
        assert_same(optimized(rows), predict(rows))
    operators = optimized.explain_compilation()["operator"].tolist()
    assert "StandardScaler.transform" in operators and "RandomForestClassifier.predict_proba" in operators


def test_the_input_is_computed_once_for_all_the_estimators():
    model = FITTED["soft"]

    class Filling:
        calls = 0

        def __call__(self, df):
            self.calls += 1
            return df.fillna(0)

    prepare = Filling()

    def predict(df):
        return model.predict_proba(prepare(df))[:, 1]

    optimized = willump.optimize(predict)
    expected = predict(FRAME)
    for rows in (FRAME, FRAME.iloc[[2]]):
        before = prepare.calls
        got = optimized(rows)
        assert prepare.calls == before + 1
    assert_same(optimized(FRAME), expected)


def test_a_calibrated_classifier_refitted_after_decoration_runs_as_written():
    global recalibrated
    recalibrated = CalibratedClassifierCV(GaussianNB(), cv=2).fit(FRAME, DEFAULTED)

    def predict(df):
        return recalibrated.predict_proba(df)[:, 1]

    optimized = willump.optimize(predict)
    before = optimized(FRAME)
    recalibrated.fit(FRAME, 1 - DEFAULTED)
    with pytest.warns(willump.WillumpWarning, match="changed after decoration"):
        after = optimized(FRAME)
    assert_same(after, predict(FRAME))
    assert not np.array_equal(after, before)


@pytest.mark.parametrize("ensemble", [
    VotingClassifier([("lr", LogisticRegression()), ("nb", GaussianNB())], voting="soft"),
    CalibratedClassifierCV(LogisticRegression(), cv=2),
])
def test_fit_of_a_vote_or_calibration_says_there_is_no_one_model(ensemble):
    """After a join of feature vectors, its estimators each read the features: no small model
    stands for one of them."""
    global joined_then_ensemble
    joined_then_ensemble = make_pipeline(
        ColumnTransformer([("debt", StandardScaler(), ["debt"]), ("rest", StandardScaler(), ["income", "age"])]),
        ensemble).fit(FRAME, DEFAULTED)

    def predict(df):
        return joined_then_ensemble.predict_proba(df)[:, 1]

    optimized = willump.optimize(predict)
    assert len(optimized.explain()) == 2  # (two feature vectors)
    optimized.fit(FRAME[:300], y=DEFAULTED[:300], validation=(FRAME[300:], DEFAULTED[300:]), progress=False)
    summary = optimized.explain().attrs["summary"]
    assert f"the {type(ensemble).__name__}'s estimators each read the features" in summary["cascades"], summary
    assert_same(optimized(FRAME), predict(FRAME))
