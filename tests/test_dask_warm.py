"""``willump.dask.warm`` on a real Dask cluster (``distributed.LocalCluster``, 2 worker processes):
every worker builds the function and loads its kernels before the job, so the job loads none."""

import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump
from willump.demo import make_messages


@pytest.fixture(scope="module")
def float32_job(willump_dask):
    """(decorated function, pandas rows, the same as a dask frame): 32-bit TF-IDF characters into a
    logistic regression, kernels of their own (the other Dask tests' are 64-bit)."""
    import dask.dataframe as dd

    frame, y = make_messages(3000, random_state=5)
    chars = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), dtype=np.float32).fit(frame["message"])
    words = TfidfVectorizer(dtype=np.float32).fit(frame["message"])
    model = LogisticRegression(max_iter=500).fit(sp.hstack([chars.transform(frame["message"]),
                                                            words.transform(frame["message"])]).tocsr(), y)

    def predict(df):
        text = df["message"].str.lower()
        return model.predict_proba(sp.hstack([chars.transform(text), words.transform(text)]).tocsr())[:, 1]

    test, _ = make_messages(2000, random_state=6)
    return willump.optimize(predict), test, dd.from_pandas(test, npartitions=6)


def test_warm_builds_the_function_and_its_kernels_on_every_worker_before_the_job(dask_client, float32_job):
    fast, test, ddf = float32_job
    before = dask_client.run(_kernels_loaded)
    seconds = willump.dask.warm(ddf, fast, top_k=True)
    assert set(seconds) == set(dask_client.nthreads()) and all(s > 0 for s in seconds.values())
    warmed = dask_client.run(_kernels_loaded)
    assert all(warmed[worker] > before[worker] for worker in warmed)
    assert all(built for built in dask_client.run(_built_here, fast._shipped()[0]).values())

    scores = ddf.map_partitions(fast, meta=("score", "f8")).compute()
    best = willump.dask.top_k(ddf, fast, 20)
    assert dask_client.run(_kernels_loaded) == warmed  # the job loaded (or compiled) no kernel
    np.testing.assert_array_equal(scores, fast.py_func(test))
    np.testing.assert_array_equal(best, fast.top_k(test, k=20))


def test_warm_refuses_what_it_cannot_run(dask_client, float32_job):
    fast, test, ddf = float32_job
    with pytest.raises(TypeError, match="decorated with willump.optimize"):
        willump.dask.warm(ddf, fast.py_func)
    with pytest.raises(TypeError, match="for a pandas frame"):
        willump.dask.warm(test, fast)


def _kernels_loaded() -> int:
    """The compiled kernels (signatures) willump's numba functions hold in this worker process."""
    from numba.core.registry import CPUDispatcher

    modules = [module for name, module in list(sys.modules.items()) if name.startswith("willump.")]
    return sum(len(value.overloads) for module in modules for value in vars(module).values()
               if isinstance(value, CPUDispatcher))


def _built_here(identity: str) -> bool:
    from willump.persistence import shared

    return shared(identity) is not None
