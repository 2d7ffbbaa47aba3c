"""Compiled ``table.loc[keys]`` and ``table.reindex(keys)`` give pandas' answer: values, dtypes,
columns, index and name, or the same exception."""

import gc
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import willump
from answers import answers, identity, in_threads
from test_compile_strings import ARROW_STORAGES, STORAGES, pa, stored
from willump.compile import maps, registry

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")


def by_loc(table, keys):
    return identity.predict(table.loc[keys])  # a model call, so that willump compiles the function


def by_reindex(table, keys):
    rows = table.reindex(keys)
    return identity.predict(rows)


def by_reindex_index(table, keys):
    return identity.predict(table.reindex(index=keys))


LOC, REINDEX, REINDEX_INDEX = (willump.optimize(f) for f in (by_loc, by_reindex, by_reindex_index))
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

STRS = ["a", "b", "é", "🙂", "", "zz", "A", "a\u0301", "🙂🙃"]
POOLS = {
    "int": st.integers(-3, 6),
    "float": st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, -3.0, 0.1, np.inf, np.nan]),
    "str": st.sampled_from(STRS),
}
COLUMNS = {  # dtype -> values (None: missing)
    "int64": st.integers(-(2**40), 2**40),
    "int32": st.integers(-5, 5),
    "uint8": st.integers(0, 255),
    "float64": st.sampled_from([0.5, -1.0, 2.0**60, np.nan]),
    "float32": st.sampled_from([0.1, 3.0, np.nan]),
    "bool": st.booleans(),
    "str": st.sampled_from(STRS + [None]),
    "object": st.one_of(st.sampled_from(STRS), st.integers(), st.booleans(), st.none()),
    "category": st.sampled_from(["x", "y"]),
}
COMPILED_DTYPES = {"int64", "int32", "uint8", "float64", "float32", "bool", "str", "object"}


def assert_same(optimized, *args):
    """The optimized function answers as the original: the same table, or the same exception."""
    both = answers(optimized, *args)
    if both is None:
        return
    result, expected = both
    assert type(result) is type(expected)
    if isinstance(expected, pd.DataFrame):
        pd.testing.assert_frame_equal(result, expected, check_exact=True, check_index_type=True,
                                      check_column_type=True, check_flags=True)
        pairs = [(result.iloc[:, i], expected.iloc[:, i]) for i in range(expected.shape[1])]
    elif isinstance(expected, pd.Series):
        pd.testing.assert_series_equal(result, expected, check_exact=True, check_index_type=True, check_flags=True)
        pairs = [(result, expected)]
    else:
        assert result == expected or (result != result and expected != expected)
        return
    assert result.index.name == expected.index.name and result.attrs == expected.attrs
    for got, want in pairs:  # Python bools, NaN and None as pandas holds them
        if want.dtype == object:
            assert [type(v) for v in got.to_numpy()] == [type(v) for v in want.to_numpy()]


def lookup_site(optimized) -> pd.Series:
    """The row of ``explain_compilation()`` for the lookup (``table.loc[...]``, ``table.reindex(...)``)."""
    table = optimized.explain_compilation()
    (row,) = table[table["call"].str.startswith("table.")].to_dict("records")
    return row


def calls(optimized) -> tuple:
    """(calls, compiled calls) of the lookup."""
    row = lookup_site(optimized)
    return row["calls"], row["compiled_calls"]


def status(optimized) -> str:
    return lookup_site(optimized)["status"]


@st.composite
def tables(draw):
    """(table, index kind, compiled): a DataFrame or Series with an index of one kind (sometimes
    with duplicate labels) and columns of several dtypes."""
    kind = draw(st.sampled_from(["int", "float", "str", "object"]))
    labels = draw(st.lists(POOLS["str" if kind == "object" else kind], max_size=8, unique=draw(st.booleans())))
    if kind in ("str", "object") and draw(st.booleans()):  # a missing label
        labels = [v if draw(st.integers(0, 4)) else np.nan for v in labels]
    if kind == "object":
        index = pd.Index(labels, dtype=object)
    elif kind == "int" and draw(st.booleans()):
        index = pd.RangeIndex(draw(st.integers(-2, 2)), draw(st.integers(-2, 2)) + len(labels))
    else:
        index = pd.Index(labels, dtype={"int": "int64", "float": "float64", "str": "str"}[kind])
    index.name = draw(st.sampled_from([None, "key"]))
    dtypes = draw(st.lists(st.sampled_from(sorted(COLUMNS)), min_size=1, max_size=4))
    if draw(st.integers(0, 3)) == 0:
        dtypes = [d for d in dtypes if d != "category"][:1] or ["int64"]
        values = draw(st.lists(COLUMNS[dtypes[0]], min_size=len(index), max_size=len(index)))
        table = pd.Series(values, index=index, dtype=dtypes[0], name=draw(st.sampled_from([None, "v", 0])))
    else:
        columns = {}
        for number, dtype in enumerate(dtypes):
            values = draw(st.lists(COLUMNS[dtype], min_size=len(index), max_size=len(index)))
            columns[f"c{number}"] = pd.Series(values, dtype=dtype, index=index)
        table = pd.DataFrame(columns, index=index)
    compiled = index.is_unique and set(dtypes) <= COMPILED_DTYPES
    if kind in ("str", "object") and len(index) and not any(type(v) is str for v in labels):
        compiled = False  # only NaN: number keys, in a str or object index
    return table, "str" if kind == "object" else kind, compiled


@st.composite
def queries(draw, table, kind):
    """Keys for ``table``: some of its labels and some others (duplicates too), in a container;
    ``same_kind`` when they are all of the index's kind."""
    known = [k for k in table.index.tolist() if k == k] if len(table.index) else []
    pool = POOLS[kind] if not known else st.sampled_from(known) | POOLS[kind]
    same_kind = draw(st.integers(0, 5)) > 0
    keys = draw(st.lists(pool if same_kind else st.one_of(*POOLS.values()), max_size=6))
    if same_kind and kind == "int" and draw(st.booleans()):  # float keys for an int index
        keys = [float(k) for k in keys]
    if kind == "str" and draw(st.integers(0, 3)) == 0:  # missing keys (only str Series and Index keep them str)
        keys = [k if draw(st.integers(0, 2)) else np.nan for k in keys]
    container = draw(st.sampled_from(["list", "list", "array", "index", "series"]))
    if container == "list":
        return keys, same_kind and len(set(map(type, keys))) <= 1 and not (kind == "str" and np.nan in keys)
    dtype = {"int": "int64", "float": "float64", "str": "str"}[kind] if same_kind else None
    if container == "array":
        dtype = object if dtype == "str" else dtype
        common = same_kind and (dtype is not None or not keys) and not (kind == "str" and np.nan in keys)
        return np.array(keys, dtype=dtype), common
    keys = (pd.Index if container == "index" else pd.Series)(keys, dtype=dtype, name=draw(st.sampled_from([None, "q"])))
    return keys, same_kind and keys.dtype != object


@st.composite
def case(draw):
    table, kind, compiled = draw(tables())
    keys, same_kind = draw(queries(table, kind))
    return table, keys, compiled and same_kind


def found_all(table, keys) -> bool:
    return table.index.get_indexer(pd.Index(keys) if len(keys) else pd.Index([], dtype=object)).min(initial=0) >= 0


@SETTINGS
@given(case())
def test_lookups_match_pandas(case):
    table, keys, common = case
    operator = type(table).__name__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas' own warnings, raised alike by both
        for optimized, name, compiled in (
            (LOC, "DataFrame.loc", common and found_all(table, keys)),
            (REINDEX, f"{operator}.reindex", common),
            (REINDEX_INDEX, f"{operator}.reindex", common),
        ):
            before = calls(optimized)
            assert_same(optimized, table, keys)
            done, done_compiled = (a - b for a, b in zip(calls(optimized), before))
            assert done == 1, (name, optimized.explain_compilation().to_dict("records"))
            if compiled:
                assert done_compiled == 1, status(optimized)


def test_common_lookups_are_compiled():
    loc, reindex = willump.optimize(by_loc), willump.optimize(by_reindex)
    table = pd.DataFrame(
        {"n": [1, 2, 3], "x": [0.5, np.nan, 2.0], "b": [True, False, True], "s": ["é", None, "🙂"], "o": [None, "a", 1]},
        index=pd.Index(["k1", "k2", "🙂"], name="key"),
    )
    for keys in (["k2"], ["🙂", "k1", "k1"], [], np.array(["k1"], dtype=object), pd.Index(["k2"], name="q"), pd.Series(["k1"])):
        assert_same(loc, table, keys)
        assert_same(loc, table["b"], keys)
    for keys in (["k2"], ["missing", "k1", "missing"], [], np.array(["k3"], dtype=object), pd.Series(["k1", "x"], name="q")):
        assert_same(reindex, table, keys)
        assert_same(reindex, table["n"], keys)
    numbers = pd.DataFrame({"n": [5, 6]}, index=[10, 20])
    for keys in ([20], [20.0, 25.0], [20, 30], np.array([10], dtype=np.int32), pd.RangeIndex(10, 12)):
        assert_same(reindex, numbers, keys)
    assert_same(loc, pd.DataFrame({"n": range(5)}), [3, 1])  # a RangeIndex
    assert_same(loc, pd.DataFrame({"n": [1.0]}, index=[np.nan]), [np.nan])
    assert calls(loc) == (14, 14) and calls(reindex) == (15, 15)
    assert status(loc) == "compiled" and status(reindex) == "compiled"
    assert lookup_site(loc)["operator"] == "DataFrame.loc" and lookup_site(reindex)["operator"] == "DataFrame.reindex"
    assert "reindex" in registry.NAMES


def test_large_ints_are_compared_exactly():
    loc, reindex = willump.optimize(by_loc), willump.optimize(by_reindex)
    table = pd.DataFrame({"n": [1, 2]}, index=[2**53 + 1, 2**62])
    assert_same(loc, table, [2**53 + 1])
    assert_same(reindex, table, [2**53, 2**62 + 1])
    assert calls(loc) == (1, 1) and calls(reindex) == (1, 1)
    assert_same(reindex, table, [float(2**53)])
    assert "ints beyond 2**53 compared with floats" in status(reindex)
    assert_same(reindex, table, [2**63])
    assert "int keys beyond int64" in status(reindex)


TABLE = pd.DataFrame({"n": [1, 2]}, index=["a", "b"])


@pytest.mark.parametrize(
    "function, table, keys, reason",
    [
        (by_loc, TABLE, ["a", "zz"], "a key is not in the table (pandas raises KeyError)"),
        (by_loc, TABLE, "a", "keys of type str (a single key"),
        (by_loc, TABLE, [True, False], "keys that are not all ints, all floats or all strs"),
        (by_loc, TABLE, np.array([True, False]), "bool keys (.loc takes them as a mask)"),
        (by_loc, TABLE, pd.Series([True, False], index=["a", "b"]), "bool keys"),
        (by_loc, TABLE, slice("a", "b"), "keys of type slice"),
        (by_loc, TABLE, lambda t: ["a"], "keys of type function"),
        (by_loc, TABLE, ("a",), "keys of type tuple"),
        (by_loc, TABLE, ["a", 1], "keys that are not all ints"),
        (by_reindex, pd.DataFrame({"n": [1]}, index=[2]), [2, 2.0], "keys that are not all ints"),
        (by_loc, TABLE, np.array([["a"]], dtype=object), "keys in more than one dimension"),
        (by_loc, pd.DataFrame({"n": [1, 2]}, index=["a", "a"]), ["a"], "duplicate keys"),
        (by_reindex, pd.DataFrame({"n": [1, 2]}, index=["a", "a"]), ["a"], "duplicate keys"),
        (by_reindex, pd.DataFrame({"n": [1]}, index=pd.MultiIndex.from_tuples([("a", 1)])), [("a", 1)], "MultiIndex"),
        (by_reindex, pd.DataFrame({"n": [1]}, index=pd.to_datetime(["2024-01-01"])), ["2024-01-01"], "DatetimeIndex"),
        (by_reindex, pd.DataFrame({"n": [1]}, index=pd.CategoricalIndex(["a"])), ["a"], "CategoricalIndex"),
        (by_reindex, pd.DataFrame({"n": pd.Categorical(["x"])}, index=["a"]), ["a"], "a column of dtype category"),
        (by_reindex, pd.DataFrame({"n": pd.array([1], dtype="Int64")}, index=["a"]), ["a"], "a column of dtype Int64"),
        (by_reindex, pd.DataFrame({"n": [1]}, index=pd.Index([1], dtype=object)), [1], "in an index of dtype object"),
        (by_reindex, pd.DataFrame({"n": [1]}, index=pd.Index([1], dtype="int32")), [1], "in an index of dtype int32"),
        (by_reindex, TABLE, [1, 2], "str keys for int values"),
        (by_reindex, TABLE, np.array(["a"]), "dtype <U1"),
        (by_reindex, TABLE, {"a": 1}, "keys of type dict"),
        (by_reindex, TABLE, None, "keys of type NoneType"),
    ],
)
def test_refused_inputs_run_as_written(function, table, keys, reason):
    optimized = willump.optimize(function)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(optimized, table, keys)
    assert calls(optimized) == (1, 0)
    assert status(optimized).startswith("plain Python: this input:")
    assert reason in status(optimized), status(optimized)


def with_options(table, keys, options):
    return identity.predict(table.reindex(keys, **options))


def by_labels(table, keys):
    return identity.predict(table.reindex(labels=keys))


@pytest.mark.parametrize("options", [{"fill_value": 0}, {"columns": ["m", "x"]}, {"method": "ffill"}, {"axis": 0}, {"copy": False}])
def test_options_run_as_written(options):
    optimized = willump.optimize(with_options)
    for table in (pd.DataFrame({"n": [1, 2], "m": [3, 4]}, index=[1, 3]), pd.Series([1, 2], index=[1, 3])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # copy is deprecated
            assert_same(optimized, table, [2, 3], options)
    assert calls(optimized) == (2, 0)
    assert "an option besides the keys" in status(optimized)


def test_labels_keyword():
    optimized = willump.optimize(by_labels)
    assert_same(optimized, pd.DataFrame({"n": [1, 2]}, index=[1, 3]), [3, 4])
    assert_same(optimized, pd.Series([1, 2], index=[1, 3]), [3, 4])  # Series.reindex has no labels=: TypeError
    assert calls(optimized) == (2, 1)
    assert "Series.reindex() got an unexpected keyword argument" not in status(optimized)


def by_scalar_and_columns(table, key):
    first = table.loc[key, "n"]
    table.loc[key] = 0  # written, not read: runs as written
    return identity.predict((first, table.loc[[key]]))


def test_other_spellings_keep_their_meaning():
    optimized = willump.optimize(by_scalar_and_columns)
    table = pd.DataFrame({"n": [1, 2]}, index=["a", "b"])
    first, rows = optimized(table.copy(), "b")
    assert first == 2 and rows["n"].tolist() == [0]
    assert calls(optimized) == (1, 1)


class NoLoc:
    pass


def loc_before_keys(table, make):
    return identity.predict(table.loc[make()])


def test_loc_is_read_before_the_keys():
    def make():
        raise ValueError("the keys")

    optimized = willump.optimize(loc_before_keys)
    with pytest.raises(AttributeError):
        optimized(NoLoc(), make)


def test_a_changed_table_is_read_again():
    table = pd.DataFrame({"n": [1, 2, 3], "s": ["x", "y", "z"]}, index=["a", "b", "c"])
    keys = ["c", "a"]
    assert_same(LOC, table, keys)
    positions = maps._tables[id(table.index._data)]
    table.loc["c", "n"] = 30  # a value written in place
    assert LOC(table, keys)["n"].tolist() == [30, 1]
    table["s"] = ["p", "q", "r"]  # a column replaced
    assert LOC(table, keys)["s"].tolist() == ["r", "p"]
    table["t"] = [True, False, True]  # a column added
    assert_same(LOC, table, keys)
    assert maps._tables[id(table.index._data)] is positions  # the same index: the same key -> position dict
    table.index = ["c", "b", "a"]  # a new index
    assert LOC(table, keys)["n"].tolist() == [1, 30]
    assert_same(REINDEX, table, keys + ["z"])
    assert maps._tables[id(table.index._data)] is not positions


def test_frames_sharing_an_index_share_its_positions():
    table = pd.DataFrame({"n": [1, 2, 3], "s": ["x", "y", "z"]}, index=["a", "b", "c"])
    assert_same(LOC, table[["n"]], ["b"])
    positions = maps._tables[id(table.index._data)]
    for _ in range(3):  # a new frame on every call, the same index
        assert_same(LOC, table[["s"]], ["c", "a"])
        assert_same(REINDEX, table.copy(), ["c", "q"])
    assert maps._tables[id(table.index._data)] is positions


def test_positions_are_dropped_with_their_table():
    table = pd.DataFrame({"n": [1]}, index=["a"])
    LOC(table, ["a"])
    key = id(table.index._data)
    assert key in maps._tables
    del table
    gc.collect()
    assert key not in maps._tables


def test_attrs_and_flags_follow_pandas():
    table = pd.DataFrame({"n": [1, 2]}, index=["a", "b"])
    table.attrs["source"] = {"nested": [1]}
    assert_same(LOC, table, ["b"])
    assert_same(REINDEX, table, ["b", "c"])
    result = REINDEX(table, ["b"])
    assert result.attrs == table.attrs and result.attrs["source"] is not table.attrs["source"]
    strict = pd.DataFrame({"n": [1, 2]}, index=["a", "b"]).set_flags(allows_duplicate_labels=False)
    assert_same(LOC, strict, ["a"])
    assert_same(LOC, strict, ["a", "a"])  # pandas raises DuplicateLabelError
    assert_same(REINDEX, strict, ["b", "b"])


def test_results_do_not_share_the_tables_memory():
    table = pd.DataFrame({"n": [1, 2], "s": ["x", "y"]}, index=["a", "b"])
    rows = LOC(table, ["a", "b"])
    rows.iloc[0, 0] = 10
    rows.columns.name = "renamed"
    assert table["n"].tolist() == [1, 2] and table.columns.name is None


def test_concurrent_lookups():
    tables = [pd.DataFrame({"n": np.arange(50) * t}, index=[f"k{i}" for i in range(50)]) for t in range(8)]
    failures = []

    def work(table):
        for i in range(200):
            keys = [f"k{i % 50}", f"k{(i * 7) % 50}"]
            if LOC(table, keys)["n"].tolist() != table.loc[keys, "n"].tolist():
                failures.append(keys)

    in_threads(work, tables)
    assert not failures


# --- text in every storage pandas keeps it in (pyarrow's in the test pass with pyarrow installed) ----

STORED_STRS = ["a", "b", "é", "🙂", "", "a\u0301", "\x00", "日本語"]
COMPILED_STORAGES = {"str, Python", "str, pyarrow", "str, pyarrow, chunked", "str, pyarrow, sliced"}
TEXT_STORAGES = [name for name in (*STORAGES, *ARROW_STORAGES) if pa is not None or name in STORAGES]
A_STORAGE = st.sampled_from([s for s in TEXT_STORAGES if s in COMPILED_STORAGES]) | st.sampled_from(TEXT_STORAGES)


@st.composite
def stored_case(draw):
    """(a table indexed by text, keys, whether its lookups are expected compiled): the index, the
    text columns and the keys each held in a storage of their own (Python, pyarrow; one chunk or
    several, a slice of an array), missing labels and keys (NaN and None), non-ASCII ones."""
    labels = draw(st.lists(st.sampled_from(STORED_STRS) | st.none(), min_size=1, max_size=8, unique=True))
    index_storage = draw(A_STORAGE.filter(lambda s: s != "object"))
    index = pd.Index(stored(index_storage, labels).array, name=draw(st.sampled_from([None, "key"])))
    storages = {f"c{i}": s for i, s in enumerate(draw(st.lists(A_STORAGE, min_size=1, max_size=3)))}
    texts = st.lists(st.sampled_from(STORED_STRS) | st.none(), min_size=len(labels), max_size=len(labels))
    columns = {name: stored(storage, draw(texts)).array for name, storage in storages.items()}
    table = pd.DataFrame({**columns, "n": np.arange(len(labels))}, index=index)
    if draw(st.booleans()):
        table = table[draw(st.sampled_from(list(table.columns)))]
    selected = table.columns if type(table) is pd.DataFrame else [table.name]
    known = [k for k in labels if k is not None]
    keys = draw(st.lists(st.sampled_from(known or STORED_STRS) | st.sampled_from(STORED_STRS) | st.none(),
                         max_size=draw(st.sampled_from([5, 30]))))  # (more than 16: found in numba)
    container = draw(st.sampled_from(["list", "index", "series"]))
    compiled = index_storage in COMPILED_STORAGES and bool(known) and all(
        storages.get(c, "object") in COMPILED_STORAGES | {"object"} for c in selected)  # ("n": int64)
    compiled &= container != "list" or None not in keys  # (a list of strs and None: keys of two kinds)
    if container != "list" and keys:
        key_storage = draw(A_STORAGE)
        keys = stored(key_storage, keys)
        if container == "index":
            keys = pd.Index(keys.array)
        compiled &= key_storage in COMPILED_STORAGES or (key_storage == "object" and None not in keys.tolist())
    return table, keys, compiled


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(stored_case())
def test_lookups_of_text_in_any_storage_match_pandas(case):
    table, keys, compiled = case
    for optimized, compiled_here in ((LOC, compiled and found_all(table, keys)), (REINDEX, compiled)):
        before = calls(optimized)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(optimized, table, keys)
        done, done_compiled = (a - b for a, b in zip(calls(optimized), before))
        assert done == 1
        if compiled_here:
            assert done_compiled == 1, status(optimized)


@pytest.mark.parametrize("function", [by_loc, by_reindex])
def test_text_keys_pyarrow_cannot_hold_run_as_written(function):
    """A lone surrogate in the keys: where pandas keeps text in pyarrow it raises (pyarrow holds
    UTF-8), so the call runs as written; elsewhere pandas looks it up, and so does the compiled call."""
    optimized = willump.optimize(function)
    table = pd.DataFrame({"n": [1, 2]}, index=pd.Index(["a", "\ud800"], dtype=object))
    for keys in (["\ud800"], np.array(["\ud800", "a"], dtype=object)):
        assert_same(optimized, table, keys)
    arrow = pd.StringDtype(na_value=np.nan).storage == "pyarrow"
    assert calls(optimized) == ((2, 0) if arrow else (2, 2))
