"""Text in every storage pandas keeps it in, through the compiled string kernels: object arrays, pandas'
Python-backed ``str`` / ``string``, and with pyarrow installed its pyarrow-backed ``str`` / ``string``
(also chunked arrays and slices of arrays). The answers are pandas' and scikit-learn's: values, dtype,
index, name, missing values; non-ASCII, empty and missing strings included. The pyarrow cases run in
the test pass with pyarrow installed (README, "Tests") and are skipped in the one without.
"""

import itertools
import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from sklearn.feature_extraction.text import HashingVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump
from answers import answers, define
from test_compile_kernels import TRICKY, WORDS, hypothesis_settings
from willump.compile import unicode

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ImportError:
    pa = pc = None

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")
needs_pyarrow = pytest.mark.skipif(pa is None, reason="pyarrow is not installed (the second test pass installs it)")


class Identity:
    def predict(self, X):
        return X


IDENTITY = Identity()
_numbering = itertools.count()


def _arrow_chunked(texts: list, na_value) -> pd.Series:
    """A Series of pyarrow strings held in several chunks, the second a slice of a larger array."""
    middle = len(texts) // 2
    padded = pa.array(["pad"] + texts[middle:] + ["pad"], pa.large_string(), from_pandas=True)
    chunks = [pa.array(texts[:middle], pa.large_string(), from_pandas=True), padded.slice(1, len(texts) - middle)]
    array = pd.arrays.ArrowStringArray(pa.chunked_array(chunks, pa.large_string()), dtype=pd.StringDtype("pyarrow", na_value))
    return pd.Series(array)


def _sliced(texts: list, dtype) -> pd.Series:
    """``texts`` as a slice of a longer Series (pyarrow: an array with an offset)."""
    return pd.Series(["before", None, *texts, "after"], dtype=dtype).iloc[2:-1].reset_index(drop=True)


STORAGES = {
    "object": lambda texts: pd.Series(texts, dtype=object),
    "str, Python": lambda texts: pd.Series(texts, dtype=pd.StringDtype("python", na_value=np.nan)),
    "string, Python": lambda texts: pd.Series(texts, dtype=pd.StringDtype("python")),
}
ARROW_STORAGES = {
    "str, pyarrow": lambda texts: pd.Series(texts, dtype=pd.StringDtype("pyarrow", na_value=np.nan)),
    "string, pyarrow": lambda texts: pd.Series(texts, dtype=pd.StringDtype("pyarrow")),
    "str, pyarrow, chunked": lambda texts: _arrow_chunked(texts, np.nan),
    "string, pyarrow, chunked": lambda texts: _arrow_chunked(texts, pd.NA),
    "str, pyarrow, sliced": lambda texts: _sliced(texts, pd.StringDtype("pyarrow", na_value=np.nan)),
    "string, pyarrow, sliced": lambda texts: _sliced(texts, pd.StringDtype("pyarrow")),
}
ALL_STORAGES = [pytest.param(name) for name in STORAGES] + [
    pytest.param(name, marks=needs_pyarrow) for name in ARROW_STORAGES
]


def stored(storage: str, texts: list, index=None) -> pd.Series:
    series = {**STORAGES, **ARROW_STORAGES}[storage](texts)
    if index is not None:
        series.index = index
    return series.rename("text")


# pyarrow holds UTF-8: no lone surrogates (the kernels' tests elsewhere have them, in Python str)
_character = st.one_of(
    st.sampled_from([t for t in TRICKY if not any("\ud800" <= c <= "\udfff" for c in t)]),
    st.sampled_from(list("aAbσΣ!?. é")),
    st.characters(exclude_categories=["Cs"]),
)
_text = st.one_of(st.lists(_character, max_size=12).map("".join), st.sampled_from(WORDS), st.just(""))
texts_with_missing = st.lists(st.one_of(_text, _text, _text, st.none()), min_size=1, max_size=8)


# --- .str.len(), .count, .contains, .startswith ------------------------------------------------------

STRING_CALLS = [
    's.str.len()',
    's.str.count("!")',
    's.str.count("")',
    's.str.count("ab")',
    's.str.count(r"\\?")',
    's.str.count("é")',
    's.str.contains("a", regex=False)',
    's.str.contains("a.b", regex=False)',
    's.str.contains("σ")',
    's.str.contains("")',
    's.str.startswith("a")',
    's.str.startswith(("Σ", "ab"))',
    's.str.startswith("")',
    'frame["text"].str.len()',
    'frame["text"] == "a"',
    'frame["text"] != ""',
    'frame["text"] == "ΣΑΣ σας"',
    '(frame["text"] == "ab").astype(int)',
    's.isin(["a", "", "ΣΑΣ σας"])',  # (numpy bools for every storage, a missing value never in)
    'frame["text"].isin(("ab",))',
    'frame.text.isin({"a", "b"}).astype(int)',
    'np.where(frame["text"] != "a", 1.5, 0)',
    'frame["text"].str.count("!") / (frame["text"].str.len() + 1)',
    'np.log1p(s.str.count("a")) * 2',
    'frame.text.str.count("!") / (frame.text.str.len() + 1)',  # (notebooks' spelling of a column)
    'frame.text.str.contains("a", regex=False)',
    'frame.text == "a"',
]
_ARITHMETIC = {STRING_CALLS[-5], STRING_CALLS[-4], STRING_CALLS[-3]}
_COMPARISONS = {call for call in STRING_CALLS if "= " in call}  # (refused for the NA-valued string dtype)


def _string_pipeline(call: str):
    source = f"def pipeline(s, frame):\n    value = {call}\n    return IDENTITY.predict(value)\n"
    return willump.optimize(define(source, {"np": np, "IDENTITY": IDENTITY}, f"<string call {next(_numbering)}>"))


STRING_PIPELINES = {call: _string_pipeline(call) for call in STRING_CALLS}


def assert_same_series(actual, expected):
    if isinstance(expected, np.ndarray):  # np.where's
        assert type(actual) is np.ndarray and actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected, strict=True)
        return
    assert type(actual) is pd.Series and actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert type(actual.array) is type(expected.array)
    pd.testing.assert_series_equal(actual, expected, check_exact=True, check_index_type=True)
    assert actual.name == expected.name and actual.index.equals(expected.index)


@pytest.mark.parametrize("storage", ALL_STORAGES)
@hypothesis_settings(max_examples=25)
@given(texts=texts_with_missing, shifted=st.booleans())
def test_string_methods_answer_as_pandas(storage, texts, shifted):
    index = pd.RangeIndex(len(texts)) * 3 + 7 if shifted else None
    series = stored(storage, texts, index)
    frame = series.to_frame()
    for call, optimized in STRING_PIPELINES.items():
        compiled_before = optimized.explain_compilation()["compiled_calls"].iloc[0]
        both = answers(optimized, series, frame)
        if both is None:  # both raised the same error
            continue
        assert_same_series(*both)
        table = optimized.explain_compilation()
        compiled = table["compiled_calls"].iloc[0] - compiled_before == 1  # (this call's: the pipelines are shared)
        assert compiled or _may_refuse(call, series), (call, table["status"].iloc[0])


def _may_refuse(call: str, series: pd.Series) -> bool:
    """Whether the kernel may leave this call to pandas: arithmetic on Int64 results or on an object
    Series with nothing but missing values (pandas gives the values back), and count("") of pyarrow
    strings (pyarrow counts bytes)."""
    if call == 's.str.count("")':
        return series.dtype != object and series.dtype.storage == "pyarrow"
    na_value = getattr(series.dtype, "na_value", None)
    if call in _COMPARISONS:
        return na_value is pd.NA
    return call in _ARITHMETIC and (na_value is pd.NA or (series.dtype == object and series.isna().all()))


def test_string_methods_not_compiled_run_as_written():
    """Patterns with metacharacters, options, other receivers: the call as written answers."""
    calls = [
        's.str.count("a|b")', 's.str.contains("a.")', 's.str.contains("a", case=False)',
        's.str.startswith("a", na=True)', 's.str.count("a", flags=2)', 's.str.len(1)',
    ]
    series = pd.Series(["a.b", "xa|b", None, "A"], dtype=object)
    for call in calls:
        optimized = _string_pipeline(call)
        try:
            expected = optimized.py_func(series, series.to_frame())
        except Exception as error:
            with pytest.raises(type(error)):
                optimized(series, series.to_frame())
            continue
        assert_same_series(optimized(series, series.to_frame()), expected)
        assert not optimized.explain_compilation()["status"].iloc[0].startswith("compiled")


def test_string_methods_refuse_values_pandas_treats_otherwise():
    """Objects that are neither str nor missing (pandas gives NaN), lists (.str indexes them)."""
    optimized = STRING_PIPELINES["s.str.len()"]
    for values in (["ab", 3, None], [["a", "b"], ["c"]], [1.5, np.nan]):
        series = pd.Series(values, dtype=object)
        both = answers(optimized, series, series.to_frame())  # (None: both raised the same error)
        if both is not None:
            assert_same_series(*both)


# --- lowercase and the vectorizers ----------------------------------------------------------------

_TRAIN = [w + " " + v for w, v in itertools.product(WORDS, WORDS[::3])] + ["ΣΑΣ σας", "İstanbul", "ΟΔΟΣ!"]
WORD_VECTORIZER = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(_TRAIN)
CHAR_VECTORIZER = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4)).fit(_TRAIN)
CASED_VECTORIZER = TfidfVectorizer(analyzer="char", ngram_range=(1, 2), lowercase=False).fit(_TRAIN)
HASHING = HashingVectorizer(n_features=2**10, analyzer="char", ngram_range=(1, 3))
_X = sp.hstack([WORD_VECTORIZER.transform(_TRAIN), CHAR_VECTORIZER.transform(_TRAIN)], format="csr")
MODEL = LogisticRegression(max_iter=500).fit(_X, np.arange(len(_TRAIN)) % 2)
CASED_MODEL = LogisticRegression(max_iter=500).fit(CASED_VECTORIZER.transform(_TRAIN), np.arange(len(_TRAIN)) % 2)
HASHING_MODEL = LogisticRegression(max_iter=500).fit(HASHING.transform(_TRAIN), np.arange(len(_TRAIN)) % 2)


def lowered_program(df):
    text = df["text"].str.lower()
    words = WORD_VECTORIZER.transform(text)
    chars = CHAR_VECTORIZER.transform(text)
    X = sp.hstack([words, chars], format="csr")
    return MODEL.predict_proba(X)[:, 1]


def lowered_sites(df):
    text = df["text"].str.lower()
    count = 2  # (a statement that is no call site: the call sites answer, not a whole-call program)
    X = sp.hstack([WORD_VECTORIZER.transform(text), CHAR_VECTORIZER.transform(text)], format="csr")
    return MODEL.predict_proba(X)[:, count - 1]


def attribute_program(df):
    text = df.text.str.lower()  # (the column read as notebooks write it)
    X = sp.hstack([WORD_VECTORIZER.transform(text), CHAR_VECTORIZER.transform(text)], format="csr")
    return MODEL.predict_proba(X)[:, 1]


def column_program(df):
    return CASED_MODEL.predict(CASED_VECTORIZER.transform(df["text"]))


def hashed_column(df):
    return HASHING_MODEL.decision_function(HASHING.transform(df["text"]))


def lowered_series(df):
    text = df["text"].str.lower()
    return IDENTITY.predict(WORD_VECTORIZER.transform(text)), text  # the lowered Series itself


TEXT_PIPELINES = [willump.optimize(f) for f in (lowered_program, lowered_sites, column_program, hashed_column,
                                                 attribute_program)]
LOWERED_SERIES = willump.optimize(lowered_series)


@pytest.mark.parametrize("storage", ALL_STORAGES)
@hypothesis_settings(max_examples=25)
@given(texts=st.lists(_text, min_size=1, max_size=6), shifted=st.booleans())
def test_text_pipelines_answer_as_scikit_learn(storage, texts, shifted):
    df = stored(storage, texts, pd.RangeIndex(len(texts)) * 2 + 1 if shifted else None).to_frame()
    for batch in [df] + [df.iloc[[i]] for i in range(len(df))]:
        for optimized in TEXT_PIPELINES:
            np.testing.assert_array_equal(optimized(batch), optimized.py_func(batch), strict=True)
        (matrix, lowered), (expected_matrix, expected_lowered) = LOWERED_SERIES(batch), lowered_series(batch)
        assert (matrix != expected_matrix).nnz == 0 and matrix.dtype == expected_matrix.dtype
        assert_same_series(lowered, expected_lowered)
    for optimized in TEXT_PIPELINES:  # the text kernels read every storage
        table = optimized.explain_compilation()
        text_calls = table[table["call"].str.contains(r"\.transform\(|\.str\.lower\(") & (table["calls"] > 0)]
        assert len(text_calls) and (text_calls["status"] == "compiled").all(), table
    for whole in (TEXT_PIPELINES[0], TEXT_PIPELINES[-1]):  # the whole-call program answered
        assert whole.explain_compilation()["whole_calls"].iloc[0] > 0


@pytest.mark.parametrize("storage", ALL_STORAGES)
def test_missing_documents_run_as_written(storage):
    """scikit-learn refuses a missing document; so does the optimized pipeline, with the same error."""
    df = stored(storage, ["the cat", None]).to_frame()
    for optimized in TEXT_PIPELINES:
        with pytest.raises(Exception) as expected:
            optimized.py_func(df)
        with pytest.raises(expected.type, match=re.escape(str(expected.value))):
            optimized(df)


# --- the decoding and lowercasing kernels ---------------------------------------------------------


@hypothesis_settings(max_examples=300)
@given(texts=st.lists(st.text(st.characters(), max_size=10) | st.sampled_from(TRICKY + WORDS), max_size=6))
def test_python_lowercase_of_code_points(texts):
    """Python's str.lower, U+0130's expansion and the Final_Sigma rule included (lone surrogates too)."""
    codes, offsets = unicode.python_lower(*unicode.encode(texts))
    assert [codes[offsets[i] : offsets[i + 1]].tobytes().decode("utf-32-le", "surrogatepass") for i in range(len(texts))] == [
        t.lower() for t in texts
    ]


def test_python_lowercase_tables_hold_each_code_point_lowered_alone():
    """The tables, built by lowering every code point in one string, are what lowering each code point
    by itself gives, over all of Unicode: its lowercase, and what Final_Sigma reads of it around a Σ."""
    table, expansions, offsets = unicode._lower_tables()
    expands = np.flatnonzero(table & unicode._EXPANDS)
    lowered = np.where(table & unicode._EXPANDS, 0, table).tobytes().decode("utf-32-le", "surrogatepass")
    expanded = {c: expansions[offsets[k] : offsets[k + 1]].tobytes().decode("utf-32-le") for k, c in enumerate(expands)}
    assert [expanded.get(c, lowered[c]) for c in range(0x110000)] == [chr(c).lower() for c in range(0x110000)]
    context = unicode._context_table()
    cased = np.array([(" " + chr(c) + "Σ ").lower()[-2] == "ς" for c in range(0x110000)])
    final_after_a = np.array([("A" + chr(c) + "Σ ").lower()[-2] == "ς" for c in range(0x110000)])
    np.testing.assert_array_equal(context & unicode._CASED > 0, cased)
    np.testing.assert_array_equal(context & unicode._IGNORABLE > 0, final_after_a & ~cased)


@needs_pyarrow
@hypothesis_settings(max_examples=200)
@given(texts=st.lists(_text, min_size=1, max_size=6), lowercase=st.booleans(), python_lowered=st.booleans())
def test_pyarrow_strings_decoded_as_pandas_reads_them(texts, lowercase, python_lowered):
    from willump.compile.arrow import arrow_code_points

    series = pd.Series(texts, dtype=pd.StringDtype("pyarrow", na_value=np.nan))
    documents, missing = arrow_code_points(series, lowercase)
    assert missing is None
    expected = series.str.lower().tolist() if lowercase else texts
    if python_lowered:
        documents, expected = documents.python_lowered(), [t.lower() for t in expected]
    codes, offsets = documents.codes, documents.offsets
    assert [codes[offsets[i] : offsets[i + 1]].tobytes().decode("utf-32-le") for i in range(len(texts))] == expected


@needs_pyarrow
def test_pyarrow_lowercase_is_one_code_point_each_over_all_of_unicode():
    """The table of pyarrow's utf8_lower read code point by code point lowers every code point, in one
    string, as utf8_lower does: it reads no context."""
    from willump.compile.arrow import arrow_code_points

    points = np.arange(0x110000, dtype=np.uint32)
    everything = points[(points < 0xD800) | (points > 0xDFFF)].tobytes().decode("utf-32-le")
    series = pd.Series([everything, everything[::-1]], dtype="string[pyarrow]")
    documents, _ = arrow_code_points(series, lowercase=True)
    lowered = pc.utf8_lower(pa.array([everything, everything[::-1]])).to_pylist()
    assert documents.codes.tobytes().decode("utf-32-le") == "".join(lowered)


@needs_pyarrow
def test_invalid_utf8_in_pyarrow_runs_as_written():
    """Bytes pyarrow holds without checking them: the kernels refuse, the pipeline answers (or raises) as written."""
    data = pa.py_buffer(b"ab\xff\xfecd")
    array = pa.Array.from_buffers(pa.large_string(), 2, [None, pa.py_buffer(np.array([0, 4, 6], np.int64).tobytes()), data])
    df = pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array([array]))).rename("text").to_frame()
    for optimized in [*TEXT_PIPELINES, STRING_PIPELINES["frame[\"text\"].str.len()"]]:
        arguments = (df,) if optimized in TEXT_PIPELINES else (df["text"], df)
        try:
            expected = optimized.py_func(*arguments)
        except Exception as error:
            with pytest.raises(type(error)):
                optimized(*arguments)
            continue
        result = optimized(*arguments)
        if isinstance(expected, pd.Series):
            assert_same_series(result, expected)
        else:
            np.testing.assert_array_equal(result, expected, strict=True)


def test_numpy_str_values_in_python_backed_strings_run_as_written():
    """pandas keeps numpy's str_ objects in a Python-backed string array (a frame built from numpy's strings):
    they compare equal to literals, so they are not missing values; the call runs as written."""
    frame = pd.DataFrame({"text": pd.array(list(np.array(["a", "b", "a"])), dtype=pd.StringDtype("python"))})
    for call in ('frame["text"] == "a"', 's.isin(["a", "b"])'):
        both = answers(STRING_PIPELINES.get(call) or _string_pipeline(call), frame["text"], frame)
        assert_same_series(*both)
