"""Feature-level caching of remote table rows, prediction caching, concurrent remote lookups
and their counters, against a real redis-server: the answers are always the undecorated ones."""

import threading

import numpy as np
import pandas as pd
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression

import willump
from willump.runtime.caches import MISSING, LRUCache
from answers import CountedConnection, in_threads

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

USERS = pd.DataFrame({
    "userId": np.arange(40),
    "age": np.arange(40, dtype=np.int64) % 50 + 18,  # int: float64 once a key of the batch is missing
    "score": np.linspace(-1, 1, 40),
})
SONGS = pd.DataFrame({
    "songId": [f"s{i}" for i in range(30)],
    "length": np.linspace(100, 400, 30),
    "plays": np.arange(30, dtype=np.int32),
})


def make_pipeline(users, songs):
    """The issue's example: two lookups, their values side by side, a linear model."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    model = LogisticRegression().fit(X, (X[:, 0] + X[:, 3] > 0).astype(int))

    def predict(df):
        u = users.lookup(df["userId"])
        s = songs.lookup(df["songId"])
        X = np.nan_to_num(np.hstack([u.to_numpy(dtype=float), s.to_numpy()]))
        return model.predict_proba(X)[:, 1]

    return predict


@pytest.fixture
def remote_tables(redis_client):
    users = willump.RedisTable(redis_client, "users", key="userId")
    songs = willump.RedisTable(redis_client, "songs", key="songId")
    users.put(USERS)
    songs.put(SONGS)
    return users, songs


def inputs(user_ids, song_ids, index=None) -> pd.DataFrame:
    return pd.DataFrame({"userId": user_ids, "songId": song_ids}, index=index)


def assert_same(actual, expected):
    assert type(actual) is type(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert np.array_equal(actual, expected), (actual, expected)


# keys: known, unknown, of the wrong type, NaN and None; for both tables
USER_KEYS = st.one_of(st.integers(0, 45), st.sampled_from([np.nan, "7", 3.0, 3.5, None, True]))
SONG_KEYS = st.one_of(st.sampled_from([f"s{i}" for i in range(34)]), st.sampled_from([np.nan, 5, None, "", "S1"]))


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(calls=st.lists(st.lists(st.tuples(USER_KEYS, SONG_KEYS), min_size=1, max_size=5), min_size=1, max_size=6),
       kind=st.sampled_from(["features", "prediction"]), size=st.integers(1, 8))
def test_cached_answers_are_the_undecorated_ones(remote_tables, calls, kind, size):
    predict = make_pipeline(*remote_tables)
    optimized = willump.optimize(predict, cache_size=size, cache=kind)
    for rows in calls:
        users, songs = zip(*rows)
        df = inputs(pd.Series(users, dtype=object), pd.Series(songs, dtype=object), index=np.arange(len(rows)) * 3 + 1)
        assert_same(optimized(df), predict(df))
        typed = inputs([u for u in users if isinstance(u, int) and not isinstance(u, bool)], None)
        if len(typed):  # int keys in an int column, the usual case
            typed["songId"] = [s for s, u in zip(songs, users) if isinstance(u, int) and not isinstance(u, bool)]
            assert_same(optimized(typed), predict(typed))


def test_feature_caching_fetches_each_key_once(remote_tables):
    predict = make_pipeline(*remote_tables)
    optimized = willump.optimize(predict, cache_size=100)
    first = inputs([1, 2, 2, 99], ["s1", "s1", "s2", "nope"])
    assert_same(optimized(first), predict(first))
    stats = optimized.stats
    # distinct keys per lookup: users 1, 2, 99; songs s1, s2, nope (unknown keys are cached as absent)
    assert stats["remote_keys"] == 6 and stats["remote_round_trips"] == 4  # (2 of them read the schemas)
    assert stats["cache_misses"] == 6 and stats["cache_hits"] == 0
    for i in range(4):  # the same users with other songs, one row at a time
        row = first.iloc[[i]]
        assert_same(optimized(row), predict(row))
    stats = optimized.stats
    assert stats["remote_keys"] == 6 and stats["remote_round_trips"] == 4
    assert stats["feature_row_hits"] == 4  # the users' IFV keeps its rows: its table is not read again
    assert stats["cache_hits"] == 4  # the songs' table rows
    assert optimized.explain_caching()["remote"].tolist() == [True, True]


def test_least_recently_used_rows_are_evicted(remote_tables):
    predict = make_pipeline(*remote_tables)
    optimized = willump.optimize(predict, cache_size=2)

    def fetched_for(user, song):
        before = optimized.stats["remote_keys"]
        df = inputs([user], [song])
        assert_same(optimized(df), predict(df))
        return optimized.stats["remote_keys"] - before

    # The songs' IFV (``s.to_numpy()``) reads its table's rows, cached by song:
    # s2 is evicted by s3, being the least recently used of the two held.
    assert [fetched_for(1, s) for s in ["s1", "s2", "s1", "s3", "s1", "s2"]] == [2, 1, 0, 1, 0, 1]
    # The users' IFV keeps its own rows, by user: 2 is evicted by 3, so 2 is computed again,
    # from the users' table rows, where 2 is still held (the table was not read for user 1,
    # whose rows the IFV had, so 1 was the least recently used row there).
    optimized.clear_cache()
    optimized.reset_stats()
    assert [fetched_for(u, "s1") for u in [1, 2, 1, 3, 1, 2]] == [2, 1, 0, 1, 0, 0]
    assert optimized.stats["feature_row_misses"] == 4 and optimized.stats["feature_row_hits"] == 2


def test_lru_cache_keeps_the_most_recent_entries():
    cache = LRUCache(3)
    cache.put_many([("a", 1), ("b", 2), ("c", 3)])
    assert cache.get_many(["a"]) == [1]
    cache.put_many([("d", 4)])
    assert cache.get_many(["a", "b", "c", "d"]) == [1, MISSING, 3, 4]
    assert len(cache) == 3
    cache.clear()
    assert cache.get_many(["a"]) == [MISSING]


def test_clear_cache_and_put_start_again(remote_tables, redis_client):
    users, songs = remote_tables
    predict = make_pipeline(users, songs)
    optimized = willump.optimize(predict, cache_size=10)
    df = inputs([1, 2], ["s1", "s2"])
    optimized(df)
    optimized.clear_cache()
    optimized(df)
    assert optimized.stats["remote_keys"] == 8
    changed = USERS.assign(score=USERS["score"] + 1)
    users.put(changed)  # a put through the table: its cached rows are not served again
    assert_same(optimized(df), predict(df))
    assert optimized.stats["remote_keys"] == 10


def test_a_put_through_another_table_object_of_the_name_starts_the_caches_again(remote_tables, redis_server):
    """Both cache levels: the users' IFV rows and the users' table rows; the songs' are kept."""
    users, songs = remote_tables
    predict = make_pipeline(users, songs)
    optimized = willump.optimize(predict, cache_size=10)
    df = inputs([1, 2], ["s1", "s2"])
    before = optimized(df)
    assert_same(before, predict(df))
    host, port = redis_server
    other = willump.RedisTable(redis.Redis(host=host, port=port), "users", key="userId")
    assert_same(optimized(df), before)
    fetched = optimized.stats["remote_keys"]
    other.put(USERS.assign(age=-100 * USERS["age"]))
    after = optimized(df)
    assert_same(after, predict(df))
    assert not np.array_equal(after, before)
    assert optimized.stats["remote_keys"] == fetched + 2  # users 1 and 2, not the songs


@pytest.mark.parametrize("kind", ["memory", "redis"])
@pytest.mark.parametrize("cache_size", [None, 10])
def test_rows_seen_counts_every_call_before_fit(redis_client, kind, cache_size):
    """Each path a call may take before fit (the function's statements, the IFV caches, remote
    IFVs side by side; positional or keyword arguments) counts its rows, all for the full model."""
    tables = [willump.MemoryTable(USERS, key="userId"), willump.MemoryTable(SONGS, key="songId")]
    if kind == "redis":
        tables = [willump.RedisTable(redis_client, "users", key="userId"),
                  willump.RedisTable(redis_client, "songs", key="songId")]
        tables[0].put(USERS), tables[1].put(SONGS)
    optimized = willump.optimize(make_pipeline(*tables), cache_size=cache_size)
    df = inputs([1, 2, 3], ["s1", "s2", "s3"])
    optimized(df), optimized(df.iloc[[0]]), optimized(df=df)
    stats = optimized.stats
    assert stats["rows_seen"] == stats["rows_full_model"] == 7 and stats["rows_small_model"] == 0


def test_rows_seen_counts_the_calls_of_a_function_run_unmodified():
    def unmodified(df, scale=2):
        return df["userId"].to_numpy() * scale  # (no model call: the function runs as written)

    optimized = willump.optimize(unmodified)
    assert optimized.executor is None
    df = inputs([1, 2, 3], ["s1", "s2", "s3"])
    optimized(df), optimized(df=df.iloc[:2]), optimized(scale=3, df=df.iloc[:1])
    assert optimized.stats["rows_seen"] == optimized.stats["rows_full_model"] == 6


def test_without_cache_every_call_fetches(remote_tables):
    predict = make_pipeline(*remote_tables)
    optimized = willump.optimize(predict)
    df = inputs([1, 1], ["s1", "s1"])
    for _ in range(3):
        assert_same(optimized(df), predict(df))
    stats = optimized.stats
    assert stats["remote_keys"] == 6 and stats["remote_round_trips"] == 8  # one key per table per call, 2 schemas
    assert stats["cache_hits"] == stats["cache_misses"] == 0
    optimized.reset_stats()
    assert optimized.stats["remote_keys"] == 0


def test_prediction_cache_is_keyed_by_the_whole_batch(remote_tables):
    """A result is reused for the same batch only (a row's floats depend on the batch it is
    computed in); a single-row call's is its row's."""
    predict = make_pipeline(*remote_tables)
    optimized = willump.optimize(predict, cache_size=100, cache="prediction")
    df = inputs([1, 1, 2], ["s1", "s2", "s1"])
    assert_same(optimized(df), predict(df))
    assert optimized.stats["remote_keys"] == 4
    again = inputs([1, 2, 2], ["s2", "s1", "s2"])  # two rows seen, one new: computed as a whole
    assert_same(optimized(again), predict(again))
    assert optimized.stats["cache_hits"] == 0 and optimized.stats["cache_misses"] == 6
    assert optimized.stats["remote_keys"] == 8
    for batch in (again, inputs([1], ["s2"]), inputs([1], ["s2"]), again):
        result = optimized(batch)
        assert_same(result, predict(batch))
        result[:] = -1  # (a copy: the cached result stays)
    stats = optimized.stats
    assert stats["cache_hits"] == 3 + 1 + 3 and stats["cache_misses"] == 6 + 1
    assert stats["remote_keys"] == 10  # the single row's user and song, once


class _MeetingTable(willump.RedisTable):
    """A real RedisTable whose lookups wait for each other: they finish only if they run at once."""

    barrier = None

    def _fetch(self, wanted):
        self.barrier.wait(timeout=5)
        return super()._fetch(wanted)


def test_remote_lookups_of_different_ifvs_run_at_the_same_time(redis_client):
    users = _MeetingTable(redis_client, "users", key="userId")
    songs = _MeetingTable(redis_client, "songs", key="songId")
    users.put(USERS)
    songs.put(SONGS)
    predict = make_pipeline(users, songs)
    optimized = willump.optimize(predict)
    df = inputs([1, 2, 50], ["s1", "x", "s3"])
    _MeetingTable.barrier = threading.Barrier(2)
    result = optimized(df)  # sequential lookups would leave the first waiting alone: BrokenBarrierError
    _MeetingTable.barrier = threading.Barrier(1)
    assert_same(result, predict(df))
    assert optimized.stats["remote_round_trips"] == 4  # (2 of them read the schemas)


def test_calls_from_many_threads_share_the_cache(remote_tables):
    predict = make_pipeline(*remote_tables)
    optimized = willump.optimize(predict, cache_size=16)
    rng = np.random.default_rng(1)
    frames = [inputs(rng.integers(0, 45, 3), [f"s{i}" for i in rng.integers(0, 34, 3)]) for _ in range(60)]
    expected = [predict(f) for f in frames]
    failures = []

    def work(part):
        for f, e in zip(frames[part::4], expected[part::4]):
            try:
                assert_same(optimized(f), e)
            except Exception as error:  # noqa: BLE001 - reported below
                failures.append(error)

    in_threads(work, range(4))
    assert not failures
    stats = optimized.stats
    assert stats["cache_hits"] + stats["cache_misses"] > 0 and stats["remote_keys"] == stats["cache_misses"]


def test_a_slow_redis_is_an_error_and_the_cache_stays_correct(redis_server, redis_client, stopped_redis):
    host, port = redis_server
    client = redis.Redis(connection_pool=redis.ConnectionPool(connection_class=CountedConnection, host=host, port=port))
    CountedConnection.timeouts = ()
    users = willump.RedisTable(client, "users", key="userId", timeout=0.3)
    songs = willump.RedisTable(client, "songs", key="songId", timeout=0.3)
    users.put(USERS)
    songs.put(SONGS)
    predict = make_pipeline(users, songs)
    optimized = willump.optimize(predict, cache_size=10)
    known = inputs([1], ["s1"])
    expected = predict(known)
    assert_same(optimized(known), expected)
    with stopped_redis():  # (it answers nothing until the block ends: waiting for it never succeeds)
        with pytest.raises(willump.RemoteLookupError, match="did not answer within the timeout"):
            optimized(inputs([2], ["s2"]))
        assert_same(optimized(known), expected)  # from the cache, while Redis answers nothing
    assert set(CountedConnection.timeouts) == {0.3}  # each request waited the tables' timeout at most
    df = inputs([2, 1], ["s2", "s1"])
    assert_same(optimized(df), predict(df))


def test_cascades_fetch_nothing_for_rows_the_small_model_answers(redis_client):
    rng = np.random.default_rng(0)
    n = 3000
    songs = willump.RedisTable(redis_client, "songs", key="songId")
    song_table = pd.DataFrame({"songId": np.arange(500), "a": rng.normal(size=500), "b": rng.normal(size=500)})
    songs.put(song_table)
    df = pd.DataFrame({"x": rng.normal(size=n), "songId": rng.integers(0, 500, n)})
    looked_up = song_table.set_index("songId").loc[df["songId"]].to_numpy()
    y = (3 * df["x"].to_numpy() + 0.3 * looked_up[:, 0] > 0).astype(int)
    model = LogisticRegression().fit(np.column_stack([df[["x"]].to_numpy(), looked_up]), y)

    def predict(df):
        cheap = df[["x"]].to_numpy()
        s = songs.lookup(df["songId"])
        return model.predict(np.hstack([cheap, s.to_numpy(dtype=float)]))

    optimized = willump.optimize(predict, cache_size=10)
    optimized.fit(df.iloc[:2000], y=y[:2000], costs={"cheap": 1e-8, "s": 1e-5}, check_speed=False, progress=False)
    assert optimized.explain().attrs["summary"]["cascades"] == "on"
    optimized.reset_stats()
    test = df.iloc[2000:]
    result = optimized(test)
    stats = optimized.stats
    assert stats["rows_small_model"] > 0
    assert stats["remote_keys"] <= stats["rows_full_model"] < len(test)
    assert (result == predict(test)).mean() > 0.97


@pytest.mark.parametrize("options, message", [
    ({"cache_size": 0}, "cache_size must be a positive number"),
    ({"cache_size": 2.5}, "cache_size must be a positive number"),
    ({"cache_size": True}, "cache_size must be a positive number"),
    ({"cache_size": 5, "cache": "rows"}, 'cache must be "features"'),
    ({"cache": "prediction"}, "needs cache_size"),
])
def test_bad_cache_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        willump.optimize(make_pipeline(None, None), **options)
