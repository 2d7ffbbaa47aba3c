"""A whole-call program stacking dense count features with the vectorizers' (``TextLinearProgram``).

The notebook habit: ``X = sp.hstack([tfidf.transform(df["text"]), np.column_stack([np.log1p(
df["text"].str.len()), df["text"].str.count("!")])]).tocsr()``, then a linear model. The program
computes the dense blocks with the sites' own kernels and sums them with the vectorizers' weights
in the fused kernel, as scipy stores them (zeros dropped); it must answer exactly what the chain of
call sites answers, and give the sites the call (``MISS``) whenever they would answer otherwise:
warnings included, which must be given once.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, note
from hypothesis import strategies as st
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.naive_bayes import MultinomialNB

import willump
from answers import define, text_series
from test_compile_kernels import BASE_CORPUS, GRID_DOCUMENTS, assert_same_outcome, document_lists, hypothesis_settings, outcome

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

HELPER = """
def featurize(df):
    words = WORDS.transform(df["text"])
    length = df["text"].str.len()
    exclamations = df["text"].str.count("!")
    mentions = df["text"].str.count("@")
    counts = np.column_stack([np.log1p(length), exclamations, mentions])
    return scipy.sparse.hstack([words, counts]).tocsr()


def pipeline(df):
    X = featurize(df)
    return MODEL.predict_proba(X)[:, 1]
"""
DENSE_FIRST = """
def pipeline(df):
    counts = np.column_stack([df["text"].str.len() / 10, df["n"]])
    words = WORDS.transform(df["text"])
    return FIRST_MODEL.decision_function(sp.hstack([counts, words], format="csr"))
"""
BETWEEN = """
def pipeline(df):
    text = df["text"].str.lower()
    words = WORDS.transform(text)
    shouts = np.column_stack([df["text"].str.count("!") * 2 - 1])
    chars = CHARS.transform(text)
    X = sp.hstack([words, shouts, chars], format="csr")
    return BETWEEN_MODEL.predict(X)
"""
TWO_BLOCKS = """
def pipeline(df):
    words = COUNTS.transform(df["text"])
    a = np.column_stack([df["text"].str.contains("a"), df["text"].str.startswith("T")])
    b = np.column_stack([np.sqrt(df["text"].str.len()), df["n"] - 1])
    return RIDGE.predict(sp.hstack([a, words, b]).tocsr())
"""
SHAPES = {"helper": HELPER, "dense first": DENSE_FIRST, "between": BETWEEN, "two blocks": TWO_BLOCKS}
_PARTS = {"helper": ["WORDS"], "dense first": ["WORDS"], "between": ["WORDS", "CHARS"], "two blocks": ["COUNTS"]}


def _fitted():
    corpus = [d for d in BASE_CORPUS if d] + ["a @b !!", "T! @x @y", "oh!! no!"]
    frame = pd.DataFrame({"text": text_series(corpus), "n": np.arange(len(corpus)) % 4})
    namespace = {
        "np": np, "sp": sp, "scipy": __import__("scipy"),
        "WORDS": TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(corpus),
        "CHARS": TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3), lowercase=False).fit(corpus),
        "COUNTS": CountVectorizer().fit(corpus),
    }
    labels = np.arange(len(corpus)) % 2
    for shape, name, model in [
        ("helper", "MODEL", LogisticRegression(max_iter=500)),
        ("dense first", "FIRST_MODEL", LogisticRegression(max_iter=500)),
        ("between", "BETWEEN_MODEL", LogisticRegression(max_iter=500)),
        ("two blocks", "RIDGE", Ridge()),
    ]:
        namespace[name] = model  # (fitted on the features the function itself builds)
        X = _features(SHAPES[shape], name, namespace, frame)
        target = np.linspace(-1, 1, len(corpus)) if shape == "two blocks" else np.arange(len(corpus)) % 3
        model.fit(X, target if shape in ("two blocks", "between") else labels)
    return namespace


class _Features:
    """Stands for the model while fitting: its methods keep their input."""

    def __getattr__(self, name):
        return lambda X: self.seen.append(X) or np.zeros((X.shape[0], 2))


def _features(source: str, model: str, namespace: dict, frame: pd.DataFrame):
    """The matrix the function ``source`` gives ``model``."""
    features = _Features()
    features.seen = []
    _define(source.replace(f"{model}.", "_FEATURES."), {**namespace, "_FEATURES": features})(frame)
    return features.seen[-1]


def _define(source: str, namespace: dict):
    return define(source, namespace, f"<dense program {id(namespace)} {abs(hash(source))}>")


def _frame(documents: list, n=None) -> pd.DataFrame:
    return pd.DataFrame({"text": text_series(documents), "n": np.arange(len(documents)) % 5 if n is None else n})


def _rows(documents: list) -> list:
    return [_frame([d], [i % 5]) for i, d in enumerate(documents)]


def _whole_calls(optimized) -> int:
    return int(optimized.explain_compilation()["whole_calls"].max())


@hypothesis_settings(max_examples=40)
@given(shape=st.sampled_from(sorted(SHAPES)), docs=document_lists(min_size=1, max_size=5), workers=st.sampled_from([1, 2]))
def test_program_with_dense_blocks_answers_as_the_call_sites(shape, docs, workers):
    namespace = _fitted()
    pipeline = _define(SHAPES[shape], namespace)
    optimized = willump.optimize(workers=workers)(pipeline)
    note(f"{shape}: {docs!r}")
    for rows in [_frame(docs)] + _rows(docs) + _rows(docs):
        assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    assert _whole_calls(optimized) >= len(docs), optimized.explain_compilation().to_string()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_site_is_answered_by_the_program(shape):
    namespace = _fitted()
    pipeline = _define(SHAPES[shape], namespace)
    optimized = willump.optimize(pipeline)
    documents = GRID_DOCUMENTS + ["cat! " * 500, "", "@@@ !!! @!"]
    for rows in [_frame(documents)] + _rows(documents):
        assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    table = optimized.explain_compilation()
    called = table[table["calls"] > 0]
    assert (called["whole_calls"] == called["calls"]).all(), table.to_string()
    assert len(called) >= 5


LOGS = """
def pipeline(df):
    words = WORDS.transform(df["text"])
    counts = np.column_stack([np.log(df["text"].str.count("a")), df["n"]])
    return MODEL.predict_proba(sp.hstack([words, counts], format="csr"))
"""


def _fitted_logs():
    namespace = _fitted()
    corpus = ["a cat", "a a", "banana", "the cat sat on a mat"]
    namespace["MODEL"] = LogisticRegression(max_iter=500).fit(_features(LOGS, "MODEL", namespace, _frame(corpus)), [0, 1, 0, 1])
    return namespace


def _warnings_of(call) -> tuple:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = outcome(call)
    return result, [(w.category, str(w.message)) for w in caught if w.category is not willump.WillumpWarning]


@pytest.mark.parametrize("errors", ["warn", "ignore", "raise", "call"])
def test_a_floating_point_error_leaves_the_call_to_the_sites_and_warns_once(errors):
    """``log(0)`` is -inf, with numpy's warning, and scikit-learn then refuses the matrix: the program
    answers nothing (the sites warn and raise, once); in every error state numpy may be in."""
    namespace = _fitted_logs()
    pipeline = _define(LOGS, namespace)
    optimized = willump.optimize(pipeline)
    good, bad = _frame(["a cat"]), _frame(["the dog"])
    optimized(good), optimized(good)
    calls = []
    with np.errstate(all=errors, call=lambda kind, flag: calls.append(kind)):
        for rows in (bad, good, bad):
            before = len(calls)
            expected = _warnings_of(lambda: pipeline(rows))
            expected_calls = len(calls) - before
            actual = _warnings_of(lambda: optimized(rows))
            assert_same_outcome(actual[0], expected[0])
            assert actual[1] == expected[1]
            assert len(calls) - before - expected_calls == expected_calls  # the user's callback, once
    assert _whole_calls(optimized) >= 3


@pytest.mark.parametrize(
    "rows",
    [
        pd.DataFrame({"text": ["a cat"], "n": [np.nan]}),  # NaN in the matrix: scikit-learn raises
        pd.DataFrame({"text": ["a cat"], "n": [np.inf]}),
        pd.DataFrame({"text": ["a cat"], "n": ["x"]}),  # column_stack of strings
        pd.DataFrame({"text": ["a cat"], "n": [True]}),  # bools: a float64 matrix still
        pd.DataFrame({"text": ["a cat"], "n": [2**62]}),  # ints converted to float64 as scipy converts them
        pd.DataFrame({"text": ["a cat"], "n": np.array([3], np.uint8)}),
        pd.DataFrame({"text": ["a cat"], "n": pd.array([1], dtype="Int64")}),
        pd.DataFrame({"text": ["a cat"]}),  # no column n: KeyError
        pd.DataFrame({"text": [None], "n": [1]}),
        pd.DataFrame({"text": ["a cat", "b"], "n": [0.0, -0.0]}),  # zeros dropped, whatever their sign
    ],
    ids=["nan", "inf", "strings", "bools", "big int", "uint8", "Int64", "no column", "none", "zeros"],
)
def test_values_the_dense_blocks_refuse_or_convert_are_the_sites(rows):
    namespace = _fitted()
    pipeline = _define(DENSE_FIRST, namespace)
    optimized = willump.optimize(pipeline)
    good = _frame(["The cat sat"])
    optimized(good), optimized(good)
    assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    assert_same_outcome(outcome(lambda: optimized(good)), outcome(lambda: pipeline(good)))


@pytest.mark.parametrize(
    "source",
    [
        DENSE_FIRST.replace('df["n"]]', 'df["n"], df["n"]]'),  # not the model's width: scikit-learn raises
        DENSE_FIRST.replace(', format="csr"', ""),  # COO (no format, no .tocsr()), which a model may read otherwise
    ],
    ids=["another width", "coo"],
)
def test_stacks_the_program_does_not_answer_run_as_written(source):
    namespace = _fitted()
    pipeline = _define(source, namespace)
    optimized = willump.optimize(pipeline)
    rows = _frame(["The cat sat"])
    for _ in range(3):
        assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    assert _whole_calls(optimized) == 0


def test_naive_bayes_reading_dense_blocks_is_no_program():
    """Naive Bayes converts the matrix's values (and refuses negative ones): not compiled here."""
    namespace = _fitted()
    corpus = ["a cat", "a a", "banana", "the cat sat on a mat"]
    X = _features(TWO_BLOCKS, "RIDGE", namespace, _frame(corpus, [1, 2, 3, 4]))
    namespace["RIDGE"] = MultinomialNB().fit(X, [0, 1, 0, 1])
    pipeline = _define(TWO_BLOCKS, namespace)
    optimized = willump.optimize(pipeline)
    for rows in [_frame(["a cat"], [3]), _frame(["a cat"], [0]), _frame(["a cat"], [3])]:
        assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    assert _whole_calls(optimized) == 0


def test_rebinding_numpy_or_the_model_is_followed():
    namespace = _fitted()
    pipeline = _define(DENSE_FIRST, namespace)
    optimized = willump.optimize(pipeline)
    rows = _frame(["The cat sat!"])
    optimized(rows), optimized(rows)
    assert _whole_calls(optimized) == 2

    class Numpy:  # a module standing in for numpy, whose column_stack differs
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def column_stack(blocks):
            return np.column_stack(blocks) * 2

    namespace["np"] = Numpy()
    assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    namespace["np"] = np
    namespace["FIRST_MODEL"] = LogisticRegression().fit(
        np.vstack([np.zeros(namespace["FIRST_MODEL"].n_features_in_), np.ones(namespace["FIRST_MODEL"].n_features_in_)]), [0, 1]
    )
    for _ in range(2):  # (the first call builds the program anew)
        assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    assert _whole_calls(optimized) >= 3
