"""Faults during a Dask job, on a real cluster: a worker killed mid-job (SIGKILL; its nanny starts
another) leaves a job that finishes with every row scored once and the undecorated answers; a
Redis server that is down fails the job's tasks with ``willump.RemoteLookupError``, which the
client receives as such, and the same function answers again once the server is back."""

import os
import pickle
import signal
import time

import distributed
import pytest
import redis

import willump
from dask_jobs import (IDIOMS, USERS, as_series, assert_same_scores, make_frame, make_model, make_predict,
                       one_process, scores)

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

LET_THROUGH = 4  # partitions that pass the gate before the test opens it


def gated(part, gate: str):
    """``part``, once the gate lets it through: the first ``LET_THROUGH`` tasks to reach it pass
    at once (each claims a slot file), the others wait for the gate's file ``open``."""
    for slot in range(LET_THROUGH):
        try:
            os.close(os.open(os.path.join(gate, f"slot-{slot}"), os.O_CREAT | os.O_EXCL))
            return part
        except FileExistsError:
            continue
    distributed.secede()  # (its thread runs other tasks meanwhile: the scores of partitions let through)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(gate, "open")):
        if time.monotonic() > deadline:
            raise TimeoutError("the test never opened the gate")
        time.sleep(0.01)
    distributed.rejoin()
    return part


@pytest.fixture
def own_client():
    """A client of a cluster of this test's own (2 worker processes of one thread, each run by a
    nanny that starts it again when it dies)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client


def wait_until(condition, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.01)


@pytest.mark.parametrize("idiom", IDIOMS)
def test_a_worker_killed_mid_job_leaves_every_row_scored_once(own_client, redis_client, tmp_path, idiom):
    """Four partitions are done and the others wait at a gate when the worker holding the most
    done partitions is killed: Dask computes again what it held and ran, on the other worker and
    on the one its nanny starts, and the job's answers are the undecorated function's, one per
    row in the input's order."""
    users = willump.RedisTable(redis_client, "users_killed", key="userId")
    users.put(USERS)
    predict = make_predict(users, make_model(), cache_size=1_000)
    df, ddf = make_frame(seed=5)
    want = one_process(predict, ddf)
    gate = tmp_path / "gate"
    gate.mkdir()
    job = own_client.persist(scores(idiom, ddf.map_partitions(gated, str(gate), meta=ddf._meta), predict))
    futures = distributed.futures_of(job)
    done = lambda: [future for future in futures if future.status == "finished"]  # noqa: E731
    wait_until(lambda: len(done()) == LET_THROUGH, "the partitions let through")  # (the others wait)
    held = own_client.who_has(done())
    pids = own_client.run(os.getpid)
    victim = max(pids, key=lambda worker: sum(worker in where for where in held.values()))
    assert any(victim in where for where in held.values())  # (it holds finished partitions, to lose)
    os.kill(pids[victim], signal.SIGKILL)
    wait_until(lambda: victim not in own_client.scheduler_info()["workers"], "the scheduler to lose the worker")
    (gate / "open").touch()
    got = as_series(job.compute(), df)
    assert got.index.equals(df.index)  # (every row once, in order)
    assert_same_scores(got, want)


def test_redis_down_fails_the_tasks_with_remote_lookup_error_and_a_retry_once_it_is_back(dask_client, own_redis_server):
    """A first job connects each worker's table and fills its caches; with the server stopped,
    jobs on other keys fail in their tasks with RemoteLookupError naming the table and the
    server, which reaches the client as such and pickles; once the server is back with the rows,
    jobs on these keys answer as the undecorated function (the function each worker keeps holds
    nothing from the failure)."""
    server = own_redis_server
    client = redis.Redis(host=server.host, port=server.port, socket_timeout=2)
    users = willump.RedisTable(client, "users_down", key="userId", timeout=0.5)
    users.put(USERS)
    predict = make_predict(users, make_model(), cache_size=1_000)
    for idiom in IDIOMS:
        df, ddf = make_frame(seed=6)
        assert_same_scores(as_series(scores(idiom, ddf, predict).compute(), df), one_process(predict, ddf))
    server.stop()
    df, ddf = make_frame(seed=7, ids=range(300, 600))  # (keys the workers' caches do not hold)
    jobs = [dask_client.persist(scores(idiom, ddf, predict)) for idiom in IDIOMS]
    distributed.wait(jobs)
    for job in jobs:
        assert {future.status for future in distributed.futures_of(job)} == {"error"}  # (the tasks failed)
        with pytest.raises(willump.RemoteLookupError,
                           match=f"RedisTable 'users_down': cannot reach Redis at 127.0.0.1:{server.port}") as caught:
            job.compute()
        copy = pickle.loads(pickle.dumps(caught.value))
        assert type(copy) is willump.RemoteLookupError and copy.args == caught.value.args
    server.start()
    users.put(USERS)
    df, ddf = make_frame(seed=9, ids=range(300, 600))  # (another frame: the scheduler keeps the failed
    # tasks' errors while a future of theirs lives, and the exceptions' tracebacks hold some)
    want = one_process(predict, ddf)
    for idiom in IDIOMS:
        assert_same_scores(as_series(scores(idiom, ddf, predict).compute(), df), want)


def test_a_frozen_redis_fails_the_tasks_with_remote_lookup_error(dask_client, redis_client, stopped_redis):
    """A server that answers nothing (stopped: its connections stay open) is slower than the
    table's timeout: the tasks fail with RemoteLookupError, which the client receives."""
    users = willump.RedisTable(redis_client, "users_frozen", key="userId", timeout=0.3)
    users.put(USERS)
    predict = make_predict(users, make_model())
    df, ddf = make_frame(seed=8)
    with stopped_redis():
        job = dask_client.compute(scores("willump.dask.predict", ddf, predict))
        with pytest.raises(willump.RemoteLookupError, match="'users_frozen': Redis at .* did not answer within"):
            job.result()
    assert job.status == "error"
    df, ddf = make_frame(seed=9)  # (a job of the same keys would get the error back while `job` lives)
    assert_same_scores(as_series(scores("willump.dask.predict", ddf, predict).compute(), df),
                       one_process(predict, ddf))
