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

Cached code names the functions it calls by numba's number for them, which every process counts
from 1: each process here counts from its own random point (``_number_functions_apart``), so code
cached by different processes never names two functions alike.
"""

import functools
import hashlib
import inspect
import itertools
import random
from pathlib import Path

import numba
from numba.core.bytecode import FunctionIdentity
from numba.core.caching import FunctionCache, IndexDataCacheFile


def _number_functions_apart() -> None:
    """numba numbers the functions it compiles from 1 in every process, and that number is part of
    the symbol names in the code it caches; functions its factories make (its sorts, reductions)
    share a qualified name. Code cached by two processes and loaded into a third can then hold two
    functions under one name, and calls link to either (seen: unsorted CSR columns and scores 1 ulp
    apart after two pytest workers filled a fresh cache). Each process numbers its functions from a
    random point of a range of 2**56 instead: two processes' names then differ."""
    FunctionIdentity._unique_ids = itertools.count(random.SystemRandom().randrange(1 << 40, 1 << 56))


_number_functions_apart()


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
