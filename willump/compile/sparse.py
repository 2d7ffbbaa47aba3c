"""Compiled ``scipy.sparse.hstack`` of CSR matrices.

scipy's own fast path for CSR blocks is C++ behind a page of Python checks;
for a few rows the checks dominate. This builds the same matrix (type, index
dtype, values) with one numba loop, for the common case only: CSR blocks of
one dtype and 32-bit indices, stacked into CSR. When the result only reaches
other compiled calls, the blocks are kept side by side (``Stacked``) and not
copied at all.
"""

import numba
import numpy as np
import scipy.sparse as sp

from willump.compile.forms import Deferred, SparseRows, Stacked, Unsupported, csr, stacked_dtype

_INT32_MAX = np.iinfo(np.int32).max


@numba.njit(cache=True, nogil=True)
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


class CompiledHstack:
    """``scipy.sparse.hstack(blocks, format, dtype)`` for CSR matrices; Unsupported otherwise."""

    def __call__(self, blocks, format=None, dtype=None):
        return materialize_stack(_rows_of(blocks, format, dtype))

    @staticmethod
    def defer(blocks, format=None, dtype=None) -> Stacked:
        """As calling it, the blocks kept side by side until the matrix itself is needed."""
        return Stacked(_rows_of(blocks, format, dtype), materialize_stack)

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
    # scipy returns a sparse array if any block is one, else a sparse matrix
    kind = sp.csr_array if any(b.kind is sp.csr_array for b in blocks) else sp.csr_matrix
    return csr(kind, out_data, out_indices, out_indptr, (n_rows, width))


def _rows_of(blocks, format, dtype) -> list:
    if format not in (None, "csr") or dtype is not None or not isinstance(blocks, (list, tuple)) or len(blocks) < 2:
        raise Unsupported("hstack options other than format='csr'")
    rows = [_block_rows(b) for b in blocks]
    n_rows = rows[0].rows
    if any(r.rows != n_rows for r in rows):
        raise Unsupported("blocks of different numbers of rows (scipy raises)")
    if stacked_dtype(rows).kind not in "biuf":
        raise Unsupported("blocks of other than bool, integer or float values")
    if sum(r.width for r in rows) >= _INT32_MAX:
        raise Unsupported("blocks too wide for 32-bit indices")
    return rows


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

