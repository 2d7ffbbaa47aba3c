"""Execution: the optimized function returns exactly what the original returns."""

import traceback

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump

TEXTS = ["Good morning", "BAD words!!", "nice 🙂 day", "", "Ünïcode façade 123", "spam spam SPAM"] * 3
FRAME = pd.DataFrame({"text": TEXTS, "x": np.arange(len(TEXTS), dtype=float)}, index=np.arange(len(TEXTS)) * 7 + 3)
vectorizer = TfidfVectorizer().fit(TEXTS)


class Identity:
    """A 'model' returning its input, so tests compare the feature matrix itself."""

    def predict(self, X):
        return X


class SumModel:
    def predict(self, X):
        return np.asarray(X, dtype=float).sum(axis=1)


model = SumModel()
identity = Identity()


def classify(df):
    words = vectorizer.transform(df["text"])
    length = sp.csr_matrix(df["text"].str.len().to_numpy(dtype=float).reshape(-1, 1))
    return classifier.predict_proba(sp.hstack([words, length], format="csr"))


classifier = LogisticRegression().fit(
    sp.hstack([vectorizer.transform(FRAME["text"]), FRAME["text"].str.len().to_numpy(dtype=float).reshape(-1, 1)]),
    np.arange(len(TEXTS)) % 2,
)


def test_batches_and_single_rows():
    f = willump.optimize(classify)
    for batch in [FRAME, FRAME.iloc[[4]], FRAME.iloc[[3]], FRAME.iloc[::-1]]:
        expected = classify(batch)
        result = f(batch)
        assert result.dtype == expected.dtype and result.shape == expected.shape
        np.testing.assert_array_equal(result, expected)


def scores_with_index(df):
    a = df[["x"]].to_numpy()
    b = df[["x"]].to_numpy() ** 2
    return pd.Series(model.predict(np.hstack([a, b])), index=df.index, name="score")


def test_series_output_keeps_index_name_and_dtype():
    f = willump.optimize(scores_with_index)
    pd.testing.assert_series_equal(f(FRAME), scores_with_index(FRAME))
    pd.testing.assert_series_equal(f(FRAME.iloc[[2]]), scores_with_index(FRAME.iloc[[2]]))


def frame_features(df):
    left = df[["x"]].rename(columns={"x": "a"})
    right = (df[["x"]] * 2).astype("float32")
    return identity.predict(pd.concat([left, right], axis=1))


def test_dataframe_output_identical():
    f = willump.optimize(frame_features)
    assert len(f.graph.ifvs) == 2
    pd.testing.assert_frame_equal(f(FRAME), frame_features(FRAME))


def from_strings(texts):
    words = vectorizer.transform(texts)
    counts = sp.csr_matrix(np.array([[len(t)] for t in texts], dtype=float).reshape(-1, 1))
    return identity.predict(sp.hstack([words, counts], format="csr"))


def test_a_list_of_one_string():
    f = willump.optimize(from_strings)
    for texts in [["just one 🙂"], [""], TEXTS]:
        expected, result = from_strings(texts), f(texts)
        assert (result != expected).nnz == 0 and result.dtype == expected.dtype and result.format == "csr"


def test_bad_input_raises_the_same_exception_at_the_users_line():
    f = willump.optimize(classify)
    bad = pd.DataFrame({"other": ["a"]})
    with pytest.raises(KeyError) as original:
        classify(bad)
    with pytest.raises(KeyError) as ours:
        f(bad)
    assert str(ours.value) == str(original.value)
    user_frames = [fr for fr in traceback.extract_tb(ours.value.__traceback__) if fr.filename == __file__]
    original_frames = [fr for fr in traceback.extract_tb(original.value.__traceback__) if fr.filename == __file__]
    assert user_frames[-1].lineno == original_frames[-1].lineno
    assert user_frames[-1].name == "classify"
    assert "vectorizer.transform" in user_frames[-1].line


def test_rebinding_globals_after_decoration_takes_effect():
    global model
    f = willump.optimize(scores_with_index)
    before = f(FRAME)
    saved = model

    class Doubled(SumModel):
        def predict(self, X):
            return 2 * super().predict(X)

    model = Doubled()
    try:
        pd.testing.assert_series_equal(f(FRAME), before * 2)
    finally:
        model = saved


def test_rebinding_closure_variables_takes_effect():
    scale = 1.0

    def scaled(df):
        a = df[["x"]].to_numpy() * scale
        return model.predict(np.hstack([a, a]))

    f = willump.optimize(scaled)
    first = f(FRAME)
    scale = 3.0
    np.testing.assert_array_equal(f(FRAME), first * 3)
    np.testing.assert_array_equal(f(FRAME), scaled(FRAME))


def test_any_subset_of_ifvs_for_any_subset_of_rows():
    f = willump.optimize(classify)
    executor = f.executor
    rows = [5, 0, 5, 2]
    env, values = executor.features((FRAME,), ifvs=[1], rows=rows)
    assert list(values) == [1]
    expected_length = FRAME["text"].iloc[rows].str.len().to_numpy(dtype=float).reshape(-1, 1)
    np.testing.assert_array_equal(values[1].toarray(), expected_length)
    env, values = executor.features((FRAME,), rows=rows)
    combined = executor.combine(env, [values[0], values[1]])
    np.testing.assert_array_equal(combined, classify(FRAME.iloc[rows]))


def rebinds_a_shared_name(df):
    t = df["x"].to_numpy()
    a = (t * 2).reshape(-1, 1)
    s = t + 1
    t = df["x"].to_numpy() ** 3
    b = (t + s).reshape(-1, 1)
    c = (t - s).reshape(-1, 1)
    return model.predict(np.hstack([a, b, c]))


def test_a_name_rebound_between_features_keeps_each_value():
    f = willump.optimize(rebinds_a_shared_name)
    np.testing.assert_array_equal(f(FRAME), rebinds_a_shared_name(FRAME))
    assert len(f.graph.ifvs) == 3


def rebinds_the_input(df):
    a = df[["x"]].to_numpy()
    df = df * 0 if False else df.assign(x=df["x"] + 100)
    b = df[["x"]].to_numpy()
    return model.predict(np.hstack([a, b]))


def test_rebinding_the_input_parameter():
    f = willump.optimize(rebinds_the_input)
    np.testing.assert_array_equal(f(FRAME), rebinds_the_input(FRAME))


def mutates_a_copy(df):
    df = df.copy()
    df["z"] = df["x"] * 2
    a = df[["z"]].to_numpy()
    b = df[["x"]].to_numpy()
    return model.predict(np.hstack([a, b]))


def test_column_assignment_keeps_order_and_input_untouched():
    frame = FRAME.copy()
    f = willump.optimize(mutates_a_copy)
    np.testing.assert_array_equal(f(frame), mutates_a_copy(frame))
    pd.testing.assert_frame_equal(frame, FRAME)


def reads_before_assigning(df):
    a = df[["x"]].to_numpy() + late
    late = 1
    return model.predict(np.hstack([a, a * late]))


def deletes(df):
    a = df[["x"]].to_numpy()
    b = a * 2
    del a
    return model.predict(np.hstack([b, a]))


def test_unbound_locals_raise_as_in_the_original():
    for function in [reads_before_assigning, deletes]:
        with pytest.raises(UnboundLocalError) as original:
            function(FRAME)
        with pytest.raises(UnboundLocalError) as ours:
            willump.optimize(function)(FRAME)
        assert str(ours.value) == str(original.value)


# --- chains of left joins ---------------------------------------------------------------

keys = st.one_of(st.integers(0, 5), st.just(np.nan))


@st.composite
def join_case(draw):
    n = draw(st.integers(0, 8))
    frame = pd.DataFrame(
        {
            "k1": draw(st.lists(keys, min_size=n, max_size=n)),
            "k2": draw(st.lists(st.sampled_from(["a", "b", "é", "🙂", ""]), min_size=n, max_size=n)),
            "v": draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)),
        },
        index=draw(st.lists(st.integers(0, 100), min_size=n, max_size=n, unique=True)),
    )
    k1 = draw(st.lists(keys, max_size=6, unique_by=lambda x: -1 if x != x else x))
    first = pd.DataFrame(
        {
            "k1": k1,
            "f_int": draw(st.lists(st.integers(-5, 5), min_size=len(k1), max_size=len(k1))),
            "f_bool": draw(st.lists(st.booleans(), min_size=len(k1), max_size=len(k1))),
            "f_float": draw(
                st.lists(st.floats(allow_nan=True, allow_infinity=False, width=32), min_size=len(k1), max_size=len(k1))
            ),
        }
    )
    if draw(st.booleans()):
        first["f_cat"] = pd.Categorical(draw(st.lists(st.sampled_from(["x", "y"]), min_size=len(k1), max_size=len(k1))))
    k2 = draw(st.lists(st.sampled_from(["a", "b", "é", "🙂", "", "zz"]), max_size=6, unique=not draw(st.booleans())))
    second = pd.DataFrame(
        {"k2": k2, "s_text": draw(st.lists(st.text(max_size=3), min_size=len(k2), max_size=len(k2)))}
    )
    if draw(st.booleans()):  # a column the chain would have to rename
        second["v"] = 1
    columns = draw(st.permutations(["v", "f_int", "f_bool", "f_float", "s_text"] + (["f_cat"] if "f_cat" in first else [])))
    return frame, first, second, list(columns[: draw(st.integers(1, len(columns)))])


def join_chain(df, first, second, columns):
    df = df.merge(first, on="k1", how="left")
    df = df.merge(second, on="k2", how="left")
    return identity.predict(df[columns])


optimized_join_chain = willump.optimize(join_chain)


@pytest.mark.filterwarnings("ignore::willump.WillumpWarning")  # inputs the chain cannot split
@settings(max_examples=300, deadline=None)
@given(join_case())
def test_join_chains_split_exactly(case):
    executor = optimized_join_chain.executor
    try:
        expected = join_chain(*case)
    except Exception as error:  # the optimized function must raise the same, on both paths
        with pytest.raises(type(error)):
            optimized_join_chain(*case)
        with pytest.raises(type(error)):
            executor.run_blocks(executor.arguments(case, {}))
        return
    pd.testing.assert_frame_equal(optimized_join_chain(*case), expected, check_exact=True)
    pd.testing.assert_frame_equal(executor.run_blocks(executor.arguments(case, {})), expected, check_exact=True)


def test_join_chain_graph():
    assert [i.name for i in optimized_join_chain.graph.ifvs] == ["df", "first", "second"]


def test_join_keys_named_by_variables_group_dependent_joins():
    songs = pd.DataFrame({"song_id": [1, 2], "artist": ["a", "b"], "length": [3.0, 4.0]})
    artists = pd.DataFrame({"artist": ["a", "b"], "plays": [10.0, 20.0]})
    features, artist_key = ["length", "plays"], "artist"

    def by_variable(df):
        df = df.merge(songs, on="song_id", how="left")
        df = df.merge(artists, on=artist_key, how="left")
        return model.predict(df[features])

    f = willump.optimize(by_variable)
    assert [i.name for i in f.graph.ifvs] == ["df", "songs + artists"]
    frame = pd.DataFrame({"song_id": [1, 2, 3]})
    env, values = f.executor.features((frame,))  # separable: no fallback needed
    np.testing.assert_array_equal(f.executor.combine(env, [values[0], values[1]]), by_variable(frame))


def test_a_call_that_cannot_be_split_warns_once_and_runs_as_written():
    table = pd.DataFrame({"k1": [1, 1], "f_int": [5, 6], "f_bool": [True, False], "f_float": [0.5, 1.5]})
    second = pd.DataFrame({"k2": ["a"], "s_text": ["t"]})
    frame = pd.DataFrame({"k1": [1, 2], "k2": ["a", "b"], "v": [0, 1]})
    case = (frame, table, second, ["v", "f_int"])
    executor = willump.optimize(join_chain).executor
    with pytest.warns(willump.WillumpWarning, match="several rows"):
        result = executor.run_blocks(executor.arguments(case, {}))
    pd.testing.assert_frame_equal(result, join_chain(*case))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        executor.run_blocks(executor.arguments(case, {}))  # once only
        willump.optimize(join_chain)(*case)  # a plain call runs the joins as written: no warning
