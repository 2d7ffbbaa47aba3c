"""scikit-learn's composites, one step at a time.

A ``Pipeline``, ``FeatureUnion`` or ``ColumnTransformer`` call is read as its
steps (``graph.composites``): each branch's transformer is called as written
in its own statement, and the functions here do what the composite itself
does around them, on the fitted object, with scikit-learn's own code:
``column_input`` checks the input as ``ColumnTransformer.transform`` does,
``columns`` selects a branch's columns, and ``union_stack`` / ``column_stack``
join the branches' outputs. Their kernels join CSR blocks or dense arrays,
the common case, without scikit-learn's per-call checks; anything else runs
scikit-learn's code.
"""

import operator
import weakref

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import _safe_indexing
from sklearn.utils._set_output import _wrap_data_with_container

from willump.compile.dense import CompiledNumpyHstack
from willump.compile.encoders import KERNELS as ENCODERS
from willump.compile.forms import (
    Columns, Deferred, FrameColumns, SparseRows, Stacked, Unsupported, side_by_side,
)
from willump.compile.frames import SelectedColumns
from willump.compile.preprocessing import KERNELS as PREPROCESSING
from willump.compile.preprocessing import is_identity, output_config
from willump.compile.sparse import CompiledHstack, materialize_stack, nonzero_rows

UNION_STACK = "__willump_union_stack"
COLUMN_INPUT = "__willump_column_input"
COLUMNS = "__willump_columns"
COLUMN_STACK = "__willump_column_stack"


def union_stack(union, blocks):
    """``FeatureUnion.transform``'s result, from its branches' outputs."""
    return union._hstack(list(blocks))


def column_input(transformer, X):
    """``X``, once ``ColumnTransformer.transform``'s checks pass: the columns it needs are there.

    A DataFrame with the columns seen in fit (or the user's ``df[columns]`` kept as
    ``SelectedColumns``), or an array as wide as in fit, is what it serves; for anything else
    scikit-learn's own ``transform`` runs first, so that what it raises is raised (and what it
    accepts is then selected from as it selects)."""
    if not _checked(transformer, X):
        X = X.materialize() if isinstance(X, SelectedColumns) else X
        transformer.transform(X)
    return X


def _checked(transformer, X) -> bool:
    names = getattr(transformer, "feature_names_in_", None)
    if type(X) is pd.DataFrame:
        return names is not None and _layout(transformer, X.columns).checked
    if type(X) is SelectedColumns:
        return names is not None and _layout(transformer, X.labels).checked
    return type(X) is np.ndarray and names is None and X.ndim == 2 and X.shape[1] == transformer.n_features_in_


class _Layout:
    """What a fitted ColumnTransformer learned of a frame's column names: whether its transform's
    checks pass, and where each name is (None when names repeat)."""

    def __init__(self, transformer, columns: pd.Index | list):
        self.fitted = _fitted(transformer)
        self.columns, self.names = columns, list(columns)
        self.checked = all(isinstance(c, str) for c in self.names) and _needed(transformer) <= set(self.names)
        self.positions = {name: i for i, name in enumerate(self.names)}
        if len(self.positions) != len(self.names):
            self.positions = None
        self.labels = {}  # a branch's position -> the names it selects, as a list


def _fitted(transformer) -> tuple:
    """The fitted attributes a layout depends on (refitting replaces them)."""
    return transformer.feature_names_in_, transformer._transformer_to_input_indices


def _layout(transformer, columns: pd.Index | list) -> _Layout:
    """The transformer's layout of these columns (a frame's, or the labels a ``SelectedColumns``
    selects): the last one if the names are the same (frames built per call, e.g. by ``assign``,
    have new Index objects of the same names)."""
    layout = _LAYOUTS.get(transformer)
    if layout is not None and all(map(operator.is_, layout.fitted, _fitted(transformer))):
        if layout.columns is columns:
            return layout
        if list(columns) == layout.names:
            layout.columns = columns
            return layout
    layout = _Layout(transformer, columns)
    _LAYOUTS[transformer] = layout
    return layout


_LAYOUTS = weakref.WeakKeyDictionary()  # ColumnTransformer -> the layout of the last frame's columns


def _needed(transformer) -> set:
    """The input columns the fitted transformer reads (as its transform checks for them)."""
    named = transformer.named_transformers_
    indices = [
        i for name, kept in transformer._transformer_to_input_indices.items()
        if name in named and not (isinstance(named[name], str) and named[name] == "drop")
        for i in kept
    ]
    return {transformer.feature_names_in_[i] for i in indices}


def columns(X, transformer, position: int):
    """The columns ``transformers_[position]`` reads, selected as ``ColumnTransformer`` does:
    by name from a DataFrame when it was fitted on one, else by the selection as written.
    A branch whose first step is a kernel reading columns where they are (an encoder, scaler,
    imputer) gets them as ``SelectedColumns``: building the frame costs more than the kernel."""
    name, branch, selection = transformer.transformers_[position]
    if type(X) is SelectedColumns:  # (the user's df[columns]: selected from the frame it selects from)
        layout = _layout(transformer, X.labels)
        if np.isscalar(selection) or not len(X.frame) or layout.positions is None or not _reads_columns(branch):
            return columns(X.materialize(), transformer, position)
        labels = _branch_labels(transformer, layout, position, name)
        return SelectedColumns(X.frame, labels, [X.positions[layout.positions[label]] for label in labels])
    if not (hasattr(transformer, "feature_names_in_") and isinstance(X, pd.DataFrame)):
        return _safe_indexing(X, selection, axis=1)
    if np.isscalar(selection):
        return X[transformer.feature_names_in_[transformer._transformer_to_input_indices[name][0]]]  # X.loc[:, label]
    if type(X) is not pd.DataFrame or not len(X) or not _reads_columns(branch):
        return X[_labels(transformer, name)]  # as X.loc[:, labels]
    layout = _layout(transformer, X.columns)
    labels = _branch_labels(transformer, layout, position, name)
    try:
        return SelectedColumns(X, labels, [layout.positions[label] for label in labels])
    except (KeyError, TypeError):  # (a name missing or repeated: the frame selects, or raises, as written)
        return X[labels]


def _branch_labels(transformer, layout: _Layout, position: int, name: str) -> list:
    """The names branch ``position`` selects, found once per layout."""
    labels = layout.labels.get(position)
    if labels is None:
        labels = layout.labels[position] = _labels(transformer, name)
    return labels


def _labels(transformer, name: str) -> list:
    return transformer.feature_names_in_[transformer._transformer_to_input_indices[name]].tolist()


def _reads_columns(branch) -> bool:
    """Whether the branch's first step is one of the kernels reading ``SelectedColumns``."""
    while type(branch) is Pipeline:
        steps = [step for _, step in branch.steps if step is not None and not isinstance(step, str)]
        if not steps:
            return False
        branch = steps[0]
    return type(branch) in COLUMN_READERS or (type(branch) is FunctionTransformer and is_identity(branch))


COLUMN_READERS = {*ENCODERS, *PREPROCESSING} - {FunctionTransformer}  # (it calls its func on the frame, unless none)


def column_stack(transformer, blocks, X):
    """``ColumnTransformer.transform``'s result, from its branches' outputs (a DataFrame wrapped
    as ``set_output`` wraps its transform's)."""
    blocks = list(blocks)
    transformer._validate_output(blocks)
    joined = transformer._hstack(blocks, n_samples=X.shape[0])
    if output_config(transformer) == "default":
        return joined
    return _wrap_data_with_container("transform", joined, X, transformer)


class CompiledColumnHelper:
    """A kernel for one of the helpers a ColumnTransformer's written-out transform calls, so that the
    user's ``df[columns]`` it reads may stay ``SelectedColumns`` (see ``sites``): deferred, the
    helper's answer as it is; called, the real object."""

    reads_columns = True

    def __init__(self, helper):
        self.helper = helper

    def __call__(self, *args):
        found = self.helper(*args)
        return found.materialize() if isinstance(found, Columns) else found

    def defer(self, *args):
        return self.helper(*args)

    @staticmethod
    def still_valid() -> bool:
        return True


class CompiledUnionStack:
    """``union_stack`` of CSR blocks (``scipy.sparse.hstack(...).tocsr()``) or of 2-D float arrays."""

    def __call__(self, union, blocks):
        return _joined(_sparse_or_dense(blocks, sparse=None))

    def defer(self, union, blocks):
        return _deferred(_sparse_or_dense(blocks, sparse=None))

    @staticmethod
    def still_valid() -> bool:
        return True


class CompiledColumnStack:
    """``column_stack``: CSR blocks for a sparse output, 2-D numeric arrays for a dense one."""

    reads_columns = True  # (its input, the user's df[columns] kept, is read only for its rows and index)

    def __call__(self, transformer, blocks, X):
        return _joined(_column_blocks(transformer, blocks))

    def defer(self, transformer, blocks, X):
        if output_config(transformer) == "pandas":
            return _joined_frame(transformer, list(blocks), X)
        return _deferred(_column_blocks(transformer, blocks))

    @staticmethod
    def still_valid() -> bool:
        return True


def _column_blocks(transformer, blocks) -> tuple[bool, list]:
    """``_sparse_or_dense`` of a ColumnTransformer's arrays; its frames (``set_output``) are
    joined by scikit-learn."""
    if output_config(transformer) != "default":
        raise Unsupported('set_output(transform="pandas"): scikit-learn joins the frames')
    return _sparse_or_dense(blocks, sparse=bool(transformer.sparse_output_))


def _joined_frame(transformer, blocks: list, X) -> FrameColumns:
    """The frame a ColumnTransformer with pandas output makes of its branches' frames, kept as
    their columns under its ``get_feature_names_out()``; built by ``column_stack`` when needed."""
    if not blocks or not all(isinstance(b, Columns) for b in blocks):
        raise Unsupported("a branch's frame that was built (scikit-learn joins the frames)")
    index = blocks[0].index
    if index is None or not all(_same_index(b.index, index) for b in blocks):
        raise Unsupported("branches' frames of different indexes (pandas aligns them)")
    arrays = [array for block in blocks for array in block.arrays()]
    labels = _names_out(transformer, blocks)
    if len(labels) != len(arrays):
        raise Unsupported("not a name for each column")
    return FrameColumns(labels, arrays, index, lambda: column_stack(
        transformer, [b.materialize() for b in blocks], X.materialize() if isinstance(X, Deferred) else X))


def _same_index(index, other) -> bool:
    """Whether pandas joins frames of these indexes side by side without aligning them, keeping
    the first (a branch that ran as written wraps its frame in an equal index of its own)."""
    return index is other or (
        other is not None and type(index) is type(other) and index.names == other.names and index.equals(other))


def _names_out(transformer, blocks: list) -> list:
    """``transformer.get_feature_names_out()`` as a list, computed again when the branches' names
    or ``verbose_feature_names_out`` change (the steps themselves are checked before each call)."""
    key = (transformer.verbose_feature_names_out, tuple(tuple(b.labels) for b in blocks))
    known = _NAMES_OUT.get(transformer)
    if known is None or known[0] != key:
        known = _NAMES_OUT[transformer] = key, transformer.get_feature_names_out().tolist()
    return known[1]


_NAMES_OUT = weakref.WeakKeyDictionary()  # ColumnTransformer -> (its branches' names, its names out)
_HSTACK = CompiledHstack()
_NUMPY_HSTACK = CompiledNumpyHstack()


def _sparse_or_dense(blocks, sparse: bool | None) -> tuple[bool, list]:
    """(sparse, blocks): whether the blocks join into CSR; Unsupported for any other case
    (scikit-learn's code then joins them). ``sparse`` None: CSR if any block is sparse."""
    if type(blocks) not in (list, tuple) or len(blocks) < 2:
        raise Unsupported("fewer than two blocks")
    blocks = [_frame_values(b) if type(b) is pd.DataFrame or isinstance(b, Columns) else b for b in blocks]
    is_sparse = [isinstance(b, SparseRows) or sp.issparse(b) for b in blocks]
    if sparse is None:
        sparse = any(is_sparse)
    if sparse:
        if not any(is_sparse):
            raise Unsupported("no sparse block (scipy's hstack has its own rules then)")
        blocks = [b if kept else _nonzeros(b) for b, kept in zip(blocks, is_sparse)]
        if any(_rows(b) == 0 or _width(b) == 0 for b in blocks):
            raise Unsupported("no rows, or a block without columns")
        return True, blocks
    blocks = [_dense(b) if kept else b for b, kept in zip(blocks, is_sparse)]  # as scikit-learn: toarray()
    if not all(type(b) is np.ndarray and b.ndim == 2 for b in blocks):
        raise Unsupported("blocks other than 2-D arrays and sparse matrices")
    return False, blocks


def _frame_values(frame) -> np.ndarray:
    """A passthrough branch's columns (a DataFrame, or ``SelectedColumns`` of one) as scikit-learn
    joins them: ``np.asarray`` (as ``np.hstack``, and ``check_array`` for a sparse output, convert
    columns of numbers; of selected columns, the arrays side by side in their common dtype, as
    pandas interleaves them); Unsupported for others."""
    arrays = frame.arrays() if isinstance(frame, Columns) else None
    dtypes = frame.dtypes.tolist() if arrays is None else [a.dtype if type(a) is np.ndarray else None for a in arrays]
    if not all(isinstance(d, np.dtype) and d.kind in "biuf" for d in dtypes):
        raise Unsupported("a passthrough frame of other than numbers (scikit-learn converts it its own way)")
    if arrays is not None and (not arrays or len({d.kind == "b" for d in dtypes}) > 1):
        raise Unsupported("no columns, or bools and numbers (pandas joins them as objects)")
    values = np.asarray(frame) if arrays is None else side_by_side(arrays, np.result_type(*dtypes))
    if values.dtype.kind not in "biuf":  # (pandas joins bools and numbers as objects)
        raise Unsupported("a passthrough frame of bools and numbers")
    return values


def _nonzeros(block) -> SparseRows:
    """A dense block's nonzero entries, as scipy keeps them when it joins it with sparse ones."""
    if type(block) is not np.ndarray or block.ndim != 2 or block.dtype.kind not in "biuf":
        raise Unsupported("a dense block other than a 2-D array of numbers")
    return nonzero_rows(block)


def _dense(block) -> np.ndarray:
    return (block.materialize() if isinstance(block, SparseRows) else block).toarray()


def _rows(block) -> int:
    return block.rows if isinstance(block, SparseRows) else block.shape[0]


def _width(block) -> int:
    return block.width if isinstance(block, SparseRows) else block.shape[1]


def _joined(found):
    sparse, blocks = found
    return _HSTACK(blocks, format="csr") if sparse else _NUMPY_HSTACK(blocks)


def _deferred(found):
    sparse, blocks = found
    if not sparse:
        return _NUMPY_HSTACK(blocks)
    return Stacked(_HSTACK.defer(blocks, format="csr").blocks, materialize_stack)


HELPERS = {UNION_STACK: union_stack, COLUMN_INPUT: column_input, COLUMNS: columns, COLUMN_STACK: column_stack}
