"""A function willump builds no graph of (its model called in a loop, per row, in chunks, or no model
call at all) still runs its compilable calls through kernels: the function's statements
as written, the same answers, exceptions and side effects, and ``explain_compilation`` lists them."""

import pickle
import warnings

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

import willump
from answers import assert_same_outcome, outcome

RNG = np.random.default_rng(5)
FRAME = pd.DataFrame(RNG.normal(size=(300, 4)), columns=["a", "b", "c", "d"])
LABELS = (FRAME["a"] + FRAME["b"] > 0).to_numpy()
BOOSTED = lgb.LGBMClassifier(n_estimators=20, verbose=-1).fit(FRAME, LABELS)
TEXTS = ["cheap pills now", "lunch at noon?", "win a free prize", "see you at the game", "free entry, win"] * 20
VECTORIZER = TfidfVectorizer().fit(TEXTS)
seen = []


def in_chunks(df):
    parts = []
    for chunk in np.array_split(df, 3):
        parts.append(BOOSTED.predict_proba(chunk)[:, 1])
    return np.concatenate(parts)


def row_by_row(df):
    scores = []
    for i in range(len(df)):
        scores.append(BOOSTED.predict_proba(df.iloc[[i]])[0, 1])
    return np.array(scores)


def vectorized(df):  # (no model: the features themselves)
    return VECTORIZER.transform(df["text"]).toarray()


def falls_off_the_end(df):
    seen.append(BOOSTED.predict(df))


FUNCTIONS = [in_chunks, row_by_row, vectorized, falls_off_the_end]


def inputs_of(function) -> list:
    if function is vectorized:
        texts = pd.DataFrame({"text": TEXTS[:7] + ["unseen words only"]})
        return [texts, texts.iloc[[2]], texts.iloc[:0], pd.DataFrame({"text": [None]})]
    return [FRAME, FRAME.iloc[[4]], FRAME.iloc[::-7], FRAME.iloc[:0], FRAME.drop(columns="a")]


def same(got, expected):
    if expected is None:
        assert got is None
    else:
        assert_same_outcome(got, expected)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_the_function_answers_as_written_with_its_calls_compiled(function):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimized = willump.optimize(function)
    messages = [str(w.message) for w in caught if issubclass(w.category, willump.WillumpWarning)]
    assert len(messages) == 1 and "go through compiled kernels" in messages[0], messages
    assert not optimized.graph.optimizable
    for rows in inputs_of(function):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (LightGBM's own warnings, both ways)
            seen.clear()
            expected = outcome(function, rows)
            expected_seen = list(seen)
            seen.clear()
            got = outcome(optimized, rows)
        same(got, expected)
        assert len(seen) == len(expected_seen) and all(map(np.array_equal, seen, expected_seen))
    table = kernel_sites(optimized)
    assert len(table) and table["compiled_calls"].gt(0).all(), table.to_string()


def test_a_model_called_per_row_is_answered_by_its_kernel():
    optimized = willump.optimize(row_by_row)
    optimized(FRAME.iloc[:20])
    table = kernel_sites(optimized)
    assert table["status"].tolist() == ["compiled"] and table["compiled_calls"].tolist() == [20], table
    plain = optimized.explain_compilation().set_index("operator").loc["numpy.array"]  # (said, not compiled)
    assert (plain["calls"], plain["compiled_calls"]) == (1, 0)


def kernel_sites(optimized):
    """explain_compilation()'s rows of the calls a kernel stands for (not the library calls none does)."""
    table = optimized.explain_compilation()
    return table[~table["status"].str.contains("no kernel stands for|is not an operator willump compiles")]


def rebinds_a_global(df):
    global seen
    seen = [BOOSTED.predict(df)]


def yields(df):
    for chunk in np.array_split(df, 2):
        yield BOOSTED.predict(chunk)


def reads_its_locals(df):
    parts = [BOOSTED.predict(chunk) for chunk in np.array_split(df, 2)]
    return sorted(locals())


@pytest.mark.parametrize("function", [rebinds_a_global, yields, reads_its_locals])
def test_bodies_that_are_no_block_run_as_the_function_itself(function):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimized = willump.optimize(function)
    assert optimized.explain_compilation().empty
    result = optimized(FRAME)
    if function is yields:
        assert all(map(np.array_equal, result, yields(FRAME)))
    if function is reads_its_locals:
        assert result == ["df", "parts"]


def test_it_travels_in_a_pickle():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimized = willump.optimize(in_chunks)
        loaded = pickle.loads(pickle.dumps(optimized))
    assert_same_outcome(loaded(FRAME), in_chunks(FRAME))
    assert kernel_sites(loaded)["compiled_calls"].tolist() == [3]
