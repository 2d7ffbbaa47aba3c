"""Helpers shared by the tests: a model stand-in, running a function both ways, pipelines defined
from source text, and work on several threads at once."""

import linecache
import threading

import pytest


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
