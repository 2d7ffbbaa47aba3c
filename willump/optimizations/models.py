"""What willump needs to know about a model: its task, its confidence, its ranking score, a fresh copy."""

import weakref

import numpy as np
from sklearn.base import clone, is_classifier as sklearn_is_classifier
from sklearn.utils.validation import check_is_fitted

from willump.compile.sites import CallSite


def _booster_objective(model) -> str | None:
    import lightgbm

    if isinstance(model, lightgbm.Booster):
        return str(model.params.get("objective", "regression"))
    return None


def is_classifier(model) -> bool:
    objective = _booster_objective(model)
    if objective is not None:
        return objective.startswith(("binary", "multiclass", "softmax", "multiclassova", "cross_entropy"))
    return sklearn_is_classifier(model) or hasattr(model, "classes_")


def check_fitted(model) -> None:
    """ValueError when the user's model has not been trained."""
    if _booster_objective(model) is not None:
        return
    try:
        check_is_fitted(model)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the model {type(model).__name__} is not fitted: train it before willump's fit ({error})") from None


def train_like(model, X, y, random_state, replacement=None):
    """A new model of the same kind and settings as ``model`` (or ``replacement``), trained on (X, y)."""
    import lightgbm

    if replacement is None and isinstance(model, lightgbm.Booster):
        params = {**model.params, "verbose": -1, "seed": random_state}
        rounds = model.current_iteration() or 100
        return lightgbm.train(params, lightgbm.Dataset(X, y), num_boost_round=rounds)
    fresh = clone(replacement if replacement is not None else model)
    if "random_state" in fresh.get_params():
        fresh.set_params(random_state=random_state)
    return fresh.fit(X, y)


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


def confidence(model, X) -> np.ndarray:
    """How sure a classifier is of each row: its highest class probability.

    A model with only ``decision_function`` gets the logistic function of its
    margin (binary) or the softmax of its decision values (multi-class): a
    monotone stand-in, not a calibrated probability.
    """
    if hasattr(model, "predict_proba"):
        return np.asarray(call(model, "predict_proba", X)).max(axis=1)
    if _booster_objective(model) is not None:
        probabilities = np.asarray(call(model, "predict", X))
        if probabilities.ndim == 1:
            return np.maximum(probabilities, 1 - probabilities)
        return probabilities.max(axis=1)
    decision = np.asarray(call(model, "decision_function", X), dtype=float)
    if decision.ndim == 1:
        return 1 / (1 + np.exp(-np.abs(decision)))
    shifted = np.exp(decision - decision.max(axis=1, keepdims=True))
    return (shifted / shifted.sum(axis=1, keepdims=True)).max(axis=1)


def ranking_score(model, X) -> np.ndarray:
    """The score top-K ranks by: positive-class probability (binary classifier) or predicted value."""
    if is_classifier(model):
        if hasattr(model, "predict_proba"):
            probabilities = np.asarray(call(model, "predict_proba", X))
            if probabilities.shape[1] != 2:
                raise ValueError("top_k needs a binary classifier or a regressor; this model has more classes")
            return probabilities[:, 1]
        if _booster_objective(model) is not None:
            scores = np.asarray(call(model, "predict", X))
            if scores.ndim != 1:
                raise ValueError("top_k needs a binary classifier or a regressor; this model has more classes")
            return scores
        margins = np.asarray(call(model, "decision_function", X), dtype=float)
        if margins.ndim != 1:
            raise ValueError("top_k needs a binary classifier or a regressor; this model has more classes")
        return margins
    return np.asarray(call(model, "predict", X), dtype=float)
