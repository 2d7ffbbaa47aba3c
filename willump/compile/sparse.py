"""Compiled ``scipy.sparse.hstack`` of CSR matrices, and of CSR matrices beside dense arrays.

scipy's own fast path for CSR blocks is C++ behind a page of Python checks;
for a few rows the checks dominate. This builds the same matrix (type, index
dtype, values) with one numba loop, for the common case only: CSR blocks of
one dtype and 32-bit indices, stacked into CSR. When the result only reaches
other compiled calls, the blocks are kept side by side (``Stacked``) and not
copied at all.

Dense blocks (numeric ndarrays, ``X = sp.hstack([words, counts])`` with ``counts``
from ``np.column_stack``) take scipy's other path, which this follows step by step:
each block becomes COO (a dense one keeps its nonzero entries, in row-major order:
``+0.0`` and ``-0.0`` go, NaN stays; a 1-D array is one row), the blocks' entries are
concatenated block after block into one COO matrix of the upcast dtype, and that is
the result (``format=None``) or, for ``format="csr"``, converted to CSR: per row the
entries in that order (which is the blocks' rows side by side), then scipy's own
``sum_duplicates`` (sorting and summing only blocks that are not canonical).
"""

import numpy as np
import scipy.sparse as sp

from willump.compile.forms import Deferred, LazyRows, SparseRows, Stacked, Unsupported, csr, stacked_dtype
from willump.compile.jit import njit

_INT32_MAX = np.iinfo(np.int32).max


@njit
def _stack_rows(n_rows, indptrs, indices, datas, offsets, out_indptr, out_indices, out_data):
    nnz = 0
    for i in range(n_rows):
        for b in range(len(indptrs)):
            indptr, idx, data, offset = indptrs[b], indices[b], datas[b], offsets[b]
            for jj in range(indptr[i], indptr[i + 1]):
                out_indices[nnz] = idx[jj] + offset
                out_data[nnz] = data[jj]
                nnz += 1
        out_indptr[i + 1] = nnz


@njit
def _canonical(indptr, indices) -> int:
    """0: every row's indices strictly increasing (scipy's canonical format); 1: not; 2: indptr decreases."""
    status = 0
    for i in range(len(indptr) - 1):
        if indptr[i] > indptr[i + 1]:
            return 2
        for jj in range(indptr[i] + 1, indptr[i + 1]):
            if indices[jj - 1] >= indices[jj]:
                status = 1
    return status


class CompiledHstack:
    """``scipy.sparse.hstack(blocks, format, dtype)`` for CSR matrices, and for CSR matrices beside
    dense arrays; Unsupported otherwise."""

    def __call__(self, blocks, format=None, dtype=None):
        rows, dense = _rows_of(blocks, format, dtype)
        if not dense:
            return materialize_stack(rows)
        return _coo(rows) if format is None else materialize_canonical(rows)

    @staticmethod
    def defer(blocks, format=None, dtype=None):
        """As calling it, the blocks kept side by side until the matrix itself is needed (when the
        matrix is CSR with its blocks' rows side by side, as they are)."""
        rows, dense = _rows_of(blocks, format, dtype)
        if not dense:
            return Stacked(rows, materialize_stack)
        if format is None:  # (a COO matrix, which no kernel reads)
            return _coo(rows)
        if any(_canonical_block(r) for r in rows):  # (sorted and summed when stacked)
            return materialize_canonical(rows)
        return Stacked(rows, materialize_canonical)

    @staticmethod
    def still_valid() -> bool:
        return True


def materialize_stack(blocks: list) -> object:
    if sum(len(b.data) for b in blocks) >= _INT32_MAX:  # scipy's own hstack picks 64-bit indices
        return sp.hstack([b.materialize() for b in blocks], format="csr")
    n_rows = blocks[0].rows
    width = sum(b.width for b in blocks)
    nnz = sum(len(b.data) for b in blocks)
    offsets = np.cumsum([0] + [b.width for b in blocks[:-1]]).astype(np.int32)
    out_indptr = np.zeros(n_rows + 1, np.int32)
    out_indices = np.empty(nnz, np.int32)
    out_data = np.empty(nnz, np.result_type(*[b.data.dtype for b in blocks]))  # as np.concatenate
    _stack_rows(
        n_rows, tuple(b.indptr for b in blocks), tuple(b.indices for b in blocks),
        tuple(b.data.astype(out_data.dtype, copy=False) for b in blocks), offsets, out_indptr, out_indices, out_data,
    )
    return csr(_kind(blocks, sp.csr_array, sp.csr_matrix), out_data, out_indices, out_indptr, (n_rows, width))


def materialize_canonical(blocks: list) -> object:
    """The CSR matrix scipy converts the blocks' COO entries to: their rows side by side, then
    scipy's ``sum_duplicates`` (an empty matrix as scipy makes one when nothing is stored)."""
    matrix = materialize_stack(blocks)
    if matrix.nnz == 0:
        return type(matrix)(matrix.shape, dtype=matrix.dtype)
    matrix.sum_duplicates()
    return matrix


def _coo(blocks: list) -> object:
    """The COO matrix scipy's ``hstack`` returns without a format: the blocks' entries, block after block."""
    offsets = np.cumsum([0] + [b.width for b in blocks[:-1]])
    rows, columns = [], []
    for block, offset in zip(blocks, offsets):
        rows.append(np.repeat(np.arange(block.rows, dtype=np.int32), np.diff(block.indptr)))
        columns.append(np.add(block.indices, offset, dtype=np.int32))
    data = np.concatenate([b.data for b in blocks]).astype(stacked_dtype(blocks), copy=False)
    shape = (blocks[0].rows, sum(b.width for b in blocks))
    kind = _kind(blocks, sp.coo_array, sp.coo_matrix)
    return kind((data, (np.concatenate(rows), np.concatenate(columns))), shape=shape)


def _kind(blocks: list, array: type, matrix: type) -> type:
    """scipy returns a sparse array if any block is one, else a sparse matrix."""
    return array if any(b.kind is sp.csr_array for b in blocks) else matrix


def _rows_of(blocks, format, dtype) -> tuple[list, bool]:
    """(the blocks as CSR rows, whether some were dense)."""
    if format not in (None, "csr") or dtype is not None or not isinstance(blocks, (list, tuple)) or len(blocks) < 2:
        raise Unsupported("hstack options other than format='csr'")
    dense = [type(b) is np.ndarray for b in blocks]
    if all(dense):
        raise Unsupported("no sparse block (scipy stacks the arrays' elements then)")
    rows = [dense_rows(b) if d else _block_rows(b) for b, d in zip(blocks, dense)]
    n_rows = rows[0].rows
    if any(r.rows != n_rows for r in rows):
        raise Unsupported("blocks of different numbers of rows (scipy raises)")
    if any(dense) and not n_rows:
        raise Unsupported("blocks without rows")
    if stacked_dtype(rows).kind not in "biuf":
        raise Unsupported("blocks of other than bool, integer or float values")
    if sum(r.width for r in rows) >= _INT32_MAX:
        raise Unsupported("blocks too wide for 32-bit indices")
    if any(dense) and not all(_canonical_block(r) < 2 for r in rows):
        raise Unsupported("a block whose indptr decreases")
    return rows, any(dense)


def _canonical_block(rows: SparseRows) -> int:
    """``_canonical`` of a block; rows a vectorizer has not computed yet are canonical."""
    if type(rows) is LazyRows and rows._done is None:
        return 0
    return _canonical(rows.indptr, rows.indices)


# dtypes scipy keeps as they are (float16 it refuses; longdouble and complex are not compiled)
DENSE_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64,
))


def dense_rows(block: np.ndarray) -> SparseRows:
    """A dense block's entries as scipy keeps them when it stacks it with sparse ones (``coo_array(block)``):
    the nonzero ones in row-major order; a 1-D array is one row."""
    if block.ndim not in (1, 2) or block.dtype not in DENSE_DTYPES:
        raise Unsupported("a dense block other than a 1-D or 2-D array of numbers")
    return nonzero_rows(block.reshape(1, -1) if block.ndim == 1 else block)


def nonzero_rows(matrix: np.ndarray) -> SparseRows:
    """A 2-D array's nonzero entries in row-major order, as CSR rows (scipy's ``coo_array(matrix)`` order)."""
    rows, cols = np.nonzero(matrix)
    indptr = np.zeros(matrix.shape[0] + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=matrix.shape[0]), out=indptr[1:])
    return SparseRows(matrix[rows, cols], cols.astype(np.int32), indptr, matrix.shape[1], sp.csr_matrix)


def _block_rows(block) -> SparseRows:
    if isinstance(block, SparseRows):
        return block
    if isinstance(block, Deferred) or type(block) not in (sp.csr_matrix, sp.csr_array):
        raise Unsupported("a block that is not a CSR matrix")
    if block.indices.dtype != np.int32 or block.indptr.dtype != np.int32:
        raise Unsupported("a block with 64-bit indices")
    if block.indptr[0] != 0 or len(block.data) != block.indptr[-1] or len(block.indices) != len(block.data):
        raise Unsupported("a block with unused storage")
    return SparseRows.of(block)

