"""XGBoost models (an optional dependency): scored by the shared tree kernels (``forest``) with
XGBoost's float32 arithmetic, to the bit what ``predict_proba`` / ``predict`` return (an
``XGBClassifier``'s ``predict``: the class indexes XGBoost takes from those probabilities).

The booster's JSON gives each tree's nodes; a row goes left when ``value < split_condition``
(stored as the largest double below it, the kernels comparing ``<=``), a NaN the node's
``default_left`` way, and a leaf's value is its ``split_condition``. The row is read as XGBoost's
DMatrix reads it (float32; NaN and infinities kept), the trees' values are summed in float32 from
the base margin in tree order (XGBoost's CPU predictor), each tree into its class's output, and
the sums are mapped by the objective's float32 link (``common::Sigmoid``, ``common::Softmax``,
``expf``; ``OBJECTIVES``). A call's ``iteration_range`` scores that range's trees (as
``XGBModel._get_iteration_range`` reads it: an end of 0 means the best iteration's, or all);
``output_margin=True`` gives the sums before the link. Other objectives, categorical splits,
several targets, other boosters, a ``base_margin``, ``validate_features=False`` and a ranker
given a frame with its ``qid`` column run as XGBoost's call.

XGBoost's own API is compiled too: ``booster.inplace_predict(X)`` and ``booster.predict(DMatrix(X))``
(the DMatrix kept as its data while only the booster's ``predict`` reads it: ``CompiledDMatrix``),
every round by default (``iteration_range=(0, 0)``), names checked as XGBoost checks them.
"""

import json
import math

import numpy as np
import pandas as pd
import xgboost

from willump.compile.forest import (
    EXP32, FLOAT32, IDENTITY, LEAF, MISSING_LEFT, SIGMOID32, SOFTMAX32, Ensemble, Tree, built_once, joined,
    kept_ensemble, plain_reading, stacked,
)
from willump.compile.forms import Columns, Deferred, Unsupported, held_attributes, kind_of, materialized, same_attributes
from willump.compile.jit import njit
from willump.compile.linear import interleaved, named_columns
from willump.compile.parallel import SERIAL

METHODS = {xgboost.XGBClassifier: ("predict_proba", "predict"), xgboost.XGBRegressor: ("predict",),
           xgboost.XGBRanker: ("predict",)}


class CompiledXGBoost:
    """One method of a fitted XGBoost scikit-learn model."""

    reads_columns = True  # (given frame[columns] kept as Columns)

    def __init__(self, model, method: str, workers=SERIAL):
        kind = type(model)
        if method not in METHODS.get(kind, ()):
            raise Unsupported(f"{kind.__name__}.{method} is not compiled")
        if _version(xgboost.__version__) < OLDEST:
            raise Unsupported(f"XGBoost {xgboost.__version__} (the kernels follow XGBoost >= 3.0)")
        if not model.__sklearn_is_fitted__():
            raise Unsupported("the model is not fitted")
        if not (isinstance(model.missing, float) and math.isnan(model.missing)):
            raise Unsupported(f"missing={model.missing!r} (values other than NaN read as missing)")
        self.model, self.method, self.workers = model, method, workers
        self.state = held_attributes(model)
        self.width = model.n_features_in_
        names = getattr(model, "feature_names_in_", None)
        self.names = None if names is None else names.tolist()
        self._named = None
        self.rounds = model.get_booster().num_boosted_rounds()
        try:  # (XGBModel.predict uses the best iteration of early stopping, when there is one)
            self.default_range = (0, model.best_iteration + 1)
        except AttributeError:
            self.default_range = (0, self.rounds)
        self.classifier, self.ranker = kind is xgboost.XGBClassifier, kind is xgboost.XGBRanker
        self.objectives = KIND_OBJECTIVES[kind]
        self.ensemble = self._read()
        self._other_ranges = {}  # (begin, end): its ensemble, for a few other iteration ranges

    def _read(self) -> Ensemble:
        """The ensemble of the default range, read once by the kernels of one set-up (``forest.built_once``)."""
        model, width, span, objectives = self.model, self.width, self.default_range, self.objectives
        return built_once(model, _built_key(span), lambda: xgboost_ensemble(model.get_booster(), width, span, objectives))

    def still_valid(self) -> bool:
        """False once the model is refitted or a parameter is set."""
        return same_attributes(self.model, self.state)

    def carried(self) -> list:
        """What a saved function carries (``forest.shared_builds``): read again from the model as it is now."""
        return [(self.model, _built_key(self.default_range), self._read())]

    def __call__(self, /, *args, **kwargs):
        if len(args) != 1:
            raise Unsupported("arguments other than X given by position")
        ensemble, margin = self._ensemble_of_call(kwargs)
        X = args[0]
        qid = hasattr(X, "qid") if type(X) is pd.DataFrame else isinstance(X, Columns) and "qid" in X.labels
        if self.ranker and qid:
            raise Unsupported("a frame with a qid column (XGBRanker's predict drops it)")
        matrix, self._named = _matrix(X, self.names, self.width, self._named)
        out = ensemble.predict(matrix, self.workers, raw=margin).astype(np.float32)
        if self.classifier and self.method == "predict" and not margin:
            return _class_indexes(out)
        if ensemble.n_outputs > 1:
            return out
        if self.method == "predict_proba":  # (xgboost's _cls_predict_proba for two classes)
            return np.vstack((1.0 - out[:, 0], out[:, 0])).transpose()
        return out[:, 0]

    def _ensemble_of_call(self, kwargs: dict) -> tuple:
        """(the ensemble of a call's ``iteration_range``, whether it asks for margins), or Unsupported
        for an argument the kernels do not answer as XGBoost does."""
        options = dict(CALL_DEFAULTS[self.method], **kwargs)
        if len(options) != len(CALL_DEFAULTS[self.method]):
            raise Unsupported(f"arguments {sorted(set(kwargs) - set(CALL_DEFAULTS[self.method]))}")
        if options["validate_features"] is not True or options["base_margin"] is not None:
            raise Unsupported("validate_features other than True, or a base_margin")
        margin = options.get("output_margin", False)
        if type(margin) is not bool:
            raise Unsupported(f"output_margin={margin!r}")
        return self._ensemble_of_range(options["iteration_range"]), margin

    def _ensemble_of_range(self, iteration_range) -> Ensemble:
        """The ensemble of the trees of ``iteration_range`` as ``XGBModel._get_iteration_range`` reads
        it (None or an end of 0: the default range), built once and kept among a few."""
        if iteration_range is None:
            return self.ensemble
        begin, end = _bounds(iteration_range)
        if end == 0 or (begin, end) == self.default_range:
            return self.ensemble
        if not 0 <= begin < end <= self.rounds:  # (XGBoost raises past its rounds; no trees: its base score)
            raise Unsupported(f"iteration_range={iteration_range!r}: not some of the model's {self.rounds} rounds")
        return kept_ensemble(self._other_ranges, (begin, end), lambda: xgboost_ensemble(
            self.model.get_booster(), self.width, (begin, end), self.objectives))



def _built_key(span: tuple) -> tuple:
    """The key of the ensemble of the rounds ``span`` (``forest.built_once``, carried by saved functions)."""
    return ("xgboost", span)

def _matrix(X, names: list | None, width: int, named) -> tuple:
    """(the matrix XGBoost reads of ``X``, the columns found to be ``names``): a frame's columns
    must be the model's names, in order, where it has names (XGBoost raises otherwise)."""
    if type(X) is pd.DataFrame:
        if names is not None:  # (fitted without names, XGBoost reads any frame's columns in order)
            named = named_columns(X.columns, names, named)
        matrix = _read_as_floats(interleaved, X, {block.dtype for block in X._mgr.blocks})
    elif isinstance(X, Columns):  # (frame[columns], a set_output frame: the columns where they are)
        X = X if names is None else X.named(names, "XGBoost")
        matrix = _read_as_floats(lambda columns, dtype: columns.numbers("biuf", dtype), X, {a.dtype for a in X.arrays()})
    elif type(X) is np.ndarray and X.ndim == 2 and X.dtype.kind in "iuf":
        matrix = X
    else:
        raise Unsupported(f"input of type {kind_of(X)}")
    if matrix.shape[0] == 0 or matrix.shape[1] != width:
        raise Unsupported("no rows, or not the model's number of features (XGBoost raises)")
    return matrix, named


def _read_as_floats(side_by_side, columns, dtypes: set) -> np.ndarray:
    """The float32 matrix XGBoost reads of a frame's columns of numpy numbers or bools: each value cast
    straight to float (a large int64 not rounded to a double first, as pandas' interleaving would;
    too large a double to infinity, silently)."""
    if not dtypes or not all(isinstance(d, np.dtype) and d.kind in "biuf" for d in dtypes):
        raise Unsupported("columns other than numpy numbers and bools")
    with np.errstate(over="ignore"):
        return side_by_side(columns, np.float32)


class DMatrixOf(Deferred):
    """``xgboost.DMatrix(data)`` kept as its data (a frame, its selected columns or an array)."""

    stands_for = xgboost.DMatrix

    def __init__(self, data, options: dict):
        self.data, self._options = data, options

    def _build(self):
        return xgboost.DMatrix(materialized(self.data), **self._options)

    def protect(self) -> None:
        """Built now (XGBoost copies the data): code that runs before the booster reads it may change the data."""
        self.materialize()
        self.data = None


class CompiledDMatrix:
    """``xgboost.DMatrix(X)`` that only a booster's ``predict`` reads: ``DMatrixOf`` its data."""

    reads_columns = True  # (given frame[columns] kept as Columns)
    operator_name = "xgboost.DMatrix"

    def __call__(self, /, *args, **kwargs):
        raise Unsupported("its result is used as a DMatrix")

    @staticmethod
    def defer(data, *args, **options) -> DMatrixOf:
        missing = options.get("missing")
        missing_is_nan = missing is None or isinstance(missing, float) and math.isnan(missing)
        if args or set(options) - DMATRIX_OPTIONS or not missing_is_nan:
            raise Unsupported("DMatrix arguments other than the data, missing=NaN, nthread and silent")
        if not (type(data) in (pd.DataFrame, np.ndarray) or isinstance(data, Columns)):
            raise Unsupported(f"a DMatrix of a {kind_of(data)}")
        return DMatrixOf(data, options)

    @staticmethod
    def still_valid() -> bool:
        return True


DMATRIX_OPTIONS = {"missing", "nthread", "silent"}  # (the threads and messages change no value)


class CompiledXGBoostBooster:
    """XGBoost's own ``Booster.inplace_predict(X)`` and ``Booster.predict(DMatrix(X))``: every round
    by default, a range of them, margins (``predict_type="margin"``, ``output_margin=True``)."""

    reads_columns = True

    def __init__(self, booster, method: str, workers=SERIAL):
        if _version(xgboost.__version__) < OLDEST:
            raise Unsupported(f"XGBoost {xgboost.__version__} (the kernels follow XGBoost >= 3.0)")
        self.booster, self.method, self.workers = booster, method, workers
        self.state = _booster_state(booster)
        self.width, self.names, self._named = booster.num_features(), booster.feature_names, None
        self.rounds = booster.num_boosted_rounds()
        self.ensemble = self._read()
        self._other_ranges = {}

    def _read(self) -> Ensemble:
        """Every round's ensemble, read once by the kernels of one set-up (``forest.built_once``)."""
        booster, width, span = self.booster, self.width, (0, self.rounds)
        return built_once(booster, _built_key(span), lambda: xgboost_ensemble(booster, width, span))

    def still_valid(self) -> bool:
        """False once the booster is trained further, loads another model or gets other feature names."""
        return _booster_state(self.booster) == self.state

    def carried(self) -> list:
        """What a saved function carries (``forest.shared_builds``): read again from the booster as it is now."""
        return [(self.booster, _built_key((0, self.rounds)), self._read())]

    def __call__(self, data, **kwargs):
        margin, iteration_range = self._options(kwargs)
        if self.method == "predict":
            if not isinstance(data, DMatrixOf) or data.data is None:
                raise Unsupported("a DMatrix built before the call (its data is XGBoost's)")
            data = data.data
            if self.names is not None and not (type(data) is pd.DataFrame or isinstance(data, Columns)):
                raise Unsupported("a DMatrix without the feature names the booster has (XGBoost raises)")
        matrix, self._named = _matrix(data, self.names, self.width, self._named)
        if self.method == "predict" and np.isinf(matrix.astype(np.float32, copy=False)).any():
            raise Unsupported("infinities or values float32 cannot hold (the DMatrix raises)")
        out = self._ensemble_of_range(iteration_range).predict(matrix, self.workers, raw=margin).astype(np.float32)
        return out if out.shape[1] > 1 else out[:, 0]

    def _options(self, kwargs: dict) -> tuple:
        """(whether margins are asked for, the iteration range), or Unsupported for other arguments."""
        defaults = BOOSTER_DEFAULTS[self.method]
        if set(kwargs) - set(defaults):
            raise Unsupported(f"arguments {sorted(set(kwargs) - set(defaults))}")
        options = {**defaults, **kwargs}
        output, margins = options.pop(OUTPUTS[self.method]), MARGINS[self.method]
        iteration_range, missing = options.pop("iteration_range"), options.pop("missing", np.nan)
        if type(output) not in (bool, str) or output not in margins:
            raise Unsupported(f"{OUTPUTS[self.method]}={output!r} (the kernels give values or margins)")
        if not (isinstance(missing, float) and math.isnan(missing)):
            raise Unsupported(f"missing={missing!r} (values other than NaN read as missing)")
        if any(value is not defaults[name] for name, value in options.items()):
            raise Unsupported(f"arguments other than their defaults: {sorted(options)}")
        return margins[output], iteration_range

    def _ensemble_of_range(self, iteration_range) -> Ensemble:
        """The ensemble of ``iteration_range`` as ``Booster.predict`` reads it: (0, 0), every round."""
        begin, end = _bounds(iteration_range)
        if end == 0 and begin == 0 or (begin, end) == (0, self.rounds):
            return self.ensemble
        if not 0 <= begin < end <= self.rounds:
            raise Unsupported(f"iteration_range={iteration_range!r}: not some of the booster's {self.rounds} rounds")
        return kept_ensemble(self._other_ranges, (begin, end), lambda: xgboost_ensemble(
            self.booster, self.width, (begin, end)))


def _bounds(iteration_range) -> tuple:
    """(begin, end) of an ``iteration_range`` of two ints; Unsupported for anything else."""
    if not (type(iteration_range) in (tuple, list) and len(iteration_range) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in iteration_range)):
        raise Unsupported(f"iteration_range={iteration_range!r} (to the tree kernels: two ints)")
    return int(iteration_range[0]), int(iteration_range[1])


def _booster_state(booster) -> tuple:
    """What a booster's answers depend on: its model (handle, rounds) and its features' names and types."""
    return booster.handle.value, booster.num_boosted_rounds(), booster.feature_names, booster.feature_types


OUTPUTS = {"predict": "output_margin", "inplace_predict": "predict_type"}  # (the argument choosing margins)
MARGINS = {"predict": {False: False, True: True}, "inplace_predict": {"value": False, "margin": True}}
# the keyword arguments the booster's methods answer, with their defaults
BOOSTER_DEFAULTS = {
    "predict": {"output_margin": False, "pred_leaf": False, "pred_contribs": False, "approx_contribs": False,
                "pred_interactions": False, "validate_features": True, "training": False, "iteration_range": (0, 0),
                "strict_shape": False},
    "inplace_predict": {"iteration_range": (0, 0), "predict_type": "value", "missing": np.nan,
                        "validate_features": True, "base_margin": None, "strict_shape": False},
}


# the keyword arguments each method answers, with their defaults
CALL_DEFAULTS = {
    "predict_proba": {"validate_features": True, "base_margin": None, "iteration_range": None},
    "predict": {"output_margin": False, "validate_features": True, "base_margin": None, "iteration_range": None},
}


def _class_indexes(probabilities: np.ndarray) -> np.ndarray:
    """``XGBClassifier.predict``'s answer from its probabilities (rows, outputs): the most probable
    class of several (``argmax``), else 1 where the positive class's is above 0.5 (XGBoost's labels
    are the classes' indexes)."""
    if probabilities.shape[1] > 1:
        return np.argmax(probabilities, axis=1)
    indexes = np.repeat(0, len(probabilities))
    indexes[probabilities[:, 0] > 0.5] = 1
    return indexes


BOOSTER_METHODS = {xgboost.Booster: ("predict", "inplace_predict")}
KERNELS = [(METHODS, CompiledXGBoost), (BOOSTER_METHODS, CompiledXGBoostBooster)]  # (what the registry builds)
FUNCTIONS = {xgboost.DMatrix: CompiledDMatrix()}
OLDEST = (3, 0)  # the oldest XGBoost whose arithmetic the tests check


def _version(text: str) -> tuple:
    """(major, minor) of a version string such as ``3.1.0rc1``."""
    major, minor = (text.split(".") + ["0"])[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)


def xgboost_ensemble(booster, width: int, iteration_range: tuple | None = None, objectives=None) -> Ensemble:
    """The kernels' ensemble of an XGBoost booster's trees of ``iteration_range`` (begin, end) (None:
    all), or Unsupported for what they do not reproduce (an objective not among ``objectives`` included)."""
    learner = json.loads(booster.save_raw("json"))["learner"]
    objective = learner["objective"]["name"]
    if objective not in (objectives or OBJECTIVES):
        raise Unsupported(f"the objective {objective!r}")
    if learner["gradient_booster"]["name"] != "gbtree":
        raise Unsupported(f"the booster {learner['gradient_booster']['name']!r}")
    parameters = learner["learner_model_param"]
    if int(parameters.get("num_target", "1")) != 1:
        raise Unsupported("several targets")
    outputs = max(1, int(parameters.get("num_class", "0")))
    bases = np.array(parameters["base_score"].strip("[]").split(","), np.float32)  # (one, or one per class)
    margin, link = OBJECTIVES[objective]
    model = learner["gradient_booster"]["model"]
    begin, end = iteration_range or (0, len(model["iteration_indptr"]) - 1)
    first, stop = model["iteration_indptr"][begin], model["iteration_indptr"][end]
    trees = [_tree(tree, column) for tree, column in zip(model["trees"][first:stop], model["tree_info"][first:stop])]
    initial = np.broadcast_to([np.float64(margin(base)) for base in bases], outputs)
    return Ensemble(joined(stacked(trees), [0], np.zeros(0, np.uint32), np.full(width, -1)), plain_reading(FLOAT32), width,
                    initial, link=link, single=True)


def _tree(tree: dict, column: int) -> Tree:
    """One tree of the booster's JSON, as the kernels read it, adding to output ``column``."""
    if any(tree["split_type"]):
        raise Unsupported("categorical splits")
    left, right = np.array(tree["left_children"], np.int64), np.array(tree["right_children"], np.int64)
    leaf = left == -1
    condition = np.array(tree["split_conditions"], np.float32).astype(np.float64)
    threshold = np.where(leaf, 0.0, np.nextafter(condition, -np.inf))  # (value < c  is  value <= the double below c)
    flags = np.where(np.array(tree["default_left"], bool) & ~leaf, MISSING_LEFT, 0).astype(np.uint8)
    left, right = np.where(leaf, LEAF, left), np.where(leaf, LEAF, right)
    return Tree(np.where(leaf, 0, np.array(tree["split_indices"], np.int64)), left, right, flags, threshold,
                np.where(leaf, condition, 0.0).reshape(-1, 1), int(column))


@njit
def _logit32(x):
    """XGBoost's ``common::Logit(float)``, ``-logf(1.0f / x - 1.0f)``: the base margin of ``binary:logistic``."""
    return -math.log(np.float32(np.float32(1.0) / x) - np.float32(1.0))


@njit
def _log32(x):
    """``logf(x)``: the base margin of the objectives whose link is ``expf``."""
    return math.log(x)


def _as_is(x):
    return x


# objective: (its base margin from base_score, its link)
OBJECTIVES = {
    "binary:logistic": (_logit32, SIGMOID32),
    "multi:softprob": (_as_is, SOFTMAX32),
    "reg:squarederror": (_as_is, IDENTITY),
    "reg:squaredlogerror": (_as_is, IDENTITY),
    "reg:pseudohubererror": (_as_is, IDENTITY),
    "reg:absoluteerror": (_as_is, IDENTITY),
    "reg:logistic": (_logit32, SIGMOID32),
    "count:poisson": (_log32, EXP32),
    "reg:gamma": (_log32, EXP32),
    "reg:tweedie": (_log32, EXP32),
    "rank:ndcg": (_as_is, IDENTITY),
    "rank:pairwise": (_as_is, IDENTITY),
    "rank:map": (_as_is, IDENTITY),
}
CLASSIFIER_OBJECTIVES = ("binary:logistic", "multi:softprob")
RANKER_OBJECTIVES = ("rank:ndcg", "rank:pairwise", "rank:map")
KIND_OBJECTIVES = {  # (the objectives each scikit-learn class is answered for)
    xgboost.XGBClassifier: CLASSIFIER_OBJECTIVES,
    xgboost.XGBRegressor: tuple(name for name in OBJECTIVES if name not in CLASSIFIER_OBJECTIVES + RANKER_OBJECTIVES),
    xgboost.XGBRanker: RANKER_OBJECTIVES,
}
