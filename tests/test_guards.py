"""Guards the function starts with (``if <test>: return/raise``): every call runs them first, as
written, and answers exactly as the original when one ends the call; fit and top_k work on the
rest of the body. And what fit and top_k say about a function that runs unmodified.

The pipeline is the product workload's shape on real messages (UCI SMS Spam Collection): word
and character TF-IDF of a text column, logistic regression.
"""

import csv
import inspect
import traceback
import warnings

import cloudpickle
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump
from benchmarks.data import require
from willump.graph.build import HINTS
from test_compile_kernels import hypothesis_settings

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

WORDS = CHARS = MODEL = None  # fitted by the ``sms`` fixture; the pipelines read them when called
MESSAGES = LABELS = None
CHECKED = []  # the batch sizes ``checked_empty`` saw: a guard's test runs once per call


@pytest.fixture(scope="module", autouse=True)
def sms(datasets):
    """Train the vectorizers and the model on the first 2,000 messages; the rest are for fit and calls."""
    global WORDS, CHARS, MODEL, MESSAGES, LABELS
    frame = pd.read_csv(require("sms_spam/SMSSpamCollection"), sep="\t", header=None,
                        names=["label", "text"], quoting=csv.QUOTE_NONE)
    text, labels = frame["text"], (frame["label"] == "spam").to_numpy().astype(int)
    WORDS = TfidfVectorizer(ngram_range=(1, 2), min_df=2).fit(text[:2000])
    CHARS = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2).fit(text[:2000])
    X = sp.hstack([WORDS.transform(text[:2000]), CHARS.transform(text[:2000])], format="csr")
    MODEL = LogisticRegression(max_iter=1000).fit(X, labels[:2000])
    MESSAGES = pd.DataFrame({"text": text[2000:]}).set_index(pd.RangeIndex(2000, len(frame)) * 3)
    LABELS = labels[2000:]


def features(df):
    return sp.hstack([WORDS.transform(df["text"]), CHARS.transform(df["text"])], format="csr")


# --- guarded pipelines, as users write them ----------------------------------------------


def empty_frame(df):
    """Spam probability per message."""
    if df.empty:
        return np.zeros(0)
    X = sp.hstack([WORDS.transform(df["text"]), CHARS.transform(df["text"])], format="csr")
    return MODEL.predict_proba(X)[:, 1]


def no_rows(df):
    if len(df) == 0:
        return np.zeros(0)
    words = WORDS.transform(df["text"])
    chars = CHARS.transform(df["text"])
    return MODEL.predict(sp.hstack([words, chars], format="csr"))


def not_a_frame(df):
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"not_a_frame needs a DataFrame of messages, got {type(df).__name__}")
    X = sp.hstack([WORDS.transform(df["text"]), CHARS.transform(df["text"])], format="csr")
    return pd.Series(MODEL.predict_proba(X)[:, 1], index=df.index, name="spam")


def second_parameter(df, limit=None):
    if limit is not None and len(df) > limit:
        empty = pd.Series(np.nan, index=df.index, name="spam")
        return empty
    elif limit == 0:
        raise ValueError("limit 0 allows no rows")
    X = sp.hstack([WORDS.transform(df["text"]), CHARS.transform(df["text"])], format="csr")
    return pd.Series(MODEL.predict_proba(X)[:, 1], index=df.index, name="spam")


def checked(df):
    CHECKED.append(len(df))
    return len(df) == 0


def checked_empty(df):
    if checked(df):
        return np.array([], dtype=np.int64)
    X = sp.hstack([WORDS.transform(df["text"]), CHARS.transform(df["text"])], format="csr")
    return MODEL.predict(X)


GUARDED = [empty_frame, no_rows, not_a_frame, second_parameter, checked_empty]


def line_of(function, text) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def outcome(call):
    """('value', result) or ('raised', exception)."""
    try:
        return "value", call()
    except Exception as error:  # noqa: BLE001 - compared below
        return "raised", error


def assert_same(actual, expected):
    """The same value (to the bit), type, dtype, shape and index; or the same exception, raised
    on the same line."""
    kind, value = actual
    assert kind == expected[0], (actual, expected)
    expected = expected[1]
    if kind == "raised":
        assert type(value) is type(expected) and str(value) == str(expected)
        where = traceback.extract_tb(value.__traceback__)[-1]
        assert (where.filename, where.lineno) == traceback.extract_tb(expected.__traceback__)[-1][:2]
    elif isinstance(expected, pd.Series):
        pd.testing.assert_series_equal(value, expected, check_exact=True)
    else:
        assert type(value) is type(expected) and value.dtype == expected.dtype and value.shape == expected.shape
        np.testing.assert_array_equal(value, expected)


def both(optimized, *args, **kwargs):
    """(optimized outcome, original outcome), each with its own count of guard tests."""
    CHECKED.clear()
    mine = outcome(lambda: optimized(*args, **kwargs))
    count = len(CHECKED)
    CHECKED.clear()
    theirs = outcome(lambda: optimized.py_func(*args, **kwargs))
    assert count == len(CHECKED)  # the guard's test ran as often as in the original: once
    return mine, theirs


# --- the graph ----------------------------------------------------------------------------


@pytest.mark.parametrize("function", GUARDED, ids=lambda f: f.__name__)
def test_guarded_functions_get_a_graph_listing_their_guards(function):
    with warnings.catch_warnings():
        warnings.simplefilter("error", willump.WillumpWarning)  # nothing runs as plain Python
        optimized = willump.optimize(function)
    assert optimized.graph.optimizable and len(optimized.graph.ifvs) == 2
    line = line_of(function, "    if ")
    assert f"guard: line {line}" in repr(optimized.graph)
    assert f"guard: line {line}: " in str(optimized.graph)
    assert optimized.explain().attrs["summary"]["guards"][0].startswith(f"line {line}: if ")


def walrus_test(df):
    if (n := len(df)) == 0:
        return np.zeros(0)
    return MODEL.predict_proba(features(df))[:n, 1]


def with_else(df):
    if df.empty:
        return np.zeros(0)
    else:
        X = features(df)
    return MODEL.predict_proba(X)[:, 1]


def after_features(df):
    X = features(df)
    if df.empty:
        return np.zeros(0)
    return MODEL.predict_proba(X)[:, 1]


def reads_a_later_local(df):
    if len(df) < minimum:
        return np.zeros(0)
    minimum = 1
    return MODEL.predict_proba(features(df))[:minimum, 1]


def binds_for_the_rest(df):
    if df.empty:
        zeros = np.zeros(0)
        return zeros
    return MODEL.predict_proba(features(df))[:, 1] + zeros


@pytest.mark.parametrize(
    "function", [walrus_test, with_else, after_features, reads_a_later_local, binds_for_the_rest],
    ids=lambda f: f.__name__,
)
def test_early_returns_that_are_not_guards_still_run_the_function_unmodified(function):
    optimized = willump.optimize(function)
    assert not optimized.graph.optimizable and "early return" in optimized.graph.unmodified_reason
    rows = MESSAGES.iloc[:3]
    assert_same(*both(optimized, rows))
    with pytest.raises(ValueError, match="put early returns first"):
        optimized.fit(rows, y=LABELS[:3], progress=False)


# --- exactness ----------------------------------------------------------------------------


@hypothesis_settings(60)
@given(
    function=st.sampled_from(GUARDED),
    rows=st.one_of(st.sampled_from([0, 1]), st.integers(0, 12)),
    start=st.integers(0, 3000),
    limit=st.one_of(st.none(), st.integers(0, 6)),
)
def test_the_same_answer_whether_a_guard_fires_or_not(function, rows, start, limit):
    optimized = willump.optimize(function)
    batch = MESSAGES.iloc[start:start + rows]
    arguments = (batch, limit) if function is second_parameter else (batch,)
    assert_same(*both(optimized, *arguments))
    if function is second_parameter:
        assert_same(*both(optimized, batch, limit=limit))


@pytest.mark.parametrize("given_input", [["free entry now"], pd.Series(["free entry now"]), None])
def test_a_raising_guard_raises_the_originals_exception_on_its_line(given_input):
    optimized = willump.optimize(not_a_frame)
    mine, theirs = both(optimized, given_input)
    assert mine[0] == "raised" and isinstance(mine[1], TypeError)
    assert_same(mine, theirs)
    assert traceback.extract_tb(mine[1].__traceback__)[-1].lineno == line_of(not_a_frame, "raise TypeError")


@pytest.mark.parametrize("options", [{"compile": False}, {"cache": "prediction", "cache_size": 8}, {"cache_size": 8}],
                         ids=["plain", "prediction cache", "feature cache"])
def test_guards_run_first_on_every_path(options):
    optimized = willump.optimize(checked_empty, **options)
    for batch in [MESSAGES.iloc[:0], MESSAGES.iloc[:5], MESSAGES.iloc[:0], MESSAGES.iloc[:5], MESSAGES.iloc[7:8]]:
        assert_same(*both(optimized, batch))  # (a cached result too: the guard's test ran first)


def test_a_guarded_function_pickles_with_its_guards():
    optimized = cloudpickle.loads(cloudpickle.dumps(willump.optimize(second_parameter)))
    assert optimized.graph.guards
    assert_same(*both(optimized, MESSAGES.iloc[:4], 2))
    assert_same(*both(optimized, MESSAGES.iloc[:4], 0))


# --- fit, cascades and top-K ----------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted(sms):
    """``empty_frame`` fitted on messages its model has not seen, cascading."""
    optimized = willump.optimize(empty_frame).fit(
        MESSAGES.iloc[:1500], y=LABELS[:1500], validation=(MESSAGES.iloc[1500:2500], LABELS[1500:2500]),
        progress=False,
    )
    if not optimized._fitted.cascading:  # (fit measured it slower: served cascaded all the same)
        optimized.set_threshold(0.8)
    return optimized


def test_fit_works_on_a_guarded_function(fitted):
    summary = fitted.explain().attrs["summary"]
    assert summary["fitted"] and summary["cascades"] == "on"
    assert summary["guards"][0].startswith(f"line {line_of(empty_frame, 'if df.empty')}")


@hypothesis_settings(25)
@given(rows=st.one_of(st.just(0), st.integers(0, 20)), start=st.integers(2500, 3500))
def test_cascaded_answers_when_the_guard_fires_are_the_originals(fitted, rows, start):
    batch = MESSAGES.iloc[start:start + rows]
    fitted.reset_stats()
    result = fitted(batch)
    expected = empty_frame(batch)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    if rows == 0:
        assert_same(("value", result), ("value", expected))
    else:  # the cascade answered: some rows by the small model, the others by the full one
        stats = fitted.stats
        assert stats["rows_small_model"] + stats["rows_full_model"] == rows


def test_top_k_on_an_empty_batch_and_when_a_guard_ends_the_call(fitted):
    assert np.array_equal(fitted.top_k(MESSAGES.iloc[:0], k=5), np.array([], dtype=np.intp))
    optimized = willump.optimize(second_parameter)
    batch = MESSAGES.iloc[:30]
    scores = second_parameter(batch).to_numpy()
    np.testing.assert_array_equal(optimized.top_k(batch, None, k=5), np.argsort(-scores, kind="stable")[:5])
    line = line_of(second_parameter, "if limit is not None")
    with pytest.raises(ValueError, match=f"top_k needs the model's output for these rows, but the guard on line {line}"):
        optimized.top_k(batch, 10, k=5)
    with pytest.raises(TypeError, match="needs a DataFrame"):  # a guard that raises raises its own error
        willump.optimize(not_a_frame).top_k(list(batch["text"]), k=5)


def test_fit_refuses_rows_a_guard_answers():
    optimized = willump.optimize(empty_frame)
    line = line_of(empty_frame, "if df.empty")
    with pytest.raises(ValueError, match=f"fit needs the model's output for the training rows, but the guard on line {line}"):
        optimized.fit(MESSAGES.iloc[:0], y=LABELS[:0], progress=False)
    with pytest.raises(ValueError, match=f"for the validation rows, but the guard on line {line}"):
        optimized.fit(MESSAGES.iloc[:50], y=LABELS[:50], validation=(MESSAGES.iloc[:0], LABELS[:0]), progress=False)
    guarded = willump.optimize(second_parameter)
    with pytest.raises(ValueError, match=f"guard on line {line_of(second_parameter, 'if limit is not None')}"):
        guarded.fit(MESSAGES.iloc[:50], 10, y=LABELS[:50], progress=False)


# --- what fit and top_k say about a function run unmodified ----------------------------------


async def asynchronous(df):
    return MODEL.predict(features(df))


def star_arguments(df, *more):
    return MODEL.predict(features(df))


CALLS = 0


def global_counter(df):
    global CALLS
    CALLS += 1
    return MODEL.predict(features(df))


def nested_definition(df):
    def helper(frame):
        return features(frame)

    return MODEL.predict(helper(df))


def generator(df):
    yield MODEL.predict(features(df))


def early_return(df):
    X = features(df)
    if X.shape[0] == 0:
        return np.zeros(0)
    return MODEL.predict(X)


def dynamic_scope(df):
    X = features(df)
    return MODEL.predict(locals()["X"])


def late_binding(df):
    X = features(df)
    later = lambda: X  # noqa: E731
    return MODEL.predict(later())


def no_return(df):
    predictions = MODEL.predict(features(df))  # noqa: F841


def no_model(df):
    return df["text"].str.len()


def conditional_model(df):
    X = features(df)
    return MODEL.predict(X) if X.shape[0] else np.zeros(0)


def walrus(df):
    X = sp.hstack([(words := WORDS.transform(df["text"])), CHARS.transform(df["text"])], format="csr")
    return MODEL.predict(X)[: words.shape[0]]


def rebinding(df):
    text = df["text"]
    blocks = [WORDS.transform(text), CHARS.transform(text)]
    text = None  # noqa: F841
    return MODEL.predict(sp.hstack(blocks, format="csr"))


UNMODIFIED = [
    (asynchronous, "async def", "async"),
    (star_arguments, "def star_arguments", "star-arguments"),
    (global_counter, "global CALLS", "outer names"),
    (nested_definition, "def helper", "nested definition"),
    (generator, "yield", "generator"),
    (early_return, "return np.zeros(0)", "early return"),
    (dynamic_scope, "locals()", "dynamic scope"),
    (late_binding, "later = lambda", "late binding"),
    (no_return, "predictions =", "no return"),
    (no_model, "return df", "no model"),
    (conditional_model, "if X.shape[0] else", "conditional model"),
    (walrus, "words :=", "walrus"),
    (rebinding, "blocks = [", "rebinding"),
]


def nonlocal_counter():
    calls = 0

    def counted(df):
        nonlocal calls
        calls += 1
        return MODEL.predict(features(df))

    return counted


@pytest.mark.parametrize("function, fragment, kind", UNMODIFIED + [(nonlocal_counter(), "nonlocal calls", "outer names")],
                         ids=[kind for _, _, kind in UNMODIFIED] + ["nonlocal"])
def test_fit_and_top_k_say_what_prevents_them_and_how_to_write_it(function, fragment, kind):
    optimized = willump.optimize(function)
    assert not optimized.graph.optimizable
    line = line_of(function, fragment)
    for refuse in (lambda: optimized.fit(MESSAGES.iloc[:20], y=LABELS[:20], progress=False),
                   lambda: optimized.top_k(MESSAGES.iloc[:20], k=3)):
        with pytest.raises(ValueError) as refused:
            refuse()
        message = str(refused.value)
        assert f"line {line}: " in message and optimized.graph.unmodified_reason in message
        assert message.endswith(f"to fix it, {HINTS[kind]}")


def test_each_hint_has_a_reason_that_gives_it():
    kinds = {kind for _, _, kind in UNMODIFIED}
    assert kinds == set(HINTS) - {"input after model", "model arguments"}
    assert "move the model call out of the condition" in HINTS["conditional model"]
    assert "return model.predict(" in HINTS["no return"]
    assert "without :=" in HINTS["walrus"]


def model_options(df):
    return MODEL.predict_proba(features(df), **{})[:, 1]


def input_after_model(df):
    X = sp.hstack([WORDS.transform(df["text"]), CHARS.transform(df["text"])], format="csr")
    scores = MODEL.predict_proba(X)[:, 1]
    return scores * X.shape[1]


@pytest.mark.parametrize("function, kind", [(model_options, "model arguments"), (input_after_model, "input after model")])
def test_top_k_says_how_to_write_a_model_call_it_cannot_score(function, kind):
    optimized = willump.optimize(function)
    assert optimized.graph.optimizable
    with pytest.raises(ValueError, match="top_k cannot score rows") as refused:
        optimized.top_k(MESSAGES.iloc[:20], k=3)
    assert HINTS[kind] in str(refused.value)
