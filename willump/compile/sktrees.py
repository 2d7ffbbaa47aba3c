"""Compiled scikit-learn trees: decision trees, random and extra-trees forests, gradient boosting
and histogram gradient boosting; ``predict``, ``predict_proba``, ``decision_function``.

A fitted model is read once into flat arrays (``Nodes``): every tree's nodes one after the other,
a node's fields side by side in arrays indexed by node (``feature``, ``left``, ``right``:
absolute indices, ``left == -1`` marks a leaf as in scikit-learn; ``missing_left``, ``bitset``
(a categorical split's bitset row), ``threshold``; ``values[i]``: the leaf's values, one per
class for forests, one for boosting), with ``roots`` and the output ``columns`` of the trees in
the order the library sums them. One numba kernel walks them for
blocks of rows (every tree in turn over a block; each row sums the trees in order), batches
split across ``workers``, with the library's arithmetic:

- trees and forests compare ``X`` converted to float32 (``check_array(X, dtype=float32)``)
  against float64 thresholds, NaN following ``missing_go_to_left`` where the tree supports
  missing values; a forest sums its trees' leaf proportions in estimator order from 0.0 and
  divides by the number of trees (``_accumulate_prediction`` with one job; a forest whose
  ``n_jobs`` (or joblib context) gives more jobs sums on threads in the order they finish, so
  it runs as written);
- gradient boosting starts from its ``init_`` estimator's raw prediction (computed by
  scikit-learn's own ``_init_raw_predictions``; a constant, so only dummy estimators and
  ``"zero"`` are compiled) and adds ``learning_rate * value`` stage by stage (``predict_stages``);
- histogram gradient boosting compares float64 values, sends NaN by ``missing_go_to_left``,
  tests categories against the raw and known bitsets, and adds leaf values to
  ``0.0 + _baseline_prediction`` iteration by iteration (``_raw_predict``; its OpenMP threads
  split rows, so they change nothing). Its categorical features (``_preprocessor``, an
  ``OrdinalEncoder`` whose columns it puts first) are encoded in the kernel: a number is
  looked up among the sorted numeric categories, unknown and NaN become NaN.

The link functions, ``argmax`` and ``classes_`` lookups after the sums are scikit-learn's own
calls on arrays of the layout it builds (softmax sums depend on it). Input values scikit-learn
refuses (infinity, NaN where not supported, a category the encoder rejects) make the kernel
refuse the call, which then runs as written and raises scikit-learn's error.
"""

from operator import is_
from typing import NamedTuple

import joblib.parallel
import numpy as np
import pandas as pd
from joblib import effective_n_jobs
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier, ExtraTreesRegressor, GradientBoostingClassifier, GradientBoostingRegressor,
    HistGradientBoostingClassifier, HistGradientBoostingRegressor, RandomForestClassifier, RandomForestRegressor,
)
from sklearn.ensemble import _gb
from sklearn.preprocessing import OrdinalEncoder
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from willump.compile.forms import Deferred, Unsupported
from willump.compile.jit import njit
from willump.compile.linear import frame_values
from willump.compile.parallel import SERIAL

_CLASSIFY = ("predict", "predict_proba")
FORESTS = (RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier, ExtraTreesRegressor)
HISTOGRAM = (HistGradientBoostingClassifier, HistGradientBoostingRegressor)
METHODS = {
    DecisionTreeClassifier: _CLASSIFY,
    DecisionTreeRegressor: ("predict",),
    RandomForestClassifier: _CLASSIFY,
    ExtraTreesClassifier: _CLASSIFY,
    RandomForestRegressor: ("predict",),
    ExtraTreesRegressor: ("predict",),
    GradientBoostingClassifier: _CLASSIFY + ("decision_function",),
    GradientBoostingRegressor: ("predict",),
    HistGradientBoostingClassifier: _CLASSIFY + ("decision_function",),
    HistGradientBoostingRegressor: ("predict",),
}
LEAF = -1
ROWS_PER_BLOCK = 256  # rows every tree walks in turn
BLOCK_BYTES = 1 << 16  # (fewer rows per block when they are wide)
LANES = 16  # rows walking a tree in step
NODE_WORK_PER_TASK = 50_000  # rows x trees below which a part is not worth a thread


class Nodes(NamedTuple):
    """A model's trees as flat arrays, in the order their leaf values are summed: a node's fields
    side by side in arrays indexed by node (absolute indices; a leaf has ``left == -1``)."""

    feature: np.ndarray  # int32
    left: np.ndarray  # int32, -1 for a leaf
    right: np.ndarray  # int32
    missing_left: np.ndarray  # uint8: NaN (and unknown categories) go left
    bitset: np.ndarray  # int32: a categorical split's row in raw_bitsets, -1 for a threshold
    threshold: np.ndarray  # float64: values <= threshold go left
    values: np.ndarray  # float64 (n_nodes, width): what a leaf adds to out[row, column:column + width]
    roots: np.ndarray  # int64 (n_trees,)
    depths: np.ndarray  # int64 (n_trees,): the steps from a tree's root to its deepest leaf
    columns: np.ndarray  # int64 (n_trees,): the output column of each tree's first value
    raw_bitsets: np.ndarray  # uint32 (n, 8): categories going left, for categorical nodes (their bitset row)
    known_bitsets: np.ndarray  # uint32 (n, 8): known categories per categorical feature
    known_rows: np.ndarray  # int64 (n_features,): a feature's row in known_bitsets


class Reading(NamedTuple):
    """How the kernel reads an input row: ``float32``: values compared as float32, as
    ``check_array(dtype=float32)`` makes them (NaN refused unless ``allow_nan``; infinity refused);
    otherwise as float64, anything allowed. ``encoded``: the input columns holding categories, each
    looked up among ``categories[bounds[e, 0]:bounds[e, 1]]``."""

    float32: bool
    allow_nan: bool
    encoded: np.ndarray
    bounds: np.ndarray
    categories: np.ndarray


@njit
def predict_rows(X, start, stop, float32, allow_nan, encoded, bounds, categories, feature, left, right, missing_left,
                 bitset, threshold, values, roots, depths, columns, raw_bitsets, known_bitsets, known_rows, scale,
                 initial, divisor, out):
    """Sum the trees' leaf values for rows ``start:stop`` of ``X`` into ``out`` (see the module's
    docstring); -1, or the first row holding a value the library refuses.

    Rows are taken in blocks that every tree walks in turn (its nodes stay in cache), ``LANES``
    rows at a time in step, without branches, for the tree's depth (rows at a leaf stay there):
    their paths overlap in the processor instead of each mispredicted turn stalling it. Categorical
    splits (and any row not at a leaf by then) are walked row by row. Each row sums the trees in
    order. (All in one function: arrays passed to helpers cost reference counting per node.)"""
    width = X.shape[1]
    per_block = max(LANES, min(ROWS_PER_BLOCK, BLOCK_BYTES // (8 * max(width, 1))))
    rows = np.empty((min(per_block, stop - start), width), np.float64)
    at = np.empty(LANES, np.int64)  # the lanes' nodes
    n_values = values.shape[1]
    categorical = (bitset >= 0).any()
    for block in range(start, stop, per_block):
        end = min(block + per_block, stop)
        for i in range(block, end):  # the rows as the library's checked array holds them
            r = i - block
            if float32:
                for j in range(width):
                    rows[r, j] = np.float64(np.float32(X[i, j]))
                for j in range(width):
                    value = rows[r, j]
                    if value - value != 0.0 and (np.isinf(value) or not allow_nan):  # (NaN or infinity)
                        return i
            else:
                for j in range(width):
                    rows[r, j] = np.float64(X[i, j])
            for e in range(len(encoded)):  # a category: its position among the sorted known ones, or NaN
                value = rows[r, encoded[e]]
                if np.isinf(value):
                    return i  # (the OrdinalEncoder raises)
                low, high = bounds[e, 0], bounds[e, 1]
                while low < high:
                    middle = (low + high) // 2
                    if categories[middle] < value:
                        low = middle + 1
                    else:
                        high = middle
                found = low < bounds[e, 1] and categories[low] == value
                rows[r, encoded[e]] = np.float64(low - bounds[e, 0]) if found else np.nan
            for k in range(out.shape[1]):
                out[i, k] = initial[k]
        for t in range(len(roots)):
            column = columns[t]
            for first in range(block, end, LANES):
                lanes = min(LANES, end - first)
                for lane in range(lanes):
                    at[lane] = roots[t]
                for _ in range(0 if categorical else depths[t]):
                    for lane in range(lanes):
                        node = at[lane]
                        value = rows[first - block + lane, feature[node]]
                        to_left = (value <= threshold[node]) | (np.isnan(value) & (missing_left[node] != 0))
                        on_left, on_right = left[node], right[node]
                        child = on_left if to_left else on_right
                        at[lane] = node if on_left == LEAF else child
                for lane in range(lanes):
                    i, node = first + lane, at[lane]
                    while left[node] != LEAF:  # _apply_dense, _predict_one_from_raw_data
                        value = rows[i - block, feature[node]]
                        if bitset[node] < 0:  # (NaN compares False: checked only then)
                            if value <= threshold[node]:
                                node = left[node]
                            elif np.isnan(value) and missing_left[node]:
                                node = left[node]
                            else:
                                node = right[node]
                            continue
                        if value >= 0:  # (NaN is not)
                            code = np.int64(value)  # (a code below 256: the encoder's)
                            if (raw_bitsets[bitset[node], code >> 5] >> (code & 31)) & 1:
                                node = left[node]
                                continue
                            if (known_bitsets[known_rows[feature[node]], code >> 5] >> (code & 31)) & 1:
                                node = right[node]
                                continue
                        # NaN, or a negative or unknown category: where missing values go
                        node = left[node] if missing_left[node] else right[node]
                    if divisor < 0.0:  # one tree: its values as they are
                        for k in range(n_values):
                            out[i, column + k] = values[node, k]
                    else:
                        for k in range(n_values):
                            out[i, column + k] += scale * values[node, k]
        if divisor > 0.0:
            for i in range(block, end):
                for k in range(out.shape[1]):
                    out[i, k] /= divisor
    return -1


def _no_bitsets() -> np.ndarray:
    return np.zeros((0, 8), np.uint32)


def tree_nodes(trees: list, columns: list) -> Nodes:
    """The flat arrays of scikit-learn ``Tree`` objects (``tree_``), in order."""
    offsets = _offsets([tree.node_count for tree in trees])
    lefts = [tree.children_left for tree in trees]
    leaves = [left == LEAF for left in lefts]
    return Nodes(
        _joined([np.where(leaf, 0, tree.feature) for tree, leaf in zip(trees, leaves)], np.int32),
        _joined([np.where(leaf, LEAF, left + offset) for left, leaf, offset in zip(lefts, leaves, offsets)], np.int32),
        _joined([np.where(leaf, LEAF, tree.children_right + offset) for tree, leaf, offset in zip(trees, leaves, offsets)],
                np.int32),
        _joined([_missing_left(tree) for tree in trees], np.uint8),
        np.full(int(np.sum([tree.node_count for tree in trees])), -1, np.int32),
        _joined([tree.threshold for tree in trees], np.float64),
        np.ascontiguousarray(np.concatenate([tree.value.reshape(tree.node_count, -1) for tree in trees]), np.float64),
        offsets, np.array([tree.max_depth for tree in trees], np.int64), np.asarray(columns, np.int64),
        _no_bitsets(), _no_bitsets(), np.zeros(0, np.int64),
    )


def _missing_left(tree) -> np.ndarray:
    missing = getattr(tree, "missing_go_to_left", None)  # (scikit-learn >= 1.3)
    return np.zeros(tree.node_count, np.uint8) if missing is None else missing


def histogram_nodes(model) -> Nodes:
    """The flat arrays of a fitted HistGradientBoosting model's predictors, iteration by iteration."""
    predictors = [(k, p) for iteration in model._predictors for k, p in enumerate(iteration)]
    records = [p.nodes for _, p in predictors]
    offsets = _offsets([len(r) for r in records])
    bitset_offsets = _offsets([len(p.raw_left_cat_bitsets) for _, p in predictors])
    leaves = [r["is_leaf"].astype(bool) for r in records]
    raw = [p.raw_left_cat_bitsets for _, p in predictors if len(p.raw_left_cat_bitsets)]
    known, known_rows = model._bin_mapper.make_known_categories_bitsets()
    return Nodes(
        _joined([np.where(leaf, 0, r["feature_idx"]) for r, leaf in zip(records, leaves)], np.int32),
        _joined([np.where(leaf, LEAF, r["left"].astype(np.int64) + o) for r, leaf, o in zip(records, leaves, offsets)],
                np.int32),
        _joined([np.where(leaf, LEAF, r["right"].astype(np.int64) + o) for r, leaf, o in zip(records, leaves, offsets)],
                np.int32),
        _joined([r["missing_go_to_left"] for r in records], np.uint8),
        _joined([np.where(r["is_categorical"].astype(bool) & ~leaf, r["bitset_idx"].astype(np.int64) + o, -1)
                 for r, leaf, o in zip(records, leaves, bitset_offsets)], np.int32),
        _joined([r["num_threshold"] for r in records], np.float64),
        _joined([r["value"] for r in records], np.float64).reshape(-1, 1), offsets,
        np.array([r["depth"].max() for r in records], np.int64), np.array([k for k, _ in predictors], np.int64),
        np.ascontiguousarray(np.concatenate(raw) if raw else _no_bitsets(), np.uint32),
        np.ascontiguousarray(known, np.uint32).reshape(-1, 8), np.asarray(known_rows, np.int64),
    )


def _offsets(sizes: list) -> np.ndarray:
    """Where each of blocks of these sizes starts, one after the other."""
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def _joined(parts: list, dtype) -> np.ndarray:
    return np.ascontiguousarray(np.concatenate(parts), dtype)


class CompiledTrees:
    """One method of a fitted scikit-learn tree model (see the module's docstring)."""

    def __init__(self, model, method: str, workers=SERIAL):
        kind = type(model)
        if method not in METHODS.get(kind, ()):
            raise Unsupported(f"{kind.__name__}.{method} is not compiled")
        if not _fitted(model):
            raise Unsupported("the model is not fitted")
        if getattr(model, "n_outputs_", 1) != 1:
            raise Unsupported("a model with several outputs")
        self.model, self.method, self.kind, self.workers = model, method, kind, workers
        self.state = _fingerprint(model)
        self.width = width = model.n_features_in_
        names = getattr(model, "feature_names_in_", None)
        self.names = None if names is None else names.tolist()
        self._named = None  # the last columns (an immutable Index) found to be those names
        if kind in HISTOGRAM:
            self._read_histogram(model, width)
        elif kind in (GradientBoostingClassifier, GradientBoostingRegressor):
            self._read_boosting(model, width)
        else:
            self._read_forest(model, width)
        self.outputs = len(self.initial)
        reading = self.reading
        self._arguments = (  # predict_rows' arguments after the rows
            *self.reading, *self.trees,
            self.scale, self.initial, self.divisor,
        )
        self.minimum_rows = max(1, NODE_WORK_PER_TASK // len(self.trees.roots))
        if len(self.trees.left) >= 2 ** 31:
            raise Unsupported("more nodes than 32-bit indices hold")

    def _read_forest(self, model, width: int) -> None:
        single = not isinstance(model, FORESTS)
        estimators = [model] if single else model.estimators_
        trees = [e.tree_ for e in estimators]
        self.trees = tree_nodes(trees, [0] * len(trees))
        self.reading = _plain_reading(float32=True, allow_nan=estimators[0]._support_missing_values(np.empty((1, 1))))
        self.initial = np.zeros(self.trees.values.shape[1])
        self.scale, self.divisor = 1.0, -1.0 if single else float(len(estimators))

    def _read_boosting(self, model, width: int) -> None:
        stages = model.estimators_
        self.trees = tree_nodes([e.tree_ for e in stages.ravel()], list(range(stages.shape[1])) * stages.shape[0])
        self.reading = _plain_reading(float32=True, allow_nan=False)
        self.initial = _boosting_start(model, width, stages.shape[1])
        self.scale, self.divisor = float(model.learning_rate), 0.0

    def _read_histogram(self, model, width: int) -> None:
        self.trees = histogram_nodes(model)
        preprocessor = model._preprocessor
        if preprocessor is None and (self.trees.bitset >= 0).any():
            raise Unsupported("categorical splits without scikit-learn's categorical preprocessor")
        if preprocessor is None:
            self.reading = _plain_reading(float32=False, allow_nan=True)
        else:  # the trees read the preprocessor's outputs: read the input columns they come from instead
            self.reading, source = _encoded_reading(preprocessor, width)
            inputs = np.empty(width, np.int64)
            inputs[source] = np.arange(width)  # (the output of each input column)
            known_rows = self.trees.known_rows
            self.trees = self.trees._replace(
                feature=np.ascontiguousarray(source[self.trees.feature], np.int32),
                known_rows=known_rows[inputs] if len(known_rows) else known_rows)
        baseline = model._baseline_prediction
        if baseline.dtype != np.float64 or baseline.shape != (1, model.n_trees_per_iteration_):
            raise Unsupported("a baseline prediction that is not a float64 row")
        self.initial = (np.zeros(baseline.shape) + baseline)[0]  # as _raw_predict: zeros, += baseline
        self.scale, self.divisor = 1.0, 0.0

    def still_valid(self) -> bool:
        """False once the model is refitted or a parameter is set."""
        now = vars(self.model)
        return len(now) == len(self.state) and all(map(is_, now.values(), self.state))

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs:
            X = args[0]
        elif not args and set(kwargs) == {"X"}:
            X = kwargs["X"]
        else:
            raise Unsupported("arguments other than X")
        if self.kind in FORESTS and self.model.n_jobs != 1 and _forest_jobs(self.model) != 1:
            raise Unsupported("a forest with n_jobs other than 1 (its threads sum the trees in the order they finish)")
        return self.finish(self.raw(self._matrix(X)))

    def _matrix(self, X) -> np.ndarray:
        """The array scikit-learn's checks would convert (the kernel converts each value as they do)."""
        if isinstance(X, Deferred) and X.stands_for is pd.DataFrame:
            X = X.materialize()  # (the call as written builds it too)
        if type(X) is pd.DataFrame:
            matrix = self._frame_array(X)
        elif type(X) is np.ndarray:
            if self.names is not None:
                raise Unsupported("an array given to a model fitted on named features (scikit-learn warns)")
            matrix = X
        else:
            raise Unsupported(f"input of type {type(X).__name__}")
        if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] != self.width:
            raise Unsupported("no rows, or not the model's number of features (scikit-learn raises)")
        if matrix.dtype not in _NUMBERS:
            raise Unsupported(f"{matrix.dtype} values (converted by scikit-learn, not here)")
        return matrix

    def _frame_array(self, frame: pd.DataFrame) -> np.ndarray:
        columns = frame.columns
        if columns is not self._named:
            if self.names is None:
                raise Unsupported("a DataFrame given to a model fitted without feature names (scikit-learn warns)")
            labels = columns.tolist()
            if labels != self.names or not all(type(label) is str for label in labels):
                raise Unsupported("columns that are not the feature names seen in fit, in order")
            self._named = columns
        return frame_values(frame)

    def raw(self, X: np.ndarray) -> np.ndarray:
        """The sums of the trees' values for the rows of ``X`` (n_rows, outputs), C-ordered."""
        n = len(X)
        out = np.empty((n, self.outputs))
        model = self._arguments
        if n < 2 * self.minimum_rows or self.workers.count == 1:
            refused = predict_rows(X, 0, n, *model, out)
        else:
            parts = self.workers.split(n, self.minimum_rows)
            refused = max(self.workers.map(lambda rows: predict_rows(X, rows.start, rows.stop, *model, out), parts))
        if refused >= 0:
            raise Unsupported("a value scikit-learn refuses (infinity, NaN or an unknown kind of category)")
        return out

    def finish(self, raw: np.ndarray):
        """The method's answer from the sums, as the model's own method computes it."""
        model, method = self.model, self.method
        if self.kind in HISTOGRAM:
            return _histogram_answer(model, method, np.asfortranarray(raw))  # (_raw_predict's layout)
        if self.kind in (GradientBoostingClassifier, GradientBoostingRegressor):
            return _boosting_answer(model, method, raw)
        if method == "predict_proba":
            return raw
        if self.kind in (DecisionTreeRegressor, RandomForestRegressor, ExtraTreesRegressor):
            return raw[:, 0]
        return model.classes_.take(np.argmax(raw, axis=1), axis=0)


_NUMBERS = {np.dtype(t) for t in (np.float64, np.float32, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16, np.uint32)}


def _fitted(model) -> bool:
    names = ("_predictors",) if isinstance(model, HISTOGRAM) else ("estimators_",) if isinstance(
        model, FORESTS + (GradientBoostingClassifier, GradientBoostingRegressor)) else ("tree_",)
    return all(hasattr(model, name) for name in names) and hasattr(model, "n_features_in_")


def _fingerprint(model) -> tuple:  # (still_valid compares vars(model) with it)
    """The model's attributes (fitted state and parameters), held and compared by identity."""
    return tuple(vars(model).values())


def _forest_jobs(model) -> int:
    """The jobs a forest's predict runs (as ``_partition_estimators``: a joblib context may set them).
    ``n_jobs=None`` outside any joblib context is one job, known without joblib's look-ups."""
    if model.n_jobs is None and _JOBLIB_DEFAULT is not None and getattr(
            _JOBLIB_CONTEXTS, "config", _JOBLIB_DEFAULT) is _JOBLIB_DEFAULT:
        return 1
    return min(effective_n_jobs(model.n_jobs), len(model.estimators_))


_JOBLIB_CONTEXTS = getattr(joblib.parallel, "_backend", None)  # .config: the thread's parallel_config in force
_JOBLIB_DEFAULT = getattr(joblib.parallel, "default_parallel_config", None) if _JOBLIB_CONTEXTS is not None else None


def _plain_reading(float32: bool, allow_nan: bool) -> Reading:
    return Reading(float32, bool(allow_nan), np.zeros(0, np.int64), np.zeros((0, 2), np.int64), np.zeros(0))


def _encoded_reading(preprocessor, width: int) -> tuple[Reading, np.ndarray]:
    """The reading of HistGradientBoosting's ``_preprocessor``: an ``OrdinalEncoder`` of the categorical
    columns (put first), then the numerical ones, and the input column of each of its outputs;
    Unsupported unless it is that, with numeric categories."""
    steps = [(name, columns) for name, _, columns in preprocessor.transformers_ if name != "remainder"]
    encoder = preprocessor.named_transformers_.get("encoder")
    if [name for name, _ in steps] != ["encoder", "numerical"] or type(encoder) is not OrdinalEncoder:
        raise Unsupported("a categorical preprocessor other than scikit-learn's")
    if not (encoder.handle_unknown == "use_encoded_value" and np.isnan(encoder.unknown_value)
            and np.isnan(encoder.encoded_missing_value) and getattr(encoder, "infrequent_categories_", None) is None):
        raise Unsupported("a categorical encoder with other options")
    masks = [np.asarray(columns) for _, columns in steps]
    if not all(m.dtype == bool and m.shape == (width,) for m in masks):
        raise Unsupported("categorical columns not given as a mask")
    source = np.concatenate([np.flatnonzero(m) for m in masks]).astype(np.int64)
    known, bounds = [], []
    for categories in encoder.categories_:
        if categories.dtype.kind not in "iuf":
            raise Unsupported("categories that are not numbers (pandas categorical or string columns)")
        values = categories.astype(np.float64)
        values = values[:-1] if len(values) and np.isnan(values[-1]) else values
        if not (np.all(np.abs(values) < 2.0 ** 53) and np.all(values[1:] > values[:-1])):
            raise Unsupported("categories that are not exact as float64, or not sorted")
        start = sum(len(k) for k in known)
        bounds.append((start, start + len(values)))
        known.append(values)
    encoded = source[:len(known)]
    reading = Reading(False, True, encoded, np.array(bounds, np.int64).reshape(-1, 2),
                      np.concatenate(known) if known else np.zeros(0))
    return reading, source


def _boosting_start(model, width: int, outputs: int) -> np.ndarray:
    """A GradientBoosting model's raw prediction before its trees (one row; the same for every row)."""
    init = model.init_
    if isinstance(init, str) and init == "zero":
        return np.zeros(outputs)
    constant = {DummyClassifier: ("prior", "most_frequent", "constant"),
                DummyRegressor: ("mean", "median", "quantile", "constant")}
    if init.__class__ not in constant or init.strategy not in constant[type(init)]:
        raise Unsupported("an init estimator whose predictions depend on the rows")
    start = _gb._init_raw_predictions(np.zeros((2, width), np.float32), init, model._loss, isinstance(
        model, GradientBoostingClassifier))
    if start.shape != (2, outputs) or start.dtype != np.float64 or not np.array_equal(start[0], start[1], equal_nan=True):
        raise Unsupported("an init estimator's raw predictions that are not one float64 row")
    return np.ascontiguousarray(start[0])


def _boosting_answer(model, method: str, raw: np.ndarray):
    """``GradientBoosting*`` given ``_raw_predict``'s array."""
    if isinstance(model, GradientBoostingRegressor):
        return raw.ravel()
    decision = raw.ravel() if raw.shape[1] == 1 else raw
    if method == "decision_function":
        return decision
    if method == "predict_proba":
        return model._loss.predict_proba(decision)
    encoded = (decision >= 0).astype(int) if decision.ndim == 1 else np.argmax(decision, axis=1)
    return model.classes_[encoded]


def _histogram_answer(model, method: str, raw: np.ndarray):
    """``HistGradientBoosting*`` given ``_raw_predict``'s (Fortran-ordered) array."""
    if isinstance(model, HistGradientBoostingRegressor):
        return model._loss.link.inverse(raw.ravel())
    if method == "decision_function":
        return raw.ravel() if raw.shape[1] == 1 else raw
    if method == "predict_proba":
        return model._loss.predict_proba(raw)
    encoded = (raw.ravel() > 0).astype(int) if raw.shape[1] == 1 else np.argmax(raw, axis=1)
    return model.classes_[encoded]
