"""Graph construction: the model sink, commutative nodes, IFVs and preprocessing."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from lightgbm import LGBMClassifier
from scipy.sparse import hstack as join_blocks
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler


import willump

TEXTS = ["Good morning", "BAD words!!", "nice 🙂 day", "", "Ünïcode façade 123", "spam spam SPAM"] * 4
LABELS = np.array([0, 1, 0, 1, 0, 1] * 4)
FRAME = pd.DataFrame({"tweet": TEXTS, "n": np.arange(len(TEXTS), dtype=float)})
word_vectorizer = TfidfVectorizer().fit(TEXTS)
char_vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3)).fit(TEXTS)
count_vectorizer = CountVectorizer(analyzer="char", ngram_range=(1, 2)).fit(TEXTS)


def _fit(function, estimator, y=LABELS):
    """Fit ``estimator`` on what ``function`` feeds its model, as a data scientist would."""

    class Capture:
        def predict(self, X):
            self.X = X
            return np.zeros((X.shape[0], 2))

        predict_proba = decision_function = predict

    capture = globals()["model"] = Capture()
    function(FRAME)
    globals()["model"] = estimator.fit(capture.X, y)
    return estimator


def optimized(function, estimator=None):
    _fit(function, estimator or LogisticRegression())
    result = willump.optimize(function)
    expected = function(FRAME)
    np.testing.assert_array_equal(result(FRAME), expected)
    return result


def ifv_names(function):
    return [ifv.name for ifv in function.graph.ifvs]


def preprocessing_lines(function):
    return [s.source for s in function.graph.preprocessing]


# --- the pipeline shapes of the paper's six workloads ---------------------------------


def toxic(df):
    text = df["tweet"].str.lower()
    words = word_vectorizer.transform(text)
    chars = char_vectorizer.transform(text)
    X = sp.hstack([words, chars], format="csr")
    return model.predict(X)


def test_toxic_shape():
    f = optimized(toxic)
    assert ifv_names(f) == ["words", "chars"]
    assert preprocessing_lines(f) == ["text = df['tweet'].str.lower()"]
    assert f.graph.combiner.kind == "scipy.sparse.hstack"
    assert f.graph.model.method == "predict"
    assert all(ifv.inputs == ("df",) and ifv.columns == ("tweet",) for ifv in f.graph.ifvs)


def product(df):
    text = df["tweet"]
    char_counts = count_vectorizer.transform(text)
    word_tfidf = word_vectorizer.transform(text)
    char_tfidf = char_vectorizer.transform(text)
    lengths = text.str.len().to_numpy()
    digits = text.str.count(r"\d").to_numpy()
    upper = text.str.count(r"[A-Z]").to_numpy() / np.maximum(lengths, 1)
    numeric = np.column_stack([lengths, digits, upper])
    return model.predict_proba(sp.hstack([char_counts, word_tfidf, char_tfidf, sp.csr_matrix(numeric)]).tocsr())[:, 1]


def test_product_shape():
    f = optimized(product)
    assert ifv_names(f) == ["char_counts", "word_tfidf", "char_tfidf", "numeric"]
    # lengths feeds one IFV only: it belongs to that generator, not to preprocessing.
    numeric = f.graph.ifvs[3]
    assert [s.source.split(" =")[0] for s in numeric.generator] == ["lengths", "digits", "upper", "numeric"]
    assert preprocessing_lines(f) == ["text = df['tweet']"]
    assert f.graph.model.method == "predict_proba"


members = pd.DataFrame({"msno": ["u1", "u2", "u3"], "bd": [20, 31, 45], "city": [1, 4, 4]})
songs = pd.DataFrame({"song_id": [1, 2, 3, 4], "song_length": [200.0, 180.5, 240.0, 99.0], "artist_name": ["a", "b", "a", "c"]})
artists = pd.DataFrame({"artist_name": ["a", "b"], "artist_plays": [10, 3]})
user_stats = pd.DataFrame({"msno": ["u1", "u3"], "user_mean": [0.5, 0.25]})
MUSIC_FEATURES = ["source_type", "bd", "city", "song_length", "artist_plays", "user_mean"]
MUSIC = pd.DataFrame(
    {"msno": ["u1", "u2", "zz", "u3"] * 3, "song_id": [1, 4, 2, 7] * 3, "source_type": [0, 1, 2, 1] * 3}
)


def music(df):
    df = df.merge(members, on="msno", how="left")
    df = df.merge(songs, on="song_id", how="left")
    df = df.merge(artists, on="artist_name", how="left")
    df = df.merge(user_stats, on="msno", how="left")
    X = df[MUSIC_FEATURES]
    return model.predict_proba(X)[:, 1]


def test_music_shape():
    global model
    model = LGBMClassifier(n_estimators=5, min_child_samples=1, verbose=-1).fit(
        music_features(), np.array([0, 1] * 6)
    )
    f = willump.optimize(music)
    np.testing.assert_array_equal(f(MUSIC), music(MUSIC))
    # The artist table is keyed by a column the songs table brings: one generator.
    assert ifv_names(f) == ["df", "members", "songs + artists", "user_stats"]
    assert f.graph.combiner.kind == "left joins"
    assert f.graph.ifvs[2].statements == [
        "df = df.merge(songs, on='song_id', how='left')",
        "df = df.merge(artists, on='artist_name', how='left')",
    ]


def music_features():
    return MUSIC.merge(members, on="msno", how="left").merge(songs, on="song_id", how="left").merge(
        artists, on="artist_name", how="left"
    ).merge(user_stats, on="msno", how="left")[MUSIC_FEATURES]


bureau = pd.DataFrame({"SK_ID_CURR": [1, 2, 3], "bureau_debt": [0.0, 10.0, 3.5]})
previous = pd.DataFrame({"SK_ID_CURR": [1, 3], "prev_count": [2, 5]})
CREDIT = pd.DataFrame({"SK_ID_CURR": [3, 1, 9, 2], "AMT_INCOME": [1.0, 2.0, 3.0, 4.0]})


def credit(app):
    df = app.merge(bureau, on="SK_ID_CURR", how="left")
    df = pd.merge(df, previous, on="SK_ID_CURR", how="left")
    return model.predict(df[["AMT_INCOME", "bureau_debt", "prev_count"]].to_numpy(dtype=float))


def test_credit_shape():
    global model

    class Total:
        def predict(self, X):
            return np.nansum(X, axis=1)

    model = Total()
    f = willump.optimize(credit)
    np.testing.assert_array_equal(f(CREDIT), credit(CREDIT))
    assert ifv_names(f) == ["app", "bureau", "previous"]


listings = pd.DataFrame(
    {
        "name": TEXTS,
        "brand": ["acme", "zeta", "acme", "none", "zeta", "acme"] * 4,
        "condition": [1, 2, 3, 1, 2, 3] * 4,
    }
)
name_vectorizer = TfidfVectorizer().fit(listings["name"])
brand_encoder = OneHotEncoder(handle_unknown="ignore").fit(listings[["brand"]])
condition_encoder = OneHotEncoder(handle_unknown="ignore").fit(listings[["condition"]])


def price(df):
    name = name_vectorizer.transform(df["name"])
    brand = brand_encoder.transform(df[["brand"]])
    condition = condition_encoder.transform(df[["condition"]])
    return model.predict(sp.hstack([name, brand, condition], format="csr"))


def test_price_shape():
    global model
    model = Ridge().fit(
        sp.hstack([name_vectorizer.transform(listings["name"]), brand_encoder.transform(listings[["brand"]]),
                   condition_encoder.transform(listings[["condition"]])]).tocsr(),
        np.arange(len(listings), dtype=float),
    )
    f = willump.optimize(price)
    np.testing.assert_array_equal(f(listings), price(listings))
    assert ifv_names(f) == ["name", "brand", "condition"]
    assert [ifv.columns for ifv in f.graph.ifvs] == [("name",), ("brand",), ("condition",)]


ip_counts = pd.DataFrame({"ip": [1, 2, 3], "ip_count": [10, 20, 30]})
app_counts = pd.DataFrame({"app": [7, 8], "app_count": [5, 6]})
ip_app_counts = pd.DataFrame({"ip": [1, 2], "app": [7, 7], "ip_app_count": [3, 4]})
CLICKS = pd.DataFrame({"ip": [1, 2, 3, 4, 1], "app": [7, 7, 8, 9, 8], "os": [1, 1, 2, 2, 3]})


def tracking(clicks):
    df = clicks.merge(ip_counts, on="ip", how="left")
    df = df.merge(app_counts, on="app", how="left")
    df = df.merge(ip_app_counts, on=["ip", "app"], how="left")
    return model.predict(df[["os", "ip_count", "app_count", "ip_app_count"]].fillna(0))


def test_tracking_shape():
    global model
    model = SumModel()
    f = willump.optimize(tracking)
    np.testing.assert_array_equal(f(CLICKS), tracking(CLICKS))
    assert ifv_names(f) == ["clicks", "ip_counts", "app_counts", "ip_app_counts"]


class SumModel:
    def predict(self, X):
        return np.asarray(X, dtype=float).sum(axis=1)


# --- recognizing the model and the concatenation -------------------------------------


def test_concatenation_under_any_alias_and_list_on_an_earlier_line():
    def aliased(df):
        a = word_vectorizer.transform(df["tweet"])
        b = sp.csr_matrix(df[["n"]].to_numpy())
        blocks = [a, b]
        X = join_blocks(blocks)
        return model.predict(X.tocsr())

    f = optimized(aliased)
    assert ifv_names(f) == ["a", "b"]
    assert f.graph.combiner.kind == "scipy.sparse.hstack"


@pytest.mark.parametrize(
    "combine",
    [
        "numpy.concatenate([a, b], axis=1)",
        "numpy.concatenate((a, b), 1)",
        "np.column_stack([a, b])",
        "np.hstack((a, b))",
        "pandas.concat([pd.DataFrame(a), pd.DataFrame(b)], axis=1).to_numpy()",
        "pd.concat([pd.DataFrame(a), pd.DataFrame(b)], axis='columns').to_numpy()",
    ],
)
def test_dense_concatenations(combine):
    namespace = dict(globals())
    exec_source = (
        "def dense(df):\n"
        "    a = df[['n']].to_numpy()\n"
        "    b = np.log1p(df[['n']].to_numpy())\n"
        f"    X = {combine}\n"
        "    return model.predict(X)\n"
    )
    function = _function_from_source(exec_source, namespace, "dense")
    namespace["model"] = SumModel()
    f = willump.optimize(function)
    np.testing.assert_array_equal(f(FRAME), function(FRAME))
    assert [i.name for i in f.graph.ifvs] == ["a", "b"]
    assert f.graph.combiner.kind != "identity"


def test_concatenation_along_rows_is_not_commutative():
    def rows(df):
        a = df[["n"]].to_numpy()
        b = df[["n"]].to_numpy() * 2
        X = np.concatenate([a, b], axis=0)
        return SumModel().predict(X)

    f = willump.optimize(rows)
    assert f.graph.combiner.kind == "identity"
    assert len(f.graph.ifvs) == 1
    np.testing.assert_array_equal(f(FRAME), rows(FRAME))


def test_local_import_alias():
    def local(df):
        import scipy.sparse as sparse

        a = word_vectorizer.transform(df["tweet"])
        b = char_vectorizer.transform(df["tweet"])
        return model.predict(sparse.hstack([a, b]).tocsr())

    f = optimized(local)
    assert ifv_names(f) == ["a", "b"]


def test_prediction_assigned_then_returned_and_decision_function():
    def assigned(df):
        a = word_vectorizer.transform(df["tweet"])
        b = char_vectorizer.transform(df["tweet"])
        scores = model.decision_function(sp.hstack([a, b]).tocsr())
        return scores

    f = optimized(assigned)
    assert f.graph.model.method == "decision_function"
    assert ifv_names(f) == ["a", "b"]


def test_scikit_learn_pipeline_as_model():
    def piped(df):
        a = df[["n"]].to_numpy()
        b = np.sqrt(df[["n"]].to_numpy())
        return model.predict_proba(np.hstack([a, b]))[:, 1]

    f = optimized(piped, make_pipeline(StandardScaler(), LogisticRegression()))
    assert f.graph.model.method == "predict_proba"
    assert ifv_names(f) == ["a", "b"]


def test_tuple_unpacking_keywords_and_chained_methods():
    def rich(df):
        text, numbers = df["tweet"].str.strip().str.lower(), df["n"]
        words = word_vectorizer.transform(raw_documents=text)
        scaled = numbers.to_numpy(dtype=float).reshape(-1, 1)
        return model.predict(sp.hstack(blocks=[words, sp.csr_matrix(scaled)], format="csr"))

    f = optimized(rich)
    assert ifv_names(f) == ["words", "scaled"]
    assert len(f.graph.preprocessing) == 1
    assert [ifv.inputs for ifv in f.graph.ifvs] == [("df",), ("df",)]
    assert f.graph.ifvs[0].columns == ("tweet", "n")  # read through the shared preprocessing line


def test_printed_graph_names_every_part():
    f = optimized(toxic)
    text = str(f.graph)
    for expected in [
        "preprocessing",
        "text = df['tweet'].str.lower()",
        "IFV 0 'words'",
        "IFV 1 'chars'",
        "scipy.sparse.hstack",
        "model (predict on model)",
    ]:
        assert expected in text


def _function_from_source(source, namespace, name):
    """Define a function from source text that inspect can read back (a real file)."""
    import importlib.util
    import sys
    import tempfile
    from pathlib import Path

    directory = Path(tempfile.mkdtemp())
    path = directory / f"willump_generated_{name}_{abs(hash(source))}.py"
    header = "import numpy, pandas\nimport numpy as np\nimport pandas as pd\n"
    path.write_text(header + source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    module.SumModel = SumModel
    module.model = SumModel()
    return getattr(module, name)


def test_prediction_assigned_then_wrapped_in_the_return():
    def wrapped(df):
        a = word_vectorizer.transform(df["tweet"])
        b = char_vectorizer.transform(df["tweet"])
        out = model.predict_proba(sp.hstack([a, b]).tocsr())[:, 1]
        return pd.Series(out, index=df.index, name="score")

    f = optimized(wrapped)
    assert f.graph.model.method == "predict_proba" and ifv_names(f) == ["a", "b"]
    pd.testing.assert_series_equal(f(FRAME), wrapped(FRAME))


SIDE = pd.DataFrame({"key": np.arange(50), "c": np.linspace(-1, 1, 50)})
RATIO_MODEL = Ridge().fit(np.random.default_rng(0).normal(size=(60, 4)), np.arange(60.0))


def joined_then_assigned(df):
    df = df.merge(SIDE, on="key", how="left")
    X = df[["a", "b", "c"]].assign(ratio=df["a"] / df["b"])
    return RATIO_MODEL.predict(X)


def test_a_joined_frame_read_beside_its_selection_keeps_the_joins_whole():
    """``df[cols].assign(r=df["a"] / df["b"])`` reads the joined frame twice: splitting the joins
    into IFVs would leave the second read seeing the frame before the joins (whose index differs
    from the joined one's for most inputs), so the chain is not split."""
    optimized = willump.optimize(joined_then_assigned)
    assert len(optimized.graph.ifvs) == 1
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"key": rng.integers(0, 50, 40), "a": rng.normal(size=40), "b": rng.uniform(1, 2, 40)},
                         index=np.arange(100, 140))
    rows = np.arange(0, 40, 3)
    env, values = optimized.executor.features((frame,), rows=rows)
    combined = optimized.executor.combine(env, [values[i] for i in range(len(values))])
    np.testing.assert_array_equal(combined, joined_then_assigned(frame.iloc[rows]))


def _built_column_by_column(df):
    out = pd.DataFrame(index=df.index)
    out["n2"] = df["n"] * 2
    out["len"] = df["tweet"].str.len()
    return out


def frames_built_column_by_column(df):
    numbers = _built_column_by_column(df)  # (a helper, read into the function)
    words = df[["n"]].copy()
    words["n3"] = words["n"] ** 3
    words["n4"] = words["n3"] + 1
    return model.predict_proba(pd.concat([numbers, words], axis=1))[:, 1]


def frames_of_the_caller_set(df):
    df["n2"] = df["n"] * 2  # the caller's frame: for every row, in order
    same = df
    same["n3"] = df["n"] ** 3  # (another name for it)
    selected = df[["n"]]
    selected["n4"] = selected["n"] + 1  # (not one of the constructors willump knows makes a new frame)
    made = pd.DataFrame({"a": df["n"]})
    kept = made  # (another name for a frame the function made, read by another IFV)
    made["a"] = -df["n"]
    more = (made["a"] * 2).to_frame("b")
    out = pd.DataFrame(index=df.index)
    out.index.name = "row"  # (the caller's Index object, shared by the frame made)
    out["c"] = df["n"] + 1
    return model.predict_proba(pd.concat([df[["n2"]], same[["n3"]], selected, kept, more, out], axis=1))[:, 1]


def test_frames_the_function_makes_and_sets_belong_to_their_ifv():
    """Setting columns of a frame the function made (``pd.DataFrame(...)``, ``.copy()``) goes with the IFV
    that reads it, as ``pd.DataFrame({...})`` would; setting the caller's frame, or one another name may
    hold, stays preprocessing, run for every row."""
    f = optimized(frames_built_column_by_column)
    assert ifv_names(f) == ["numbers", "words"] and preprocessing_lines(f) == []
    assert [len(ifv.generator) for ifv in f.graph.ifvs] == [3, 3]
    _fit(frames_of_the_caller_set, LogisticRegression())
    g = willump.optimize(frames_of_the_caller_set)
    expected = frames_of_the_caller_set(FRAME.copy())
    np.testing.assert_array_equal(g(FRAME.copy()), expected)
    assert [line.split(" = ")[0] for line in preprocessing_lines(g)] == [
        "df['n2']", "same", "same['n3']", "selected", "selected['n4']", "made", "kept", "made['a']",
        "out", "out.index.name", "out['c']"]
