"""Vectorizers fused into a linear model (``willump.compile.fused``) give scikit-learn's answers.

Random vectorizer settings, documents and models; each pipeline is decorated and compared
with itself undecorated, for batches and single rows, and the fused kernel must have
answered whenever every vectorizer computes in float64.
"""

import threading
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, note, reject
from hypothesis import strategies as st
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge, SGDClassifier
from sklearn.svm import LinearSVC

import willump
from willump.compile import fused
from willump.compile.forms import Unsupported
from willump.compile.parallel import SERIAL, Workers
from willump.compile.text import CompiledVectorizer
from answers import define, text_series
from test_compile_kernels import (
    BASE_CORPUS, GRID_DOCUMENTS, assert_same_outcome, document_lists, hypothesis_settings, make_vectorizer, outcome,
    vectorizer_configs,
)

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

MODELS = {
    "binary logistic": (lambda: LogisticRegression(max_iter=300), 2, ["predict_proba", "predict", "decision_function"]),
    "3-class logistic": (lambda: LogisticRegression(max_iter=300), 3, ["predict_proba", "decision_function"]),
    "linear svc": (lambda: LinearSVC(), 3, ["predict", "decision_function"]),
    "sgd": (lambda: SGDClassifier(random_state=0), 2, ["decision_function"]),
    "ridge": (lambda: Ridge(), 0, ["predict"]),
    "least squares": (lambda: LinearRegression(), 0, ["predict"]),
}


@st.composite
def fused_vectorizer_configs(draw):
    """Mostly settings the fused kernel takes (float64, or int64 counts), sometimes others (it must not fuse)."""
    if draw(st.integers(0, 4)) == 0:
        return "hashing", dict(
            analyzer=draw(st.sampled_from(["word", "char", "char_wb"])), ngram_range=draw(st.sampled_from([(1, 1), (1, 2), (2, 4)])),
            n_features=draw(st.sampled_from([16, 1024])), alternate_sign=draw(st.booleans()),
            norm=draw(st.sampled_from(["l1", "l2", None])), binary=draw(st.booleans()),
        )
    kind, params = draw(vectorizer_configs())
    if kind == "tfidf" and draw(st.integers(0, 4)):
        params["dtype"] = np.float64
    return kind, params


def _encodable(document: str) -> bool:
    try:
        document.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _vectorizer(kind, params, corpus):
    if kind == "hashing":
        return HashingVectorizer(**params)
    try:
        return make_vectorizer(kind, params).fit(corpus)
    except ValueError:  # an empty vocabulary after pruning
        reject()


def _pipeline(n_vectorizers: int, lower: bool, method: str, namespace: dict):
    """The pipeline as a user writes it, compiled from source kept in linecache (as IPython keeps cells)."""
    lines = ["def pipeline(df):", f"    text = df['text']{'.str.lower()' if lower else ''}"]
    if n_vectorizers == 1:
        lines.append("    X = V0.transform(text)")
    else:
        lines += [f"    block{i} = V{i}.transform(text)" for i in range(n_vectorizers)]
        blocks = ", ".join(f"block{i}" for i in range(n_vectorizers))
        lines.append(f"    X = sp.hstack([{blocks}], format='csr')")
    lines.append(f"    return MODEL.{method}(X)")
    source = "\n".join(lines) + "\n"
    return define(source, namespace, f"<fused pipeline {n_vectorizers} {lower} {method} {id(namespace)}>")


def _fused_calls(optimized) -> int:
    return int(optimized.explain_compilation()["fused_calls"].sum())


@hypothesis_settings(max_examples=120)
@given(
    configs=st.lists(fused_vectorizer_configs(), min_size=1, max_size=3),
    model=st.sampled_from(sorted(MODELS)),
    choice=st.integers(0, 2),
    lower=st.booleans(),
    corpus=document_lists(max_size=4),
    docs=document_lists(min_size=1, max_size=5),
    workers=st.sampled_from([1, 2]),
)
def test_fused_scores_match_scikit_learn(configs, model, choice, lower, corpus, docs, workers):
    training = [d for d in BASE_CORPUS + corpus if _encodable(d)]  # HashingVectorizer raises for lone surrogates
    vectorizers = [_vectorizer(kind, params, training) for kind, params in configs]
    make_model, classes, methods = MODELS[model]
    method = methods[choice % len(methods)]
    X = sp.hstack([v.transform(training) for v in vectorizers], format="csr")
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    y = np.arange(len(training)) % classes if classes else np.linspace(-1, 1, len(training))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence
        fitted = make_model().fit(X, y)
    namespace = {"sp": sp, "MODEL": fitted, **{f"V{i}": v for i, v in enumerate(vectorizers)}}
    pipeline = _pipeline(len(vectorizers), lower, method, namespace)
    optimized = willump.optimize(workers=workers)(pipeline)
    note(f"{configs} {model}.{method} lower={lower}")
    frame = pd.DataFrame({"text": text_series(docs + corpus[:1])})
    for rows in [frame] + [frame.iloc[[i]] for i in range(len(frame))]:
        assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    all_float64 = all(
        (isinstance(v, HashingVectorizer) and v.dtype == np.float64)
        or np.dtype(v.dtype) == np.float64 or (np.dtype(v.dtype) == np.int64 and type(v).__name__ == "CountVectorizer")
        for v in vectorizers
    )
    wide_enough = any(np.dtype(v.dtype) == np.float64 for v in vectorizers)  # else scikit-learn converts, not fused
    # (a HashingVectorizer raises for a lone surrogate, so a batch holding one never fuses; a single row of an
    # encodable document always can)
    hashing = any(isinstance(v, HashingVectorizer) for v in vectorizers)
    fusable = not hashing or any(_encodable(d) for d in docs + corpus[:1])
    if all_float64 and wide_enough and fusable:
        assert _fused_calls(optimized) > 0


@hypothesis_settings(max_examples=80)
@given(
    configs=st.lists(fused_vectorizer_configs(), min_size=2, max_size=3),
    corpus=document_lists(max_size=4),
    docs=document_lists(min_size=1, max_size=4),
    outputs=st.sampled_from([1, 3]),
)
def test_one_row_side_by_side_sums_as_one_after_the_other(configs, corpus, docs, outputs):
    """workers=2 computing one row's vectorizers side by side gives the same bits as the serial kernel."""
    training = [d for d in BASE_CORPUS + corpus if _encodable(d)]
    kernels = []
    for kind, params in configs:
        try:
            kernels.append(CompiledVectorizer(_vectorizer(kind, params, training)))
        except Unsupported:
            reject()
    weights = np.random.default_rng(len(docs)).normal(size=(sum(k.width for k in kernels), outputs))
    computed = []
    original = fused.row_scores
    fused.row_scores = lambda *args: computed.append(1) or original(*args)
    try:
        for document in docs:
            try:
                blocks = [k.defer_lazily([document]) for k in kernels]
            except Unsupported:  # a lone surrogate, for hashing
                continue
            if not fused.fusable_kernels(kernels):
                continue
            one_after_the_other = outcome(lambda: fused.scores(blocks, weights, SERIAL))
            side_by_side = outcome(lambda: fused.scores(blocks, weights, Workers(2), by_vectorizer=True))
            assert_same_outcome(side_by_side, one_after_the_other)
    finally:
        fused.row_scores = original
    note(f"{len(computed)} rows summed side by side")


def test_one_row_side_by_side_runs_on_two_threads():
    """The side-by-side path is taken (each vectorizer on its own thread), not the serial kernel."""
    words = make_vectorizer("tfidf", dict(ngram_range=(1, 2), sublinear_tf=True)).fit(BASE_CORPUS)
    chars = make_vectorizer("tfidf", dict(analyzer="char_wb", ngram_range=(2, 4))).fit(BASE_CORPUS)
    kernels = [CompiledVectorizer(words), CompiledVectorizer(chars)]
    weights = np.random.default_rng(0).normal(size=(kernels[0].width + kernels[1].width, 1))
    threads, workers = set(), Workers(2)
    original = fused.vectorizer_row
    fused.vectorizer_row = lambda *args: threads.add(threading.get_ident()) or original(*args)
    try:
        for document in BASE_CORPUS[:20]:
            blocks = [k.defer_lazily([document]) for k in kernels]
            expected = fused.scores(blocks, weights, SERIAL)
            np.testing.assert_array_equal(fused.scores(blocks, weights, workers, by_vectorizer=True), expected)
    finally:
        fused.vectorizer_row = original
    assert len(threads) == 2 and threading.get_ident() in threads


def test_fused_single_rows_and_long_documents():
    """Documents up to thousands of characters, every one alone, and a count beyond the first sublinear table."""
    words = make_vectorizer("tfidf", dict(ngram_range=(1, 2), sublinear_tf=True)).fit(BASE_CORPUS)
    chars = make_vectorizer("tfidf", dict(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True)).fit(BASE_CORPUS)
    model = LogisticRegression(max_iter=300).fit(
        sp.hstack([words.transform(BASE_CORPUS), chars.transform(BASE_CORPUS)], format="csr"),
        np.arange(len(BASE_CORPUS)) % 2,
    )
    pipeline = _pipeline(2, True, "predict_proba", {"sp": sp, "MODEL": model, "V0": words, "V1": chars})
    optimized = willump.optimize(pipeline)
    documents = GRID_DOCUMENTS + ["cat " * 500]  # 'cat' 500 times: a count beyond 64
    for document in documents:
        row = pd.DataFrame({"text": text_series([document])})
        assert_same_outcome(outcome(lambda: optimized(row)), outcome(lambda: pipeline(row)))
    assert _fused_calls(optimized) >= len(documents) - 1  # (lone surrogates are not str-encodable for hashing only)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.uint8, np.int64])
def test_narrow_integer_counts_wrap_as_scikit_learn_builds_them(dtype):
    """A count of 200 in int8 is -56 in scikit-learn's matrix; fused float64 counts would not wrap."""
    train = ["aa bb cc", "bb dd", "cc aa ee", "dd ee ff"]
    counts = make_vectorizer("count", dict(dtype=dtype)).fit(train)
    weights = make_vectorizer("tfidf", {}).fit(train)
    model = LogisticRegression().fit(sp.hstack([counts.transform(train), weights.transform(train)], format="csr"), [0, 1, 0, 1])
    pipeline = _pipeline(2, False, "decision_function", {"sp": sp, "MODEL": model, "V0": counts, "V1": weights})
    optimized = willump.optimize(pipeline)
    frame = pd.DataFrame({"text": ["aa " * 200 + "bb", "cc dd"]})
    for rows in (frame, frame.iloc[[0]]):
        assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    assert (_fused_calls(optimized) > 0) == (np.dtype(dtype) == np.int64)


def test_vectorizers_with_and_without_stop_words_fuse_together():
    """Their tables differ (one has stop words), yet the fused kernel reads them as one tuple type."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    corpus = ["the cat sat on the mat", "a dog and the cat", "birds fly over the sea", "the sea is blue"]
    words = TfidfVectorizer(stop_words="english").fit(corpus)
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3)).fit(corpus)
    model = LogisticRegression().fit(sp.hstack([words.transform(corpus), chars.transform(corpus)]).tocsr(), [0, 1, 0, 1])
    namespace = {"words": words, "chars": chars, "model": model, "sp": sp}
    predict = define(
        "def predict(df):\n"
        "    X = sp.hstack([words.transform(df['text']), chars.transform(df['text'])]).tocsr()\n"
        "    return model.predict_proba(X)[:, 1]\n",
        namespace, "<stop words fused>", "predict",
    )
    optimized = willump.optimize(predict)
    for rows in (corpus, corpus[1:2], ["the unseen words"]):
        frame = pd.DataFrame({"text": rows})
        np.testing.assert_array_equal(optimized(frame), predict(frame))
    assert _fused_calls(optimized) == 3


_DENSE_VALUES = [0.0, -0.0, 1.0, -1.0, 5e-324, 1e-300, 1e300, 0.1, 1 / 3, 1e15, -1e-15, 7.0]


@st.composite
def dense_blocks(draw, n_rows):
    """Dense blocks (float64, int64 or bool values, many zeros of either sign) for ``n_rows`` documents."""
    blocks = []
    for _ in range(draw(st.integers(1, 2))):
        width = draw(st.integers(0, 3))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        values = rng.normal(size=(n_rows, width)) * 10.0 ** rng.uniform(-3, 3, size=(n_rows, width))
        special = rng.random((n_rows, width)) < 0.4
        values[special] = rng.choice(_DENSE_VALUES, size=int(special.sum()))
        dtype = draw(st.sampled_from([np.float64, np.float64, np.int64, np.bool_]))
        blocks.append(values.astype(dtype))
    return blocks


@hypothesis_settings(max_examples=100)
@given(
    configs=st.lists(fused_vectorizer_configs(), min_size=1, max_size=2),
    docs=document_lists(min_size=1, max_size=4),
    data=st.data(),
    outputs=st.sampled_from([1, 3]),
)
def test_dense_blocks_are_summed_as_scipys_stacked_matrix(configs, docs, data, outputs):
    """Dense blocks anywhere among the vectorizers' give the bits of scipy's product with
    ``sp.hstack(blocks, format="csr")``, whose dense entries are the nonzero ones."""
    kernels, vectorizers = [], []
    for kind, params in configs:
        vectorizer = _vectorizer(kind, params, [d for d in BASE_CORPUS if _encodable(d)])
        try:
            kernels.append(CompiledVectorizer(vectorizer))
        except Unsupported:
            reject()
        vectorizers.append(vectorizer)
    if not fused.fusable_kernels(kernels):
        reject()
    docs = [d for d in docs if _encodable(d)] or ["the cat"]
    dense = data.draw(dense_blocks(len(docs)))
    kinds = data.draw(st.permutations([fused.VECTORIZER] * len(kernels) + [fused.DENSE] * len(dense)))
    vectorizer_blocks, dense_iter = iter(vectorizers), iter(dense)
    stacked = [next(vectorizer_blocks).transform(docs) if k == fused.VECTORIZER else next(dense_iter) for k in kinds]
    widths = [b.shape[1] for b in stacked]
    weights = np.random.default_rng(len(docs)).normal(size=(sum(widths), outputs))
    matrix = sp.hstack(stacked, format="csr")
    if matrix.dtype != np.float64:
        reject()  # (scikit-learn's models convert it first: no program)
    expected = matrix @ weights
    values = np.concatenate([b for b in dense], axis=1, dtype=np.float64)
    order, offsets = fused.block_order(list(zip(kinds, widths)))
    plan = fused.plan_for(kernels, [k.width for k in kernels])
    actual = fused.planned_scores(plan, [docs] * len(kernels), weights, SERIAL, dense=fused.DenseBlocks(values, order, offsets))
    note(f"{kinds} {matrix.toarray()!r}")
    np.testing.assert_array_equal(actual.view(np.uint64), np.asarray(expected).view(np.uint64))
    with pytest.raises(Unsupported):  # a value scikit-learn refuses
        values[0, :] = np.nan
        if values.shape[1]:
            fused.planned_scores(plan, [docs] * len(kernels), weights, SERIAL, dense=fused.DenseBlocks(values, order, offsets))
        else:
            raise Unsupported("no dense column to hold it")
