"""Batch scoring on a real Dask cluster (``distributed.LocalCluster``, 2 worker processes): the
``map_partitions`` idiom with a decorated function, ``willump.dask``'s helpers, and what a worker
process keeps. Runs in the pass with pyarrow (``dask.dataframe`` needs it)."""

import os
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from lightgbm import LGBMClassifier
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump
from willump.demo import make_messages
from willump.runtime.topk import best, merged

ROWS, PARTITIONS = 6000, 7


def _frames():
    import dask.dataframe as dd

    frame, y = make_messages(8000, random_state=3)
    test = frame.iloc[:ROWS].copy()
    test.index = pd.RangeIndex(100, 100 + ROWS)  # (an index that is not positions)
    return frame, y, test, dd.from_pandas(test, npartitions=PARTITIONS, sort=False)


@pytest.fixture(scope="module")
def text_job(willump_dask):
    """(undecorated, decorated, fitted decorated, the pandas test rows, the same as a dask frame):
    TF-IDF words and characters into a logistic regression, defined here (so they travel by value)."""
    frame, y, test, ddf = _frames()
    words = TfidfVectorizer().fit(frame["message"])
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4)).fit(frame["message"])
    model = LogisticRegression(max_iter=500).fit(
        sp.hstack([words.transform(frame["message"]), chars.transform(frame["message"])]).tocsr(), y)

    def predict(df):
        text = df["message"].str.lower()
        word_features = words.transform(text)
        char_features = chars.transform(text)
        return model.predict_proba(sp.hstack([word_features, char_features]).tocsr())[:, 1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = willump.optimize(predict).fit(frame, y=y, progress=False, check_speed=False)
    return predict, willump.optimize(predict), fitted, test, ddf


def test_map_partitions_with_a_decorated_function_returns_the_undecorated_answers(dask_client, text_job):
    predict, fast, _, test, ddf = text_job
    got = ddf.map_partitions(fast, meta=("score", "f8")).compute()
    want = ddf.map_partitions(predict, meta=("score", "f8")).compute()
    assert type(got) is type(want) and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, predict(test))


def test_a_fitted_function_answers_on_the_cluster_as_in_one_process(dask_client, text_job):
    *_, fitted, test, ddf = text_job
    assert fitted.explain().attrs["summary"]["cascades"] == "on"
    got = ddf.map_partitions(fitted, meta=("score", "f8")).compute()
    in_one_process = np.concatenate([fitted(part) for part in _partitions(test)])
    np.testing.assert_array_equal(got, in_one_process)


def _partitions(test):
    bounds = np.linspace(0, len(test), PARTITIONS + 1).astype(int)
    return [test.iloc[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]


def test_predict_is_a_series_with_the_frames_index(dask_client, text_job):
    predict, fast, _, test, ddf = text_job
    scores = willump.dask.predict(ddf, fast)
    assert scores.dtype == np.float64 and scores.name == "prediction"
    got = scores.compute()
    pd.testing.assert_series_equal(got, pd.Series(predict(test), index=test.index, name="prediction"))


def test_predict_of_two_columns_is_a_frame(dask_client):
    frame, y, test, ddf = _frames()
    lengths = frame["message"].str.len().to_numpy()[:, None] * 1.0
    model = LogisticRegression().fit(lengths, y)

    def proba(df):
        return model.predict_proba(df["message"].str.len().to_numpy()[:, None] * 1.0)

    got = willump.dask.predict(ddf, willump.optimize(proba)).compute()
    pd.testing.assert_frame_equal(got, pd.DataFrame(proba(test), index=test.index))


class LengthScorer:
    """An object whose method is the pipeline (defined here: it travels by value)."""

    def __init__(self, model):
        self.model = model

    @willump.optimize
    def score(self, df):
        return self.model.predict_proba(df["message"].str.len().to_numpy()[:, None] * 1.0)[:, 1]


def test_methods_of_two_objects_are_two_tasks(dask_client):
    """``scorer.score`` names its object in Dask's tokens: two scorers' partitions get their own answers."""
    frame, y, test, ddf = _frames()
    lengths = frame["message"].str.len().to_numpy()[:, None] * 1.0
    one, other = LengthScorer(LogisticRegression().fit(lengths, y)), LengthScorer(LogisticRegression().fit(lengths, ~y))
    got_one, got_other = (ddf.map_partitions(scorer.score, meta=("score", "f8")) for scorer in (one, other))
    got_one, got_other = dask_client.compute([got_one, got_other], sync=True)
    np.testing.assert_array_equal(got_one, LengthScorer.score.py_func(one, test))
    np.testing.assert_array_equal(got_other, LengthScorer.score.py_func(other, test))
    pd.testing.assert_series_equal(willump.dask.predict(ddf, other.score).compute(),
                                   pd.Series(LengthScorer.score.py_func(other, test), index=test.index, name="prediction"))
    np.testing.assert_array_equal(willump.dask.top_k(ddf, one.score, 25), one.score.top_k(test, k=25))
    assert willump.dask.stats(one.score)["rows_seen"] > 0


def test_stats_sum_every_workers_rows(dask_client, text_job):
    *_, fitted, test, ddf = text_job
    willump.dask.reset_stats(fitted)
    ddf.map_partitions(fitted, meta=("score", "f8")).compute()
    idiom = willump.dask.stats(fitted)
    willump.dask.predict(ddf, fitted).compute()
    both = willump.dask.stats(fitted)
    assert idiom["rows_seen"] == len(test) and both["rows_seen"] == 2 * len(test)
    assert idiom["rows_small_model"] + idiom["rows_full_model"] == len(test) and idiom["rows_small_model"] > 0
    willump.dask.reset_stats(fitted)
    assert willump.dask.stats(fitted)["rows_seen"] == 0


def test_each_worker_builds_the_function_once(dask_client, text_job):
    """Every task of a worker used the one instance the worker keeps: its rows add up to all."""
    _, fast, _, test, ddf = text_job
    fresh = willump.optimize(fast.py_func, cache_size=None, workers=1)  # (a new identity: no worker has it)
    ddf.map_partitions(fresh, meta=("score", "f8")).compute()
    per_worker = dask_client.run(_built_here, fresh._shipped()[0])
    assert all(count == 1 for count, _ in per_worker.values())
    assert sum(rows for _, rows in per_worker.values()) == len(test)


def _built_here(identity):
    from willump.persistence import shared

    found = shared(identity)
    return (0, 0) if found is None else (1, found.stats["rows_seen"])


def test_in_a_worker_the_kernels_use_one_thread_unless_told(dask_client, text_job):
    """Dask runs a task per worker thread: threads of willump's own in each would oversubscribe the
    cores. A function given no ``workers`` takes one thread in a worker; one given a number keeps it."""
    _, fast, _, _, ddf = text_job
    default, told = willump.optimize(fast.py_func, cache_size=None), willump.optimize(fast.py_func, cache_size=None, workers=2)
    assert default._executor._workers.count == len(os.sched_getaffinity(0))  # (here, in the client)
    for function, expected in ((default, 1), (told, 2)):
        ddf.map_partitions(function, meta=("score", "f8")).compute()
        counts = dask_client.run(_thread_count_here, function._shipped()[0])
        assert set(counts.values()) == {expected}, counts


def _thread_count_here(identity):
    from willump.persistence import shared

    return shared(identity)._executor._workers.count


def test_top_k_is_the_top_k_of_the_whole_frame(dask_client, text_job):
    _, fast, _, test, ddf = text_job
    for k in (1, 25, 900):
        np.testing.assert_array_equal(willump.dask.top_k(ddf, fast, k), fast.top_k(test, k=k))


def test_top_k_after_fit_keeps_its_precision(dask_client, text_job):
    predict, _, fitted, test, ddf = text_job
    assert fitted.explain().attrs["summary"]["top_k_filter"] == "on"
    exact = best(predict(test), 60)
    found = willump.dask.top_k(ddf, fitted, 60)
    assert len(found) == 60 and len(set(found)) == 60
    assert len(set(found) & set(exact)) / 60 >= 0.95


def test_top_k_breaks_ties_by_position_across_partitions(dask_client):
    """Scores of a few distinct values: the partitions' rankings merge as one ranking would."""
    frame, y, test, ddf = _frames()
    X = frame["message"].str.count(" ").to_numpy()[:, None] * 1.0
    model = LGBMClassifier(n_estimators=3, num_leaves=3, verbose=-1).fit(X, y)

    def coarse(df):
        return model.predict_proba(df["message"].str.count(" ").to_numpy()[:, None] * 1.0)[:, 1]

    fast = willump.optimize(coarse)
    assert len(np.unique(coarse(test))) < 20
    for k in (10, 500, len(test)):
        np.testing.assert_array_equal(willump.dask.top_k(ddf, fast, k), fast.top_k(test, k=k))


def test_top_k_shows_progress(dask_client, text_job, capsys):
    _, fast, _, _, ddf = text_job
    willump.dask.top_k(ddf, fast, 5, progress=True)
    assert f"{PARTITIONS}/{PARTITIONS}" in capsys.readouterr().err


def test_a_client_given_its_schedulers_address(dask_cluster, text_job):
    from distributed import Client

    predict, fast, _, test, ddf = text_job
    with Client(dask_cluster.scheduler_address) as client:
        got = willump.dask.predict(ddf, fast).compute()
        assert willump.dask.stats(fast, client)["rows_seen"] >= len(test)
    np.testing.assert_array_equal(got, predict(test))


def test_without_a_cluster_dasks_own_scheduler_runs_it(text_job):
    import dask

    predict, fast, _, test, ddf = text_job
    with dask.config.set(scheduler="threads"):
        got = willump.dask.predict(ddf, fast).compute()
        assert list(willump.dask.top_k(ddf, fast, 7)) == list(fast.top_k(test, k=7))
    np.testing.assert_array_equal(got, predict(test))
    with pytest.raises(ValueError, match="no distributed client"):
        willump.dask.stats(fast)


def test_what_the_helpers_refuse(dask_client, text_job):
    import dask.dataframe as dd

    _, fast, _, test, ddf = text_job
    with pytest.raises(TypeError, match="dask DataFrame"):
        willump.dask.predict(test, fast)
    with pytest.raises(TypeError, match="willump.optimize"):
        willump.dask.top_k(ddf, fast.py_func, 3)
    with pytest.raises(ValueError, match="positive integer"):
        willump.dask.top_k(ddf, fast, 0)
    empty_first = dd.from_pandas(test.iloc[:0], npartitions=1)
    with pytest.raises(ValueError, match="pass meta="):
        willump.dask.predict(empty_first, fast)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, np.nan]), max_size=12), min_size=1, max_size=5),
       st.integers(1, 70))
def test_merged_rankings_are_one_ranking_of_the_concatenation(batches, k):
    offsets = np.cumsum([0] + [len(batch) for batch in batches[:-1]])
    parts = []
    for offset, batch in zip(offsets, batches):
        scores = np.array(batch, dtype=float)
        top = best(scores, min(k, len(scores))) if len(scores) else np.empty(0, np.intp)
        parts.append((offset, top, scores[top]))
    whole = np.array([score for batch in batches for score in batch], dtype=float)
    positions, scores = merged(parts, k)
    np.testing.assert_array_equal(positions, best(whole, min(k, len(whole))))
    np.testing.assert_array_equal(scores, whole[positions])
