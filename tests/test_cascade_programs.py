"""A cascaded call answered by one program (``cascade.CascadedTextProgram``) gives the block by
block cascade's answers.

Text pipelines written as users write them are fitted once; then the same calls are
answered with the program and without it (``cascade._program`` returning None), on
random documents, single rows and batches, at thresholds from "every row to the small
model" to "every row to the full model", and the answers, their dtype and the row
counts must be the same.
"""

import cloudpickle
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, note
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump
from willump.runtime import cascade
from answers import define, text_series
from test_compile_kernels import GRID_DOCUMENTS, assert_same_outcome, document_lists, hypothesis_settings, outcome
from test_compile_programs import TOXIC  # (the toxic workload's shape)

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

LABELS = """
def pipeline(df):
    X = sp.hstack([WORDS.transform(df["text"]), CHARS.transform(df["text"])], format="csr")
    return LABELLER.predict(X)
"""
MARGINS = """
def pipeline(df):
    text = df["text"].str.lower()
    X = sp.hstack([WORDS.transform(text), CHARS.transform(text)], format="csr")
    return MODEL.decision_function(X)
"""
THREE_CLASSES = """
def pipeline(df):
    text = df["text"].str.lower()
    return THREE.predict_proba(sp.hstack([WORDS.transform(text), CHARS.transform(text)], format="csr"))
"""
SHAPES = {"scores": TOXIC, "labels": LABELS, "margins": MARGINS, "three classes": THREE_CLASSES}

POSITIVE = ["good", "great", "lovely", "fine", "superb"]
NEGATIVE = ["bad", "awful", "poor", "dreadful", "vile"]
NEUTRAL = ["the", "cat", "sat", "on", "mat", "a", "day", "we", "saw", "it", "and", "then", "ÉTÉ", "naïve", "😀"]


def corpus(n: int, random_state: int) -> tuple[list, np.ndarray]:
    """Documents of neutral words and, mostly, words of one sentiment (the label): the word
    features decide most rows, the character features help with the rest."""
    rng = np.random.default_rng(random_state)
    documents, labels = [], rng.integers(0, 2, n)
    for label in labels:
        words = list(rng.choice(NEUTRAL, rng.integers(2, 8)))
        if rng.random() < 0.85:
            words.append(rng.choice(POSITIVE if label else NEGATIVE))
        else:  # a misspelt sentiment word: only the character n-grams see it
            words.append(rng.choice(POSITIVE if label else NEGATIVE)[:-1] + "x")
        rng.shuffle(words)
        documents.append(" ".join(words))
    return documents, labels


TRAIN, Y_TRAIN = corpus(800, 0)
VALID, Y_VALID = corpus(400, 1)
TEST, _ = corpus(200, 2)


def _namespace() -> dict:
    words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(TRAIN)
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, lowercase=False).fit(TRAIN)
    X = sp.hstack([words.transform([t.lower() for t in TRAIN]), chars.transform([t.lower() for t in TRAIN])], format="csr")
    return {
        "sp": sp, "WORDS": words, "CHARS": chars,
        "MODEL": LogisticRegression(max_iter=500).fit(X, Y_TRAIN),
        "LABELLER": LogisticRegression(max_iter=500).fit(X, np.where(Y_TRAIN == 1, "pos", "neg")),
        "THREE": LogisticRegression(max_iter=500).fit(X, Y_TRAIN + (np.arange(len(TRAIN)) % 3 == 0)),
    }


def _labels(shape: str, y: np.ndarray) -> np.ndarray:
    if shape == "labels":
        return np.where(y == 1, "pos", "neg")
    if shape == "three classes":
        return y + (np.arange(len(y)) % 3 == 0)
    return y


def _fit(shape: str, **options):
    namespace = _namespace()
    pipeline = define(SHAPES[shape], namespace, f"<cascaded pipeline {shape} {id(namespace)}>")
    optimized = willump.optimize(pipeline, **options).fit(
        pd.DataFrame({"text": TRAIN}), y=_labels(shape, Y_TRAIN),
        validation=(pd.DataFrame({"text": VALID}), _labels(shape, Y_VALID)), top_k=False, check_speed=False,
        progress=False,
    )
    if optimized._fitted.threshold is None:  # no threshold within the accuracy loss: served cascaded all the same
        assert optimized._fitted.small_model is not None, optimized.explain().attrs["summary"]
        optimized._fitted.threshold = 0.8
    return optimized


_FITTED = {}


def fitted(shape: str, workers: int = 1):
    """The pipeline of ``shape``, fitted once per module (fit takes seconds)."""
    key = (shape, workers)
    if key not in _FITTED:
        _FITTED[key] = _fit(shape, workers=workers)
    return _FITTED[key]


def by_blocks(optimized, rows):
    """The answer and row counts of the block by block cascade (no program)."""
    program = cascade._program
    cascade._program = lambda executor, fitted: None
    try:
        return answer_and_counts(optimized, rows)
    finally:
        cascade._program = program


def answer_and_counts(optimized, rows):
    optimized.reset_stats()
    answer = outcome(lambda: optimized(rows))
    stats = optimized.stats
    return answer, (stats["rows_seen"], stats["rows_small_model"], stats["rows_full_model"])


def whole_calls(optimized) -> int:
    return int(optimized.explain_compilation()["whole_calls"].max())


def assert_program_answers_as_the_blocks(optimized, rows):
    before = whole_calls(optimized)
    answer, counts = answer_and_counts(optimized, rows)
    expected, expected_counts = by_blocks(optimized, rows)
    assert_same_outcome(answer, expected)
    assert counts == expected_counts
    assert whole_calls(optimized) == before + 1, optimized.explain_compilation().to_string()
    return counts


@hypothesis_settings(max_examples=50)
@given(
    shape=st.sampled_from(sorted(SHAPES)), docs=document_lists(min_size=1, max_size=5),
    picked=st.lists(st.integers(0, len(TEST) - 1), max_size=4), threshold=st.sampled_from([0.5, 0.7, 0.9, 0.99, 1.0]),
    workers=st.sampled_from([1, 2]),
)
def test_cascaded_program_answers_as_the_blocks(shape, docs, picked, threshold, workers):
    optimized = fitted(shape, workers)
    optimized._fitted.threshold = threshold
    documents = docs + [TEST[i] for i in picked]
    note(f"{shape} at {threshold}: {documents!r}")
    assert_program_answers_as_the_blocks(optimized, pd.DataFrame({"text": text_series(documents)}))
    for document in documents:
        assert_program_answers_as_the_blocks(optimized, pd.DataFrame({"text": text_series([document], index=[7])}))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_batch_of_sure_and_unsure_rows(shape):
    optimized = fitted(shape)
    rows = pd.DataFrame({"text": text_series(TEST + GRID_DOCUMENTS)})
    selected = optimized._fitted.selected
    values = optimized._executor.features((rows,), ifvs=selected)[1]
    confidence = optimized._fitted.small_model.predict_proba(
        sp.hstack([values[i] for i in selected], format="csr")
    ).max(axis=1)
    # a row's confidence: rows exactly at the threshold take the small model's answer ("at least")
    optimized._fitted.threshold = threshold = np.sort(confidence)[len(confidence) // 2]
    seen, small, full = assert_program_answers_as_the_blocks(optimized, rows)
    assert seen == len(rows) and small > 0 and full > 0
    unsure = confidence < threshold
    assert unsure.sum() == full
    # the rows the full model answered are the undecorated pipeline's answers, to the bit
    result, exact = optimized(rows), optimized.py_func(rows)
    np.testing.assert_array_equal(np.asarray(result)[unsure], np.asarray(exact)[unsure])


@pytest.mark.parametrize(
    "rows",
    [
        pd.DataFrame({"text": [np.nan]}),
        pd.DataFrame({"text": ["a good cat", None]}),
        pd.DataFrame({"text": [3]}),
        pd.DataFrame({"text": []}, dtype=object),
        pd.DataFrame({"other": ["good"]}),
        pd.DataFrame([["good", "bad"]], columns=["text", "text"]),
        pd.DataFrame({"text": pd.Categorical(["GOOD cat"])}),
    ],
    ids=["nan", "none", "number", "no rows", "no column", "two columns", "categorical"],
)
def test_inputs_the_program_refuses_go_block_by_block(rows):
    optimized = fitted("scores")
    before = whole_calls(optimized)
    answer, counts = answer_and_counts(optimized, rows)
    expected, expected_counts = by_blocks(optimized, rows)
    assert_same_outcome(answer, expected)
    assert counts == expected_counts
    assert whole_calls(optimized) == before


def test_the_program_follows_a_new_fit_and_a_new_threshold():
    optimized = _fit("scores")
    rows = pd.DataFrame({"text": TEST})
    first = assert_program_answers_as_the_blocks(optimized, rows)
    optimized._fitted.threshold = 1.0  # every row to the full model
    assert assert_program_answers_as_the_blocks(optimized, rows) == (len(rows), 0, len(rows))
    assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: optimized.py_func(rows)))
    small_model = optimized._fitted.small_model
    optimized.fit(
        pd.DataFrame({"text": VALID}), y=Y_VALID, validation=(pd.DataFrame({"text": TRAIN}), Y_TRAIN),
        top_k=False, progress=False,
    )
    assert optimized._fitted.small_model is not small_model
    optimized._fitted.threshold = optimized._fitted.threshold or 0.8
    assert_program_answers_as_the_blocks(optimized, rows)
    assert first[0] == len(rows)


def test_a_refitted_vectorizer_sends_calls_block_by_block():
    optimized = _fit("scores")
    rows = pd.DataFrame({"text": TEST[:20]})
    assert_program_answers_as_the_blocks(optimized, rows)
    optimized.py_func.__globals__["CHARS"].fit(VALID)  # in place: the kernels are no longer valid
    before = whole_calls(optimized)
    answer, _ = answer_and_counts(optimized, rows)
    assert whole_calls(optimized) == before
    assert_same_outcome(answer, by_blocks(optimized, rows)[0])


def test_after_pickling_the_first_call_is_answered_by_the_program():
    optimized = fitted("scores")
    optimized._fitted.threshold = 0.9
    restored = cloudpickle.loads(cloudpickle.dumps(optimized))
    rows = pd.DataFrame({"text": TEST[:30]})
    assert whole_calls(restored) == 0
    assert_program_answers_as_the_blocks(restored, rows)
    assert_same_outcome(outcome(lambda: restored(rows)), outcome(lambda: optimized(rows)))
