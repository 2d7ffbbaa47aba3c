"""Python statements amid compiled calls do not split the compiled block (paper §5.2).

Results kept in a kernel's form stay kept across other code; before that code runs,
they are computed in source order and stop sharing what it may change in place, so
the answer, and the exception raised first, are those of the function as written.
"""

import lightgbm
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

CORPUS = ["good movie", "bad movie", "a good plot", "bad acting, bad plot", "émoji 🙂 fine"]
words = TfidfVectorizer().fit(CORPUS)
chars = CountVectorizer(analyzer="char_wb", ngram_range=(2, 3)).fit(CORPUS)
model = LogisticRegression().fit(sp.hstack([words.transform(CORPUS), chars.transform(CORPUS)]), [1, 0, 1, 0, 1])
FEATURES = ["v", "f"]
_train = np.random.default_rng(0).normal(size=(200, 2))
regressor = lightgbm.LGBMRegressor(n_estimators=10, num_leaves=5, verbose=-1).fit(
    pd.DataFrame(_train, columns=FEATURES), _train.sum(axis=1)
)
log = []


def text_pipeline(docs):
    w = words.transform(docs)
    log.append(len(docs))  # Python code between the vectorizers and the model
    c = chars.transform(docs)
    docs[0] = "changed in place"  # after both calls read it: they must not see this
    X = sp.hstack([w, c], format="csr")
    return model.predict_proba(X)[:, 1]


def raising_between(docs):
    w = words.transform(docs)
    1 / 0  # the original raises what transform raises first, if it raises
    return model.predict_proba(w)


def join_pipeline(df, table):
    joined = df.merge(table, on="k", how="left")
    df["v"] = -1.0  # written into the caller's frame after the join read it
    X = joined[FEATURES]
    return regressor.predict(X)


def table_changed_between(df, table):
    joined = df.merge(table, on="k", how="left")
    table.loc[0, "f"] = 1000.0  # written into the table after the join read it
    X = joined[FEATURES]
    return regressor.predict(X)


def table_changed_then_rejoined(df, table, other):
    joined = df.merge(table, on="k", how="left")
    table.loc[0, "f"] = 1000.0
    both = joined.merge(other, on="k", how="inner")  # not compiled: the kept join is built as pandas would
    return regressor.predict(both[FEATURES])


def kept(optimized) -> dict:
    table = optimized.explain_compilation()
    return dict(zip(table["call"], table["kept"]))


def all_compiled(optimized) -> bool:
    table = optimized.explain_compilation()
    called = table[table["calls"] > 0]
    return len(called) > 0 and (called["status"] == "compiled").all()


def test_vectorizers_stay_kept_across_python_statements():
    f = willump.optimize(text_pipeline)
    for docs in (["good plot", "bad 🙂"], ["a"], [""]):
        expected = text_pipeline(list(docs))
        log.clear()
        result = f(list(docs))
        np.testing.assert_array_equal(result, expected, strict=True)
        assert log == [len(docs)]
    flags = kept(f)
    assert flags["words.transform(docs)"] and flags["chars.transform(docs)"], flags
    assert all_compiled(f), f.explain_compilation()


def test_the_first_exception_is_the_one_raised_as_written():
    f = willump.optimize(raising_between)
    assert kept(f)["words.transform(docs)"]
    with pytest.raises(ZeroDivisionError):
        f(["good plot"])
    with pytest.raises(AttributeError):  # transform fails on a document that is not a str, before 1 / 0
        raising_between([None])
    with pytest.raises(AttributeError):
        f([None])


def test_a_join_stays_kept_while_its_base_frame_changes_in_place():
    table = pd.DataFrame({"k": [1, 2, 3], "f": [0.5, 1.5, -2.0]})
    f = willump.optimize(join_pipeline)
    for keys in ([1, 9], [3], [2, 2, 1]):
        frame = pd.DataFrame({"k": keys, "v": np.linspace(0, 1, len(keys))})
        expected = join_pipeline(frame.copy(), table)
        np.testing.assert_array_equal(f(frame.copy(), table), expected, strict=True)
    assert kept(f)["df.merge(table, on='k', how='left')"]
    assert all_compiled(f), f.explain_compilation()


def test_single_rows_with_workers_settle_before_python_code():
    f = willump.optimize(text_pipeline, workers=2)
    for _ in range(30):  # long enough documents that a worker may take one vectorizer
        docs = ["good movie, bad plot " * 200]
        expected = text_pipeline(list(docs))
        log.clear()
        np.testing.assert_array_equal(f(list(docs)), expected, strict=True)
        assert log == [1]


def test_a_join_stays_kept_while_its_table_changes_in_place():
    frame = pd.DataFrame({"k": [1, 2, 7], "v": [0.1, 0.2, 0.3]})
    other = pd.DataFrame({"k": [1, 2, 3, 7]})
    f, g = willump.optimize(table_changed_between), willump.optimize(table_changed_then_rejoined)
    for _ in range(3):  # the tables are prepared on the first call and reused after
        table = lambda: pd.DataFrame({"k": [1, 2, 3], "f": [0.5, 1.5, -2.0]})  # noqa: E731
        expected = table_changed_between(frame.copy(), table())
        np.testing.assert_array_equal(f(frame.copy(), table()), expected, strict=True)
        expected = table_changed_then_rejoined(frame.copy(), table(), other)
        np.testing.assert_array_equal(g(frame.copy(), table(), other), expected, strict=True)
    assert kept(f)["df.merge(table, on='k', how='left')"]
    # (g's kept join was built by pandas on each of the 3 calls: kept on them, computed at once after)
    rows = g.explain_compilation().set_index("call").loc["df.merge(table, on='k', how='left')"]
    assert rows["compiled_calls"] == 3 and not rows["kept"]


def reread_after_write(df, table, other):
    joined = df.merge(table, on="k", how="left")
    extra = other.merge(table, on="k", how="left")  # another compiled call: a worker may compute the join meanwhile
    first = regressor.predict(joined[FEATURES])
    df["v"] = -1.0  # written after the join read it, and before it is read again
    second = regressor.predict(joined[FEATURES])
    return first, second, regressor.predict(extra[FEATURES])


def test_a_join_computed_by_a_worker_is_protected_too():
    rng = np.random.default_rng(1)
    table = pd.DataFrame({"k": np.arange(20_000), "f": rng.normal(size=20_000)})
    frame = pd.DataFrame({"k": rng.integers(0, 25_000, 20_000), "v": rng.normal(size=20_000)})
    f = willump.optimize(reread_after_write, workers=2)
    for _ in range(4):  # the join's cost is measured on the first call; later calls may hand it to a worker
        expected = reread_after_write(frame.copy(), table, frame.copy())
        for result, wanted in zip(f(frame.copy(), table, frame.copy()), expected):
            np.testing.assert_array_equal(result, wanted, strict=True)
    assert kept(f)["df.merge(table, on='k', how='left')"]


hasher = HashingVectorizer(n_features=64, analyzer="char").fit(CORPUS)
hashed_model = LogisticRegression().fit(hasher.transform(CORPUS), [1, 0, 1, 0, 1])


def hashed_then_divided(docs, n, d):
    X = hasher.transform(docs)
    r = n / d  # raises ZeroDivisionError for d = 0, after transform raised for a lone surrogate
    return hashed_model.predict(X), r


def test_rows_kept_lazily_raise_before_later_arithmetic():
    f = willump.optimize(hashed_then_divided)
    np.testing.assert_array_equal(f(["good"], 1, 2)[0], hashed_then_divided(["good"], 1, 2)[0], strict=True)
    with pytest.raises(UnicodeEncodeError):
        hashed_then_divided(["a\ud800"], 1, 0)
    with pytest.raises(UnicodeEncodeError):
        f(["a\ud800"], 1, 0)
    with pytest.raises(ZeroDivisionError):
        f(["good"], 1, 0)
