"""scikit-learn's meta-estimators as willump reads them.

``READ_AS_STEPS`` names the methods ``graph.composites`` writes out as the
steps the meta-estimator runs (the kernels' reasons name them too).
``TransformedTargetRegressor.predict(X)`` is written out as its regressor's
``predict`` followed by ``target_inverse``, the rest of scikit-learn's method;
a ``VotingClassifier``'s or ``VotingRegressor``'s method as each estimator's
answer followed by ``vote``, the rest of scikit-learn's; a ``StackingClassifier``'s or
``StackingRegressor``'s as each estimator's answer, ``stack`` (scikit-learn's own
concatenation) and the final estimator's method (its labels by ``stacked_labels``); a
``CalibratedClassifierCV``'s as each calibrated classifier's estimator's response followed by
``calibrate``, scikit-learn's own calibration of those responses.
"""

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer, TransformedTargetRegressor
from sklearn.ensemble import StackingClassifier, StackingRegressor, VotingClassifier, VotingRegressor
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.validation import _check_response_method

from willump.compile.forms import Unsupported, answering, stand_in
from willump.compile.preprocessing import check_finite

READ_AS_STEPS = {
    Pipeline: ("predict", "predict_proba", "decision_function", "score_samples", "transform"),
    FeatureUnion: ("transform",),
    ColumnTransformer: ("transform",),
    TransformedTargetRegressor: ("predict",),
    VotingClassifier: ("predict", "predict_proba"),
    VotingRegressor: ("predict",),
    StackingClassifier: ("predict", "predict_proba", "decision_function"),
    StackingRegressor: ("predict",),
    CalibratedClassifierCV: ("predict", "predict_proba"),
}
TARGET_INVERSE = "__willump_target_inverse"  # the name the rewritten code calls target_inverse by
VOTE = "__willump_vote"  # the name it calls vote by
STACK = "__willump_stack"
STACKED_LABELS = "__willump_stacked_labels"
CALIBRATE = "__willump_calibrate"


def target_inverse(regressor: TransformedTargetRegressor, prediction):
    """What ``regressor.predict(X)`` returns, given its ``regressor_``'s prediction for ``X``:
    the target transformer's inverse, then the squeeze for 1-D training targets, as scikit-learn
    runs them. A ``FunctionTransformer(validate=True)`` given a finite float64 array (which its
    ``check_array`` passes on as it is) calls its ``inverse_func`` at once: that check costs far
    more than the function for one row. Anything else goes through its own ``inverse_transform``."""
    transformer = regressor.transformer_
    values = prediction.reshape(-1, 1) if prediction.ndim == 1 else prediction
    if _checked_as_is(transformer, values):
        inverse = transformer.inverse_func
        result = values if inverse is None else inverse(values, **(transformer.inv_kw_args or {}))
    else:
        result = transformer.inverse_transform(values)
    if regressor._training_dim == 1 and result.ndim == 2 and result.shape[1] == 1:
        result = result.squeeze(axis=1)
    return result


def _checked_as_is(transformer, values) -> bool:
    """Would the transformer's ``check_array`` return ``values`` itself, without a warning?"""
    if not (
        type(transformer) is FunctionTransformer and transformer.validate
        and type(values) is np.ndarray and values.dtype == np.float64 and values.ndim == 2 and values.size
    ):
        return False
    try:
        check_finite(values, finite=True)
    except Unsupported:
        return False
    return True


def voted_method(voting, method: str) -> str:
    """The method of its estimators ``voting.method(X)`` collects: ``predict_proba`` for soft voting."""
    return "predict_proba" if getattr(voting, "voting", None) == "soft" else "predict"


def vote(voting, method: str, answers: list):
    """What ``voting.method(X)`` returns, given its ``estimators_``' answers for ``X`` (of the
    method ``voted_method`` names, in order): scikit-learn's weighted average, argmax, or count of
    votes, as its ``_voting`` module computes them."""
    weights = voting._weights_not_none
    if type(voting) is VotingRegressor:
        return np.average(np.asarray(answers).T, axis=1, weights=weights)
    if voted_method(voting, method) == "predict_proba":
        average = np.average(np.asarray(answers), axis=0, weights=weights)
        return average if method == "predict_proba" else voting.le_.inverse_transform(np.argmax(average, axis=1))
    majority = np.apply_along_axis(
        lambda x: np.argmax(np.bincount(x, weights=weights)), axis=1, arr=np.asarray(answers).T,
    )
    return voting.le_.inverse_transform(majority)


def stack(stacking, predictions: list, X):
    """What ``stacking.transform(X)`` returns (default output), given its ``estimators_``' answers
    for ``X`` (of their ``stack_method_``, in order): scikit-learn's own concatenation."""
    return stacking._concatenate_predictions(X, predictions)


def stacked_labels(stacking, predicted):
    """What ``StackingClassifier.predict`` returns, given its final estimator's ``predict``."""
    return stacking._label_encoder.inverse_transform(predicted)


def calibrated_method(estimator) -> str:
    """The method of a calibrated classifier's estimator scikit-learn's calibration calls: the
    first it has of ``decision_function`` and ``predict_proba``."""
    return _check_response_method(estimator, ["decision_function", "predict_proba"]).__name__


def calibrate(calibrated, method: str, responses: list, X):
    """What ``calibrated.method(X)`` returns, given the responses for ``X`` of its calibrated
    classifiers' estimators (``calibrated_method``'s, in order): scikit-learn's own code, run on
    copies of the calibrated classifiers whose estimators answer with those responses."""
    folds = []
    for fold, response in zip(calibrated.calibrated_classifiers_, responses):
        asked = calibrated_method(fold.estimator)
        folds.append(stand_in(fold, estimator=stand_in(fold.estimator, **{asked: answering(asked, response)})))
    return getattr(stand_in(calibrated, calibrated_classifiers_=folds), method)(X)
