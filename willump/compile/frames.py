"""Compiled pandas operations that build DataFrames: ``frame[names]``, ``frame.drop(columns=...)``,
``frame.fillna(...)``, ``pd.concat([...], axis=1)``, ``pd.DataFrame({...})`` and ``frame.assign(...)``,
and the arrays of ``frame[names].values`` and ``.to_numpy()``.

pandas spends most of a one-row call of these on checks, alignment and building Index
objects (``pd.DataFrame({...})`` of six Series costs more than the arithmetic making them).
Here the frame's BlockManager is put together directly, with the blocks pandas would make:
the same dtypes, placements and memory order (a model given the frame turns it into an array
whose layout follows the blocks), so that anything reading the frame afterwards sees pandas'
own object. Each function raises ``Unsupported`` for what it does not reproduce (other
options, misaligned indexes, repeated or non-``str`` column names, extension dtypes, attrs or
flags), and the call then runs as written.
"""

import itertools

import numpy as np
import pandas as pd
from pandas._config import using_string_dtype
from pandas._libs.internals import BlockPlacement
from pandas._libs.lib import maybe_indices_to_slice
from pandas.core.array_algos.take import take_nd
from pandas.core.construction import sanitize_array
from pandas.core.dtypes.cast import find_common_type
from pandas.core.dtypes.missing import isna
from pandas.core.indexes.api import get_objs_combined_axis
from pandas.core.internals.blocks import ensure_block_shape, extend_blocks, new_block_2d
from pandas.core.internals.construction import _extract_index
from pandas.core.internals.managers import BlockManager, _merge_blocks, create_block_manager_from_column_arrays

from willump.compile.forms import (
    Columns, Deferred, FrameColumns, ReceiverKernel, Unsupported, kind_of, materialized, side_by_side,
)

_KINDS = "biuf"  # bools, ints, unsigned ints and floats
_FLOAT64 = np.dtype(np.float64)
_EXACT_FLOAT = 2**53


def plain_frame(frame, numbers: bool = True) -> pd.DataFrame:
    """``frame`` (or the DataFrame a compiled form stands for) when pandas would carry nothing
    over but its axes and blocks: unique ``str`` column names, no attrs or flags, and (``numbers``)
    numpy blocks of numbers or bools."""
    if isinstance(frame, Deferred) and frame.stands_for is pd.DataFrame:
        frame = frame.materialize()
    if type(frame) is not pd.DataFrame:
        raise Unsupported(f"a value of type {type(frame).__name__}")
    if frame.attrs or not frame.flags.allows_duplicate_labels:
        raise Unsupported("attrs or flags (pandas carries them over)")
    _check_names(frame.columns)
    if numbers:
        _check_blocks(frame._mgr.blocks)
    return frame


def _check_blocks(blocks, kinds: str = _KINDS) -> None:
    for block in blocks:
        if not isinstance(block.values, np.ndarray) or block.values.dtype.kind not in kinds:
            raise Unsupported(f"a column of dtype {block.values.dtype}")


def _check_names(columns: pd.Index) -> None:
    if type(columns) is not pd.Index or not isinstance(columns.dtype, pd.StringDtype):
        raise Unsupported("column names other than an Index of dtype str")
    if not columns.is_unique:
        raise Unsupported("repeated column names")


def plain_series(series) -> pd.Series:
    """``series`` when it is a Series of numpy numbers or bools named by a ``str`` (or None),
    without attrs or flags."""
    if type(series) is not pd.Series:
        raise Unsupported(f"a value of type {type(series).__name__}")
    if not isinstance(series.dtype, np.dtype) or series.dtype.kind not in _KINDS:
        raise Unsupported(f"a Series of dtype {series.dtype}")
    if series.attrs or not series.flags.allows_duplicate_labels:
        raise Unsupported("attrs or flags (pandas carries them over)")
    if series.name is not None and type(series.name) is not str:
        raise Unsupported(f"a Series named by a {type(series.name).__name__}")
    return series


def consolidate(manager: BlockManager) -> None:
    """``manager._consolidate_inplace()``: ``merged`` blocks where they are not consolidated."""
    if manager.is_consolidated():
        return
    manager.blocks = merged(manager.blocks)
    manager._is_consolidated = manager._known_consolidated = True
    manager._rebuild_blknos_and_blklocs()


def merged(blocks, copied: bool = False) -> tuple:
    """pandas' ``_consolidate`` of the blocks: its own merge of each dtype's blocks (``_merge_blocks``), in
    its order, the blocks grouped by ``_consolidate_key`` kept per numpy dtype (its ``dtype.name`` costs
    ~1 us a block: most of consolidating a frame read_csv left a block a column). ``copied``: as the
    blocks' deep copies would be (a merged block is new memory: only the others are copied)."""
    result = []
    for (can_consolidate, dtype), group in itertools.groupby(sorted(blocks, key=_consolidate_key), _consolidate_key):
        group = list(group)
        if copied and not (can_consolidate and len(group) > 1):
            group = [block.copy(deep=True) for block in group]
        blocks_of_dtype, _ = _merge_blocks(group, dtype=dtype, can_consolidate=can_consolidate)
        result = extend_blocks(blocks_of_dtype, result)
    return tuple(result)


def _consolidate_key(block) -> tuple:
    dtype = block.dtype
    if not isinstance(dtype, np.dtype):
        return block._consolidate_key
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = dtype.name
    return block._can_consolidate, name


_dtype_names = {}


def frame_of_manager(manager: BlockManager) -> pd.DataFrame:
    return pd.DataFrame._from_mgr(manager, manager.axes)


def matrix_frame(matrix: np.ndarray, columns: pd.Index, index: pd.Index) -> pd.DataFrame:
    """``DataFrame(matrix, index=index, columns=columns)`` of a new 2-D numpy array of one of its own dtypes:
    one block of its transpose (pandas' copy of a column-major matrix transposed has the same layout)."""
    block = new_block_2d(matrix.T, placement=BlockPlacement(slice(0, matrix.shape[1])))
    return frame_of_manager(BlockManager((block,), [columns, index], verify_integrity=False))


# frame[names], frame.drop(columns=names)

_last_selection = (None, None, None)  # (columns, key, positions) of the last selection: frames often share columns


def select_columns(frame, key) -> pd.DataFrame:
    """``frame[key]`` for a list of column names the frame has (DataFrame.take along the columns)."""
    frame = plain_frame(frame, numbers=False)  # (only the columns selected)
    if type(key) is not list or not key or not all(type(k) is str for k in key):
        raise Unsupported("columns selected by other than a list of str")
    global _last_selection
    columns = frame.columns
    last_columns, last_key, positions = _last_selection  # (replaced whole: threads may select at once)
    if last_columns is not columns or last_key != key:
        positions = np.array(_positions_of(columns, key), dtype=np.intp)
        _last_selection = (columns, list(key), positions)
    return _taken(frame, positions, tuple(key))


def _positions_of(columns: pd.Index, names) -> list:
    try:  # (get_loc: get_indexer would build an Index of the names)
        return [columns.get_loc(name) for name in names]
    except KeyError:
        raise Unsupported("a column the frame does not have (pandas raises)") from None


def _taken(frame: pd.DataFrame, positions: np.ndarray, names: tuple) -> pd.DataFrame:
    """The frame of the columns at ``positions`` (named ``names``) as ``frame[names]`` takes them
    (the blocks' columns; ``BlockManager.take``)."""
    manager = frame._mgr
    # (pandas' own, for any block, as reindex_indexer asks: one block's columns a constant step apart are a view of
    # it, a negative step too, whose product numpy sums in another order than a copy's)
    blocks = tuple(manager._slice_take_blocks_ax0(positions, fill_value=None, only_slice=False, use_na_proxy=False))
    labels = _labels(frame.columns, positions, names)
    return frame_of_manager(BlockManager(blocks, [labels, frame.index.view()], verify_integrity=False))


def _labels(columns: pd.Index, positions, names: tuple) -> pd.Index:
    """``columns.take(positions)``, built once per ``names`` (a view: a name may be set on it)."""
    return _cached((type(columns), columns.dtype, *_name_key(columns.name), names), lambda: columns.take(positions))


def _name_key(name) -> tuple:
    """An Index's name in a key: with its type (1, 1.0 and True are equal keys of a dict)."""
    return type(name), name


def drop_columns(frame, labels, errors: str = "raise") -> pd.DataFrame:
    """``frame.drop(columns=labels)`` of a name or a list of names (a tuple is one name): the other columns,
    as pandas' drop reindexes them (views of the blocks: ``only_slice``)."""
    frame = plain_frame(frame, numbers=False)
    labels = [labels] if type(labels) is str else labels
    if type(labels) is not list or not labels or not all(type(k) is str for k in labels):
        raise Unsupported("columns dropped by other than a str or a list of str")
    columns = frame.columns
    if errors == "ignore":
        labels = [name for name in labels if name in columns]
    elif errors != "raise":
        raise Unsupported(f"errors={errors!r}")
    _positions_of(columns, labels)  # (each one the frame has)
    dropped = set(labels)
    kept = [(position, name) for position, name in enumerate(columns.tolist()) if name not in dropped]
    if not kept:
        raise Unsupported("no columns left")
    positions, names = zip(*kept)
    manager = frame._mgr
    labels = _labels(columns, positions, names)
    manager = manager.reindex_indexer(labels, np.array(positions, dtype=np.intp), axis=0, allow_dups=True, only_slice=True)
    return frame_of_manager(manager)


_reindexed = {}  # (the frame's names and their Index's name, the names asked for) -> (Index, indexer)


def reindex_columns(frame, columns, fill_value=None) -> pd.DataFrame:
    """``frame.reindex(columns=names, fill_value=number)`` for a list or an Index of str (``pd.get_dummies``'
    columns made the training ones): pandas' own steps (an Index identical to the frame's: a shallow copy), ``Index.reindex`` of the columns (over half of a one-row
    call: an Index of the names, their positions) done once per pair of name lists, a view of its Index
    given to each frame; then ``_reindex_with_indexers``, which fills the missing columns."""
    frame = plain_frame(frame, numbers=False)
    if fill_value is not None and type(fill_value) not in (int, float, bool):
        raise Unsupported("a fill_value other than a number")
    own = frame.columns
    given = type(columns) is pd.Index  # (the training frame's ``.columns``: pandas keeps that Index itself)
    if given:
        if own.identical(columns):  # (pandas' shortcut)
            return frame.copy(deep=False)
        names = _str_names_in(columns)
    elif type(columns) is list and all(type(c) is str for c in columns):
        names = tuple(columns)
    else:
        raise Unsupported("columns other than a list or an Index of str")
    key = (_str_names_in(own), *_name_key(own.name), names, given and _name_key(columns.name), given and columns.dtype)
    found = _reindexed.get(key)
    if found is None:
        if len(_reindexed) > 1000:
            _reindexed.clear()
        found = _reindexed[key] = own.reindex(columns)
    target, indexer = found
    target = columns if given else target._view()  # (a list: pandas builds an Index of it each call)
    result = frame._reindex_with_indexers({1: [target, indexer]}, fill_value=fill_value, allow_dups=False)
    return result.__finalize__(frame, method="reindex")


class CompiledDrop(ReceiverKernel):
    """``frame.drop(columns=names)`` or ``frame.drop(names, axis=1)`` (``drop_columns``); read only by
    kernels, the other columns (``FrameColumns``). Rows dropped, levels or ``inplace`` run as written."""

    def __call__(self, frame, /, *args, **kwargs):
        return drop_columns(frame, *_dropped(*args, **kwargs))

    def defer(self, frame, /, *args, **kwargs):
        columns, errors = _dropped(*args, **kwargs)
        if not _has_index(frame) or type(columns) not in (str, list) or errors not in ("raise", "ignore"):
            return drop_columns(frame, columns, errors)
        names = {columns} if type(columns) is str else set(columns)
        labels, arrays = _labelled(frame)
        if errors == "raise" and not names <= set(labels) or len(set(labels)) != len(labels):
            return drop_columns(frame, columns, errors)  # (pandas raises, or the frame refuses)

        def build():
            real = materialized(frame)
            try:
                return drop_columns(real, columns, errors)
            except Unsupported:
                return real.drop(columns=columns, errors=errors)

        kept = [(label, array) for label, array in zip(labels, arrays) if label not in names]
        if not kept or not _numbers([array for _, array in kept]):
            return drop_columns(frame, columns, errors)
        return FrameColumns([label for label, _ in kept], [array for _, array in kept], frame.index, build)


def _dropped(labels=None, *, axis=0, index=None, columns=None, level=None, inplace=False, errors="raise") -> tuple:
    """(columns, errors) of ``DataFrame.drop``'s arguments dropping columns; Unsupported for others."""
    if labels is not None and columns is None and axis in (1, "columns"):
        columns = labels
    elif labels is not None or axis not in (0, "index"):
        raise Unsupported("rows dropped")
    if index is not None or columns is None or level is not None or inplace is not False:
        raise Unsupported("rows, levels or inplace dropped")
    return columns, errors


def _labelled(frame) -> tuple:
    """(labels, arrays) of kept ``Columns`` or of a DataFrame's columns."""
    if isinstance(frame, Columns):
        return frame.labels, frame.arrays()
    frame = plain_frame(frame, numbers=False)
    return frame.columns.tolist(), [frame._get_column_array(i) for i in range(frame.shape[1])]


class SelectedColumns(Columns):
    """Columns of a DataFrame by name, standing for ``frame[labels]`` (the frame a
    ColumnTransformer gives a branch, or the user's ``df[columns]`` read only by compiled
    calls): kernels read the columns where they are."""

    def __init__(self, frame: pd.DataFrame, labels: list, positions: list):
        self.frame, self.labels, self.positions = frame, labels, positions

    @property
    def index(self) -> pd.Index:
        return self.frame.index

    def arrays(self) -> list:
        frame = self.frame
        return [frame._get_column_array(i) for i in self.positions]

    def protect(self) -> None:
        """Selected now: code that runs before a kernel reads the columns may change the frame."""
        self.frame, self.positions = self.materialize(), list(range(len(self.labels)))

    def _build(self):
        try:  # (pandas' frame[labels] takes ~250 us of a one-row frame)
            return select_columns(self.frame, self.labels)
        except Unsupported:
            return self.frame[self.labels]


# frame.fillna(value)

def fillna(frame, value) -> pd.DataFrame:
    """``frame.fillna(value)``: a number fills each block (``BlockManager.fillna``); a Series or dict
    of numbers fills column by column, each filled column set as ``result[name] = ...`` sets it
    (its own block at the end, the block it left split), as pandas does. Columns of numbers, bools and
    objects (numbers ``replace`` put in text)."""
    frame = plain_frame(frame, numbers=False)
    _check_blocks(frame._mgr.blocks, _KINDS + "O")
    if isinstance(value, (pd.Series, dict)):
        return _fill_columns(frame, _fill_items(value))
    number = _number(value)
    if not len(frame.columns):
        raise Unsupported("no columns")
    manager = frame._mgr.fillna(value=number, limit=None, inplace=False)
    return frame_of_manager(manager)


class CompiledFrameCopy(ReceiverKernel):
    """``frame.copy()``: pandas' ``BlockManager.copy(deep=True)``, each block's values copied, views of the
    axes, the blocks consolidated (``consolidate``); ``copy(deep=False)`` runs as written."""

    def __call__(self, frame, /, deep=True):
        if deep is not True:
            raise Unsupported("a copy other than deep=True")
        frame = plain_frame(frame, numbers=False)
        manager = frame._mgr
        if manager.is_consolidated():
            blocks = tuple(block.copy(deep=True) for block in manager.blocks)
        else:
            blocks = merged(manager.blocks, copied=True)
        return frame_of_manager(BlockManager(blocks, [axis.view() for axis in manager.axes], verify_integrity=False))


class CompiledFrameFillna(ReceiverKernel):
    """``frame.fillna(value)`` whose value is not an expression of names (a dict display, a call):
    ``fillna``; other arguments run as written."""

    def __call__(self, frame, /, value=None, **options):
        if options or value is None:
            raise Unsupported("options (method, axis, inplace, limit)")
        return fillna(frame, value)

    def defer(self, frame, /, value=None, **options):
        """Read only by kernels, a fill by a dict or Series of numbers keeps the columns filled
        (``FrameColumns``), not the block a filled column pandas' setting makes of each (~2 us a column)."""
        if options or not isinstance(value, (pd.Series, dict)) or not _has_index(frame):
            return self(frame, value, **options)
        labels, arrays = _labelled(frame)
        if len(set(labels)) != len(labels) or not _numbers(arrays):
            return self(frame, value, **options)
        filled = list(arrays)
        for position, column in _filled_columns(labels, arrays.__getitem__, _fill_items(value)).items():
            if column is not UNCHANGED:
                filled[position] = column

        def build():
            real = materialized(frame)
            try:
                return fillna(real, value)
            except Unsupported:
                return real.fillna(value)

        return FrameColumns(labels, filled, frame.index, build)


def _number(value):
    """A fill value as pandas' fillna passes it on, for numbers (not bools)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise Unsupported(f"fillna with a {type(value).__name__}")
    return value


def _fill_items(value) -> list:
    if type(value) is pd.Series:
        if not isinstance(value.dtype, np.dtype) or value.dtype.kind not in _KINDS:
            raise Unsupported(f"fillna with a Series of dtype {value.dtype}")
        items = list(value.items())
    elif type(value) is dict:
        items = list(value.items())
    else:
        raise Unsupported(f"fillna with a {type(value).__name__}")
    if not items:
        raise Unsupported("fillna with nothing to fill")
    return items


def _fill_columns(frame: pd.DataFrame, items: list) -> pd.DataFrame:
    labels = frame.columns.tolist()
    return with_columns_set(frame, _filled_columns(labels, frame._mgr.iget_values, items))


def _filled_columns(labels: list, column, items: list) -> dict:
    """position -> the filled array (or ``UNCHANGED``) of each name filled, in the order pandas sets them
    (``column(position)``: the column's array); names the frame does not have are skipped, as pandas skips them."""
    positions, filled = {label: i for i, label in enumerate(labels)}, {}
    for name, number in items:
        if type(name) is not str:
            raise Unsupported("fill values keyed by other than str")
        position = positions.get(name)
        if position in filled:
            raise Unsupported("a column filled twice")
        if position is not None:
            filled[position] = _filled(column(position), _number(number))
    return filled


def with_columns_set(frame: pd.DataFrame, arrays: dict) -> pd.DataFrame:
    """A new frame of ``frame``'s columns, each position of ``arrays`` (in its order) set to its new array
    as ``result.iloc[:, position] = ...`` (``BlockManager.iset``) sets it on a shallow copy; a position
    mapped to ``UNCHANGED`` is set to the column's own values, shared with copy-on-write's references as a
    Series pandas left unchanged (a ``copy(deep=False)``) shares them."""
    manager = frame._mgr
    layout = _layout_after_setting(manager, tuple(arrays))
    blocks = []
    for piece in layout:
        if piece[0] == "new":
            position, values, refs = piece[1], arrays[piece[1]], None
            if values is UNCHANGED:
                values, refs = manager.iget_values(position), manager.blocks[manager.blknos[position]].refs
            blocks.append(new_block_2d(ensure_block_shape(values, ndim=2), BlockPlacement(piece[2]), refs=refs))
        else:
            _, number, start, stop = piece
            block = manager.blocks[number]
            locations = block.mgr_locs.as_array[start:stop]
            blocks.append(block.getitem_block_columns(slice(start, stop), BlockPlacement(locations)))
    return frame_of_manager(BlockManager(tuple(blocks), [frame.columns.view(), frame.index.view()],
                                         verify_integrity=False))


UNCHANGED = object()  # (with_columns_set: the column's own values, shared)


def _filled(values: np.ndarray, number):
    """A new array of ``Series.fillna(number)`` of one column, or ``UNCHANGED`` where nothing is missing
    (pandas' Series then shares the column's values); Unsupported where pandas would change the dtype."""
    kind = values.dtype.kind
    if kind in "biu":  # (no missing values)
        return UNCHANGED
    if kind == "O":  # (Block.where: numpy's where of the values and the number)
        missing = isna(values)
        return np.where(~missing, values, number) if missing.any() else UNCHANGED
    if values.dtype != _FLOAT64:
        raise Unsupported(f"fillna of a column of dtype {values.dtype}")
    if isinstance(number, (int, np.integer)) and not -_EXACT_FLOAT <= number <= _EXACT_FLOAT:
        raise Unsupported("fillna with an int beyond float64's exact ints")
    mask = np.isnan(values)
    if not mask.any():
        return UNCHANGED
    result = values.copy()
    np.putmask(result, mask, np.float64(number))
    return result


def _layout_after_setting(manager: BlockManager, positions: tuple) -> list:
    """The blocks after ``BlockManager.iset`` of a new array at each position in turn: a block of one
    column is replaced where it stands; a column of a wider block leaves it split around the column
    (the first piece where the block stood, the others at the end), and a new block at the end.
    Pieces: ("block", number, start, stop) for rows of an existing block, ("new", position, placement)."""
    key = (tuple(tuple(b.mgr_locs.as_array.tolist()) for b in manager.blocks), positions)
    layout = _layouts.get(key)
    if layout is None:
        pieces = [("block", n, 0, len(b.mgr_locs)) for n, b in enumerate(manager.blocks)]
        locations = [list(b.mgr_locs.as_array) for b in manager.blocks]

        def columns_of(piece):
            return [piece[1]] if piece[0] == "new" else locations[piece[1]][piece[2]:piece[3]]

        for position in positions:
            at = next(i for i, p in enumerate(pieces) if position in columns_of(p))
            piece = pieces[at]
            if piece[0] == "new" or piece[3] - piece[2] == 1:  # a block of one column: replaced where it stands
                placement = piece[2] if piece[0] == "new" else slice(position, position + 1)
                pieces[at] = ("new", position, placement)
                continue
            row = columns_of(piece).index(position) + piece[2]
            parts = [(piece[2], row), (row + 1, piece[3])]
            parts = [("block", piece[1], a, b) for a, b in parts if b > a]
            pieces[at:at + 1] = parts[:1]
            pieces.extend(parts[1:])
            pieces.append(("new", position, np.array([position], dtype=np.intp)))
        if len(_layouts) >= _KEPT_LAYOUTS:
            _layouts.clear()
        layout = _layouts[key] = pieces
    return layout


_layouts, _KEPT_LAYOUTS = {}, 256  # (a frame's layout and the positions set, as callers meet them again)


# pd.concat([...], axis=1)

def concat_columns(objs, keys=None) -> pd.DataFrame:
    """``pd.concat(objs, axis=1, keys=keys)`` of Series and DataFrames with one index: Series alone
    become a block each (named by ``keys``); with DataFrames, each input's blocks side by side."""
    if type(objs) not in (list, tuple) or not objs:
        raise Unsupported("objects not written as a list or tuple")
    objs = [o.materialize() if isinstance(o, Deferred) and o.stands_for in (pd.DataFrame, pd.Series) else o for o in objs]
    if all(type(o) is pd.Series for o in objs):
        return _concat_series(objs, keys)
    if keys is not None:
        raise Unsupported("keys of DataFrames (pandas makes MultiIndex columns)")
    frames = [_as_frame(o) for o in objs]
    index = _common_index(frames, axis=0)
    parts = [f.columns for f in frames]
    if len(parts) > 1:  # (keyed by the parts' arrays, which Index views share and the cache holds)
        key = ("append", *[(id(c._data), c.name) for c in parts])
        columns = _cached(key, lambda: parts[0].append(parts[1:]), [c._data for c in parts])
    else:
        columns = parts[0]
    if not columns.is_unique:
        raise Unsupported("repeated column names")
    manager = BlockManager.concat_horizontal([f._mgr for f in frames], [columns, index])
    return frame_of_manager(manager)


def _as_frame(obj) -> pd.DataFrame:
    """A DataFrame as it is, a named Series as the one-column frame pandas makes of it."""
    if type(obj) is pd.Series:
        series = plain_series(obj)
        if series.name is None:
            raise Unsupported("an unnamed Series among DataFrames")
        return _columns_frame([series], column_names((series.name,)), series.index)
    return plain_frame(obj, numbers=False)  # (pandas puts the blocks side by side, whatever they hold)


def _concat_series(objs: list, keys) -> pd.DataFrame:
    series = [plain_series(s) for s in objs]
    if keys is None:  # named by the Series' names (pandas numbers unnamed ones)
        keys = [s.name for s in series]
        if None in keys:
            raise Unsupported("an unnamed Series (pandas numbers the columns)")
    if type(keys) not in (list, tuple) or len(keys) != len(series) or not all(type(k) is str for k in keys):
        raise Unsupported("keys other than one str per Series")
    columns = column_names(tuple(keys))
    if not columns.is_unique:
        raise Unsupported("repeated keys")
    return _columns_frame(series, columns, _common_index(series, axis=0))


def _common_index(objs: list, axis: int) -> pd.Index:
    """The row index pandas gives objects with equal indexes; Unsupported when they differ (pandas aligns)."""
    first = objs[0].index
    if not all(o.index is first or o.index.equals(first) for o in objs[1:]):
        raise Unsupported("different indexes (pandas aligns them)")
    if not first.is_unique:
        raise Unsupported("repeated index labels")
    if _plain_and_named_alike([o.index for o in objs]):
        return first
    return get_objs_combined_axis(objs, axis=axis, intersect=False, sort=False)[0]


def kept_columns(objs: list, build, names: list | None = None, index: pd.Index | None = None) -> FrameColumns:
    """The DataFrame of ``objs`` side by side (frames, kept ``Columns``, Series named by their name or
    by ``names``), kept as its columns for the kernels reading it (``build()`` makes it): numpy numbers
    or bools with unique ``str`` names, and one unique index (``index``, which the others equal, or the
    one pandas' concat gives). Unsupported for anything else."""
    labels, arrays = [], []
    for obj, name in zip(objs, names or [None] * len(objs)):
        if _has_index(obj):
            own_labels, own_arrays = _labelled(obj)
            labels += own_labels
            arrays += own_arrays
        elif type(obj) is pd.Series:
            labels.append(plain_series(obj).name if name is None else name)
            arrays.append(obj._values)
        else:
            raise Unsupported(f"a {kind_of(obj)} among the objects kept as columns")
    if not _numbers(arrays):
        raise Unsupported("columns other than numpy numbers or bools")
    if not all(type(label) is str for label in labels) or len(set(labels)) != len(labels):
        raise Unsupported("repeated column names, or names other than str")
    return FrameColumns(labels, arrays, _kept_index([obj.index for obj in objs], index), build)


def _numbers(arrays: list) -> bool:
    """Whether the columns are numpy arrays of numbers or bools (what kernels reading columns read)."""
    return all(type(a) is np.ndarray and a.dtype.kind in _KINDS for a in arrays)


def _kept_index(indexes: list, index: pd.Index | None) -> pd.Index:
    """``index`` when the indexes equal it (assign aligns them to it), else the index pandas' concat
    gives indexes equal in values, dtype and name (its union is the first's, as pandas' frame has it
    up to identity); Unsupported where pandas aligns or combines them."""
    first = indexes[0] if index is None else index
    if not all(i is first or i.equals(first) and (index is not None or i.dtype == first.dtype and i.name == first.name)
               for i in indexes):
        raise Unsupported("different indexes (pandas aligns or combines them)")
    if not first.is_unique:
        raise Unsupported("repeated index labels")
    return first


def _plain_and_named_alike(indexes: list) -> bool:
    """Whether pandas' union of these equal indexes is the first itself: all of the exact type ``Index``
    (its "array" kind, where equal indexes are not unioned) and one name among them (a set of one)."""
    return all(type(i) is pd.Index for i in indexes) and len({i.name for i in indexes}) == 1


def _ranges_union(indexes: list) -> pd.RangeIndex | None:
    """pandas' union of several equal RangeIndexes (its "special" kind: ``union`` one by one, each a
    shallow copy named by ``get_op_result_name``): a new RangeIndex, named when every name is the
    first's; None for other indexes or names (``_extract_index`` then). (~2 us; pandas' ~45 us for four.)"""
    if len(indexes) < 2 or not all(type(i) is pd.RangeIndex and type(i.name) in _PLAIN_NAMES for i in indexes):
        return None
    name = indexes[0].name
    return indexes[0]._rename(name if all(i.name == name for i in indexes) else None)


_PLAIN_NAMES = (type(None), str)  # (names get_op_result_name compares with ==)


def _columns_frame(series: list, columns: pd.Index, index: pd.Index) -> pd.DataFrame:
    """``DataFrame(dict(enumerate(series)), index=index, copy=False)``: a block per Series, viewing
    its values (tracked as pandas tracks them), then named by ``columns``."""
    arrays, references = [], []
    for s in series:
        if s.index is not index and not s.index.equals(index):
            raise Unsupported("different indexes (pandas aligns them)")
        arrays.append(s._values)
        references.append(s._references if s.index._id is index._id else None)
    if any(r is None for r in references):  # pandas reindexes those: a copy
        arrays = [a if r is not None else a.copy() for a, r in zip(arrays, references)]
    manager = create_block_manager_from_column_arrays(arrays, [columns, index], False, references)
    return frame_of_manager(manager)


def column_names(names: tuple) -> pd.Index:
    """``Index(list(names))``: a view of one built once per names."""
    return _cached(("names", using_string_dtype(), *names), lambda: pd.Index(list(names)))


_indexes = {}  # Index objects of column names, built once (each frame gets a view: a name may be set on it)
_names_of = {}  # id of such an Index's cache (its views share it) -> (its names, the Index)


def _cached(key: tuple, build, held=()) -> pd.Index:
    """A view of the Index ``build()`` gives, built once per key (``held``: objects whose ids are in
    the key, kept alive with it). Its uniqueness and hash table are computed once, and shared by the views."""
    found = _indexes.get(key)
    if found is None:
        if len(_indexes) > 1000:
            _indexes.clear()
            _names_of.clear()
        index = build()
        index.is_unique  # noqa: B018 (computed now, for every view)
        found = _indexes[key] = (index, held)
        _names_of[id(index._cache)] = (tuple(index.tolist()), index)
    return found[0]._view()


def names_known(columns: pd.Index) -> tuple | None:
    """The names of an Index built here or of a view of one (a frame's columns), without pandas'
    ``tolist`` (~40 us for pyarrow-backed str names); None for other Indexes."""
    known = _names_of.get(id(columns._cache))
    return known[0] if known is not None and known[1]._cache is columns._cache else None


def _str_names_in(columns: pd.Index) -> tuple:
    """The names an Index holds, all of type ``str`` (Unsupported otherwise: a key compares ``np.str_``
    names equal to them); known for the Indexes built here and their views (pandas' ``tolist`` of
    str names costs ~5-10 us)."""
    names = names_known(columns)
    if names is None:
        names = tuple(columns.tolist())
    if not all(type(name) is str for name in names):
        raise Unsupported("column names other than str (np.str_)")
    return names


# pd.DataFrame({...})

def frame_from_dict(data) -> pd.DataFrame:
    """``pd.DataFrame(data)`` of a dict of Series with one index, keyed by str: the columns
    consolidated into a block per dtype, as pandas' constructor copies them."""
    if type(data) is not dict or not data:
        raise Unsupported("data other than a dict of Series")
    if not all(type(k) is str for k in data):
        raise Unsupported("column names other than str")
    series = [plain_series(s) for s in data.values()]
    first = series[0].index
    if len(series) > 1 and not (
        all(s.index is first or s.index.equals(first) for s in series[1:]) and first.is_unique
    ):
        raise Unsupported("different or repeated index labels (pandas aligns them)")
    indexes = [s.index for s in series]
    index = first if _plain_and_named_alike(indexes) else _ranges_union(indexes)
    if index is None:
        index = _extract_index(series)
    if not index.equals(first):
        raise Unsupported("an index pandas would change")
    columns = column_names(tuple(data))
    manager = create_block_manager_from_column_arrays([s._values for s in series], [columns, index], True, [None] * len(series))
    return frame_of_manager(manager)


# frame.assign(...)

def assign(frame, columns: dict) -> pd.DataFrame:
    """``frame.assign(**columns)`` of new columns, Series with the frame's index: the frame's blocks,
    then a block per new column (``BlockManager.insert``)."""
    frame = plain_frame(frame, numbers=False)
    if not columns or not len(frame.index):
        raise Unsupported("nothing to assign, or no rows")
    index = frame.index
    series = [plain_series(s) for s in columns.values()]
    if not all(s.index is index or s.index.equals(index) for s in series):
        raise Unsupported("different indexes (pandas aligns them)")
    if any(name in frame.columns for name in columns):
        raise Unsupported("a column the frame has (pandas replaces it)")
    manager = frame._mgr.copy(deep=False)
    for name, s in columns.items():
        manager.insert(len(manager.items), name, s._values, refs=s._references)
    return frame_of_manager(manager)


class CompiledFrameConstructor:
    """``pd.DataFrame(data)`` of a dict of Series (``frame_from_dict``); other arguments run as written."""

    operator_name = "pandas.DataFrame"

    def __call__(self, data=None, /, *options, **keywords):
        if options or keywords:
            raise Unsupported("pd.DataFrame options (index, columns, dtype, copy)")
        return frame_from_dict(data)

    @staticmethod
    def still_valid() -> bool:
        return True


class CompiledAssign(ReceiverKernel):
    """``frame.assign(name=series, ...)`` of new columns (``assign``); read only by kernels, its columns
    (``kept_columns``)."""

    def __call__(self, frame, /, *options, **columns):
        if options:
            raise Unsupported("positional arguments")
        return assign(frame, columns)

    def defer(self, frame, /, *options, **columns):
        if options or not columns or not _has_index(frame) or not len(frame.index):
            return self(frame, *options, **columns)

        def build():
            real = materialized(frame)
            try:
                return assign(real, columns)
            except Unsupported:
                return real.assign(**columns)

        try:
            return kept_columns([frame, *columns.values()], build, [None, *columns], frame.index)
        except Unsupported:  # (the frame, or pandas' call)
            return self(frame, *options, **columns)


def _has_index(frame) -> bool:
    return type(frame) is pd.DataFrame or isinstance(frame, Columns) and frame.index is not None


# frame[key] = value

def set_column(value, frame, key) -> None:
    """``frame[key] = value``: the callee of a rewritten column assignment, naming its kernel (the value
    comes first, as Python evaluates it first)."""
    frame[key] = value


set_column.operator_name = "DataFrame.__setitem__"  # for explain_compilation


class CompiledSetColumn:
    """``frame[key] = value`` (``put_column``); other frames, keys and values run as written."""

    def __call__(self, value, frame, key) -> None:
        put_column(frame, key, value)

    @staticmethod
    def still_valid() -> bool:
        return True


_SETTING_KNOWN = pd.__version__.startswith("3.1.")  # BlockManager.insert as _insert_last expects it
_FRAGMENTED = 100  # blocks past which BlockManager.insert may warn (PerformanceWarning)


def put_column(frame, key, value) -> None:
    """``frame[key] = value`` of a ``str`` key on a frame with rows and unique ``str`` column names, the
    value a Series with the frame's index, a 1-D array of its length or a scalar: the array pandas'
    ``_sanitize_column`` makes, put in by the frame's BlockManager as ``_set_item_mgr`` puts it (``iset``
    over the column of that name, else ``insert`` at the end, with the Index of names built once:
    pandas' ``Index.insert`` and the hash table built again after it are most of a one-row assignment)."""
    if type(frame) is not pd.DataFrame or type(key) is not str:
        raise Unsupported("a frame other than a DataFrame, or a key other than a str")
    if not _SETTING_KNOWN:
        raise Unsupported(f"columns are put in as pandas 3.1 puts them (this is {pd.__version__})")
    columns, index = frame.columns, frame.index
    _check_names(columns)
    if not len(index):
        raise Unsupported("no rows (pandas takes the value's index)")
    values, references = _column_values(value, index)
    try:
        position = columns.get_loc(key)
    except KeyError:
        if len(frame._mgr.blocks) >= _FRAGMENTED:
            raise Unsupported("a frame of 100 blocks or more (pandas warns that it is fragmented)") from None
        _insert_last(frame._mgr, columns, key, values, references)
    else:
        frame._mgr.iset(position, values, inplace=False, refs=references)


def _column_values(value, index: pd.Index) -> tuple:
    """(array, references) of ``DataFrame._sanitize_column(value)`` for a frame of ``index``."""
    if type(value) is pd.Series:
        if value.index is not index and not value.index.equals(index):
            raise Unsupported("a Series of another index (pandas aligns it)")
        return value._values, value._references
    if type(value) is np.ndarray:
        if value.ndim != 1 or len(value) != len(index):
            raise Unsupported("an array of another shape (pandas raises or sets several columns)")
    elif type(value) not in (bool, int, float, str) and not isinstance(value, np.generic):
        raise Unsupported(f"a value of type {type(value).__name__}")
    return sanitize_array(value, index, copy=True, allow_2d=True), None


class _NamesInserting:
    """The manager's column names while its own ``insert`` runs: their ``insert`` is the Index built once."""

    def __init__(self, names: pd.Index):
        self.names = names

    def insert(self, position: int, name) -> pd.Index:
        return self.names


def _insert_last(manager: BlockManager, columns: pd.Index, key: str, values, references) -> None:
    """``manager.insert(len(columns), key, values, references)``, pandas' own, given the new Index."""
    dtype = columns.dtype  # (a StringDtype: its own hash costs more than the rest of the key's)
    names = _cached(("insert", type(columns), dtype.storage, type(dtype.na_value), *_name_key(columns.name),
                     _str_names_in(columns), key), lambda: columns.insert(len(columns), key))
    manager.blknos, manager.blklocs  # noqa: B018 (built now: while insert runs, the names are not an Index)
    manager.axes[0] = _NamesInserting(names)
    try:
        manager.insert(len(columns), key, values, references)
    finally:
        if manager.axes[0] is not names:
            manager.axes[0] = columns


# frame[names].values, frame[names].to_numpy(...)

def frame_values(frame):
    """``frame.values``, as written: the callee of a rewritten ``<frame>.values``."""
    return frame.values


def frame_to_numpy(frame, *args, **kwargs):
    """``frame.to_numpy(...)``, as written: the callee of a rewritten ``<frame>.to_numpy(...)``."""
    return frame.to_numpy(*args, **kwargs)


frame_values.operator_name, frame_to_numpy.operator_name = "DataFrame/Series.values", "DataFrame/Series.to_numpy"


def selection_values(selected: SelectedColumns) -> np.ndarray:
    """``frame[labels].values`` as pandas makes it, without the frame: ``frame[labels]`` takes each
    block's columns (``_slice_take_blocks_ax0`` with a fill value: a view when they are a slice of
    the block, else a copy), and ``.values`` of one block is a read-only view of it, of several a new
    array of their common dtype. Unsupported for columns other than numpy numbers or bools."""
    manager = plain_frame(selected.frame, numbers=False)._mgr
    positions = np.asarray(selected.positions, dtype=np.intp)
    numbers = manager.blknos[positions]
    blocks = [manager.blocks[number] for number in np.unique(numbers)]
    _check_blocks(blocks)
    if len(blocks) > 1:
        dtype = find_common_type([block.dtype for block in blocks])
        if dtype.kind not in _KINDS:  # (bools and numbers: objects)
            raise Unsupported(f"columns of dtypes pandas interleaves as {dtype}")
        return side_by_side(selected.arrays(), dtype)
    taker = manager.blklocs[positions]
    taker = maybe_indices_to_slice(taker, max(len(taker), int(taker.max()) + 1))
    block_values = blocks[0].values
    taken = block_values[taker] if isinstance(taker, slice) else take_nd(block_values, taker, axis=0, allow_fill=False)
    values = taken.view()
    values.flags.writeable = False
    return values.T


class CompiledValues:
    """``frame[names].values`` (or ``.to_numpy(...)``) when the selection stayed a ``SelectedColumns``:
    pandas' own array of the frame ``select_columns`` builds as pandas does, without pandas' ~300 us
    of ``frame[names]`` on one row; other pandas objects answer as written."""

    reads_columns = True  # (given frame[names] kept as columns)

    def __init__(self, as_written):
        self.as_written = as_written

    def __call__(self, frame, *args, **kwargs):
        if isinstance(frame, SelectedColumns):
            if not args and not kwargs:
                try:
                    return selection_values(frame)
                except Unsupported:
                    pass
            try:
                frame = select_columns(frame.frame, frame.labels)
            except Unsupported:  # (a column it does not have, repeated names...: pandas builds the frame)
                frame = frame.materialize()
        elif isinstance(frame, Deferred):
            frame = frame.materialize()
        elif type(frame) not in (pd.DataFrame, pd.Series):
            raise Unsupported(f"a value of type {type(frame).__name__}")
        return self.as_written(frame, *args, **kwargs)

    @staticmethod
    def still_valid() -> bool:
        return True
