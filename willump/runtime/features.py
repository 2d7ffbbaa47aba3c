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
    """The IFV values side by side: CSR when any is sparse, a DataFrame when they all are pandas objects
    and some column holds categories or strings (the model reads them as your model does: LightGBM's
    and HistGradientBoosting's categories), else a dense float array."""
    if all(isinstance(v, (pd.DataFrame, pd.Series)) for v in values) and any(_not_numbers(v) for v in values):
        return _side_by_side(values)
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


def _not_numbers(value) -> bool:
    """Whether a DataFrame or Series holds a column of other than numbers or bools."""
    dtypes = [value.dtype] if isinstance(value, pd.Series) else value.dtypes
    return any(not (pd.api.types.is_numeric_dtype(d) or pd.api.types.is_bool_dtype(d)) for d in dtypes)


def _side_by_side(values: list) -> pd.DataFrame:
    """The pandas values' columns by position (as the function's own stacking joins them, whatever their
    indexes), each keeping its dtype, named f0, f1, ... (names a model takes whatever the IFVs' are)."""
    columns = [v.array if isinstance(v, pd.Series) else v.iloc[:, i].array
               for v in values for i in range(1 if isinstance(v, pd.Series) else v.shape[1])]
    if len({len(c) for c in columns}) > 1:
        raise ValueError("IFV values of different lengths")
    return pd.DataFrame({f"f{i}": column for i, column in enumerate(columns)})
