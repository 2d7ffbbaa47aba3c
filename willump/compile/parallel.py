"""Worker threads for kernels that release the GIL (numba ``nogil``).

Work is split into parts (as many as there are workers, or a few times as many
for kernels whose cores may run unevenly); the calling thread and the workers
each take the next part not taken yet. Results come back in order, so the
answer does not depend on the number of workers.
"""

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor


def default_workers() -> int:
    """The cores this process may run on; one in a Dask worker's process, where Dask already runs
    a task per thread (as it sets ``OMP_NUM_THREADS=1`` there, so tasks do not oversubscribe cores)."""
    if in_dask_worker():
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def in_dask_worker() -> bool:
    """Whether this process runs a Dask worker (``distributed`` is then imported, never imported here)."""
    distributed = sys.modules.get("distributed")
    worker = getattr(distributed, "Worker", None)
    return bool(getattr(worker, "_instances", None))


class Workers:
    """A fixed number of threads, started on first use."""

    def __init__(self, count: int):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"workers must be a positive integer; got {count!r}")
        self.count = count
        self._pool = None
        self._lock = threading.Lock()
        self._idle = threading.BoundedSemaphore(count - 1) if count > 1 else None

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.count - 1, thread_name_prefix="willump")
        return self._pool

    def try_submit(self, function, *args):
        """A Future of ``function(*args)`` run by an idle worker, or None when none is idle."""
        if self._idle is None or not self._idle.acquire(blocking=False):
            return None

        def run():
            _inside.worker = True
            try:
                return function(*args)
            finally:
                _inside.worker = False
                self._idle.release()

        return self._executor().submit(run)

    def map(self, function, items: list) -> list:
        """``[function(item) for item in items]``: the calling thread and up to ``count - 1`` workers
        each take the next item not taken yet, so a core slowed by other work takes fewer (one of
        this machine's two cores scores a forest 30% slower while the other is busy too)."""
        if self.count == 1 or len(items) <= 1 or getattr(_inside, "worker", False):
            # (a worker never waits for other workers: with all of them waiting, none would run)
            return [function(item) for item in items]
        results, turns, lock = [None] * len(items), iter(range(len(items))), threading.Lock()

        def take_turns():
            while True:
                with lock:
                    i = next(turns, None)
                if i is None:
                    return
                results[i] = function(items[i])

        helpers = [self._executor().submit(_as_worker, take_turns) for _ in range(min(self.count, len(items)) - 1)]
        take_turns()
        for helper in helpers:  # (a helper that found every item taken returns at once)
            helper.result()
        return results

    def split(self, n: int, minimum: int, per_worker: int = 1) -> list[range]:
        """``range(n)`` in up to ``per_worker * count`` contiguous parts of at least ``minimum`` items."""
        parts = max(1, min(per_worker * self.count, n // max(minimum, 1)))
        bounds = [n * i // parts for i in range(parts + 1)]
        return [range(bounds[i], bounds[i + 1]) for i in range(parts)]

    def __getstate__(self):
        return {"count": self.count}

    def __setstate__(self, state):
        self.__init__(state["count"])


def _as_worker(function):
    _inside.worker = True
    try:
        return function()
    finally:
        _inside.worker = False


SERIAL = Workers(1)
WORTH_A_THREAD = 200e-6  # seconds: work that takes at least this long may be handed to a worker
RETRY_EVERY = 50  # calls between trying again the way of running that measured slower
TRIAL = 4  # calls in a row each such try takes (the first one warms caches and threads up)


def moving_average(average: float, seconds: float) -> float:
    """A measured time folded into its moving average (the first measurement starts it)."""
    return 0.8 * average + 0.2 * seconds if average else seconds


class Faster:
    """Which of two ways of doing the same work (``True`` / ``False``) to take next: the one whose
    times measured faster, the other tried again every ``RETRY_EVERY`` calls for ``TRIAL`` calls.
    A call right after the other way is not counted: it pays for the caches and threads the other
    way left cold (a worker woken after 50 calls is much slower than one kept busy)."""

    def __init__(self):
        self.seconds = {True: 0.0, False: 0.0}  # moving averages
        self._calls = 0
        self._last = None

    def choose(self) -> bool:
        self._calls += 1
        if self._calls <= 2 * TRIAL:  # each way first
            return self._calls <= TRIAL
        faster = self.seconds[True] < self.seconds[False]
        return (not faster) if self._calls % RETRY_EVERY < TRIAL else faster

    def record(self, way: bool, seconds: float) -> None:
        if way == self._last:
            self.seconds[way] = moving_average(self.seconds[way], seconds)
        self._last = way


_inside = threading.local()  # .worker: this thread is running a task for Workers
