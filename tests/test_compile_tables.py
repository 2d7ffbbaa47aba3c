"""Compiled lookups (left-join chains, column selection) and LightGBM scoring give pandas' answers."""

import warnings

import lightgbm
import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import willump
from answers import answers

FEATURES = ["v", "f_int", "f_float", "g_float"]
rng = np.random.default_rng(0)
_train = rng.normal(size=(400, len(FEATURES)))
regressor = lightgbm.LGBMRegressor(n_estimators=20, num_leaves=7, verbose=-1).fit(
    pd.DataFrame(_train, columns=FEATURES), _train.sum(axis=1)
)
classifier = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=7, verbose=-1).fit(
    pd.DataFrame(_train, columns=FEATURES), (_train.sum(axis=1) > 0).astype(int)
)


def scores(df, first, second):
    df = df.merge(first, on="k", how="left")
    df = df.merge(second, on="g", how="left")  # keyed by a column the first table brings
    X = df[FEATURES]
    return regressor.predict(X)


def probabilities(df, first, second):
    df = df.merge(first, on="k", how="left")
    df = df.merge(second, on="g", how="left")
    X = df[FEATURES]
    return classifier.predict_proba(X)[:, 1]


def labels(df, first, second):
    df = df.merge(first, on="k", how="left")
    df = df.merge(second, on="g", how="left")
    return classifier.predict(df[FEATURES])


PIPELINES = [willump.optimize(f) for f in (scores, probabilities, labels)]
keys = st.integers(-3, 6)


def _string_dtypes() -> list:
    """pandas' string dtypes here: ``str`` (NaN for missing), ``string`` (NA), in each storage installed."""
    dtypes = ["str", "string[python]"]
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return dtypes
    return dtypes + ["string[pyarrow]", pd.StringDtype("python", na_value=np.nan)]


string_dtypes = st.sampled_from(_string_dtypes())
floats = st.floats(allow_nan=True, allow_infinity=False, width=64)


@st.composite
def lookup_case(draw):
    n = draw(st.integers(1, 12))
    frame = pd.DataFrame(
        {"k": draw(st.lists(keys, min_size=n, max_size=n)), "v": draw(st.lists(floats, min_size=n, max_size=n))},
        index=draw(st.lists(st.integers(0, 50), min_size=n, max_size=n, unique=True)),
    )
    k = draw(st.lists(keys, max_size=8, unique=not draw(st.booleans())))  # sometimes duplicate keys
    first = pd.DataFrame(
        {
            "k": k,
            "f_int": draw(st.lists(st.integers(-5, 5), min_size=len(k), max_size=len(k))),
            "f_float": draw(st.lists(floats, min_size=len(k), max_size=len(k))),
            "g": draw(st.lists(st.sampled_from(["a", "b", "é", "🙂", ""]), min_size=len(k), max_size=len(k))),
        }
    )
    if draw(st.booleans()):
        first["k"] = first["k"].astype("int32")  # a key dtype that differs from the frame's
    g = draw(st.lists(st.sampled_from(["a", "b", "é", "🙂", "", "zz"]), max_size=6, unique=True))
    second = pd.DataFrame({"g": pd.array(g, dtype=draw(string_dtypes)), "g_float": draw(st.lists(floats, min_size=len(g), max_size=len(g)))})
    return frame, first, second


def assert_same(optimized, case):
    both = answers(optimized, *case)
    if both is None:
        return
    result, expected = both
    assert type(result) is type(expected) and result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)


@settings(max_examples=150, deadline=None)
@given(lookup_case())
def test_lookups_and_lightgbm_match_pandas_and_lightgbm(case):
    frame, first, second = case
    simple = (
        first["k"].is_unique and first["k"].dtype == frame["k"].dtype
        and isinstance(second["g"].dtype, pd.StringDtype) and isinstance(first["g"].dtype, pd.StringDtype)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        for optimized in PIPELINES:
            before = optimized.explain_compilation()[["calls", "compiled_calls"]]
            assert_same(optimized, case)
            if simple:  # unique keys of one dtype: every call made, joins and model, was compiled
                after = optimized.explain_compilation()[["calls", "compiled_calls"]]
                made = after - before
                assert (made["calls"] > 0).sum() >= 3 and (made["calls"] == made["compiled_calls"]).all(), after


def test_a_plain_lookup_chain_is_compiled_end_to_end():
    frame = pd.DataFrame({"k": [1, 2, 9], "v": [0.5, np.nan, 2.0]})
    first = pd.DataFrame({"k": [1, 2, 3], "f_int": [1, 2, 3], "f_float": [0.1, 0.2, 0.3], "g": ["a", "b", "zz"]})
    second = pd.DataFrame({"g": ["a", "b"], "g_float": [10.0, 20.0]})
    f = willump.optimize(scores)
    for rows in ([0], [2], [0, 1, 2]):
        assert_same(f, (frame.iloc[rows], first, second))
    table = f.explain_compilation()
    assert (table["status"] == "compiled").all(), table
    assert set(table["operator"]) >= {"DataFrame.merge", "LGBMRegressor.predict"}


def test_tables_with_duplicate_keys_run_as_written():
    frame = pd.DataFrame({"k": [1, 2], "v": [0.5, 1.5]})
    first = pd.DataFrame({"k": [1, 1], "f_int": [1, 2], "f_float": [0.1, 0.2], "g": ["a", "b"]})
    second = pd.DataFrame({"g": ["a", "b"], "g_float": [10.0, 20.0]})
    f = willump.optimize(scores)
    assert_same(f, (frame, first, second))
    table = f.explain_compilation().set_index("line")
    assert "several rows" in table["status"].iloc[0]


def test_a_replaced_table_is_read_again():
    frame = pd.DataFrame({"k": [1], "v": [0.5]})
    second = pd.DataFrame({"g": ["a"], "g_float": [10.0]})
    f = willump.optimize(scores)
    first = pd.DataFrame({"k": [1], "f_int": [1], "f_float": [0.1], "g": ["a"]})
    before = f(frame, first, second)
    first = pd.DataFrame({"k": [1], "f_int": [100], "f_float": [-50.0], "g": ["a"]})
    assert_same(f, (frame, first, second))
    first["f_float"] = 7.0  # a column replaced in place
    assert_same(f, (frame, first, second))
    assert f(frame, first, second)[0] != before[0]


def mutated_between(df, table):
    joined = df.merge(table, on="k", how="left")
    df["k"] = 0  # not a compiled call: the join's result must not be kept as row positions
    return regressor.predict(joined[FEATURES])


def test_code_between_a_join_and_its_use_keeps_the_result_real():
    frame = pd.DataFrame({"k": [1, 2], "v": [0.5, 1.5]})
    table = pd.DataFrame({"k": [1, 2], "f_int": [1, 2], "f_float": [0.1, 0.2], "g_float": [1.0, 2.0]})
    expected = mutated_between(frame.copy(), table)
    np.testing.assert_array_equal(willump.optimize(mutated_between)(frame.copy(), table), expected)


def pair_lookup(df, pairs):
    df = df.merge(pairs, on=["k", "g"], how="left")
    return regressor.predict(df[FEATURES])


@st.composite
def pair_case(draw):
    n = draw(st.integers(1, 10))
    frame = pd.DataFrame(
        {
            "k": draw(st.lists(keys, min_size=n, max_size=n)),
            # keys of any string dtype, some missing (a missing key finds no row)
            "g": pd.array(draw(st.lists(st.sampled_from(["a", "b", "é", None]), min_size=n, max_size=n)), dtype=draw(string_dtypes)),
            "v": draw(st.lists(floats, min_size=n, max_size=n)),
        }
    )
    pairs = draw(st.lists(st.tuples(keys, st.sampled_from(["a", "b", "é"])), max_size=8, unique=not draw(st.booleans())))
    m = len(pairs)
    table = pd.DataFrame(
        {
            "k": [p[0] for p in pairs],
            "g": pd.Series([p[1] for p in pairs], dtype=draw(string_dtypes)),
            "f_int": draw(st.lists(st.integers(-5, 5), min_size=m, max_size=m)),
            "f_float": draw(st.lists(floats, min_size=m, max_size=m)),
            "g_float": draw(st.lists(floats, min_size=m, max_size=m)),
        }
    )
    return frame, table


@settings(max_examples=100, deadline=None)
@given(pair_case())
def test_joins_on_several_key_columns(case):
    f = willump.optimize(pair_lookup)
    assert_same(f, case)
    frame, table = case
    if table[["k", "g"]].drop_duplicates().shape[0] == len(table) and len(table):
        made = f.explain_compilation()
        assert (made["calls"] == made["compiled_calls"]).all() and made["calls"].sum() == 3, made


def string_lookup(df, table):
    df = df.merge(table, on="g", how="left")
    return regressor.predict(df[FEATURES])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "é", "zz", None]), min_size=1, max_size=40), string_dtypes, string_dtypes,
)
def test_string_keys_of_any_string_dtype_find_the_rows_pandas_finds(keys, key_dtype, table_dtype):
    """As a Dask partition read from Parquet holds them (``string``, NA for missing) against a table of
    ``str`` keys: one row at a time and in batches (a dict, or pandas' get_indexer)."""
    n = len(keys)
    frame = pd.DataFrame({"g": pd.array(keys, dtype=key_dtype), "v": np.linspace(-1, 1, n), "k": range(n)})
    table = pd.DataFrame({
        "g": pd.array(["a", "é", "b"], dtype=table_dtype), "f_int": [1, 2, 3], "f_float": [0.5, np.nan, 2.0],
        "g_float": [1.0, 2.0, 3.0],
    })
    f = willump.optimize(string_lookup)
    assert_same(f, (frame, table))
    made = f.explain_compilation()
    assert (made["calls"] == made["compiled_calls"]).all(), made


def _single_row_models():
    X = pd.DataFrame(rng.normal(size=(600, 4)), columns=list("abcd"))
    X.iloc[::7, 1] = np.nan  # LightGBM's missing-value branches
    y = X["a"].fillna(0) + X["b"].fillna(1) * X["c"]
    classes = np.digitize(y, [-1, 0, 1])  # four classes
    with warnings.catch_warnings():  # eval_set: deprecated in LightGBM 4.7, the only spelling before
        warnings.simplefilter("ignore")
        early = lightgbm.LGBMClassifier(n_estimators=200, num_leaves=7, verbose=-1).fit(
            X[:400], y[:400] > 0, eval_set=[(X[400:], y[400:] > 0)], callbacks=[lightgbm.early_stopping(5, verbose=False)]
        )
    assert 0 < early.booster_.best_iteration < 200  # predictions stop at the best iteration
    models = [
        (lightgbm.LGBMClassifier(n_estimators=30, num_leaves=7, verbose=-1).fit(X, classes), "predict_proba"),
        (lightgbm.LGBMClassifier(n_estimators=30, num_leaves=7, verbose=-1).fit(X, classes), "predict"),
        (early, "predict_proba"),
        (lightgbm.LGBMRegressor(n_estimators=30, num_leaves=7, verbose=-1).fit(X, y), "predict"),
        # linear trees: not the tree kernel's, LightGBM's single-row API answers
        (lightgbm.LGBMRegressor(n_estimators=30, num_leaves=7, linear_tree=True, verbose=-1).fit(X, y), "predict"),
    ]
    return X, models


def test_lightgbm_single_rows_match_lightgbm_in_several_threads():
    """One row goes through the tree kernel, or LightGBM's single-row API for a model the kernel
    does not take: the same values as LightGBM's own predict, for multiclass, early-stopped and
    regression models, also when threads score at once."""
    from concurrent.futures import ThreadPoolExecutor

    from willump.compile.trees import CompiledBooster

    X, models = _single_row_models()
    rows = [X.iloc[[i]] for i in range(0, 600, 5)]
    for model, method in models:
        kernel = CompiledBooster(model, method)
        expected = [getattr(model, method)(row) for row in rows]
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda row: kernel(row), rows * 3))
        for result, wanted in zip(results, expected * 3):
            assert type(result) is type(wanted) and result.dtype == wanted.dtype and result.shape == wanted.shape
            np.testing.assert_array_equal(result, wanted)
        if kernel.ensemble is None:
            assert len(kernel._single_row._configs) >= 1  # the single-row API answered


WITH_STRINGS = FEATURES + ["g"]  # (a str column: pandas' joined frame is built to select it)


def joined_then_read(df, first, second):
    df = df.merge(first, on="k", how="left")
    df = df.merge(second, on="g", how="left")
    X = df[WITH_STRINGS]
    return regressor.predict(X[FEATURES])


def test_joins_built_by_pandas_on_every_call_are_no_longer_kept():
    """A chain of joins whose frame pandas builds all the same (here to select a str column) stops
    keeping row positions after a few calls: preparing the tables would be work done twice."""
    frame = pd.DataFrame({"k": [1, 2, 9], "v": [0.5, np.nan, 2.0]})
    second = pd.DataFrame({"g": ["a", "b"], "g_float": [10.0, 20.0]})
    f = willump.optimize(joined_then_read)
    for call in range(6):
        first = pd.DataFrame({"k": [1, 2, 3], "f_int": [1, 2, 3], "f_float": [0.1, 0.2, 0.3 + call], "g": ["a", "b", "zz"]})
        assert_same(f, (frame.iloc[[call % 3]], first, second))
    merges = f.explain_compilation().set_index("operator").loc["DataFrame.merge"]
    assert not merges["kept"].any() and (merges["compiled_calls"] == 3).all(), merges
    assert "used as a DataFrame" in merges["status"].iloc[0]
