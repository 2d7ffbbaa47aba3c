"""The compiled ``series.map(mapping)`` gives pandas' answer: values, dtype, index and name."""

import collections
import gc
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import willump
from answers import answers, identity, text_series
from test_compile_strings import ARROW_STORAGES, STORAGES, pa, stored
from willump.compile import maps
from willump.compile.forms import Unsupported

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")


def mapped(s, m):
    return identity.predict(s.map(m))  # a model call, so that willump compiles the function


def mapped_by_name(s, m):
    result = s.map(m)
    return identity.predict(result)


def mapped_without_na(s, m):
    return identity.predict(s.map(m, na_action="ignore"))


PIPELINES = [willump.optimize(mapped), willump.optimize(mapped_by_name)]
STORED = {"python": pd.StringDtype("python", na_value=np.nan)}  # the str dtypes, by storage
if pa is not None:
    STORED["pyarrow"] = pd.StringDtype("pyarrow", na_value=np.nan)
SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

INTS = st.integers(-3, 6)
FLOATS = st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, -3.0, 0.1, np.inf, np.nan])
STRS = st.sampled_from(["a", "b", "é", "🙂", "", "zz", "A", "a\u0301"])
POOLS = {"int": INTS, "float": FLOATS, "str": STRS, "bool": st.booleans()}
VALUES = {**POOLS, "int": st.integers(-(2**40), 2**40) | INTS, "none": st.none()}
DTYPES = {"int": ["int64", "int64", "int32", "uint8"], "float": ["float64", "float64", "float32"],
          "str": ["str", "str", "object"], "bool": ["bool"]}


def assert_same(optimized, s, m):
    """The optimized function answers as the original: the same Series, or the same exception."""
    both = answers(optimized, s, m)
    if both is None:
        return
    result, expected = both
    assert type(result) is type(expected) and result.dtype == expected.dtype
    pd.testing.assert_series_equal(result, expected, check_exact=True, check_index_type=True)
    if expected.dtype == object:  # Python bools, NaN and None as pandas holds them
        assert [type(v) for v in result.to_numpy()] == [type(v) for v in expected.to_numpy()]
    assert result.attrs == expected.attrs


def map_calls(optimized) -> tuple:
    """(calls, compiled calls) of the ``s.map(m)`` call site."""
    table = optimized.explain_compilation()
    table = table[table["operator"] == "Series.map"]
    return table["calls"].sum(), table["compiled_calls"].sum()


@st.composite
def series(draw, kind):
    n = draw(st.integers(0, 12))
    values = draw(st.lists(POOLS[kind], min_size=n, max_size=n))
    if kind == "str" and draw(st.booleans()):  # missing values of a str Series
        values = [v if draw(st.integers(0, 4)) else np.nan for v in values]
    dtype = draw(st.sampled_from(DTYPES[kind]))
    if dtype == "uint8":
        values = [abs(v) for v in values]
    if dtype == "object" and any(v != v for v in values):
        dtype = "str"
    labels = st.lists(st.integers(0, 5), min_size=n, max_size=n) | st.lists(STRS, min_size=n, max_size=n)
    index = draw(st.none() | labels)  # duplicate labels too
    return pd.Series(values, dtype=dtype, index=index, name=draw(st.sampled_from([None, "x", 0])))


@st.composite
def mapping(draw, kind):
    """A dict or Series of keys of the Series' kind (sometimes of any kind), and values of one kind
    (sometimes mixed); ``common`` when every call of that kind is expected compiled."""
    same_keys = draw(st.integers(0, 4)) > 0
    key = POOLS[kind] if same_keys else st.one_of(*POOLS.values())
    keys = draw(st.lists(key, max_size=8))
    one_kind = draw(st.integers(0, 3)) > 0
    value = VALUES[draw(st.sampled_from(["int", "float", "str", "bool"]))] if one_kind else st.one_of(*VALUES.values())
    values = draw(st.lists(value, min_size=len(keys), max_size=len(keys)))
    # a NaN key; with the pool's np.nan, sometimes two distinct NaN keys (pandas raises)
    if kind == "float" and keys and draw(st.booleans()):
        keys[0] = float("nan")
    if draw(st.booleans()):
        m = dict(zip(keys, values))
        common = same_keys and one_kind and sum(k != k for k in m) <= 1
    else:
        m = pd.Series(values, index=pd.Index(keys, tupleize_cols=False), dtype=object if draw(st.booleans()) else None)
        common = same_keys and one_kind and m.index.is_unique and m.dtype != object and m.index.dtype != object
    return m, common


@st.composite
def case(draw):
    kind = draw(st.sampled_from(list(POOLS)))
    s = draw(series(kind))
    m, common = draw(mapping(kind))
    return s, m, common and len(s) > 0


@SETTINGS
@given(case())
def test_map_matches_pandas(case):
    s, m, common = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas' own warnings, raised alike by both
        for optimized in PIPELINES:
            before = map_calls(optimized)
            assert_same(optimized, s, m)
            calls, compiled = (a - b for a, b in zip(map_calls(optimized), before))
            assert calls == 1
            if common:
                status = optimized.explain_compilation().set_index("operator").loc["Series.map", "status"]
                assert compiled == 1, status


@settings(SETTINGS, max_examples=150)
@given(st.sampled_from(["int", "float"]), st.data())
def test_map_of_many_numbers_matches_pandas(kind, data):
    """From ``BULK_ROWS`` numbers a Series' keys are found by its index's hash table, as pandas'
    ``map_array`` finds them: the same answers, missing keys, NaN keys and value dtypes included."""
    values = data.draw(st.lists(POOLS[kind], min_size=1, max_size=12))
    rows = maps.BULK_ROWS + data.draw(st.integers(0, 40))
    dtype = data.draw(st.sampled_from(DTYPES[kind]))
    values = [abs(v) for v in values] if dtype == "uint8" else values
    index = data.draw(st.none() | st.just(np.arange(rows) % 7))
    s = pd.Series(np.resize(np.array(values, dtype=dtype), rows), index=index)
    m, common = data.draw(mapping(kind))
    if isinstance(m, dict):
        m = pd.Series(list(m.values()), index=pd.Index(list(m.keys()), tupleize_cols=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for optimized in PIPELINES:
            before = map_calls(optimized)
            assert_same(optimized, s, m)
            if maps._numbers_in_bulk(s, m):
                assert [a - b for a, b in zip(map_calls(optimized), before)] == [1, 1]


@pytest.mark.parametrize("dtype", [object, bool, "int64", "float64", "str"])
def test_many_numbers_through_an_empty_series_are_float64_nan(dtype):
    """pandas maps through an empty float64 Series whatever the mapping's dtype (its RangeIndex is
    int64, not a reason to look keys up in it)."""
    s = pd.Series(np.arange(maps.BULK_ROWS + 3) % 5)
    for optimized in PIPELINES:
        assert_same(optimized, s, pd.Series([], dtype=dtype))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.one_of(*VALUES.values(), st.floats()), min_size=1, max_size=6))
def test_inferred_value_dtype_is_pandas(values):
    try:
        dtype = maps._dtype_of(values)
    except Unsupported:
        return
    assert dtype == pd.Series(values).dtype


def test_common_lookups_are_compiled():
    f = willump.optimize(mapped)
    s = pd.Series([3, 1, 9], index=[10, 10, 11], name="k")
    for m in ({1: 0.5, 3: 1.5}, {1: "one", 3: "three"}, pd.Series([True, False], index=[1, 3]), {}):
        assert_same(f, s, m)
    assert_same(f, pd.Series(["b", "a", np.nan]), {"a": 1, "b": 2})
    assert_same(f, pd.Series([1.0, np.nan]), {np.nan: "missing", 1: "one"})
    assert map_calls(f) == (6, 6)
    assert f.explain_compilation().set_index("operator").loc["Series.map", "status"] == "compiled"


def test_large_ints_are_compared_exactly():
    f = willump.optimize(mapped)
    assert_same(f, pd.Series([2**62 + 1, 2**62]), {2**62: "even", 2**62 + 1: "odd"})
    assert_same(f, pd.Series([2**53, -(2**53)]), {float(2**53): "x", np.nan: "n"})
    assert_same(f, pd.Series([0.1, 2.0**40], dtype="float32"), {0.1: "x", 2**40: "y"})
    assert map_calls(f) == (3, 3)


@pytest.mark.parametrize(
    "s, m, reason",
    [
        (pd.Series([1, 2]), collections.defaultdict(lambda: 0, {1: 5}), "a mapping of type defaultdict"),
        (pd.Series(["a", "b"]), collections.Counter(["a"]), "a mapping of type Counter"),
        (pd.Series([1, 2]), collections.OrderedDict({1: 5}), "a mapping of type OrderedDict"),
        (pd.Series([1, 2]), lambda v: v + 1, "a mapping of type function"),
        (pd.Series([1, 2]), pd.Series([5, 6], index=[1, 1]), "duplicate keys (pandas raises)"),
        (pd.Series([1.0, np.nan]), {float("nan"): 1, float("nan"): 2}, "several NaN keys (pandas raises)"),
        (pd.Series(["a", "b"], dtype="category"), {"a": 1}, "a Series of dtype category"),
        (pd.Series([1, None], dtype="Int64"), {1: 5}, "a Series of dtype Int64"),
        (pd.Series([], dtype="int64"), {1: 5}, "an empty Series"),
        (pd.Series(["a", 1], dtype=object), {"a": 5}, "an object Series with values that are not str"),
        (pd.Series([1, 2]), {1: 5, "2": 6}, "keys of types ['int', 'str']"),
        (pd.Series([1, 0]), {True: 5}, "bool keys for int values"),
        (pd.Series([True, False]), {1: 5}, "number keys for bool values"),
        (pd.Series([2**53 + 1]), {float(2**53): 5}, "ints beyond 2**53 compared with floats"),
        (pd.Series([1, 2]), {1: (1, 2)}, "values of types ['tuple']"),
        (pd.Series([1, 2]), {1: 2**64}, "int values beyond int64"),
        (pd.Series(["a", "b"]), {"a": 1, "b": "x"}, "mixed values for a str Series"),
        (pd.Series([1, 2]), pd.Series([1, 2], index=[1, 2], dtype="Int64"), "a mapping of dtype Int64"),
        (pd.Series([1, 2]), pd.Series([5, 6], index=pd.Index([1, 2], dtype=object)), "in an index of dtype object"),
    ],
)
def test_refused_inputs_run_as_written(s, m, reason):
    f = willump.optimize(mapped)
    assert_same(f, s, m)
    assert map_calls(f) == (1, 0)
    status = f.explain_compilation().set_index("operator").loc["Series.map", "status"]
    assert status.startswith("plain Python: this input:"), status
    assert reason in status, status


def test_options_run_as_written():
    f = willump.optimize(mapped_without_na)
    assert_same(f, pd.Series([1.0, np.nan]), {1.0: 5, np.nan: 6})
    assert "na_action" in f.explain_compilation().set_index("operator").loc["Series.map", "status"]


def test_series_subclasses_run_as_written():
    class Tagged(pd.Series):
        @property
        def _constructor(self):
            return Tagged

    f = willump.optimize(mapped)
    assert_same(f, Tagged([1, 2]), {1: 5})
    assert "Tagged.map is not an operator willump compiles" in f.explain_compilation()["status"].str.cat()


def test_a_changed_mapping_series_is_read_again():
    f = willump.optimize(mapped)
    s = pd.Series(["a", "b", "c"])
    m = pd.Series([1, 2], index=["a", "b"])
    assert_same(f, s, m)
    index, values, table = m.index, m.to_numpy(), maps._tables[id(m.index._data)]
    m["a"] = 10  # written in place: the same index and values array, so the same table
    assert m.index is index and np.shares_memory(m.to_numpy(), values)
    assert f(s, m).iloc[0] == 10 and maps._tables[id(m.index._data)] is table
    assert_same(f, s, m)
    m.index = ["b", "c"]  # a new index
    assert_same(f, s, m)
    m = pd.Series([1.5], index=["c"])  # a new table
    assert_same(f, s, m)
    assert map_calls(f) == (5, 5)


def test_tables_are_dropped_with_their_mapping():
    f = willump.optimize(mapped)
    m = pd.Series([1, 2], index=["a", "b"])
    f(pd.Series(["a"]), m)
    key = id(m.index._data)
    assert key in maps._tables
    del m
    gc.collect()
    assert key not in maps._tables


def test_attrs_and_flags_follow_pandas():
    s = pd.Series([1, 2], index=[0, 0])
    s.attrs["source"] = "test"
    f = willump.optimize(mapped)
    assert_same(f, s, {1: "x"})
    assert_same(f, pd.Series([1, 2]).set_flags(allows_duplicate_labels=False), {1: "x"})
    assert map_calls(f) == (2, 2)


def test_without_str_inference_runs_as_written():
    f = willump.optimize(mapped)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the option is deprecated
        with pd.option_context("future.infer_string", False):
            assert_same(f, pd.Series([1, 2]), {1: "a"})
    assert "future.infer_string" in f.explain_compilation().set_index("operator").loc["Series.map", "status"]


# --- text in every storage pandas keeps it in (pyarrow's in the test pass with pyarrow installed) ----

STORED_STRS = ["a", "b", "é", "🙂", "", "a\u0301", "\x00", "日本語", "Σ"]
COMPILED_STORAGES = {"str, Python", "str, pyarrow", "str, pyarrow, chunked", "str, pyarrow, sliced"}
TEXT_STORAGES = [name for name in (*STORAGES, *ARROW_STORAGES) if pa is not None or name in STORAGES]
A_STORAGE = st.sampled_from([s for s in TEXT_STORAGES if s in COMPILED_STORAGES]) | st.sampled_from(TEXT_STORAGES)


@st.composite
def stored_case(draw):
    """(a Series of text, a dict or Series keyed by text, whether the map is expected compiled): the
    text of each held in a storage of its own (Python, pyarrow; one chunk or several, a slice of an
    array), with missing values and keys, non-ASCII ones, and values of any kind (text too)."""
    texts = st.sampled_from(STORED_STRS) | st.none()
    source_storage = draw(A_STORAGE)
    values = draw(st.lists(texts, min_size=1, max_size=draw(st.sampled_from([4, 40]))))  # (more than 16: in numba)
    if source_storage == "object":  # missing values in an object Series are not str: refused
        values = [v if v is not None else draw(st.sampled_from(STORED_STRS)) for v in values]
    s = stored(source_storage, values, draw(st.none() | st.just(pd.RangeIndex(len(values)) * 3)))
    keys = draw(st.lists(texts, max_size=8, unique=True))
    value_kind = draw(st.sampled_from(["int", "float", "bool", "str"]))
    mapped_to = draw(st.lists(VALUES[value_kind] | (st.none() if value_kind == "str" else st.nothing()),
                              min_size=len(keys), max_size=len(keys)))
    compiled = source_storage in COMPILED_STORAGES or source_storage == "object"
    compiled &= keys == [] or keys != [None]  # (a lone NaN key is a number: pandas compares it so)
    if draw(st.booleans()):
        m = {np.nan if k is None else k: v for k, v in zip(keys, mapped_to)}
        compiled &= value_kind != "str" or set(mapped_to) != {None}  # (only None: an object Series)
        return s, m, compiled
    key_storage = draw(A_STORAGE)
    index = pd.Index(stored(key_storage, keys)) if keys else pd.Index([], dtype="str")
    if value_kind == "str" and keys:
        value_storage = draw(A_STORAGE)
        m = pd.Series(stored(value_storage, mapped_to).array, index=index)
        compiled &= value_storage in COMPILED_STORAGES
    else:
        m = pd.Series(mapped_to, index=index, dtype=None if keys else "float64")
    compiled &= key_storage in COMPILED_STORAGES or (key_storage == "object" and None not in keys)
    return s, m, compiled and m.index.dtype != object


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(stored_case())
def test_maps_of_text_in_any_storage_match_pandas(case):
    s, m, compiled = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = willump.optimize(mapped)
        assert_same(f, s, m)
        assert_same(f, s, m)  # (again, with the mapping's key positions kept)
    status = f.explain_compilation().set_index("operator").loc["Series.map", "status"]
    if compiled:
        assert map_calls(f) == (2, 2), status


@pytest.mark.parametrize("m", [{"\ud800": 1, "a": 2}, {"a": "\ud800", "b": "x"}, {"a": "x", "b": "\udfff"}])
def test_text_pyarrow_cannot_hold_runs_as_written(m):
    """A lone surrogate in a dict's text: where pandas keeps text in pyarrow it raises (pyarrow holds
    UTF-8), so the call runs as written; elsewhere pandas maps it, and so does the compiled map."""
    f = willump.optimize(mapped)
    for s in (pd.Series(["a", "b"], dtype=object), text_series(["a", "b"])):
        assert_same(f, s, m)
    if pd.StringDtype(na_value=np.nan).storage == "pyarrow":
        assert map_calls(f) == (2, 0)
        assert "lone surrogate" in f.explain_compilation().set_index("operator").loc["Series.map", "status"]
    else:
        assert map_calls(f) == (2, 2)


def test_an_object_series_of_text_pyarrow_cannot_hold_runs_as_written():
    f = willump.optimize(mapped)
    s = pd.Series(["\ud800", "a"], dtype=object)
    for m in ({"a": 1}, pd.Series([1.5], index=pd.Index(["a"], dtype=object))):
        assert_same(f, s, m)
    arrow = pd.StringDtype(na_value=np.nan).storage == "pyarrow"
    assert map_calls(f) == ((2, 0) if arrow else (2, 2))


def test_text_results_are_kept_as_pandas_keeps_them():
    """A dict of text gives text of the storage pandas infers; a Series of text gives its own."""
    f = willump.optimize(mapped)
    inferred = pd.StringDtype(na_value=np.nan)
    for s in (pd.Series([2, 1, 3]), pd.Series(["b", "a", "c"]), pd.Series(["b", "a", None], dtype=STORED["python"])):
        keys = s.iloc[:2].tolist()
        result = f(s, dict(zip(keys, ["x", None])))
        assert result.dtype == inferred and type(result.array) is type(pd.array(["x"], dtype=inferred))
        for storage in STORED:
            values = pd.Series(["x", None], index=keys, dtype=STORED[storage])
            assert f(s, values).dtype == STORED[storage]
            assert_same(f, s, values)
    assert map_calls(f)[0] == map_calls(f)[1]


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12) | st.sampled_from(STORED_STRS)


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TEXT, min_size=1, max_size=300, unique=True), st.data())
def test_many_keys_match_pandas(keys, data):
    """Many text keys (hashed, collided and probed where pyarrow keeps them) and many values,
    some of them keys, some not, some missing."""
    values = data.draw(st.lists(st.sampled_from(keys) | _TEXT | st.none(), min_size=17, max_size=60))
    s = pd.Series(values, dtype="str")
    m = pd.Series(np.arange(len(keys)), index=pd.Index(keys, dtype="str"))
    f = willump.optimize(mapped)
    assert_same(f, s, m)
    assert map_calls(f) == (1, 1)
