"""Tables travel in a pickle (``pickle`` and cloudpickle): a RedisTable holds how to reach its
server and connects on its first request in the new process; a MemoryTable holds its rows. The
answers are checked in a new Python process, against a real redis-server."""

import functools
import os
import pickle
import socket
import subprocess
import sys

import cloudpickle
import numpy as np
import pandas as pd
import pytest
import redis
from sklearn.linear_model import LogisticRegression

import willump
from answers import CountedConnection, CountedUnixConnection

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

PICKLERS = {"pickle": pickle.dumps, "cloudpickle": cloudpickle.dumps}

USERS = pd.DataFrame({
    "userId": [10, 11, 12, 13, 14],
    "age": np.array([31, 45, 22, 60, 19], dtype=np.int64),
    "score": [0.5, np.nan, -1.25, 1e300, 1 / 3],
    "ratio": np.array([0.1, 0.2, 0.3, 0.4, 0.5], dtype=np.float32),
    "active": [True, False, True, False, True],
    "city": ["Zürich", "東京", "", "🙂", None],
})
FEATURES = ["age", "score", "ratio"]


def _predict(df, users, model):
    """A pipeline defined in this module (pickled by reference); the table and model are arguments,
    so that a pickle of ``functools.partial(predict, users=..., model=...)`` carries them."""
    u = users.lookup(df["userId"])
    X = np.hstack([u.to_numpy(dtype=float)])
    return model.predict_proba(np.nan_to_num(X))[:, 1]


predict = willump.optimize(_predict, cache_size=100)

# Run in the new process: load (what, calls) from argv[1], make each call, and write the answers
# (or the errors' types and messages) and ``eval(argv[3])`` of the loaded object to argv[2].
_LOAD_AND_CALL = """
import pickle, sys
import willump
assert willump.__file__ == sys.argv[4], (willump.__file__, sys.argv[4])
with open(sys.argv[1], "rb") as file:
    what, calls = pickle.load(file)
answers = []
for name, args in calls:
    try:
        answers.append(getattr(what, name)(*args))
    except Exception as error:
        answers.append((type(error).__name__, str(error)))
with open(sys.argv[2], "wb") as file:
    pickle.dump((answers, eval(sys.argv[3])), file)
"""


def in_a_new_process(payload: bytes, tmp_path, after: str = "None"):
    """(the answers, ``after`` evaluated on the loaded object) that a new Python process gives for
    ``payload``, a pickle of (object, [(method name, arguments)]); it imports the same willump."""
    given, answered = tmp_path / "given.pickle", tmp_path / "answered.pickle"
    given.write_bytes(payload)
    search = [os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]  # (this module: its functions)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(entry for entry in search if entry)}
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_AND_CALL, str(given), str(answered), after, willump.__file__],
        env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with open(answered, "rb") as file:
        return pickle.load(file)


def here(what, calls: list) -> list:
    return [getattr(what, name)(*args) for name, args in calls]


def assert_same_answers(got: list, want: list) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert type(a) is type(b)
        if isinstance(b, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b, check_exact=True)
            assert [a[c].dtype for c in a] == [b[c].dtype for c in b]
        elif isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
        else:
            assert a == b


LOOKUPS = [
    ("lookup", ([12, 99, 10, 12],)),
    ("lookup", (pd.Series([13, 14], index=[7, 3]),)),
    ("lookup", ([99],)),
    ("lookup", ([],)),
    ("lookup", ([10.0, "10", None, np.nan, True],)),
    ("float_rows", (["i:13", "i:10", "i:99"], ["score", "age"])),
    ("column_keys", (["i:12", "i:99"], "age")),
]


@pytest.fixture
def db3(redis_server):
    """A client of the test server's database 3, emptied: a pickled table must name its database."""
    host, port = redis_server
    client = redis.Redis(host=host, port=port, db=3, socket_timeout=2)
    client.flushdb()
    yield client
    client.close()


@pytest.mark.parametrize("pickler", PICKLERS)
def test_a_redis_table_answers_alike_in_a_new_process(db3, tmp_path, pickler):
    db3.set("users:i:11", b"in database 3 only")  # (overwritten by the put: the rows are in db 3)
    table = willump.RedisTable(db3, "users", key="userId", columns=["score", "age", "city"], timeout=0.7)
    table.put(USERS)
    want = here(table, LOOKUPS)  # (used first: its client, schema and missing row exist when pickled)
    answers, (round_trips, remote_keys, address, columns) = in_a_new_process(
        PICKLERS[pickler]((table, LOOKUPS)), tmp_path,
        "(what.round_trips, what.remote_keys, what.address, what.columns)",
    )
    assert_same_answers(answers, want)
    assert address == table.address and columns == ["score", "age", "city"]
    # the schema read once more (not carried), then one MGET per lookup with keys
    assert round_trips == 1 + sum(1 for name, args in LOOKUPS if len(args[0])) and remote_keys > 0


@pytest.mark.parametrize("pickler", PICKLERS)
def test_a_memory_table_answers_alike_in_a_new_process_and_takes_puts(tmp_path, pickler):
    table = willump.MemoryTable(USERS, key="userId", name="users")
    want = here(table, LOOKUPS)  # (its column arrays are built: the loaded table builds its own)
    changed = USERS.iloc[[1, 4]].assign(score=[7.0, 8.0])
    calls = [*LOOKUPS, ("put", (changed,)), *LOOKUPS]
    answers, (name, key, columns, version) = in_a_new_process(
        PICKLERS[pickler]((table, calls)), tmp_path, "(what.name, what.key, what.columns, what.version)"
    )
    table.put(changed)
    want += [None] + here(table, LOOKUPS)
    assert_same_answers(answers, want)
    assert (name, key, columns, version) == ("users", "userId", list(USERS.columns[1:]), 1)


def make_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    return LogisticRegression().fit(X, (X[:, 0] + X[:, 1] > 0).astype(int))


@pytest.mark.parametrize("pickler", PICKLERS)
@pytest.mark.parametrize("kind", ["redis", "memory"])
def test_a_decorated_function_holding_a_table_answers_alike_in_a_new_process(redis_client, tmp_path, pickler, kind):
    """The function is defined in this module and pickled by reference (the pickle of a function
    pickled by value, with cloudpickle, holding its table as a global, is the lead's part: it needs
    ``OptimizedFunction`` to carry its source); the table and model travel in a ``partial``."""
    if kind == "redis":
        users = willump.RedisTable(redis_client, "users", key="userId", columns=FEATURES)
        users.put(USERS)
    else:
        users = willump.MemoryTable(USERS, key="userId", columns=FEATURES)
    model = make_model()
    held = functools.partial(predict, users=users, model=model)
    batches = [pd.DataFrame({"userId": keys}) for keys in ([12, 99, 10, 12], [12], [99], [14, 13, 10, 11])]
    calls = [("__call__", (df,)) for df in batches]
    want = here(held, calls)
    assert_same_answers(want, [_predict(df, users, model) for df in batches])
    predict.reset_stats()  # (the counters travel with the function)
    answers, stats = in_a_new_process(PICKLERS[pickler]((held, calls)), tmp_path, "what.func.stats")
    assert_same_answers(answers, want)
    assert stats["rows_seen"] == sum(map(len, batches))
    if kind == "redis":  # read from Redis by the loaded table, each key once (the caches start empty)
        assert stats["remote_keys"] == len({12, 99, 10, 14, 13, 11})


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens here once closed


@pytest.mark.parametrize("pickler", PICKLERS)
@pytest.mark.parametrize("where", ["tcp", "unix"])
def test_a_table_loaded_while_its_server_is_down_fails_on_first_use(tmp_path, pickler, where):
    if where == "tcp":
        port = _free_port()
        connection, settings, address = CountedConnection, {"host": "127.0.0.1", "port": port}, f"127.0.0.1:{port}"
    else:
        path = tmp_path / "no-server.sock"
        connection, settings, address = CountedUnixConnection, {"path": str(path)}, f"unix:{path}"
    client = redis.Redis(connection_pool=redis.ConnectionPool(connection_class=connection, **settings))
    table = willump.RedisTable(client, "users", key="userId", timeout=0.5)
    loaded = pickle.loads(PICKLERS[pickler](table))  # (no request: nothing to reach yet)
    assert repr(loaded) == repr(table) == f"RedisTable('users', key='userId', at {address})"
    connection.attempts = 0
    with pytest.raises(willump.RemoteLookupError, match=f"'users'.*{address}"):
        loaded.lookup([1])
    assert connection.attempts == 2  # the request and the table's one retry, none of redis-py's own


def test_a_pickled_table_keeps_its_clients_connection_class_and_settings():
    client = redis.Redis(host="example.invalid", port=6380, db=2, username="u", password="p", ssl=True,
                         ssl_cert_reqs="none", socket_keepalive=False)
    table = willump.RedisTable(client, "users", key="userId", timeout=0.25)
    for dumps in PICKLERS.values():
        pool = pickle.loads(dumps(table)).client.connection_pool
        assert pool.connection_class is redis.SSLConnection
        settings = pool.connection_kwargs
        assert (settings["host"], settings["port"], settings["db"], settings["username"], settings["password"]) == (
            "example.invalid", 6380, 2, "u", "p")
        assert settings["ssl_cert_reqs"] == "none" and settings["socket_keepalive"] is False
        assert settings["socket_timeout"] == settings["socket_connect_timeout"] == 0.25
