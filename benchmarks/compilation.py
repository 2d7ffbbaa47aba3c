"""Compilation's own numbers: IFV parallelism, wrapper overhead, cold and warm starts.

    python -m benchmarks.compilation [--out DIR]

1. Two equal-cost compiled IFVs (character TF-IDF of long documents built from
   the Davidson tweets, one lowercased, one not): single-row latency with
   ``workers=1`` over ``workers=2``, for documents of 40, 100 and 250 tweets; the
   two taking turns in blocks of 50 calls (as a serving process finds its caches),
   and again call by call with an undecorated call before each (which evicts the
   vocabularies from the caches).
2. Wrapper overhead: a trivial pipeline (one linear model on one dense row);
   the decorated call's median latency minus its compiled kernel's.
3. Start-up per workload, each in a fresh process: decoration plus first call
   with numba's on-disk cache emptied (cold) and filled (warm).

Medians of interleaved repeated calls, as in the rest of the suite.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LinearRegression, LogisticRegression

import willump
from benchmarks.data import require
from benchmarks.measure import blocked_latencies
from benchmarks.workloads import WORKLOADS
from willump.compile.linear import CompiledLinearModel


def interleaved_medians(functions: dict, calls: int) -> dict:
    """Median seconds per call of each function, calls interleaved so drift favours none."""
    times = {name: [] for name in functions}
    for i in range(calls):
        order = list(functions.items())
        for name, function in order[i % len(order):] + order[: i % len(order)]:
            start = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def parallel_ifvs(tweets_per_document: int, calls: int = 301) -> dict:
    tweets = pd.read_csv(require("hate_speech_davidson/labeled_data.csv"))
    n = tweets_per_document
    documents = [" ".join(tweets["tweet"].iloc[i : i + n]) for i in range(0, len(tweets) - n, n)]
    labels = (tweets["class"].iloc[0 : n * len(documents) : n] != 2).astype(int).to_numpy()
    lowered = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True).fit(documents)
    cased = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, lowercase=False).fit(documents)
    model = LogisticRegression(max_iter=500).fit(
        sp.hstack([lowered.transform(documents), cased.transform(documents)], format="csr"), labels
    )

    def predict(df):
        first = lowered.transform(df["text"])
        second = cased.transform(df["text"])
        return model.predict_proba(sp.hstack([first, second], format="csr"))[:, 1]

    frame = pd.DataFrame({"text": documents})
    one, two = willump.optimize(workers=1)(predict), willump.optimize(workers=2)(predict)
    row = frame.iloc[[len(frame) // 2]]
    for f in (one, two):
        assert np.array_equal(f(row), predict(row))
    # In blocks of 50 calls, taking turns: each finds the caches as a process serving rows leaves them
    # (call by call, each would find the other's copy of the vocabularies in the caches).
    served = {name: ms / 1e3 for name, ms in blocked_latencies({"1": one, "2": two}, [row] * calls).items()}
    # Each call after an undecorated one, which evicts the vocabularies from the caches.
    after = interleaved_medians({"python": lambda: predict(row), "1": lambda: one(row), "2": lambda: two(row)}, calls)
    return {
        "tweets_per_document": n,
        "document_characters": len(row["text"].iloc[0]),
        "python_us": after["python"] * 1e6,
        "workers_1_us": served["1"] * 1e6,
        "workers_2_us": served["2"] * 1e6,
        "ratio_1_over_2": served["1"] / served["2"],
        "after_python_workers_1_us": after["1"] * 1e6,
        "after_python_workers_2_us": after["2"] * 1e6,
        "after_python_ratio_1_over_2": after["1"] / after["2"],
    }


def wrapper_overhead(calls: int = 20001) -> dict:
    rng = np.random.default_rng(0)
    model = LinearRegression().fit(rng.normal(size=(100, 8)), rng.normal(size=100))

    def trivial(X):
        return model.predict(X)

    decorated, kernel = willump.optimize(trivial), CompiledLinearModel(model, "predict")
    row = rng.normal(size=(1, 8))
    assert np.array_equal(decorated(row), trivial(row))
    medians = interleaved_medians(
        {"python": lambda: trivial(row), "kernel": lambda: kernel(row), "decorated": lambda: decorated(row)}, calls
    )
    return {
        "python_us": medians["python"] * 1e6,
        "kernel_us": medians["kernel"] * 1e6,
        "decorated_us": medians["decorated"] * 1e6,
        "overhead_us": (medians["decorated"] - medians["kernel"]) * 1e6,
    }


_START = """
import time, sys
from benchmarks.workloads import WORKLOADS
w = WORKLOADS[sys.argv[1]].build(rows=int(sys.argv[2]))
import willump
start = time.perf_counter()
f = willump.optimize(w.predict)
f(w.test_inputs.iloc[[0]])
print(time.perf_counter() - start)
"""


def start_up(name: str, rows: int = 4000) -> dict:
    """Seconds for decoration plus the first call in a new process: numba cache cold, then warm."""
    cache = Path(willump.__file__).parent / "compile" / "__pycache__"
    seconds = {}
    for state in ("cold", "warm"):
        if state == "cold":
            for entry in cache.glob("*.nb[ic]"):
                entry.unlink()
        run = subprocess.run(
            [sys.executable, "-c", _START, name, str(rows)], capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )
        seconds[state] = float(run.stdout.strip().splitlines()[-1])
    return {"workload": name, "cold_s": seconds["cold"], "warm_s": seconds["warm"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compilation", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    results = {
        "parallel_ifvs": [parallel_ifvs(n) for n in (40, 100, 250)],
        "wrapper_overhead": wrapper_overhead(),
        "start_up": [start_up(name) for name in WORKLOADS],
        "date": time.strftime("%Y-%m-%d"),
        "cores": len(os.sched_getaffinity(0)),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compilation.json").write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
