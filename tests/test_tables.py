"""Feature tables: MemoryTable and RedisTable (against a real redis-server) answer alike."""

import socket

import numpy as np
import pandas as pd
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import willump
from willump.runtime.tables import canonical_key
from answers import CountedConnection


def users_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "userId": [10, 11, 12, 13],
            "age": np.array([31, 45, 22, 60], dtype=np.int64),
            "score": [0.5, np.nan, -1.25, 1e300],
            "small": np.array([1, -2, 3, 127], dtype=np.int8),
            "count": np.array([1, 2, 3, 65535], dtype=np.uint16),
            "ratio": np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32),
            "active": [True, False, True, False],
            "city": ["Zürich", "東京", "", "🙂 emoji"],
        }
    )


def expected(frame: pd.DataFrame, key: str, keys: list, index=None) -> pd.DataFrame:
    """What pandas gives: the rows reindexed by the keys (NaN rows for missing keys)."""
    result = frame.set_index(key).reindex(pd.Index(keys, dtype=object)).reset_index(drop=True)
    if index is not None:
        result.index = index
    return result


@pytest.fixture
def tables(redis_client):
    frame = users_frame()
    remote = willump.RedisTable(redis_client, "users", key="userId")
    remote.put(frame)
    return frame, willump.MemoryTable(frame, key="userId"), remote


def test_lookup_aligns_with_keys_duplicates_and_missing_keys(tables):
    frame, memory, remote = tables
    keys = pd.Series([12, 99, 10, 12, 13], index=[5, 4, 3, 2, 1])
    want = expected(frame, "userId", keys.tolist(), keys.index)
    for table in (memory, remote):
        got = table.lookup(keys)
        pd.testing.assert_frame_equal(got, want)
        assert got["age"].dtype == np.float64 and got["active"].dtype == object  # pandas' reindex dtypes


def test_one_missing_key_gives_pandas_nan_row_every_time(tables):
    """A single key the table does not hold (the row is built once, then copied): pandas' reindex
    row, call after call, and changing one result does not change the next."""
    frame, memory, remote = tables
    for table in (memory, remote):
        for keys in (pd.Series([99], index=[7]), [98], pd.Series([99], index=[7])):
            index = keys.index if isinstance(keys, pd.Series) else None
            got = table.lookup(keys)
            pd.testing.assert_frame_equal(got, expected(frame, "userId", list(keys), index))
            got.iloc[0, 0] = 1.0
        pd.testing.assert_frame_equal(table.lookup([10]), expected(frame, "userId", [10]))


def test_dtypes_are_kept_when_every_key_is_found(tables):
    frame, memory, remote = tables
    for table in (memory, remote):
        got = table.lookup([13, 10, 11, 12, 10])
        want = frame.drop(columns="userId").iloc[[3, 0, 1, 2, 0]].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)
        assert list(got.dtypes) == list(frame.drop(columns="userId").dtypes)


def test_keys_match_by_value_and_nan_or_other_kinds_match_nothing(tables):
    frame, memory, remote = tables
    keys = [10.0, True, np.int32(11), "10", None, np.nan, 12.5, (10,)]
    rows = [0, None, 1, None, None, None, None, None]  # True == 1 is not a key of the table
    for table in (memory, remote):
        got = table.lookup(keys)
        for i, row in enumerate(rows):
            if row is None:
                assert got.iloc[i].isna().all(), (keys[i], got.iloc[i])
            else:
                assert got.iloc[i]["age"] == frame["age"][row]
    assert canonical_key(1) == canonical_key(1.0) == canonical_key(True) == "i:1"
    assert canonical_key("1") == "s:1" and canonical_key(float("nan")) is None


def test_an_empty_lookup_has_the_table_columns(tables):
    frame, memory, remote = tables
    for table in (memory, remote):
        got = table.lookup(pd.Series([], dtype=np.int64))
        assert list(got.columns) == list(frame.columns.drop("userId")) and len(got) == 0
    pd.testing.assert_frame_equal(memory.lookup([99, None]), remote.lookup([99, None]))


def test_one_round_trip_per_lookup(tables, redis_client):
    frame, _, remote = tables
    remote.lookup([10])  # reads the schema once
    before = redis_client.info("commandstats").get("cmdstat_mget", {}).get("calls", 0)
    trips = remote.round_trips
    remote.lookup(list(range(0, 5000)))
    remote.lookup([11, 12])
    after = redis_client.info("commandstats")["cmdstat_mget"]["calls"]
    assert after - before == 2 and remote.round_trips - trips == 2
    assert remote.remote_keys >= 5002


def test_columns_select_a_subset(redis_client, tables):
    frame, _, _ = tables
    some = willump.RedisTable(redis_client, "users", key="userId", columns=["city", "age"])
    pd.testing.assert_frame_equal(some.lookup([11, 5]), expected(frame, "userId", [11, 5])[["city", "age"]])
    with pytest.raises(ValueError, match="no column"):
        willump.RedisTable(redis_client, "users", key="userId", columns=["nope"]).lookup([1])


def test_put_replaces_and_adds_rows(tables):
    frame, memory, remote = tables
    update = pd.DataFrame({"userId": [11, 14]}).join(frame.drop(columns="userId").iloc[[0, 1]].reset_index(drop=True))
    for table in (memory, remote):
        table.put(update)
        got = table.lookup([11, 14, 10])
        pd.testing.assert_frame_equal(got.iloc[:2].reset_index(drop=True), update.drop(columns="userId"))
        assert got.iloc[2]["age"] == 31


def test_string_keys(redis_client):
    frame = pd.DataFrame({"songId": ["a", "b", "ç"], "plays": [1.0, 2.0, 3.0]})
    remote = willump.RedisTable(redis_client, "songs", key="songId")
    remote.put(frame)
    memory = willump.MemoryTable(frame, key="songId")
    keys = pd.Series(["ç", "x", "a", None])
    pd.testing.assert_frame_equal(remote.lookup(keys), memory.lookup(keys))
    assert remote.lookup(keys)["plays"].tolist()[0] == 3.0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    n_rows=st.integers(0, 12),
)
def test_redis_and_memory_tables_agree(redis_client, data, n_rows):
    redis_client.flushdb()  # (an example hypothesis stops while drawing leaves its rows behind)
    keys = data.draw(st.lists(st.integers(-5, 30), min_size=n_rows, max_size=n_rows, unique=True))
    floats = data.draw(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=n_rows, max_size=n_rows))
    texts = data.draw(st.lists(st.one_of(st.none(), st.text(max_size=8)), min_size=n_rows, max_size=n_rows))
    frame = pd.DataFrame(
        {
            "k": np.array(keys, dtype=np.int64),
            "x": np.array(floats, dtype=np.float64),
            "n": np.arange(n_rows, dtype=np.int64),
            "t": pd.Series([t for t in texts], dtype=object),
        }
    )
    remote = willump.RedisTable(redis_client, "t", key="k")
    remote.put(frame)
    memory = willump.MemoryTable(frame, key="k")
    asked = data.draw(st.lists(st.one_of(st.integers(-6, 31), st.floats(allow_nan=True), st.text(max_size=2)), max_size=15))
    pd.testing.assert_frame_equal(remote.lookup(asked), memory.lookup(asked))


def test_bad_tables_and_keys_are_refused_clearly(redis_client):
    frame = users_frame()
    with pytest.raises(KeyError, match="key column 'id'"):
        willump.MemoryTable(frame, key="id")
    with pytest.raises(ValueError, match="more than once"):
        willump.MemoryTable(pd.concat([frame, frame]), key="userId")
    with pytest.raises(ValueError, match="NaN or None"):
        willump.MemoryTable(pd.DataFrame({"k": [1.0, np.nan], "v": [1, 2]}), key="k")
    with pytest.raises(TypeError, match="dtype"):
        willump.MemoryTable(frame.assign(when=pd.Timestamp("2020-01-01")), key="userId")
    with pytest.raises(TypeError, match="one column of keys"):
        willump.MemoryTable(frame, key="userId").lookup(frame)
    with pytest.raises(ValueError, match="name"):
        willump.RedisTable(redis_client, "a:b", key="userId")
    with pytest.raises(ValueError, match="timeout"):
        willump.RedisTable(redis_client, "a", key="userId", timeout=0)


def test_a_table_never_written_says_so(redis_client):
    table = willump.RedisTable(redis_client, "nothing", key="k")
    with pytest.raises(willump.RemoteLookupError, match="'nothing'.*put"):
        table.lookup([1])


def test_rows_without_their_schema_say_the_schema_is_missing(tables, redis_client):
    redis_client.delete("users:__schema__")
    table = willump.RedisTable(redis_client, "users", key="userId")
    with pytest.raises(willump.RemoteLookupError, match=r"'users'.*holds rows but its schema key "
                       r"'users:__schema__' \(the columns and dtypes\) is missing.*put\(frame\), which writes it"):
        table.lookup([10])


def test_only_the_tables_own_keys_count_as_its_rows(redis_client):
    """A name with glob characters matches itself only; keys of other tables (many: SCAN pages
    through them) are not its rows."""
    redis_client.mset({f"other{i}:i:{i}": b"x" for i in range(2500)})
    redis_client.set("u1:i:1", b"x")  # (what an unescaped "u[1]:*" would match)
    table = willump.RedisTable(redis_client, "u[1]", key="k")
    with pytest.raises(willump.RemoteLookupError, match=r"'u\[1\]'.*holds no rows: write them with put"):
        table.lookup([1])
    redis_client.set("u[1]:i:1", b"x")
    with pytest.raises(willump.RemoteLookupError, match=r"holds rows but its schema key 'u\[1\]:__schema__'"):
        table.lookup([1])


def test_a_put_through_another_object_of_the_name_is_seen(tables, redis_client, redis_server):
    """Both objects of one table (server, database, name) share its version: the schema one read
    before is read again after the other's put (here the column's dtype changed)."""
    frame, _, remote = tables
    remote.lookup([10])  # (its schema is read)
    host, port = redis_server
    other = willump.RedisTable(redis.Redis(host=host, port=port), "users", key="userId")
    version = remote.version
    redis_client.delete("users:__schema__")
    changed = frame.assign(age=frame["age"] * 0.5)  # float64 now, as many bytes as the int64 it was
    other.put(changed)
    assert remote.version == other.version != version
    pd.testing.assert_frame_equal(remote.lookup([10, 13]), expected(changed, "userId", [10, 13]))
    elsewhere = willump.RedisTable(redis.Redis(host=host, port=port, db=1), "users", key="userId")
    renamed = willump.RedisTable(redis_client, "users2", key="userId")
    try:
        elsewhere.put(frame), renamed.put(frame)  # (another database, another name: another table)
        assert remote.version == other.version != elsewhere.version
        assert renamed.version not in (remote.version, elsewhere.version)
    finally:
        elsewhere.client.flushdb()


def test_a_client_that_decodes_responses_gives_the_same_table(tables, redis_server):
    frame, memory, _ = tables
    host, port = redis_server
    table = willump.RedisTable(redis.Redis(host=host, port=port, decode_responses=True), "users", key="userId")
    keys = [12, 99, 10, 13]
    pd.testing.assert_frame_equal(table.lookup(keys), memory.lookup(keys))
    table.put(frame.iloc[[0]])
    pd.testing.assert_frame_equal(table.lookup(keys), memory.lookup(keys))


def test_an_undecodable_value_names_table_and_key(tables, redis_client):
    _, _, remote = tables
    redis_client.set("users:i:12", b"\x00garbage")
    with pytest.raises(willump.RemoteLookupError, match=r"'users'.*key '12'.*cannot be decoded"):
        remote.lookup([10, 12])


def test_redis_down_is_an_error_after_two_attempts():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once closed
    client = redis.Redis(connection_pool=redis.ConnectionPool(connection_class=CountedConnection, host="127.0.0.1", port=port))
    table = willump.RedisTable(client, "users", key="userId", timeout=0.5)
    CountedConnection.attempts = 0
    with pytest.raises(willump.RemoteLookupError, match=f"'users'.*127.0.0.1:{port}"):
        table.lookup([1])
    # the request and the table's one retry: no retries of redis-py's own, with their backoff
    assert CountedConnection.attempts == 2


def test_a_slow_server_times_out_and_the_next_call_succeeds(redis_server, redis_client, stopped_redis):
    frame = users_frame()
    host, port = redis_server
    client = redis.Redis(connection_pool=redis.ConnectionPool(connection_class=CountedConnection, host=host, port=port))
    table = willump.RedisTable(client, "users", key="userId", timeout=0.3)
    CountedConnection.timeouts = ()
    table.put(frame)
    with stopped_redis():  # (it answers nothing until the block ends: waiting for it never succeeds)
        with pytest.raises(willump.RemoteLookupError, match="did not answer within the timeout"):
            table.lookup([10])
    assert set(CountedConnection.timeouts) == {0.3}  # each request waited the table's timeout at most
    pd.testing.assert_frame_equal(table.lookup([10, 99]), expected(frame, "userId", [10, 99]))


def test_a_dropped_connection_is_retried_once(tables, redis_client):
    frame, _, remote = tables
    remote.lookup([10])  # a pooled connection is open now
    redis_client.client_kill_filter(_type="normal", skipme=True)  # drop every other client's connection
    pd.testing.assert_frame_equal(remote.lookup([11, 10]), expected(frame, "userId", [11, 10]))


def test_a_column_subset_holds_for_lookups_that_find_nothing(redis_client, tables):
    some = willump.RedisTable(redis_client, "users", key="userId", columns=["city", "age"])
    assert list(some.lookup([]).columns) == ["city", "age"] == list(some.lookup([99]).columns)


def test_a_truncated_str_row_names_table_and_key(tables, redis_client):
    _, _, remote = tables
    good = redis_client.get("users:i:11")
    redis_client.set("users:i:11", good[:-3])
    with pytest.raises(willump.RemoteLookupError, match=r"'users'.*key '11'"):
        remote.lookup([11])
    numbers = 8 + 8 + 1 + 2 + 4 + 1  # the packed numeric columns, then the city's length and UTF-8
    assert len(good) == numbers + 4 + len("東京".encode())
    redis_client.set("users:i:11", good[: numbers + 2])  # cut inside the length field
    with pytest.raises(willump.RemoteLookupError, match=r"'users'.*key '11'"):
        remote.lookup([11])


def test_a_looked_up_frame_is_its_own(tables):
    """Renaming or writing into one lookup's result leaves the table and later lookups as they were."""
    frame, _, remote = tables
    first = remote.lookup([10, 11])
    first.columns.name = "features"
    first.loc[0, "age"] = -1
    first.loc[0, "city"] = "changed"
    again = remote.lookup([10, 11])
    assert again.columns.name is None
    pd.testing.assert_frame_equal(again, expected(frame, "userId", [10, 11]))


NUMBERS = ["age", "score", "small", "count", "ratio", "active"]
LOOKED_UP_KEYS = st.lists(st.one_of(st.sampled_from([10, 11, 12, 13, 99, -1]), st.floats(allow_nan=True),
                                    st.sampled_from([None, "10", "東京", "🙂", "", 12.0, True])), max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=LOOKED_UP_KEYS, columns=st.one_of(st.none(), st.lists(st.sampled_from(NUMBERS), min_size=1, max_size=4)))
def test_float_rows_are_the_lookups_floats(tables, keys, columns):
    """``float_rows`` gives ``lookup(keys)[columns].to_numpy(dtype=float)`` without the frame:
    duplicate, unknown, NaN and wrongly typed keys; int, bool and float32 columns."""
    _, memory, remote = tables
    canonical = [canonical_key(k) for k in keys]
    for table in (memory, remote):
        if columns is None:  # (every column: the city is a str column, which float rows refuse)
            with pytest.raises(TypeError, match="'city'"):
                table.float_rows(canonical)
            continue
        got = table.float_rows(canonical, columns)
        want = table.lookup(keys)[columns].to_numpy(dtype=float)
        assert got.dtype == np.float64 and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True), (table, keys, columns)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=LOOKED_UP_KEYS, column=st.sampled_from(["age", "city", "active", "score"]))
def test_column_keys_are_what_a_lookup_by_that_column_matches(tables, keys, column):
    _, memory, remote = tables
    for table in (memory, remote):
        looked_up = table.lookup(keys)[column]
        got = table.column_keys([canonical_key(k) for k in keys], column)
        assert got == [canonical_key(v) for v in looked_up.tolist()]


def test_float_rows_name_a_column_the_table_lacks(tables, redis_client):
    _, memory, remote = tables
    some = willump.RedisTable(redis_client, "users", key="userId", columns=["age"])
    for table in (memory, remote, some):
        with pytest.raises(KeyError, match="'nope'"):
            table.float_rows(["i:10"], ["age", "nope"])
        with pytest.raises(KeyError, match="'nope'"):
            table.column_keys(["i:10"], "nope")
    with pytest.raises(KeyError, match="'score'"):  # (not among the columns it was given)
        some.float_rows(["i:10"], ["score"])


def test_tables_of_one_server_are_fetched_in_one_round_trip(tables, redis_client):
    """``fetch_together``: one MGET each, in one pipeline, counted once; as each table's own fetch."""
    from willump.runtime.tables import fetch_together

    frame, memory, remote = tables
    songs = willump.RedisTable(redis_client, "songs", key="songId")
    songs.put(pd.DataFrame({"songId": ["a", "b"], "plays": [1.0, 2.0]}))
    remote.lookup([10]), songs.lookup(["a"])  # (the schemas are read once)
    trips = remote.round_trips + songs.round_trips
    mgets = redis_client.info("commandstats")["cmdstat_mget"]["calls"]
    fetched = fetch_together({remote: ["i:10", "i:99", "i:13"], songs: ["s:b"], memory: ["i:12"]})
    assert remote.round_trips + songs.round_trips - trips == 1
    assert redis_client.info("commandstats")["cmdstat_mget"]["calls"] - mgets == 2
    assert fetched[remote][0] == ["i:10", "i:13"] and fetched[songs][0] == ["s:b"] and fetched[memory][0] == ["i:12"]
    np.testing.assert_array_equal(remote.float_rows(["i:13", "i:10"], ["age"], fetched[remote]), [[60.0], [31.0]])
    assert songs.float_rows(["s:b"], ["plays"], fetched[songs]).tolist() == [[2.0]]
    trips = remote.round_trips + songs.round_trips
    nothing = fetch_together({remote: [], songs: []})  # (no keys: no request)
    assert nothing[remote][0] == nothing[songs][0] == [] and remote.round_trips + songs.round_trips == trips
