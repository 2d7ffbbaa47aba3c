"""What serving needs of a model: its task, a call answered by a compiled kernel, its confidence, its ranking score."""

import hashlib
import operator
import pickle
import weakref

import numpy as np
from sklearn.base import is_classifier as sklearn_is_classifier
from sklearn.base import is_outlier_detector as sklearn_is_outlier_detector

from willump.compile.sites import CallSite


def booster_objective(model) -> str | None:
    import lightgbm

    if isinstance(model, lightgbm.Booster):
        return str(model.params.get("objective", "regression"))
    return None


def is_classifier(model) -> bool:
    objective = booster_objective(model)
    if objective is not None:
        return objective.startswith(("binary", "multiclass", "softmax", "multiclassova", "cross_entropy"))
    return sklearn_is_classifier(model) or hasattr(model, "classes_")


def is_outlier_detector(model) -> bool:
    """Whether the model is one of scikit-learn's outlier detectors (an IsolationForest, a Pipeline ending in one)."""
    try:
        return sklearn_is_outlier_detector(model)
    except AttributeError:  # (not a scikit-learn estimator: scikit-learn >= 1.6 finds no tags)
        return False


class FittedModel:
    """The model ``fit`` trained the small model and the filter for, as fit saw it: a call whose model is
    another object, or this one refitted (an attribute replaced, as ``fit`` replaces them), is not theirs
    to serve, unless it pickles to the same bytes (refitted to the same model, loaded again). Only the
    digest is pickled: where the function is unpickled, the first model a call names is taken as fit's
    (the copy pickled with the function)."""

    def __init__(self, model):
        self.digest = _digest(model)
        self._hold(model)
        self._other = None  # (model, attributes) last found to be another model: not pickled again each call

    def _hold(self, model) -> None:
        self.model, self.attributes = model, _attributes(model)

    def holds(self, model) -> bool:
        """Whether ``model`` (None when a call's model is known only once its statements run) is fit's."""
        if self.model is None:  # (unpickled)
            if model is not None:
                self._hold(model)
            return True
        model = self.model if model is None else model
        if model is self.model and _unchanged(model, self.attributes):
            return True
        other = self._other
        if other is not None and other[0] is model and _unchanged(model, other[1]):
            return False
        if self.digest is not None and _digest(model) == self.digest:
            self._hold(model)
            return True
        self._other = (model, _attributes(model))
        return False

    def __getstate__(self):
        return {"digest": self.digest, "model": None, "attributes": (), "_other": None}


def _attributes(model) -> tuple:
    return tuple(getattr(model, "__dict__", _NONE).values())


def _unchanged(model, held: tuple) -> bool:
    """Whether the model's attributes are the objects ``held`` (each call asks: no tuple built)."""
    now = getattr(model, "__dict__", _NONE)
    return len(now) == len(held) and all(map(operator.is_, now.values(), held))


_NONE = {}  # (the attributes of an object without a __dict__)


def _digest(model) -> bytes | None:
    """SHA-256 of the model's pickle, or None for a model that does not pickle."""
    try:
        return hashlib.sha256(pickle.dumps(model, protocol=5)).digest()
    except Exception:  # (any error a __reduce__ raises: such a model is told apart by identity alone)
        return None


_sites = weakref.WeakKeyDictionary()  # model -> {method: CallSite}


def call(model, method: str, X):
    """``getattr(model, method)(X)``, answered by a compiled kernel when one reproduces it exactly."""
    bound = getattr(model, method)
    try:
        sites = _sites.setdefault(model, {})
    except TypeError:  # an object without weak references: called as it is
        return bound(X)
    site = sites.get(method)
    if site is None:
        site = sites[method] = CallSite(f"{type(model).__name__}.{method}")
    return site(bound, X)


def sites_of(model) -> list:
    """The call sites ``call`` answered ``model``'s methods through (none for a model never called)."""
    try:
        return list(_sites.get(model, {}).values())
    except TypeError:  # (an object without weak references: never given a site)
        return []


def confidence(model, X) -> np.ndarray:
    """How sure a classifier is of each row: its highest class probability.

    A model with only ``decision_function`` gets the logistic function of its
    margin (binary) or the softmax of its decision values (multi-class): a
    monotone stand-in, not a calibrated probability.
    """
    if hasattr(model, "predict_proba"):
        return np.asarray(call(model, "predict_proba", X)).max(axis=1)
    if booster_objective(model) is not None:
        probabilities = np.asarray(call(model, "predict", X))
        if probabilities.ndim == 1:
            return np.maximum(probabilities, 1 - probabilities)
        return probabilities.max(axis=1)
    decision = np.asarray(call(model, "decision_function", X), dtype=float)
    if decision.ndim == 1:
        return 1 / (1 + np.exp(-np.abs(decision)))
    shifted = np.exp(decision - decision.max(axis=1, keepdims=True))
    return (shifted / shifted.sum(axis=1, keepdims=True)).max(axis=1)


def ranking_method(model) -> str:
    """The method whose output top-K ranks rows by (see ``ranking_score``)."""
    if is_classifier(model):
        if hasattr(model, "predict_proba"):
            return "predict_proba"
        return "predict" if booster_objective(model) is not None else "decision_function"
    return "predict"


def ranking_score(model, X) -> np.ndarray:
    """The score top-K ranks by: positive-class probability (binary classifier) or predicted value."""
    method = ranking_method(model)
    return scores_from(model, method, call(model, method, X))


def scores_from(model, method: str, output) -> np.ndarray:
    """The ranking scores in the output of ``model``'s ranking ``method``: the positive class's
    probability, a binary booster's or margin's score, or a regressor's prediction."""
    if method == "predict_proba":
        probabilities = np.asarray(output)
        if probabilities.ndim != 2 or probabilities.shape[1] != 2:
            raise ValueError("top_k needs a binary classifier or a regressor; this model has more classes")
        return probabilities[:, 1]
    scores = np.asarray(output, dtype=float)
    if is_classifier(model) and scores.ndim != 1:
        raise ValueError("top_k needs a binary classifier or a regressor; this model has more classes")
    return scores
