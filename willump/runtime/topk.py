"""Top-K filter models (paper §4.3): rank everything cheaply, then only the best candidates exactly."""

import math

import numpy as np

from willump.runtime.cascade import full_model_input, ifv_values
from willump.runtime.features import feature_matrix
from willump.runtime.models import ranking_score

DEFAULT_C_K = 10
DEFAULT_MIN_FRACTION = 0.05


def exact(executor, arguments: dict, k: int, feature_rows=None) -> np.ndarray:
    """Positions of the k best rows by the full model, best first (ties by position); the IFVs
    ``feature_rows`` caches from its caches."""
    env = executor.preprocess(arguments)
    count = len(executor.graph.ifvs)
    values = ifv_values(executor, env, arguments, range(count), feature_rows)
    model, X = executor.model_input(env, [values[i] for i in range(count)])
    return np.argsort(-ranking_score(model, X), kind="stable")[:k]


def filtered(executor, fitted, arguments: dict, k: int, n: int, c_k: float, min_fraction: float, stats,
             feature_rows=None):
    """Positions of the k best rows: the filter model keeps the candidates, the full model ranks
    them; the IFVs ``feature_rows`` caches from its caches."""
    keep = max(int(math.ceil(c_k * k)), int(math.ceil(min_fraction * n)), k)
    if keep >= n:
        stats.count(top_k_candidates=n)
        return exact(executor, arguments, k, feature_rows)
    env = executor.preprocess(arguments)
    efficient = ifv_values(executor, env, arguments, fitted.selected, feature_rows)
    scores = ranking_score(fitted.filter_model, feature_matrix([efficient[i] for i in fitted.selected]))
    candidates = np.sort(np.argsort(-scores, kind="stable")[:keep])
    model, X = full_model_input(executor, fitted, arguments, efficient, candidates, feature_rows)
    order = np.argsort(-ranking_score(model, X), kind="stable")[:k]
    stats.count(top_k_candidates=keep)
    return candidates[order]
