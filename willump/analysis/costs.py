"""The cost of each feature generator, measured on real rows."""

import statistics
import time


def _median_seconds(function, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def generator_costs(executor, env: dict, rows: int, repeats: int = 3) -> list[float]:
    """Seconds per row of each IFV's generator on the batch ``env`` was computed from.

    The median of ``repeats`` runs, so one slow run on a noisy machine does not decide.
    """
    count = len(executor.graph.ifvs)
    return [_median_seconds(lambda i=i: executor.compute(env, i), repeats) / rows for i in range(count)]


def preprocessing_cost(executor, arguments: dict, rows: int, repeats: int = 3) -> float:
    """Seconds per row of the preprocessing statements."""
    return _median_seconds(lambda: executor.preprocess(arguments), repeats) / rows
