"""Helpers shared by the tests: a model stand-in, running a function both ways, pipelines defined
from source text, work on several threads at once, and Redis connections that count their attempts."""

import linecache
import threading
import warnings

import numpy as np
import pytest
import redis


class Identity:
    """A model that returns its input: the model call makes willump build a graph and compile."""

    def predict(self, X):
        return X


identity = Identity()


def answers(optimized, *args):
    """(optimized result, original result); or None after checking that both raise the same type."""
    try:
        expected = optimized.py_func(*args)
    except Exception as error:
        with pytest.raises(type(error)):
            optimized(*args)
        return None
    return optimized(*args), expected


def outcome(function, *args):
    """What ``function(*args)`` returns, or (the type, the message) of what it raises."""
    try:
        return function(*args)
    except Exception as error:
        return type(error), str(error)


def assert_same_outcome(got, expected):
    """Two ``outcome``s: the same error, or arrays of the same type, dtype, shape and values."""
    if isinstance(expected, tuple):
        assert got == expected
        return
    assert type(got) is type(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def warned_outcome(function, *args) -> tuple:
    """(``outcome(function, *args)``, the messages of the warnings it emitted, every one)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = outcome(function, *args)
    return result, [str(w.message) for w in caught]


def assert_same_warned_outcome(got: tuple, expected: tuple):
    """Two ``warned_outcome``s: the same outcome and the same warnings."""
    assert_same_outcome(got[0], expected[0])
    assert got[1] == expected[1]


def define(source: str, namespace: dict, filename: str, name: str = "pipeline"):
    """The function ``name`` that ``source`` defines, run in ``namespace``, with the source kept in
    linecache under ``filename`` (as IPython keeps cells) so that willump can read it."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def in_threads(work, items, timeout: float | None = None) -> list:
    """``work(item)`` for every item, each on its own thread, all at once; the threads, once joined
    (waiting up to ``timeout`` seconds for each)."""
    threads = [threading.Thread(target=work, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    return threads


class _Counting:
    """A redis-py connection that counts, in its class's ``attempts``, the sockets it tries to open,
    and keeps in ``timeouts`` the read timeout of each it opened: how long a request on it waits."""

    attempts = 0
    timeouts = ()

    def _connect(self):
        type(self).attempts += 1
        opened = super()._connect()
        type(self).timeouts += (opened.gettimeout(),)
        return opened


class CountedConnection(_Counting, redis.Connection):
    pass


class CountedUnixConnection(_Counting, redis.UnixDomainSocketConnection):
    pass


def text_series(texts, dtype=None, **options):
    """``pd.Series(texts, dtype=dtype, **options)``. With pyarrow installed pandas keeps its str dtypes
    in pyarrow, which cannot hold lone surrogates: such texts are kept as pandas keeps them without
    pyarrow (its Python-backed storage), which is all a user could do with them."""
    import numpy as np
    import pandas as pd

    try:
        return pd.Series(texts, dtype=dtype, **options)
    except UnicodeEncodeError:
        missing = pd.NA if dtype == "string" or getattr(dtype, "na_value", None) is pd.NA else np.nan
        return pd.Series(texts, dtype=pd.StringDtype("python", na_value=missing), **options)


def assert_compiled_as_written(function, inputs, operator: str, assert_same) -> None:
    """``willump.optimize(function)`` answers each of ``inputs`` as ``function`` does (``assert_same``),
    and ``explain_compilation`` shows ``operator``'s call compiled on every one."""
    import willump

    optimized = willump.optimize(function)
    for X in inputs:
        assert_same(optimized(X), function(X))
    table = optimized.explain_compilation()
    row = table[table["operator"] == operator]
    assert len(row) == 1 and row["status"].iloc[0] == "compiled", table
    assert row["compiled_calls"].iloc[0] == len(inputs), table
