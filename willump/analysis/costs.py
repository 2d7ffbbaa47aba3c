"""The cost of each feature generator, measured on real rows.

Every figure is the least time of several runs after one run that is not counted. The
uncounted run pays for what only a first call pays (numba compiling or loading a kernel, a
call site building its kernel, lazily built tables). Then the least time is the run the rest
of the machine disturbed least: other processes only ever add time, so the minimum is the
figure two ``fit``s on the same data agree on, where a mean or even a median of a few runs
moves with the load. The more runs, the closer the minimum: a call is run at least
``REPEATS`` times, and again while less than ``BUDGET`` seconds were spent on it, at most
``MOST`` times. (On two loaded cores, the cost ratio of two text IFVs ranged 3.6-4.1 over eight
measurements with 5 runs each, 4.1-4.2 with this rule.)
"""

import time

REPEATS = 3  # runs counted, at least
BUDGET = 0.2  # seconds: a cheaper call is run again until this much time was spent on it...
MOST = 100  # ...but at most this many times


def least_seconds(function) -> float:
    """The least seconds one call of ``function()`` takes (see the module for how many calls)."""
    function()
    best, spent, runs = float("inf"), 0.0, 0
    while runs < REPEATS or (spent < BUDGET and runs < MOST):
        start = time.perf_counter()
        function()
        took = time.perf_counter() - start
        best, spent, runs = min(best, took), spent + took, runs + 1
    return best


def generator_costs(executor, env: dict, rows: int) -> list[float]:
    """Seconds per row of each IFV's generator on the batch ``env`` was computed from (see the module)."""
    count = len(executor.graph.ifvs)
    return [least_seconds(lambda i=i: executor.compute(env, i)) / rows for i in range(count)]


def preprocessing_cost(executor, arguments: dict, rows: int) -> float:
    """Seconds per row of the preprocessing statements (see the module)."""
    return least_seconds(lambda: executor.preprocess(arguments)) / rows
