"""Selecting rows of a batch: what cascades and caches compute features for.

A batch is whatever the function takes: a DataFrame, a Series, an array, a
sparse matrix, a list. Its length is that of the first argument that has rows;
every argument of that same length is taken to be aligned with it and is cut
to the selected rows, the others (models, tables, options) are passed as they are.
"""

import numpy as np
import pandas as pd
import scipy.sparse


def row_count(value) -> int | None:
    """The number of rows of a batch-like value, or None for anything else."""
    if isinstance(value, (pd.DataFrame, pd.Series, list, tuple)):
        return len(value)
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        return value.shape[0]
    if scipy.sparse.issparse(value):
        return value.shape[0]
    return None


def batch_length(arguments: dict) -> int | None:
    """The number of rows of the batch: that of the first argument that has rows, else None."""
    return first_row_count(arguments.values())


def first_row_count(values) -> int | None:
    """The number of rows of the first of ``values`` that has rows, else None.

    (A plain loop: every call of an optimized function counts its rows, and a generator
    cost a single row's call more than its rows take to count.)"""
    for value in values:
        rows = row_count(value)
        if rows is not None:
            return rows
    return None


def take_rows(value, positions: np.ndarray):
    """The rows of ``value`` at ``positions`` (integer positions, in that order)."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        return value.iloc[positions]
    if isinstance(value, np.ndarray):
        return value[positions]
    if scipy.sparse.issparse(value):
        return value.tocsr()[positions]
    if isinstance(value, list):
        return [value[i] for i in positions]
    if isinstance(value, tuple):
        return tuple(value[i] for i in positions)
    raise TypeError(f"cannot select rows of a {type(value).__name__}")


def take_argument_rows(arguments: dict, positions, batch_names=None) -> dict:
    """The function's arguments restricted to the rows at ``positions``.

    ``batch_names``, when known, are the arguments that hold rows; otherwise every
    argument as long as the first batch-like one is taken to.
    """
    positions = np.asarray(positions, dtype=np.intp)
    counts = {name: row_count(value) for name, value in arguments.items()}
    if batch_names is not None:
        counts = {name: (count if name in batch_names else None) for name, count in counts.items()}
    batch = next((n for n in counts.values() if n is not None), None)
    if batch is None:
        raise TypeError(
            "cannot select rows: no argument is a batch (DataFrame, Series, array, sparse matrix or list)"
        )
    if positions.size and (positions.min() < -batch or positions.max() >= batch):
        raise IndexError(f"row positions must be within the batch of {batch} rows")
    return {
        name: take_rows(value, positions) if counts[name] == batch else value
        for name, value in arguments.items()
    }
