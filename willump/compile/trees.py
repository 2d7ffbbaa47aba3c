"""LightGBM models: scored by the shared tree kernels (``forest``), or else through their Booster.

A model whose trees and link the kernels reproduce (numerical and categorical splits,
missing values, every built-in objective but linear trees) is read from its model string
(``lightgbm_ensemble``) and scored by ``forest``'s kernels, to the bit what ``Booster.predict``
returns: a single row with no thread and no LightGBM call, a batch split over the decorator's
``workers``. The input matrix is the one LightGBM itself would build (same dtype, same values;
pandas categorical columns as their codes in the training categories).

Otherwise (linear trees, ``pred_early_stop``, an unknown objective) the Booster
answers, given that matrix and the model's own thread count (``n_jobs`` as
``LGBMModel.predict`` resolves it), or the decorator's ``workers`` when there are
more of them. Each row is scored by one thread in any case, so the answer does
not depend on the thread count. A single row then goes through LightGBM's own single-row API
(``LGBM_BoosterPredictForMatSingleRowFast``), which parses the parameters once
instead of on every call; LightGBM's tests check it gives what
``LGBM_BoosterPredictForMat`` gives. Inputs may also be compiled joins (``tables.SelectedFrame``):
the matrix is then gathered from the tables directly.

LightGBM's own rules become node flags when the model is read (``_lightgbm_flags``): a NaN
reads as 0.0 unless NaN is the node's missing value, and a value with ``abs(value) <=
kZeroThreshold`` as 0.0 (LightGBM drops it from the row), which moves a threshold lying within
that distance of 0 to its edge. Outputs sum from 0.0 in tree order (``GBDT::PredictRaw``), are
averaged in random-forest mode (``average_output``) and mapped by the objective's link.
"""

import ctypes
import sys
import threading
import warnings
import weakref
from operator import is_

import numpy as np
import pandas as pd
from lightgbm import Booster, LGBMClassifier, LGBMRanker, LGBMRegressor
from lightgbm.basic import (
    _LIB, _ConfigAliases, _choose_param_value, _data_from_pandas, _InnerPredictor, _param_dict_to_str, _safe_call,
)

from willump.compile.dense import ConcatenatedColumns
from willump.compile.forest import (
    CATEGORICAL, EXP, IDENTITY, LEAF, LOG1P_EXP, MISSING_LEFT, SIGMOID, SIGNED_SQUARE, SOFTMAX, ZERO, ZERO_MISSING,
    Ensemble, Trees, built_once, joined, kept_ensemble, plain_reading,
)
from willump.compile.forms import Columns, Unsupported, held_attributes, kind_of, same_attributes
from willump.compile.jit import njit
from willump.compile.lgbmtext import model_text, sections
from willump.compile.linear import interleaved

_VALIDATION = "sklearn.utils.validation"
try:  # what validate_data, which LGBMModel.predict calls on arrays, runs first
    from sklearn.utils.validation import _check_feature_names
except ImportError:  # older scikit-learn: arrays given to a model fitted on named features run as written
    _check_feature_names = None
from willump.compile.tables import SelectedFrame, numeric_matrix

METHODS = {LGBMClassifier: ("predict_proba", "predict"), LGBMRegressor: ("predict",), LGBMRanker: ("predict",)}
BOOSTER_METHODS = {Booster: ("predict",)}


class CompiledBooster:
    """``predict_proba`` / ``predict`` of a fitted LightGBM scikit-learn model."""

    reads_columns = True  # (given frame[columns] kept as Columns: see _matrix)

    def __init__(self, model, method: str, workers=None):
        kind = type(model)
        if method not in METHODS.get(kind, ()):
            raise Unsupported(f"{kind.__name__}.{method} is not compiled")
        if not model.__sklearn_is_fitted__() or callable(model.objective):
            raise Unsupported("the model is not fitted, or has a custom objective")
        booster = model.booster_
        self.model, self.method, self.booster = model, method, booster
        self.state = held_attributes(model)  # (parameters and fitted state: get_params costs ~100 us)
        self.width = booster.num_feature()
        # the parameters LGBMModel.predict passes on, computed as it computes them
        params = model._process_params(stage="predict")
        for alias in _ConfigAliases.get_by_alias(
            "data", "X", "raw_score", "start_iteration", "num_iteration", "pred_leaf", "pred_contrib"
        ):
            params.pop(alias, None)
        params = _choose_param_value("num_threads", params, model.n_jobs)
        own_threads = model._process_n_jobs(params.pop("num_threads"))  # as LGBMModel.predict resolves n_jobs
        parallel = workers is not None and workers.count > 1
        self.threads = max(own_threads, workers.count) if parallel else own_threads
        self.params = params
        self.workers = workers if parallel else None
        self._array_warnings = _array_warnings(model, self.width)
        self._iterations = booster.best_iteration
        ensemble = _ensemble(booster, params, self._iterations)
        self.ensemble, self.how = ensemble, None  # how: how it runs, when not by the tree kernels
        self._other_iterations = {}  # (ensembles of calls' num_iteration)
        if isinstance(ensemble, Unsupported):  # the Booster answers
            self.ensemble, self.how = None, f"through LightGBM's Booster: the tree kernel does not take {ensemble}"
            self._single_row = _SingleRow(booster, _param_dict_to_str({**params, "num_threads": 1}), self._iterations,
                                          self.width)
        # Booster.predict builds this predictor on every call; it depends only on the parameters
        self._predictor = None
        self._categories = None  # (ModelCategories.of the booster)

    def still_valid(self) -> bool:
        """False once the model is refitted or a parameter is set (parameters reach the predictor)."""
        return same_attributes(self.model, self.state)

    def carried(self) -> list:
        return _carried(self.booster, self._iterations, self.ensemble)

    def __call__(self, /, *args, **kwargs):
        raw, ensemble = kwargs.pop("raw_score", False), self.ensemble
        if kwargs and ensemble is not None:
            ensemble = _ensemble_of_call(kwargs, ensemble, self._other_iterations, self.booster, self.params)
        if len(args) != 1 or kwargs or type(raw) is not bool or (raw and ensemble is None):
            raise Unsupported("arguments other than X, raw_score and num_iteration (to the tree kernels)")
        matrix = None
        self._categories = categories = ModelCategories.of(self.booster, self._categories)
        if self.ensemble is not None and type(args[0]) is pd.DataFrame and not categories.lists:
            matrix = _float64_values(args[0], self.width)
        if matrix is None:
            matrix = _matrix(args[0], self.width, categories)
        if isinstance(args[0], np.ndarray):  # LightGBM validates arrays with scikit-learn first
            if self._array_warnings is None:
                raise Unsupported("a model fitted on named features, given an array (scikit-learn warns)")
            for warning in self._array_warnings:  # scikit-learn's, for a model fitted on named features
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno,
                                       module=_VALIDATION, registry=_validation_registry())
        if ensemble is not None:
            result = _ensemble_predict(ensemble, matrix, self.workers, raw)
            if raw:  # (the sums as they are, from every method)
                return result
        elif len(matrix) == 1:
            result = self._single_row.predict(matrix)
        else:
            result = self._predict(matrix)
        if self.method == "predict_proba" and result.ndim == 1:  # binary, as LGBMClassifier.predict_proba
            return _both_classes(result)
        if self.method == "predict" and isinstance(self.model, LGBMClassifier):
            if result.ndim == 1:
                result = _both_classes(result)
            return self.model._le.inverse_transform(np.argmax(result, axis=1))
        return result

    def _predict(self, matrix: np.ndarray) -> np.ndarray:
        if self._predictor is None:
            self._predictor = _InnerPredictor.from_booster(
                booster=self.booster, pred_parameter={**self.params, "num_threads": self.threads})
        predictor = self._predictor
        return predictor.predict(
            data=matrix, start_iteration=0, num_iteration=self._iterations, raw_score=False, pred_leaf=False,
            pred_contrib=False, data_has_header=False, validate_features=False,
        )


class CompiledBoosterPredict:
    """``Booster.predict(data)`` (``raw_score`` too) of a LightGBM Booster, trained by ``lgb.train`` or
    loaded from a model file or string, by the tree kernels: what LightGBM returns, to the bit. A
    model they do not take, and other arguments, run as LightGBM's own call."""

    reads_columns = True

    def __init__(self, booster, method: str, workers=None):
        if method not in BOOSTER_METHODS[Booster]:
            raise Unsupported(f"Booster.{method} is not compiled")
        self.booster, self.state = booster, _booster_state(booster)
        self.width = booster.num_feature()
        self.workers = workers if workers is not None and workers.count > 1 else None
        self._iterations = booster.best_iteration
        ensemble = _ensemble(booster, booster.params, self._iterations)
        if isinstance(ensemble, Unsupported):
            raise ensemble
        self.ensemble, self._other_iterations, self._categories = ensemble, {}, None

    def still_valid(self) -> bool:
        """False once the booster trains on or rolls back, loads another model, or has another best
        iteration, parameters or pandas categories (what ``predict`` reads besides the trees)."""
        (*objects, iterations), (*now, now_iterations) = self.state, _booster_state(self.booster)
        return iterations == now_iterations and all(map(is_, objects, now))

    def carried(self) -> list:
        return _carried(self.booster, self._iterations, self.ensemble)

    def __call__(self, /, *args, **kwargs):
        raw, ensemble = kwargs.pop("raw_score", False), self.ensemble
        if kwargs:
            ensemble = _ensemble_of_call(kwargs, ensemble, self._other_iterations, self.booster, self.booster.params)
        if len(args) != 1 or kwargs or type(raw) is not bool:
            raise Unsupported("arguments other than data, raw_score and num_iteration (to the tree kernels)")
        self._categories = ModelCategories.of(self.booster, self._categories)
        matrix = _matrix(args[0], self.width, self._categories)
        return _ensemble_predict(ensemble, matrix, self.workers, raw)


def _ensemble_of_call(kwargs: dict, default: Ensemble, others: dict, booster, params: dict) -> Ensemble:
    """The ensemble of a call's ``num_iteration`` (popped from ``kwargs``, with a ``start_iteration``
    of 0): ``default`` (the booster's best iteration's) or one built once and kept among a few in
    ``others`` (``kept_ensemble``); Unsupported for another start or kind."""
    start, iterations = kwargs.pop("start_iteration", 0), kwargs.pop("num_iteration", None)
    if type(start) is not int or start != 0:
        raise Unsupported(f"start_iteration={start!r} (to the tree kernels: 0)")
    if iterations is None or (type(iterations) is int and iterations == booster.best_iteration):
        return default
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)):
        raise Unsupported(f"num_iteration={iterations!r} (to the tree kernels: an int or None)")
    ensemble = kept_ensemble(others, int(iterations), lambda: _ensemble(booster, params, int(iterations)))
    if isinstance(ensemble, Unsupported):
        raise ensemble
    return ensemble


def _booster_state(booster) -> tuple:
    """The objects ``Booster.predict`` reads besides the trees (compared by identity: ``model_from_string``
    makes a new handle), then (best iteration, current iteration)."""
    return (booster._handle, booster.params, booster.pandas_categorical,
            (booster.best_iteration, booster.current_iteration()))


def _array_warnings(model, width: int) -> list | None:
    """The warnings scikit-learn's feature-name check gives when the model is given an array
    (the same for every array; checked once: LightGBM's ``feature_names_in_`` costs ~50 µs a
    call); None where that check cannot be run (older scikit-learn) and the model has names."""
    if _check_feature_names is None:
        return None if hasattr(model, "feature_names_in_") else []
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        _check_feature_names(model, np.zeros((0, width)), reset=False)
    return given


def _validation_registry() -> dict:
    """The registry ``warnings.warn`` keeps in the module of scikit-learn's check (warnings shown once there)."""
    return vars(sys.modules[_VALIDATION]).setdefault("__warningregistry__", {})


def _ensemble(booster, params: dict, iterations: int):
    """The booster's ``Ensemble``, or the Unsupported saying why the kernels do not reproduce it
    (once for the kernels a function's set-up builds: ``forest.built_once``)."""
    if any(params.get(alias) for alias in _ConfigAliases.get("pred_early_stop")):
        return Unsupported("pred_early_stop")
    return built_once(booster, _built_key(iterations), lambda: _read_ensemble(booster, iterations))


def _built_key(iterations: int) -> tuple:
    return ("lightgbm", iterations)


def _read_ensemble(booster, iterations: int):
    try:
        return lightgbm_ensemble(booster, iterations)
    except Unsupported as problem:
        return problem


def _carried(booster, iterations: int, ensemble) -> list:
    """What a saved function carries of a kernel's ensemble (``forest.shared_builds``): read again
    from the booster as it is pickled now (trees changed in place, which the kernel does not notice,
    are read as they are)."""
    if ensemble is None:
        return []
    key = _built_key(iterations)
    again = built_once(booster, key, lambda: _read_ensemble(booster, iterations))
    return [] if isinstance(again, Unsupported) else [(booster, key, again)]


def _ensemble_predict(ensemble: Ensemble, matrix: np.ndarray, workers, raw: bool = False) -> np.ndarray:
    """What ``_InnerPredictor.predict`` returns for ``matrix``: a vector for one output, else rows."""
    out = ensemble.predict(np.ascontiguousarray(matrix, dtype=np.float64), workers, raw)  # (one kind of matrix compiled)
    return out.reshape(-1) if ensemble.n_outputs == 1 else out


def lightgbm_ensemble(booster, iterations: int | None = None) -> Ensemble:
    """The kernels' ensemble of a LightGBM ``Booster`` scoring as ``booster.predict(X, num_iteration=iterations)``
    (``None``: its best iteration, else all); Unsupported for what the kernels do not reproduce."""
    if iterations is None:
        iterations = booster.best_iteration
    header, fields = sections(model_text(booster))
    per_iteration = int(header["num_tree_per_iteration"])
    available = len(fields["Tree"]) // per_iteration
    used = min(iterations, available) if iterations > 0 else available
    link, sigmoid = _link(header.get("objective"), booster.params)
    width = int(header["max_feature_idx"]) + 1
    divisor = float(used) if "average_output" in header else 0.0
    return Ensemble(_lightgbm_trees(fields, used * per_iteration, per_iteration, width), plain_reading(), width,
                    np.zeros(per_iteration), divisor=divisor, link=link, sigmoid=sigmoid)


def _lightgbm_trees(fields: dict, n: int, per_iteration: int, width: int):
    """The ``forest.Forest`` of LightGBM's first ``n`` trees, in order: a tree's internal nodes, then its leaves."""
    linear = fields["is_linear"][:n]
    if linear.numbers(np.int64, len(linear)).any():
        raise Unsupported("linear trees (linear_tree=True)")
    leaves = fields["num_leaves"][:n].numbers(np.int64, n)
    internal = leaves - 1
    starts = np.concatenate([[0], np.cumsum(2 * leaves - 1)])
    splits_at = np.repeat(starts[:-1], internal) + _positions(internal)  # (each tree's internal nodes, in order)
    leaves_at = np.repeat(starts[:-1] + internal, leaves) + _positions(leaves)
    total, n_splits = int(starts[-1]), int(internal.sum())
    feature, left, right = np.zeros(total, np.int64), np.full(total, LEAF), np.full(total, LEAF)
    flags, threshold, values = np.zeros(total, np.uint8), np.zeros(total), np.zeros((total, 1))
    values[leaves_at, 0] = fields["leaf_value"][:n].numbers(np.float64, int(leaves.sum()))
    feature[splits_at] = fields["split_feature"][:n].numbers(np.int64, n_splits)
    inner = np.repeat(internal, internal)  # (each internal node's tree's internal nodes)
    for side, into in (("left", left), ("right", right)):
        children = fields[f"{side}_child"][:n].numbers(np.int64, n_splits)
        into[splits_at] = np.where(children >= 0, children, inner + ~children)
    decision = fields["decision_type"][:n].numbers(np.int64, n_splits)
    threshold[splits_at], flags[splits_at] = _lightgbm_flags(fields["threshold"][:n].numbers(np.float64, n_splits),
                                                             decision)
    cat_bounds, cat_bits = _lightgbm_bitsets(fields, n, threshold, splits_at, decision, internal)
    return joined(Trees(feature, left, right, flags, threshold, values, starts, np.arange(n) % per_iteration),
                  cat_bounds, cat_bits, np.full(width, -1))


def _positions(sizes: np.ndarray) -> np.ndarray:
    """``0 .. size - 1`` for each of ``sizes``, one after the other."""
    return np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)


def _lightgbm_bitsets(fields: dict, n: int, threshold, splits_at, decision, internal) -> tuple:
    """(cat_bounds, cat_bits) of the first ``n`` trees' categorical splits, their thresholds made the
    index of their bitset in the whole forest (a tree's own index, plus the bitsets before it)."""
    counts = fields["num_cat"][:n].numbers(np.int64, n)
    own = counts[counts > 0]  # (the bitsets of each tree that lists some, in order)
    if not len(own):
        return [0], np.zeros(0, np.uint32)
    bounds = fields["cat_boundaries"][:len(own)].numbers(np.int64, int((own + 1).sum()))  # (a tree's from 0)
    ends = np.cumsum(own + 1) - 1
    words = np.cumsum(bounds[ends]) - bounds[ends]  # (the words before each tree's bitsets)
    later = np.ones(len(bounds), bool)
    later[ends - own] = False  # (a tree's bounds but its first, 0)
    cat_bounds = np.concatenate([[0], bounds[later] + np.repeat(words, own)])
    categorical = (decision & _LIGHTGBM_CATEGORICAL) != 0
    before = np.cumsum(counts) - counts  # (the bitsets before each tree's)
    threshold[splits_at[categorical]] += np.repeat(before, internal)[categorical]
    return cat_bounds, fields["cat_threshold"][:len(own)].numbers(np.uint32, int(cat_bounds[-1]))


_LIGHTGBM_CATEGORICAL, _LIGHTGBM_DEFAULT_LEFT = 1, 2  # decision_type bits; the missing type: (d >> 2) & 3
_LIGHTGBM_ZERO_MISSING, _LIGHTGBM_NAN_MISSING = 1, 2


def _lightgbm_flags(threshold: np.ndarray, decision: np.ndarray) -> tuple:
    """(thresholds, flags) of nodes of LightGBM's ``threshold`` and ``decision_type``, deciding as
    ``Tree::Decision`` does on the row LightGBM predicts (where ``abs(value) <= kZeroThreshold`` is 0.0)."""
    categorical = (decision & _LIGHTGBM_CATEGORICAL) != 0
    default_left = (decision & _LIGHTGBM_DEFAULT_LEFT) != 0
    missing = (decision >> 2) & 3
    zero_missing = ~categorical & (missing == _LIGHTGBM_ZERO_MISSING)
    plain = ~categorical & ~zero_missing
    # a NaN: the default way when it is the missing value (or zero is), else 0.0 compared; a
    # category that is NaN or not in the bitset: right
    nan_left = np.where(missing == _LIGHTGBM_NAN_MISSING, default_left, 0.0 <= threshold)
    missing_left = (plain & nan_left) | (zero_missing & default_left)
    # values within kZeroThreshold of 0 compare as 0.0: a threshold among them moves to their edge
    threshold = threshold.copy()
    threshold[plain & (0.0 <= threshold) & (threshold < ZERO)] = ZERO
    threshold[plain & (-ZERO <= threshold) & (threshold < 0.0)] = np.nextafter(-ZERO, -np.inf)
    flags = (np.where(missing_left, MISSING_LEFT, 0) | np.where(categorical, CATEGORICAL, 0)
             | np.where(zero_missing, ZERO_MISSING, 0))
    return threshold, flags.astype(np.uint8)


_IDENTITY_OBJECTIVES = {"regression", "regression_l1", "quantile", "mape", "huber", "fair", "lambdarank",
                        "rank_xendcg", "custom"}
_FIXED_LINKS = {"multiclass": SOFTMAX, "poisson": EXP, "gamma": EXP, "tweedie": EXP, "cross_entropy": SIGMOID,
                "cross_entropy_lambda": LOG1P_EXP}


def _link(objective: str | None, params: dict) -> tuple:
    """(link, sigmoid) of the model string's ``objective=`` line (none: the outputs as they are)."""
    if objective is None:
        return IDENTITY, 1.0
    name, *options = objective.split()
    settings = dict(o.split(":", 1) for o in options if ":" in o)
    if name in ("binary", "multiclassova"):
        sigmoid = float(settings["sigmoid"])
        if "sigmoid" in params and float(params["sigmoid"]) != sigmoid:  # (the string has 6 digits)
            raise Unsupported("a sigmoid parameter the model string does not hold exactly")
        return SIGMOID, sigmoid
    if name in _FIXED_LINKS:
        return _FIXED_LINKS[name], 1.0
    if name in _IDENTITY_OBJECTIVES:
        return (SIGNED_SQUARE if "sqrt" in options else IDENTITY), 1.0
    raise Unsupported(f"the objective {name!r}")


@njit
def _both_classes(positive):
    """``np.vstack((1.0 - positive, positive)).transpose()`` of float64 ``positive``, as LightGBM's
    scikit-learn API returns it (the same values and memory layout), in one call: 0.6 us, numpy's 1.2."""
    both = np.empty((2, len(positive)))
    for i in range(len(positive)):
        both[0, i] = 1.0 - positive[i]
        both[1, i] = positive[i]
    return both.T


class _SingleRow:
    """LightGBM's single-row prediction: a ``FastConfig`` per thread (LightGBM's own
    multi-threaded test uses one per thread), freed with this object."""

    def __init__(self, booster, parameters: str, iterations: int, width: int):
        self.booster = booster  # its handle must outlive the configurations
        self.parameters, self.iterations, self.width = parameters.encode(), iterations, width
        count = ctypes.c_int64(0)
        _safe_call(_LIB.LGBM_BoosterCalcNumPredict(
            booster._handle, ctypes.c_int(1), ctypes.c_int(_PREDICT_NORMAL), ctypes.c_int(0),
            ctypes.c_int(iterations), ctypes.byref(count),
        ))
        self.outputs = count.value
        self._configs = {}  # thread id -> FastConfigHandle
        self._lock = threading.Lock()
        weakref.finalize(self, _free_configs, self._configs, booster)

    def predict(self, row: np.ndarray) -> np.ndarray:
        """What ``_InnerPredictor.predict`` returns for this one-row float64 matrix."""
        row = np.ascontiguousarray(row, dtype=np.float64)
        config = self._configs.get(threading.get_ident())
        if config is None:
            config = self._new_config()
        out = np.empty(self.outputs, np.float64)
        written = ctypes.c_int64(0)
        _safe_call(_LIB.LGBM_BoosterPredictForMatSingleRowFast(  # (ctypes' data_as costs microseconds)
            config, ctypes.c_void_p(row.ctypes.data), ctypes.byref(written), ctypes.c_void_p(out.ctypes.data),
        ))
        if written.value != self.outputs:
            raise ValueError("LightGBM wrote an unexpected number of predictions")
        return out if self.outputs == 1 else out.reshape(1, -1)

    def _new_config(self):
        config = ctypes.c_void_p()
        _safe_call(_LIB.LGBM_BoosterPredictForMatSingleRowFastInit(
            self.booster._handle, ctypes.c_int(_PREDICT_NORMAL), ctypes.c_int(0), ctypes.c_int(self.iterations),
            ctypes.c_int(_FLOAT64), ctypes.c_int32(self.width), ctypes.c_char_p(self.parameters), ctypes.byref(config),
        ))
        with self._lock:
            self._configs[threading.get_ident()] = config
        return config


def _free_configs(configs: dict, booster) -> None:  # booster: kept alive until then
    for config in configs.values():
        _LIB.LGBM_FastConfigFree(config)
    configs.clear()


_PREDICT_NORMAL = 0  # C_API_PREDICT_NORMAL
_FLOAT64 = 1  # C_API_DTYPE_FLOAT64


def _float64_values(frame: pd.DataFrame, width: int) -> np.ndarray | None:
    """The frame's values as float64 (the values LightGBM reads from the matrix it builds of numpy
    int, float and bool columns: each number's double), gathered from its blocks without pandas'
    per-call overhead; None for other columns or widths (``_matrix`` decides)."""
    blocks = frame._mgr.blocks
    if not blocks or frame.shape[1] != width or len(frame) == 0 or not all(
            isinstance(dtype, np.dtype) and dtype.kind in "iufb" for dtype in {block.dtype for block in blocks}):
        return None  # (each dtype checked once: a frame built column by column has a block a column)
    if len(blocks) == 1 and blocks[0].dtype == np.float64:
        return blocks[0].values.T
    return interleaved(frame, np.float64)


def _matrix(X, width: int, categories: "ModelCategories") -> np.ndarray:
    """The matrix LightGBM builds from ``X``; Unsupported where it would do more (or raise)."""
    pandas_categorical = categories.lists
    if isinstance(X, Columns) and pandas_categorical:
        X = X.materialize()  # (frame[columns]: the frame, whose categories LightGBM reads)
    if pandas_categorical and type(X) is not pd.DataFrame:
        raise Unsupported("a model trained on pandas categorical columns, given no DataFrame")
    if isinstance(X, Columns):  # (frame[columns], a set_output frame: the columns where they are, each number's double)
        matrix = X.numbers("iufb", np.float64)
    elif isinstance(X, SelectedFrame):
        matrix = numeric_matrix(X)
    elif isinstance(X, ConcatenatedColumns):  # as the DataFrame below
        matrix = X.matrix(np.result_type(*[d.type for d in X.dtypes], np.float32))
    elif type(X) is pd.DataFrame:
        dtypes = [block.dtype for block in X._mgr.blocks]  # (the columns' dtypes, without the Series X.dtypes)
        if not pandas_categorical and all(isinstance(d, np.dtype) and d.kind in "iufb" for d in dtypes):
            matrix = X.to_numpy(dtype=np.result_type(*[d.type for d in dtypes], np.float32), copy=False)
        elif pandas_categorical or any(isinstance(d, pd.CategoricalDtype) for d in dtypes):
            matrix = categories.matrix(X, width)  # codes of the model's categories
            if matrix is None:
                matrix = _data_from_pandas(X, "auto", "auto", pandas_categorical)[0]
        else:
            raise Unsupported("columns that are not numpy int, float or bool, or pandas categorical")
    elif isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "iufb":
        # float32 and float64 as they are, other numbers as float32 (LightGBM's _np2d_to_np1d)
        matrix = X if X.dtype in (np.float32, np.float64) else X.astype(np.float32)
    else:
        raise Unsupported(f"input of type {kind_of(X)}")
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] != width:
        raise Unsupported("no rows, or not the model's number of features (LightGBM raises)")
    return matrix


class ModelCategories:
    """A model's pandas categories (LightGBM's ``pandas_categorical``: each categorical column's
    categories in training), each as a dict of its values' codes when they are all ``str`` or all
    ``int``: a frame's categorical column of such categories is given the codes
    ``Categorical.set_categories`` gives it, without pandas' ~0.4 ms a column of new dtypes and Index."""

    def __init__(self, lists):
        self.lists = lists
        self.codes = [_codes_of(categories) for categories in lists or ()]

    @staticmethod
    def of(booster, kept: "ModelCategories | None") -> "ModelCategories":
        """The booster's: ``kept`` while its ``pandas_categorical`` is the same list."""
        lists = booster.pandas_categorical
        return kept if kept is not None and kept.lists is lists else ModelCategories(lists)

    def matrix(self, frame: pd.DataFrame, width: int) -> np.ndarray | None:
        """The float64 matrix whose values are those of the one ``_data_from_pandas`` builds (numbers
        as their doubles, categories as codes in the model's categories, NaN for any other); None
        where LightGBM's own conversion is needed (other columns, categories or names, or it raises)."""
        if not self.lists or frame.shape[1] != width or len(frame) == 0 or not frame.columns.is_unique:
            return None
        matrix, categorical = np.empty((len(frame), width), np.float64), []
        for block in frame._mgr.blocks:
            if isinstance(block.dtype, pd.CategoricalDtype):
                categorical.append((block.mgr_locs.as_array[0], block.values))
            elif isinstance(block.dtype, np.dtype) and block.dtype.kind in "iufb":
                matrix[:, block.mgr_locs.as_array] = block.values.T
            else:
                return None
        if len(categorical) != len(self.codes):  # (LightGBM raises)
            return None
        for (column, values), codes in zip(sorted(categorical, key=lambda pair: pair[0]), self.codes):
            recoded = _recoded(values.categories, codes)
            if recoded is None:
                return None
            matrix[:, column] = recoded[values.codes]  # (code -1, a missing value, reads the last: NaN)
        return matrix


def _codes_of(categories: list) -> tuple | None:
    """(kind, {category: code}) of a training column's categories all ``str`` or all ``int`` (not
    bool), the kinds whose matching by pandas' hash tables is Python's equality; None otherwise."""
    for kind in (str, int):
        if all(type(value) is kind for value in categories):
            return kind, {value: code for code, value in enumerate(categories)}
    return None


def _recoded(categories: pd.Index, codes: tuple | None) -> np.ndarray | None:
    """Each of a column's categories' code in the model's (NaN where it has none), then NaN: indexed
    by the column's codes, what ``set_categories`` then ``replace({-1: np.nan})`` give."""
    if codes is None:
        return None
    kind, lookup = codes
    dtype = categories.dtype
    if kind is str and not (dtype == object or isinstance(dtype, pd.StringDtype)):
        return None
    if kind is int and not (isinstance(dtype, np.dtype) and dtype.kind in "iu"):
        return None
    values = categories.tolist()
    if kind is str and not all(type(value) is str for value in values):
        return None
    recoded = np.array([lookup.get(value, -1) for value in values] + [-1], np.float64)
    recoded[recoded < 0] = np.nan
    return recoded
