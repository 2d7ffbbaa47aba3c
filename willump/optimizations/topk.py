"""Fitting top-K filter models (paper §4.3): how many candidates a query needs to meet its precision target.

On validation rows, the full model's and the filter model's scores are computed
once. Batches are drawn from those rows (bootstrap resamples, with replacement, of
several sizes) and, for
each batch and each query share k/n, the fewest top-scored-by-the-filter rows that
hold ``target`` of the full model's top k is found. A query shape's candidate share is
that count, over the batch size, in ``level`` (99%) of the batches, times ``MARGIN``:
the paper's implementation keeps the smallest subset whose precision holds in most
resamples of the validation set. The margin is there because resamples reuse the
few validation rows at the top of the ranking, so they vary less than new batches
do (on a tree model whose top scores nearly tie, a test batch needed 117 candidates
of 500 where the resamples' 99% said 112). ``willump.runtime.topk`` serves the result.
"""

import math

import numpy as np

from willump.runtime.topk import DEFAULT_C_K, DEFAULT_MIN_FRACTION

RESAMPLES = 200  # batches drawn per batch size
LEVEL = 0.99  # share of the batches the candidate share must meet the target in
QUERY_SHARES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)  # k / n of the validated queries
SMALLEST_BATCH = 100  # batch sizes validated: the validation rows' count, then quarter by quarter down to this
MARGIN = 1.5  # candidates kept per candidate the resamples need
MAX_SHARE = 0.5  # a query shape whose filter must keep more of the batch runs exactly
MIN_SPEEDUP = 1.25  # expected speed-up (from the measured costs) a query shape needs to use the filter


def batch_sizes(validation_rows: int) -> list[int]:
    """Validated batch sizes, ascending: as many as the validation rows, a quarter of that, ... (at least SMALLEST_BATCH)."""
    sizes, size = [], validation_rows
    while size >= SMALLEST_BATCH:
        sizes.append(size)
        size //= 4
    return sizes[::-1]


def needed_ranks(full: np.ndarray, filtered: np.ndarray, size: int, resamples: int, rng) -> list[list[np.ndarray]]:
    """Per query share, per batch: the filter's ranks (0 = best) of the full model's top k, ascending.

    Both orders break ties by position, as the served queries do.
    """
    per_share = [[] for _ in QUERY_SHARES]
    ks = [round(q * size) for q in QUERY_SHARES]
    for _ in range(resamples):
        rows = np.sort(rng.integers(0, len(full), size))
        exact_order = np.argsort(-full[rows], kind="stable")
        filter_rank = np.empty(size, dtype=np.intp)
        filter_rank[np.argsort(-filtered[rows], kind="stable")] = np.arange(size)
        for j, k in enumerate(ks):
            if k >= 1:
                per_share[j].append(np.sort(filter_rank[exact_order[:k]]))
    return per_share


def candidate_shares(full, filtered, target: float, level: float = LEVEL, resamples: int = RESAMPLES,
                     random_state: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(batch sizes, candidate shares, expected precisions), the last two (batch sizes, QUERY_SHARES).

    A cell's candidate share is ``MARGIN`` times the fewest candidates holding ``target``
    of the exact top k in ``level`` of the batches, over the batch size (at most 1: the
    whole batch); its expected precision is the mean precision over the batches at that share.
    NaN where the query share gives no row (k < 1).
    """
    full, filtered = np.asarray(full, dtype=float), np.asarray(filtered, dtype=float)
    sizes = batch_sizes(len(full))
    rng = np.random.default_rng(random_state)
    shares = np.full((len(sizes), len(QUERY_SHARES)), np.nan)
    precisions = np.full_like(shares, np.nan)
    for i, size in enumerate(sizes):
        for j, ranks in enumerate(needed_ranks(full, filtered, size, resamples, rng)):
            if not ranks:
                continue
            k = len(ranks[0])
            must = math.ceil(target * k - 1e-9)  # rows of the exact top k the candidates must hold
            needed = np.quantile([r[must - 1] + 1 for r in ranks], level, method="higher")
            needed = min(math.ceil(MARGIN * needed), size)
            shares[i, j] = needed / size
            precisions[i, j] = np.mean([np.searchsorted(r, needed) / k for r in ranks])
    return np.asarray(sizes), shares, precisions


def with_floors(shares: np.ndarray) -> np.ndarray:
    """The shares a query keeps with top_k's default floors, max(c_k * k, min_fraction * n), per query share."""
    floors = np.maximum(DEFAULT_C_K * np.asarray(QUERY_SHARES), DEFAULT_MIN_FRACTION)
    return np.minimum(np.maximum(shares, floors), 1.0)


def expected_speedups(shares: np.ndarray, costs: dict) -> np.ndarray:
    """Exact top-K cost over filtered cost per row, for each candidate share, from per-row costs.

    ``costs``: seconds per row of ``preprocessing``, the ``filter_ifvs``, the ``other_ifvs``,
    the ``model`` and the ``filter`` model. The filtered query computes preprocessing, the
    filter's IFVs and the filter model for every row, then preprocessing, the other IFVs
    and the model for the candidates.
    """
    exact = costs["preprocessing"] + costs["filter_ifvs"] + costs["other_ifvs"] + costs["model"]
    first = costs["preprocessing"] + costs["filter_ifvs"] + costs["filter"]
    second = costs["preprocessing"] + costs["other_ifvs"] + costs["model"]
    return exact / np.maximum(first + shares * second, 1e-15)
