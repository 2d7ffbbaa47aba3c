"""Helpers of the Dask tests of tables and faults: a decorated function reading a feature table,
frames to score (pandas and Dask), the scores of a job, and the undecorated function's answers
partition by partition in this process. Imported by worker processes too (for what tests define
here by reference), so it imports nothing a worker lacks."""

import dask.dataframe as dd
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

import willump
import willump.dask

PARTITIONS = 10  # (more than twice the workers: some worker runs several tasks of a job)
IDIOMS = ["map_partitions", "willump.dask.predict"]
USERS = pd.DataFrame({
    "userId": np.arange(600),
    "age": np.arange(600, dtype=np.int64) % 61 + 15,
    "score": np.linspace(-2.0, 3.0, 600),
    "ratio": (np.arange(600) % 7 / 7).astype(np.float32),
})


def make_model() -> LogisticRegression:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)) * [10, 1, 0.3, 1]
    return LogisticRegression(max_iter=1000).fit(X, (X[:, 1] + X[:, 3] > 0).astype(int))


def make_predict(users, model, **options):
    """A function defined in a function, so cloudpickle carries it by value with its table and model."""

    @willump.optimize(**options)
    def predict(df):
        u = users.lookup(df["userId"])
        X = np.hstack([u.to_numpy(dtype=float), df[["x"]].to_numpy(dtype=float)])
        return model.predict_proba(np.nan_to_num(X))[:, 1]

    return predict


def make_frame(rows: int = 2_000, seed: int = 1, ids=range(0, 340)):
    """(a pandas frame, the same frame as a Dask one): user ids drawn from ``ids`` repeat within
    and across partitions (by default some, 300 and up, are not in ``USERS[:300]``)."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"userId": rng.integers(ids.start, ids.stop, rows), "x": rng.normal(size=rows)},
                      index=pd.RangeIndex(rows) * 3 + 7)
    return df, dd.from_pandas(df, npartitions=PARTITIONS, sort=False)


def partitions(ddf) -> list:
    return [ddf.partitions[i].compute(scheduler="sync") for i in range(ddf.npartitions)]


def one_process(func, ddf) -> pd.Series:
    """The undecorated function's answers, partition by partition, in this process."""
    return pd.concat([pd.Series(func.py_func(part), index=part.index, name="prediction")
                      for part in partitions(ddf)])


def scores(idiom: str, ddf, predict):
    """The lazy scores of every row: the idiom users write (``predict`` returns an array per
    partition, which Dask concatenates) or willump.dask.predict (a Series with ``ddf``'s index).
    ``meta`` is given, so that nothing runs before the job."""
    meta = pd.Series(dtype=float, name="prediction")
    if idiom == "map_partitions":
        return ddf.map_partitions(predict, meta=meta)
    return willump.dask.predict(ddf, predict, meta=meta)


def as_series(computed, df: pd.DataFrame) -> pd.Series:
    """A job's computed scores as a Series: an array (the idiom's) gets the rows' index, checking
    first that it has one score per row (a Series keeps its own index, to be compared)."""
    if isinstance(computed, pd.Series):
        return computed
    assert isinstance(computed, np.ndarray) and computed.shape == (len(df),)
    return pd.Series(computed, index=df.index, name="prediction")


def scored(idiom: str, ddf, df, predict) -> pd.Series:
    """The scores of ``df`` (``ddf``'s rows) computed on the cluster, as a Series."""
    return as_series(scores(idiom, ddf, predict).compute(), df)


def assert_same_scores(got: pd.Series, want: pd.Series) -> None:
    pd.testing.assert_series_equal(got, want, check_exact=True)
