"""IFV values as one matrix, for the small and filter models willump trains itself."""

import numpy as np
import pandas as pd
import scipy.sparse as sp


def width(value) -> int:
    """The number of feature columns of an IFV value."""
    if isinstance(value, pd.Series) or (isinstance(value, np.ndarray) and value.ndim == 1):
        return 1
    return value.shape[1]


def feature_matrix(values: list):
    """The IFV values side by side: CSR when any is sparse, else a dense float array."""
    blocks = []
    for value in values:
        if isinstance(value, (pd.DataFrame, pd.Series)):
            value = value.to_numpy(dtype=float)
        if not sp.issparse(value):
            value = np.asarray(value, dtype=float)
            if value.ndim == 1:
                value = value.reshape(-1, 1)
        blocks.append(value)
    if any(sp.issparse(b) for b in blocks):
        return sp.hstack([sp.csr_matrix(b) for b in blocks], format="csr")
    return np.hstack(blocks)
