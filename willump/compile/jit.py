"""numba's ``njit`` with an on-disk cache that processes compiling at once cannot mix up.

numba's cache keeps an index (signature -> data file) and numbered data files. Two
processes compiling different signatures of one function at the same time, as Dask
workers do on a cold cache, can each read the index, take the same free number, and
write: the index then names for one signature the code compiled for another, which a
later process loads and runs on arguments of other types (numba checks nothing on load).
Here a data file is named by a digest of its key (signature, CPU, bytecode) and of the
source stamp, so whatever the interleaving, a name only ever holds the code of its key:
a lost index entry costs a compile, never a wrong kernel.

The source stamp is a digest of the *contents* of the function's file and of every module
of ``willump.compile``, where numba's is the modification time and size of the function's
own file. Kernels inline functions of other modules (``inline="always"``), so numba would
load code built from an older version of those; and reinstalling the same code (pip gives
every file a new modification time) would make every kernel compile again.
"""

import functools
import hashlib
import inspect
from pathlib import Path

import numba
from numba.core.caching import FunctionCache, IndexDataCacheFile


def _digest_of_files(paths) -> str:
    hasher = hashlib.sha256()
    for path in paths:
        hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


_PACKAGE_STAMP = _digest_of_files(sorted(Path(__file__).parent.glob("*.py")))  # this package's modules


@functools.cache
def _digest_of_module(path: str) -> str:
    """A module's digest, read once however many kernels it defines."""
    return _digest_of_files([Path(path)])


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
        stamp = (_digest_of_module(inspect.getsourcefile(py_func)), _PACKAGE_STAMP)
        self._cache_file = _KeyNamedFiles(self._cache_path, self._impl.filename_base, stamp)


def njit(function=None, *, inline: str = "never"):
    """``numba.njit(nogil=True, cache=True)`` with the cache above; ``inline="always"`` for
    functions inlined into their callers (no call, no reference counting per element)."""

    def compiled(function):
        dispatcher = numba.njit(nogil=True, inline=inline)(function)
        dispatcher._cache = _KernelCache(dispatcher.py_func)  # (what Dispatcher.enable_caching sets)
        return dispatcher

    return compiled if function is None else compiled(function)
