"""Compiled ``scipy.sparse.hstack`` of CSR matrices.

scipy's own fast path for CSR blocks is C++ behind a page of Python checks;
for a few rows the checks dominate. This builds the same matrix (type, index
dtype, values) with one numba loop, for the common case only: CSR blocks of
one dtype and 32-bit indices, stacked into CSR.
"""

import numba
import numpy as np
import scipy.sparse as sp

from willump.compile.text import Unsupported, csr

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


def hstack(blocks, format=None, dtype=None):
    """``scipy.sparse.hstack(blocks, format, dtype)`` for CSR matrices; Unsupported otherwise."""
    if format not in (None, "csr") or dtype is not None or not isinstance(blocks, (list, tuple)) or len(blocks) < 2:
        raise Unsupported("hstack options other than format='csr'")
    kind = type(blocks[0])
    if kind not in (sp.csr_matrix, sp.csr_array) or any(type(b) is not kind for b in blocks):
        raise Unsupported("blocks that are not all CSR of one type")
    n_rows = blocks[0].shape[0]
    data_dtype = blocks[0].data.dtype
    for b in blocks:
        if b.shape[0] != n_rows or b.data.dtype != data_dtype or b.indices.dtype != np.int32 or b.indptr.dtype != np.int32:
            raise Unsupported("blocks of different rows, dtypes, or 64-bit indices")
    width = sum(b.shape[1] for b in blocks)
    nnz = sum(b.indptr[-1] - b.indptr[0] for b in blocks)
    if max(width, nnz) >= _INT32_MAX or any(b.indptr[0] != 0 or len(b.data) != b.indptr[-1] for b in blocks):
        raise Unsupported("blocks too large for 32-bit indices, or with unused storage")
    offsets = np.cumsum([0] + [b.shape[1] for b in blocks[:-1]]).astype(np.int32)
    out_indptr = np.zeros(n_rows + 1, np.int32)
    out_indices = np.empty(nnz, np.int32)
    out_data = np.empty(nnz, data_dtype)
    _stack_rows(
        n_rows, tuple(b.indptr for b in blocks), tuple(b.indices for b in blocks),
        tuple(b.data for b in blocks), offsets, out_indptr, out_indices, out_data,
    )
    return csr(kind, out_data, out_indices, out_indptr, (n_rows, width))
