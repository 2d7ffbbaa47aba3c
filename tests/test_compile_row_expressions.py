"""pandas feature code compiled as expressions (``willump.compile.expressions``): row-wise reductions
over several columns, ``clip``, ``fillna``, ``astype``, ``abs``, ``round``, ``isna``/``notna``, comparisons and
``np.where``
give pandas' answer: values to the bit, dtype, index object, name, warnings and exceptions.
"""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import willump
from test_compile_expressions import FLOAT64, INT64, assert_same, expression_calls, pipeline_of, status
from test_compile_kernels import hypothesis_settings

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

NUMBERS = ["2", "0.5", "-3", "0", "n", "m", "1e300", "-0.0"]
BOUNDS = ["0", "1", "-2", "0.5", "2.5", "n", "m", "None"]
DTYPES = ["float", "int", "'float32'", "np.float32", "'float64'", "np.int64", "'int32'", "bool", "'bool'", "'uint8'",
          "np.uint16", "'int8'", "'int16'", "np.uint32", "'uint64'"]
COLUMNS = ['frame["x"]', 'frame["y"]', 'frame["z"]', "a", "b"]
SELECTIONS = ['["x", "y", "z"]', '["x", "y"]', '["z", "x"]', '["y"]', '["x", "x", "y"]', "names"]


@st.composite
def series_expression(draw, depth: int) -> str:
    """The source of an expression that gives a numeric Series (when its values are numeric)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.integers(0, 2)) == 0:
            skipna = draw(st.sampled_from(["", ", skipna=False", ", skipna=True"]))
            axis = draw(st.sampled_from(["axis=1", "axis='columns'"]))
            reduction = draw(st.sampled_from(["sum", "mean", "min", "max"]))
            return f"frame[{draw(st.sampled_from(SELECTIONS))}].{reduction}({axis}{skipna})"
        return draw(st.sampled_from(COLUMNS))
    inner = draw(series_expression(depth - 1))
    kind = draw(st.sampled_from(["clip", "fillna", "abs", "round", "npround", "arithmetic", "astype"]))
    if kind == "clip":
        lower, upper = draw(st.sampled_from(BOUNDS)), draw(st.sampled_from(BOUNDS))
        alone = draw(st.sampled_from(BOUNDS[:-1]))  # (clip with no bound at all is not rewritten)
        spelling = draw(st.sampled_from([f"{lower}, {upper}", f"lower={alone}", f"upper={alone}", f"{alone}"]))
        return f"{inner}.clip({spelling})"
    if kind == "fillna":
        return f"{inner}.fillna({draw(st.sampled_from(NUMBERS + COLUMNS))})"  # a Series: Series.fillna(Series)
    if kind == "abs":
        return f"{inner}.abs()"
    if kind == "round":
        return f"{inner}.round({draw(st.sampled_from(['', '1', '-1', 'decimals=3', '0']))})"
    if kind == "npround":
        return f"np.{draw(st.sampled_from(['round', 'around']))}({inner}{draw(st.sampled_from(['', ', 2', ', -1']))})"
    if kind == "astype":  # then arithmetic only on what stays int64/float64 (the kernel refuses the rest)
        return f"{inner}.astype({draw(st.sampled_from(DTYPES))})"
    other = draw(st.sampled_from(NUMBERS + COLUMNS))
    return f"({inner} {draw(st.sampled_from('+-*/'))} {other})"


@st.composite
def feature(draw) -> str:
    kind = draw(st.sampled_from(["series", "compare", "where", "astype", "frame", "missing"]))
    if kind == "frame":  # a DataFrame, or a Series when names is a str
        return f"frame[{draw(st.sampled_from(SELECTIONS))}].fillna({draw(st.sampled_from(NUMBERS))})"
    left = draw(series_expression(2))
    if kind == "series":
        return left
    if kind == "missing":  # bools: as a condition of np.where, cast, or compared
        missing = f"{left}.{draw(st.sampled_from(['isna', 'isnull', 'notna', 'notnull']))}()"
        use = draw(st.sampled_from(["alone", "where", "astype", "compare"]))
        if use == "where":
            return f"np.where({missing}, {draw(st.sampled_from(NUMBERS + COLUMNS))}, {left})"
        if use == "astype":
            return f"{missing}.astype({draw(st.sampled_from(DTYPES))})"
        if use == "compare":
            return f"{missing} == {draw(st.sampled_from(['True', 'False', '(frame.x > 0)']))}"
        return missing
    comparison = f"{left} {draw(st.sampled_from(['>', '>=', '<', '<=', '==', '!=']))} " \
                 f"{draw(st.sampled_from(NUMBERS + COLUMNS))}"
    if kind == "compare":
        return comparison
    if kind == "astype":
        return f"({comparison}).astype({draw(st.sampled_from(DTYPES))})"
    branches = NUMBERS + COLUMNS + [left]
    return f"np.where({comparison}, {draw(st.sampled_from(branches))}, {draw(st.sampled_from(branches))})"


POOLS = {"int64": INT64[:6] + [2**40], "float64": FLOAT64, "bool": [True, False], "int32": [0, 7, -300, 2**31 - 1],
         "uint8": [0, 1, 255]}


@st.composite
def frame_of(draw, rows: int, index):
    """A frame with columns x, y, z in one block per dtype, one block per column, or some of each
    (as ``frame[name] = ...`` leaves them)."""
    dtypes = [draw(st.sampled_from(["int64", "float64", "float64", "int32", "uint8"])) for _ in "xyz"]
    values = {c: np.array(draw(st.lists(st.sampled_from(POOLS[d]), min_size=rows, max_size=rows)), dtype=d)
              for c, d in zip("xyz", dtypes)}
    layout = draw(st.sampled_from(["consolidated", "assigned", "mixed"]))
    if layout == "consolidated":
        return pd.DataFrame(values, index=index)
    frame = pd.DataFrame(index=index)
    order = draw(st.permutations("xyz"))
    for column in order:
        frame[column] = values[column]
    if layout == "mixed":
        frame["w"] = frame["x"]  # a fourth column, then some blocks joined
        frame = frame[draw(st.permutations(list(frame.columns)))].copy()
    return frame


@st.composite
def case(draw):
    source = draw(feature())
    rows = draw(st.sampled_from([1, 2, 3, 5, 6, 7, 12]))
    index = draw(st.sampled_from([pd.RangeIndex(rows), pd.Index(range(10, 10 + rows)),
                                  pd.Index([0.5 * i for i in range(rows)])]))
    frame = draw(frame_of(rows, index))
    a = frame["x"].rename(draw(st.sampled_from([None, "a", "x"]))).copy()
    b = pd.Series(draw(st.lists(st.sampled_from(FLOAT64), min_size=rows, max_size=rows)), index=index, name="b")
    if draw(st.integers(0, 5)) == 0:
        b = b.set_axis(pd.RangeIndex(1, rows + 1))  # pandas aligns (arithmetic) or raises (comparisons)
    numbers = st.integers(-5, 5) | st.sampled_from([0.5, -2.25, 0.0, np.nan, np.inf, 1e308, 2**60])
    n, m = draw(numbers), draw(numbers)
    names = draw(st.sampled_from([["x", "z"], ["y"], ("x", "y"), ["x", "q"], "x"]))
    return source, (a, b, frame, n, m, names)


def feature_pipeline(source):
    text = f"def pipeline(a, b, frame, n, m, names):\n    value = {source}\n    return IDENTITY.predict(value)\n"
    return pipeline_of_source(text)


def pipeline_of_source(text):
    from answers import define
    from test_compile_expressions import IDENTITY, _numbering

    return define(text, {"np": np, "numpy": np, "IDENTITY": IDENTITY}, f"<feature pipeline {next(_numbering)}>")


@hypothesis_settings(max_examples=300)
@given(case())
def test_feature_expressions_match_pandas(case):
    source, arguments = case
    note(source)
    optimized = willump.optimize(feature_pipeline(source))
    assert_same(optimized, arguments)
    calls, _ = expression_calls(optimized)
    assert calls == (source not in COLUMNS), source  # the whole expression is one site


CLEAN = pd.DataFrame({"x": [1.5, np.nan, -3.25, 7.0, 0.0, -0.0, 2.5], "y": [1, 2, 3, 4, 5, 6, 7],
                      "z": [np.nan, np.nan, 0.1, 0.2, 1e300, -1e300, 3.0]})


@pytest.mark.parametrize("source", [
    'frame[["x", "y", "z"]].sum(axis=1)',
    'frame[["x", "z"]].mean(axis=1)',
    'frame[["y", "x"]].min(axis=1, skipna=False)',
    'frame[["x", "y", "z"]].max(axis="columns")',
    '(-frame["y"] / 365).clip(18, 80)',
    'frame["x"].clip(lower=0)',
    'np.where(frame["x"] > 1, 1, 0)',
    'np.where(frame["x"] > frame["z"], frame["y"], 0.5)',
    'frame["z"].fillna(0.5).astype("float32")',
    '(frame["x"] > 0).astype(int)',
    'frame["x"].abs().round(1)',
    'np.round(frame["z"] / 3, 2)',
    'np.abs(frame["x"] - frame["y"]) <= 2',
    'frame["y"].astype("uint8")',
    'frame["y"].astype("int32").astype(np.uint16)',
    'frame["z"].fillna(0).clip(0, 50).astype("uint16")',
    'np.where(frame["z"].isna(), frame["x"], frame["z"])',
    'frame["z"].notna().astype(int)',
    'frame.y.isnull()',
    '(frame["x"] * 2).notnull()',
    'np.where(frame["x"] == 1.5, np.nan, frame["x"])',  # (the DAYS_EMPLOYED anomaly of Kaggle's notebooks)
    'frame["z"].fillna(np.inf) * np.pi - numpy.e',
])
@pytest.mark.parametrize("rows", [1, 3, 7])
def test_feature_code_is_compiled(source, rows):
    """The spellings of pandas feature code: each one site the kernel answers, exactly."""
    optimized = willump.optimize(feature_pipeline(source))
    from_array = pd.DataFrame(CLEAN.to_numpy(dtype=float), columns=CLEAN.columns)  # one F-ordered block
    for frame in (CLEAN[:rows], CLEAN[:rows].copy(), CLEAN.iloc[::-1][:rows], from_array[:rows], from_array.iloc[::2]):
        assert not assert_same(optimized, (None, None, frame, None, None, None))
    assert expression_calls(optimized) == (5, 5), status(optimized)


FALLBACKS = [  # (expression, frame, why the kernel refuses)
    ('frame["x"].clip(lower=np.nan)', CLEAN, "no bound but NaN"),
    ('frame[["x", "q"]].sum(axis=1)', CLEAN, "a column the frame does not have"),
    ('frame[["x", "y"]].sum(axis=1)', CLEAN.set_axis(["x", "x", "y"], axis=1), "repeated column names"),
    ('frame[["x", "y"]].sum(axis=1)', CLEAN[:0], "no rows"),
    ('frame[["x", "y"]].sum(axis=1)', CLEAN.astype({"y": "Int64"}), "dtype Int64"),
    ('frame["x"].astype(int)', CLEAN, "non-finite"),
    ('frame["z"].fillna(0).astype("uint16")', CLEAN, "out-of-range"),
    ('(frame["y"] * 100).astype("int8")', CLEAN, "out-of-range"),
    ('frame["x"].astype("Int64")', CLEAN, "astype to 'Int64'"),
    ('frame["y"].clip(0.5, 3)', CLEAN, "may change the dtype"),
    ('frame["x"].clip(0, 2**60)', CLEAN, "beyond float64's exact ints"),
    ('frame["y"].clip(lower=2**63)', CLEAN, "may change the dtype"),
    ('(frame["x"] > 0) * 2', CLEAN, "dtype bool in arithmetic"),
    ('np.where(frame["x"] > 0, frame["y"][:2], 0)', CLEAN, "Unsupported"),
]


@pytest.mark.parametrize("source, frame, reason", FALLBACKS, ids=[row[-1] for row in FALLBACKS])
def test_what_pandas_does_otherwise_runs_as_written(source, frame, reason):
    optimized = willump.optimize(feature_pipeline(source))
    assert_same(optimized, (None, None, frame, None, None, None))
    if reason != "Unsupported":
        assert reason in status(optimized)
        assert expression_calls(optimized) == (1, 0)


def test_a_cast_that_may_refuse_after_warnings_runs_as_written():
    """float to int refuses NaN only once the values are known: not after a ufunc may have warned."""
    optimized = willump.optimize(feature_pipeline('np.log(frame["x"]).astype(int)'))
    assert assert_same(optimized, (None, None, CLEAN, None, None, None))  # (log warns, the cast raises)
    assert "a cast to int after operations that may warn" in status(optimized)


# --- a chain of compiled methods on a value computed otherwise -----------------------------------

PLAYS = {1: 10.0, 2: 0.5, 3: -2.0}


def looked_up(frame, plays):
    return IDENTITY_MODEL.predict(frame["song"].map(plays).fillna(0).clip(0, 5).astype("float32"))


def looked_up_compared(frame, plays):
    return IDENTITY_MODEL.predict((frame["song"].map(plays).fillna(0) * 2 > 1) | False)


class Identity:
    def predict(self, X):
        return X


IDENTITY_MODEL = Identity()


@pytest.mark.parametrize("function", [looked_up, looked_up_compared])
@pytest.mark.parametrize("songs", [[1, 2, 3, 4], [4], [2, 2, 1]])
def test_a_lookup_then_methods_is_compiled(function, songs):
    optimized = willump.optimize(function)
    frame = pd.DataFrame({"song": songs}, index=pd.RangeIndex(5, 5 + len(songs)))
    for plays in (PLAYS, pd.Series(PLAYS)):
        assert not assert_same(optimized, (frame, plays))
    assert expression_calls(optimized) == (2, 2), status(optimized)


def ordered(log, values):
    log.append("operand")
    return values


def test_an_operand_computed_otherwise_runs_once():
    """``f(x).fillna(n)``: f runs as written, once per call; its result goes through the kernel."""
    source = "def pipeline(a, b, frame, n, m, names):\n    value = ordered(b, a).fillna(n).abs() + m\n" \
             "    return IDENTITY.predict(value)\n"
    from answers import define
    from test_compile_expressions import IDENTITY

    optimized = willump.optimize(define(source, {"np": np, "IDENTITY": IDENTITY, "ordered": ordered}, "<operand>"))
    log = []
    a = pd.Series([1.5, np.nan, -2.0], name="a")
    assert not assert_same(optimized, (a, log, None, 0.25, 1, None))
    assert log == ["operand", "operand"]  # the original's call, then the optimized one's
    assert expression_calls(optimized) == (1, 1), status(optimized)
