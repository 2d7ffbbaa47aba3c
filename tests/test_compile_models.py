"""Naive Bayes, ridge classifiers, ``TfidfTransformer`` and stop words, compiled exactly.

Property tests draw inputs with hypothesis and compare each kernel with the scikit-learn
call it stands for (values to the bit, dtype, shape, sparse format); the pipelines of
scikit-learn's "Working With Text Data" tutorial, decorated, on the real SMS and BBC data
must return what they return with every step compiled.
"""

import csv
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, note, reject
from hypothesis import strategies as st
from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer, TfidfTransformer, TfidfVectorizer
from sklearn.linear_model import RidgeClassifier, RidgeClassifierCV, SGDClassifier
from sklearn.naive_bayes import ComplementNB, MultinomialNB
from sklearn.pipeline import Pipeline

import willump
from benchmarks.data import require
from willump.compile import bayes, fused, registry
from willump.compile.forms import Unsupported
from willump.compile.text import CompiledVectorizer
from willump.compile.tfidf import CompiledTfidfTransformer
from tests.test_compile_kernels import (
    BASE_CORPUS, assert_same_array, assert_same_csr, assert_same_outcome, document_lists, hypothesis_settings, outcome,
)

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")
WIDTH = 12
NB_METHODS = bayes.METHODS[MultinomialNB]


def kernel(method):
    found, why = registry.kernel_for(method)
    assert why is None, why
    return found


@st.composite
def count_matrices(draw, n_rows, width=WIDTH, dtypes=(np.int64, np.int32, np.float64, np.float32, bool)):
    """CSR matrices of counts (or of floats) of a drawn dtype, some as sparse arrays."""
    dtype = draw(st.sampled_from(dtypes))
    mask = np.array(draw(st.lists(st.booleans(), min_size=n_rows * width, max_size=n_rows * width))).reshape(n_rows, width)
    values = draw(st.lists(st.integers(1, 40), min_size=n_rows * width, max_size=n_rows * width))
    dense = (np.array(values).reshape(n_rows, width) * mask).astype(dtype)
    if np.dtype(dtype).kind == "f" and draw(st.booleans()):
        dense = dense * draw(st.floats(0.01, 3.0))
    return draw(st.sampled_from([sp.csr_matrix, sp.csr_array]))(dense.astype(dtype))


@st.composite
def naive_bayes_models(draw):
    kind = draw(st.sampled_from([MultinomialNB, ComplementNB]))
    params = {"alpha": draw(st.sampled_from([1.0, 0.01, 0.5])), "fit_prior": draw(st.booleans())}
    if kind is ComplementNB:
        params["norm"] = draw(st.booleans())
    n_classes = draw(st.integers(1, 4))
    labels = draw(st.sampled_from([np.arange(n_classes), np.array(["ham", "spam", "eggs", "bacon"][:n_classes])]))
    X = draw(count_matrices(n_rows=12, dtypes=(np.int64, np.float64)))
    y = labels[np.arange(12) % n_classes]
    return kind(**params).fit(X, y)


@hypothesis_settings(max_examples=100)
@given(model=naive_bayes_models(), method=st.sampled_from(NB_METHODS), n_rows=st.integers(1, 6), data=st.data())
def test_naive_bayes_random_inputs(model, method, n_rows, data):
    X = data.draw(count_matrices(n_rows))
    note(f"{model!r} {method} {X.dtype} {type(X).__name__}")
    compiled = kernel(getattr(model, method))
    assert_same_outcome(outcome(lambda: compiled(X)), outcome(lambda: getattr(model, method)(X)))
    dense = X.toarray().astype(np.float64)
    assert_same_outcome(outcome(lambda: compiled(dense)), outcome(lambda: getattr(model, method)(dense)))


@hypothesis_settings(max_examples=40)
@given(model=naive_bayes_models(), method=st.sampled_from(NB_METHODS), docs=document_lists(min_size=1))
def test_naive_bayes_fused_with_vectorizers(model, method, docs):
    """Documents in, the method's answer out, without the count rows: scikit-learn's bits."""
    words = CountVectorizer(max_features=7).fit(BASE_CORPUS)
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3), max_features=WIDTH - 7).fit(BASE_CORPUS)
    vectorizers = [CompiledVectorizer(words), CompiledVectorizer(chars)]
    widths = [v.width for v in vectorizers]
    compiled = kernel(getattr(model, method))
    assert compiled.fuses(vectorizers)
    X = sp.hstack([words.transform(docs), chars.transform(docs)], format="csr")
    expected = getattr(model, method)(X)
    assert_same_array(compiled.from_texts(fused.plan_for(vectorizers, widths), [docs, docs]), expected)


def test_naive_bayes_refuses_what_it_does_not_reproduce():
    X = sp.csr_matrix(np.arange(24).reshape(4, 6) % 5)
    model = MultinomialNB().fit(X, [0, 1, 0, 1])
    compiled = kernel(model.predict_proba)
    for wrong in (X[:, :5], X.astype(np.complex128), X.tocsc(), X.astype(np.float64) * np.nan):
        with pytest.raises(Unsupported):
            compiled(wrong)
    model.fit(X, [0, 1, 2, 2])  # refitted: the kernel is rebuilt
    assert not compiled.still_valid()
    assert registry.kernel_for(MultinomialNB().predict)[0] is None  # not fitted


@st.composite
def ridge_classifiers(draw):
    n_classes = draw(st.integers(2, 4))
    X = draw(count_matrices(n_rows=16, dtypes=(np.float64,)))
    y = np.array(["a", "b", "c", "d"])[np.arange(16) % n_classes]
    if draw(st.booleans()):
        return RidgeClassifier(alpha=draw(st.sampled_from([1.0, 0.1])), fit_intercept=draw(st.booleans())).fit(X, y)
    return RidgeClassifierCV(alphas=(0.1, 1.0, 10.0)).fit(X.toarray(), y)


@hypothesis_settings(max_examples=120)
@given(model=ridge_classifiers(), method=st.sampled_from(["predict", "decision_function"]), n_rows=st.integers(1, 6),
       data=st.data())
def test_ridge_classifiers_random_inputs(model, method, n_rows, data):
    X = data.draw(count_matrices(n_rows, dtypes=(np.float64,)))
    compiled = kernel(getattr(model, method))
    for given_X in (X, X.toarray()):
        assert_same_outcome(outcome(lambda: compiled(given_X)), outcome(lambda: getattr(model, method)(given_X)))


def test_ridge_classifier_on_multilabel_targets_runs_as_written():
    X = np.eye(4)
    model = RidgeClassifier().fit(X, np.array([[1, 0], [0, 1], [1, 1], [0, 0]]))
    assert registry.kernel_for(model.predict)[0] is None


def test_sgd_classifier_with_string_labels_is_compiled():
    X = sp.csr_matrix(np.eye(6))
    model = SGDClassifier(random_state=0).fit(X, ["spam", "ham", "eggs"] * 2)
    assert_same_array(kernel(model.predict)(X), model.predict(X))


# --- TfidfTransformer -------------------------------------------------------------------

TRANSFORMER_OPTIONS = st.fixed_dictionaries({
    "norm": st.sampled_from(["l2", "l1", None]), "use_idf": st.booleans(), "smooth_idf": st.booleans(),
    "sublinear_tf": st.booleans(),
})
COUNT_OPTIONS = st.fixed_dictionaries({
    "ngram_range": st.sampled_from([(1, 1), (1, 2), (2, 3)]), "binary": st.booleans(),
    "dtype": st.sampled_from([np.int64, np.int32, np.float64, np.float32]),
    "analyzer": st.sampled_from(["word", "word", "char_wb"]),
    "stop_words": st.sampled_from([None, None, "english", ["the", "cat", "ab"]]),
})


def fitted_pair(count_options, transformer_options, corpus):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            counts = CountVectorizer(**count_options).fit(corpus)
        except ValueError:  # an empty vocabulary
            reject()
        return counts, TfidfTransformer(**transformer_options).fit(counts.transform(corpus))


@hypothesis_settings(max_examples=200)
@given(count_options=COUNT_OPTIONS, transformer_options=TRANSFORMER_OPTIONS, docs=document_lists(min_size=1))
def test_tfidf_transformer_after_count_rows(count_options, transformer_options, docs):
    """Lazy count rows (weighed as the equivalent TfidfVectorizer) and computed ones: scikit-learn's matrix."""
    counts, transformer = fitted_pair(count_options, transformer_options, BASE_CORPUS)
    counting, weighing = CompiledVectorizer(counts), kernel(transformer.transform)
    expected = outcome(lambda: transformer.transform(counts.transform(docs)))
    assert_same_outcome(outcome(lambda: weighing.defer(counting.defer_lazily(docs)).materialize()), expected)
    if np.dtype(count_options["dtype"]).kind == "i":  # integer counts, already computed
        assert_same_outcome(outcome(lambda: weighing(counting(docs))), expected)


@hypothesis_settings(max_examples=60)
@given(count_options=COUNT_OPTIONS, transformer_options=TRANSFORMER_OPTIONS, docs=document_lists(min_size=1),
       method=st.sampled_from(NB_METHODS))
def test_tfidf_transformer_fuses_into_naive_bayes(count_options, transformer_options, docs, method):
    counts, transformer = fitted_pair(count_options, transformer_options, BASE_CORPUS)
    model = MultinomialNB().fit(transformer.transform(counts.transform(BASE_CORPUS)), np.arange(len(BASE_CORPUS)) % 3)
    rows = kernel(transformer.transform).defer(CompiledVectorizer(counts).defer_lazily(docs))
    compiled = kernel(getattr(model, method))
    expected = outcome(lambda: getattr(model, method)(transformer.transform(counts.transform(docs))))
    assert_same_outcome(outcome(lambda: compiled(rows)), expected)
    if expected[0] == "value" and rows.dtype == np.float64:
        assert compiled.fused_calls == 1  # the rows were never built


def test_tfidf_transformer_refuses_what_it_does_not_reproduce():
    counts, transformer = fitted_pair({}, {"sublinear_tf": True}, BASE_CORPUS)
    compiled = CompiledTfidfTransformer(transformer)
    X = counts.transform(BASE_CORPUS)
    for wrong in (X.astype(np.float64), X[:, :-1], X.toarray(), X.tocsc(), sp.csr_matrix((0, X.shape[1]), dtype=np.int64)):
        with pytest.raises(Unsupported):
            compiled(wrong)
    zero = X.copy()
    zero.data[0] = 0  # a stored zero: log(0) in scikit-learn
    with pytest.raises(Unsupported):
        compiled(zero)
    with pytest.raises(Unsupported):
        compiled.paired_with(CompiledVectorizer(TfidfVectorizer().fit(BASE_CORPUS)))
    with pytest.raises(Unsupported):
        CompiledTfidfTransformer(TfidfTransformer())


# --- stop words -------------------------------------------------------------------------

@hypothesis_settings(max_examples=150)
@given(
    kind=st.sampled_from([CountVectorizer, TfidfVectorizer, HashingVectorizer]),
    stop_words=st.sampled_from(["english", ["the", "cat", "ab", "\u03c3\u03bf\u03c6\u03b9\u03b1\u03c2", "x1", 3]]),
    ngram_range=st.sampled_from([(1, 1), (1, 2), (2, 3), (1, 4)]), lowercase=st.booleans(),
    docs=document_lists(min_size=1),
)
def test_stop_words_are_removed_before_n_grams(kind, stop_words, ngram_range, lowercase, docs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vectorizer = kind(stop_words=stop_words, ngram_range=ngram_range, lowercase=lowercase)
        if kind is not HashingVectorizer:
            try:
                vectorizer.fit(BASE_CORPUS + docs)
            except ValueError:
                reject()
    compiled = CompiledVectorizer(vectorizer)
    actual, expected = outcome(lambda: compiled(docs)), outcome(lambda: vectorizer.transform(docs))
    if isinstance(actual[1], Unsupported):  # hashing refuses any lone surrogate (the call as written answers)
        assert kind is HashingVectorizer and any(0xD800 <= ord(c) <= 0xDFFF for doc in docs for c in doc)
    else:
        assert_same_outcome(actual, expected)


# --- the tutorial's pipelines, decorated, on real data ------------------------------------

PIPE = None


def proba(df):
    return PIPE.predict_proba(df["text"])[:, 1]


def labels(df):
    return PIPE.predict(df["text"])


def sms_messages():
    frame = pd.read_csv(require("sms_spam/SMSSpamCollection"), sep="\t", header=None, names=["label", "text"],
                        quoting=csv.QUOTE_NONE)
    return frame, (frame["label"] == "spam").to_numpy().astype(int)


def bbc_articles():
    frame = pd.read_csv(require("bbc_news/bbc-text.csv"))
    return frame, frame["category"].to_numpy()


PIPELINES = {
    "sms count tfidf multinomial": (sms_messages, proba, lambda: Pipeline([
        ("vect", CountVectorizer()), ("tfidf", TfidfTransformer()), ("clf", MultinomialNB())])),
    "bbc tfidf stop words ridge": (bbc_articles, labels, lambda: Pipeline([
        ("tfidf", TfidfVectorizer(stop_words="english")), ("clf", RidgeClassifier())])),
    "bbc count stop words sublinear complement": (bbc_articles, labels, lambda: Pipeline([
        ("vect", CountVectorizer(stop_words="english")), ("tfidf", TfidfTransformer(sublinear_tf=True)),
        ("clf", ComplementNB())])),
    "bbc tutorial sgd": (bbc_articles, labels, lambda: Pipeline([
        ("vect", CountVectorizer()), ("tfidf", TfidfTransformer()),
        ("clf", SGDClassifier(alpha=1e-3, random_state=42, max_iter=5, tol=None))])),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_tutorial_pipelines_are_exact_and_compiled(name, datasets):
    global PIPE
    load, function, build = PIPELINES[name]
    frame, targets = load()
    n = len(frame) * 2 // 3
    PIPE = build().fit(frame["text"][:n], targets[:n])
    test = frame.iloc[n:]
    with warnings.catch_warnings():
        warnings.simplefilter("error", willump.WillumpWarning)
        optimized = willump.optimize(function)
    for rows in (test, test.iloc[[0]], test.iloc[[7]], test.iloc[[1]]):
        assert_same_array(optimized(rows), function(rows))
    table = optimized.explain_compilation()
    assert len(table) == len(PIPE.steps) and (table["status"] == "compiled").all(), table
    assert (table["whole_calls"] >= 3).all(), table  # single rows: one fused program for the whole call


def test_a_stop_list_edited_in_place_rebuilds_the_kernel():
    vectorizer = CountVectorizer(stop_words=["the", "cat"], ngram_range=(1, 2)).fit(BASE_CORPUS)
    compiled = CompiledVectorizer(vectorizer)
    assert compiled.still_valid()
    vectorizer.stop_words.append("sat")
    assert not compiled.still_valid()
    assert_same_csr(CompiledVectorizer(vectorizer)(BASE_CORPUS), vectorizer.transform(BASE_CORPUS))
