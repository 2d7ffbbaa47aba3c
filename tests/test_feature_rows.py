"""Feature-row caches: which IFVs keep their rows (read from the function's text), and the
answers and counters when they do, against tables in a real redis-server and in memory."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LinearRegression, LogisticRegression

import willump
from answers import define
from willump.runtime.concurrent import ConcurrentFeatures

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

USERS = pd.DataFrame({"userId": np.arange(30), "age": np.arange(30) % 7 + 18, "score": np.linspace(-1, 1, 30)})
SONGS = pd.DataFrame({
    "songId": [f"s{i}" for i in range(20)],
    "length": np.linspace(100, 400, 20),
    "artist": [f"a{i % 6}" for i in range(20)],
    "year": np.arange(20, dtype=np.int32) + 1990,
})
ARTISTS = pd.DataFrame({"artist": [f"a{i}" for i in range(5)], "fans": np.arange(5) * 10.0})
SONG_NUMBERS = ["length", "year"]
MODEL = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(
    np.random.default_rng(0).normal(size=(80, 7)), np.arange(80) % 2
)

LINEAR = LinearRegression().fit(np.eye(3), [1.0, 2.0, 3.0])  # hour, age, score


def music_like(users, songs, artists):
    """Lookups keyed by the argument's columns and by a looked-up column, columns selected
    by a closure list, and a column of the argument used as it is."""

    def predict(df):
        u = users.lookup(df["userId"])
        s = songs.lookup(df["songId"])
        a = artists.lookup(s["artist"])
        X = np.hstack([
            df[["hour"]].to_numpy(dtype=float),
            u.to_numpy(dtype=float),
            s[SONG_NUMBERS].to_numpy(dtype=float),
            a.to_numpy(dtype=float),
            users.lookup(df["userId"] * 2 + 1)[["age"]].to_numpy(dtype=float),
        ])
        return MODEL.predict_proba(X)[:, 1]

    return predict


@pytest.fixture(params=["redis", "memory"])
def tables(request):
    if request.param == "memory":
        return [willump.MemoryTable(USERS, key="userId"), willump.MemoryTable(SONGS, key="songId"),
                willump.MemoryTable(ARTISTS, key="artist")]
    client = request.getfixturevalue("redis_client")
    made = [willump.RedisTable(client, name, key=key) for name, key in
            (("users", "userId"), ("songs", "songId"), ("artists", "artist"))]
    for table, frame in zip(made, (USERS, SONGS, ARTISTS)):
        table.put(frame)
    return made


def frame(users, songs, hours=None, index=None) -> pd.DataFrame:
    hours = np.arange(len(users)) % 24 if hours is None else hours
    return pd.DataFrame({"userId": users, "songId": songs, "hour": hours}, index=index)


def same_outcome(optimized, predict, df) -> None:
    """The optimized function returns what ``predict`` returns, or raises what it raises."""
    try:
        expected = predict(df)
    except Exception as error:
        with pytest.raises(type(error)) as raised:
            optimized(df)
        assert str(raised.value) == str(error)
        return
    assert_same(optimized(df), expected)


def assert_same(actual, expected):
    assert type(actual) is type(expected) and actual.dtype == expected.dtype and actual.shape == expected.shape
    assert np.array_equal(actual, expected, equal_nan=True), (actual, expected)


def test_ifvs_made_of_lookups_keep_their_rows_and_the_others_say_why(tables):
    optimized = willump.optimize(music_like(*tables), cache_size=10)
    cached = optimized.explain_caching().set_index("ifv")["cached"]
    assert cached.iloc[0] == "nothing: it looks nothing up in a table (computing it is as cheap as caching it)"
    assert cached.iloc[1].startswith("its rows by userId (up to 10)")
    assert cached.iloc[2].startswith("its rows by songId (up to 10)")
    assert cached.iloc[3].startswith("its rows by songId (up to 10)")  # (through the song's artist)
    assert cached.iloc[4].startswith("its rows by userId (up to 10)")
    remote = isinstance(tables[0], willump.RedisTable)
    assert cached.iloc[1].endswith(", and its remote tables' rows by lookup key") == remote


@pytest.mark.parametrize("line, reason", [
    ("u.to_numpy()", "does not end in `.to_numpy(dtype=float)` or `.astype(float)`"),
    ("(u - u.mean()).to_numpy(dtype=float)", "`u.mean()` is not a per-key operation"),
    ("u.rolling(2).mean().to_numpy(dtype=float)", "is not a per-key operation"),
    ("users.lookup(df.iloc[:, 0]).to_numpy(dtype=float)", "`df.iloc[:, 0]` is not a selection of columns by name"),
])
def test_ifvs_whose_rows_may_depend_on_other_rows_are_computed_as_before(tables, line, reason):
    source = (
        "def predict(df):\n"
        "    u = users.lookup(df['userId'])\n"
        f"    X = np.hstack([df[['hour']].to_numpy(dtype=float), {line}])\n"
        "    return LINEAR.predict(np.nan_to_num(X))\n"
    )
    predict = define(source, {"np": np, "users": tables[0], "LINEAR": LINEAR}, f"<feature rows: {line}>", "predict")
    optimized = willump.optimize(predict, cache_size=10)
    cached = optimized.explain_caching()["cached"].iloc[1]
    assert reason in cached
    df = frame([1, 2, 2, 40], ["s1"] * 4)
    for _ in range(2):
        assert_same(optimized(df), predict(df))
    assert optimized.stats["feature_row_hits"] == optimized.stats["feature_row_misses"] == 0


USER_KEYS = st.one_of(st.integers(0, 34), st.sampled_from([np.nan, 3.0, 3.5, None, "7"]))
SONG_KEYS = st.one_of(st.sampled_from([f"s{i}" for i in range(23)]), st.sampled_from([np.nan, None, "", "S1", "é🎵"]))


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(calls=st.lists(st.lists(st.tuples(USER_KEYS, SONG_KEYS, st.integers(0, 3)), min_size=1, max_size=6),
                      min_size=1, max_size=6),
       size=st.integers(1, 6), typed=st.booleans())
def test_answers_from_cached_rows_are_the_undecorated_ones(tables, calls, size, typed):
    """Known, unknown, NaN and wrongly typed keys, in batches that repeat rows, through caches
    small enough to evict."""
    predict = music_like(*tables)
    optimized = willump.optimize(predict, cache_size=size)
    for rows in calls:
        users, songs, hours = zip(*rows)
        if typed:  # int keys in an int column and str keys in a str column, the usual case
            users = [u if isinstance(u, int) else 0 for u in users]
            songs = [s if isinstance(s, str) else "s0" for s in songs]
        df = frame(pd.Series(users, dtype=None if typed else object), list(songs), list(hours),
                   index=np.arange(len(rows)) * 3 + 1)
        same_outcome(optimized, predict, df)


def test_rows_seen_before_are_neither_fetched_nor_computed(redis_client):
    tables = [willump.RedisTable(redis_client, n, key=k) for n, k in (("u", "userId"), ("s", "songId"), ("a", "artist"))]
    for table, data in zip(tables, (USERS, SONGS, ARTISTS)):
        table.put(data)
    predict = music_like(*tables)
    optimized = willump.optimize(predict, cache_size=100)
    first = frame([1, 2, 2], ["s1", "s2", "s2"])
    assert_same(optimized(first), predict(first))
    stats = optimized.stats
    assert stats["feature_row_misses"] == 3 * 4 and stats["feature_row_hits"] == 0
    fetched, read = stats["remote_keys"], stats["cache_hits"] + stats["cache_misses"]
    for i in [2, 0, 1]:  # the same rows, one at a time, at other hours
        row = frame([first["userId"].iloc[i]], [first["songId"].iloc[i]], [7])
        assert_same(optimized(row), predict(row))
    stats = optimized.stats
    assert stats["feature_row_hits"] == 3 * 4 and stats["feature_row_misses"] == 3 * 4
    assert stats["remote_keys"] == fetched  # no table was read again, not even its cached rows:
    assert stats["cache_hits"] + stats["cache_misses"] == read
    mixed = frame([1, 5], ["s9", "s1"])  # a new song for a known user, a new user for a known song
    assert_same(optimized(mixed), predict(mixed))
    stats = optimized.stats
    assert stats["feature_row_hits"] == 3 * 4 + 4 and stats["feature_row_misses"] == 3 * 4 + 4


def test_a_put_or_another_table_starts_the_rows_again(tables):
    users, songs, artists = tables
    predict = music_like(users, songs, artists)
    optimized = willump.optimize(predict, cache_size=100)
    df = frame([1, 2], ["s1", "s2"])
    optimized(df)

    def misses_after(change) -> int:
        change()
        before = optimized.stats["feature_row_misses"]
        same_outcome(optimized, predict, df)
        return optimized.stats["feature_row_misses"] - before

    assert misses_after(lambda: None) == 0
    assert misses_after(lambda: users.put(USERS.assign(score=USERS["score"] + 5))) == 2 * 2  # u and age
    other = willump.MemoryTable(ARTISTS.assign(fans=-1.0), key="artist")
    cell = predict.__closure__[predict.__code__.co_freevars.index("artists")]
    assert misses_after(lambda: setattr(cell, "cell_contents", other)) == 2  # the artist IFV
    assert misses_after(optimized.clear_cache) == 2 * 4


def test_an_ifv_that_is_not_float_rows_after_all_is_computed_as_before(tables):
    users = tables[0]

    def predict(df):
        u = users.lookup(df["userId"])
        X = np.hstack([df[["hour"]].to_numpy(dtype=float), u.astype(float)])  # a DataFrame, not an array
        return LINEAR.predict(np.nan_to_num(X))

    optimized = willump.optimize(predict, cache_size=10)
    assert optimized.explain_caching()["cached"].iloc[1].startswith("its rows by userId")
    df = frame([1, 2, 99], ["s1"] * 3)
    for _ in range(2):
        assert_same(optimized(df), predict(df))
    assert "its value was a DataFrame, not float rows" in optimized.explain_caching()["cached"].iloc[1]


def test_bad_input_raises_what_the_undecorated_function_raises(tables):
    predict = music_like(*tables)
    optimized = willump.optimize(predict, cache_size=10)
    optimized(frame([1], ["s1"]))
    for bad in (frame([1], ["s1"]).drop(columns="userId"), frame([], []), frame([1], ["s1"]).drop(columns="hour"),
                frame(pd.Series(["7"], dtype=object), ["s1"])):  # ("7" * 2 + 1)
        with pytest.raises(Exception):
            predict(bad)
        same_outcome(optimized, predict, bad)


def test_a_name_bound_again_is_read_where_it_is_read(tables):
    """``s = s[...]`` in one IFV's statements reads the ``s`` bound before it, which another
    IFV reads too (so it is preprocessing)."""
    users = tables[0]

    def predict(df):
        s = users.lookup(df["userId"])
        t = s[["age"]].to_numpy(dtype=float)
        s = s[["score"]]
        X = np.hstack([df[["hour"]].to_numpy(dtype=float), t, s.to_numpy(dtype=float)])
        return LINEAR.predict(np.nan_to_num(X))

    optimized = willump.optimize(predict, cache_size=10)
    assert optimized.explain_caching()["cached"].iloc[2].startswith("its rows by userId (up to 10)")
    df = frame([1, 2, 99], ["s1"] * 3)
    for _ in range(2):
        same_outcome(optimized, predict, df)
    assert optimized.stats["feature_row_hits"] == optimized.stats["feature_row_misses"] == 3


FIVE = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(
    np.random.default_rng(1).normal(size=(80, 5)), np.arange(80) % 2
)


def test_new_rows_of_lookup_ifvs_come_from_stored_rows_a_round_trip_a_depth(redis_client):
    """``table.lookup(keys)[columns].to_numpy(dtype=float)`` IFVs compute missed rows from the
    tables' stored rows: the lookups of one depth (users and songs; then artists, keyed by the
    song's artist) each in one round trip, not one per table."""
    users, songs, artists = [willump.RedisTable(redis_client, n, key=k) for n, k in
                             (("u", "userId"), ("s", "songId"), ("a", "artist"))]
    for table, data in zip((users, songs, artists), (USERS, SONGS, ARTISTS)):
        table.put(data)

    def predict(df):
        u = users.lookup(df["userId"])
        s = songs.lookup(df["songId"])
        X = np.column_stack([
            u.to_numpy(dtype=float),
            s["length"].to_numpy(dtype=float),  # (one column by name: 1-d rows)
            artists.lookup(s["artist"]).to_numpy(dtype=float),
            df[["hour"]].to_numpy(dtype=float),
        ])
        return FIVE.predict_proba(X)[:, 1]

    optimized = willump.optimize(predict, cache_size=100)
    assert optimized.explain_caching()["new rows"].tolist() == ["from its tables' stored rows"] * 3 + [
        "by its statements"]
    predict(frame([0], ["s0"]))  # (each table reads its schema once)
    for users_, songs_ in (([1, 2, 2, 50], ["s1", "s5", "nope", "s1"]), ([1, 3], ["s4", None])):
        df = frame(users_, songs_)
        trips = optimized.stats["remote_round_trips"]
        assert_same(optimized(df), predict(df))
        assert optimized.stats["remote_round_trips"] - trips == 2
    assert optimized.stats["feature_row_misses"] == 3 * 4 + 5 and optimized.stats["feature_row_hits"] == 1


def test_a_str_column_that_converts_to_floats_is_computed_as_written(tables):
    """pandas turns str "1.5" into 1.5 in ``to_numpy(dtype=float)``: a table's str column is left
    to the IFV's statements (and its rows still cached), with the same answers."""
    frame_ = pd.DataFrame({"userId": [1, 2], "text": ["1.5", "-2e3"], "n": [1, 2]})
    users = (willump.MemoryTable(frame_, key="userId") if isinstance(tables[0], willump.MemoryTable)
             else willump.RedisTable(tables[0].client, "texts", key="userId"))
    if isinstance(users, willump.RedisTable):
        users.put(frame_)

    def predict(df):
        u = users.lookup(df["userId"])
        X = np.hstack([df[["hour"]].to_numpy(dtype=float), u[["text", "n"]].to_numpy(dtype=float)])
        return LINEAR.predict(np.nan_to_num(X))

    optimized = willump.optimize(predict, cache_size=10)
    assert optimized.explain_caching()["new rows"].iloc[1] == "from its tables' stored rows"
    for users_ in ([1, 2, 7], [2, 1]):
        same_outcome(optimized, predict, frame(users_, ["s1"] * len(users_)))
    assert optimized.explain_caching()["new rows"].iloc[1] == "by its statements"
    assert optimized.stats["feature_row_hits"] == 2 and optimized.stats["feature_row_misses"] == 3


class _Features:
    """A 'model' that returns its features: the answers show every value the IFVs computed."""

    def predict(self, X):
        return X


KT = willump.MemoryTable(pd.DataFrame({"k": [1, 2, 3], "a": [1.5, 2.5, 3.5], "b": [10, 20, 30]}), key="k")
KU = willump.MemoryTable(pd.DataFrame({"k": [1, 2, 3], "a": [100.0, 200.0, 300.0], "b": [1, 2, 3]}), key="k")
BIG = 2**53 + 1  # (float64 rounds it to 2**53)
KS = willump.MemoryTable(pd.DataFrame({"s": [1, 2], "art": np.array([BIG, 7], dtype=np.int64)}), key="s")
KA = willump.MemoryTable(pd.DataFrame({"art": np.array([BIG, BIG - 1, 7], dtype=np.int64), "fans": [1.0, 2.0, 3.0]}),
                         key="art")


@pytest.mark.parametrize("setup, ifv", [
    ("", "KT.lookup(df['k'])['a', 'b']"),  # (a tuple is one label to pandas: KeyError)
    ("", "KT.lookup(df['k'])[PAIR]"),
    ("s = KS.lookup(df['k'])", "KA.lookup(s['art'])[['fans']]"),  # (a missed key makes `art` float)
    ("KT = KU", "KT.lookup(df['k'])[['a']]"),  # (the local name, not the global table)
])
def test_what_pandas_would_do_otherwise_is_not_planned_or_not_cached(setup, ifv):
    source = (f"def predict(df):\n    {setup}\n"
              f"    return MODEL.predict(np.hstack([df[['h']].to_numpy(dtype=float), {ifv}.to_numpy(dtype=float)]))\n")
    names = {"np": np, "KT": KT, "KU": KU, "KS": KS, "KA": KA, "PAIR": ("a", "b"), "MODEL": _Features()}
    predict = define(source, names, f"<feature rows: {ifv}>", "predict")
    optimized = willump.optimize(predict, cache_size=10)
    for keys in ([1, 9], [1, 2, 5], [1]):
        same_outcome(optimized, predict, pd.DataFrame({"k": keys, "h": np.arange(len(keys), dtype=float)}))


def test_a_global_list_of_columns_is_read_on_each_call():
    names = {"np": np, "KT": KT, "COLUMNS": ["a"], "MODEL": _Features()}
    source = ("def predict(df):\n"
              "    return MODEL.predict(np.hstack([df[['h']].to_numpy(dtype=float),"
              " KT.lookup(df['k'])[COLUMNS].to_numpy(dtype=float)]))\n")
    predict = define(source, names, "<feature rows: a global list>", "predict")
    optimized = willump.optimize(predict, cache_size=10)
    df = pd.DataFrame({"k": [1, 2, 5], "h": [0.0, 1.0, 2.0]})
    same_outcome(optimized, predict, df)
    predict.__globals__["COLUMNS"] = ["b", "a"]
    optimized.clear_cache()  # (cached rows are those of the columns named before)
    same_outcome(optimized, predict, df)
    assert optimized.explain_caching()["new rows"].iloc[1] == "from its tables' stored rows"


def test_cascades_read_their_ifvs_from_the_feature_row_caches(redis_client):
    """After fit, the small model's IFVs and, for the rows it is unsure of, the others come
    from the feature-row caches: the answers are the cascade's without caches, and rows seen
    before fetch nothing."""
    rng = np.random.default_rng(0)
    n = 3000
    user_rows = pd.DataFrame({"userId": np.arange(300), "strong": rng.normal(size=300)})
    song_rows = pd.DataFrame({"songId": np.arange(500), "a": rng.normal(size=500), "b": rng.normal(size=500)})
    users = willump.MemoryTable(user_rows, key="userId")  # (cheap and telling: the small model's)
    songs = willump.RedisTable(redis_client, "songs", key="songId")
    songs.put(song_rows)
    df = pd.DataFrame({"userId": rng.integers(0, 300, n), "songId": rng.integers(0, 500, n)})
    X = np.column_stack([users.lookup(df["userId"]).to_numpy(), songs.lookup(df["songId"]).to_numpy()])
    y = (3 * X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    model = LogisticRegression().fit(X, y)

    def predict(df):
        u = users.lookup(df["userId"])
        s = songs.lookup(df["songId"])
        return model.predict(np.hstack([u.to_numpy(dtype=float), s.to_numpy(dtype=float)]))

    # costs as measured here (a Redis lookup ~100x a MemoryTable's), given: this test is about serving
    options = {"costs": {"u": 1e-7, "s": 1e-5}, "check_speed": False, "progress": False}
    cached = willump.optimize(predict, cache_size=10_000).fit(df.iloc[:2000], y=y[:2000], **options)
    plain = willump.optimize(predict).fit(df.iloc[:2000], y=y[:2000], **options)
    assert cached.explain()["selected"].tolist() == [True, False]
    assert cached.explain().attrs["summary"]["cascades"] == "on"
    assert cached.explain().attrs["summary"]["threshold"] == plain.explain().attrs["summary"]["threshold"]
    cached.reset_stats()
    test = df.iloc[2000:2300]
    assert_same(cached(test), plain(test))
    stats = cached.stats
    unsure = stats["rows_full_model"]
    assert 0 < unsure < len(test)
    assert stats["feature_row_misses"] == len(test) + unsure and stats["feature_row_hits"] == 0
    assert stats["remote_keys"] <= unsure  # (the rows the small model answered fetched no song)
    fetched = stats["remote_keys"]
    for i in [5, 0, 299]:  # rows seen before, one at a time
        assert_same(cached(test.iloc[[i]]), plain(test.iloc[[i]]))
    assert_same(cached(test), plain(test))
    stats = cached.stats
    assert stats["remote_keys"] == fetched
    # every row since the first call is a hit, in the small model's IFV and, when unsure, in the other
    assert stats["feature_row_hits"] == stats["rows_seen"] - len(test) + stats["rows_full_model"] - unsure
    assert stats["feature_row_misses"] == len(test) + unsure
    for repeat in range(2):  # top-K reads the same caches: the second query fetches nothing
        np.testing.assert_array_equal(cached.top_k(test, k=5), plain.top_k(test, k=5))
        assert cached.stats["top_k_queries"] == repeat + 1
        assert (cached.stats["remote_keys"] == fetched) if repeat else (cached.stats["remote_keys"] > fetched)
        fetched = cached.stats["remote_keys"]
    with pytest.raises(KeyError) as raised:
        cached(test.drop(columns="userId"))
    with pytest.raises(KeyError) as expected:
        predict(test.drop(columns="userId"))
    assert str(raised.value) == str(expected.value)


def test_cascaded_rows_fetch_two_remote_tables_side_by_side_and_cache_them(redis_client):
    """With two Redis tables the unsure rows' IFVs are fetched side by side (``ConcurrentFeatures``);
    they are cached as one table's are: the cascade's answers, and rows seen before fetch nothing."""
    rng = np.random.default_rng(1)
    n = 3000
    user_rows = pd.DataFrame({"userId": np.arange(300), "strong": rng.normal(size=300)})
    song_rows = pd.DataFrame({"songId": np.arange(500), "a": rng.normal(size=500)})
    artist_rows = pd.DataFrame({"artistId": np.arange(200), "c": rng.normal(size=200)})
    users = willump.MemoryTable(user_rows, key="userId")
    songs = willump.RedisTable(redis_client, "songs2", key="songId")
    artists = willump.RedisTable(redis_client, "artists2", key="artistId")
    songs.put(song_rows)
    artists.put(artist_rows)
    df = pd.DataFrame({"userId": rng.integers(0, 300, n), "songId": rng.integers(0, 500, n),
                       "artistId": rng.integers(0, 200, n)})
    X = np.column_stack([users.lookup(df["userId"]).to_numpy(), songs.lookup(df["songId"]).to_numpy(),
                         artists.lookup(df["artistId"]).to_numpy()])
    y = (3 * X[:, 0] + 0.2 * X[:, 1] + 0.2 * X[:, 2] > 0).astype(int)
    model = LogisticRegression().fit(X, y)

    def predict(df):
        u = users.lookup(df["userId"])
        s = songs.lookup(df["songId"])
        a = artists.lookup(df["artistId"])
        return model.predict(np.hstack([u.to_numpy(dtype=float), s.to_numpy(dtype=float), a.to_numpy(dtype=float)]))

    options = {"costs": {"u": 1e-7, "s": 1e-5, "a": 1e-5}, "check_speed": False, "progress": False}  # (as measured)
    cached = willump.optimize(predict, cache_size=10_000).fit(df.iloc[:2000], y=y[:2000], **options)
    plain = willump.optimize(predict).fit(df.iloc[:2000], y=y[:2000], **options)
    assert cached.explain()["selected"].tolist() == [True, False, False]
    assert cached.explain().attrs["summary"]["cascades"] == "on"
    assert isinstance(cached._features, ConcurrentFeatures) and cached._features.remote == {1, 2}
    cached.reset_stats()
    test = df.iloc[2000:2400]
    assert_same(cached(test), plain(test))
    stats = cached.stats
    unsure = stats["rows_full_model"]
    assert 0 < unsure < len(test)
    assert stats["feature_row_misses"] == len(test) + 2 * unsure and stats["feature_row_hits"] == 0
    assert stats["remote_keys"] <= 2 * unsure  # (the rows the small model answered fetched nothing)
    fetched = stats["remote_keys"]
    for i in [7, 0, 399]:
        assert_same(cached(test.iloc[[i]]), plain(test.iloc[[i]]))
    assert_same(cached(test), plain(test))
    stats = cached.stats
    assert stats["remote_keys"] == fetched
    assert stats["feature_row_misses"] == len(test) + 2 * unsure
    assert stats["feature_row_hits"] == stats["rows_seen"] - len(test) + 2 * (stats["rows_full_model"] - unsure)
