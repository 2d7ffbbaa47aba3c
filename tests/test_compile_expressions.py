"""Element-wise expressions over pandas columns (``willump.compile.expressions``) give pandas' answer:
values to the bit, dtype, index object, name, warnings and exceptions. The kernel must have answered
whenever every Series is int64 or float64 with equal indexes and the other values are plain numbers.
"""

import itertools
import re
import traceback
import types
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.linear_model import LogisticRegression

import willump
from test_compile_kernels import hypothesis_settings
from answers import define
from willump.compile import expressions

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

EXPRESSION = "element-wise expression"


class Identity:
    def predict(self, X):
        return X


IDENTITY = Identity()
_numbering = itertools.count()


def pipeline_of(expression: str, **namespace):
    """``value = <expression>`` in a pipeline as a user writes it, compiled from source kept in linecache."""
    source = f"def pipeline(a, b, frame, n, m):\n    value = {expression}\n    return IDENTITY.predict(value)\n"
    namespace = {"np": np, "numpy": np, "IDENTITY": IDENTITY, **namespace}
    return define(source, namespace, f"<expression pipeline {next(_numbering)}>")


def run(function, arguments) -> tuple:
    """((kind, value or exception), [(category, message) of each warning])."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = "value", function(*arguments)
        except Exception as error:  # noqa: BLE001 - compared with the original's
            result = "raised", error
    return result, [(w.category, str(w.message)) for w in caught if not issubclass(w.category, willump.WillumpWarning)]


def assert_same(optimized, arguments) -> bool:
    """The optimized function answers as the original, warnings included; whether it raised."""
    (kind, value), warned = run(optimized, arguments)
    (expected_kind, expected), expected_warned = run(optimized.py_func, arguments)
    assert warned == expected_warned
    assert kind == expected_kind, (value, expected)
    if kind == "raised":
        assert type(value) is type(expected) and str(value) == str(expected)
        return True
    assert type(value) is type(expected)
    if isinstance(expected, pd.Series):
        pd.testing.assert_series_equal(value, expected, check_exact=True, check_index_type=True)
        if expected.dtype != object:  # -0.0, NaN payloads
            assert value.to_numpy().tobytes() == expected.to_numpy().tobytes()
        assert type(value.name) is type(expected.name)
        assert value.attrs == expected.attrs and value.flags == expected.flags
        for argument in arguments:  # the index object pandas gives: the left operand's, or a view of it
            if isinstance(argument, (pd.Series, pd.DataFrame)):
                assert (value.index is argument.index) == (expected.index is argument.index)
                assert value.index.is_(argument.index) == expected.index.is_(argument.index)
    elif isinstance(expected, np.ndarray):
        np.testing.assert_array_equal(value, expected, strict=True)
    elif isinstance(expected, pd.DataFrame):  # frame[names].fillna(...), or a DataFrame where a Series was expected
        pd.testing.assert_frame_equal(value, expected, check_exact=True)
        assert [(b.dtype, list(b.mgr_locs.as_array)) for b in value._mgr.blocks] == [
            (b.dtype, list(b.mgr_locs.as_array)) for b in expected._mgr.blocks]
        for argument in arguments:
            if isinstance(argument, pd.DataFrame):
                assert (value.index is argument.index) == (expected.index is argument.index)
                assert value.index.is_(argument.index) == expected.index.is_(argument.index)
    else:
        assert value == expected or (value != value and expected != expected)
    return False


def expression_calls(optimized) -> tuple:
    """(calls, compiled calls) of the element-wise expression sites."""
    table = optimized.explain_compilation()
    table = table[table["operator"].str.startswith(EXPRESSION, na=False)]
    return table["calls"].sum(), table["compiled_calls"].sum()


def status(optimized) -> str:
    table = optimized.explain_compilation()
    return "; ".join(table[table["operator"].str.startswith(EXPRESSION, na=False)]["status"])


# --- random expressions over random columns -------------------------------------------------

SERIES_LEAVES = ["a", "b", 'frame["x"]', 'frame["y"]', "frame.x", "frame.y"]
LEAVES = SERIES_LEAVES * 3 + ["n", "m", "2", "0.5", "3", "0", "1e-3"]
INT64 = [0, 1, -1, 2, 7, -13, 1000, 2**53 + 1, 2**62, -(2**63), 2**63 - 1]
FLOAT64 = [0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -3.75, 1e-300, 5e-324, 1e308, -1e308, np.nan, np.inf, -np.inf]
NAMES = [None, "a", "b", 0, 1.0, np.nan]


@st.composite
def expression(draw, depth: int, common: bool, root: bool = False):
    """(source, whether it reads a Series). ``common``: no numpy function of numbers only (it may warn,
    and the kernel then leaves it to the code as written), no fractional power of numbers (complex)."""
    if not root and (depth == 0 or draw(st.integers(0, 3)) == 0):
        leaf = draw(st.sampled_from(LEAVES))
        return leaf, leaf in SERIES_LEAVES
    kind = draw(st.sampled_from(["binary", "binary", "unary", "ufunc", "ufunc", "power"]))
    operand, series = draw(expression(max(depth - 1, 0), common))
    if kind == "binary":
        right, right_series = draw(expression(max(depth - 1, 0), common))
        return f"({operand} {draw(st.sampled_from('+-*/'))} {right})", series or right_series
    if kind == "power":
        exponents = [2, 3, 0.5, 1.5, 0] if series or not common else [2]
        return f"({operand} ** {draw(st.sampled_from(exponents))})", series
    if kind == "unary" or (common and not series):
        return f"({draw(st.sampled_from('-+'))}{operand})", series
    module = draw(st.sampled_from(["np", "numpy"]))
    return f"{module}.{draw(st.sampled_from(sorted(expressions.UFUNCS)))}({operand})", series


POOLS = {
    "int64": INT64, "float64": FLOAT64, "int32": [0, 1, -5, 100], "uint8": [0, 1, 200], "float32": [0.5, -1.0, np.nan],
    "bool": [True, False], "object": [1, 2.5, "s"],
}


@st.composite
def column(draw, rows, index, dtypes, names):
    dtype = draw(st.sampled_from(dtypes))
    values = draw(st.lists(st.sampled_from(POOLS[dtype]), min_size=rows, max_size=rows))
    return pd.Series(values, index=index, dtype=dtype if dtype != "object" else object, name=draw(st.sampled_from(names)))


@st.composite
def case(draw):
    """(expression, arguments, whether the kernel must answer when the original does not raise)."""
    common = draw(st.integers(0, 3)) > 0
    source, series = draw(expression(3, common, root=True))
    rows = draw(st.integers(1, 4)) if draw(st.integers(0, 7)) else 0
    labels = list(range(rows)) if draw(st.booleans()) else draw(st.lists(st.integers(-2, 5), min_size=rows, max_size=rows))
    mode = draw(st.sampled_from(["shared", "equal", "different"]))  # different: pandas aligns, if they meet
    builders = [lambda: pd.Index(labels, dtype="int64"), lambda: pd.Index(labels, dtype="float64")]
    if labels == list(range(rows)):
        builders.append(lambda: pd.RangeIndex(rows))
    shared = draw(st.sampled_from(builders))()

    def index(different=False):
        if different or (mode == "different" and draw(st.booleans())):
            return pd.Index(draw(st.permutations(labels)) if draw(st.booleans()) else [label + 1 for label in labels])
        return shared if mode == "shared" else draw(st.sampled_from(builders))()

    dtypes = ["int64", "float64", "int32"] + ([] if common else ["uint8", "float32", "bool", "object"])
    names = NAMES + ([] if common else [("t", 1), True])
    a = draw(column(rows, index(different=mode == "different"), dtypes, names))
    b = draw(column(rows, index(), dtypes, names))
    x, y = draw(column(rows, None, dtypes, names)), draw(column(rows, None, dtypes, names))
    frame = pd.DataFrame({"x": x.to_numpy(), "y": y.to_numpy()}, index=index())
    numbers = st.integers(-100, 100) | st.sampled_from([0.5, -2.25, 0.0, np.nan, np.inf])
    if not common:
        numbers = numbers | st.sampled_from([2**70, -(2**64), np.float64(1e308), np.int64(-7), np.float32(1.5), True, "x", None])
        if not draw(st.integers(0, 3)):
            a.attrs["source"] = "test"
        if not draw(st.integers(0, 3)):
            a = frame  # a DataFrame where a Series is expected
    n, m = draw(numbers), draw(numbers)
    return source, (a, b, frame, n, m), common and series and mode != "different"


@hypothesis_settings(max_examples=300)
@given(case())
def test_expressions_match_pandas(case):
    source, arguments, answered = case
    note(source)
    optimized = willump.optimize(pipeline_of(source))
    raised = assert_same(optimized, arguments)
    calls, compiled = expression_calls(optimized)
    assert calls == (1 if re.search(r"\b(a|b|frame|n|m)\b", source) else 0)  # numbers only: not rewritten
    if answered and not raised:
        assert compiled == 1, status(optimized)


@pytest.mark.parametrize("name", sorted(expressions.UFUNCS))
def test_each_ufunc_warns_as_pandas(name):
    """Every value of the pools through each ufunc, alone and after quiet arithmetic."""
    optimized = willump.optimize(pipeline_of(f"np.{name}(a) - np.{name}(frame['y'] * 2) / b"))
    a = pd.Series(INT64 + [3] * (len(FLOAT64) - len(INT64)), name="a")
    b = pd.Series(FLOAT64[::-1], name="a", index=pd.Index(range(len(FLOAT64))))
    frame = pd.DataFrame({"y": FLOAT64})
    for arguments in [(a, b, frame, None, None), (b, a, frame, None, None), (a[:1], b[:1], frame[:1], None, None)]:
        assert not assert_same(optimized, arguments)
    assert expression_calls(optimized) == (3, 3), status(optimized)


def with_attrs(series):
    series = series.copy()
    series.attrs["unit"] = "s"
    return series


FLOATS = pd.Series([1.5, -2.0, 0.0], name="f")
BOOLS = pd.Series([True, False, True])
FRAME = pd.DataFrame({"x": [1, 2, 3], "y": [0.5, np.nan, -1.0]})
FALLBACKS = [  # (expression, a, b, frame, n, why the kernel refuses)
    ("a + b", FLOATS, FLOATS.set_axis([1, 2, 3]), None, None, "different indexes"),
    ("a * 2", with_attrs(FLOATS), None, None, None, "attrs"),
    ("a / b", BOOLS, BOOLS, None, None, "dtype bool"),
    ("-a", FLOATS.astype("Float64"), None, None, None, "dtype Float64"),
    ("a + 1", FLOATS.rename(("t", 1)), None, None, None, "a name of type tuple"),
    ("a + 1", FRAME, None, None, None, "a value of type DataFrame"),
    ("frame['x'] + 1", None, None, FRAME.set_axis(["x", "x"], axis=1), None, "several columns"),
    ("frame['z'] + 1", None, None, FRAME, None, "no column 'z'"),
    ("frame['x'] + 1", None, None, FRAME.set_axis(pd.MultiIndex.from_tuples([("x", 1), ("y", 2)]), axis=1), None,
     "MultiIndex"),
    ("frame['x'] + 1", None, None, {"x": FLOATS}, None, "no Series"),
    ("a + n", FLOATS, None, None, 2**70, "the number"),
    ("a + n", FLOATS, None, None, True, "type bool"),
    ("a + n", FLOATS, None, None, "s", "type str"),
    ("a + np.log(n)", FLOATS, None, None, 0, "FloatingPointError"),
    ("a + n / 0", FLOATS, None, None, 1, "ZeroDivisionError"),
]


@pytest.mark.parametrize("source, a, b, frame, n, reason", FALLBACKS, ids=[row[-1] for row in FALLBACKS])
def test_what_pandas_does_otherwise_runs_as_written(source, a, b, frame, n, reason):
    optimized = willump.optimize(pipeline_of(source))
    assert_same(optimized, (a, b, frame, n, None))
    assert reason in status(optimized)
    assert expression_calls(optimized) == (1, 0)


HOURS = pd.Series([0, 5, 6, 23], dtype="int32", name="hour")  # (what series.dt.hour gives)
SMALL_INTS = [  # (expression, a, n, compiled)
    ("np.where(a < 6, 1, 0)", HOURS, None, True),
    ("(a >= 22) | (a < 6)", HOURS, None, True),  # (each comparison: | is pandas')
    ("a * 60 + n", HOURS, 30, True),
    ("a / 24 - a * 0.5", HOURS.astype("uint8"), None, True),
    ("np.sin(a) + 1", HOURS.astype("uint8"), None, False),  # (float16: not compiled)
    ("a + n", HOURS, 2**40, False),  # numpy raises OverflowError: out of int32
    ("a - n", HOURS.astype("uint16"), -1, False),
    ("a + n", HOURS.astype("int8"), 127, True),  # wraps, as numpy adds int8
    ("a.astype('uint8')", HOURS.iloc[:0].astype("int64"), None, True),  # (no rows: nothing out of range)
]


BETWEENS = [  # (expression, a, n, compiled): Series.between's two comparisons, and-ed
    ("a.between(13, 19)", pd.Series([12.0, 13.0, np.nan, 19.0, 19.5, -0.0], name="Age"), None, True),
    ("a.between(n, 5, inclusive='left')", HOURS, 0, True),
    ("a.between(0, n, inclusive='neither').astype(int)", HOURS, np.int64(6), True),
    ("frame['y'].between(n, 0.5, inclusive='right')", None, np.float64(-1.0), True),
    ("a.between(5, 0)", HOURS, None, True),  # (reversed: nothing between)
    ("a.between(n, 1.0)", pd.Series([0.0, 1.0]), np.nan, True),  # (a NaN bound: nothing between)
    ("a.between(0, n)", HOURS, 2**40, False),  # (numpy raises: out of int32)
    ("a.between(0, 5, inclusive='all')", HOURS, None, False),  # (pandas raises)
    ("a.between(0, 5)", BOOLS, None, False),
]


@pytest.mark.parametrize("source, a, n, compiled", SMALL_INTS + BETWEENS,
                         ids=[f"{row[0]} {i}" for i, row in enumerate(SMALL_INTS + BETWEENS)])
def test_small_int_series_and_between_answer_as_pandas(source, a, n, compiled):
    optimized = willump.optimize(pipeline_of(source))
    assert_same(optimized, (a, None, FRAME, n, None))
    calls, compiled_calls = expression_calls(optimized)
    assert compiled_calls == (calls if compiled else 0), status(optimized)


UFUNC_OF_CALLS = [  # (expression, a, n): a ufunc of a value another call site computes (not an expression of names)
    ("np.log1p(a.map(n).fillna(0))", pd.Series(["x", "y", "z"], name="ip"), {"x": 10, "y": 0}),
    ("np.log(a.map(n))", pd.Series(["x", "y", "z"]), {"x": 10.0, "y": -1.0, "z": 0.0}),  # (numpy warns, as written)
    ("np.sqrt(a.map(n))", pd.Series(["x", "y"], index=[5, 3]), {"x": 4, "y": 9}),
    ("np.expm1(a.map(n))", pd.Series(["x", "y"]), {"x": 800.0, "y": 1.0}),  # (overflow: numpy warns)
]


@pytest.mark.parametrize("source, a, n", UFUNC_OF_CALLS, ids=[row[0] for row in UFUNC_OF_CALLS])
def test_a_ufunc_of_another_call_answers_as_pandas(source, a, n):
    optimized = willump.optimize(pipeline_of(source))
    assert_same(optimized, (a, None, None, n, None))
    table = optimized.explain_compilation()
    ufunc = table[table.operator == f"numpy.{source[3:source.index('(')]}"]
    assert ufunc.status.tolist() == ["compiled"], table.to_string()


NUMPY_NUMBERS = [  # (expression, a, n, compiled): median(), mean() and max() give numpy's float64 and int64
    ("a.fillna(n).clip(0, 80).round().astype(int)", pd.Series([np.nan, 22.5, 90.0, -3.0]), np.float64(28.0), True),
    ("a.clip(upper=n)", pd.Series([1.0, 500.0, np.nan]), np.int64(300), True),
    ("a.clip(lower=n)", pd.Series([1, 500, 7]), np.float64(3.0), True),  # an int Series stays int
    ("a.clip(lower=n)", pd.Series([1, 500, 7]), np.float64(3.5), False),  # pandas makes it float
    ("a.fillna(n)", pd.Series([1, 2]), np.float64(0.5), True),  # (no NaN in ints: whatever the number)
    ("a.fillna(n).round().astype(int)", pd.Series([np.inf, 2.0]), np.float64(1.0), False),  # pandas raises
    ("a.round().astype(int)", pd.Series([1e15, -2.5, 0.5]), None, True),  # (to 0 decimals: numpy's rint, quiet)
    ("a.round(2)", pd.Series([1e308, 2.345]), None, True),  # (overflows to inf and warns, as pandas does)
    ("a.clip(0, n)", pd.Series([-1.0, 5.0, np.nan, 50.0]), np.float64("nan"), True),  # (a NaN bound is ignored)
    ("a.clip(upper=n)", pd.Series([-1.0, 5.0]), np.float64("nan"), False),  # (no bound: pandas gives the Series)
]


@pytest.mark.parametrize("source, a, n, compiled", NUMPY_NUMBERS, ids=[f"{row[0]} {i}" for i, row in enumerate(NUMPY_NUMBERS)])
def test_numpy_numbers_fill_and_clip_as_python_numbers(source, a, n, compiled):
    optimized = willump.optimize(pipeline_of(source))
    assert_same(optimized, (a, None, None, n, None))
    calls, compiled_calls = expression_calls(optimized)
    assert compiled_calls == (calls if compiled else 0), status(optimized)


class FrameOfOurs(pd.DataFrame):
    pass


class _ComputedModule(types.ModuleType):
    scale = property(lambda self: 5.0)


SETTINGS, COMPUTED_SETTINGS = types.ModuleType("settings"), _ComputedModule("computed")
SETTINGS.scale = COMPUTED_SETTINGS.__dict__["scale"] = 2.0  # (the latter's property hides it)


class Scaled:
    """A model's settings, as a user's class holds them."""

    reads = 0

    def __init__(self, computed=False, strict=False):
        if computed:
            self.__class__ = type("Computed", (Scaled,), {"scale": property(lambda self: self._read())})
        elif strict:
            self.__class__ = type("Strict", (Scaled,), {"__getattribute__": lambda self, name: object.__getattribute__(self, name)})
            self.scale = 2.0
        else:
            self.scale = 2.0

    def _read(self):
        Scaled.reads += 1
        return 2.0


def shadowed(frame, name, value):
    """``frame`` with an instance attribute ``name`` (pandas warns when code sets one)."""
    frame = frame.copy()
    object.__setattr__(frame, name, value)
    return frame


FRAME_XQ = FRAME.assign(q=[4.0, 5.0, 6.0])
ATTRIBUTE_READS = [  # (expression, a, frame, compiled: frame.<name> is frame[name])
    ("frame.x * 2 + frame.y", None, FRAME, True),
    ("np.log1p(frame.x).clip(upper=1)", None, FRAME.set_axis(pd.CategoricalIndex(["x", "y"]), axis=1), True),
    ("frame.x + 1", None, FRAME.set_axis(pd.Index(["x", "y"], dtype="str"), axis=1), True),
    ("frame.x + 1", None, FRAME.set_axis([0, 1], axis=1), False),  # no name pandas reads as an attribute: raises
    ("frame.z + 1", None, FRAME, False),  # AttributeError, where frame["z"] raises KeyError
    ("frame.q + 1", None, shadowed(FRAME_XQ, "q", 10), False),  # the instance's attribute, not the column
    ("frame.x + 1", None, FrameOfOurs(FRAME), False),  # a subclass may have its own attribute x
    ("frame.x + 1", None, FRAME.set_axis(["x", "x"], axis=1), False),  # several columns x
    ("frame.size * 2 + frame.x", None, FRAME.assign(size=[9, 9, 9]), False),  # DataFrame.size, never the column
    ("a.x + 1", pd.Series([1.5, 2.5], index=["x", "y"]), None, False),  # a Series' label: a number
    ("a.x + frame.y", types.SimpleNamespace(x=2.0), FRAME, True),  # an object's own attribute: read as Python reads it
    ("np.log1p(frame['x'] * 3 + frame['y']) * a.scale", Scaled(), FRAME, True),
    ("frame.x * a.scale", Scaled(computed=True), FRAME, False),  # a property: code runs (here it counts its reads)
    ("frame.x * a.scale", Scaled(strict=True), FRAME, False),  # its own __getattribute__
    ("frame.x * a.scale", types.ModuleType("settings"), FRAME, False),  # (no such attribute: AttributeError)
    ("frame.x * a.scale", SETTINGS, FRAME, True),  # a module's own attribute
    ("frame.x * a.scale", COMPUTED_SETTINGS, FRAME, False),  # a module of a class with a property of that name
]


@pytest.mark.parametrize("source, a, frame, compiled", ATTRIBUTE_READS, ids=[f"{row[0]} {i}" for i, row in enumerate(ATTRIBUTE_READS)])
def test_columns_read_as_attributes_answer_as_pandas(source, a, frame, compiled):
    """``frame.x`` is compiled as ``frame["x"]`` where pandas' ``__getattr__`` reads that column;
    everywhere else the expression runs as written (an attribute, or AttributeError)."""
    optimized = willump.optimize(pipeline_of(source))
    for _ in range(2):
        assert_same(optimized, (a, None, frame, None, None))
    calls, compiled_calls = expression_calls(optimized)
    assert compiled_calls == (calls if compiled else 0), status(optimized)


def test_an_accessor_registered_later_is_read_as_pandas_reads_it():
    """A DataFrame accessor registered after the function was optimized is an attribute, not the column."""
    optimized = willump.optimize(pipeline_of("frame.geo * 2"))
    frame = pd.DataFrame({"geo": [1.0, 2.0]})
    assert not assert_same(optimized, (None, None, frame, None, None))
    pd.api.extensions.register_dataframe_accessor("geo")(lambda frame: 21)
    try:
        assert_same(optimized, (None, None, frame, None, None))
        assert optimized.py_func(None, None, frame, None, None) == 42
    finally:
        del pd.DataFrame.geo
    assert expression_calls(optimized) == (2, 1), status(optimized)


@pytest.mark.parametrize("n", [np.uint64(3), np.float32(0.1), np.int8(-2), np.float64(2.5)], ids=repr)
def test_numpy_numbers_meet_a_series_as_python_numbers(n):
    """pandas makes them Python numbers first: int64 * uint64 stays int64."""
    optimized = willump.optimize(pipeline_of("a * n + np.abs(n)"))
    assert not assert_same(optimized, (pd.Series([1, -2, 3]), None, None, n, None))
    assert expression_calls(optimized) == (1, 1), status(optimized)


# --- the product benchmark's statistics --------------------------------------------------------


def product_statistics(messages):
    """The hand-made statistics of the product benchmark (benchmarks/workloads/product.py), in short."""
    text = messages["message"]
    length, digits = text.str.len(), text.str.count(r"[0-9]")
    statistics = pd.DataFrame({"log_length": np.log1p(length), "digit_ratio": digits / (length + 1)})
    return IDENTITY.predict(statistics)


@pytest.mark.parametrize("messages", [["Call 0800 123 now!"], ["", "WIN £100", "ok", "2 for 1 at www.x.com"]])
def test_product_statistics_are_compiled(messages):
    optimized = willump.optimize(product_statistics)
    frame = pd.DataFrame({"message": messages}, index=pd.RangeIndex(10, 10 + len(messages)))
    pd.testing.assert_frame_equal(optimized(frame), product_statistics(frame), check_exact=True)
    calls, compiled = expression_calls(optimized)
    assert calls == compiled == 3, status(optimized)  # (text.str.len() is one too; count of a regex is not)


def test_numbers_run_as_written():
    optimized = willump.optimize(pipeline_of("n + 1"))
    assert not assert_same(optimized, (None, None, None, 41, 0))
    assert optimized(None, None, None, 41, 0) == 42
    assert expression_calls(optimized) == (2, 0)
    assert "numbers and numpy arrays only" in status(optimized)


def test_numpy_arrays_run_as_written():
    optimized = willump.optimize(pipeline_of("np.log1p(a) * n"))
    for arguments in [(np.array([-2.0, 0.0, 3.0]), None, None, 2, None), (np.array([1, 2]), None, None, np.float64(0.5), None)]:
        assert not assert_same(optimized, arguments)
    assert expression_calls(optimized) == (2, 0)
    assert "numbers and numpy arrays only" in status(optimized)


def test_a_traceback_shows_the_users_line():
    optimized = willump.optimize(pipeline_of("np.log1p(a) + n"))
    a = pd.Series([1.0, 2.0])
    assert assert_same(optimized, (a, None, None, "x", None))  # a str: pandas raises TypeError
    try:
        optimized(a, None, None, "x", None)
    except TypeError as error:
        frames = traceback.extract_tb(error.__traceback__)
    filename = optimized.py_func.__code__.co_filename
    assert any(f.filename == filename and f.lineno == 2 and f.name == "<lambda>" for f in frames)


def repeated(frame, n):
    doubled = frame["x"].map(lambda value: value * 2)
    squares = [value * value for value in frame["x"]]
    total = 0
    for value in squares:
        total = total + value
    return IDENTITY.predict((doubled, squares, total, n))


def test_code_that_repeats_is_not_rewritten():
    optimized = willump.optimize(repeated)
    frame = pd.DataFrame({"x": [1.5, 2.0]})
    assert optimized(frame, 3)[1:] == repeated(frame, 3)[1:]
    assert expression_calls(optimized) == (0, 0)


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_ufuncs_keep_the_dtypes_compiled(dtype):
    values = np.array([-3, -1, 0, 1, 2, 1000], dtype=dtype)
    with np.errstate(all="ignore"):
        for name, ufunc in expressions.UFUNCS.items():
            assert ufunc(values).dtype in (np.int64, np.float64), name


def test_numpy_replaced_runs_as_written():
    stand_in = types.SimpleNamespace(log1p=lambda value: value * 10)
    optimized = willump.optimize(pipeline_of("np.log1p(a) + 1", np=stand_in))
    a = pd.Series([1.0, 2.0], name="a")
    assert not assert_same(optimized, (a, None, None, None, None))
    assert optimized(a, None, None, None, None).tolist() == [11.0, 21.0]
    assert "not numpy's ufunc log1p" in status(optimized)


def test_floating_point_errors_that_raise_run_as_written():
    optimized = willump.optimize(pipeline_of("np.log(a) * 2"))
    a = pd.Series([0.0, 1.0])
    with np.errstate(divide="raise"):
        assert assert_same(optimized, (a, None, None, None, None))  # FloatingPointError
    assert "numpy raises" in status(optimized)
    assert not assert_same(optimized, (a, None, None, None, None))  # a warning
    assert expression_calls(optimized)[1] == 1


def test_arrays_numexpr_would_compute_run_as_written(monkeypatch):
    optimized = willump.optimize(pipeline_of("a * 2 + b"))
    a, b = pd.Series([1.0, 2.0, 3.0]), pd.Series([4, 5, 6])
    monkeypatch.setattr(expressions.pandas_expressions, "USE_NUMEXPR", True)
    monkeypatch.setattr(expressions, "_NUMEXPR_FROM", 2)
    assert not assert_same(optimized, (a, b, None, None, None))
    assert "numexpr" in status(optimized)
    assert not assert_same(optimized, (a[:2], b[:2], None, None, None))
    assert expression_calls(optimized) == (2, 1)


def scaled_counts(frame):
    counts = VECTORIZER.transform(frame["text"])
    scaled = counts * 2
    return MODEL.predict_proba(scaled)


TEXTS = ["spam spam offer", "hello there", "offer now", "see you there"]
VECTORIZER = CountVectorizer().fit(TEXTS)
MODEL = LogisticRegression().fit(VECTORIZER.transform(TEXTS), [1, 0, 1, 0])


def test_compiled_values_reaching_an_expression_are_built_first():
    """A vectorizer's rows read only by sites may stay compiled; the expression gets the real matrix."""
    optimized = willump.optimize(scaled_counts)
    frame = pd.DataFrame({"text": TEXTS})
    np.testing.assert_array_equal(optimized(frame), scaled_counts(frame))
    assert "no Series" in status(optimized)


# --- missing values of text, casts of categories ---------------------------------------------

TEXT_VALUES = ["C85", "", "S", None, np.nan, pd.NaT, pd.NA, float("nan"), 0.0, "nan", "None"]
TEXT_TESTS = ["a.isna()", "a.notna()", "a.isnull().astype(int)", "a.notnull().astype('uint8')",
              "frame['c'].notna().astype(int)", "frame.c.isna()", "(~a.isna()).astype(float)"]


@hypothesis_settings(max_examples=80)
@given(st.lists(st.sampled_from(TEXT_VALUES), min_size=0, max_size=12), st.sampled_from(["object", "str", "string"]),
       st.sampled_from(TEXT_TESTS), st.sampled_from(NAMES))
def test_missing_text_is_found_as_pandas_finds_it(values, dtype, source, name):
    """Titanic's ``df["Cabin"].notna().astype(int)``: object columns and pandas' string dtypes
    (``str``: NaN-valued, Python or pyarrow storage; ``string``: NA-valued)."""
    if dtype != "object":
        values = [v if isinstance(v, str) or v is None or v is pd.NA or (isinstance(v, float) and v != v) else str(v)
                  for v in values]
    a = pd.Series(values, dtype=dtype, name=name, index=pd.RangeIndex(len(values)) * 2)
    frame = pd.DataFrame({"c": a, "d": np.arange(len(values))})
    optimized = willump.optimize(pipeline_of(source))
    note(f"{source} of {a!r}")
    assert_same(optimized, (a, None, frame, None, None))
    calls, compiled = expression_calls(optimized)
    assert compiled == calls == 1, status(optimized)


CATEGORY_CASTS = [  # (categories, codes, target, compiled): Series.astype of categories of numbers (pd.cut's labels)
    ([0, 1, 2, 3, 4], [2, 0, 4, 4], "int", True),
    ([0, 1, 2, 3, 4], [2, 0, 4, 4], "float", True),
    ([0, 1, 2], [1, -1, 2], "int", False),  # (a missing value: pandas raises)
    ([0, 1, 2], [1, -1, 2], "float", False),  # (pandas fills NaN: as written)
    ([10, 20, 300], [2, 1], "'uint8'", False),  # (300 out of uint8's range: numpy wraps it, as written)
    ([10, 20, 30], [2, 1], "np.int8", True),
    ([0.5, 1.5, 2.5], [0, 2], "int", True),  # (cast as numpy casts: truncated)
    ([1e300, 2.5], [0, 1], "int", False),  # (out of int64: as written)
    ([0, 1], [1, 0, 1], "bool", True),
    ([-1, 7], [], "int", False),  # (no rows)
]


@pytest.mark.parametrize("categories, codes, target, compiled", CATEGORY_CASTS,
                         ids=[f"{c}->{t} {i}" for i, (c, _, t, _) in enumerate(CATEGORY_CASTS)])
@pytest.mark.parametrize("ordered", [False, True])
def test_categories_of_numbers_cast_as_pandas_casts_them(categories, codes, target, compiled, ordered):
    a = pd.Series(pd.Categorical.from_codes(codes, categories=categories, ordered=ordered), name="AgeBand",
                  index=pd.Index(range(10, 10 + len(codes))))
    frame = pd.DataFrame({"band": a})
    for source in (f"a.astype({target})", f"frame['band'].astype({target})", f"frame.band.astype({target})"):
        optimized = willump.optimize(pipeline_of(source))
        assert_same(optimized, (a, None, frame, None, None))
        assert expression_calls(optimized) == (1, int(compiled)), status(optimized)


def test_a_cut_of_ages_cast_to_int_is_compiled():
    """``pd.cut(age, bins, labels=[0, 1, ...]).astype(int)``, as Titanic notebooks band ages."""
    ages = pd.Series([22.0, 38.0, 4.0, 71.0, 35.0], name="Age")
    optimized = willump.optimize(pipeline_of("pd.cut(a, bins=[0, 12, 18, 35, 60, 100], labels=[0, 1, 2, 3, 4]).astype(int)",
                                             pd=pd))
    assert not assert_same(optimized, (ages, None, None, None, None))
    assert expression_calls(optimized) == (1, 1), status(optimized)
    with pytest.raises(ValueError):  # (an age beyond the bins: pandas raises, and so does the function)
        optimized(pd.Series([120.0]), None, None, None, None)
