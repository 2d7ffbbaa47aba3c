"""``python -m willump.demo`` from another directory: identical answers, and timings that keep
the first call (compilation, or loading kernels from numba's cache) apart from the steady state."""

import os
import re
import subprocess
import sys


def run_demo(cwd, cache):
    """``python -m willump.demo`` in ``cwd``, numba caching its kernels in ``cache``; its output."""
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    run = subprocess.run([sys.executable, "-m", "willump.demo"], cwd=cwd, env=environment, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def first_call_line(out: str) -> str:
    found = re.search(r"^  first call, 2,000 rows: ([\d.]+ s: .*)$", out, re.MULTILINE)
    assert found, out
    return found.group(1)


def test_the_demo_runs_from_another_directory_and_says_what_it_measured(tmp_path):
    out = run_demo(tmp_path, tmp_path / "numba cache")  # (a cold cache: nothing compiled there yet)
    assert re.fullmatch(r"[\d.]+ s: numba compiled [1-9]\d* of willump's kernels \(a cold cache.*", first_call_line(out))
    assert "identical predictions on the batch: True; on 200 single rows: True" in out
    assert re.search(r"^  decoration \(reading the function, building the graph\): [\d.]+ s$", out, re.MULTILINE)
    assert re.search(r"^Steady state, after the first call \(batch: median of 7 runs; single row: median over "
                     r"200 rows, one call each\):$", out, re.MULTILINE)
    assert re.search(r"^  batch of 2,000 rows: original +[\d.]+ ms, willump +[\d.]+ ms \(speed-up [\d.]+x\)$",
                     out, re.MULTILINE)
    assert re.search(r"^  single row: +original +[\d.]+ ms, willump +[\d.]+ ms \(speed-up [\d.]+x\)$",
                     out, re.MULTILINE)
    assert out.index("first call") < out.index("Steady state")
    again = run_demo(tmp_path, tmp_path / "numba cache")  # (warm: the kernels the first run cached)
    assert re.fullmatch(r"[\d.]+ s: the kernels came from numba's on-disk cache \(a warm cache.*",
                        first_call_line(again))
