"""Feature tables on a Dask cluster (a real ``LocalCluster``: 2 worker processes): a function
reading a ``RedisTable`` answers on every worker, each worker's table connecting to the same
server; a function reading a ``MemoryTable`` is built once per worker process, its table
unpickled once there however many tasks read it; ``willump.dask.stats`` sums the workers' counts.
The answers are the undecorated function's, partition by partition, in this process."""

import pickle

import numpy as np
import pandas as pd
import pytest
from distributed import futures_of

import willump
import willump.dask
from dask_jobs import (IDIOMS, USERS as ALL_USERS, assert_same_scores, make_frame, make_model, make_predict,
                       one_process, partitions, scored)
from willump.persistence import shared

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")
USERS = ALL_USERS[:300]  # (the frames' user ids 300 and up are not in the table)


class CountedMemoryTable(willump.MemoryTable):
    """A MemoryTable that counts, per process, how many times a pickle of it was loaded."""

    loads = 0

    def __setstate__(self, state):
        super().__setstate__(state)
        type(self).loads += 1


def table_loads() -> int:
    return CountedMemoryTable.loads


def on_each_worker(client, run, *args) -> dict:
    """{worker address: ``run(*args)`` there}, from exactly the cluster's two workers."""
    found = client.run(run, *args)
    assert len(found) == 2
    return found


# counts that do not depend on the order of a worker's tasks (a row missed by the IFV caches
# counts in the first partition holding its key, which depends on it)
FIELDS_OF_ANY_ORDER = ("rows_seen", "rows_full_model", "remote_keys", "cache_hits", "cache_misses")


def worker_stats(identity: str) -> dict:
    found = shared(identity)
    return dict(found.stats) if found is not None else {}


def workers_of(client, persisted) -> list:
    """The address of the worker that computed each partition of ``persisted`` (where it is held)."""
    futures = sorted(futures_of(persisted), key=lambda future: future.key[1])  # (keys: (name, partition))
    assert [future.key[1] for future in futures] == list(range(persisted.npartitions))
    held = client.who_has(futures)
    assert all(len(held[future.key]) == 1 for future in futures)
    return [held[future.key][0] for future in futures]


@pytest.mark.parametrize("idiom", IDIOMS)
def test_a_redis_table_answers_on_every_worker(dask_client, redis_client, idiom):
    """Each worker's copy of the table connects to the test's server (it fetches keys there) and
    the answers are the undecorated function's, to the bit."""
    users = willump.RedisTable(redis_client, f"users_{idiom.replace('.', '_')}", key="userId")
    users.put(USERS)
    predict = make_predict(users, make_model(), cache_size=1_000)
    df, ddf = make_frame()
    assert_same_scores(scored(idiom, ddf, df, predict), one_process(predict, ddf))
    per_worker = on_each_worker(dask_client, worker_stats, predict._shipped()[0])
    assert sum(stats["rows_seen"] for stats in per_worker.values()) == len(df)
    for stats in per_worker.values():  # (both workers ran tasks and reached Redis)
        assert stats["rows_seen"] > 0 and stats["remote_keys"] > 0 and stats["remote_round_trips"] > 0


def test_stats_sum_the_remote_keys_and_cache_hits_of_the_workers(dask_client, redis_client):
    """Each worker fetches a key from Redis once for all its tasks (its caches live as long as
    the process's function); ``stats`` sums the workers. The expected counts come from calling a
    fresh copy of the function, in this process, on the partitions each worker ran."""
    users = willump.RedisTable(redis_client, "users_stats", key="userId")
    users.put(USERS)
    predict = make_predict(users, make_model(), cache_size=1_000)
    df, ddf = make_frame(seed=2)
    willump.dask.reset_stats(predict)
    persisted = willump.dask.predict(ddf, predict).persist()
    assert_same_scores(persisted.compute(), one_process(predict, ddf))
    ran = workers_of(dask_client, persisted)
    assert len(set(ran)) == 2  # (both workers ran partitions)
    parts = partitions(ddf)
    want = dict.fromkeys(FIELDS_OF_ANY_ORDER, 0)
    distinct = 0  # (the user ids each worker saw, summed)
    for worker in set(ran):
        fresh = pickle.loads(pickle.dumps(predict))  # (not a worker: a copy of its own, caches empty)
        fresh.reset_stats()
        seen = [part for part, where in zip(parts, ran) if where == worker]
        for part in seen:
            fresh(part)
        for field in want:
            want[field] += fresh.stats[field]
        distinct += pd.concat(seen)["userId"].nunique()
    got = willump.dask.stats(predict)
    assert {field: got[field] for field in want} == want
    assert got["remote_keys"] == distinct and got["rows_seen"] == len(df)
    assert got["remote_keys"] < len(df)  # (the caches saved fetches)


@pytest.mark.parametrize("idiom", IDIOMS)
def test_a_memory_table_is_unpickled_once_per_worker(dask_client, idiom):
    """However many tasks of a job a worker runs, it loads the function, and so the table, once:
    the count of loads of the table in each worker process grows by one (by the number of tasks
    it ran, were every task to load its own)."""
    users = CountedMemoryTable(USERS, key="userId", name=f"users_{idiom.replace('.', '_')}")
    predict = make_predict(users, make_model())
    df, ddf = make_frame(seed=3)
    before = on_each_worker(dask_client, table_loads)
    assert_same_scores(scored(idiom, ddf, df, predict), one_process(predict, ddf))
    after = on_each_worker(dask_client, table_loads)
    per_worker = on_each_worker(dask_client, worker_stats, predict._shipped()[0])
    for worker, stats in per_worker.items():
        assert stats["rows_seen"] > 0  # (the worker ran tasks: it loaded the table once)
        assert after[worker] - before[worker] == 1
    assert sum(stats["rows_seen"] for stats in per_worker.values()) == len(df)


@pytest.mark.parametrize("idiom", IDIOMS)
def test_a_job_reads_the_table_and_model_as_they_are_when_it_starts(dask_client, idiom):
    """Rows put to the MemoryTable after a first job (the function already built on the workers),
    then the model refitted in place: each next job answers as the function does in this process
    then, as does a pickle of it."""
    users = willump.MemoryTable(USERS, key="userId", name=f"users_{idiom.replace('.', '_')}")
    model = make_model()
    predict = make_predict(users, model)
    df, ddf = make_frame(seed=4)
    answers = []
    for change in (None, lambda: users.put(USERS.assign(score=-USERS["score"], age=USERS["age"] // 2)),
                   lambda: model.fit(np.eye(4), [0, 1, 0, 1])):
        if change is not None:
            change()
        want = one_process(predict, ddf)
        assert_same_scores(scored(idiom, ddf, df, predict), want)
        copy = pickle.loads(pickle.dumps(predict))
        assert_same_scores(pd.concat([pd.Series(copy(part), index=part.index, name="prediction")
                                      for part in partitions(ddf)]), want)
        answers.append(want)
    assert not answers[1].equals(answers[0]) and not answers[2].equals(answers[1])  # (each change shows)


def test_clear_cache_empties_every_workers_cache(dask_client, redis_client):
    """Rows put to Redis after a job: the workers answer from the rows they cached (each from the
    partitions it ran) until ``willump.dask.clear_cache``, then from the new rows."""
    users = willump.RedisTable(redis_client, "users_cleared", key="userId")
    users.put(USERS)
    predict = make_predict(users, make_model(), cache_size=1_000)
    df, ddf = make_frame(seed=5, ids=range(0, 300))
    before = one_process(predict, ddf)
    assert_same_scores(scored("willump.dask.predict", ddf, df, predict), before)
    users.put(USERS.assign(score=-USERS["score"]))
    after = one_process(predict, ddf)
    assert not after.equals(before)
    stale = scored("willump.dask.predict", ddf, df, predict)  # (rows the workers cached, some of them)
    assert not stale.sort_index().equals(after.sort_index())
    willump.dask.clear_cache(predict)
    assert_same_scores(scored("willump.dask.predict", ddf, df, predict), after)
