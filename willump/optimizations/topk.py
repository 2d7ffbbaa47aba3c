"""Top-K filter models (paper §4.3): rank everything cheaply, then only the best candidates exactly."""

import math

import numpy as np

from willump.optimizations.cascades import full_model_input
from willump.optimizations.models import ranking_score
from willump.runtime.features import feature_matrix

DEFAULT_C_K = 10
DEFAULT_MIN_FRACTION = 0.05


def exact(executor, arguments: dict, k: int) -> np.ndarray:
    """Positions of the k best rows by the full model, best first (ties by position)."""
    env, values = executor.evaluate(arguments)
    model, X = executor.model_input(env, [values[i] for i in range(len(values))])
    return np.argsort(-ranking_score(model, X), kind="stable")[:k]


def filtered(executor, fitted, arguments: dict, k: int, n: int, c_k: float, min_fraction: float, stats):
    """Positions of the k best rows: the filter model keeps the candidates, the full model ranks them."""
    keep = max(int(math.ceil(c_k * k)), int(math.ceil(min_fraction * n)), k)
    if keep >= n:
        stats.count(top_k_candidates=n)
        return exact(executor, arguments, k)
    env = executor.preprocess(arguments)
    efficient = {i: executor.compute(env, i) for i in fitted.selected}
    scores = ranking_score(fitted.filter_model, feature_matrix([efficient[i] for i in fitted.selected]))
    candidates = np.sort(np.argsort(-scores, kind="stable")[:keep])
    model, X = full_model_input(executor, fitted, arguments, efficient, candidates)
    order = np.argsort(-ranking_score(model, X), kind="stable")[:k]
    stats.count(top_k_candidates=keep)
    return candidates[order]
