"""A whole call answered by one program (``willump.compile.programs``) gives the chain of call sites' answers.

Pipelines written as users write them (text columns, vectorizers, ``hstack``, a
linear model) are compared with themselves undecorated on random documents, single
rows and batches; then the objects the program was built for are changed every way
a user can change them (refit in place, rebinding, patching the class or the
instance), and the answers must follow.
"""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, note
from hypothesis import strategies as st
from sklearn.feature_extraction.text import HashingVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge

import willump
from willump.compile.programs import chain_of
from answers import define, in_threads, text_series
from test_compile_kernels import BASE_CORPUS, GRID_DOCUMENTS, assert_same_outcome, document_lists, hypothesis_settings, outcome

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

TOXIC = """
def pipeline(df):
    text = df["text"].str.lower()
    words = WORDS.transform(text)
    chars = CHARS.transform(text)
    X = sp.hstack([words, chars], format="csr")
    return MODEL.predict_proba(X)[:, 1]
"""
NESTED = """
def pipeline(df):
    first = WORDS.transform(df["text"])
    second = CHARS.transform(df["text"])
    return MODEL.predict_proba(sp.hstack([first, second], format="csr"))[:, 1]
"""
ONE_VECTORIZER = """
def pipeline(texts):
    return WORDS_ONLY.decision_function(WORDS.transform(texts))
"""
REGRESSION = """
def pipeline(df):
    text = df["text"].str.lower()
    X = sp.hstack([WORDS.transform(text), CHARS.transform(text)], format="csr")
    return RIDGE.predict(X)
"""
TOCSR = """
def pipeline(df):
    words = WORDS.transform(df["text"])
    chars = CHARS.transform(df["text"])
    X = sp.hstack([words, chars]).tocsr()
    return MODEL.predict_proba(X)
"""
SHAPES = {"toxic": TOXIC, "nested": NESTED, "one vectorizer": ONE_VECTORIZER, "regression": REGRESSION,
          "tocsr": TOCSR}


def _fitted():
    words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit(BASE_CORPUS)
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True, lowercase=False).fit(BASE_CORPUS)
    X = sp.hstack([words.transform(BASE_CORPUS), chars.transform(BASE_CORPUS)], format="csr")
    labels = np.arange(len(BASE_CORPUS)) % 2
    return {
        "sp": sp, "WORDS": words, "CHARS": chars,
        "MODEL": LogisticRegression(max_iter=500).fit(X, labels),
        "WORDS_ONLY": LogisticRegression(max_iter=500).fit(words.transform(BASE_CORPUS), labels),
        "RIDGE": Ridge().fit(X, np.linspace(-1, 1, len(BASE_CORPUS))),
    }


def _define(source: str, namespace: dict):
    return define(source, namespace, f"<program pipeline {id(namespace)} {abs(hash(source))}>")


def _whole_calls(optimized) -> int:
    return int(optimized.explain_compilation()["whole_calls"].max())


def _inputs(shape: str, documents: list):
    return documents if shape == "one vectorizer" else pd.DataFrame({"text": text_series(documents)})


def _rows(shape: str, documents: list) -> list:
    return [_inputs(shape, [d]) for d in documents]


@hypothesis_settings(max_examples=60)
@given(shape=st.sampled_from(sorted(SHAPES)), docs=document_lists(min_size=1, max_size=5), workers=st.sampled_from([1, 2]))
def test_program_answers_as_the_call_sites(shape, docs, workers):
    namespace = _fitted()
    pipeline = _define(SHAPES[shape], namespace)
    optimized = willump.optimize(workers=workers)(pipeline)
    note(f"{shape}: {docs!r}")
    calls = [_inputs(shape, docs)] + _rows(shape, docs) + _rows(shape, docs)  # (built, then answering)
    for rows in calls:
        assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    assert _whole_calls(optimized) >= len(docs), optimized.explain_compilation().to_string()


def test_program_answers_grid_documents_and_long_ones():
    """Documents that stress the kernels (Unicode case, surrogates, emoji, long text, counts past the table)."""
    for shape, source in SHAPES.items():
        namespace = _fitted()
        pipeline = _define(source, namespace)
        optimized = willump.optimize(pipeline)
        documents = GRID_DOCUMENTS + ["cat " * 500, ""]
        for rows in [_inputs(shape, documents)] + _rows(shape, documents) * 2:
            assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
        assert _whole_calls(optimized) >= len(documents), shape


@pytest.mark.parametrize(
    "rows",
    [
        pd.DataFrame({"text": [np.nan]}),  # scikit-learn's "np.nan is an invalid document"
        pd.DataFrame({"text": ["a cat", None]}),
        pd.DataFrame({"text": [3]}),
        pd.DataFrame({"text": []}, dtype=object),  # no rows
        pd.DataFrame({"other": ["the cat"]}),  # KeyError
        pd.DataFrame([["the cat", "a mat"]], columns=["text", "text"]),  # two columns named text
        pd.DataFrame({"text": pd.Categorical(["the cat"])}),  # .str.lower() of a categorical
        pd.DataFrame({"text": pd.array(["THE cat"], dtype="string[python]")}),
        {"text": ["the cat"]},  # not a DataFrame
        pd.Series(["the cat"], name="text"),
    ],
    ids=["nan", "none", "number", "no rows", "no column", "two columns", "categorical", "string dtype", "dict", "series"],
)
@pytest.mark.parametrize("shape", ["toxic", "nested", "regression"])
def test_inputs_the_program_refuses_run_as_written(shape, rows):
    namespace = _fitted()
    pipeline = _define(SHAPES[shape], namespace)
    optimized = willump.optimize(pipeline)
    good = pd.DataFrame({"text": ["The cat sat"]})
    optimized(good), optimized(good)  # the program is built and answers
    assert_same_outcome(outcome(lambda: optimized(rows)), outcome(lambda: pipeline(rows)))
    assert_same_outcome(outcome(lambda: optimized(good)), outcome(lambda: pipeline(good)))


def _answering(shape="toxic"):
    namespace = _fitted()
    pipeline = _define(SHAPES[shape], namespace)
    optimized = willump.optimize(pipeline)
    rows = _rows(shape, BASE_CORPUS)
    for row in rows:
        optimized(row)
    assert _whole_calls(optimized) > 0
    return namespace, pipeline, optimized, rows


def _same_answers(optimized, pipeline, rows):
    for row in rows:
        assert_same_outcome(outcome(lambda: optimized(row)), outcome(lambda: pipeline(row)))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_program_built_at_decoration_answers_the_first_call(shape):
    """Callees that are globals are known at decoration: the program answers from the first call
    on, as the call sites would."""
    namespace = _fitted()
    pipeline = _define(SHAPES[shape], namespace)
    optimized = willump.optimize(pipeline)
    rows = _rows(shape, BASE_CORPUS)
    assert_same_outcome(outcome(lambda: optimized(rows[0])), outcome(lambda: pipeline(rows[0])))
    table = optimized.explain_compilation()
    called = table[table["calls"] > 0]  # (the others are the sites of block runs, used after fit)
    assert len(called) >= 2 and (called["whole_calls"] == 1).all(), table.to_string()
    assert (called["status"] == "compiled").all(), table.to_string()
    _same_answers(optimized, pipeline, rows)


def test_refitting_in_place_is_followed():
    namespace, pipeline, optimized, rows = _answering()
    before = _whole_calls(optimized)
    namespace["WORDS"].set_params(ngram_range=(1, 1)).fit(BASE_CORPUS[:6])  # a narrower vocabulary
    namespace["CHARS"].fit(BASE_CORPUS[3:])
    X = sp.hstack([namespace["WORDS"].transform(BASE_CORPUS), namespace["CHARS"].transform(BASE_CORPUS)], format="csr")
    namespace["MODEL"].fit(X, np.arange(len(BASE_CORPUS)) % 3)  # three classes now
    _same_answers(optimized, pipeline, rows)
    assert _whole_calls(optimized) > before + len(rows) // 2  # rebuilt for the new kernels


def test_rebinding_a_global_is_followed():
    namespace, pipeline, optimized, rows = _answering()
    other = LogisticRegression(C=0.01, max_iter=500).fit(
        sp.hstack([namespace["WORDS"].transform(BASE_CORPUS), namespace["CHARS"].transform(BASE_CORPUS)], format="csr"),
        (np.arange(len(BASE_CORPUS)) + 1) % 2,
    )
    namespace["MODEL"] = other
    _same_answers(optimized, pipeline, rows)
    namespace["sp"] = type("FakeSparse", (), {"hstack": staticmethod(lambda blocks, format=None: blocks[1])})
    with pytest.raises(ValueError):  # the model gets the chars block alone: the wrong width
        pipeline(rows[0])
    _same_answers(optimized, pipeline, rows)


def test_methods_patched_on_the_class_or_the_instance_are_called(monkeypatch):
    namespace, pipeline, optimized, rows = _answering()
    original = LogisticRegression.predict_proba
    monkeypatch.setattr(LogisticRegression, "predict_proba", lambda self, X: original(self, X) * 0.5)
    _same_answers(optimized, pipeline, rows)
    monkeypatch.undo()
    _same_answers(optimized, pipeline, rows)
    namespace["CHARS"].transform = lambda documents: namespace["CHARS"].__class__.transform(namespace["CHARS"], [""] * len(documents))
    _same_answers(optimized, pipeline, rows)


def test_a_result_the_model_does_not_read_is_still_computed():
    """A call whose result nothing reads may raise: no program, so it runs (and raises) as written."""
    namespace = _fitted()
    namespace["HASHING"] = HashingVectorizer(n_features=64)
    source = TOXIC.replace('    X = sp.hstack', '    unused = HASHING.transform(text)\n    X = sp.hstack')
    pipeline = _define(source, namespace)
    optimized = willump.optimize(pipeline)
    rows = _rows("toxic", BASE_CORPUS)  # one holds a lone surrogate, which HashingVectorizer cannot encode
    for _ in range(2):
        _same_answers(optimized, pipeline, rows)
    assert _whole_calls(optimized) == 0


def test_bodies_that_are_not_chains_have_no_program():
    namespace = _fitted()
    sources = [
        TOXIC.replace('    X = sp.hstack', '    print("side effect")\n    X = sp.hstack'),  # a plain statement
        TOXIC.replace('[:, 1]', '[:, K]'),  # an index read from a variable
        TOXIC.replace("    return MODEL.predict_proba(X)[:, 1]", "    p = MODEL.predict_proba(X)\n    return p[:, 1]"),
        TOXIC.replace('    text = df["text"].str.lower()', '    text = df["text"].str.lower()\n    text = text'),
    ]
    for source in sources:
        namespace["K"] = 1
        optimized = willump.optimize(_define(source, namespace))
        executor = optimized.executor
        assert executor is None or executor._plain.chain is None or _whole_calls_after(optimized) == 0, source


def _whole_calls_after(optimized) -> int:
    for document in BASE_CORPUS:
        optimized(pd.DataFrame({"text": [document]}))
    return _whole_calls(optimized)


def test_chain_recognizes_nested_calls_and_constant_subscripts():
    namespace = _fitted()
    optimized = willump.optimize(_define(NESTED, namespace))
    chain = optimized.executor._plain.chain
    assert chain is not None and len(chain.steps) == 4 and chain.subscript is not None
    assert chain_of([], optimized.executor.sites, ["df"]) is None


def test_tocsr_of_other_than_the_hstack_is_no_program():
    """``.tocsr()`` makes a chain step of its site call; only the stack's result may be converted."""
    namespace = _fitted()
    source = TOCSR.replace("WORDS.transform(df[\"text\"])", "WORDS.transform(df[\"text\"]).tocsr()")
    pipeline = _define(source, namespace)
    optimized = willump.optimize(pipeline)
    rows = _rows("tocsr", BASE_CORPUS)
    _same_answers(optimized, pipeline, rows)
    assert optimized.executor._plain.chain.steps[0].tocsr
    assert optimized.executor.program is None and _whole_calls(optimized) == 0


def test_concurrent_calls_get_their_own_answers():
    namespace, pipeline, optimized, rows = _answering()
    expected = [pipeline(row) for row in rows]
    failures = []

    def serve(offset):
        for i in range(200):
            k = (i + offset) % len(rows)
            if not np.array_equal(optimized(rows[k]), expected[k]):
                failures.append(k)

    in_threads(serve, range(4))
    assert not failures


def test_frames_with_the_text_column_anywhere():
    """The column's position is remembered per set of column labels, never for other frames."""
    namespace, pipeline, optimized, _ = _answering()
    frames = [
        pd.DataFrame({"text": text_series(BASE_CORPUS), "other": ["x"] * len(BASE_CORPUS)}),
        pd.DataFrame({"other": text_series(BASE_CORPUS[::-1]), "text": text_series(BASE_CORPUS)}),
        pd.DataFrame({"a": 1, "other": text_series(BASE_CORPUS), "text": text_series(BASE_CORPUS[::-1])}),
    ]
    calls = [(frame, i) for frame in frames for i in range(len(BASE_CORPUS))]  # one frame's rows in turn
    calls += [(frame, i) for i in range(len(BASE_CORPUS)) for frame in frames]  # the frames in turn
    for frame, i in calls:
        row = frame.iloc[[i]]
        assert_same_outcome(outcome(lambda: optimized(row)), outcome(lambda: pipeline(row)))


def test_a_failing_program_leaves_the_answer_to_the_call_sites(monkeypatch):
    """A program must never change the answer: an error inside it (a bug) means the sites answer."""
    from willump.compile import programs

    namespace, pipeline, optimized, rows = _answering()

    def broken(source, arguments):
        raise RuntimeError("a bug in the program")

    monkeypatch.setattr(programs, "_read_documents", broken)
    before = _whole_calls(optimized)
    _same_answers(optimized, pipeline, rows)
    assert _whole_calls(optimized) == before
