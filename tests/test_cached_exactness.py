"""Exact on the cached path: whatever ``cache_size`` and ``cache=`` are set, the decorated function
returns the undecorated function's result to the bit, and its model is given the same ``X``:
values, dtype, shape and memory layout (a model's floats depend on the layout: BLAS sums a C- and
an F-ordered matrix in different orders). Tables in memory and in a real redis-server; rows from
the IFV caches, from the tables' stored rows and from the IFVs' statements, in any mix."""

import functools

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lightgbm import LGBMClassifier
from sklearn.linear_model import LogisticRegression, Ridge

import willump
from answers import define

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

_RNG = np.random.default_rng(7)
USERS = pd.DataFrame({
    "userId": np.arange(30),
    "a": _RNG.normal(size=30) * 1e3,
    "b": _RNG.integers(0, 100, 30),  # int: float64 once a key of the batch is missing
    "c": _RNG.normal(size=30) * 1e-3,
    "d": _RNG.integers(0, 2, 30).astype(bool),  # bool: object once a key is missing
})
SONGS = pd.DataFrame({
    "songId": np.arange(20),
    "x": _RNG.normal(size=20),
    "y": _RNG.normal(size=20) * 1e2,
    "z": _RNG.integers(0, 9, 20).astype(np.int32),
})

# IFVs of the users table, with their widths: planned (from the stored rows) or by their statements
USER_IFVS = {
    "users.lookup(df['userId']).to_numpy(dtype=float)": 4,
    "users.lookup(df['userId'])[['a', 'c']].to_numpy(dtype=float)": 2,
    "users.lookup(df['userId'])[['b']].to_numpy(dtype=float)": 1,
    "users.lookup(df['userId'])[['c', 'c']].to_numpy(dtype=float)": 2,
    "users.lookup(df['userId'])[['b', 'b', 'd']].to_numpy(dtype=float)": 3,
    "users.lookup(df['userId']).fillna(0).to_numpy(dtype=float)": 4,
    "users.lookup(df['userId'])[['a', 'b']].to_numpy().astype(float)": 2,
}
SONG_IFVS = {
    "songs.lookup(df['songId']).to_numpy(dtype=float)": 3,
    "songs.lookup(df['songId'])[['x', 'y']].to_numpy(dtype=float)": 2,
    "songs.lookup(df['songId'] + 1)[['y', 'z']].astype(float)": 2,  # (a DataFrame: computed as written)
}
COMBINES = {
    "hstack": "np.hstack([{}])",
    "column_stack": "np.column_stack([{}])",
    "concatenate": "np.concatenate([{}], axis=1)",
}
HOUR = "df[['hour']].to_numpy(dtype=float)"  # (not per key: always computed)


class Seen:
    """A model as it is, keeping a copy of each X it is given, in X's own layout."""

    def __init__(self, model):
        self.model, self.inputs = model, []

    def _seen(self, X):
        self.inputs.append(np.array(X, copy=True, order="K"))
        return X

    def predict(self, X):
        return self.model.predict(self._seen(X))

    def predict_proba(self, X):
        return self.model.predict_proba(self._seen(X))


@functools.lru_cache(maxsize=None)
def trained(kind: str, width: int):
    rng = np.random.default_rng(width)
    X = rng.normal(size=(300, width)) * 10.0 ** rng.integers(-3, 4, width)
    y = (X / X.std(axis=0) @ rng.normal(size=width) > 0).astype(int)
    if kind == "logistic":
        return LogisticRegression().fit(X, y)
    if kind == "lightgbm":
        return LGBMClassifier(n_estimators=10, num_leaves=7, verbose=-1, random_state=0, deterministic=True,
                              force_row_wise=True).fit(X, y)
    return Ridge().fit(X, X @ rng.normal(size=width))


def pipeline(tables, user_ifv: str, song_ifv: str, combine: str, hour: bool, kind: str, seen: bool):
    """The undecorated function, and the Seen wrapper of its model (or None)."""
    users, songs = tables
    entries = [user_ifv, song_ifv] + ([HOUR] if hour else [])
    width = USER_IFVS[user_ifv] + SONG_IFVS[song_ifv] + hour
    model = trained(kind, width)
    if seen:
        model = Seen(model)
    method = "predict" if kind == "ridge" else "predict_proba"
    output = "" if kind == "ridge" else "[:, 1]"
    source = (
        "def predict(df):\n"
        f"    X = {COMBINES[combine].format(', '.join(entries))}\n"
        f"    return MODEL.{method}(np.nan_to_num(X) if NAN else X){output}\n"
    )
    names = {"np": np, "users": users, "songs": songs, "MODEL": model, "NAN": kind != "lightgbm"}
    filename = f"<cached exactness: {user_ifv} {song_ifv} {combine} {hour} {kind} {seen}>"
    return define(source, names, filename, "predict"), model if seen else None


@pytest.fixture(params=["memory", "redis"])
def tables(request):
    if request.param == "memory":
        return willump.MemoryTable(USERS, key="userId"), willump.MemoryTable(SONGS, key="songId")
    client = request.getfixturevalue("redis_client")
    made = willump.RedisTable(client, "users", key="userId"), willump.RedisTable(client, "songs", key="songId")
    for table, rows in zip(made, (USERS, SONGS)):
        table.put(rows)
    return made


def assert_exact(actual, expected):
    """The same result to the bit: type, dtype, shape, values (NaN where NaN)."""
    assert type(actual) is type(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert np.array_equal(actual, expected, equal_nan=True), np.abs(actual - expected).max()


def assert_same_input(model: Seen, before: int):
    """The decorated call gave the model (when it called it: a cached prediction does not) the X the
    undecorated call gave it, the first input after ``before``: values and layout."""
    if len(model.inputs) > before + 1:
        expected, actual = model.inputs[before], model.inputs[-1]
        assert_exact(actual, expected)
        assert (actual.strides, actual.flags.c_contiguous, actual.flags.f_contiguous) == (
            expected.strides, expected.flags.c_contiguous, expected.flags.f_contiguous)


def frame(rows) -> pd.DataFrame:
    users, songs, hours = zip(*rows)
    return pd.DataFrame({"userId": list(users), "songId": list(songs), "hour": list(hours)},
                        index=np.arange(len(rows)) * 2 + 5)


ROWS = st.lists(st.tuples(st.integers(0, 35), st.integers(0, 23), st.integers(0, 23)), min_size=1, max_size=7)


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(user_ifv=st.sampled_from(sorted(USER_IFVS)), song_ifv=st.sampled_from(sorted(SONG_IFVS)),
       combine=st.sampled_from(sorted(COMBINES)), hour=st.booleans(),
       kind=st.sampled_from(["logistic", "lightgbm", "ridge"]), seen=st.booleans(),
       size=st.sampled_from([1, 3, 100_000]), cache=st.sampled_from(["features", "prediction"]),
       calls=st.lists(ROWS, min_size=1, max_size=6))
def test_cached_answers_and_model_inputs_are_the_undecorated_ones(tables, user_ifv, song_ifv, combine, hour, kind,
                                                                   seen, size, cache, calls):
    """Single rows and batches; keys seen before, new, repeated, and not in the tables; caches that
    evict; every IFV form the caches keep rows of, and one they do not."""
    predict, model = pipeline(tables, user_ifv, song_ifv, combine, hour, kind, seen)
    optimized = willump.optimize(predict, cache_size=size, cache=cache)
    for rows in calls + calls[:1]:
        df = frame(rows)
        before = len(model.inputs) if model is not None else 0
        expected = predict(df)
        assert_exact(optimized(df), expected)
        if model is not None:
            assert_same_input(model, before)


def test_the_readme_redis_example_is_exact_for_single_rows_and_batches(redis_client):
    """The README's example: two Redis tables of several float columns, their frames' to_numpy side
    by side (F-ordered for a batch), predict_proba; rows served from the caches and new ones."""
    rng = np.random.default_rng(3)
    users = willump.RedisTable(redis_client, "users", key="userId")
    songs = willump.RedisTable(redis_client, "songs", key="songId")
    users.put(pd.DataFrame({"userId": np.arange(200), **{f"u{j}": rng.normal(size=200) * 10.0 ** j for j in range(5)}}))
    songs.put(pd.DataFrame({"songId": np.arange(300), **{f"s{j}": rng.normal(size=300) * 10.0 ** -j for j in range(4)}}))
    model = trained("logistic", 9)

    def predict(df):
        u = users.lookup(df["userId"])
        s = songs.lookup(df["songId"])
        X = np.hstack([u.to_numpy(dtype=float), s.to_numpy(dtype=float)])
        return model.predict_proba(X)[:, 1]

    optimized = willump.optimize(predict, cache_size=100_000)
    batches = [pd.DataFrame({"userId": rng.integers(0, 200, n), "songId": rng.integers(0, 300, n)})
               for n in [1] * 200 + [2, 5, 40, 300, 1000] + [1] * 100]
    for df in batches + batches[::-1]:
        assert_exact(optimized(df), predict(df))
    assert optimized.stats["feature_row_hits"] > 0


def test_a_cascade_with_caches_answers_as_the_same_fitted_function_without(redis_client, monkeypatch):
    """After fit, the small model's IFVs and the unsure rows' others come from the caches: the
    answers (probabilities, to the bit) and top-K are those of the same fitted function with no
    caches, for batches of new rows, rows seen before, and single rows."""
    rng = np.random.default_rng(5)
    n = 3000
    users = willump.MemoryTable(pd.DataFrame({"userId": np.arange(300), "strong": rng.normal(size=300),
                                              "other": rng.normal(size=300) * 1e2}), key="userId")
    songs = willump.RedisTable(redis_client, "songs", key="songId")
    songs.put(pd.DataFrame({"songId": np.arange(500), **{f"s{j}": rng.normal(size=500) * 10.0 ** -j for j in range(3)}}))
    df = pd.DataFrame({"userId": rng.integers(0, 300, n), "songId": rng.integers(0, 500, n)})
    X = np.hstack([users.lookup(df["userId"]).to_numpy(dtype=float), songs.lookup(df["songId"]).to_numpy(dtype=float)])
    y = (3 * X[:, 0] + 0.3 * X[:, 2] + 0.3 * X[:, 3] > 0).astype(int)
    model = LogisticRegression().fit(X, y)

    def predict(df):
        u = users.lookup(df["userId"])
        s = songs.lookup(df["songId"])
        return model.predict_proba(np.hstack([u.to_numpy(dtype=float), s.to_numpy(dtype=float)]))[:, 1]

    cached = willump.optimize(predict, cache_size=10_000).fit(
        df.iloc[:2000], y=y[:2000], costs={"u": 1e-7, "s": 1e-5}, check_speed=False, progress=False
    )  # (costs as measured here, given: the small model reads the MemoryTable's rows whatever the load)
    assert cached.explain().attrs["summary"]["cascades"] == "on"

    def without_caches(answer):
        with monkeypatch.context() as off:
            off.setattr(cached, "_feature_rows", None)
            off.setattr(cached, "_lookup_caches", None)
            return answer()

    test = df.iloc[2000:2400]
    for batch in [test, test.iloc[[3]], test.iloc[::-1], test.iloc[100:105], test.iloc[[3, 3, 7]], test]:
        expected = without_caches(lambda: cached(batch))
        assert_exact(cached(batch), expected)
    assert cached.stats["feature_row_hits"] > 0 and 0 < cached.stats["rows_full_model"] < cached.stats["rows_seen"]
    np.testing.assert_array_equal(cached.top_k(test, k=20), without_caches(lambda: cached.top_k(test, k=20)))


def test_the_prediction_cache_tells_frames_of_equal_values_held_otherwise_apart():
    rng = np.random.default_rng(1)
    data = rng.normal(size=(400, 30))
    columns = [f"c{i}" for i in range(30)]
    model = LogisticRegression().fit(data, data[:, 0] + rng.normal(size=400) > 0)

    def predict(frame):
        X = frame.to_numpy(dtype=float)
        return model.predict_proba(X)

    row_major = pd.DataFrame(data, columns=columns, copy=False)  # (to_numpy: C order)
    by_column = pd.DataFrame({c: data[:, i].copy() for i, c in enumerate(columns)})  # (F order)
    assert not np.array_equal(predict(row_major), predict(by_column))  # (what makes the test bite)
    optimized = willump.optimize(predict, cache="prediction", cache_size=100)
    for frame in (row_major, by_column, row_major, by_column):
        assert np.array_equal(optimized(frame), predict(frame))
    assert optimized.stats["cache_hits"] == 2 * 400


SIGNED = LogisticRegression().fit(np.array([[-5.0], [5.0], [-4.0], [4.0]]), [0, 1, 0, 1])


def reciprocal_score(frame):
    X = np.clip(1.0 / frame["x"].to_numpy(dtype=float), -5, 5).reshape(-1, 1)
    return SIGNED.predict_proba(X)[:, 1]


EQUAL_INPUTS = [  # (dtype, values pandas finds equal and the function does not)
    ("float64", [0.0, -0.0]), ("float32", [0.0, -0.0]), ("object", [0.0, -0.0]), ("object", [np.float64(0.0), np.float64(-0.0)]),
    ("Float64", [0.0, -0.0]), ("Float64", [pd.NA, 1.0]), ("object", [(1.0,), (-0.0,)]), ("object", [1, 1.0]),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(EQUAL_INPUTS), order=st.permutations([0, 1]), rows=st.integers(1, 3))
def test_the_prediction_cache_keys_equal_values_that_are_other_inputs_apart(case, order, rows):
    """-0.0 and 0.0, a missing value of a nullable column, tuples of equal numbers: each batch gets its own
    answer (or exception), never the one cached for an equal batch."""
    dtype, values = case
    optimized = willump.optimize(reciprocal_score, cache="prediction", cache_size=100)
    for value in [values[i] for i in order] * 2:
        frame = pd.DataFrame({"x": pd.Series([value] * rows, dtype=dtype)})
        expected = answer_or_error(reciprocal_score, frame)
        got = answer_or_error(optimized, frame)
        if isinstance(expected, Exception):
            assert type(got) is type(expected) and str(got) == str(expected)
        else:
            np.testing.assert_array_equal(got, expected)


def answer_or_error(function, frame):
    try:
        return function(frame)
    except Exception as error:  # noqa: BLE001 (the exception is the answer compared)
        return error
