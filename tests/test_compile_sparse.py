"""``scipy.sparse.hstack`` of CSR matrices beside dense arrays: the kernel gives scipy's matrix, or refuses.

scipy stacks such blocks as COO (a dense block keeps its nonzero entries; a 1-D
array is one row) and converts to CSR when asked (``format="csr"``, or the
user's ``.tocsr()``), sorting and summing blocks that are not canonical. The
kernel must give the same object: type, shape, index arrays and their dtypes,
values to the bit (signed zeros, NaN), and the flags scipy leaves set.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, note
from hypothesis import strategies as st

import willump
from test_compile_kernels import HSTACK, assert_same_outcome, hypothesis_settings, outcome
from willump.compile.forms import Stacked, Unsupported

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

_FLAGS = ("_has_canonical_format", "_has_sorted_indices", "has_canonical_format")
_DENSE_DTYPES = [np.float64, np.float32, np.int64, np.int32, np.int8, np.uint8, np.uint64, np.bool_]
_SPECIAL = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, 5e-324, 0.1, 3.0]


def assert_same_sparse(actual, expected):
    """Same type, shape, attributes (flags included), index arrays, data dtype and bits."""
    assert type(actual) is type(expected), f"{type(actual).__name__} != {type(expected).__name__}"
    assert actual.shape == expected.shape
    assert vars(actual).keys() == vars(expected).keys()
    assert [vars(actual).get(f) for f in _FLAGS] == [vars(expected).get(f) for f in _FLAGS]
    names = ["coords"] if expected.format == "coo" else ["indptr", "indices"]
    for name in names:
        for a, e in zip(*[x if isinstance(x, tuple) else (x,) for x in (getattr(actual, name), getattr(expected, name))]):
            assert a.dtype == e.dtype and np.array_equal(a, e), name
    a, e = actual.data, expected.data
    assert a.dtype == e.dtype, f"data dtype {a.dtype} != {e.dtype}"
    if a.dtype.kind == "f":  # the bits: signed zeros, NaN
        assert np.array_equal(a.view(np.uint8), e.view(np.uint8)), f"{a!r} != {e!r}"
    else:
        assert np.array_equal(a, e)


@st.composite
def dense_block(draw, n_rows):
    dtype = np.dtype(draw(st.sampled_from(_DENSE_DTYPES)))
    width = draw(st.integers(0, 4))
    one_dimensional = n_rows == 1 and draw(st.booleans())
    shape = (width,) if one_dimensional else (n_rows, width)
    if dtype.kind == "f":
        values = st.one_of(st.sampled_from(_SPECIAL), st.floats(-1e6, 1e6, width=dtype.itemsize * 8))
    elif dtype.kind == "b":
        values = st.booleans()
    else:
        info = np.iinfo(dtype)
        values = st.one_of(st.just(0), st.integers(int(info.min), int(info.max)))
    array = np.array(draw(st.lists(values, min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))), dtype)
    array = array.reshape(shape)
    if array.ndim == 2 and draw(st.booleans()):
        array = np.asfortranarray(array)  # (row-major order of the entries, whatever the layout)
    return array


@st.composite
def sparse_block(draw, n_rows):
    kind = draw(st.sampled_from([sp.csr_matrix, sp.csr_array]))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64]))
    width = draw(st.integers(1, 5))
    indptr, indices, data = [0], [], []
    shape = draw(st.sampled_from(["canonical", "canonical", "unsorted", "duplicates"]))
    for _ in range(n_rows):
        columns = draw(st.lists(st.integers(0, width - 1), unique=shape != "duplicates", max_size=width + 1))
        if shape == "canonical":
            columns.sort()
        indices += columns
        data += [draw(st.sampled_from([0.0, 1.5, -2.0, 7.0])) for _ in columns]  # explicit zeros too
        indptr.append(len(indices))
    arrays = (np.array(data, dtype), np.array(indices, np.int32), np.array(indptr, np.int32))
    return kind(arrays, shape=(n_rows, width))


@st.composite
def mixed_blocks(draw):
    n_rows = draw(st.integers(1, 5))
    count = draw(st.integers(2, 4))
    dense = draw(st.lists(st.booleans(), min_size=count, max_size=count).filter(lambda d: any(d) and not all(d)))
    return [draw(dense_block(n_rows)) if d else draw(sparse_block(n_rows)) for d in dense]


@hypothesis_settings(max_examples=300)
@given(blocks=mixed_blocks(), format=st.sampled_from([None, "csr"]), as_tuple=st.booleans())
def test_hstack_of_sparse_and_dense_blocks_is_scipys(blocks, format, as_tuple):
    blocks = tuple(blocks) if as_tuple else blocks
    note(repr(blocks))
    expected = sp.hstack(blocks, format=format)
    assert_same_sparse(HSTACK(blocks, format=format), expected)
    deferred = HSTACK.defer(blocks, format=format)
    assert_same_sparse(deferred.materialize() if isinstance(deferred, Stacked) else deferred, expected)
    if format is None:  # the user's .tocsr() of the COO matrix
        assert_same_sparse(HSTACK(blocks).tocsr(), expected.tocsr())


def test_a_dense_block_of_another_number_of_rows_is_refused_as_scipy_raises():
    words = sp.csr_matrix(np.eye(2))
    for dense in (np.ones((3, 2)), np.ones(2)):  # a 1-D array is one row
        with pytest.raises(ValueError):
            sp.hstack([words, dense])
        with pytest.raises(Unsupported):
            HSTACK([words, dense])


@pytest.mark.parametrize(
    "blocks",
    [
        [np.ones((2, 1)), np.ones((2, 2))],  # no sparse block
        [sp.csr_matrix((0, 2)), np.ones((0, 2))],  # no rows
        [sp.csr_matrix(np.eye(2)), np.ones((2, 1), np.float16)],  # scipy refuses float16
        [sp.csr_matrix(np.eye(2)), np.ones((2, 1), np.complex128)],
        [sp.csr_matrix(np.eye(2)), np.ones((2, 1, 1))],
        [sp.csr_matrix(np.eye(2)), np.array([["a"], ["b"]], dtype=object)],
    ],
    ids=["all dense", "no rows", "float16", "complex", "3-D", "objects"],
)
def test_other_dense_blocks_are_refused(blocks):
    with pytest.raises(Unsupported):
        HSTACK(blocks)


COUNTS = """
def pipeline(X, counts):
    return MODEL.predict(sp.hstack([X, np.column_stack([counts, counts * 2.5])]).tocsr())
"""


def test_a_model_reading_the_stacked_matrix_answers_as_written():
    """End to end through the call sites: the COO result, the user's tocsr, the model."""
    from sklearn.linear_model import Ridge

    from answers import define

    rng = np.random.default_rng(0)
    X = sp.random(20, 6, density=0.4, format="csr", random_state=rng)
    counts = rng.integers(0, 4, 20)
    train = sp.hstack([X, np.column_stack([counts, counts * 2.5])]).tocsr()
    namespace = {"sp": sp, "np": np, "MODEL": Ridge().fit(train, rng.normal(size=20))}
    pipeline = define(COUNTS, namespace, "<sparse counts pipeline>")
    optimized = willump.optimize(pipeline)
    for rows in [slice(0, 20), slice(3, 4), slice(5, 6), slice(0, 20)]:
        assert_same_outcome(outcome(lambda: optimized(X[rows], counts[rows])), outcome(lambda: pipeline(X[rows], counts[rows])))
    table = optimized.explain_compilation().set_index("operator")
    assert table.loc["scipy.sparse.hstack", "status"] == "compiled", table.to_string()
