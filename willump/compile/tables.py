"""Compiled table lookups: chains of ``df.merge(table, on=key, how="left")`` and ``df[columns]``.

A left join against a table with one row per key is a lookup: for each input
row, the table row with the same key, or none. When the joined frame only
reaches other compiled calls (further joins, a column selection, the model),
the call sites keep it as row positions into each table (``JoinedFrame``) and
never build the merged DataFrame; the model kernel gathers the selected
columns straight from the tables. Anything a plain lookup would not
reproduce (duplicate table keys, overlapping column names, key dtypes that
differ, non-numeric features) makes the chain run as written, by pandas.

Each table's key index is built once and kept while the table object and its
pandas blocks are the same objects; feature values are read from the live
column arrays on every call. Replacing a table or a column is noticed; writing
new key values into the existing key column in place is not (assign a new
table instead).
"""

import threading
import weakref

import numpy as np
import pandas as pd

from willump.compile.forms import Deferred, ReceiverKernel, Unsupported
from willump.compile.frames import SelectedColumns, select_columns

_SMALL = 16  # rows looked up one by one in a dict; more go through pandas' vectorized get_indexer
_MAX_ENTRIES = 1024  # per process-wide cache below: past it, the cache starts again


class PreparedTable:
    """A table's key -> row position map, built once, and its live column arrays."""

    def __init__(self, table: pd.DataFrame, keys: tuple):
        self.signature = _signature(table)
        missing = [k for k in keys if k not in table.columns]
        if missing:
            raise Unsupported(f"the key {missing} is not in the table")
        columns = [table[k] for k in keys]
        for key, column in zip(keys, columns):
            if column.hasnans:
                raise Unsupported(f"the table's key column {key!r} has missing values")
        self.key_dtypes = tuple(c.dtype for c in columns)
        self.index = pd.Index(columns[0]) if len(keys) == 1 else pd.MultiIndex.from_arrays(columns)
        if not self.index.is_unique:
            raise Unsupported(f"the table has several rows for some values of {list(keys)} (the join multiplies rows)")
        self._key_columns = columns
        self.positions = None  # key -> row position for a few keys at a time (built once the table is met again; False: keys a dict does not find as pandas does)
        self._small_lookups = 0
        self.columns = [c for c in table.columns if c not in keys]
        self.arrays = {c: table[c].to_numpy() for c in self.columns}
        self.dtypes = {c: table[c].dtype for c in self.columns}

    def _positions(self):
        """A dict of each key (a tuple of several) to its row, when the keys are ints or ``str`` (which a
        dict finds as pandas does), else False. Built for a table met again: a table made anew by each
        call (``songs[["song_id", "language"]]``) is looked up by pandas' hash table alone, which the
        dict's Python objects would cost ten times more than."""
        columns = self._key_columns
        values = [c.tolist() for c in columns]
        if not all(c.dtype.kind in "iu" or all(type(k) is str for k in v) for c, v in zip(columns, values)):
            return False
        found = values[0] if len(columns) == 1 else list(zip(*values))
        return dict(zip(found, range(len(found))))

    def numeric(self, columns: tuple, rows: np.ndarray) -> np.ndarray:
        """These columns at these row positions (-1: NaN) as float64, read from the live column
        arrays, so values written into the table in place are seen. (One row: ``_Gather.one_row``.)"""
        taken = np.column_stack([_take(self.arrays[c], rows) for c in columns]).astype(np.float64)
        if len(rows) and rows.min() < 0:
            taken[rows < 0] = np.nan
        return taken

    def lookup(self, keys: list) -> np.ndarray:
        """Row position of each key (one array per key column), -1 where the table has none."""
        if len(keys[0]) <= _SMALL and self.positions is None:
            self._small_lookups += 1
            if self._small_lookups >= 2:  # (threads may both build it: the same dict)
                self.positions = self._positions()
        if self.positions and len(keys[0]) <= _SMALL:
            found = self.positions
            wanted = keys[0].tolist() if len(keys) == 1 else zip(*[k.tolist() for k in keys])
            return np.array([found.get(_hashable(k), -1) for k in wanted], dtype=np.intp)
        if len(keys) == 1:
            return self.index.get_indexer(keys[0])
        return self.index.get_indexer(pd.MultiIndex.from_arrays(keys))


def _hashable(key):
    """The key as a dict compares it: pandas' NA (a missing ``string`` key, which matches no table
    key) made None, since comparing NA with an equal-hashed key raises."""
    if type(key) is tuple:
        return tuple(None if k is pd.NA else k for k in key)
    return None if key is pd.NA else key


_prepared: dict = {}  # id(table) -> (weakref to table, key columns, PreparedTable)
_lock = threading.Lock()


def prepared(table: pd.DataFrame, key: tuple) -> PreparedTable:
    entry = _prepared.get(id(table))
    if entry is not None and entry[0]() is table and entry[1] == key and entry[2].signature == _signature(table):
        return entry[2]
    result = PreparedTable(table, key)
    with _lock:
        _prepared[id(table)] = (weakref.ref(table), key, result)
    return result


def _signature(table: pd.DataFrame) -> tuple:
    manager = table._mgr
    return (id(manager), id(manager.blocks), id(table.columns))


class _Base:
    """The base frame of one chain of joins, shared by its frames, and its columns read so far."""

    def __init__(self, frame: pd.DataFrame):
        self.frame, self.columns, self.protected = frame, {}, False


class JoinedFrame(Deferred):
    """The result of left joins of ``base`` with tables, as row positions into each table."""

    stands_for = pd.DataFrame
    built_as_written = True  # (by pandas' merge)

    def __init__(self, base: _Base, joins: list, sources: dict, rows: int, parent=None, on=None, table=None):
        self._base, self.joins = base, joins  # joins: [(PreparedTable, positions)]
        self.rows = rows
        self.sources = sources  # column -> join number, None for the base frame
        self._parent, self._on, self._table = parent, on, table  # this is parent.merge(table, on=on, how="left")

    @property
    def base(self) -> pd.DataFrame:
        return self._base.frame

    def base_column(self, name) -> tuple[np.ndarray, object]:
        """``column_of(self.base, name)``, read once per chain of joins (the base frame is protected
        before other code runs, so what was read stays what the original reads)."""
        columns = self._base.columns
        found = columns.get(name)
        if found is None:
            found = columns[name] = column_of(self.base, name)
        return found

    def _build(self):
        if self._parent is None:
            return self.base
        return self._parent.materialize().merge(self._table, on=self._on, how="left")

    def protect(self) -> None:
        """Keep the base frame and the tables as they are now: shallow copies share their data
        copy-on-write, so writes into them (which pandas then makes into copies) are not seen.
        Each frame pins its own table, then its parent's (which it is built from)."""
        if self._parent is None:
            if not self._base.protected:
                self._base.frame, self._base.protected = self._base.frame.copy(deep=False), True
        elif not self._pinned:
            self._table, self._pinned = self._table.copy(deep=False), True
            self._parent.protect()

    _pinned = False

    def merged(self, right: pd.DataFrame, on) -> "JoinedFrame":
        keys = (on,) if isinstance(on, str) else tuple(on)
        if any(k not in self.sources for k in keys):
            raise Unsupported(f"the key {on!r} is not in the left frame")
        table = prepared(right, keys)
        overlap = [c for c in table.columns if c in self.sources]
        if overlap:
            raise Unsupported(f"columns {overlap} are in both frames (pandas renames them)")
        values, present = [], None  # present: rows whose keys are all known, None for all
        for key, table_dtype in zip(keys, table.key_dtypes):
            number = self.sources[key]
            if number is None:
                column, dtype = self.base_column(key)
            else:  # a key brought by an earlier join: rows that found nothing there have a missing key
                source, source_positions = self.joins[number]
                found = source_positions >= 0
                column, dtype = _take(source.arrays[key], source_positions), _with_missing(source.dtypes[key], found)
                if not found.all():
                    present = found if present is None else present & found
            if not _joinable(dtype, table_dtype):
                raise Unsupported(f"key {key!r} is {dtype} on the left and {table_dtype} in the table")
            values.append(column)
        if present is None:
            positions = table.lookup(values)
        else:  # the table has no missing keys, so a missing key finds nothing
            positions = np.full(self.rows, -1, dtype=np.intp)
            positions[present] = table.lookup([v[present] for v in values])
        sources = {**self.sources, **dict.fromkeys(table.columns, len(self.joins))}
        return JoinedFrame(self._base, self.joins + [(table, positions)], sources, self.rows, self, on, right)


_dtype_pairs: dict = {}  # (id, id) -> (dtype, dtype, equal): comparing extension dtypes costs microseconds


def _joinable(a, b) -> bool:
    """Whether keys of dtype ``a`` find the rows pandas' merge finds with table keys of dtype ``b``:
    the same dtype, or two of pandas' string dtypes (``str``, ``string``, any storage; pandas
    compares the text, and a missing key finds nothing in a table that has none). What differs
    then is the dtype of the joined key column, which no compiled gather reads."""
    return _same_dtype(a, b) or (isinstance(a, pd.StringDtype) and isinstance(b, pd.StringDtype))


def _same_dtype(a, b) -> bool:
    if a is b:
        return True
    entry = _dtype_pairs.get((id(a), id(b)))
    if entry is None or entry[0] is not a or entry[1] is not b:
        if len(_dtype_pairs) >= _MAX_ENTRIES:  # dtypes made anew on every call (categoricals)
            _dtype_pairs.clear()
        entry = _dtype_pairs[(id(a), id(b))] = (a, b, bool(a == b))
    return entry[2]


def column_of(frame: pd.DataFrame, name) -> tuple[np.ndarray, object]:
    """(values as ``frame[name].to_numpy()`` gives them, dtype), without building the Series
    when pandas offers its internal column accessor (a one-row Series costs ~10 us)."""
    getter = getattr(frame, "_get_column_array", None)
    if getter is not None:
        array = getter(frame.columns.get_loc(name))
        return np.asarray(array), array.dtype
    series = frame[name]
    return series.to_numpy(), series.dtype


def _take(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``values[positions]`` with some value where a position is -1 (callers mask those rows)."""
    if len(values) == 0:
        return np.zeros((len(positions),) + values.shape[1:], dtype=values.dtype)
    return values[np.where(positions < 0, 0, positions)]


def _with_missing(dtype, present: np.ndarray):
    """The dtype pandas gives a joined column when some rows found no table row."""
    if present.all() or not isinstance(dtype, np.dtype):
        return dtype  # extension dtypes (str, category) hold missing values themselves
    if dtype.kind in "iu":
        return np.dtype(np.float64)
    return np.dtype(object) if dtype.kind == "b" else dtype


class SelectedFrame(Deferred):
    """``joined[columns]``: the columns a model reads, not gathered yet."""

    built_as_written = True

    def __init__(self, joined: JoinedFrame, columns: list):
        self.joined, self.columns = joined, columns

    def _build(self):
        return self.joined.materialize()[self.columns]

    def protect(self) -> None:
        self.joined.protect()


class CompiledMerge(ReceiverKernel):
    """``df.merge(table, on=key, how="left")`` as a ``JoinedFrame``, when its result stays compiled."""

    def __call__(self, left, /, *args, **kwargs):
        raise Unsupported("its result is used as a DataFrame")

    @staticmethod
    def defer(left, /, right=None, how="inner", on=None, **options) -> JoinedFrame:
        keys = [on] if isinstance(on, str) else on
        if (
            options or how != "left" or type(right) is not pd.DataFrame or type(keys) is not list
            or not keys or not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys)
        ):
            raise Unsupported("a merge other than merge(table, on=<column or list of columns>, how='left')")
        if not isinstance(left, JoinedFrame):
            if not left.columns.is_unique:
                raise Unsupported("the frame has duplicate column names")
            left = JoinedFrame(_Base(left), [], dict.fromkeys(left.columns), len(left))
        return left.merged(right, on)


class CompiledSelection:
    """``frame[[columns]]``: kept for the kernels reading it, of a ``JoinedFrame`` the joins' rows
    gathered by the model's kernel, of a DataFrame the columns where they are (``SelectedColumns``);
    read by Python, pandas' frame."""

    @staticmethod
    def __call__(frame, key) -> pd.DataFrame:
        """Read by Python: pandas' frame, built as ``select_columns`` builds it."""
        return select_columns(frame, key)

    @staticmethod
    def defer(frame, key) -> SelectedFrame | SelectedColumns:
        if type(frame) is pd.DataFrame:
            return _selected_columns(frame, key)
        if not isinstance(frame, JoinedFrame) or frame.rows == 0:
            raise Unsupported("a selection from something other than compiled joins with rows")
        if type(key) is not list or len(set(key)) != len(key) or not all(type(c) is str for c in key):
            raise Unsupported("a selection other than a list of distinct column names")
        missing = [c for c in key if c not in frame.sources]
        if missing:
            raise Unsupported(f"columns {missing} are not in the frame (pandas raises)")
        return SelectedFrame(frame, key)

    @staticmethod
    def still_valid() -> bool:
        return True


def _selected_columns(frame: pd.DataFrame, key) -> SelectedColumns:
    """``frame[key]`` for a list of distinct names of columns of a frame with rows and unique column names."""
    if type(key) is not list or not key or not all(type(c) is str for c in key) or len(set(key)) != len(key):
        raise Unsupported("a selection other than a list of distinct column names")
    columns = frame.columns
    if not len(frame) or isinstance(columns, pd.MultiIndex) or not columns.is_unique:
        raise Unsupported("no rows, or repeated or multi-level column names")
    try:
        return SelectedColumns(frame, key, [columns.get_loc(c) for c in key])
    except KeyError:
        raise Unsupported("a column that is not in the frame (pandas raises)") from None


def _grouping(joined: "JoinedFrame", columns: list) -> list:
    """[(source, columns)]: the selected columns grouped by source (None: the base frame), in order."""
    groups = {}
    for column in columns:
        groups.setdefault(joined.sources[column], []).append(column)
    return [(source, tuple(members)) for source, members in groups.items()]


class _Gather:
    """How to gather one selection: its columns grouped by source, and where they go."""

    def __init__(self, joined: "JoinedFrame", columns: list):
        self.groups = _grouping(joined, columns)
        grouped = [c for _, members in self.groups for c in members]
        self.order = np.array([grouped.index(c) for c in columns], dtype=np.intp)  # grouped -> selection order
        dtypes = []
        for source, members in self.groups:
            if source is None:
                dtypes += [joined.base_column(c)[1] for c in members]
            else:
                dtypes += [joined.joins[source][0].dtypes[c] for c in members]
        if not _numeric(dtypes):
            raise Unsupported("a column that is not int, float or bool (LightGBM takes no other)")
        if np.result_type(*[d.type for d in dtypes], np.float32) != np.float64:
            raise Unsupported("columns LightGBM would read as float32")
        self.bools = {c for c, d in zip(grouped, dtypes) if d.kind == "b"}
        sources = {c: source for source, members in self.groups for c in members}
        self.plan = [(sources[c], c) for c in columns]  # one row: each value fetched in selection order
        self.bool_sources = {sources[c] for c in self.bools}

    def one_row(self, joined: "JoinedFrame", base: dict) -> np.ndarray:
        """The 1 x columns matrix, built from scalars: numpy's per-call overhead dominates a row."""
        positions = [rows[0] for _, rows in joined.joins]
        if any(positions[s] < 0 for s in self.bool_sources if s is not None):
            raise Unsupported("a bool column with missing rows (pandas makes it object; LightGBM raises)")
        values = []
        for source, column in self.plan:
            if source is None:
                values.append(base[column][0][0])
            else:
                row = positions[source]
                values.append(joined.joins[source][0].arrays[column][row] if row >= 0 else np.nan)
        return np.array([values], dtype=np.float64)


_gathers: dict = {}  # (columns, table ids, base dtypes) -> (tables, _Gather)


def numeric_matrix(frame: SelectedFrame) -> np.ndarray:
    """The selected columns as LightGBM converts the materialized DataFrame (float64 here:
    ``np.result_type`` of the column dtypes and float32; pandas turns ints with missing
    rows into float64 and NaN, which gives the same values)."""
    joined = frame.joined
    base = {c: joined.base_column(c) for c in frame.columns if joined.sources[c] is None}
    tables = tuple(t for t, _ in joined.joins)
    key = (tuple(frame.columns), tuple(map(id, tables)), tuple(d for _, d in base.values()))
    entry = _gathers.get(key)
    if entry is None or not all(a is b for a, b in zip(entry[0], tables)):  # (an id may be reused)
        if len(_gathers) >= _MAX_ENTRIES:
            _gathers.clear()
        entry = _gathers[key] = (tables, _Gather(joined, frame.columns))
    gather = entry[1]
    if joined.rows == 1:
        return gather.one_row(joined, base)
    parts = []
    for source, members in gather.groups:
        if source is None:
            parts.append(np.column_stack([base[c][0] for c in members]).astype(np.float64))
            continue
        table, rows = joined.joins[source]
        if len(rows) and rows.min() < 0 and gather.bools.intersection(members):
            raise Unsupported("a bool column with missing rows (pandas makes it object; LightGBM raises)")
        parts.append(table.numeric(members, rows))
    matrix = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
    return matrix[:, gather.order]


def _numeric(dtypes) -> bool:
    return all(isinstance(d, np.dtype) and d.kind in "iufb" for d in dtypes)
