"""willump's kernels' on-disk cache (``willump.compile.jit``): what one process compiles, another
loads as it was compiled, whatever order several processes compiling at once save in."""

import itertools
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import willump.compile
from willump.compile import jit

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint32", "float32", "float64"]

MODULE = textwrap.dedent('''
    from willump.compile.jit import njit

    @njit
    def tripled_sum(x):
        total = x[0] * 0
        for i in range(len(x)):
            total += x[i] * 3
        return total
''')

COMPILE = textwrap.dedent('''
    import random, sys
    import numpy as np
    import kernels
    dtypes = sys.argv[2].split(",")
    random.Random(int(sys.argv[1])).shuffle(dtypes)
    for dtype in dtypes:
        kernels.tripled_sum(np.arange(1, 6, dtype=dtype))
''')

LOAD = textwrap.dedent('''
    import sys
    import numpy as np
    import kernels
    for dtype in sys.argv[1].split(","):
        x = np.arange(1, 6, dtype=dtype)
        print(dtype, kernels.tripled_sum(x) == (x * 3).sum(dtype=x.dtype))
    print("hits", sum(kernels.tripled_sum.stats.cache_hits.values()))
''')


def _run(directory: Path, cache: Path, script: str, *args) -> subprocess.Popen:
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join(
        [str(directory), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=directory, env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _index_entries(cache: Path) -> list:
    """(key's argument types, argument types of the code in the file the index names) of each entry."""
    entries = []
    for index in cache.rglob("*.nbi"):
        with open(index, "rb") as f:
            pickle.load(f)  # numba's version
            _, overloads = pickle.loads(f.read())
        for key, name in overloads.items():
            held = pickle.loads((index.parent / name).read_bytes())
            entries.append((str(key[0]), str(held[3].args)))
    return entries


def test_kernels_compiled_by_several_processes_at_once_load_as_they_were_compiled(tmp_path, monkeypatch):
    (tmp_path / "kernels.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))  # (the cached code refers to its module)
    cache = tmp_path / "cache"
    for attempt in range(2):
        compiling = [_run(tmp_path, cache, COMPILE, str(10 * attempt + i), ",".join(DTYPES)) for i in range(4)]
        for process in compiling:
            _, error = process.communicate(timeout=600)
            assert process.returncode == 0, error
        entries = _index_entries(cache)
        assert entries and all(key == held for key, held in entries), entries
    loading = _run(tmp_path, cache, LOAD, ",".join(DTYPES))
    output, error = loading.communicate(timeout=600)
    assert loading.returncode == 0, error
    lines = output.splitlines()
    assert [line.split() for line in lines[:-1]] == [[dtype, "True"] for dtype in DTYPES]
    assert int(lines[-1].split()[1]) > 0  # loaded from the cache, not compiled again


SORTS = textwrap.dedent('''
    import numpy as np
    from willump.compile.jit import njit

    @njit
    def sorted_copy(x):
        y = x.copy()
        y.sort()
        return y

    @njit
    def argsorted(x):
        return np.argsort(x)
''')

COMPILE_AFTER = textwrap.dedent('''
    import re, sys
    import numba
    import numpy as np
    from numba.core.bytecode import FunctionIdentity
    import sorts
    first = next(FunctionIdentity._unique_ids)
    for k in range(int(sys.argv[2])):  # functions compiled before, not cached
        numba.njit(lambda v: v + 1)(k)
    kernel = getattr(sorts, sys.argv[1])
    kernel(np.arange(300)[::-1].copy())
    code = kernel.overloads[kernel.signatures[0]].library.get_llvm_str()
    print(int(re.search(r"9partitionB[0-9]+v([0-9]+)B", code).group(1)) - first)
''')

LOAD_SORTS = textwrap.dedent('''
    import numpy as np
    import sorts
    x = np.random.default_rng(0).integers(0, 1000, 300)
    order = sorts.argsorted(x)
    print((sorts.sorted_copy(x) == np.sort(x)).all(), (np.sort(order) == np.arange(300)).all(),
          (x[order] == np.sort(x)).all())
    print(sum(sorts.sorted_copy.stats.cache_hits.values()), sum(sorts.argsorted.stats.cache_hits.values()))
''')


def _partition_numbers(directory: Path, runs: dict) -> dict:
    """For each kernel, how many functions after its first one a process numbers the quicksort
    partition the kernel compiles, with (cache, functions compiled before it) as ``runs`` gives;
    the processes run at once."""
    started = {kernel: _run(directory, cache, COMPILE_AFTER, kernel, str(offset))
               for kernel, (cache, offset) in runs.items()}
    numbers = {}
    for kernel, process in started.items():
        output, error = process.communicate(timeout=600)
        assert process.returncode == 0, error
        numbers[kernel] = int(output)
    return numbers


def test_code_two_processes_cached_never_calls_the_others_functions(tmp_path):
    """numba names the functions its sort factory makes alike (``partition``) and numbers them by
    the order a process compiles in: a sort compiled in one process and an argsort in another can
    cache two different ``partition``s under one symbol, and a third process loading both links
    each to the one it loaded first (seen: unsorted rows and scores a few ulp apart after two pytest
    workers filled a fresh cache). Here the two are compiled at the same distance from each
    process's first function, which under numba's numbering gives one name to both (without
    ``jit._number_functions_apart`` this test fails: the sort answers unsorted)."""
    (tmp_path / "sorts.py").write_text(SORTS)
    kernels = ("sorted_copy", "argsorted")
    alone = _partition_numbers(tmp_path, {kernel: (tmp_path / f"probe-{kernel}", 0) for kernel in kernels})
    latest = max(alone.values())
    cache = tmp_path / "cache"
    together = _partition_numbers(tmp_path, {kernel: (cache, latest - alone[kernel]) for kernel in kernels})
    assert len(set(together.values())) == 1  # (the two partitions are numbered alike within their processes)
    output, error = _run(tmp_path, cache, LOAD_SORTS).communicate(timeout=600)
    assert output.splitlines() == ["True True True", "1 1"], error


def _interleavings(steps: int):
    """Every order of two processes' ``steps`` file operations each: sequences of 0s and 1s."""
    return [order for order in itertools.product((0, 1), repeat=2 * steps) if sum(order) == steps]


def _save_interleaved(processes: list, order: tuple) -> None:
    """Each (files, key, code) saved on its own thread, their file operations (reading the index,
    writing it, writing a data file) taking turns in ``order``."""
    turn, gate = [0], threading.Condition()

    def gated(number, operation):
        def run(*args):
            with gate:
                assert gate.wait_for(lambda: turn[0] < len(order) and order[turn[0]] == number, timeout=10)
                result = operation(*args)
                turn[0] += 1
                gate.notify_all()
            return result
        return run

    for number, (files, _, _) in enumerate(processes):
        for name in ("_load_index", "_save_index", "_save_data"):
            setattr(files, name, gated(number, getattr(files, name)))
    threads = [threading.Thread(target=files.save, args=(key, code)) for files, key, code in processes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert turn[0] == len(order)


@pytest.mark.parametrize("order", _interleavings(3))
def test_two_processes_saving_at_once_never_name_one_keys_code_for_another(tmp_path, order):
    """numba's numbered files let two processes that both read the index before either wrote it
    take the same number: in some orders the index then names, for one signature, the code the
    other compiled. Here every order leaves each entry naming its own key's code."""
    stamp = ("stamp",)
    processes = [
        (jit._KeyNamedFiles(str(tmp_path), "f-1.py311", stamp), ("int64",), b"code for int64"),
        (jit._KeyNamedFiles(str(tmp_path), "f-1.py311", stamp), ("float64",), b"code for float64"),
    ]
    _save_interleaved(processes, order)
    reader = jit._KeyNamedFiles(str(tmp_path), "f-1.py311", stamp)
    index = reader._load_index()
    assert index  # (an entry the other process's index write dropped is compiled again when asked for)
    for key, name in index.items():
        assert reader._load_data(name) == f"code for {key[0]}".encode()


def test_the_source_stamp_is_the_contents_of_the_compile_package():
    """Kernels inline functions of other modules: a change to any module of the package makes every
    kernel compile anew; the same contents with new modification times (a reinstall) do not."""
    package = Path(willump.compile.__file__).parent
    assert jit._PACKAGE_STAMP == jit._digest_of_files(sorted(package.glob("*.py")))
    from willump.compile import fused

    own, whole = fused.text_scores._cache._cache_file._source_stamp
    assert whole == jit._PACKAGE_STAMP and own == jit._digest_of_files([package / "fused.py"])


def test_a_kernel_file_given_a_new_time_loads_its_code_and_a_new_content_compiles_anew(tmp_path, monkeypatch):
    """pip gives reinstalled files new modification times: the cache still holds for the same code
    (numba's own stamp would not), and not for changed code."""
    module = tmp_path / "kernels.py"
    module.write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    cache = tmp_path / "cache"
    for process in [_run(tmp_path, cache, COMPILE, "0", ",".join(DTYPES))]:
        assert process.wait(timeout=600) == 0, process.stderr.read()
    os.utime(module, (1e9, 1e9))
    output, error = _run(tmp_path, cache, LOAD, "int64").communicate(timeout=600)
    assert output.splitlines() == ["int64 True", "hits 1"], error
    module.write_text(MODULE.replace("x[i] * 3", "x[i] * 3 + 0"))
    output, error = _run(tmp_path, cache, LOAD, "int64").communicate(timeout=600)
    assert output.splitlines() == ["int64 True", "hits 0"], error
