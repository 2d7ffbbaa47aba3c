"""Remote lookups of different IFVs at the same time (paper §4.5).

When two or more IFVs' generators read tables in Redis, a call may compute
those IFVs on worker threads, so their round trips overlap instead of adding
up; the other IFVs are computed meanwhile by the calling thread, and the values
are handed on in IFV order. Threads pay off when the network is slow; next to
a Redis on the same machine, where a lookup is mostly Python work that holds
the GIL, the hand-offs cost more than they save. So both ways are timed (per
row, a moving average) and the faster one is used, the other tried again now
and then. The threads run in the call's context, so their
lookups count in, and use the caches of, the function that was called.
"""

import ast
import concurrent.futures
import contextvars
import threading
import time

from willump.compile.parallel import Faster
from willump.runtime.rows import batch_length
from willump.runtime.tables import RedisTable


def reads_remote_tables(ifv, resolver) -> bool:
    """The IFV's generator names a table in Redis."""
    trees = [s.node for s in ifv.generator] + [ifv.expression]
    names = {n.id for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return any(isinstance(resolver.resolve(ast.Name(n, ast.Load())), RedisTable) for n in names)


class ConcurrentFeatures:
    """The executor it wraps, computing its remote IFVs side by side."""

    def __init__(self, executor, remote: set):
        self._executor = executor
        self.remote = remote  # indices of the IFVs whose generators read remote tables
        self._pool = None
        self._lock = threading.Lock()
        self.side_by_side = Faster()  # seconds per row, side by side (True) or one after the other
        self._values_side_by_side = Faster()  # the same, for IFVs computed apart from whole calls

    def __getattr__(self, name):
        return getattr(self._executor, name)

    def run(self, arguments: dict):
        """The function's result: its remote IFVs side by side, or the function as written,
        whichever measured faster."""

        def side_by_side():
            env = self._executor.preprocess(arguments)
            values = self._on_threads(env, range(len(self._executor.graph.ifvs)))
            return self._executor.combine(env, list(values.values()))

        return _faster(self.side_by_side, batch_length(arguments), side_by_side, lambda: self._executor.run(arguments))

    def values(self, env: dict, indices=None) -> dict:
        """{index: value} of the IFVs ``indices`` (default all), in that order; side by side
        when that measured faster."""
        seconds = self.side_by_side.seconds
        if seconds[False] and seconds[False] <= seconds[True]:
            return self._executor.values(env, indices)
        return self._on_threads(env, range(len(self._executor.graph.ifvs)) if indices is None else indices)

    def chosen_values(self, env: dict, indices) -> dict:
        """As ``values``, side by side or not as measured faster for such calls (timed apart from
        whole calls: the feature-row caches compute only some IFVs, on only some rows)."""
        return _faster(self._values_side_by_side, batch_length(env), lambda: self._on_threads(env, indices),
                       lambda: self._executor.values(env, indices))

    def _on_threads(self, env: dict, indices) -> dict:
        indices = list(indices)
        remote = [i for i in indices if i in self.remote]
        compute = self._executor.compute
        if len(remote) < 2:
            return {i: compute(env, i) for i in indices}
        pool = self._threads()
        futures = {i: pool.submit(contextvars.copy_context().run, compute, env, i) for i in remote}
        local = {}
        try:
            for i in indices:
                if i not in futures:
                    local[i] = compute(env, i)
        finally:
            concurrent.futures.wait(futures.values())  # nothing left running when this call ends
        return {i: futures[i].result() if i in futures else local[i] for i in indices}

    def _threads(self):
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=len(self.remote), thread_name_prefix="willump-lookup"
                )
            return self._pool


def _faster(ways: Faster, rows, side_by_side, one_after_the_other):
    """The result of the way ``ways`` chooses, timed per row (of ``rows``) for its next choice."""
    way = ways.choose()
    started = time.perf_counter()
    result = side_by_side() if way else one_after_the_other()
    ways.record(way, (time.perf_counter() - started) / max(1, rows or 1))
    return result
