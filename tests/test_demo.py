"""``python -m willump.demo`` from another directory: identical answers, and timings that keep
the first call (compilation, or loading kernels from numba's cache) apart from the steady state."""

import os
import re
import subprocess
import sys
from pathlib import Path

import willump


def run_elsewhere(arguments, cwd, timeout):
    """Run this interpreter in ``cwd`` with the ``willump`` these tests imported first on its path."""
    environment = dict(os.environ, PYTHONPATH=str(Path(willump.__file__).resolve().parent.parent))
    return subprocess.run(
        [sys.executable, *arguments], cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout
    )


def test_the_demo_runs_from_another_directory_and_says_what_it_measured(tmp_path):
    run = run_elsewhere(["-m", "willump.demo"], tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    assert "identical predictions on the batch: True; on 200 single rows: True" in out
    first = re.search(r"^  first call, 2,000 rows: ([\d.]+) s: (.*)$", out, re.MULTILINE)
    assert first, out
    seconds, meaning = float(first.group(1)), first.group(2)
    cold = "numba compiled willump's kernels (a cold cache" in meaning
    warm = "the kernels came from numba's on-disk cache (a warm cache" in meaning
    assert cold == (seconds > 3.0) and warm == (not cold)
    assert re.search(r"^  decoration \(reading the function, building the graph\): [\d.]+ s$", out, re.MULTILINE)
    assert re.search(r"^Steady state, after the first call \(batch: median of 7 runs; single row: median over "
                     r"200 rows, one call each\):$", out, re.MULTILINE)
    assert re.search(r"^  batch of 2,000 rows: original +[\d.]+ ms, willump +[\d.]+ ms \(speed-up [\d.]+x\)$",
                     out, re.MULTILINE)
    assert re.search(r"^  single row: +original +[\d.]+ ms, willump +[\d.]+ ms \(speed-up [\d.]+x\)$",
                     out, re.MULTILINE)
    assert out.index("first call") < out.index("Steady state")
