"""Compiled scikit-learn trees: decision trees, random and extra-trees forests, gradient boosting,
histogram gradient boosting, isolation forests, Bagging and AdaBoost of decision trees;
``predict``, ``predict_proba``, ``decision_function``, ``score_samples``.

A fitted model is read once into the shared flat arrays of ``forest`` (a reader per family:
``tree_forest`` for ``tree_`` objects, ``histogram_forest`` for HistGradientBoosting's predictors),
leaves marked ``left == -1`` as in scikit-learn, in the order the library sums the trees, and
scored by ``forest``'s kernels (batches split across ``workers``) with the library's arithmetic:

- trees and forests compare ``X`` converted to float32 (``check_array(X, dtype=float32)``)
  against float64 thresholds, NaN following ``missing_go_to_left`` where the tree supports
  missing values; a forest sums its trees' leaf proportions in estimator order from 0.0 and
  divides by the number of trees (``_accumulate_prediction`` with one job; a Bagging model
  sums each job's chunk of trees so, ``BaggedTrees``). With more jobs
  (``n_jobs=-1``, a joblib context) a forest's threads add the trees in the order they
  finish, so its own answers differ from call to call in the last bits (a 100-tree forest:
  30 calls on 1,000 rows, 30 different results, up to 3.3e-16 apart); the kernel gives the
  tree-order sum, the answer of one job and one of those several jobs can give;
- gradient boosting starts from its ``init_`` estimator's raw prediction (computed by
  scikit-learn's own ``_init_raw_predictions``; a constant, so only dummy estimators and
  ``"zero"`` are compiled) and adds ``learning_rate * value`` stage by stage (``predict_stages``);
- an isolation forest reads float32 as trees do (NaN and infinity where scikit-learn's tags allow
  them), each tree the features it was fitted on (``estimators_features_``, when it has fewer than all), a
  leaf's value the depth ``_parallel_compute_tree_depths`` adds for it (its path's length plus
  the average path length of its samples, minus one), summed tree by tree from 0.0 (in tree
  order in a joblib context of several jobs too, as forests are); the scores are then
  scikit-learn's expression of those depths;
- histogram gradient boosting compares float64 values, sends NaN by ``missing_go_to_left``,
  tests categories against the raw and known bitsets, and adds leaf values to
  ``0.0 + _baseline_prediction`` iteration by iteration (``_raw_predict``; its OpenMP threads
  split rows, so they change nothing). Its categorical features (``_preprocessor``, an
  ``OrdinalEncoder`` whose columns it puts first) are encoded in the kernel: a number is
  looked up among the sorted numeric categories, unknown and NaN become NaN; strings (pandas
  categorical or string columns, ``categorical_features="from_dtype"``) are looked up among the
  categories by pandas first (``labelled_values``), the kernel reading their positions.

The link functions, ``argmax`` and ``classes_`` lookups after the sums are scikit-learn's own
calls on arrays of the layout it builds (softmax sums depend on it). Input values scikit-learn
refuses (infinity, NaN where not supported, a category the encoder rejects) make the kernel
refuse the call, which then runs as written and raises scikit-learn's error.
"""

from types import SimpleNamespace

import numpy as np
import pandas as pd
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import (
    AdaBoostClassifier, AdaBoostRegressor, BaggingClassifier, BaggingRegressor, ExtraTreesClassifier,
    ExtraTreesRegressor, GradientBoostingClassifier, GradientBoostingRegressor,
    HistGradientBoostingClassifier, HistGradientBoostingRegressor, IsolationForest, RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.ensemble import _gb
from sklearn.ensemble._base import _partition_estimators
from sklearn.ensemble._iforest import _average_path_length
from sklearn.preprocessing import OrdinalEncoder
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from willump.compile.forest import (
    CAST_FLOAT32, CATEGORICAL, CHECKED_FLOAT32, FLOAT64, LEAF, MISSING_LEFT, Ensemble, Forest, Reading, Tree,
    built_once, joined, plain_reading, stacked,
)
from willump.compile.forms import (
    Columns, Deferred, Unsupported, answering, held_attributes, kind_of, same_attributes, stand_in,
)
from willump.compile.linear import checked_values, columns_values, named_columns
from willump.compile.preprocessing import frame_columns
from willump.compile.parallel import SERIAL

_CLASSIFY = ("predict", "predict_proba")
FORESTS = (RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier, ExtraTreesRegressor)
HISTOGRAM = (HistGradientBoostingClassifier, HistGradientBoostingRegressor)
BAGGING = {BaggingClassifier: DecisionTreeClassifier, BaggingRegressor: DecisionTreeRegressor}  # (: the trees they bag)
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
    IsolationForest: ("score_samples", "decision_function", "predict"),
    BaggingClassifier: _CLASSIFY,
    BaggingRegressor: ("predict",),
    AdaBoostClassifier: _CLASSIFY + ("decision_function",),
    AdaBoostRegressor: ("predict",),
}
_ITS_OWN = (BaggingClassifier, BaggingRegressor, AdaBoostClassifier, AdaBoostRegressor)  # (check_array(dtype=None))


def objects_dtype(model):
    """The dtype object columns are converted to: HistGradientBoosting's check's, float32 for trees (Bagging's
    and AdaBoost's checks leave objects to their trees' checks); None for categorical features, which
    scikit-learn's encoder compares as the objects they are ("1.0" is no category 1.0)."""
    if type(model) in HISTOGRAM:
        categorical = getattr(model, "is_categorical_", None)
        return None if categorical is not None and categorical.any() else np.dtype(np.float64)
    return np.dtype(np.float32)


def checked_dtype(kind: type):
    """The dtype the model's ``check_array`` is given, which a frame with bool columns is cast to
    first (None: the frame's common dtype; HistGradientBoosting's ``[float64]`` casts any numbers to it)."""
    return np.dtype(np.float64) if kind in HISTOGRAM else None if kind in _ITS_OWN else np.dtype(np.float32)


def tree_forest(trees: list, columns: list, values: list | None = None, sources: list | None = None) -> Forest:
    """The forest of scikit-learn ``Tree`` objects (``tree_``), in order; ``values``: each tree's node
    values, if not its ``value``; ``sources``: the input column of each feature each tree reads, if
    not the same."""
    values = values or [tree.value.reshape(tree.node_count, -1) for tree in trees]
    sources = sources or [None] * len(trees)
    return joined(stacked([_tree(tree, column, value, source) for tree, column, value, source in zip(
        trees, columns, values, sources)]), [0], np.zeros(0, np.uint32), np.zeros(0, np.int64))


def _tree(tree, column: int, values: np.ndarray, source) -> Tree:
    features = np.where(tree.children_left == LEAF, 0, tree.feature)
    return Tree(features if source is None else np.asarray(source, np.int64)[features], tree.children_left,
                tree.children_right, _missing_left(tree) * MISSING_LEFT, tree.threshold, values, column)


def _missing_left(tree) -> np.ndarray:
    missing = getattr(tree, "missing_go_to_left", None)  # (scikit-learn >= 1.3)
    return np.zeros(tree.node_count, np.uint8) if missing is None else missing.astype(np.uint8)


def histogram_forest(model, source=None) -> Forest:
    """The forest of a fitted HistGradientBoosting model's predictors, iteration by iteration: a
    categorical node's threshold the index of its bitset (scikit-learn's 8 words of raw bitsets, the
    predictors' in turn, then the known categories' bitsets, one per categorical feature).
    ``source``: the input column each feature the trees read comes from (default: the same)."""
    predictors = [(k, p) for iteration in model._predictors for k, p in enumerate(iteration)]
    bitset_offsets = np.cumsum([0] + [len(p.raw_left_cat_bitsets) for _, p in predictors])
    raw = [p.raw_left_cat_bitsets for _, p in predictors]
    known, known_rows = model._bin_mapper.make_known_categories_bitsets()
    source = np.arange(len(known_rows)) if source is None else np.asarray(source)
    inputs = np.empty(len(source), np.int64)
    inputs[source] = np.arange(len(source))  # (the feature read from each input column)
    trees = []
    for (k, predictor), offset in zip(predictors, bitset_offsets):
        nodes = predictor.nodes
        leaf = nodes["is_leaf"].astype(bool)
        categorical = nodes["is_categorical"].astype(bool) & ~leaf
        flags = nodes["missing_go_to_left"].astype(np.uint8) * MISSING_LEFT | np.where(categorical, CATEGORICAL, 0)
        children = [np.where(leaf, LEAF, nodes[side].astype(np.int64)) for side in ("left", "right")]
        threshold = np.where(categorical, nodes["bitset_idx"].astype(np.int64) + offset, nodes["num_threshold"])
        trees.append(Tree(np.where(leaf, 0, source[nodes["feature_idx"]]), *children, flags.astype(np.uint8), threshold,
                          nodes["value"].reshape(-1, 1), k))
    words = np.concatenate(raw + [np.asarray(known, np.uint32).reshape(-1, 8)]).reshape(-1)
    bounds = np.arange(0, len(words) + 1, 8)
    return joined(stacked(trees), bounds, words, bitset_offsets[-1] + np.asarray(known_rows, np.int64)[inputs])


class CompiledTrees:
    """One method of a fitted scikit-learn tree model (see the module's docstring)."""

    reads_columns = True  # (given frame[columns] kept as Columns: see _matrix)

    def __init__(self, model, method: str, workers=SERIAL):
        kind = type(model)
        if method not in METHODS.get(kind, ()):
            raise Unsupported(f"{kind.__name__}.{method} is not compiled")
        if not _fitted(model):
            raise Unsupported("the model is not fitted")
        if getattr(model, "n_outputs_", 1) != 1:
            raise Unsupported("a model with several outputs")
        self.model, self.method, self.kind, self.workers = model, method, kind, workers
        self.state, self.members = held_attributes(model), _members(model)
        self.width = width = model.n_features_in_
        names = getattr(model, "feature_names_in_", None)
        self.names = None if names is None else names.tolist()
        self._named = None  # the last columns (an immutable Index) found to be those names
        self._tables = {}  # (string categories' columns: see labelled_values)
        self._objects = objects_dtype(model)  # (what object columns are converted to, or None)
        self.ensemble, self._labels = self._read()

    def _read(self) -> tuple:
        """(the model's ensemble, its string categories' labels), read once by the kernels of one
        set-up (``forest.built_once``; the same for every method). Not carried by saved functions:
        read from scikit-learn's arrays, a forest is read again faster than its arrays load (300
        fully grown trees: ``willump.load`` 0.50 s reading them again, 0.63 s carrying them)."""
        model, width = self.model, self.width
        return built_once(model, ("scikit-learn", width), lambda: _ensemble_and_labels(model, width))

    def still_valid(self) -> bool:
        """False once the model is refitted, a parameter is set or an ensemble's list of trees changes length
        (``estimators_.pop()``, ``append``)."""
        return same_attributes(self.model, self.state) and _members(self.model) == self.members

    def __call__(self, /, *args, **kwargs):
        if len(args) == 1 and not kwargs:
            X = args[0]
        elif not args and set(kwargs) == {"X"}:
            X = kwargs["X"]
        else:
            raise Unsupported("arguments other than X")
        return self.finish(self.raw(self._matrix(X)))

    def _matrix(self, X) -> np.ndarray:
        """The array scikit-learn's checks would convert (the kernel converts each value as they do)."""
        if isinstance(X, Deferred) and X.stands_for is pd.DataFrame and not isinstance(X, Columns):
            X = X.materialize()  # (the call as written builds it too)
        if type(X) is pd.DataFrame:
            self._named = named_columns(X.columns, self.names, self._named)
            matrix = (labelled_values(frame_columns(X), self._labels, self._tables) if self._labels
                      else checked_values(X, checked_dtype(self.kind), self._objects))
        elif isinstance(X, Columns):  # (frame[columns], a set_output frame: the columns where they are)
            X = X.named(self.names)
            matrix = (labelled_values(X.arrays(), self._labels, self._tables) if self._labels
                      else columns_values(X, checked_dtype(self.kind)))
        elif type(X) is np.ndarray:
            if self.names is not None:
                raise Unsupported("an array given to a model fitted on named features (scikit-learn warns)")
            matrix = X
        else:
            raise Unsupported(f"input of type {kind_of(X)}")
        if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] != self.width:
            raise Unsupported("no rows, or not the model's number of features (scikit-learn raises)")
        if matrix.dtype == bool:
            matrix = matrix.view(np.uint8)  # (its 0 and 1, as scikit-learn's conversion gives them)
        if matrix.dtype not in _NUMBERS:
            raise Unsupported(f"{matrix.dtype} values (converted by scikit-learn, not here)")
        return matrix

    def raw(self, X: np.ndarray) -> np.ndarray:
        """The sums of the trees' values for the rows of ``X`` (n_rows, outputs), C-ordered."""
        return self.ensemble.predict(X, self.workers)

    def finish(self, raw: np.ndarray):
        """The method's answer from the sums, as the model's own method computes it."""
        model, method = self.model, self.method
        if self.kind in HISTOGRAM:
            return _histogram_answer(model, method, np.asfortranarray(raw))  # (_raw_predict's layout)
        if self.kind in (GradientBoostingClassifier, GradientBoostingRegressor):
            return _boosting_answer(model, method, raw)
        if self.kind is IsolationForest:
            return _isolation_answer(model, method, raw[:, 0])
        if self.kind is AdaBoostClassifier:
            return _adaboost_answer(model, method, raw)
        if self.kind is AdaBoostRegressor:
            return _weighted_median(model, raw)
        if method == "predict_proba":
            return raw
        if self.kind in (DecisionTreeRegressor, RandomForestRegressor, ExtraTreesRegressor, BaggingRegressor):
            return raw[:, 0]
        return model.classes_.take(np.argmax(raw, axis=1), axis=0)



def _members(model) -> int | None:
    """How many fitted estimators an ensemble holds (``estimators_``), None for a single tree."""
    members = vars(model).get("estimators_")
    return None if members is None else len(members)


def _ensemble_and_labels(model, width: int) -> tuple:
    """(the ensemble scoring ``model``'s rows of ``width`` features, its string categories' labels)."""
    kind = type(model)
    if kind in HISTOGRAM:
        return histogram_ensemble(model, width)
    if kind is IsolationForest:
        return isolation_ensemble(model, width), {}
    if kind in (GradientBoostingClassifier, GradientBoostingRegressor):
        return boosting_ensemble(model, width), {}
    if kind in BAGGING:
        return BaggedTrees(model, width), {}
    if kind is AdaBoostClassifier:
        return adaboost_ensemble(model, width), {}
    if kind is AdaBoostRegressor:
        return each_tree_ensemble(model, width), {}
    return forest_ensemble(model, width), {}

def forest_ensemble(model, width: int) -> Ensemble:
    """A decision tree's or a forest's: float32 values, leaf values summed from 0.0 and averaged
    (a single tree's values as they are: ``-0.0 + v`` is ``v``)."""
    single = not isinstance(model, FORESTS)
    estimators = [model] if single else model.estimators_
    trees = tree_forest([e.tree_ for e in estimators], [0] * len(estimators))
    reading = plain_reading(mode=CHECKED_FLOAT32, allow_nan=estimators[0]._support_missing_values(np.empty((1, 1))))
    initial = np.full(trees.values.shape[1], -0.0 if single else 0.0)
    return Ensemble(trees, reading, width, initial, divisor=0.0 if single else float(len(estimators)))


class BaggedTrees:
    """A Bagging model of decision trees, as its ``predict_proba`` / ``predict`` adds them: each of
    the jobs ``_partition_estimators`` makes sums its trees from 0.0 (a tree reading the features
    it was fitted on, ``estimators_features_``), then the jobs' sums are added (Python's ``sum``)
    and divided by the number of estimators. The jobs follow ``n_jobs`` and joblib's context at
    each call. Only the columns some tree reads are read (and checked: a tree checks what it is given)."""

    def __init__(self, model, width: int):
        tree_kind = BAGGING[type(model)]
        if not all(type(e) is tree_kind for e in model.estimators_):
            raise Unsupported(f"a {type(model).__name__} of estimators other than {tree_kind.__name__}")
        self.model = model
        self.outputs = len(model.classes_) if tree_kind is DecisionTreeClassifier else 1
        if self.outputs > 1 and any(len(e.classes_) != self.outputs for e in model.estimators_):
            raise Unsupported("a tree fitted on fewer classes than the Bagging model")
        self.read = np.unique(np.concatenate(model.estimators_features_))  # (the columns some tree reads)
        self.every_column = len(self.read) == width
        self._column_of = np.full(width, -1)
        self._column_of[self.read] = np.arange(len(self.read))  # (an input column's among those read)
        self.jobs = {}  # the number of jobs -> their ensembles (built for n_jobs now: the first call is fast)
        self._of_jobs()

    def predict(self, X: np.ndarray, workers=None) -> np.ndarray:
        X = X if self.every_column else X[:, self.read]
        return sum(ensemble.predict(X, workers) for ensemble in self._of_jobs()) / self.model.n_estimators

    def _of_jobs(self) -> list:
        """The ensembles of the jobs scikit-learn would run now (``n_jobs``, joblib's context)."""
        model = self.model
        jobs, _, starts = _partition_estimators(model.n_estimators, model.n_jobs)
        if jobs not in self.jobs:
            allow_nan = model.estimators_[0]._support_missing_values(np.empty((1, 1)))
            reading = plain_reading(mode=CHECKED_FLOAT32, allow_nan=allow_nan)
            self.jobs[jobs] = [
                Ensemble(self._forest(slice(start, stop)), reading, len(self.read), np.zeros(self.outputs))
                for start, stop in zip(starts[:-1], starts[1:])
            ]
        return self.jobs[jobs]

    def _forest(self, estimators: slice) -> Forest:
        trees = [e.tree_ for e in self.model.estimators_[estimators]]
        return tree_forest(trees, [0] * len(trees), None,
                           [self._column_of[features] for features in self.model.estimators_features_[estimators]])


def adaboost_ensemble(model, width: int) -> Ensemble:
    """An AdaBoostClassifier's (SAMME) decision sums: ``decision_function`` adds, estimator by estimator
    from 0, ``w`` at the class the tree predicts and ``-1 / (k - 1) * w`` at the others; so each
    tree's leaf holds that vector for the class its values' argmax picks (its ``predict``). The
    model checks that every value is finite; its trees read float32."""
    if getattr(model, "algorithm", "SAMME") != "SAMME":
        raise Unsupported(f"algorithm={model.algorithm!r} (only SAMME is compiled)")
    classes = model.n_classes_
    estimators = model.estimators_
    if classes < 2 or not all(type(e) is DecisionTreeClassifier and np.array_equal(e.classes_, model.classes_)
                               for e in estimators):
        raise Unsupported("an AdaBoostClassifier of one class or of estimators other than decision trees")
    values = []
    for estimator, weight in zip(estimators, model.estimator_weights_):
        tree = estimator.tree_
        vectors = np.full((tree.node_count, classes), -1 / (classes - 1) * weight)  # (as decision_function writes it)
        vectors[np.arange(tree.node_count), np.argmax(tree.value.reshape(tree.node_count, -1), axis=1)] = weight
        values.append(vectors)
    trees = tree_forest([e.tree_ for e in estimators], [0] * len(estimators), values)
    return Ensemble(trees, plain_reading(mode=CHECKED_FLOAT32, allow_nan=False), width, np.zeros(classes))


def _adaboost_answer(model, method: str, sums: np.ndarray):
    """The rest of AdaBoostClassifier's ``decision_function``, then its ``predict_proba`` or ``predict``."""
    sums /= model.estimator_weights_.sum()
    decision = sums
    if model.n_classes_ == 2:
        sums[:, 0] *= -1
        decision = sums.sum(axis=1)
    if method == "decision_function":
        return decision
    if method == "predict_proba":
        return model._compute_proba_from_decision(decision, model.n_classes_)
    if model.n_classes_ == 2:
        return model.classes_.take(decision > 0, axis=0)
    return model.classes_.take(np.argmax(decision, axis=1), axis=0)


def each_tree_ensemble(model, width: int) -> Ensemble:
    """An AdaBoostRegressor's trees, each to an output of its own (from -0.0: its values as they are),
    for the weighted median of their predictions; the model checks that every value is finite."""
    estimators = model.estimators_
    if not all(type(e) is DecisionTreeRegressor for e in estimators):
        raise Unsupported("an AdaBoostRegressor of estimators other than decision trees")
    trees = tree_forest([e.tree_ for e in estimators], list(range(len(estimators))))
    return Ensemble(trees, plain_reading(mode=CHECKED_FLOAT32, allow_nan=False), width, np.full(len(estimators), -0.0))


def _weighted_median(model, predictions: np.ndarray) -> np.ndarray:
    """AdaBoostRegressor's ``_get_median_predict`` itself, its estimators answering with their columns."""
    answers = [SimpleNamespace(predict=answering("predict", column)) for column in predictions.T]
    return stand_in(model, estimators_=answers)._get_median_predict(predictions, len(answers))


def isolation_ensemble(model, width: int) -> Ensemble:
    """An IsolationForest's: float32 values, each tree reading its features, its leaves' depths summed from 0.0."""
    estimators = model.estimators_
    subsets = model._max_features != width  # (as _compute_chunked_score_samples decides)
    sources = model.estimators_features_ if subsets else None
    depths = [lengths + averages - 1.0 for lengths, averages in zip(model._decision_path_lengths,
                                                                   model._average_path_length_per_tree)]
    trees = tree_forest([e.tree_ for e in estimators], [0] * len(estimators), [d.reshape(-1, 1) for d in depths],
                        sources)
    reading = plain_reading(CAST_FLOAT32) if _takes_nan(model) else plain_reading(CHECKED_FLOAT32, allow_nan=False)
    return Ensemble(trees, reading, width, np.zeros(1))


def _takes_nan(model) -> bool:
    """Whether the model's checks let NaN and infinity through (its ``allow_nan`` tag, which scikit-learn
    >= 1.6 sets when its scores check no value; before, ``_get_tags``: they checked every one)."""
    tags = getattr(model, "__sklearn_tags__", None)
    try:
        return bool(tags().input_tags.allow_nan)
    except (AttributeError, TypeError):
        return bool(model._get_tags().get("allow_nan", False))


def boosting_ensemble(model, width: int) -> Ensemble:
    """A GradientBoosting model's: float32 values, ``init_``'s prediction plus ``learning_rate * value``."""
    stages = model.estimators_
    trees = tree_forest([e.tree_ for e in stages.ravel()], list(range(stages.shape[1])) * stages.shape[0])
    return Ensemble(trees, plain_reading(mode=CHECKED_FLOAT32, allow_nan=False), width,
                    _boosting_start(model, width, stages.shape[1]), scale=float(model.learning_rate))


def histogram_ensemble(model, width: int) -> tuple[Ensemble, dict]:
    """A HistGradientBoosting model's (float64 values, categories encoded, its baseline plus leaf values)
    and its columns of string categories (``labelled_values``)."""
    preprocessor = model._preprocessor
    if preprocessor is None:
        reading, source, labels = plain_reading(FLOAT64, allow_nan=True), None, {}
    else:  # the trees read the preprocessor's outputs: read the input columns they come from instead
        reading, source, labels = _encoded_reading(preprocessor, width)
    trees = histogram_forest(model, source)
    if preprocessor is None and ((trees.nodes[:, 2] >> 32) & CATEGORICAL).any():
        raise Unsupported("categorical splits without scikit-learn's categorical preprocessor")
    baseline = model._baseline_prediction
    if baseline.dtype != np.float64 or baseline.shape != (1, model.n_trees_per_iteration_):
        raise Unsupported("a baseline prediction that is not a float64 row")
    initial = (np.zeros(baseline.shape) + baseline)[0]  # (_raw_predict: zeros, += baseline)
    return Ensemble(trees, reading, width, initial), labels


_NUMBERS = {np.dtype(t) for t in (np.float64, np.float32, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16, np.uint32)}


def _fitted(model) -> bool:
    names = ("_predictors",) if isinstance(model, HISTOGRAM) else ("tree_",) if isinstance(
        model, (DecisionTreeClassifier, DecisionTreeRegressor)) else ("estimators_",)
    return all(hasattr(model, name) for name in names) and hasattr(model, "n_features_in_")


def _encoded_reading(preprocessor, width: int) -> tuple[Reading, np.ndarray, dict]:
    """The reading of HistGradientBoosting's ``_preprocessor``: an ``OrdinalEncoder`` of the categorical
    columns (put first), then the numerical ones, the input column of each of its outputs, and the
    columns of string categories (pandas categorical or string columns), each with its categories:
    ``labelled_values`` reads their positions, which the reading then takes as the categories.
    Unsupported unless it is that, with categories of numbers or strings."""
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
    known, bounds, labels = [], [], {}  # (bounds: the encoding's rows)
    for categories in encoder.categories_:
        column = int(source[len(known)])
        if categories.dtype.kind in "iuf":
            values = categories.astype(np.float64)
            values = values[:-1] if len(values) and np.isnan(values[-1]) else values
            if not (np.all(np.abs(values) < 2.0 ** 53) and np.all(values[1:] > values[:-1])):
                raise Unsupported("categories that are not exact as float64, or not sorted")
        else:
            labels[column] = _string_categories(categories)
            values = np.arange(len(labels[column]), dtype=np.float64)  # (positions, as labelled_values reads them)
        start = sum(len(k) for k in known)
        bounds.append((column, start, start + len(values)))
        known.append(values)
    reading = Reading(FLOAT64, True, np.array(bounds, np.int64).reshape(-1, 3),
                      np.concatenate(known) if known else np.zeros(0))
    return reading, source, labels


def _string_categories(categories: np.ndarray) -> dict:
    """An encoder's categories of strings (missing values, which it puts last, left out): their positions."""
    values = list(categories)
    while values and (values[-1] is None or values[-1] != values[-1]):
        values.pop()
    if not all(isinstance(value, str) for value in values):
        raise Unsupported("categories that are neither all numbers nor all strings")
    return {value: position for position, value in enumerate(values)}


def labelled_values(columns: list, labels: dict, tables: dict) -> np.ndarray:
    """The float64 matrix the trees read of a frame's column arrays, of which ``labels`` hold string
    categories (pandas categorical or string columns; the others numpy ints and floats): each such
    column's values as their positions among the model's categories, NaN for a missing or unknown
    one, as the preprocessor's ``OrdinalEncoder`` encodes them. ``tables``: the positions of each
    column's last pandas categories, kept while its frames share them."""
    values = np.empty((len(columns), len(columns[0])))  # (columns, rows), transposed as pandas interleaves
    for column, array in enumerate(columns):
        if column in labels:
            values[column] = _positions(array, labels[column], tables, column)
        elif type(array) is np.ndarray and array.dtype.kind in "iuf":
            values[column] = array
        else:
            raise Unsupported("columns other than numpy numbers and the model's string categories")
    return values.T


def _positions(array, categories: dict, tables: dict, column: int) -> np.ndarray:
    """The positions among ``categories`` of a column's strings, NaN for missing and unknown ones."""
    if isinstance(array, pd.Categorical):
        kept = tables.get(column)
        if kept is None or kept[0] is not array.categories:
            if pd.api.types.infer_dtype(array.categories, skipna=True) != "string":
                raise Unsupported("pandas categories that are not strings")
            kept = tables[column] = (array.categories, _looked_up(array.categories, categories))
        codes = array.codes
        found = np.where(codes >= 0, kept[1][codes], -1)
    else:
        if pd.api.types.infer_dtype(array, skipna=True) not in ("string", "empty"):
            raise Unsupported("a column of strings and other values")
        found = _looked_up(array, categories)
    return np.where(found >= 0, found, np.nan)


def _looked_up(values, categories: dict) -> np.ndarray:
    """Each value's position among ``categories``, -1 where it is not one. (Looked up in a dict as
    Python objects: pandas' ``get_indexer`` takes 50-100 us to start, and is slower on objects.)"""
    return np.array([categories.get(value, -1) for value in np.asarray(values, dtype=object)], np.int64)


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


def _isolation_answer(model, method: str, depths: np.ndarray):
    """``IsolationForest``'s answer from the summed depths, as ``_compute_score_samples`` and the methods compute it."""
    denominator = len(model.estimators_) * _average_path_length([model._max_samples])
    scores = -(2 ** (-np.divide(depths, denominator, out=np.ones_like(depths), where=denominator != 0)))
    if method == "score_samples":
        return scores
    decision = scores - model.offset_
    if method == "decision_function":
        return decision
    is_inlier = np.ones_like(decision, dtype=int)
    is_inlier[decision < 0] = -1
    return is_inlier


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
