"""Property-based tests: every compiled kernel returns exactly what the Python call returns.

The kernels (``willump.compile``) promise bit-identical answers: the same sparse
type, shape, index arrays and dtypes, and the same values, or ``Unsupported``
so the original call runs instead. Each test here draws inputs with
hypothesis (derandomized, so runs are repeatable) or sweeps an option grid,
and compares the kernel with the scikit-learn / scipy call it replaces, both
directly and end to end through ``willump.optimize``.
"""

import itertools
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.special import expit
from hypothesis import HealthCheck, given, note, reject, settings
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import (
    LinearRegression,
    LogisticRegression,
    Ridge,
    SGDClassifier,
)
from sklearn.svm import LinearSVC

import willump
from answers import text_series
from willump.compile import registry
from willump.compile.forms import Unsupported
from willump.compile.linear import CompiledLinearModel
from willump.compile.parallel import Workers
from willump.compile.text import CompiledVectorizer

HSTACK = registry.FUNCTION_KERNELS[sp.hstack]  # the kernel a call site uses for scipy.sparse.hstack

pytestmark = [
    pytest.mark.filterwarnings("ignore::willump.WillumpWarning"),
    pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning"),
]


def hypothesis_settings(max_examples):
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


# --- comparing answers ------------------------------------------------------------------


def _ulps(a, b):
    """Largest distance in units in the last place between two float arrays of one shape."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind != "f" or a.shape != b.shape:
        return None
    signed = {4: np.int32, 8: np.int64}[a.dtype.itemsize]

    def ordered(x):
        i = x.view(signed).astype(np.int64)
        return np.where(i < 0, np.iinfo(signed).min - i, i)

    return int(np.abs(ordered(a) - ordered(b)).max(initial=0))


def assert_same_csr(actual, expected, context=""):
    """Same sparse type, shape, indptr / indices / data arrays and their dtypes, values exactly equal."""
    assert type(actual) is type(expected), f"{context}type {type(actual).__name__} != {type(expected).__name__}"
    assert actual.shape == expected.shape, f"{context}shape {actual.shape} != {expected.shape}"
    for name in ("indptr", "indices", "data"):
        a, e = getattr(actual, name), getattr(expected, name)
        assert a.dtype == e.dtype, f"{context}{name} dtype {a.dtype} != {e.dtype}"
    assert np.array_equal(actual.indptr, expected.indptr), f"{context}indptr differs"
    assert np.array_equal(actual.indices, expected.indices), f"{context}indices differ"
    if not np.array_equal(actual.data, expected.data):
        raise AssertionError(
            f"{context}data differ (max {_ulps(actual.data, expected.data)} ulp): "
            f"kernel {actual.data[:8]!r}... python {expected.data[:8]!r}..."
        )


def assert_same_array(actual, expected, context=""):
    """Same type, dtype, shape; values equal (NaN where the Python answer has NaN)."""
    assert type(actual) is type(expected), f"{context}type {type(actual).__name__} != {type(expected).__name__}"
    assert actual.dtype == expected.dtype, f"{context}dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{context}shape {actual.shape} != {expected.shape}"
    equal_nan = expected.dtype.kind in "fc"
    if not np.array_equal(actual, expected, equal_nan=equal_nan):
        raise AssertionError(f"{context}values differ (max {_ulps(actual, expected)} ulp)\n{actual!r}\n{expected!r}")


def outcome(call):
    """('value', result) or ('raised', exception)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "value", call()
    except Exception as error:  # noqa: BLE001 - compared below
        return "raised", error


def assert_same_outcome(actual, expected):
    """The same value, or an exception of the same type with the same message."""
    kind, value = actual
    expected_kind, expected_value = expected
    assert kind == expected_kind, f"optimized: {kind} {value!r}; original: {expected_kind} {expected_value!r}"
    if kind == "raised":
        assert type(value) is type(expected_value) and str(value) == str(expected_value), (value, expected_value)
    elif sp.issparse(expected_value):
        assert_same_csr(value, expected_value)
    else:
        assert_same_array(value, expected_value)


# --- text -------------------------------------------------------------------------------

WHITESPACE = [
    " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0",
    "\u1680", "\u2000", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
]
PUNCTUATION = list(".,;:!?-'\"()[]{}/\\@#&*+=<>|~`^%$") + ["\u2026", "\u2014", "\xbf", "\xa1"]
TRICKY = [
    "\u03a3", "\u03c3", "\u03c2", "\u0130", "\u0131", "I", "i", "\xdf", "\u1e9e", "\u01c5", "\u01c8",
    "\u212a", "\u212b", "\ufb01", "\u0390", "\u03a9", "\u0301", "\u0307", "\u0345", "e\u0301", "\u4e2d",
    "\u6587", "\u0663", "\xb2", "\xbd", "\u216b", "_", "\U0001f600", "\U0001f44d\U0001f3fd",
    "\U0001f1eb\U0001f1f7", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u200b", "\u200d", "\ufeff",
    "\ud800", "\udbff", "\udc00", "\udfff", "\ud83d\ude00", "\U0001d400", "\x00", "\x7f",
]
WORDS = [
    "the", "The", "THE", "cat", "CAT", "Cat", "ab", "a", "x1", "42", "\u0663\u0664", "a_b", "__",
    "\u03a3\u039f\u03a6\u0399\u0391\u03a3", "\u03c3\u03bf\u03c6\u03b9\u03b1\u03c2", "\u039f\u0394\u039f\u03a3",
    "\u0130STANBUL", "istanbul", "na\xefve", "nai\u0308ve", "stra\xdfe", "STRASSE", "\u65e5\u672c\u8a9e",
    "e\u0301te\u0301", "\u01c5emal", "\u212aelvin", "\U0001f600\U0001f600", "don't", "well-known",
]

_token = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(TRICKY),
    st.text(alphabet="abcAB\u03a3\u03c3\u0130\u0131_1", min_size=1, max_size=6),
    st.characters(),  # any code point but a surrogate
    st.characters(categories=["Cs"]),  # a lone surrogate
)
_separator = st.one_of(
    st.sampled_from(WHITESPACE),
    st.text(alphabet=WHITESPACE, min_size=2, max_size=4),
    st.sampled_from(PUNCTUATION),
)
_pieces = st.lists(st.one_of(_token, _token, _separator), max_size=24).map("".join)
_short_words = st.lists(  # one- to three-character words: whole-word n-grams of char_wb
    st.text(alphabet="abcxy\u03a3\u0130_1\U0001f600\xdf", min_size=1, max_size=3), max_size=10
).flatmap(lambda words: st.sampled_from(WHITESPACE).map(lambda space: space.join(words)))
documents = st.one_of(_pieces, _pieces, _short_words)
long_documents = st.builds(
    lambda text, n: ((text + " ") * (n // (len(text) + 1) + 1))[:n], documents, st.integers(1000, 4000)
)


@st.composite
def document_lists(draw, min_size=0, max_size=6):
    docs = draw(st.lists(st.one_of(documents, st.just("")), min_size=min_size, max_size=max_size))
    if draw(st.integers(0, 4)) == 0:
        docs.insert(draw(st.integers(0, len(docs))), draw(long_documents))
    return docs


BASE_CORPUS = [
    "The cat sat on the mat. THE CAT!",
    "\u03a3\u039f\u03a6\u0399\u0391\u03a3 \u03c3\u03bf\u03c6\u03b9\u03b1\u03c2 \u039f\u0394\u039f\u03a3 \u03a3",
    "\u0130STANBUL istanbul \u0131I na\xefve nai\u0308ve stra\xdfe STRASSE",
    "the\tcat\n\nsat\x0b\x1c on\x85the\xa0mat\u2028\u3000the",
    "x1 42 \u0663\u0664 a_b __ ab a b c \U0001f600\U0001f600 \U0001f44d\U0001f3fd",
    "don't well-known \u65e5\u672c\u8a9e e\u0301te\u0301 \u01c5emal \u212aelvin",
    "cat  cat   cat\t\tthe the \ud800 \udfff\ud83d\ude00",
    "",
    "ab ab ab cat the cat the",
    "a b c x y \u03a3 \u0130 \U0001f600 _ 1 \xdf xy ab bc",
    "\u03a3\u03a3 \u03c3\u03c2 the",
]
LONG_DOCUMENT = ("The cat\u3000sat  on \u03a3\u039f\u03a6\u0399\u0391\u03a3 mat!\n\n\u0130 \U0001f600 " * 80)[:3000]
GRID_DOCUMENTS = BASE_CORPUS + [
    "",
    " ",
    "\u03a3",
    "\u0130",
    "a",
    "\ud800\udc00 \udbff",
    "\t\n\x0b\x1c\x85\xa0\u2028\u3000",
    "THE\u2029CAT\u205fSAT",
    "cat,the;mat",
    LONG_DOCUMENT,
]
ANALYZERS = ["word", "char", "char_wb"]
TOKEN_PATTERNS = [r"(?u)\b\w\w+\b", r"(?u)\b\w\w+\b", r"\w{1,}", r"(?u)\b\w+\b", r"\w+"]  # (the default; runs of any length)
NGRAM_RANGES = [(1, 1), (1, 2), (2, 4), (1, 3), (3, 5)]
COUNT_DTYPES = [np.int64, np.float64, np.int32]
TFIDF_DTYPES = [np.float64, np.float32]
GRID_VOCABULARY_LIMITS = [{}, {"max_features": 30}, {"min_df": 2, "max_df": 0.8}]
VOCABULARY_LIMITS = GRID_VOCABULARY_LIMITS + [
    {"max_features": 5},
    {"min_df": 2},
    {"max_df": 0.5},
    {"min_df": 0.15, "max_df": 6},
]
WEIGHTINGS = [("count", {"dtype": dtype}) for dtype in COUNT_DTYPES] + [
    ("tfidf", {"norm": norm, "use_idf": use_idf, "smooth_idf": smooth, "sublinear_tf": sublinear, "dtype": dtype})
    for norm, use_idf, smooth, sublinear, dtype in itertools.product(
        ["l1", "l2", None], [True, False], [True, False], [True, False], TFIDF_DTYPES
    )
]


def make_vectorizer(kind, params):
    return (TfidfVectorizer if kind == "tfidf" else CountVectorizer)(**params)


def first_mismatching_document(vectorizer, kernel, docs):
    for doc in docs:
        a, e = outcome(lambda doc=doc: kernel([doc])), outcome(lambda doc=doc: vectorizer.transform([doc]))
        try:
            assert_same_outcome(a, e)
        except AssertionError:
            return doc
    return None


def assert_vectorizer_matches(vectorizer, docs, context=""):
    kernel = CompiledVectorizer(vectorizer)
    expected = vectorizer.transform(docs)
    actual = kernel(docs)
    try:
        assert_same_csr(actual, expected, context)
    except AssertionError as error:
        doc = first_mismatching_document(vectorizer, kernel, docs)
        raise AssertionError(f"{error}\nfirst single document that differs: {doc!r}") from None


@pytest.mark.parametrize("ngram_range", NGRAM_RANGES, ids=str)
@pytest.mark.parametrize("analyzer", ANALYZERS)
def test_text_every_option_combination(analyzer, ngram_range):
    """analyzer x ngram_range x lowercase x binary x (count dtypes + every tf-idf weighting and dtype);
    the vocabulary limits rotate through the combinations."""
    combinations = itertools.product([True, False], [True, False], WEIGHTINGS)
    for i, (lowercase, binary, (kind, weighting)) in enumerate(combinations):
        limits = GRID_VOCABULARY_LIMITS[i % len(GRID_VOCABULARY_LIMITS)]
        params = dict(analyzer=analyzer, ngram_range=ngram_range, lowercase=lowercase, binary=binary, **limits, **weighting)
        vectorizer = make_vectorizer(kind, params).fit(BASE_CORPUS)
        assert_vectorizer_matches(vectorizer, GRID_DOCUMENTS, context=f"{kind} {params}: ")


ACCENTED = [  # what NFKD decomposes: precomposed letters, Hangul syllables, ligatures, full-width and
    # circled forms, superscripts; lone combining marks; Jigsaw-like comments
    "Café naïve résumé ÉCOLE élève Ångström façade", "한국어 텍스트 가나다 ᄀ ᅡ", "ﬁnance ﬂower ǅemal Ǆ ǉ",
    "ｆｕｌｌ ｗｉｄｔｈ ① ⑳ x² H₂O ½ ™ ㎏", "a\u0301 \u0301\u0302 x\u0327y \u20dd", "Ωmega ὈΔΥΣΣΕΎΣ Ἀθῆναι",
    "You are a b*tch!!! naïve I a u", "ŁÓDŹ Øresund Þorn đ ı İ",
]


@pytest.mark.parametrize("strip_accents", ["unicode", "ascii"])
@pytest.mark.parametrize("analyzer, token_pattern", [("word", r"(?u)\b\w\w+\b"), ("word", r"\w{1,}"), ("char", None),
                                                     ("char_wb", None)])
def test_text_accents_stripped_as_scikit_learn_strips_them(strip_accents, analyzer, token_pattern):
    """Each code point's accents stripped alone (``code_point_tables``) is scikit-learn's stripping of
    the documents: decompositions, Hangul syllables, combining marks, with and without lowercase."""
    for lowercase in (True, False):
        params = dict(analyzer=analyzer, strip_accents=strip_accents, lowercase=lowercase, ngram_range=(1, 2))
        if token_pattern:
            params["token_pattern"] = token_pattern
        vectorizer = TfidfVectorizer(**params).fit(BASE_CORPUS + ACCENTED)
        assert_vectorizer_matches(vectorizer, ACCENTED + GRID_DOCUMENTS, context=f"{params}: ")


@st.composite
def vectorizer_configs(draw):
    kind = draw(st.sampled_from(["count", "tfidf"]))
    params = dict(
        analyzer=draw(st.sampled_from(ANALYZERS)),
        ngram_range=draw(st.sampled_from(NGRAM_RANGES)),
        lowercase=draw(st.booleans()),
        binary=draw(st.booleans()),
        strip_accents=draw(st.sampled_from([None, None, "unicode", "ascii"])),
        **draw(st.sampled_from(VOCABULARY_LIMITS)),
    )
    if params["analyzer"] == "word":
        params["token_pattern"] = draw(st.sampled_from(TOKEN_PATTERNS))
    if kind == "tfidf":
        params.update(
            norm=draw(st.sampled_from(["l1", "l2", None])),
            use_idf=draw(st.booleans()),
            smooth_idf=draw(st.booleans()),
            sublinear_tf=draw(st.booleans()),
            dtype=draw(st.sampled_from(TFIDF_DTYPES)),
        )
    else:
        params["dtype"] = draw(st.sampled_from(COUNT_DTYPES))
    return kind, params


def fit_or_reject(kind, params, corpus):
    try:
        return make_vectorizer(kind, params).fit(corpus)
    except ValueError:  # an empty vocabulary after pruning, or min_df > max_df for this corpus
        reject()


@hypothesis_settings(max_examples=250)
@given(config=vectorizer_configs(), corpus=document_lists(max_size=6), docs=document_lists(min_size=1))
def test_text_random_documents(config, corpus, docs):
    kind, params = config
    vectorizer = fit_or_reject(kind, params, BASE_CORPUS + corpus)
    batch = docs + corpus[:2]  # documents with vocabulary hits, too
    note(f"{kind} {params}")
    assert_vectorizer_matches(vectorizer, batch, context=f"{kind} {params}: ")


PACKING_ALPHABET = "\x00\x01 !?@A`abz\x7f\x80\xff\U0001f600"  # around the 7-bit limit of a packed slot


@hypothesis_settings(max_examples=120)
@given(
    analyzer=st.sampled_from(ANALYZERS),
    corpus=st.lists(st.text(PACKING_ALPHABET, max_size=12), min_size=1, max_size=6),
    docs=st.lists(st.text(PACKING_ALPHABET, max_size=12), min_size=1, max_size=4),
)
def test_text_terms_at_the_packed_slot_limits(analyzer, corpus, docs):
    """Short ASCII terms are held in the hash slot itself (up to 8 code points below 128): terms
    of 8 and 9 code points, of 127 and 128 and beyond the BMP, found and not found, as scikit-learn."""
    ngram_range = (1, 2) if analyzer == "word" else (1, 9)
    vectorizer = fit_or_reject("count", dict(analyzer=analyzer, ngram_range=ngram_range, lowercase=False), corpus)
    assert_vectorizer_matches(vectorizer, docs + corpus[:2], context=f"{analyzer}: ")


@pytest.mark.parametrize("dtype", TFIDF_DTYPES)
def test_text_sublinear_tf_for_every_count(dtype):
    """log(count) + 1 for each count 1..400 (the kernel tabulates it, growing the table past 64):
    numpy's float32 log differs from a float64 log rounded to float32 at counts 7, 47, 217, ..."""
    docs = [" ".join(["ab"] * k + ["cd"] * (k % 5) + ["ef"] * (k // 7)) for k in range(1, 401)]
    for norm, use_idf, binary in itertools.product(["l1", "l2", None], [True, False], [False, True]):
        vectorizer = TfidfVectorizer(sublinear_tf=True, norm=norm, use_idf=use_idf, binary=binary, dtype=dtype)
        vectorizer.fit(docs[::-1] + ["gh ab"])
        assert_vectorizer_matches(vectorizer, docs, context=f"norm={norm} use_idf={use_idf} binary={binary}: ")
        assert_vectorizer_matches(vectorizer, docs[::-1][:50], context=f"norm={norm} use_idf={use_idf}: ")


def _containers(docs):
    index = np.arange(len(docs)) * 3 + 10
    return {
        "list": lambda: list(docs),
        "tuple": lambda: tuple(docs),
        "series object": lambda: pd.Series(docs, index=index, dtype=object),
        "series default str": lambda: text_series(docs, index=index) if docs else pd.Series([], dtype="str"),
        "series string": lambda: text_series(docs, index=index, dtype="string"),
        "ndarray object": lambda: np.array(docs, dtype=object),
        "ndarray unicode": lambda: np.array(docs, dtype=str),
    }


CONTAINER_VECTORIZERS = [
    CountVectorizer().fit(BASE_CORPUS),
    CountVectorizer(analyzer="char_wb", ngram_range=(1, 3), lowercase=False, dtype=np.int32).fit(BASE_CORPUS),
    TfidfVectorizer(analyzer="char", ngram_range=(2, 4), sublinear_tf=True).fit(BASE_CORPUS),
    TfidfVectorizer(ngram_range=(1, 2), norm="l1", dtype=np.float32).fit(BASE_CORPUS),
]


@hypothesis_settings(max_examples=60)
@given(docs=document_lists(min_size=0, max_size=5), which=st.integers(0, len(CONTAINER_VECTORIZERS) - 1))
def test_text_input_containers(docs, which):
    vectorizer = CONTAINER_VECTORIZERS[which]
    kernel = CompiledVectorizer(vectorizer)
    for name, build in _containers(docs).items():
        made = outcome(build)
        if made[0] == "raised":  # e.g. pandas cannot hold this text: nothing to compare
            continue
        container = made[1]
        expected = outcome(lambda container=container: vectorizer.transform(container))
        if expected[0] == "raised":  # scikit-learn rejects it (an empty batch for tf-idf): so must the kernel
            with pytest.raises(Unsupported):
                kernel(container)
            continue
        assert_same_csr(kernel(container), expected[1], context=f"{name}: ")


WORKER_VECTORIZERS = [
    TfidfVectorizer(ngram_range=(1, 2)).fit(BASE_CORPUS),
    CountVectorizer(analyzer="char", ngram_range=(1, 3), binary=True).fit(BASE_CORPUS),
    TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, norm="l1", dtype=np.float32).fit(
        BASE_CORPUS
    ),
]


@hypothesis_settings(max_examples=12)
@given(
    docs=document_lists(min_size=1, max_size=6),
    n_rows=st.integers(500, 1100),
    workers=st.integers(2, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_text_worker_threads_give_the_same_matrix(docs, n_rows, workers, seed):
    """Batches of 512+ rows are split across threads (256+ rows each); the matrix is the serial one."""
    rng = np.random.default_rng(seed)
    pool = docs + BASE_CORPUS
    batch = [pool[i] for i in rng.integers(0, len(pool), n_rows)]
    for vectorizer in WORKER_VECTORIZERS:
        expected = vectorizer.transform(batch)
        kernel = CompiledVectorizer(vectorizer, Workers(workers))
        assert_same_csr(kernel(batch), expected, f"{workers} workers: ")
        assert_same_csr(kernel.defer(batch).materialize(), expected, f"{workers} workers, deferred: ")


# --- text: what the kernels must refuse ---------------------------------------------------

UNSUPPORTED_VECTORIZERS = {
    "tokenizer": lambda: CountVectorizer(tokenizer=str.split, token_pattern=None),
    "preprocessor": lambda: TfidfVectorizer(preprocessor=str.upper),
    "analyzer": lambda: CountVectorizer(analyzer=lambda doc: doc.split()),
    "token_pattern": lambda: TfidfVectorizer(token_pattern=r"[a-z]+"),
    "token_pattern of three or more": lambda: TfidfVectorizer(token_pattern=r"(?u)\b\w\w\w+\b"),
    "strip_accents callable": lambda: CountVectorizer(strip_accents=str.upper),
    "subclass": lambda: type("MyVectorizer", (CountVectorizer,), {})(),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED_VECTORIZERS))
def test_text_unsupported_options_raise_unsupported(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vectorizer = UNSUPPORTED_VECTORIZERS[case]().fit(BASE_CORPUS)
    with pytest.raises(Unsupported):
        CompiledVectorizer(vectorizer)


@pytest.mark.parametrize("kind", [CountVectorizer, TfidfVectorizer])
def test_text_unfitted_vectorizer_raises_unsupported(kind):
    with pytest.raises(Unsupported):
        CompiledVectorizer(kind())
    with pytest.raises(Unsupported):
        CompiledVectorizer(kind(vocabulary=["cat", "the"]))  # fitted only by its first transform


UNSUPPORTED_DOCUMENTS = {
    "None": lambda: ["the cat", None],
    "nan": lambda: ["the cat", np.nan],
    "float": lambda: [1.5, "the cat"],
    "bytes": lambda: ["the cat", b"the mat"],
    "np.str_ in a list": lambda: [np.str_("the cat")],
    "a single str": lambda: "the cat sat",
    "a generator": lambda: (d for d in ["the cat"]),
    "a 2-D array": lambda: np.array([["the cat"], ["sat"]], dtype=object),
    "a series with a missing value": lambda: pd.Series(["the cat", None]),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED_DOCUMENTS))
@pytest.mark.parametrize("which", range(len(CONTAINER_VECTORIZERS)))
def test_text_unsupported_documents_raise_unsupported(case, which):
    kernel = CompiledVectorizer(CONTAINER_VECTORIZERS[which])
    with pytest.raises(Unsupported):
        kernel(UNSUPPORTED_DOCUMENTS[case]())


LABELS = np.arange(len(BASE_CORPUS)) % 2


def _text_model_pipeline(vectorizer, model):
    def pipeline(texts):
        return model.predict_proba(vectorizer.transform(texts))

    return pipeline


def _fitted_pair(make_vectorizer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vectorizer = make_vectorizer().fit(BASE_CORPUS)
    return vectorizer, LogisticRegression().fit(vectorizer.transform(BASE_CORPUS), LABELS)


END_TO_END_UNSUPPORTED = {
    **{f"option {name}": (make, lambda: BASE_CORPUS[:4]) for name, make in UNSUPPORTED_VECTORIZERS.items()},
    **{f"input {name}": (CountVectorizer, make) for name, make in UNSUPPORTED_DOCUMENTS.items()},
    "input bytes, tf-idf": (TfidfVectorizer, lambda: [b"the cat", "sat \xe9"]),
    "input an empty list, tf-idf": (TfidfVectorizer, list),
}


@pytest.mark.parametrize("case", sorted(END_TO_END_UNSUPPORTED))
def test_text_unsupported_end_to_end_runs_as_written(case):
    make_vectorizer_, make_input = END_TO_END_UNSUPPORTED[case]
    vectorizer, model = _fitted_pair(make_vectorizer_)
    original = _text_model_pipeline(vectorizer, model)
    optimized = willump.optimize(original)
    assert_same_outcome(outcome(lambda: optimized(make_input())), outcome(lambda: original(make_input())))
    table = optimized.explain_compilation()
    status = table.loc[table["call"] == "vectorizer.transform(texts)", "status"]
    assert len(status) == 1, table
    assert status.iloc[0].startswith("plain Python: "), table
    reason = status.iloc[0].removeprefix("plain Python: ")
    assert reason and reason != "not called yet", table


def test_text_unfitted_vectorizer_end_to_end():
    original = _text_model_pipeline(CountVectorizer(), LogisticRegression())
    optimized = willump.optimize(original)
    got, expected = outcome(lambda: optimized(["the cat"])), outcome(lambda: original(["the cat"]))
    assert expected[0] == "raised" and isinstance(expected[1], NotFittedError)
    assert_same_outcome(got, expected)
    table = optimized.explain_compilation()
    status = table.loc[table["call"] == "vectorizer.transform(texts)", "status"].iloc[0]
    assert status.startswith("plain Python: ") and "fitted" in status, table


# --- linear models ----------------------------------------------------------------------

WIDTH = 7
_rng = np.random.default_rng(20240601)
_X_TRAIN = _rng.normal(size=(120, WIDTH)) * np.array([1, 10, 0.1, 1, 100, 1, 0.01])
_X_TRAIN[_rng.random(_X_TRAIN.shape) < 0.3] = 0.0
_X_SPARSE = sp.csr_matrix(_X_TRAIN)
_SCORE = _X_TRAIN @ _rng.normal(size=WIDTH)
_Y2 = np.where(_SCORE > np.median(_SCORE), "spam", "ham")
_Y3 = np.digitize(_SCORE, np.quantile(_SCORE, [0.33, 0.66])) * 4 + 3  # labels 3, 7, 11
_YREG = _SCORE + _rng.normal(size=len(_SCORE))
_YREG2 = np.column_stack([_YREG, -2 * _YREG + 1])

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # convergence
    LINEAR_MODELS = {
        "LogisticRegression binary": LogisticRegression().fit(_X_TRAIN, _Y2),
        "LogisticRegression 3-class": LogisticRegression(C=0.5).fit(_X_TRAIN, _Y3),
        "LogisticRegression 3-class on CSR": LogisticRegression().fit(_X_SPARSE, _Y3),
        "LogisticRegression binary no intercept": LogisticRegression(fit_intercept=False).fit(_X_TRAIN, _Y2),
        "LinearSVC binary": LinearSVC().fit(_X_TRAIN, _Y2),
        "LinearSVC 3-class": LinearSVC().fit(_X_TRAIN, _Y3),
        "SGDClassifier binary": SGDClassifier(random_state=0).fit(_X_TRAIN, _Y2),
        "SGDClassifier 3-class": SGDClassifier(random_state=0).fit(_X_SPARSE, _Y3),
        "Ridge 1-D": Ridge(alpha=0.3).fit(_X_TRAIN, _YREG),
        "Ridge 2-D": Ridge().fit(_X_TRAIN, _YREG2),
        "Ridge 2-D one column": Ridge().fit(_X_TRAIN, _YREG[:, None]),
        "Ridge no intercept": Ridge(fit_intercept=False).fit(_X_TRAIN, _YREG),
        "Ridge on CSR": Ridge(solver="sparse_cg").fit(_X_SPARSE, _YREG),
        "LinearRegression": LinearRegression().fit(_X_TRAIN, _YREG),
        "LinearRegression no intercept": LinearRegression(fit_intercept=False).fit(_X_TRAIN, _YREG),
        "LinearRegression 2-D": LinearRegression().fit(_X_TRAIN, _YREG2),
        "LinearRegression 2-D no intercept": LinearRegression(fit_intercept=False).fit(_X_TRAIN, _YREG2),
    }
    FRAME_MODEL = LogisticRegression().fit(pd.DataFrame(_X_TRAIN, columns=[f"f{i}" for i in range(WIDTH)]), _Y3)
LINEAR_METHODS = {
    LogisticRegression: ["predict", "predict_proba", "decision_function"],
    LinearSVC: ["predict", "decision_function"],
    SGDClassifier: ["predict", "decision_function"],
    Ridge: ["predict"],
    LinearRegression: ["predict"],
}
LINEAR_CASES = [(name, method) for name, model in LINEAR_MODELS.items() for method in LINEAR_METHODS[type(model)]]

_values = st.one_of(
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 5e-324, 1e-300, 0.1, 1 / 3]),
)
_SPECIAL_VALUES = np.array([0.0, -0.0, 1.0, -1.0, 5e-324, -1e-300, 1e300, 0.1, 1 / 3, 1e15, -1e-15])


@st.composite
def random_values(draw, shape):
    """Floats whose sums depend on their order: normal values over six decades, some special ones."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = rng.normal(size=shape) * 10.0 ** rng.uniform(-3, 3, size=shape)
    special = rng.random(shape) < draw(st.sampled_from([0.0, 0.1, 0.3]))
    values[special] = rng.choice(_SPECIAL_VALUES, size=int(special.sum()))
    return values, rng


@st.composite
def csr_inputs(draw, n_rows, width):
    """A float64 CSR matrix: dense-ish or sparse, maybe unsorted indices, explicit zeros, csr_array, int64 indices."""
    values, rng = draw(random_values((n_rows, width)))
    stored = rng.random((n_rows, width)) < draw(st.sampled_from([0.3, 0.7, 1.0]))
    indptr, indices, data = [0], [], []
    unsorted, zeros = draw(st.booleans()), draw(st.booleans())
    for i in range(n_rows):
        columns = np.flatnonzero(stored[i])
        if unsorted:
            columns = rng.permutation(columns)
        row = values[i, columns]
        if zeros:
            row[rng.random(len(row)) < 0.25] = 0.0  # explicit zeros
        indices += columns.tolist()
        data += row.tolist()
        indptr.append(len(indices))
    kind = draw(st.sampled_from([sp.csr_matrix, sp.csr_array]))
    matrix = kind((np.array(data, dtype=np.float64), np.array(indices), np.array(indptr)), shape=(n_rows, width))
    return with_index_dtype(matrix, draw(st.sampled_from([np.int32, np.int64])))


def with_index_dtype(matrix, dtype):
    """The matrix with indices and indptr of ``dtype`` (scipy's constructor narrows them to int32)."""
    matrix.indices = matrix.indices.astype(dtype)
    matrix.indptr = matrix.indptr.astype(dtype)
    return matrix


@st.composite
def linear_inputs(draw, width=WIDTH):
    n_rows = draw(st.integers(1, 12))
    layout = draw(st.sampled_from(["C", "F", "strided", "csr", "csr"]))
    if layout == "csr":
        return draw(csr_inputs(n_rows, width))
    X, _ = draw(random_values((n_rows, width)))
    if layout == "F":
        return np.asfortranarray(X)
    if layout == "strided":
        return np.repeat(X, 2, axis=1)[:, ::2]
    return X


def _call_model(model, method, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(model, method)(X)


@hypothesis_settings(max_examples=250)
@given(case=st.sampled_from(LINEAR_CASES), X=linear_inputs())
def test_linear_models_random_inputs(case, X):
    name, method = case
    model = LINEAR_MODELS[name]
    expected = _call_model(model, method, X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overflow in the product, as in scikit-learn's own
        actual = CompiledLinearModel(model, method)(X)
    assert_same_array(actual, expected, context=f"{name}.{method}: ")


@st.composite
def width_splits(draw, width=WIDTH):
    """Widths of 1 to 4 blocks that add up to ``width`` (a block may be 0 wide)."""
    cuts = sorted(draw(st.lists(st.integers(0, width), min_size=0, max_size=3)))
    bounds = [0] + cuts + [width]
    return [b - a for a, b in itertools.pairwise(bounds)]


@hypothesis_settings(max_examples=150)
@given(case=st.sampled_from(LINEAR_CASES), widths=width_splits(), n_rows=st.integers(1, 10), data=st.data())
def test_linear_models_on_stacked_blocks(case, widths, n_rows, data):
    """A model reading ``hstack``'s deferred blocks gives what it gives for the stacked CSR matrix."""
    name, method = case
    model = LINEAR_MODELS[name]
    blocks = [with_index_dtype(data.draw(csr_inputs(n_rows, w)), np.int32) if w else sp.csr_matrix((n_rows, 0))
              for w in widths]
    blocks = [sp.csr_matrix(b) if type(b) is not sp.csr_matrix else b for b in blocks]
    if len(blocks) < 2:
        blocks.append(sp.csr_matrix((n_rows, 0)))
    expected = _call_model(model, method, sp.hstack(blocks, format="csr"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = CompiledLinearModel(model, method)(HSTACK.defer(blocks, format="csr"))
    assert_same_array(actual, expected, context=f"{name}.{method}: ")


def _with_nan(X):
    X = X.copy()
    X[0, 1] = np.nan
    return X


def _with_inf(X):
    X = X.copy()
    X[-1, 0] = -np.inf
    return X


_X_TEST = _X_TRAIN[:5].copy()
UNSUPPORTED_LINEAR_INPUTS = {
    "NaN dense": lambda: _with_nan(_X_TEST),
    "NaN CSR": lambda: sp.csr_matrix(_with_nan(_X_TEST)),
    "inf dense": lambda: _with_inf(_X_TEST),
    "inf CSR": lambda: sp.csr_matrix(_with_inf(_X_TEST)),
    "too narrow dense": lambda: _X_TEST[:, :-1].copy(),
    "too wide dense": lambda: np.hstack([_X_TEST, _X_TEST[:, :1]]),
    "too narrow CSR": lambda: sp.csr_matrix(_X_TEST[:, :-1]),
    "too wide CSR": lambda: sp.csr_matrix(np.hstack([_X_TEST, _X_TEST[:, :1]])),
    "float32 dense": lambda: _X_TEST.astype(np.float32),
    "float32 CSR": lambda: sp.csr_matrix(_X_TEST.astype(np.float32)),
    "int64 dense": lambda: np.round(_X_TEST).astype(np.int64),
    "0 rows dense": lambda: np.empty((0, WIDTH)),
    "0 rows CSR": lambda: sp.csr_matrix((0, WIDTH)),
    "1-D": lambda: _X_TEST[0].copy(),
    "list of lists": lambda: _X_TEST.tolist(),
    "DataFrame": lambda: pd.DataFrame(_X_TEST),
    "CSC": lambda: sp.csc_matrix(_X_TEST),
    "np.matrix": lambda: np.asmatrix(_X_TEST),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED_LINEAR_INPUTS))
def test_linear_unsupported_inputs_raise_unsupported(case):
    failures = []
    for name, method in LINEAR_CASES:
        kernel = CompiledLinearModel(LINEAR_MODELS[name], method)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = kernel(UNSUPPORTED_LINEAR_INPUTS[case]())
        except Unsupported:
            continue
        except Exception as error:  # noqa: BLE001 - the call site would fall back, but the kernel's contract is Unsupported
            result = error
        X = UNSUPPORTED_LINEAR_INPUTS[case]()
        python = outcome(lambda name=name, method=method, X=X: _call_model(LINEAR_MODELS[name], method, X))
        failures.append(
            f"{name}.{method}: kernel gave {type(result).__name__} {getattr(result, 'shape', result)!s:.60}; "
            f"scikit-learn {python[0]} {type(python[1]).__name__}"
        )
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("method", ["predict", "predict_proba", "decision_function"])
def test_linear_model_fitted_on_a_frame_given_an_array_raises_unsupported(method):
    with pytest.raises(Unsupported):
        CompiledLinearModel(FRAME_MODEL, method)(_X_TEST)


def _recorded_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [(w.category, str(w.message)) for w in caught]


@pytest.mark.parametrize("make_input", [np.array, sp.csr_matrix], ids=["ndarray", "csr"])
def test_linear_model_fitted_on_a_frame_warns_as_written_end_to_end(make_input):
    """scikit-learn warns "X does not have valid feature names" for an ndarray and for a CSR matrix alike."""
    original = _decision_pipeline(FRAME_MODEL)
    optimized = willump.optimize(original)
    X = make_input(_X_TEST)
    expected, expected_warnings = _recorded_warnings(lambda: original(X))
    actual, actual_warnings = _recorded_warnings(lambda: optimized(X))
    assert_same_array(actual, expected)
    assert actual_warnings == expected_warnings


def test_linear_unsupported_models_and_methods():
    with pytest.raises(Unsupported, match="modified_huber"):  # (its own probabilities, not the logistic's)
        CompiledLinearModel(SGDClassifier(loss="modified_huber", random_state=0).fit(_X_TRAIN, _Y2), "predict_proba")(_X_TEST)
    with pytest.raises(Unsupported):
        CompiledLinearModel(LogisticRegression(), "predict")  # not fitted
    with pytest.raises(Unsupported):
        CompiledLinearModel(LINEAR_MODELS["LogisticRegression binary"], "predict_log_proba")
    with pytest.raises(Unsupported):
        CompiledLinearModel(LINEAR_MODELS["LogisticRegression binary"], "predict")(X=_X_TEST, extra=1)


class _Identity:
    def predict(self, X):
        return X


def _identity_pipeline(vectorizer):
    identity = _Identity()

    def pipeline(texts):
        return identity.predict(vectorizer.transform(texts))

    return pipeline


def _decision_pipeline(model):
    def pipeline(X):
        return model.decision_function(X)

    return pipeline


def test_linear_np_matrix_end_to_end_raises_as_written():
    """scikit-learn refuses np.matrix (TypeError); the optimized function must too."""
    model = LINEAR_MODELS["LogisticRegression 3-class"]
    original = _decision_pipeline(model)
    optimized = willump.optimize(original)
    X = np.asmatrix(_X_TEST)
    assert_same_outcome(outcome(lambda: optimized(X)), outcome(lambda: original(X)))


@pytest.mark.parametrize("total", [0.0, -0.0, 3.5, -3.5, 40.0, -40.0, 745.5, -745.5, 1e-300, 1e308, -1e308])
def test_one_row_probabilities_are_the_array_computation(total):
    """One row of a binary classifier's probabilities is finished on scalars; the bits, dtype and
    shape are scikit-learn's array computation's, and a sum that overflows raises under numpy's
    error state as scikit-learn's addition does."""
    model = LogisticRegression().fit(_X_TRAIN, _Y2)
    kernel = CompiledLinearModel(model, "predict_proba")
    product = np.array([[total]])
    scores = (product + model.intercept_).reshape(-1)
    probability = expit(scores)
    assert_same_array(kernel.finish(product), np.stack([1 - probability, probability], axis=1))
    model.intercept_ = np.array([1e308])
    with np.errstate(over="raise"):
        with pytest.raises(FloatingPointError):
            kernel.finish(np.array([[1e308]]))


def test_linear_model_updated_in_place_is_not_served_stale():
    """partial_fit of a multi-class SGDClassifier updates coef_ in place; the answer must follow it."""
    model = SGDClassifier(random_state=0).fit(_X_SPARSE, _Y3)
    original = _decision_pipeline(model)
    optimized = willump.optimize(original)
    X = sp.csr_matrix(_X_TRAIN[:6])
    assert_same_outcome(outcome(lambda: optimized(X)), outcome(lambda: original(X)))
    model.partial_fit(_X_SPARSE, _Y3)
    assert_same_outcome(outcome(lambda: optimized(X)), outcome(lambda: original(X)))


def test_vectorizer_given_a_new_vocabulary_is_not_served_stale():
    """A vocabulary_ replaced by another of the same size (CPython may reuse the old dict's id)."""
    vectorizer = CountVectorizer().fit(["aa bb cc"])
    original = _identity_pipeline(vectorizer)
    optimized = willump.optimize(original)
    docs = ["aa xx pp qq yy bb"]
    assert_same_outcome(outcome(lambda: optimized(docs)), outcome(lambda: original(docs)))
    del vectorizer.vocabulary_
    vectorizer.vocabulary_ = {"pp": 0, "qq": 1, "xx": 2}
    assert_same_outcome(outcome(lambda: optimized(docs)), outcome(lambda: original(docs)))


# --- hstack -----------------------------------------------------------------------------


@st.composite
def csr_blocks(draw):
    n_rows = draw(st.integers(0, 8))
    dtype = draw(st.sampled_from([np.float64, np.int64, np.float32]))
    kinds = draw(st.sampled_from([[sp.csr_matrix], [sp.csr_array], [sp.csr_matrix, sp.csr_array]]))
    values = st.integers(-50, 50) if dtype == np.int64 else _values
    blocks = []
    for _ in range(draw(st.integers(2, 4))):
        kind = draw(st.sampled_from(kinds))  # scipy returns a csr_array if any block is one
        width = draw(st.integers(0, 6))
        if width == 0 or draw(st.integers(0, 4)) == 0:  # a block without stored values
            blocks.append(kind((n_rows, width), dtype=dtype))
            continue
        indptr, indices, data = [0], [], []
        for _ in range(n_rows):
            columns = draw(st.lists(st.integers(0, width - 1), unique=True, max_size=width))  # often empty rows
            if not draw(st.booleans()):
                columns.sort()
            indices += columns
            data += [0 if draw(st.integers(0, 5)) == 0 else draw(values) for _ in columns]
            indptr.append(len(indices))
        blocks.append(
            kind(
                (np.array(data, dtype=dtype), np.array(indices, dtype=np.int32), np.array(indptr, dtype=np.int32)),
                shape=(n_rows, width),
            )
        )
    return blocks


@hypothesis_settings(max_examples=200)
@given(blocks=csr_blocks(), format=st.sampled_from([None, "csr"]), as_tuple=st.booleans())
def test_hstack_random_blocks(blocks, format, as_tuple):
    blocks = tuple(blocks) if as_tuple else blocks
    expected = sp.hstack(blocks, format=format)
    assert_same_csr(HSTACK(blocks, format=format), expected)
    assert_same_csr(HSTACK.defer(blocks, format=format).materialize(), expected, "deferred: ")


def _block(rows, cols, dtype=np.float64, kind=sp.csr_matrix):
    return kind(np.arange(rows * cols, dtype=dtype).reshape(rows, cols) % 3)


def _with_unused_storage(block):
    block.data = np.concatenate([block.data, [9.0]])
    block.indices = np.concatenate([block.indices, np.array([0], np.int32)])
    return block


UNSUPPORTED_HSTACKS = {
    "mismatched rows": (lambda: [_block(3, 2), _block(4, 2)], {}),
    "mismatched rows, format csr": (lambda: [_block(3, 2), _block(3, 1), _block(2, 2)], {"format": "csr"}),
    "a CSC block": (lambda: [_block(3, 2), sp.csc_matrix(_block(3, 2))], {}),
    "format csc": (lambda: [_block(3, 2), _block(3, 2)], {"format": "csc"}),
    "dtype given": (lambda: [_block(3, 2), _block(3, 2)], {"dtype": np.float32}),
    "one block": (lambda: [_block(3, 2)], {}),
    "unused storage": (lambda: [_block(3, 2), _with_unused_storage(_block(3, 2))], {}),
    "64-bit indices": (
        lambda: [_block(3, 2), with_index_dtype(_block(3, 2), np.int64)],
        {},
    ),
}


@pytest.mark.parametrize("second", [np.int64, np.float32, np.int32, np.uint8])
def test_hstack_of_mixed_dtypes_upcasts_as_scipy(second):
    blocks = [_block(3, 2), _block(3, 2, second), _block(3, 1, np.int64)]
    expected = sp.hstack(blocks, format="csr")
    assert_same_csr(HSTACK(blocks, format="csr"), expected)
    assert_same_csr(HSTACK.defer(blocks, format="csr").materialize(), expected, "deferred: ")


@pytest.mark.parametrize("case", sorted(UNSUPPORTED_HSTACKS))
def test_hstack_unsupported_raises_unsupported(case):
    make_blocks, options = UNSUPPORTED_HSTACKS[case]
    with pytest.raises(Unsupported):
        HSTACK(make_blocks(), **options)


def _stack_pipeline(make_blocks):
    identity = _Identity()

    def pipeline(n):
        return identity.predict(sp.hstack(make_blocks(n), format="csr"))

    return pipeline


@pytest.mark.parametrize("case", ["mismatched rows", "a CSC block"])
def test_hstack_unsupported_end_to_end_runs_as_written(case):
    make_blocks, _ = UNSUPPORTED_HSTACKS[case]
    original = _stack_pipeline(lambda n: make_blocks())
    optimized = willump.optimize(original)
    assert_same_outcome(outcome(lambda: optimized(3)), outcome(lambda: original(3)))
    table = optimized.explain_compilation()
    status = table.loc[table["call"].str.startswith("sp.hstack("), "status"]
    assert len(status) == 1 and status.iloc[0].startswith("plain Python: this input: "), table


# --- end to end ---------------------------------------------------------------------------

_E2E_TEXTS = [doc for doc in BASE_CORPUS if doc] + [w + " " + v for w, v in zip(WORDS, reversed(WORDS))]
_E2E_FRAME = pd.DataFrame({"text": text_series(_E2E_TEXTS), "x": np.linspace(-3, 7, len(_E2E_TEXTS))})
E2E_WORDS = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(_E2E_TEXTS)
E2E_CHARS = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), max_features=300, dtype=np.float64).fit(_E2E_TEXTS)


def _e2e_features(df):
    text = df["text"]
    return sp.hstack(
        [E2E_WORDS.transform(text), E2E_CHARS.transform(text), sp.csr_matrix(df[["x"]].to_numpy())], format="csr"
    )


E2E_MODEL = LogisticRegression(C=5.0, max_iter=500).fit(_e2e_features(_E2E_FRAME), np.arange(len(_E2E_TEXTS)) % 3)


def e2e_pipeline(df):
    text = df["text"]
    words = E2E_WORDS.transform(text)
    chars = E2E_CHARS.transform(text)
    X = sp.hstack([words, chars, sp.csr_matrix(df[["x"]].to_numpy())], format="csr")
    return E2E_MODEL.predict_proba(X)


E2E_COMPILED = willump.optimize(e2e_pipeline)
E2E_PLAIN = willump.optimize(compile=False)(e2e_pipeline)
E2E_CALLS = ["E2E_WORDS.transform(text)", "E2E_CHARS.transform(text)", "sp.hstack(", "E2E_MODEL.predict_proba(X)"]


def e2e_lowered_pipeline(df):
    text = df["text"].str.lower()
    words = E2E_WORDS.transform(text)
    chars = E2E_CHARS.transform(text)
    X = sp.hstack([words, chars, sp.csr_matrix(df[["x"]].to_numpy())], format="csr")
    return E2E_MODEL.predict_proba(X)


E2E_LOWERED = willump.optimize(workers=3)(e2e_lowered_pipeline)


def e2e_words_only_pipeline(df):
    words = E2E_WORDS_ONLY.transform(df["text"])
    return E2E_WORDS_MODEL.decision_function(words)


E2E_WORDS_ONLY = TfidfVectorizer(analyzer="char", ngram_range=(1, 3), norm="l1").fit(_E2E_TEXTS)
E2E_WORDS_MODEL = LinearSVC().fit(E2E_WORDS_ONLY.transform(_E2E_TEXTS), np.arange(len(_E2E_TEXTS)) % 3)
E2E_WORDS_OPTIMIZED = willump.optimize(e2e_words_only_pipeline)


@st.composite
def text_frames(draw):
    texts = draw(st.lists(st.one_of(documents, st.sampled_from(_E2E_TEXTS)), min_size=1, max_size=8))
    x = draw(st.lists(st.floats(-10, 10, allow_nan=False), min_size=len(texts), max_size=len(texts)))
    index = draw(st.sampled_from([None, np.arange(len(texts)) * 2 + 5, np.arange(len(texts))[::-1]]))
    text_dtype = draw(st.sampled_from([object, "str", "string"]))
    return pd.DataFrame({"text": text_series(texts, dtype=text_dtype, index=index), "x": x}, index=index)


@hypothesis_settings(max_examples=40)
@given(df=text_frames())
def test_end_to_end_pipeline_is_exact(df):
    batches = [df] + [df.iloc[[i]] for i in range(len(df))]
    for batch in batches:
        expected = e2e_pipeline(batch)
        assert_same_array(E2E_COMPILED(batch), expected)
        assert_same_array(E2E_PLAIN(batch), expected)
        assert_same_array(E2E_LOWERED(batch), e2e_lowered_pipeline(batch))
        assert_same_array(E2E_WORDS_OPTIMIZED(batch), e2e_words_only_pipeline(batch))
    table = E2E_COMPILED.explain_compilation()
    for call in E2E_CALLS:
        row = table[table["call"].str.startswith(call)]
        assert len(row) == 1, table
        assert row["status"].iloc[0] == "compiled", table
        assert 0 < row["compiled_calls"].iloc[0] == row["calls"].iloc[0], table
    assert E2E_PLAIN.explain_compilation().empty


def test_end_to_end_large_batches_with_worker_threads():
    """A batch large enough to be split across threads, for several worker counts."""
    rng = np.random.default_rng(7)
    pool = _E2E_TEXTS + GRID_DOCUMENTS
    df = pd.DataFrame({"text": text_series([pool[i] for i in rng.integers(0, len(pool), 1500)]), "x": rng.normal(size=1500)})
    expected, expected_lowered = e2e_pipeline(df), e2e_lowered_pipeline(df)
    for workers in (1, 2, 4):
        assert_same_array(willump.optimize(workers=workers)(e2e_pipeline)(df), expected)
        assert_same_array(willump.optimize(workers=workers)(e2e_lowered_pipeline)(df), expected_lowered)


def test_end_to_end_lowered_text_into_an_unsupported_vectorizer():
    """The deferred lowercased texts are built into the Series the original passes on."""
    vectorizer, model = _fitted_pair(UNSUPPORTED_VECTORIZERS["tokenizer"])

    def pipeline(df):
        text = df["text"].str.lower()
        return model.predict_proba(vectorizer.transform(text))

    optimized = willump.optimize(pipeline)
    for dtype in (object, "str", "string"):
        for texts in (BASE_CORPUS[:5] + ["\u0130 \u03a3\u03a3"], ["the cat", None]):
            df = pd.DataFrame({"text": text_series(texts, dtype=dtype)})
            assert_same_outcome(outcome(lambda df=df: optimized(df)), outcome(lambda df=df: pipeline(df)))


# --- HashingVectorizer -----------------------------------------------------------------------


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    docs=document_lists(min_size=1),
    analyzer=st.sampled_from(["word", "char", "char_wb"]),
    ngram_range=st.sampled_from([(1, 1), (1, 2), (2, 4), (3, 5)]),
    n_features=st.sampled_from([2**20, 64, 7, 1]),
    alternate_sign=st.booleans(),
    binary=st.booleans(),
    norm=st.sampled_from(["l2", "l1", None]),
    dtype=st.sampled_from([np.float64, np.float32]),
    lowercase=st.booleans(),
)
def test_hashing_vectorizer_matches_scikit_learn(docs, analyzer, ngram_range, n_features, alternate_sign, binary, norm, dtype, lowercase):
    from sklearn.feature_extraction.text import HashingVectorizer

    vectorizer = HashingVectorizer(
        analyzer=analyzer, ngram_range=ngram_range, n_features=n_features, alternate_sign=alternate_sign,
        binary=binary, norm=norm, dtype=dtype, lowercase=lowercase,
    )
    try:
        expected = vectorizer.transform(docs)
    except Exception:  # lone surrogates: scikit-learn cannot encode them
        with pytest.raises(Unsupported):
            CompiledVectorizer(vectorizer)(docs)
        return
    try:
        result = CompiledVectorizer(vectorizer)(docs)
    except Unsupported:  # refused (never a wrong answer) only for text holding lone surrogates
        assert any("\ud800" <= c <= "\udfff" for doc in docs for c in doc)
        return
    assert_same_csr(result, expected)


# --- frame["column"].str.lower() ---------------------------------------------------------------


def _column_lower_pipeline(df):
    return E2E_WORDS_MODEL.decision_function(E2E_WORDS_ONLY.transform(df["text"].str.lower()))


COLUMN_LOWER = willump.optimize(_column_lower_pipeline)
COLUMN_LOWER_FRAMES = {
    "object strings": pd.DataFrame({"text": pd.Series(BASE_CORPUS, dtype=object)}),
    "str dtype": pd.DataFrame({"text": text_series(BASE_CORPUS, dtype="str")}),
    "missing values": pd.DataFrame({"text": ["the cat", None, np.nan]}),
    "no such column": pd.DataFrame({"other": ["the cat"]}),
    "numbers": pd.DataFrame({"text": [1.5, 2.0]}),
    "two columns named text": pd.DataFrame([["a", "b"]], columns=["text", "text"]),
    "categorical": pd.DataFrame({"text": pd.Series(["the cat", "a mat"], dtype="category")}),
    "no rows": pd.DataFrame({"text": pd.Series([], dtype=object)}),
}


@pytest.mark.parametrize("case", sorted(COLUMN_LOWER_FRAMES))
def test_column_lower_is_read_from_the_frame_or_runs_as_written(case):
    df = COLUMN_LOWER_FRAMES[case]
    for rows in [df] + [df.iloc[[i]] for i in range(min(len(df), 3))]:
        assert_same_outcome(outcome(lambda: COLUMN_LOWER(rows)), outcome(lambda: _column_lower_pipeline(rows)))


def test_column_lower_is_compiled_and_named_as_written():
    COLUMN_LOWER(COLUMN_LOWER_FRAMES["str dtype"].iloc[[0]])
    table = COLUMN_LOWER.explain_compilation()
    row = table[table["call"] == "df['text'].str.lower()"]
    assert row["operator"].tolist() == ["StringMethods.lower"], table
    assert row["compiled_calls"].iloc[0] > 0, table


def test_column_lower_is_the_column_as_it_was_when_read():
    """A call run as written in between edits the frame in place: what reads the lowered column
    later sees it as it was, as in the original."""

    class Cleaner:
        def transform(self, frame):  # named like a vectorizer's method, so it is a call site that runs as written
            frame["text"] = frame["text"].str.replace("SPAM", "ham")
            return frame

    cleaner = Cleaner()
    train = ["spam spam buy", "ham lunch", "spam now", "ham dinner"]
    counts = CountVectorizer(tokenizer=str.split, token_pattern=None).fit(train)  # runs as written, reading the Series
    model = LogisticRegression().fit(counts.transform(train), [1, 0, 1, 0])

    def pipeline(df):
        low = df["text"].str.lower()
        cleaner.transform(df)
        return model.predict_proba(counts.transform(low))

    optimized = willump.optimize(pipeline)
    for _ in range(2):
        expected = pipeline(pd.DataFrame({"text": ["SPAM SPAM offer"]}))
        assert_same_array(optimized(pd.DataFrame({"text": ["SPAM SPAM offer"]})), expected)
