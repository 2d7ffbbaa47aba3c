"""The compiled ``numpy.hstack`` gives numpy's answer: values, dtype and shape, or its exception."""

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import willump
from answers import answers, identity, outcome
from willump.compile import registry
from willump.compile.forms import Unsupported

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")
NP_HSTACK = registry.FUNCTION_KERNELS[np.hstack]
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
DTYPES = ["float64", "float32", "int64", "int32", "uint8", "bool"]


def stacked(blocks):
    return identity.predict(np.hstack(blocks))  # a model call, so that willump compiles the function


def stacked_pair(a, b):
    X = np.hstack([a, b])
    return identity.predict(X)


@st.composite
def blocks(draw):
    """2-4 blocks of one kind of shape (often mismatched, so numpy raises), as arrays or pandas objects."""
    rows = draw(st.integers(0, 4))
    ndim = draw(st.sampled_from([1, 2, 2, 0]))
    result = []
    for _ in range(draw(st.integers(1, 4))):
        dtype = draw(st.sampled_from(DTYPES))
        own_rows = rows if draw(st.integers(0, 5)) else draw(st.integers(0, 4))
        shape = () if ndim == 0 else (own_rows,) if ndim == 1 else (own_rows, draw(st.integers(0, 3)))
        values = np.array(draw(st.lists(st.floats(-1e3, 1e3) | st.just(np.nan), min_size=int(np.prod(shape)),
                                        max_size=int(np.prod(shape)))), dtype=np.float64).reshape(shape)
        array = np.nan_to_num(values).astype(dtype) if dtype != "float64" else values
        wrap = draw(st.sampled_from(["array", "array", "pandas"]))
        if wrap == "pandas" and ndim == 1:
            array = pd.Series(array, index=np.arange(len(array)) * 2)
        elif wrap == "pandas" and ndim == 2:
            array = pd.DataFrame(array, columns=[f"c{i}" for i in range(array.shape[1])])
        result.append(array)
    return result


def assert_same(optimized, *args):
    both = answers(optimized, *args)
    if both is None:
        return
    result, expected = both
    assert type(result) is type(expected) and result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected, strict=True)


@SETTINGS
@given(blocks(), st.booleans())
def test_the_kernel_answers_as_numpy(parts, as_tuple):
    parts = tuple(parts) if as_tuple else parts
    try:
        expected = np.hstack(parts)
    except ValueError:
        with pytest.raises(ValueError):
            NP_HSTACK(parts)
        return
    result = NP_HSTACK(parts)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected, strict=True)


@SETTINGS
@given(blocks())
def test_pipelines_answer_as_written(parts):
    f = willump.optimize(stacked)
    assert_same(f, parts)
    if len(parts) == 2:
        assert_same(willump.optimize(stacked_pair), *parts)


def test_the_call_site_is_compiled():
    f = willump.optimize(stacked_pair)
    a, b = np.ones((3, 2)), pd.DataFrame({"x": [1, 2, 3]})
    np.testing.assert_array_equal(f(a, b), np.hstack([a, b]), strict=True)
    site = f.explain_compilation().set_index("operator").loc["numpy.hstack"]
    assert site["status"] == "compiled" and site["compiled_calls"] == 1


@pytest.mark.parametrize("parts, options", [
    ([np.array(["a"]), np.array(["b"])], {}),  # strings
    ([np.ones(2), [1.0, 2.0]], {}),  # a list block
    ([np.ones(2), np.ones(2)], {"dtype": np.float32}),
    ([pd.Series(["a", "b"], dtype="str"), np.ones(2)], {}),  # an extension dtype
    ([pd.Series([1, None], dtype="Int64"), np.ones(2)], {}),
    ([], {}),
])
def test_other_blocks_and_options_run_as_written(parts, options):
    with pytest.raises(Unsupported):
        NP_HSTACK(parts, **options)


# --- numpy.column_stack and pd.concat(axis=1) ---------------------------------------------------

NP_COLUMN_STACK = registry.FUNCTION_KERNELS[np.column_stack]


def column_stacked(blocks):
    return identity.predict(np.column_stack(blocks))


@SETTINGS
@given(blocks(), st.booleans())
def test_column_stack_answers_as_numpy(parts, as_tuple):
    parts = tuple(parts) if as_tuple else parts
    try:
        expected = np.column_stack(parts)
    except ValueError:
        with pytest.raises((ValueError, Unsupported)):
            NP_COLUMN_STACK(parts)
        return
    result = NP_COLUMN_STACK(parts)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    assert result.flags.c_contiguous == expected.flags.c_contiguous
    np.testing.assert_array_equal(result, expected, strict=True)
    assert_same(willump.optimize(column_stacked), parts)


ROWS = pd.DataFrame({"x": [1.5, np.nan, -2.0, 4.0, 0.5, 3.0], "n": [1, 2, 3, 4, 5, 6],
                     "flag": [True, False, True, True, False, False]}, index=pd.RangeIndex(10, 16))
LGBM = lgb.LGBMRegressor(n_estimators=5, min_child_samples=1, min_data_in_bin=1, verbose=-1).fit(
    pd.DataFrame({"a": ROWS["x"] * 2, "b": ROWS["n"], "c": ROWS["flag"], "d": ROWS["x"].fillna(0)}), [0.5, 1, 2, 3, 4, 5])


def concatenated(frame):
    a = frame["x"] * 2
    d = frame["x"].fillna(0).astype("float32")
    X = pd.concat([a, frame["n"], frame["flag"], d], axis=1, keys=["a", "b", "c", "d"])
    return LGBM.predict(X)


def concatenated_then_python(frame):
    a = frame["x"] * 2
    X = pd.concat([a, frame["n"], frame["flag"], frame["x"]], axis=1)
    print(end="")  # Python code while X is kept: X is built first (it might change the Series)
    return LGBM.predict(X)


def concatenated_and_read(frame):
    X = pd.concat([frame["x"] * 2, frame["n"], frame["flag"], frame["x"]], axis=1)
    return LGBM.predict(X), X.shape


@pytest.mark.parametrize("function", [concatenated, concatenated_then_python, concatenated_and_read])
@pytest.mark.parametrize("rows", [slice(None), slice(2, 3), slice(None, None, -1)])
def test_a_concatenation_feeding_a_model_answers_as_written(function, rows):
    f = willump.optimize(function)
    frame = ROWS.iloc[rows]
    result, expected = answers(f, frame)
    if isinstance(expected, tuple):
        assert result[1] == expected[1]
        result, expected = result[0], expected[0]
    np.testing.assert_array_equal(result, expected, strict=True)
    site = f.explain_compilation().set_index("operator").loc["pandas.concat"]
    assert site["calls"] == 1
    assert site["compiled_calls"] == (function is not concatenated_and_read)  # read by Python: as written


@pytest.mark.parametrize("objs, options", [
    ([ROWS["x"], ROWS["n"].set_axis(range(6))], {"axis": 1}),  # pandas aligns
    ([ROWS["x"], ROWS["n"]], {"axis": 0}),
    ([ROWS["x"], ROWS["n"]], {"axis": 1, "join": "inner"}),
    ([ROWS["x"], ROWS["n"]], {"axis": 1, "keys": ["a"]}),
    ([ROWS["x"], ROWS], {"axis": 1}),
    ([ROWS["x"].astype("Float64"), ROWS["n"]], {"axis": 1}),
    ([ROWS["x"].set_axis([0, 0, 1, 2, 3, 4])], {"axis": 1}),
])
def test_other_concatenations_run_as_written(objs, options):
    kernel = registry.FUNCTION_KERNELS[pd.concat]
    with pytest.raises(Unsupported):
        kernel.defer(objs, **options)
    with pytest.raises(Unsupported):
        kernel(objs, **options)


NP_SELECT = registry.FUNCTION_KERNELS[np.select]


@st.composite
def selections(draw):
    """(condlist, choicelist, default): comparisons of a Series (or not bools: numpy raises), choices of
    Series, arrays and numbers of several dtypes, a default; sometimes of different lengths."""
    rows = draw(st.integers(0, 5))
    values = pd.Series(draw(st.lists(st.sampled_from([0.0, 12.0, 19.5, 60.0, np.nan, -1.0]), min_size=rows, max_size=rows)),
                       index=draw(st.sampled_from([None, list(range(10, 10 + rows))])))
    count = draw(st.integers(1, 4))
    conditions = [values < draw(st.sampled_from([0, 13, 20, 60.0])) for _ in range(count)]
    if draw(st.integers(0, 9)) == 0:
        conditions[0] = conditions[0].astype(int)  # (numpy raises TypeError)
    choice = st.one_of(st.sampled_from([0, 1, 2.5, True, np.int64(3), np.float32(0.5)]),
                       st.sampled_from(DTYPES).map(lambda d: values.fillna(0).abs().astype(d)),
                       st.sampled_from(DTYPES).map(lambda d: np.arange(rows).astype(d)))
    choices = [draw(choice) for _ in range(draw(st.sampled_from([count, count, count + 1])))]
    return conditions, choices, draw(choice)


@SETTINGS
@given(selections(), st.booleans())
def test_select_answers_as_numpy(parts, as_tuple):
    conditions, choices, default = parts
    if as_tuple:
        conditions, choices = tuple(conditions), tuple(choices)
    expected = outcome(np.select, conditions, choices, default)
    try:
        got = outcome(NP_SELECT, conditions, choices, default)
    except Unsupported:
        return
    if type(expected) is tuple:  # (numpy raised: the kernel raises it too, and the call runs as written)
        assert type(got) is tuple and got[0] is expected[0]
    else:
        assert type(got) is np.ndarray and got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes()


def age_bands(df):
    age = df["Age"].fillna(-1)
    bands = np.select([age < 0, age < 13, age < 20, age < 60], [0, 1, 2, 3], default=4)
    return identity.predict(bands)


def test_a_select_of_comparisons_is_compiled():
    optimized = willump.optimize(age_bands)
    people = pd.DataFrame({"Age": [np.nan, 5.0, 19.0, 45.0, 70.0]})
    for rows in (people, people.iloc[[1]], people.iloc[:0]):
        np.testing.assert_array_equal(optimized(rows), age_bands(rows), strict=True)
    table = optimized.explain_compilation()
    assert table.loc[table.operator == "numpy.select", "status"].tolist() == ["compiled"], table.to_string()
