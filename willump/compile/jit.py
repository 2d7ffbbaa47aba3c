"""numba's ``njit`` with an on-disk cache that processes compiling at once cannot mix up.

numba's cache keeps an index (signature -> data file) and numbered data files. Two
processes compiling different signatures of one function at the same time, as Dask
workers do on a cold cache, can each read the index, take the same free number, and
write: the index then names for one signature the code compiled for another, which a
later process loads and runs on arguments of other types (numba checks nothing on load).
Here a data file is named by a digest of its key (signature, CPU, bytecode) and of the
source stamp, so whatever the interleaving, a name only ever holds the code of its key:
a lost index entry costs a compile, never a wrong kernel.

The source stamp is that of every module of ``willump.compile``, not of the function's
own file alone: kernels inline functions of other modules (``inline="always"``), and
numba would otherwise load code built from an older version of those.
"""

import hashlib
from pathlib import Path

import numba
from numba.core.caching import FunctionCache, IndexDataCacheFile


def _package_stamp() -> tuple:
    """(name, modification time, size) of every module of this package, in name order."""
    here = Path(__file__).parent
    return tuple((p.name, p.stat().st_mtime, p.stat().st_size) for p in sorted(here.glob("*.py")))


_PACKAGE_STAMP = _package_stamp()


class _KeyNamedFiles(IndexDataCacheFile):
    """An index and data files, each data file named by what it holds."""

    def __init__(self, cache_path, filename_base, source_stamp):
        super().__init__(cache_path, filename_base, source_stamp)
        self._base = filename_base

    def save(self, key, data):
        name = f"{self._base}.{_digest(key, self._source_stamp)}.nbc"
        self._save_data(name, data)  # (the data first: an index never names a file not written yet)
        overloads = self._load_index()
        if overloads.get(key) != name:
            overloads[key] = name
            self._save_index(overloads)


def _digest(key, stamp) -> str:
    return hashlib.sha256(repr((key, stamp)).encode()).hexdigest()[:24]


class _KernelCache(FunctionCache):
    """numba's function cache, stamped by the whole package, with key-named data files."""

    def __init__(self, py_func):
        super().__init__(py_func)
        stamp = (self._impl.locator.get_source_stamp(), _PACKAGE_STAMP)
        self._cache_file = _KeyNamedFiles(self._cache_path, self._impl.filename_base, stamp)


def njit(function=None, *, inline: str = "never"):
    """``numba.njit(nogil=True, cache=True)`` with the cache above; ``inline="always"`` for
    functions inlined into their callers (no call, no reference counting per element)."""

    def compiled(function):
        dispatcher = numba.njit(nogil=True, inline=inline)(function)
        dispatcher._cache = _KernelCache(dispatcher.py_func)  # (what Dispatcher.enable_caching sets)
        return dispatcher

    return compiled if function is None else compiled(function)
