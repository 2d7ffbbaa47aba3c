"""A self-contained demo: ``python -m willump.demo``.

It generates a small labelled text data set (no download, nothing read from
disk), trains a TF-IDF + logistic regression pipeline the usual way, optimizes
the inference function, prints its transformation graph and checks that the
optimized function returns exactly what the original returns. Timings keep the
first call apart (numba compiles the kernels then, or loads them from its cache on
disk) from the steady state that follows (medians, for a batch and for single rows).
"""

import time
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump

_FRIENDLY = ["thanks", "great", "love", "nice", "happy", "welcome", "cool", "fun"]
_HOSTILE = ["hate", "stupid", "awful", "idiot", "ugly", "worst", "trash", "dumb"]
_NEUTRAL = ["the", "a", "game", "today", "movie", "food", "city", "friend", "work", "🙂", "é"]


def make_messages(n: int, random_state: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Synthetic short messages; label 1 when hostile words outnumber friendly ones."""
    rng = np.random.default_rng(random_state)
    rows, labels = [], []
    for _ in range(n):
        hostile = rng.integers(0, 3)
        friendly = rng.integers(0, 3)
        words = list(rng.choice(_HOSTILE, hostile)) + list(rng.choice(_FRIENDLY, friendly))
        words += list(rng.choice(_NEUTRAL, rng.integers(1, 8)))
        rng.shuffle(words)
        text = " ".join(words)
        rows.append(text.upper() if rng.random() < 0.1 else text)
        labels.append(int(hostile > friendly))
    return pd.DataFrame({"message": rows}), np.array(labels)


REPEATS = 7  # steady-state batch timings: the median of this many runs
SINGLE_ROWS = 200  # steady-state single-row timings: the median over this many rows, one call each


def median_seconds(function, inputs) -> float:
    """Median wall time of one call of ``function`` on each of ``inputs``."""
    times = []
    for argument in inputs:
        started = time.perf_counter()
        function(argument)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def first_call(function, argument) -> tuple[float, int]:
    """(the seconds ``function(argument)`` took, the kernels numba compiled meanwhile): a first
    call compiles willump's kernels on a cold cache and loads them from disk on a warm one."""
    before = _cached_kernels()
    started = time.perf_counter()
    function(argument)
    seconds = time.perf_counter() - started
    return seconds, len(_cached_kernels() - before)


def describe_first_call(seconds: float, compiled: int) -> str:
    """What the first call's time was spent on, as ``first_call`` measured it."""
    if compiled:
        return (f"{seconds:.1f} s: numba compiled {compiled} of willump's kernels (a cold cache, as after an "
                "install); they are now cached on disk, so the next process loads them in about a second")
    return (f"{seconds:.2f} s: the kernels came from numba's on-disk cache (a warm cache; on a cold cache, "
            "right after an install, the first call compiles them, which takes about 10-30 s)")


def _cached_kernels() -> set[Path]:
    """The compiled kernels numba keeps on disk for willump (beside its modules, or under
    NUMBA_CACHE_DIR): one file per compiled signature."""
    import numba

    folders = [Path(willump.__file__).parent] + ([Path(numba.config.CACHE_DIR)] if numba.config.CACHE_DIR else [])
    return {path for folder in folders for path in folder.rglob("*.nbc")}


def main(n: int = 20_000, test_rows: int = 2_000) -> None:
    messages, labels = make_messages(n)
    words = TfidfVectorizer().fit(messages["message"].str.lower())
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), max_features=20_000).fit(
        messages["message"].str.lower()
    )

    def features(df):
        text = df["message"].str.lower()
        lengths = np.log1p(df["message"].str.len().to_numpy()).reshape(-1, 1)
        return sp.hstack([words.transform(text), chars.transform(text), sp.csr_matrix(lengths)], format="csr")

    model = LogisticRegression(max_iter=1000).fit(features(messages), labels)

    def predict(df):
        text = df["message"].str.lower()
        word_features = words.transform(text)
        char_features = chars.transform(text)
        lengths = np.log1p(df["message"].str.len().to_numpy()).reshape(-1, 1)
        X = sp.hstack([word_features, char_features, sp.csr_matrix(lengths)], format="csr")
        return model.predict(X)

    started = time.perf_counter()
    optimized = willump.optimize(predict)
    decoration = time.perf_counter() - started
    print(optimized.graph)
    print()
    test, _ = make_messages(test_rows, random_state=1)
    rows = [test.iloc[[i]] for i in range(min(SINGLE_ROWS, len(test)))]
    first_seconds, compiled = first_call(optimized, test)
    same = np.array_equal(optimized(test), predict(test))
    one = all(np.array_equal(optimized(row), predict(row)) for row in rows)
    print("Start-up (once per process, not per call):")
    print(f"  decoration (reading the function, building the graph): {decoration:.2f} s")
    print(f"  first call, {len(test):,} rows: {describe_first_call(first_seconds, compiled)}")
    print()
    batch = {name: median_seconds(f, [test] * REPEATS) for name, f in [("original", predict), ("willump", optimized)]}
    single = {name: median_seconds(f, rows) for name, f in [("original", predict), ("willump", optimized)]}
    print(f"Steady state, after the first call (batch: median of {REPEATS} runs; single row: median over "
          f"{len(rows)} rows, one call each):")
    print(f"  batch of {len(test):,} rows: original {batch['original'] * 1e3:8.2f} ms, "
          f"willump {batch['willump'] * 1e3:8.2f} ms (speed-up {batch['original'] / batch['willump']:.1f}x)")
    print(f"  single row:        original {single['original'] * 1e3:8.3f} ms, "
          f"willump {single['willump'] * 1e3:8.3f} ms (speed-up {single['original'] / single['willump']:.1f}x)")
    print()
    print(f"identical predictions on the batch: {same}; on {len(rows)} single rows: {one}")
    print()
    print("calls answered by compiled kernels:")
    print(optimized.explain_compilation()[["line", "operator", "status"]].to_string(index=False))
    if not (same and one):
        raise SystemExit("willump returned a different answer")


if __name__ == "__main__":
    main()
