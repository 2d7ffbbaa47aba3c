"""Batch scoring on Dask (``pip install "willump[dask]"``).

The idiom Dask users already write works as written: ``ddf.map_partitions(predict, meta=...)``
with a decorated (fitted or not) ``predict``. Each worker process builds the function once, for
all its tasks (``willump.persistence.restore``). These helpers add what Dask cannot infer:

- ``predict(ddf, func)``: the scores as a Dask Series (a DataFrame for 2-D scores) aligned with
  ``ddf``'s rows, ``meta`` built from a few rows of the first partition, and the function sent to
  each worker once (broadcast) rather than with every task;
- ``top_k(ddf, func, k)``: each partition's best rows (by the filter model after ``fit``), merged
  on the client into the best ``k`` of the whole frame;
- ``stats(func)`` / ``reset_stats(func)``: the counters of every worker, summed;
  ``clear_cache(func)`` empties the caches of every worker.
"""

import time
import types

import numpy as np
import pandas as pd

try:
    import dask
    import dask.dataframe as dd
except ImportError as missing:  # (willump itself never imports this module)
    raise ImportError(
        f"willump.dask needs dask[dataframe] and distributed ({missing}): pip install \"willump[dask]\""
    ) from missing

from willump.api import BoundOptimizedFunction, OptimizedFunction
from willump.persistence import shared
from willump.runtime.calls import Stats
from willump.runtime.topk import check_k, merged

SAMPLE_ROWS = 100  # rows of the first partition the undecorated function runs on to build ``meta``


def predict(ddf, func, *, meta=None, name="prediction", sample_rows=SAMPLE_ROWS):
    """``func`` applied to every partition of ``ddf``: a Dask Series of its scores with ``ddf``'s
    index (a DataFrame for 2-D scores; what ``func`` returns when it is a Series or DataFrame).

    ``meta`` (Dask's: an empty object of the result's type) is built, when not given, by running
    the undecorated function on the first ``sample_rows`` rows of the first partition. With a
    ``distributed`` client, the function is sent to each worker once (``Client.scatter(...,
    broadcast=True)``) and every task reads it there. Lazy, as ``map_partitions``: ``.compute()``,
    ``.persist()`` or ``.to_parquet(...)`` runs it; ``distributed.progress`` shows its progress.
    """
    _check_frame(ddf)
    if meta is None:
        meta = _meta(ddf, func, name, sample_rows)
    return ddf.map_partitions(_scores, _shipped(func), name, meta=meta)


def top_k(ddf, func, k, *, progress=False, **options):
    """Positions of the ``k`` best-scoring rows of ``ddf`` (in the concatenation of its
    partitions, as ``ddf.compute()`` orders them), best first, ties by position: what
    ``func.top_k(ddf.compute(), k=k)`` returns, up to ties between equal scores, without bringing
    the frame to the client.

    Each partition's ``k`` best rows are found where it lives (after ``fit``, by the filter model
    and the full model on its candidates, as ``func.top_k`` finds them in one batch) and sent
    with their scores and the partition's length; the client merges them. ``options`` are
    ``func.top_k``'s (``c_k``, ``min_fraction``). ``progress=True`` shows a tqdm bar of the
    partitions done.
    """
    _check_frame(ddf)
    _check_decorated(func)
    k = check_k(k)
    parts = ddf.to_delayed()
    shipped = _shipped(func)
    tasks = [dask.delayed(_partition_top_k, pure=True)(part, shipped, k, options) for part in parts]
    found = _computed(tasks, progress)
    offsets = np.cumsum([0] + [length for length, _, _ in found[:-1]])
    positions, _ = merged([(offset, best, scores) for offset, (_, best, scores) in zip(offsets, found)], k)
    return positions


def stats(func, client=None) -> dict:
    """``func.stats`` of every worker, summed: rows seen, answered by the small model, cache hits,
    remote keys... (a worker restarted since lost its counts)."""
    totals = dict.fromkeys(Stats.FIELDS, 0)
    for counts in _on_workers(_worker_stats, func, client).values():
        for field, value in counts.items():
            totals[field] += value
    return totals


def reset_stats(func, client=None) -> None:
    """Zero ``func``'s counters on every worker."""
    _on_workers(_worker_reset_stats, func, client)


def clear_cache(func, client=None) -> None:
    """Empty ``func``'s feature caches on every worker (``func.clear_cache()`` there): after the
    tables they read changed."""
    _on_workers(_worker_clear_cache, func, client)


def warm(ddf, func, *, top_k=False, sample_rows=SAMPLE_ROWS, client=None) -> dict:
    """Run ``func`` on the first ``sample_rows`` rows of ``ddf`` in every worker process before a
    job, so that no partition of the job waits while a worker builds it: each worker builds the
    function (the instance its tasks then share) and loads numba's compiled kernels. Kernels
    numba's cache on disk does not hold yet are compiled by one worker per machine first, which
    writes them there, and then loaded by the machine's other workers. ``top_k=True`` runs
    ``func.top_k`` too (it reads other kernels). Kernels for rows the sample lacks (other dtypes,
    rows a fitted function's small model is unsure of) are still compiled when first met.
    Returns the seconds it took, by worker address."""
    from distributed.comm import get_address_host

    _check_frame(ddf)
    client = _cluster_client(func, client, "warm runs the function on a cluster's workers (in one process, "
                             "call the function once)")
    sample = _first_rows(ddf, sample_rows)
    shipped = _scattered(client, func)
    by_machine = {}
    for address in client.nthreads():
        by_machine.setdefault(get_address_host(address), []).append(address)
    firsts = [addresses[0] for addresses in by_machine.values()]
    others = [address for addresses in by_machine.values() for address in addresses[1:]]
    seconds = {}
    for addresses in (firsts, others):
        futures = [client.submit(_warmed, shipped, sample, top_k, workers=[address], allow_other_workers=False,
                                 pure=False) for address in addresses]
        seconds.update(zip(addresses, client.gather(futures)))
    return seconds


def _check_decorated(func) -> None:
    if not isinstance(func, (OptimizedFunction, BoundOptimizedFunction)):
        raise TypeError(f"expected a function decorated with willump.optimize; got {func!r}")


def _first_rows(ddf, rows: int):
    """The first ``rows`` rows of ``ddf``'s first partition, computed."""
    return ddf.partitions[0].head(rows, compute=True)


def _check_frame(ddf) -> None:
    if not isinstance(ddf, (dd.DataFrame, dd.Series)):
        raise TypeError(f"expected a dask DataFrame or Series (dask.dataframe); got {type(ddf).__name__}: "
                        "for a pandas frame, call the function itself")


def _undecorated(func):
    if isinstance(func, BoundOptimizedFunction):  # (obj.method: the undecorated method of obj)
        return types.MethodType(func.__func__.py_func, func.__self__)
    return func.py_func if isinstance(func, OptimizedFunction) else func


def _meta(ddf, func, name, sample_rows: int):
    sample = _first_rows(ddf, sample_rows)
    if len(sample) == 0:
        raise ValueError("the first partition of ddf is empty, so meta cannot be built from its rows: "
                         "pass meta= (an empty Series or DataFrame of the result's type)")
    return _scores(sample, _undecorated(func), name).iloc[:0]


def _scores(part, func, name):
    """``func(part)`` as a pandas object indexed as ``part``: ndarrays become a Series (1-D) or a
    DataFrame (2-D); a Series or DataFrame is kept as ``func`` returned it."""
    result = func(part)
    if isinstance(result, (pd.Series, pd.DataFrame)):
        return result
    result = np.asarray(result)
    if result.ndim == 2:
        return pd.DataFrame(result, index=part.index)
    if result.ndim != 1 or len(result) != len(part):
        raise ValueError(f"willump.dask.predict needs one score (or one row of scores) per row; {func.__name__} "
                         f"returned shape {result.shape} for a partition of {len(part)} rows: use "
                         "ddf.map_partitions(func, meta=...) for other results")
    return pd.Series(result, index=part.index, name=name)


def _partition_top_k(part, func, k: int, options: dict):
    """(the partition's length, its best positions, their scores)."""
    if len(part) == 0:
        return 0, np.empty(0, np.intp), np.empty(0)
    positions, scores = func.top_k(part, k=min(k, len(part)), return_scores=True, **options)
    return len(part), positions, scores


def _shipped(func):
    """What tasks take as the function: with a ``distributed`` client, a future of it on every
    worker (sent once per worker, under its identity), kept for the next jobs; without one, the
    function."""
    client = _client()
    if client is None:
        return func
    return _scattered(client, func)


_kept_futures: dict = {}  # (client id, identity) -> the future of a function on a cluster, newest last
KEPT_FUTURES = 4


def _scattered(client, func):
    """The future of ``func`` on ``client``'s cluster: scattered once and kept. A future of the
    same key dropped between two jobs is released on the scheduler after the next job scattered
    the key again, and that job's tasks lose it ("lost dependencies")."""
    identity = func._shipped()[0] if isinstance(func, OptimizedFunction) else None
    key = (id(client), identity)
    future = _kept_futures.pop(key, None) if identity is not None else None
    if future is None or future.cancelled() or future.client is not client:
        if identity is None:
            future = client.scatter(func, broadcast=True, hash=True)
        else:  # (named by the identity just computed: hashing would pickle the function again)
            future = client.scatter({f"willump-{identity}": func}, broadcast=True)[f"willump-{identity}"]
    if identity is not None:
        _kept_futures[key] = future
        while len(_kept_futures) > KEPT_FUTURES:
            _kept_futures.pop(next(iter(_kept_futures)))
    return future


def _client():
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:  # (no client: Dask's local schedulers run the tasks)
        return None


def _computed(tasks: list, progress: bool) -> list:
    client = _client()
    if client is None:
        return list(dask.compute(*tasks))
    futures = client.compute(tasks)
    if progress:
        from distributed import as_completed
        from tqdm.auto import tqdm

        for _ in tqdm(as_completed(futures), total=len(futures), unit="partition"):
            pass
    return client.gather(futures)


def _on_workers(run, func, client) -> dict:
    client = _cluster_client(func, client, "stats and caches are a cluster's workers' (in one process, read "
                             "func.stats or call func.clear_cache())")
    return client.run(run, func._shipped()[0])


def _cluster_client(func, client, why: str):
    """``client``, or the current ``distributed`` client, for a decorated ``func``."""
    _check_decorated(func)
    client = client or _client()
    if client is None:
        raise ValueError(f"no distributed client: {why}")
    return client


def _worker_stats(identity: str) -> dict:
    found = shared(identity)
    return found.stats if found is not None else {}


def _worker_reset_stats(identity: str) -> None:
    found = shared(identity)
    if found is not None:
        found.reset_stats()


def _worker_clear_cache(identity: str) -> None:
    found = shared(identity)
    if found is not None:
        found.clear_cache()


def _warmed(func, sample, top_k: bool) -> float:
    started = time.perf_counter()
    func(sample)
    if top_k:
        func.top_k(sample, k=min(10, len(sample)))
    return time.perf_counter() - started
