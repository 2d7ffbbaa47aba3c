"""A self-contained demo: ``python -m willump.demo``.

It generates a small labelled text data set (no download, nothing read from
disk), trains a TF-IDF + logistic regression pipeline the usual way, optimizes
the inference function, prints its transformation graph and checks that the
optimized function returns exactly what the original returns.
"""

import time

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


def main(n: int = 20_000) -> None:
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

    optimized = willump.optimize(predict)
    print(optimized.graph)
    print()
    test, _ = make_messages(2_000, random_state=1)
    for name, function in [("original", predict), ("willump", optimized)]:
        start = time.perf_counter()
        function(test)
        print(f"{name:>8}: {len(test)} rows in {time.perf_counter() - start:.3f} s")
    same = np.array_equal(optimized(test), predict(test))
    one = np.array_equal(optimized(test.iloc[[0]]), predict(test.iloc[[0]]))
    print(f"identical predictions on the batch: {same}; on a single row: {one}")
    print()
    print("calls answered by compiled kernels:")
    print(optimized.explain_compilation()[["line", "operator", "status"]].to_string(index=False))
    if not (same and one):
        raise SystemExit("willump returned a different answer")


if __name__ == "__main__":
    main()
