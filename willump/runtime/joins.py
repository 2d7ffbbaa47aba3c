"""Runtime helpers computing the IFVs of a chain of left joins (see ``willump.graph.joins``).

Each helper checks what makes the split exact: every selected column comes
from exactly one source, no two sources share a column (the chain would
rename them with suffixes), every key is where the join expects it, and no
key matches several rows. Otherwise it raises ``NotSeparable`` and the
function runs as written, which gives the original's result or exception.
"""

import numpy as np
import pandas as pd


class NotSeparable(Exception):
    """This call's tables do not allow computing the joins separately."""


def _keys(on) -> list:
    if isinstance(on, (list, tuple)):
        return list(on)
    if on is None or not isinstance(on, (str, int)):
        raise NotSeparable("join keys the split does not handle")
    return [on]


def _unique(columns) -> list:
    return list(dict.fromkeys(columns))


def _table_columns(frame, columns, joins) -> list[list]:
    """The non-key columns of each joined table, after checking the chain can be split."""
    if not isinstance(frame, pd.DataFrame) or not isinstance(columns, (list, pd.Index, np.ndarray)):
        raise NotSeparable("not a selection of a list of columns")
    if not frame.columns.is_unique:
        raise NotSeparable("duplicate columns")
    available = set(frame.columns)
    per_table = []
    for table, on in joins:
        if not isinstance(table, pd.DataFrame) or not table.columns.is_unique:
            raise NotSeparable("not a DataFrame table")
        keys = _keys(on)
        if any(k not in available or k not in table.columns for k in keys):
            raise NotSeparable("a join key is missing")
        own = [c for c in table.columns if c not in keys]
        if any(c in available for c in own):
            raise NotSeparable("two sources share a column")
        available.update(own)
        per_table.append(own)
    if any(c not in available for c in columns):
        raise NotSeparable("a selected column comes from no source")
    return per_table


def join_base(frame, columns, joins):
    """The selected columns the frame had before the joins."""
    from_tables = {c for own in _table_columns(frame, columns, joins) for c in own}
    for table, on in joins:
        for key in _keys(on):
            # A join keeps the frame's key column as it is only when both sides have its dtype.
            if key in frame.columns and key in columns and frame[key].dtype != table[key].dtype:
                raise NotSeparable(f"key {key!r} has different dtypes in the frame and a table")
    return frame[[c for c in _unique(columns) if c not in from_tables]].reset_index(drop=True)


def join_part(frame, columns, group, joins):
    """The selected columns that the tables of ``group`` bring in, one row per frame row."""
    _table_columns(frame, columns, joins)
    provided, needed = set(), []
    for table, on in group:
        needed += [k for k in _keys(on) if k not in provided]
        provided.update(c for c in table.columns)
    missing = [k for k in needed if k not in frame.columns]
    if missing:
        raise NotSeparable("a key comes from another table")
    result = frame[_unique(needed)]
    for table, on in group:
        result = result.merge(table, on=on, how="left")
    if len(result) != len(frame):
        raise NotSeparable("a key matches several rows")
    own = {c for table, on in group for c in table.columns if c not in _keys(on)}
    return result[[c for c in _unique(columns) if c in own]]


def join_assemble(parts, columns):
    """The frame the chain selects: the parts side by side, in the selection's order."""
    return pd.concat(parts, axis=1)[columns]
