"""The compiled ``numpy.hstack`` gives numpy's answer: values, dtype and shape, or its exception."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import willump
from answers import answers, identity
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
