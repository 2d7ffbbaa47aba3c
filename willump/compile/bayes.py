"""Compiled multinomial and complement naive Bayes: ``predict``, ``predict_proba``,
``predict_log_proba``, ``predict_joint_log_proba``.

Their joint log likelihood is a linear model's product, ``X @ feature_log_prob_.T``,
so it is computed by the linear models' kernels (``csr_scores``, or fused with the
vectorizers feeding the model); the class prior is added as scikit-learn adds it,
and the normalization is scikit-learn's own ``logsumexp`` (the one its naive Bayes
module calls, which changed between versions). Counts (integer CSR) are converted
to float64 as scipy's product converts them.
"""

import sys

import numpy as np
from sklearn.naive_bayes import ComplementNB, MultinomialNB, _BaseNB

from willump.compile.forms import Unsupported
from willump.compile.linear import CompiledLinearModel
from willump.compile.parallel import SERIAL

_PREDICT = ("predict", "predict_proba", "predict_log_proba")
METHODS = {
    kind: _PREDICT + (("predict_joint_log_proba",) if hasattr(_BaseNB, "predict_joint_log_proba") else ())
    for kind in (MultinomialNB, ComplementNB)
}
_NAIVE_BAYES = sys.modules[_BaseNB.__module__]  # the module whose functions its methods call


def _log_evidence(jll: np.ndarray) -> np.ndarray:
    """``logsumexp(jll, axis=1)`` by the function ``predict_log_proba`` of this scikit-learn calls."""
    if hasattr(_NAIVE_BAYES, "_logsumexp"):  # scikit-learn >= 1.7: its own, given the namespace
        return _NAIVE_BAYES._logsumexp(jll, axis=1, xp=_NAIVE_BAYES.get_namespace(jll)[0])
    return _NAIVE_BAYES.logsumexp(jll, axis=1)  # scipy's


class CompiledNaiveBayes(CompiledLinearModel):
    """One method of a fitted ``MultinomialNB`` or ``ComplementNB``."""

    converts_values = True  # (scikit-learn's _check_X keeps counts as they are; the product converts)

    def __init__(self, model, method: str, workers=SERIAL):
        kind = type(model)
        if method not in METHODS.get(kind, ()):
            raise Unsupported(f"{kind.__name__}.{method} is not compiled")
        weights, prior = getattr(model, "feature_log_prob_", None), getattr(model, "class_log_prior_", None)
        if not all(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in (weights, prior)) or weights.ndim != 2:
            raise Unsupported("the model is not fitted, or its log probabilities are not float64 arrays")
        if not isinstance(getattr(model, "classes_", None), np.ndarray):
            raise Unsupported("classes_ that are not a numpy array")
        self.model, self.method, self.kind = model, method, kind
        self._start(weights.shape[1], workers)

    def _fitted_state(self) -> tuple:
        model = self.model
        return (model.feature_log_prob_, model.class_log_prior_, model.classes_)

    def _weights(self) -> np.ndarray:
        return self.model.feature_log_prob_.T

    def finish(self, product: np.ndarray):
        """The method's answer given ``X @ feature_log_prob_.T``, as ``_BaseNB`` computes it."""
        model = self.model
        if self.kind is MultinomialNB:
            jll = product + model.class_log_prior_
        else:  # ComplementNB adds its prior in place, and only for a single class
            jll = product
            if len(model.classes_) == 1:
                jll += model.class_log_prior_
        if self.method == "predict_joint_log_proba":
            return jll
        if self.method == "predict":
            return model.classes_[np.argmax(jll, axis=1)]
        log_probability = jll - np.atleast_2d(_log_evidence(jll)).T
        return np.exp(log_probability) if self.method == "predict_proba" else log_probability
