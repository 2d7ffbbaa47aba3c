"""The cost of each feature generator, measured on real rows.

Every figure is the least time of ``REPEATS`` runs after one run that is not counted. The
uncounted run pays for what only a first call pays (numba compiling or loading a kernel, a
call site building its kernel, lazily built tables); then the least time is the run the rest
of the machine disturbed least: other processes only ever add time, so the minimum is the
figure two ``fit``s on the same data agree on, where a mean or even a median of a few runs
moves with the load.
"""

import time

REPEATS = 5


def least_seconds(function, repeats: int = REPEATS) -> float:
    """The least seconds one call of ``function()`` takes over ``repeats`` calls, after one call not counted."""
    function()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def generator_costs(executor, env: dict, rows: int, repeats: int = REPEATS) -> list[float]:
    """Seconds per row of each IFV's generator on the batch ``env`` was computed from (see the module)."""
    count = len(executor.graph.ifvs)
    return [least_seconds(lambda i=i: executor.compute(env, i), repeats) / rows for i in range(count)]


def preprocessing_cost(executor, arguments: dict, rows: int, repeats: int = REPEATS) -> float:
    """Seconds per row of the preprocessing statements (see the module)."""
    return least_seconds(lambda: executor.preprocess(arguments), repeats) / rows
