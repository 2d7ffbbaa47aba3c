"""Compiled ``numpy.hstack`` of the dense blocks features arrive in.

``np.hstack`` turns each block into an array (``atleast_1d``) and concatenates
along the columns (the rows of 1-D blocks). For a few rows its dispatch and
checks cost more than the copy; this does the same steps directly for blocks
of numbers or bools: ndarrays, numpy scalars, and pandas Series or DataFrames whose columns
are numpy numbers (converted as numpy converts them). Anything else, and any
option, runs as written.
"""

import numpy as np
import pandas as pd

from willump.compile.forms import Unsupported

_KINDS = "biuf"  # bools, ints, unsigned ints and floats


class CompiledNumpyHstack:
    """``numpy.hstack(blocks)``; Unsupported for other blocks or options."""

    def __call__(self, blocks, **options):
        if options or type(blocks) not in (list, tuple) or not blocks:
            raise Unsupported("numpy.hstack options, or blocks not written as a list or tuple")
        arrays = [_array(block) for block in blocks]
        if any(a.dtype.kind not in _KINDS for a in arrays):
            raise Unsupported("blocks of other than bool, integer or float values")
        return np.concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1)

    @staticmethod
    def still_valid() -> bool:
        return True


def _array(block) -> np.ndarray:
    """The block as ``np.atleast_1d`` makes it."""
    kind = type(block)
    if kind is pd.Series or kind is pd.DataFrame:
        dtypes = [block.dtype] if kind is pd.Series else block.dtypes.tolist()
        if not all(isinstance(d, np.dtype) for d in dtypes):
            raise Unsupported("a pandas block with extension dtypes")
    elif kind is not np.ndarray and not isinstance(block, np.generic):
        raise Unsupported(f"a block of type {kind.__name__}")
    array = np.asanyarray(block)
    return array.reshape(1) if array.ndim == 0 else array
