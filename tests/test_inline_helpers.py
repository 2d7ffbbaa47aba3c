"""Helpers are part of the graph: a call of the user's own ``def`` is read in as its statements.

Exactness against the undecorated function (batch and single rows), the IFVs the helpers' blocks
become, their compiled and fused vectorizers, fit with IFVs from helpers, tracebacks pointing at the
helpers' lines, the warning naming a helper that stays one call, and a helper rebound later.
"""

import functools
import re
import sys
import traceback
import warnings

import numba
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import helper_features
import willump
from helper_features import featurize as imported_featurize
from willump.errors import WillumpWarning
from willump.compile.sites import AS_WRITTEN

word_vec = char_vec = model = None  # fitted on the tweets (the ``tweets`` fixture)
scale = -1.0  # helper_features reads its own 'scale' (10.0)
CALLS = []


# --- helpers and the functions calling them ------------------------------------------------


def featurize(df):
    words = word_vec.transform(df["tweet"])
    chars = char_vec.transform(df["tweet"])
    return sp.hstack([words, chars], format="csr")


def predict(df):
    X = featurize(df)
    return model.predict_proba(X)[:, 1]


def written_in_place(df):
    words = word_vec.transform(df["tweet"])
    chars = char_vec.transform(df["tweet"])
    X = sp.hstack([words, chars], format="csr")
    return model.predict_proba(X)[:, 1]


def text_features(df, column="tweet"):
    return word_vec.transform(df[column])


def meta_features(df, *, vectorizer=char_vec):  # (the default is None when this line runs: see test)
    return char_vec.transform(df["tweet"])


def blocks_in_the_call(df):
    X = sp.hstack([text_features(df), meta_features(df)], format="csr")
    return model.predict_proba(X)[:, 1]


def column_of(df, column):
    return df[column]


def words_of(df, column="tweet", vectorizer=None):
    text = column_of(df, column)
    vectorizer = word_vec if vectorizer is None else vectorizer
    return vectorizer.transform(text)


def chars_of(df, *, analyzer_vec):
    text = column_of(df, column="tweet")
    return analyzer_vec.transform(text)


def helpers_calling_helpers(df):
    words = words_of(df)
    chars = chars_of(df, analyzer_vec=char_vec)
    return model.predict_proba(sp.hstack([words, chars], format="csr"))[:, 1]


def the_model_in_a_helper(df):
    return probability(featurize(df))


def probability(X):
    scores = model.predict_proba(X)
    return scores[:, 1]


def imported(df):
    X = imported_featurize(df)
    return imported_model.predict_proba(X)[:, 1]


def imported_blocks(df):
    X = sp.hstack([helper_features.word_block(df, lower=True), helper_features.char_block(df),
                   helper_features.length_block(df)], format="csr")
    return imported_model.predict_proba(X)[:, 1]


imported_model = None


def shouting(df):
    return df["tweet"].str.count("!") / (df["tweet"].str.len() + 1)


class Weighted:
    """A model of a frame's columns (willump builds a graph on its call)."""

    def predict(self, X):
        return X.to_numpy() @ np.arange(1.0, X.shape[1] + 1)


weighted_model = Weighted()


def helper_in_a_frame(df):
    X = pd.DataFrame({"shouting": shouting(df), "marks": df["tweet"].str.count("#")})
    return weighted_model.predict(X)


def helper_after_a_spread(df):
    X = pd.DataFrame({**{"marks": df["tweet"].str.count("#")}, "shouting": shouting(df)})
    return weighted_model.predict(X)


def make_closure_predict(vectorizer):
    """A decorated closure calling a closure helper; the helper's 'vectorizer' is no name of predict's."""

    def block(df):
        return vectorizer.transform(df["tweet"])

    def closure_predict(df):
        words = block(df)
        X = sp.hstack([words, char_vec.transform(df["tweet"])], format="csr")
        return model.predict_proba(X)[:, 1]

    return closure_predict


def tweets_of(n, random_state=0):
    return TWEETS.sample(n, random_state=random_state)[["tweet"]]


TWEETS = None


@pytest.fixture(scope="module", autouse=True)
def tweets(datasets):
    """The Davidson tweets; vectorizers and models fitted on 4000 of them, installed as globals."""
    global TWEETS, word_vec, char_vec, model, imported_model
    frame = pd.read_csv(datasets / "hate_speech_davidson" / "labeled_data.csv")
    TWEETS = frame.assign(label=(frame["class"] != 2).astype(int))
    train = TWEETS.sample(4000, random_state=1)
    text = train["tweet"]
    word_vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True).fit(text)
    char_vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), min_df=2, sublinear_tf=True).fit(text)
    model = LogisticRegression(C=4.0, max_iter=2000).fit(
        sp.hstack([word_vec.transform(text), char_vec.transform(text)]), train["label"]
    )
    helper_features.word_vectorizer = TfidfVectorizer(min_df=2).fit(text.str.lower())
    helper_features.char_vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3), min_df=2).fit(
        text.str.lower()
    )
    imported_model = LogisticRegression(max_iter=2000).fit(helper_features.featurize(train), train["label"])
    yield


def optimized(function):
    with warnings.catch_warnings():
        warnings.simplefilter("error", WillumpWarning)  # a helper left as one call would warn
        return willump.optimize(function)


def assert_exact(f, frame):
    expected = f.py_func(frame)
    result = f(frame)
    assert type(result) is type(expected) and result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)
    for i in range(3):  # single rows
        row = frame.iloc[[i]]
        np.testing.assert_array_equal(f(row), f.py_func(row))


# --- read in: exact, IFVs, compiled -----------------------------------------------------------


def test_a_helper_is_read_in_as_if_written_in_place():
    f = optimized(predict)
    frame = tweets_of(500)
    assert_exact(f, frame)
    in_place = optimized(written_in_place)
    assert [ifv.name for ifv in f.graph.ifvs] == [ifv.name for ifv in in_place.graph.ifvs] == ["words", "chars"]
    assert f.graph.combiner.kind == "scipy.sparse.hstack"
    assert [s.lineno for s in f.graph.ifvs[0].generator] == [featurize.__code__.co_firstlineno + 1]
    in_place(frame)
    table, same = f.explain_compilation(), in_place.explain_compilation()
    assert list(table["status"]) == list(same["status"]) == ["compiled"] * 4
    assert list(table["call"]) == list(same["call"])
    # One program answers the whole call, the vectorizers fused with the model, as written in place.
    assert (table["whole_calls"] > 0).all() and (same["whole_calls"] > 0).all()
    assert f._executor.program is not None and type(f._executor.program) is type(in_place._executor.program)


def test_a_helper_per_block_of_the_concatenation():
    f = optimized(blocks_in_the_call)
    assert_exact(f, tweets_of(300))
    assert [ifv.name for ifv in f.graph.ifvs] == ["text_features", "meta_features"]
    assert [ifv.columns for ifv in f.graph.ifvs] == [("tweet",), ("tweet",)]
    assert set(f.explain_compilation()["status"]) == {"compiled"}


def test_a_helper_in_a_dict_display_is_read_in():
    """``pd.DataFrame({"a": helper(df), ...})``: only constants run before the helper's call, so it is read in."""
    f = optimized(helper_in_a_frame)
    assert_exact(f, tweets_of(200))
    table = f.explain_compilation()
    read_in = table[table["line"] == shouting.__code__.co_firstlineno + 1]
    assert len(read_in) and set(read_in["status"]) == {"compiled"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WillumpWarning)
        spread = willump.optimize(helper_after_a_spread)  # (after a ``**``: code may have run, one call)
    assert_exact(spread, tweets_of(200))
    assert shouting.__code__.co_firstlineno + 1 not in set(spread.explain_compilation()["line"])


def test_helpers_calling_helpers_with_defaults_and_keywords():
    f = optimized(helpers_calling_helpers)
    assert_exact(f, tweets_of(300))
    assert [ifv.name for ifv in f.graph.ifvs] == ["words", "chars"]
    statements = "\n".join(s.source for s in f.graph.statements)
    assert "column_of" not in statements and "words_of" not in statements
    assert set(f.explain_compilation()["status"]) == {"compiled"}


def test_a_helper_holding_the_model_call():
    f = optimized(the_model_in_a_helper)
    assert_exact(f, tweets_of(200))
    assert f.graph.model.method == "predict_proba" and len(f.graph.ifvs) == 2


def test_a_default_is_the_value_the_function_object_holds():
    # meta_features's default was evaluated when char_vec was still None; it is not re-read from the text.
    assert meta_features.__kwdefaults__ == {"vectorizer": None}

    def reads_its_default(df, *, vectorizer=char_vec):
        return vectorizer.transform(df["tweet"])

    def caller(df):
        chars = reads_its_default(df)
        X = sp.hstack([word_vec.transform(df["tweet"]), chars], format="csr")
        return model.predict_proba(X)[:, 1]

    f = optimized(caller)
    assert_exact(f, tweets_of(100))
    assert [ifv.name for ifv in f.graph.ifvs] == ["df", "chars"]
    assert "vectorizer_default.transform" in f.graph.ifvs[1].generator[0].source


def test_an_imported_helper_reads_its_own_modules_globals():
    f = optimized(imported)
    frame = tweets_of(300)
    assert_exact(f, frame)
    assert [ifv.name for ifv in f.graph.ifvs] == ["word_block", "char_block", "length_block"]
    # 'scale' and 'model' are read from helper_features, where they are other objects than here.
    assert "helper_features.scale" in "\n".join(s.source for s in f.graph.statements)
    g = optimized(imported_blocks)
    assert_exact(g, frame)
    assert len(g.graph.ifvs) == 3


def blocks_of_rows(rows):
    X = sp.hstack([helper_features.word_block(rows, lower=True), helper_features.char_block(rows),
                   helper_features.length_block(rows)], format="csr")
    return imported_model.predict_proba(X)[:, 1]


def test_a_helpers_calls_are_named_as_and_where_it_writes_them():
    """explain_compilation shows a helper's calls in its own names (``df``, not the caller's ``rows``), and the
    warning naming the calls that run as plain Python names the helper and its file."""
    f = optimized(blocks_of_rows)
    frame = tweets_of(50)
    where = f"in length_block ({helper_features.__file__}), line {helper_features.length_block.__code__.co_firstlineno + 1}"
    with pytest.warns(WillumpWarning, match=re.escape(where)):
        f(frame)
    assert_exact(f, frame)
    calls = list(f.explain_compilation()["call"])
    assert "df['tweet'].str.len()" in calls and not any("rows[" in call for call in calls), calls


def test_a_closure_helper_reads_its_own_cell():
    closure_predict = make_closure_predict(word_vec)
    f = optimized(closure_predict)
    assert_exact(f, tweets_of(200))
    assert [ifv.name for ifv in f.graph.ifvs][0] == "words"
    assert set(f.explain_compilation()["status"]) == {"compiled"}


def test_fit_cascades_on_ifvs_from_helpers():
    f = optimized(blocks_in_the_call)
    train, valid = TWEETS.sample(3000, random_state=2), TWEETS.sample(1500, random_state=3)
    f.fit(train[["tweet"]], y=train["label"].to_numpy(), validation=(valid[["tweet"]], valid["label"].to_numpy()),
          progress=False, check_speed=False, costs={"text_features": 1e-6, "meta_features": 1e-4},
          accuracy_loss=0.01)
    table = f.explain()
    assert list(table["ifv"]) == ["text_features", "meta_features"]
    assert list(table["selected"]) == [True, False]
    assert table.attrs["summary"]["cascades"] == "on"
    test = tweets_of(400, random_state=4)
    batch = f(test)
    assert batch.shape == (400,)
    np.testing.assert_array_equal([f(test.iloc[[i]])[0] for i in range(5)], batch[:5])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=40), min_size=1, max_size=6), st.integers(0, 2))
def test_any_text_any_spelling_is_exact(texts, spelling):
    f = _SPELLINGS[spelling]
    frame = pd.DataFrame({"tweet": texts}, index=np.arange(len(texts)) * 7)
    np.testing.assert_array_equal(f(frame), f.py_func(frame))


def by_position(df):
    return model.predict_proba(sp.hstack([words_of(df, "tweet", word_vec), chars_of(df, analyzer_vec=char_vec)]))


def by_keyword(df):
    X = sp.hstack([words_of(vectorizer=word_vec, df=df), chars_of(analyzer_vec=char_vec, df=df)])
    return model.predict(X)


_SPELLINGS = []


@pytest.fixture(scope="module", autouse=True)
def spellings(tweets):
    _SPELLINGS[:] = [optimized(predict), optimized(by_position), optimized(by_keyword)]


# --- tracebacks -------------------------------------------------------------------------------


def raises_in_a_helper(df):
    lengths = failing(df)
    X = sp.hstack([word_vec.transform(df["tweet"]), lengths], format="csr")
    return model.predict_proba(X)[:, 1]


def failing(df):
    lengths = df["tweet"].str.len().to_numpy(dtype=np.float64)
    return lengths.reshape(1, -1).sum(axis=3)  # raises AxisError


def raises_in_an_imported_helper(df):
    lengths = helper_features.broken_block(df)
    X = sp.hstack([word_vec.transform(df["tweet"]), lengths], format="csr")
    return model.predict_proba(X)[:, 1]


def raises_in_a_comprehension(df):
    ratios = helper_features.ratio_block(df)
    X = sp.hstack([word_vec.transform(df["tweet"]), ratios], format="csr")
    return model.predict_proba(X)[:, 1]


def user_frames(call, frame):
    """(file, line, function) of the traceback's frames in this test's files, innermost last."""
    try:
        call(frame)
    except (np.exceptions.AxisError, ZeroDivisionError, ValueError) as error:
        frames = traceback.extract_tb(error.__traceback__)
    else:
        raise AssertionError("no exception")
    return [(f.filename, f.lineno, f.name) for f in frames if f.filename in (__file__, helper_features.__file__)]


@pytest.mark.parametrize("function", [raises_in_a_helper, raises_in_an_imported_helper, raises_in_a_comprehension,
                                      imported_blocks])
def test_a_traceback_shows_the_helpers_file_and_line(function):
    f = optimized(function)
    assert len(f.graph.ifvs) == (3 if function is imported_blocks else 2)  # (read in)
    frame = tweets_of(20)
    frame = frame.assign(tweet=frame["tweet"].str.replace("@", ""))  # (no '@': ratio_block divides by zero)
    frame.iloc[3, frame.columns.get_loc("tweet")] = None  # (a compiled call's input it runs as written: it raises)
    written, ours = user_frames(f.py_func, frame), user_frames(f, frame)
    if function is raises_in_a_helper:
        # Read in from this file, the helper's lines run in the function's frame: the line is the helper's.
        assert ours[-1][:2] == written[-1][:2] == (__file__, failing.__code__.co_firstlineno + 2)
    else:
        # From another file, they run in a frame of their own, named and placed as the helper's; a compiled call
        # that runs as written (its input) runs in a frame of willump's at the helper's line, in its file.
        assert [f for f in ours if f[2] != AS_WRITTEN] == written
        assert ours[-1][:2] == written[-1][:2] and ours[-1][0] == helper_features.__file__


# --- helpers left as one call -------------------------------------------------------------


def log_and_featurize(df):
    CALLS.append(len(df))
    return char_vec.transform(df["tweet"])


def returns_early(df):
    if len(df) == 0:
        return None
    return char_vec.transform(df["tweet"])


def star_arguments(*frames):
    return char_vec.transform(frames[0]["tweet"])


as_lambda = lambda df: char_vec.transform(df["tweet"])  # noqa: E731


@numba.njit
def compiled_lengths(lengths):
    return lengths * 2.0


partial_block = functools.partial(meta_features, vectorizer=None)


def calling(helper):
    """A function computing its second block with ``helper``."""

    def caller(df):
        second = helper(df)
        X = sp.hstack([word_vec.transform(df["tweet"]), second], format="csr")
        return model.predict_proba(X)[:, 1]

    return caller


def numba_caller(df):
    lengths = compiled_lengths(df["tweet"].str.len().to_numpy(dtype=np.float64))
    X = sp.hstack([word_vec.transform(df["tweet"]), char_vec.transform(df["tweet"])], format="csr")
    return model.predict_proba(X)[:, 1] + 0 * lengths


@pytest.mark.parametrize(
    "function, name, reason",
    [
        (calling(log_and_featurize), "log_and_featurize", "CALLS.append(len(df)) is called for its side effects"),
        (calling(returns_early), "returns_early", "it returns early"),
        (calling(star_arguments), "star_arguments", "it takes *args or **kwargs"),
        (calling(as_lambda), "<lambda>", "it is a lambda"),
        (calling(partial_block), "", "it is a functools.partial"),
        (numba_caller, "compiled_lengths", "it is a CPUDispatcher"),
    ],
)
def test_a_helper_willump_cannot_read_stays_one_call_and_is_named(function, name, reason):
    written = "compiled_lengths" if function is numba_caller else "helper"
    named = f" ({name})" if name and name != written else ""
    with pytest.warns(WillumpWarning, match=re.escape(f"{written}(...){named} runs as one call: ") + ".*" + re.escape(reason)):
        f = willump.optimize(function)
    line = function.__code__.co_firstlineno + 1  # (the helper is called on the body's first line)
    assert any(note.startswith(f"line {line}: {written}(...){named} runs as one call") for note in f.graph.notes)
    frame = tweets_of(50)
    before = len(CALLS)
    assert_exact(f, frame)
    if name == "log_and_featurize":  # the side effect happens on every call, as written
        assert len(CALLS) - before == 2 * (1 + 3)


def logging_block(df):
    logged = log_and_featurize(df)
    return logged


def test_a_helper_left_as_one_call_inside_a_helper_is_named_with_its_line_there():
    with pytest.warns(WillumpWarning) as caught:
        f = willump.optimize(calling(logging_block))
    line = logging_block.__code__.co_firstlineno + 1
    expected = f"line {line} of logging_block ({__file__}): log_and_featurize(...) runs as one call"
    assert any(expected in str(w.message) for w in caught)
    assert_exact(f, tweets_of(30))


def test_library_functions_are_not_helpers():
    def uses_libraries(df):
        lengths = np.log1p(df["tweet"].str.len().to_numpy(dtype=np.float64)).reshape(-1, 1)
        X = sp.hstack([word_vec.transform(df["tweet"]), char_vec.transform(df["tweet"])], format="csr")
        return model.predict_proba(X)[:, 1] + 0 * lengths[:, 0] + 0 * len(df)

    f = optimized(uses_libraries)  # no warning
    assert_exact(f, tweets_of(50))


# --- a helper rebound after decoration ------------------------------------------------------------


def rebound_helper(df):
    return char_vec.transform(df["tweet"])


def calls_rebound_helper(df):
    second = rebound_helper(df)
    X = sp.hstack([word_vec.transform(df["tweet"]), second], format="csr")
    return model.predict_proba(X)[:, 1]


def test_a_helper_rebound_later_is_called_as_written():
    global rebound_helper
    f = optimized(calls_rebound_helper)
    frame = tweets_of(100)
    assert_exact(f, frame)
    original = rebound_helper
    try:
        rebound_helper = lambda df: char_vec.transform(df["tweet"].str[:5])  # noqa: E731
        with pytest.warns(WillumpWarning, match="rebound or changed after decoration"):
            result = f(frame)
        np.testing.assert_array_equal(result, f.py_func(frame))
        assert not np.array_equal(result, written_original(frame))  # (not the body read in at decoration)
    finally:
        rebound_helper = original
    assert_exact(f, frame)


def written_original(df):
    second = char_vec.transform(df["tweet"])
    X = sp.hstack([word_vec.transform(df["tweet"]), second], format="csr")
    return model.predict_proba(X)[:, 1]


def test_the_expanded_function_is_exact_on_its_own():
    """The function compiled from the expanded definition (what the graph is built from) answers as
    the user's function does."""
    for function in (predict, blocks_in_the_call, helpers_calling_helpers, imported):
        f = optimized(function)
        expanded = f._executor._func
        assert expanded is not function and expanded.__qualname__ == function.__qualname__
        frame = tweets_of(100)
        np.testing.assert_array_equal(expanded(frame), function(frame))
    assert sys.modules["helper_features"] is helper_features


# --- a helper changing a new object it made from its argument --------------------------------------

NUMBERS = pd.DataFrame({"a": np.linspace(-2, 3, 40), "b": np.r_[np.linspace(0.5, 4, 39), np.nan]})
frame_model = LogisticRegression().fit(
    NUMBERS.fillna(1).assign(ratio=lambda f: f["a"] / f["b"]), np.arange(40) % 3 == 0)


def with_ratio(frame):
    frame = frame.copy()
    frame["ratio"] = frame["a"] / frame["b"]
    return frame


def cleaned_with_ratio(frame):
    frame = frame.replace({"b": {0.5: 1.0}}).fillna(1)
    frame["ratio"] = frame["a"] / frame["b"]
    return frame


def aliased_with_ratio(frame):
    frame = frame  # (the caller's frame itself)
    frame["ratio"] = frame["a"] / frame["b"]
    return frame


def copied_for_batches(frame):
    frame = frame.copy() if len(frame) > 1 else frame  # (one row: the caller's frame itself)
    frame["ratio"] = frame["a"] / frame["b"]
    return frame


def scoring_with(helper):
    def score(df):
        X = helper(df)
        return frame_model.predict_proba(X.fillna(1))[:, 1]
    return score


@pytest.mark.parametrize("helper", [with_ratio, cleaned_with_ratio])
def test_a_helper_changing_a_copy_of_its_argument_is_read_in(helper):
    """``df = df.copy()`` (or a pandas method's new frame) then columns set: the caller's frame is
    never changed, so the helper is read in as its statements, without a warning."""
    score = scoring_with(helper)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WillumpWarning)
        f = willump.optimize(score)
    for rows in (NUMBERS, NUMBERS.iloc[[4]], NUMBERS.iloc[[39]]):
        given = rows.copy()
        np.testing.assert_array_equal(f(given), score(rows))
        pd.testing.assert_frame_equal(given, rows)  # (the caller's frame as it was)
    assert "ratio" not in NUMBERS


@pytest.mark.parametrize("helper", [aliased_with_ratio, copied_for_batches])
def test_a_helper_changing_its_argument_itself_stays_one_call(helper):
    score = scoring_with(helper)
    with pytest.warns(WillumpWarning, match=re.escape(f"line {helper.__code__.co_firstlineno + 2}: it changes frame, "
                                                      "which it did not create")):
        f = willump.optimize(score)
    for rows in (NUMBERS, NUMBERS.iloc[[4]]):
        expected, given = rows.copy(), rows.copy()
        np.testing.assert_array_equal(f(given), score(expected))
        pd.testing.assert_frame_equal(given, expected)  # (changed alike, as written)
