"""Measurements of one configuration of one workload: batch, point, top-K, quality.

Times are wall-clock (``time.perf_counter``) in this process. Every measurement
warms up first and reports a median (or percentiles) of repeated runs, because
the benchmark machines are noisy.
"""

import statistics
import time

import numpy as np
from sklearn.metrics import mean_squared_error, roc_auc_score


def timed(function, *args) -> tuple[float, object]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def _rounds(functions: dict, arguments: list, warm_up: int = 1) -> dict:
    """Seconds of each call of each function, the functions interleaved call by call.

    Interleaving (and rotating who goes first) spreads the machine's drift evenly
    over the configurations instead of favouring whichever runs last.
    """
    names = list(functions)
    for argument in arguments[:warm_up]:
        for name in names:
            functions[name](argument)
    seconds = {name: [] for name in names}
    for position, argument in enumerate(arguments):
        shift = position % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(timed(functions[name], argument)[0])
    return seconds


def batch_throughputs(functions: dict, inputs, repeats: int) -> dict:
    """Rows per second over the whole batch for each function: medians of ``repeats`` runs."""
    seconds = _rounds(functions, [inputs] * repeats)
    return {name: len(inputs) / statistics.median(runs) for name, runs in seconds.items()}


def blocked_latencies(functions: dict, rows: list, block: int = 50) -> dict:
    """Median latency in milliseconds of single-row calls, each function called ``block`` times in
    a row (the functions taking turns, block by block, over the same rows): each in its own steady
    state, as in a process serving it alone, where ``point_latencies`` calls them alternately, so
    that each call follows another pipeline's (the pessimistic case for caches)."""
    seconds = blocked_rounds(functions, rows, block)
    return {name: float(np.percentile(runs, 50)) * 1e3 for name, runs in seconds.items()}


def blocked_rounds(functions: dict, rows: list, block: int = 50) -> dict:
    """Seconds of each single-row call of each function, called as ``blocked_latencies`` calls them."""
    names = list(functions)
    for name in names:
        for argument in rows[:10]:
            functions[name](argument)
    seconds = {name: [] for name in names}
    for turn, start in enumerate(range(0, len(rows), block)):
        shift = turn % len(names)
        for name in names[shift:] + names[:shift]:
            for argument in rows[start : start + block]:
                seconds[name].append(timed(functions[name], argument)[0])
    return seconds


def point_latencies(functions: dict, rows: list) -> dict:
    """(p50, p99) latency in milliseconds of single-row calls for each function."""
    seconds = _rounds(functions, rows, warm_up=10)
    return {
        name: (float(np.percentile(runs, 50)) * 1e3, float(np.percentile(runs, 99)) * 1e3)
        for name, runs in seconds.items()
    }


def top_k_queries(queries: dict, inputs, k: int, exact: np.ndarray, repeats: int) -> dict:
    """Throughput, precision and mean average precision of top-K queries against the exact top-K.

    Each query maps the inputs to the positions of the K best rows, best first.
    """
    throughputs = batch_throughputs(queries, inputs, repeats)
    results = {}
    for name, query in queries.items():
        chosen = np.asarray(query(inputs))
        results[name] = {
            "throughput": throughputs[name],
            "precision": len(set(chosen.tolist()) & set(exact.tolist())) / k,
            "map": average_precision(chosen, exact),
        }
    return results


def top_k_positions(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest scores, best first (ties by position)."""
    scores = np.asarray(scores, dtype=float)
    return np.argsort(-scores, kind="stable")[:k]


def top_k_by_partition(scores: np.ndarray, k: int) -> np.ndarray:
    """The same positions as :func:`top_k_positions` (up to rows tied with the K-th score), found by
    ``np.argpartition`` and a sort of the K chosen only: the cheapest exact top K of given scores."""
    scores = np.asarray(scores, dtype=float)
    chosen = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return chosen[np.lexsort((chosen, -scores[chosen]))]


def average_precision(chosen: np.ndarray, exact: np.ndarray) -> float:
    """Average precision of the ranking ``chosen`` when the relevant rows are ``exact``."""
    relevant = set(exact.tolist())
    hits, total = 0, 0.0
    for rank, position in enumerate(chosen.tolist(), start=1):
        if position in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant) if relevant else 1.0


def quality(task: str, y_true, predictions) -> tuple[str, float]:
    """(metric name, value): ROC AUC for classification scores, RMSE for regression."""
    if task == "classification":
        return "roc_auc", float(roc_auc_score(y_true, predictions))
    return "rmse", float(np.sqrt(mean_squared_error(y_true, predictions)))
