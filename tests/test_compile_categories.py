"""``series.astype("category")`` and ``astype(CategoricalDtype(...))`` give pandas' own Series (codes and
their dtype, categories and their dtype, ordered, index, name), on the first call of a set of values and
on later ones, which look the codes up: property-tested against pandas, then end to end."""

import ast
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import willump
from willump.compile.categories import CompiledAstypeCategory, CompiledCut, CompiledFrameAstype, may_cast_to_categories
from willump.compile.forms import Unsupported

from test_compile_frames import assert_same_frame

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
WORDS = ["a", "b", "B", "ab", "é", "", " ", "10", "9", "\U0001f600", "\ud800"]
INTS = [0, 1, 5, 9, 10, 100, 255]
STR_DTYPES = [object, "str", "string", pd.StringDtype("python")]
INT_DTYPES = [np.int64, np.int32, np.uint8]


@st.composite
def casts(draw):
    """(Series, dtype): str or int values (missing ones among strs), any index and name, cast to
    "category", a CategoricalDtype without categories, or with categories of either kind."""
    kind = draw(st.sampled_from(["str", "int"]))
    pool = WORDS if kind == "str" else INTS
    rows = draw(st.integers(0, 8))
    values = draw(st.lists(st.sampled_from(pool + ([None, np.nan] if kind == "str" else [])), min_size=rows,
                           max_size=rows))
    dtype = draw(st.sampled_from(STR_DTYPES if kind == "str" else INT_DTYPES))
    index = draw(st.sampled_from([None, list(range(10, 10 + rows)), [f"r{i % 3}" for i in range(rows)]]))
    try:
        series = pd.Series(values, dtype=dtype, index=index, name=draw(st.sampled_from([None, "city", 3])))
    except UnicodeEncodeError:  # (pyarrow holds no lone surrogate)
        series = pd.Series([v for v in values if v != "\ud800"] or [], dtype=object)
    target = draw(st.sampled_from(["category", "inferred", "given"]))
    if target == "category":
        return series, "category"
    ordered = draw(st.booleans())
    if target == "inferred":
        return series, pd.CategoricalDtype(ordered=ordered)
    categories_kind = draw(st.sampled_from([kind, "str" if kind == "int" else "int"]))
    categories_pool = WORDS[:-1] if categories_kind == "str" else INTS
    categories = draw(st.lists(st.sampled_from(categories_pool), min_size=1, max_size=6, unique=True))
    categories_dtype = draw(st.sampled_from(STR_DTYPES if categories_kind == "str" else INT_DTYPES))
    return series, pd.CategoricalDtype(pd.Index(categories, dtype=categories_dtype), ordered=ordered)


def _pandas(series, dtype):
    try:
        return series.astype(dtype), None
    except Exception as error:  # noqa: BLE001 (whatever pandas raises, the kernel must not answer)
        return None, error


def assert_same_series(ours: pd.Series, theirs: pd.Series):
    pd.testing.assert_series_equal(ours, theirs, check_exact=True, check_categorical=True)
    assert ours.dtype == theirs.dtype and ours.cat.ordered == theirs.cat.ordered
    assert ours.cat.categories.dtype == theirs.cat.categories.dtype
    assert ours.cat.categories.tolist() == theirs.cat.categories.tolist()
    assert ours.values.codes.dtype == theirs.values.codes.dtype
    assert np.array_equal(ours.values.codes, theirs.values.codes)
    assert ours.index.equals(theirs.index) and type(ours.index) is type(theirs.index)
    assert ours.name == theirs.name and ours.flags.allows_duplicate_labels and not ours.attrs


def assert_same_index_object(ours: pd.Series, theirs: pd.Series, given: pd.Series):
    """The given Series' index itself where pandas gives it (cut), a view of it where pandas does (astype)."""
    assert (ours.index is given.index) == (theirs.index is given.index)
    assert np.shares_memory(np.asarray(ours.index), np.asarray(given.index)) == np.shares_memory(
        np.asarray(theirs.index), np.asarray(given.index))


@SETTINGS
@given(casts(), st.integers(0, 2))
def test_a_categorical_cast_is_pandas_own_on_first_and_later_calls(cast, repeat):
    series, dtype = cast
    kernel = CompiledAstypeCategory()
    expected, error = _pandas(series, dtype)
    for _ in range(2 + repeat):  # (the first call of a set of values, then those looking codes up)
        try:
            answer = kernel(series, dtype)
        except Unsupported:
            answer = None
        except Exception as raised:  # noqa: BLE001
            assert error is not None and type(raised) is type(error)
            continue
        if answer is None:
            assert not _compiled_kind(series, dtype), "a str or int cast ran as written"
            continue
        assert error is None, f"pandas raises {error!r}"
        assert_same_series(answer, expected)
        assert_same_index_object(answer, expected, series)


def _compiled_kind(series: pd.Series, dtype) -> bool:
    """Whether the cast is one the kernel answers: values of rows, categories of the values' kind."""
    values = [v for v in series.tolist() if isinstance(v, (str, int))]
    if not len(series) or not values or (series.dtype == object and "\ud800" in values):
        return False
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories is not None:
        kinds = dtype.categories.dtype.kind in "iu" if isinstance(values[0], int) else dtype.categories.dtype.kind not in "iu"
        return kinds and set(values) <= set(dtype.categories.tolist())  # (others: pandas warns)
    return True


def test_other_casts_and_series_run_as_written():
    kernel = CompiledAstypeCategory()
    words = pd.Series(["a", "b"])
    assert kernel(words, "category").tolist() == ["a", "b"]
    for series, dtype, options in [
        (pd.Series([1.5, 2.0]), "category", {}),  # floats
        (pd.Series(["a", 1], dtype=object), "category", {}),  # values of two kinds
        (pd.Series([None, np.nan], dtype=object), "category", {}),  # only missing values
        (words, "float64", {}), (words, "category", {"errors": "raise"}),
        (pd.Series(["a"] * 3000), "category", {}),  # more rows than the dict is faster for
        (words.set_flags(allows_duplicate_labels=False), "category", {}),
    ]:
        with pytest.raises(Unsupported):
            kernel(series, dtype, **options)
    with_attrs = words.copy()
    with_attrs.attrs["source"] = "crm"
    with pytest.raises(Unsupported):
        kernel(with_attrs, "category")


@st.composite
def frame_casts(draw):
    """(frame, dtype): text, int and float columns, cast to "category", a CategoricalDtype or a dict
    of some columns' dtypes (categorical, numeric or None)."""
    rows = draw(st.integers(1, 6))
    columns = {}
    for name in draw(st.lists(st.sampled_from(["city", "plan", "score", "device"]), min_size=1, max_size=4,
                              unique=True)):
        pool = {"city": WORDS[:-1] + [None], "plan": INTS, "score": [0.5, 2.0, np.nan],
                "device": ["ios", "web"]}[name]
        columns[name] = draw(st.lists(st.sampled_from(pool), min_size=rows, max_size=rows))
    frame = pd.DataFrame(columns, index=draw(st.sampled_from([None, list(range(5, 5 + rows))])))
    if "device" in frame and draw(st.booleans()):
        frame["device"] = frame["device"].astype(object)
    kind = draw(st.sampled_from(["category", "dtype", "dict"]))
    if kind == "category":
        return frame, "category"
    if kind == "dtype":
        return frame, pd.CategoricalDtype(ordered=draw(st.booleans()))
    casts = {}
    for name in draw(st.lists(st.sampled_from(list(frame)), min_size=1, unique=True)):
        casts[name] = draw(st.sampled_from(["category", None, "float64", pd.CategoricalDtype(), "str"]))
    return frame, casts


@SETTINGS
@given(frame_casts())
def test_a_frames_categorical_cast_is_pandas_own(cast):
    frame, dtype = cast
    expected, error = _pandas(frame, dtype)
    kernel = CompiledFrameAstype()
    for _ in range(2):
        try:
            answer = kernel(frame, dtype)
        except Unsupported:
            continue
        except Exception as raised:  # noqa: BLE001 (pandas' own cast of a column raising: the call runs as written)
            assert error is not None and type(raised) is type(error)
            continue
        assert error is None, f"pandas raises {error!r}"
        assert_same_frame(answer, expected)
        for name in answer:
            assert answer[name].dtype == expected[name].dtype


EDGES = [[0, 16, 32, 64, 200], [0.0, 16.5, 80.0], [-0.0, 1, 2.5], [0, 0, 10, 20], [-np.inf, 0, np.inf], [5, 1],
         (0, 10), [2**53, 2**53 + 1, 2**60], [0, 2**62 + 1, 2**64 - 1]]  # (the last: uint64 edges)


@st.composite
def cuts(draw):
    """(Series, pd.cut's keyword arguments): float64 or int64 values at, between and beyond the edges."""
    edges = draw(st.sampled_from(EDGES))
    if draw(st.booleans()):
        whole = np.uint64 if max(edges) >= 2**63 else np.int64
        edges = np.array(edges, dtype=draw(st.sampled_from([np.float64, whole] if all(
            type(e) is int for e in edges) else [np.float64])))
    pool = [-1.0, 0.0, 0.5, 16.0, 16.5, 31.9, 64.0, 200.0, 1e9, 2.0**53 + 1, np.inf, 2**62 + 2, 2**62 + 1]
    kind = draw(st.sampled_from([np.float64, np.int64]))
    values = draw(st.lists(st.sampled_from(pool + ([np.nan] if kind is np.float64 else [])), min_size=1, max_size=8))
    if kind is np.int64:
        values = [int(v) for v in values if np.isfinite(v)] or [0]
        kind = draw(st.sampled_from([np.int64, np.int64, np.int32, np.uint8, np.int16]))  # (series.dt.hour: int32)
        values = [v for v in values if np.iinfo(kind).min <= v <= np.iinfo(kind).max] or [0]
    else:
        values = [float(v) for v in values]
        kind = draw(st.sampled_from([np.float64, np.float64, np.float32]))
    series = pd.Series(values, dtype=kind, name=draw(st.sampled_from([None, "Age"])),
                       index=draw(st.sampled_from([None, "shifted"])) and pd.RangeIndex(len(values)) * 2 + 3)
    intervals = max(len(edges) - 1, 1)
    labels = draw(st.sampled_from([None, False, "str", "int", "float", "repeated"]))
    labels = {"str": [f"band{i}" for i in range(intervals)], "int": list(range(intervals)),
              "float": [i + 0.5 for i in range(intervals)], "repeated": ["a"] * intervals}.get(labels, labels)
    options = dict(bins=edges, labels=labels, right=draw(st.booleans()), include_lowest=draw(st.booleans()),
                   duplicates=draw(st.sampled_from(["raise", "drop"])), precision=draw(st.sampled_from([3, 1])))
    if labels not in (None, False):
        options["ordered"] = draw(st.booleans())
    return series, options


@SETTINGS
@given(cuts())
def test_a_cut_is_pandas_own_on_first_and_later_calls(cut):
    series, options = cut
    kernel = CompiledCut()
    try:
        expected, error = pd.cut(series, **options), None
    except Exception as raised:  # noqa: BLE001
        expected, error = None, raised
    answered = 0
    for _ in range(2):
        try:
            answer = kernel(series, **options)
        except Unsupported:
            continue
        except Exception as raised:  # noqa: BLE001 (pandas' own first call raising: the call runs as written)
            assert error is not None and type(raised) is type(error)
            continue
        assert error is None
        answered += 1
        assert_same_index_object(answer, expected, series)
        if isinstance(expected.dtype, pd.CategoricalDtype):
            assert_same_series(answer, expected)
        else:
            pd.testing.assert_series_equal(answer, expected, check_exact=True, check_index_type=True)
            assert answer.to_numpy().tobytes() == expected.to_numpy().tobytes()
    assert answered == 2 or error is not None or options["labels"] == ["a"] * (len(options["bins"]) - 1)


def test_cuts_the_kernel_does_not_take_run_as_written():
    kernel, ages = CompiledCut(), pd.Series([1.0, 20.0])
    for args, options in [((ages, 3), {}), ((ages, [0, 10, 30]), {"retbins": True}), ((ages.astype("Float64"), [0, 30]), {}),
                          ((ages.to_numpy(), [0, 30]), {}), ((ages, [0, np.float32(30)]), {}),
                          ((ages, pd.IntervalIndex.from_breaks([0, 30])), {}), ((ages,), {})]:
        with pytest.raises(Unsupported):
            kernel(*args, **options)


def test_each_answer_has_categories_of_its_own():
    """pandas builds a dtype per call: naming one answer's categories leaves the next answers' alone."""
    kernel, cut = CompiledAstypeCategory(), CompiledCut()
    words, ages = pd.Series(["b", "a"]), pd.Series([3.0, 40.0])
    for make in (lambda: kernel(words, "category"), lambda: cut(ages, [0, 18, 99], labels=["young", "old"])):
        first = make()
        first.cat.categories.name = "mine"
        assert make().cat.categories.name is None and make().cat.categories.name is None


def test_pandas_text_options_are_part_of_what_is_kept():
    kernel, words = CompiledAstypeCategory(), pd.Series(["b", "a"], dtype=object)
    kernel(words, "category")
    for _ in range(2):
        with pd.option_context("future.infer_string", False):
            assert_same_series(kernel(words, "category"), words.astype("category"))
    assert kernel(words, "category").cat.categories.dtype == words.astype("category").cat.categories.dtype


def test_what_is_kept_stays_small():
    """Only sets of a few distinct values keep their dtype; a given dtype is never kept (its Index keeps
    its own hash table): a function building one per call, or of id-like values, keeps nothing."""
    kernel = CompiledAstypeCategory()
    ids = pd.Series([f"id{i}" for i in range(200)])
    assert_same_series(kernel(ids, "category"), ids.astype("category"))
    zips = pd.CategoricalDtype([f"{i:05d}" for i in range(50_000)])
    one = pd.Series(["00042"])
    assert_same_series(kernel(one, zips), one.astype(zips))
    assert kernel.__dict__ == {"_inferred": {}}


def test_a_frames_missing_dtypes_leave_columns_as_they_are():
    frame = pd.DataFrame({"a": ["x", "y"], "b": [1, 2], "c": [0.5, 1.5]})
    for missing in (np.float64("nan"), np.float32("nan"), None, float("nan")):
        casts = {"a": "category", "b": missing, "c": missing}
        assert_same_frame(CompiledFrameAstype()(frame, casts), frame.astype(casts))
    for casts in ({"a": "category", "c": "float32"}, {"a": "category", "c": "category"}):  # (floats: refused first)
        kernel = CompiledFrameAstype()
        with pytest.raises(Unsupported):
            kernel(frame, casts)


CITY = pd.CategoricalDtype(["lima", "oslo", "paris", "rome"])
CATEGORICAL = ["device", "plan"]


def cast(frame):
    X = frame.copy()
    X[["segment", "tier"]] = X[["segment", "tier"]].astype("category")
    for column in CATEGORICAL:  # (a loop: each cast a call site)
        X[column] = X[column].astype("category")
    X["city"] = X["city"].astype(CITY)
    X["age_band"] = pd.cut(X["age"], [0, 18, 35, 60, 120], labels=["child", "young", "adult", "senior"])
    return X


def test_notebook_casts_in_and_outside_loops_are_compiled_to_pandas_own_frames():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"device": rng.choice(["ios", "web", None], 50), "plan": rng.choice([3, 5, 8], 50),
                          "city": rng.choice(["paris", "rome", "oslo"], 50), "segment": rng.choice(["a", "b"], 50),
                          "tier": rng.choice([1, 2], 50), "age": rng.uniform(0, 100, 50)})
    optimized = willump.optimize(cast)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        for rows in (frame, frame.iloc[[3]], frame.iloc[[4]], frame.iloc[[3]], frame.iloc[10:14]):
            pd.testing.assert_frame_equal(optimized(rows), cast(rows), check_exact=True, check_categorical=True)
    table = optimized.explain_compilation()
    casts = table[table.call.str.contains(r"\.astype\(") & ~table.call.str.contains("=")]
    assert len(casts) == 3 and (casts.status == "compiled").all() and casts.compiled_calls.tolist() == [5, 10, 5]
    unseen = frame.iloc[[0]].assign(city="berlin")  # (not a category: pandas warns, and so does the call as written)
    for function in (optimized, cast):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            answer = function(unseen)
        assert answer["city"].isna().all()
        assert [type(w.message) for w in caught if "categories is deprecated" in str(w.message)] == [pd.errors.Pandas4Warning]


TRAINED_DTYPES = {"device": pd.CategoricalDtype(["ios", "web"]), "plan": "category"}


def cast_by_trained_dtypes(frame):
    X = frame.astype(TRAINED_DTYPES)  # (the dict the model was trained with, held in a name)
    return X


def test_a_frame_cast_by_a_dict_held_in_a_name_is_pandas_own():
    """``frame.astype(dtypes)`` reads as an element-wise cast (the name may hold a dtype): of a frame it is
    ``DataFrame.astype``'s kernel's (it ran as written); a dtype no kernel takes runs as written."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"device": rng.choice(["ios", "web", None], 40), "plan": rng.choice([3, 5], 40),
                          "age": rng.uniform(0, 99, 40)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)  # (no model: the function runs as written)
        optimized = willump.optimize(cast_by_trained_dtypes)
    for rows in (frame, frame.iloc[[3]], frame.iloc[5:9]):
        pd.testing.assert_frame_equal(optimized(rows), cast_by_trained_dtypes(rows), check_exact=True,
                                      check_categorical=True)
    row = optimized.explain_compilation().iloc[0]
    assert (row.call, row.operator, row.status) == ("frame.astype(TRAINED_DTYPES)", "element-wise expression (.astype)",
                                                    "compiled")
    assert row.compiled_calls == 3
    empty = frame.iloc[:0]  # (no values to infer "plan"'s categories from: as written)
    pd.testing.assert_frame_equal(optimized(empty), cast_by_trained_dtypes(empty), check_exact=True)


@pytest.mark.parametrize("call, may", [
    ('s.astype("category")', True), ("s.astype(CITY)", True), ("s.astype(cfg.city)", True),
    ("s.astype(pd.CategoricalDtype(['a']))", True), ('s.astype({"a": "category", "b": float})', True),
    ("s.astype(dtype=CITY)", True), ('s.astype("float32")', False), ("s.astype(int)", False),
    ("s.astype(np.float32)", False), ('s.astype({"a": float, "b": "int8"})', False), ("s.astype()", False),
])
def test_only_casts_that_may_be_to_categories_are_call_sites(call, may):
    """Other casts stay plain calls: a call site's cost is not paid for casts no kernel here answers."""
    assert may_cast_to_categories(ast.parse(call, mode="eval").body) is may
