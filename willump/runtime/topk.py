"""Serving top-K queries (paper §4.3): exactly, or a filter model keeps candidates and the full model ranks them.

``fit`` (``willump.optimizations.topk``) decides how many candidates a query needs
for its precision target; the decision is a ``FilterPlan`` this module serves.
"""

import math
from dataclasses import dataclass

import numpy as np

from willump.runtime.cascade import full_model_input, ifv_values
from willump.runtime.features import feature_matrix
from willump.runtime.models import ranking_score

DEFAULT_C_K = 10  # the paper's floors on the candidates: c_k * k ...
DEFAULT_MIN_FRACTION = 0.05  # ... and this share of the batch (its Table 7: smaller subsets cost precision, not time)


@dataclass
class FilterPlan:
    """What fit validated: per query shape, the share of a batch the filter must keep.

    ``candidate_shares[i, j]`` is the share of a batch of ``batch_sizes[i]`` rows to keep
    as candidates for a top-``k`` query with ``k / n = query_shares[j]``, so that the
    filtered top-K holds at least ``target`` of the exact top-K in ``level`` of the
    validation resamples; NaN where the filter is not used (it would not be faster, or
    no share short of the whole batch met the target).
    """

    selected: list  # the IFVs the filter model reads
    model: object  # the filter model
    target: float
    level: float
    batch_sizes: np.ndarray  # ascending
    query_shares: np.ndarray  # ascending
    candidate_shares: np.ndarray  # (batch sizes, query shares)

    def candidates(self, n: int, k: int, c_k: float = DEFAULT_C_K, min_fraction: float = DEFAULT_MIN_FRACTION) -> int | None:
        """Candidates to keep for the k best of n rows, or None: this query runs exactly.

        The validated cells around the query (the batch sizes just below and above ``n``,
        the nearest query share at least ``k / n``): the largest of their shares, and at
        least max(c_k * k, min_fraction * n), the paper's floors. A query outside what was
        validated (a batch smaller than every validated one, a share larger than every
        validated one) runs exactly, as does one a cell around it says to, or one whose
        candidates would be the whole batch.
        """
        sizes = self.batch_sizes
        column = np.searchsorted(self.query_shares, k / n, side="left")
        if n < sizes[0] or column >= len(self.query_shares):
            return None
        below = np.searchsorted(sizes, n, side="right") - 1  # the largest validated batch not above n
        rows = [below] if sizes[below] == n or below == len(sizes) - 1 else [below, below + 1]
        shares = self.candidate_shares[rows, column]
        if np.isnan(shares).any():
            return None
        keep = max(math.ceil(shares.max() * n), math.ceil(c_k * k), math.ceil(min_fraction * n), k)
        return keep if keep < n else None

    def describe(self) -> dict:
        """The validated candidate shares, {batch rows: {k/n: share, or None where the query runs exactly}}."""
        return {
            int(b): {float(q): None if np.isnan(s) else round(float(s), 4) for q, s in zip(self.query_shares, row)}
            for b, row in zip(self.batch_sizes, self.candidate_shares)
        }


def check_k(k) -> int:
    """``k`` as an int; a ValueError unless it is a positive integer."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise ValueError(f"k must be a positive integer; got {k!r}")
    return int(k)


def exact(executor, arguments: dict, k: int, feature_rows=None) -> tuple[np.ndarray, np.ndarray]:
    """(positions, scores) of the k best rows by the full model, best first (ties by position)."""
    scores = model_scores(executor, arguments, feature_rows)
    positions = best(scores, k)
    return positions, scores[positions]


def model_scores(executor, arguments: dict, feature_rows=None) -> np.ndarray:
    """The full model's score of every row: scored as a plain call computes the function, or, to read the
    IFVs ``feature_rows`` caches from its caches (or when the model is known only once the statements ran),
    IFV by IFV."""
    scores = executor.scores(arguments) if feature_rows is None else None
    if scores is None:
        env = executor.preprocess(arguments)
        count = len(executor.graph.ifvs)
        values = ifv_values(executor, env, arguments, range(count), feature_rows)
        model, X = executor.model_input(env, [values[i] for i in range(count)])
        scores = ranking_score(model, X)
    return np.asarray(scores)


def ordered_as(result, scores: np.ndarray) -> bool:
    """Whether the function's ``result`` orders the rows as the model's ``scores`` do (or is not one number
    per row: labels, several columns, which top-K ranks by the scores as documented); False for
    ``p[:, 0]``, ``1 - p``, or numbers the score does not order (``p * weight``)."""
    result = np.asarray(result)
    if result.ndim != 1 or len(result) != len(scores) or result.dtype.kind not in "biuf":
        return True
    ranked = result[np.argsort(scores, kind="stable")].astype(float)
    steps = np.diff(ranked[~np.isnan(ranked)])
    return bool((steps >= 0).all())


def best(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest scores, best first, ties by position (as a stable argsort of all)."""
    scores = np.asarray(scores)
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    threshold = np.partition(-scores, k - 1)[k - 1]  # the k-th best score (negated)
    if np.isnan(threshold):  # (fewer than k scores are numbers: NaN rows come last, by position)
        return np.argsort(-scores, kind="stable")[:k]
    kept = np.flatnonzero(-scores <= threshold)  # every row scoring at least as well, ties included
    return kept[np.argsort(-scores[kept], kind="stable")][:k]


def filtered(executor, fitted, arguments: dict, k: int, keep: int, stats, feature_rows=None) -> tuple[np.ndarray, np.ndarray]:
    """(positions, full-model scores) of the k best rows: the filter model keeps ``keep``
    candidates, the full model ranks them; the IFVs ``feature_rows`` caches from its caches."""
    plan = fitted.top_k_plan
    env = executor.preprocess(arguments)
    efficient = ifv_values(executor, env, arguments, plan.selected, feature_rows)
    scores = ranking_score(plan.model, feature_matrix([efficient[i] for i in plan.selected]))
    candidates = np.sort(best(scores, keep))
    model, X = full_model_input(executor, fitted, arguments, efficient, candidates, feature_rows)
    stats.count(top_k_candidates=keep)
    full_scores = np.asarray(ranking_score(model, X))
    order = best(full_scores, k)
    return candidates[order], full_scores[order]


def merged(parts: list[tuple[int, np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best of batches ranked apart, as one ranking of their concatenation would give them:
    ``parts`` are (the batch's first position in the concatenation, its best positions, their
    scores); best first, ties by position."""
    positions = np.concatenate([offset + np.asarray(found, dtype=np.intp) for offset, found, _ in parts] or [np.empty(0, np.intp)])
    scores = np.concatenate([np.asarray(s, dtype=float) for _, _, s in parts] or [np.empty(0)])
    by_position = np.argsort(positions, kind="stable")
    positions, scores = positions[by_position], scores[by_position]
    order = best(scores, min(k, len(scores)))
    return positions[order], scores[order]
