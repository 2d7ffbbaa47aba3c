"""A fitted function called from several threads at once: cascades (block by block and by the
whole-call text program), top-K and the drift guard give the answers one thread gets, and the
counters add up to one thread's."""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

import willump
from answers import in_threads
from test_cascade_programs import corpus
from test_cascades import slow_feature
from test_drift import text_scores

THREADS = 8
COUNTED = ("rows_seen", "rows_small_model", "rows_full_model", "top_k_queries", "top_k_candidates")

rng = np.random.default_rng(0)
USERS = willump.MemoryTable(pd.DataFrame({"user": np.arange(400), "taste": rng.normal(scale=3, size=400)}), key="user")


def make_rows(n, random_state):
    rng = np.random.default_rng(random_state)
    return pd.DataFrame({"user": rng.integers(0, 400, n), "z": rng.normal(size=n)}, index=rng.permutation(n) + 7)


def lookups(df):
    taste = USERS.lookup(df["user"])  # (cheap, decisive, its rows keyed by user: cached with cache_size)
    costly = df["z"].apply(slow_feature).to_numpy().reshape(-1, 1)
    return MODEL.predict_proba(np.hstack([taste.to_numpy(dtype=float), costly]))[:, 1]


TRAIN, VALID = make_rows(3000, 1), make_rows(1500, 2)


def labels(rows):
    taste = USERS.lookup(rows["user"]).to_numpy(dtype=float)[:, 0]
    noise = np.random.default_rng(len(rows)).normal(scale=0.3, size=len(rows))
    return (taste + 0.5 * rows["z"].to_numpy() + noise > 0).astype(int)


MODEL = LogisticRegression().fit(
    np.hstack([USERS.lookup(TRAIN["user"]).to_numpy(dtype=float), TRAIN["z"].apply(slow_feature).to_numpy().reshape(-1, 1)]),
    labels(TRAIN),
)


def work_for(thread: int, rows_of) -> list:
    """One thread's calls: batches of several sizes, single rows and top-K queries, mixed."""
    rows = rows_of(600, 100 + thread)
    calls = []
    for start in range(0, 600, 100):
        batch = rows.iloc[start:start + 100]
        calls += [("call", batch.iloc[:37]), ("call", batch.iloc[37:40]), ("top_k", batch, 7)]
        calls += [("call", batch.iloc[[i]]) for i in range(40, 52)]
        calls += [("call", batch.iloc[52:]), ("top_k", batch.iloc[52:], 3)]
    return calls


def run(f, calls) -> list:
    return [f(call[1]) if call[0] == "call" else f.top_k(call[1], k=call[2]) for call in calls]


def assert_threads_answer_as_one(f, rows_of):
    work = [work_for(thread, rows_of) for thread in range(THREADS)]
    expected = [run(f, calls) for calls in work]  # one thread, one call after the other
    one_thread = f.stats
    f.reset_stats()
    f.clear_cache()  # (the threads fill the caches anew, side by side)
    answers = [None] * THREADS

    def serve(thread):
        answers[thread] = run(f, work[thread])

    threads = in_threads(serve, range(THREADS), timeout=300)
    assert not any(thread.is_alive() for thread in threads)
    for thread in range(THREADS):
        assert answers[thread] is not None, f"thread {thread} raised"
        for got, want in zip(answers[thread], expected[thread], strict=True):
            if isinstance(want, pd.Series):
                pd.testing.assert_series_equal(got, want, check_exact=True)
            else:
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)
    stats = f.stats
    assert {key: stats[key] for key in COUNTED} == {key: one_thread[key] for key in COUNTED}
    assert stats["rows_small_model"] + stats["rows_full_model"] == stats["rows_seen"]
    assert stats["rows_small_model"] > 0 and stats["rows_full_model"] > 0 and stats["top_k_queries"] == 12 * THREADS
    assert stats["drift_checks"] >= 1 and stats["drift_alarms"] == 0  # (the guard is active; nothing drifted)
    return stats


@pytest.mark.parametrize("options", [{}, {"cache_size": 10_000}, {"cache_size": 10_000, "cache": "prediction"}],
                         ids=["no cache", "feature caches", "prediction cache"])
def test_cascades_and_top_k_from_several_threads(options):
    f = willump.optimize(lookups, **options).fit(
        TRAIN, y=labels(TRAIN), validation=(VALID, labels(VALID)), progress=False, check_speed=False,
        drift_window=500,
    )
    summary = f.explain().attrs["summary"]
    assert summary["cascades"] == "on" and summary["top_k_filter"] == "on", summary
    stats = assert_threads_answer_as_one(f, make_rows)
    if "cache_size" in options and "cache" not in options:
        assert stats["feature_row_hits"] > 0


def test_the_cascaded_text_program_from_several_threads():
    f = text_scores("<threads: cascaded text program>", drift_window=500)
    f.set_threshold(float(np.median(f._fitted.drift.validation)))  # (about half the rows to each model)
    assert_threads_answer_as_one(f, lambda n, seed: pd.DataFrame({"text": corpus(n, seed)[0]}))
    assert int(f.explain_compilation()["whole_calls"].max()) > 0
