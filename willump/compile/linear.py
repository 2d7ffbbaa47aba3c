"""Compiled linear models: ``predict``, ``predict_proba``, ``decision_function``.

The scores ``X @ coef_.T + intercept_`` of a CSR input are summed by a numba
loop in the order scipy's ``csr_matvec`` sums them; a dense input goes to the
same numpy product scikit-learn calls. The link function (``expit``,
``softmax``, ``argmax``) is the very function scikit-learn applies. What is
skipped is scikit-learn's per-call validation, which for a single row costs
far more than the arithmetic; the checks that matter for the answer (width,
finite values, dtype) are made here, and anything else goes back to
scikit-learn, which then raises its own error. A DataFrame is read as
``validate_data`` reads it: its feature names checked, then the very array
``check_array`` gets from pandas (``frame_values``), whose memory layout
decides the order BLAS sums the product in.
"""

import math
import time
import warnings

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.special import expit
from sklearn.linear_model import (
    ARDRegression, BayesianRidge, ElasticNet, ElasticNetCV, HuberRegressor, Lars, LarsCV, Lasso, LassoCV, LassoLars,
    LassoLarsCV, LassoLarsIC, LinearRegression, LogisticRegression, LogisticRegressionCV, OrthogonalMatchingPursuit,
    OrthogonalMatchingPursuitCV, PassiveAggressiveClassifier, Perceptron, QuantileRegressor, Ridge, RidgeClassifier,
    RidgeClassifierCV, RidgeCV, SGDClassifier, SGDRegressor, TheilSenRegressor,
)
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.svm import LinearSVC, LinearSVR
from sklearn.utils.extmath import softmax

from willump.compile import fused
from willump.compile.forms import (
    Columns, Deferred, LazyRows, SparseRows, Stacked, Unsupported, answering, kind_of, stacked_dtype, stand_in,
)
from willump.compile.frames import SelectedColumns, names_known, selection_values
from willump.compile.jit import njit
from willump.compile.parallel import SERIAL, WORTH_A_THREAD, Faster
from willump.compile.preprocessing import check_finite

# Regressors whose predict is LinearModel's X @ coef_ + intercept_ (ElasticNet's and SGDRegressor's
# own _decision_function compute the same for the inputs the kernel takes: dense, or CSR of float64).
REGRESSORS = (
    LinearRegression, Ridge, RidgeCV, Lasso, LassoCV, ElasticNet, ElasticNetCV, Lars, LarsCV, LassoLars, LassoLarsCV,
    LassoLarsIC, OrthogonalMatchingPursuit, OrthogonalMatchingPursuitCV, BayesianRidge, ARDRegression, HuberRegressor,
    TheilSenRegressor, QuantileRegressor, LinearSVR, SGDRegressor,
)
METHODS = {
    LogisticRegression: ("predict", "predict_proba", "decision_function"),
    LogisticRegressionCV: ("predict", "predict_proba", "decision_function"),
    LinearSVC: ("predict", "decision_function"),
    SGDClassifier: ("predict", "predict_proba", "decision_function"),
    Perceptron: ("predict", "decision_function"),
    PassiveAggressiveClassifier: ("predict", "decision_function"),
    RidgeClassifier: ("predict", "decision_function"),
    RidgeClassifierCV: ("predict", "decision_function"),
    **{kind: ("predict",) for kind in REGRESSORS},
}


@njit
def csr_scores(datas, indices, indptrs, offsets, weights):
    """``X @ weights`` for dense ``weights`` (features x outputs) and ``X`` the CSR blocks
    side by side, summed in stored order as scipy's ``csr_matvec`` sums the stacked matrix."""
    n_rows = len(indptrs[0]) - 1
    out = np.zeros((n_rows, weights.shape[1]), np.float64)
    for i in range(n_rows):
        for k in range(weights.shape[1]):
            total = 0.0
            for b in range(len(datas)):
                data, idx, indptr, offset = datas[b], indices[b], indptrs[b], offsets[b]
                for jj in range(indptr[i], indptr[i + 1]):
                    total += data[jj] * weights[idx[jj] + offset, k]
            out[i, k] = total
    return out


class CompiledLinearModel:
    """One method of a fitted linear model, without scikit-learn's per-call overhead."""

    # Whether the model multiplies sparse input of any real dtype as it is (scipy then converts
    # the values to float64, which is exact), rather than refusing other than float64 here.
    converts_values = False
    reads_columns = True  # (given frame[columns] kept as Columns: see _product)

    def __init__(self, model, method: str, workers=SERIAL):
        kind = type(model)
        if method not in METHODS.get(kind, ()):
            raise Unsupported(f"{kind.__name__}.{method} is not compiled")
        coef = getattr(model, "coef_", None)
        if not isinstance(coef, np.ndarray) or coef.dtype != np.float64 or sp.issparse(coef):
            raise Unsupported("the model is not fitted, or its coefficients are not a float64 array")
        binarizer = getattr(model, "_label_binarizer", None)  # RidgeClassifier's labels
        if binarizer is not None and str(getattr(binarizer, "y_type_", "")).startswith("multilabel"):
            raise Unsupported(f"{kind.__name__} fitted on multilabel targets")
        self.model, self.method, self.kind = model, method, kind
        self._start(coef.shape[-1], workers)

    def _start(self, width: int, workers) -> None:
        """What every compiled model holds besides its model: the fitted state, the input's width."""
        self.state = self._fitted_state()
        self.width = width
        names = getattr(self.model, "feature_names_in_", None)
        self.names = None if names is None else names.tolist()  # the feature names seen in fit
        self._named = None  # the last columns (an immutable Index) found to be those names
        self.workers = workers
        self.fused_calls = 0  # calls answered with the vectorizers feeding the model (see fused)
        self.side_by_side = Faster()  # one row's vectorizers on the workers (True) or one after the other

    def still_valid(self) -> bool:
        return _same(self._fitted_state(), self.state)

    def _fitted_state(self) -> tuple:
        """The fitted arrays the kernel reads, compared by identity (held, so an id is never reused)."""
        model = self.model
        return (
            model.coef_, getattr(model, "intercept_", None), getattr(model, "classes_", None),
            getattr(model, "feature_names_in_", None),
        )

    def __call__(self, /, *args, **kwargs):
        X = _single_input(args, kwargs)
        return self.finish(self._product(X, self._weights()))

    def _weights(self) -> np.ndarray:
        """The live coefficients as the product reads them (features first): in-place updates are seen."""
        coef = self.model.coef_
        return coef.T if coef.ndim == 2 else coef

    def finish(self, product: np.ndarray):
        """The method's answer, given ``X @ _weights()``: the intercept added, then the link function."""
        model = self.model
        one_vs_rest = self.method == "predict_proba" and _one_vs_rest(model)
        if one_vs_rest and product.size == 1:
            pair = _one_probability(product, model)
            if pair is not None:
                return pair
        values = product + model.intercept_
        if self.method == "predict" and self.kind in REGRESSORS:
            return values
        scores = values.reshape(-1) if values.ndim > 1 and values.shape[1] == 1 else values
        if self.method == "decision_function":
            return scores
        if self.method == "predict":
            indices = (scores > 0).astype(np.intp) if scores.ndim == 1 else scores.argmax(axis=1)
            return model.classes_.take(indices, axis=0)
        if not one_vs_rest:  # (a multinomial model: LogisticRegression's softmax)
            return softmax(scores if scores.ndim == 2 else np.c_[-scores, scores], copy=False)
        if scores.ndim == 1:  # as LinearClassifierMixin._predict_proba_lr
            probability = expit(scores, out=scores)
            pair = np.empty((len(probability), 2))  # np.vstack([1 - probability, probability]).T
            np.subtract(1, probability, out=pair[:, 0])
            pair[:, 1] = probability
            return pair
        return LinearClassifierMixin._predict_proba_lr(  # (its normalization, which versions change)
            stand_in(model, decision_function=answering("decision_function", scores)), scores)

    def from_texts(self, plan: fused.Plan, texts: list, dense=None):
        """The answer for the vectorizers of ``plan`` (together the model's input) reading ``texts``
        (a list of ``str`` or ``CodePoints`` per vectorizer), computed without their rows (see ``fused``);
        ``dense``: the ``fused.DenseBlocks`` stacked with them, if any."""
        return self.finish(self.text_product(plan, texts, dense))

    def text_product(self, plan: fused.Plan, texts: list, dense=None) -> np.ndarray:
        """``X @ _weights()`` for ``X`` the vectorizers of ``plan`` reading ``texts`` (and ``dense``
        blocks): what ``finish`` takes."""
        self._refuse_named_features()
        weights = self._weights()
        matrix = weights if weights.ndim == 2 else weights[:, None]
        scores = self._text_scores(plan, texts, matrix, dense)
        return scores[:, 0] if weights.ndim == 1 else scores

    def _refuse_named_features(self) -> None:
        if hasattr(self.model, "feature_names_in_"):
            raise Unsupported("a model fitted on named features, given no names (scikit-learn warns)")

    def _product(self, X, weights):
        if type(X) is pd.DataFrame:
            return self._frame_array(X) @ weights
        if isinstance(X, Columns):  # (frame[columns], a set_output frame: the columns where they are)
            return self._selected_array(X) @ weights
        if isinstance(X, Deferred) and X.stands_for is pd.DataFrame:  # (pd.concat of Series: the frame pandas builds)
            return self._frame_array(X.materialize()) @ weights
        self._refuse_named_features()
        if type(X) is np.ndarray:  # not np.matrix or other subclasses, which scikit-learn refuses
            _check_dense(X, self.width)
            return X @ weights
        matrix = weights if weights.ndim == 2 else weights[:, None]  # the live coefficients (partial_fit)
        scores = self._fused(X, matrix)
        if scores is None:
            blocks = _sparse_blocks(X, self.width, self.converts_values)
            offsets = np.cumsum([0] + [b.width for b in blocks[:-1]])
            scores = csr_scores(
                tuple(b.data for b in blocks), tuple(b.indices for b in blocks), tuple(b.indptr for b in blocks),
                offsets, matrix,
            )
        return scores[:, 0] if weights.ndim == 1 else scores

    def _frame_array(self, frame: pd.DataFrame) -> np.ndarray:
        """The array ``validate_data`` hands the model for ``frame``; Unsupported where it would
        warn (names not seen in fit), raise (other names or order, no rows, NaN or infinity) or
        convert the values (see ``frame_values``)."""
        self._named = named_columns(frame.columns, self.names, self._named)
        if not len(frame):
            raise Unsupported("no rows (scikit-learn raises)")
        values = checked_values(frame, objects=np.dtype(np.float64))
        check_finite(values, finite=True)
        return values

    def _selected_array(self, selection: Columns) -> np.ndarray:
        """``_frame_array`` of the frame the selection stands for: the columns side by side in their
        common dtype, column-major as pandas gives the frame's values (BLAS sums in that order)."""
        values = columns_values(selection.named(self.names))
        check_finite(values, finite=True)
        return values

    def _fused(self, X, weights):
        """The scores of vectorizer rows not computed yet, computed with them (``fused``), or None."""
        blocks = X.blocks if isinstance(X, Stacked) else [X] if isinstance(X, LazyRows) else []
        if not (blocks and all(type(b) is LazyRows and b._done is None for b in blocks) and blocks[0].rows):
            return None
        kernels = [b.source[0] for b in blocks]
        if not self.fuses(kernels):
            return None
        plan = fused.plan_for(kernels, [k.width for k in kernels])
        try:
            return self._text_scores(plan, [b.source[1] for b in blocks], weights)
        except Unsupported:
            return None

    def fuses(self, kernels: list) -> bool:
        """Whether these vectorizers' outputs side by side are an input the fused kernel answers
        exactly: float64 (or integer counts) summed in float64, of the model's width."""
        return (
            fused.fusable_kernels(kernels) and (self.converts_values or stacked_dtype(kernels) == np.float64)
            and sum(k.width for k in kernels) == self.width
        )

    def _text_scores(self, plan: fused.Plan, texts: list, weights: np.ndarray, dense=None) -> np.ndarray:
        """``fused.planned_scores``, counted. When fusing measured slow enough to be worth threads,
        one row's vectorizers may instead run side by side on the workers: whichever of the two
        measured faster, each tried again now and then."""
        # One row's vectorizers may run on worker threads (batches are split across rows instead).
        choosing = self.workers.count > 1 and len(texts) > 1 and len(texts[0]) == 1
        side_by_side = choosing and self.side_by_side.seconds[False] >= WORTH_A_THREAD and self.side_by_side.choose()
        started = time.perf_counter()
        scores = fused.planned_scores(plan, texts, weights, self.workers, side_by_side, dense)
        self.fused_calls += 1
        if choosing:  # (a batch's time says nothing about one row's)
            self.side_by_side.record(side_by_side, time.perf_counter() - started)
        return scores


def _one_vs_rest(model) -> bool:
    """Does the classifier's predict_proba normalize one-vs-rest sigmoids (``_predict_proba_lr``)
    rather than take a softmax? As LogisticRegression decides it (before scikit-learn 1.7 by its
    multi_class and solver); SGDClassifier's log loss always. Unsupported for other losses."""
    if type(model) is SGDClassifier:
        if model.loss != "log_loss":
            raise Unsupported(f"SGDClassifier(loss={model.loss!r}).predict_proba")
        return True
    multi_class = getattr(model, "multi_class", "deprecated")
    return multi_class in ("ovr", "warn") or (
        multi_class in ("auto", "deprecated") and (model.classes_.size <= 2 or model.solver == "liblinear"))


def _one_probability(product: np.ndarray, model):
    """``predict_proba`` of one row of a binary classifier, as ``finish`` computes it but on
    scalars: the same IEEE addition, the same ``expit`` loop and subtraction, without numpy's
    per-call overhead on six tiny arrays (most of a single row's finishing time). None when
    that is not the case at hand, or when the sum overflows (numpy's error state then decides)."""
    intercept = model.intercept_
    if (
        type(intercept) is not np.ndarray or intercept.shape != (1,) or intercept.dtype != np.float64
        or product.dtype != np.float64 or model.classes_.size > 2
    ):
        return None
    total = product.item() + intercept.item()
    if not math.isfinite(total):
        return None
    probability = expit(total)
    return np.array([[1 - probability, probability]])


def _single_input(args, kwargs):
    if len(args) == 1 and not kwargs:
        return args[0]
    if not args and set(kwargs) == {"X"}:
        return kwargs["X"]
    raise Unsupported("arguments other than X")


def _check_dense(X, width: int) -> None:
    """Unsupported unless scikit-learn would use ``X`` as it is, without a conversion or an error."""
    if X.ndim != 2 or X.shape[0] == 0 or X.dtype != np.float64 or X.shape[1] != width or not np.isfinite(X).all():
        raise Unsupported("a dense input that is not a finite float64 matrix of the model's width with rows")


def named_columns(columns: pd.Index, names: list | None, named: pd.Index | None) -> pd.Index:
    """``columns``, when they are the feature names seen in fit (``names``), in order: checked unless
    they are ``named``, the last columns found to be them; Unsupported where scikit-learn raises or warns."""
    if columns is not named:
        if names is None:
            raise Unsupported("a DataFrame given to a model fitted without feature names (scikit-learn warns)")
        known = names_known(columns)
        labels = list(known) if known is not None else columns.tolist()
        if labels != names or not all(type(label) is str for label in labels):
            raise Unsupported("columns that are not the feature names seen in fit, in order (scikit-learn raises or warns)")
    return columns


def frame_values(frame: pd.DataFrame) -> np.ndarray:
    """``np.asarray(frame)`` as ``check_array`` calls it, for numpy int and float columns (where
    it converts nothing): built as pandas builds it, without its per-call overhead. One block
    gives its values transposed (a view, column-major when the block is contiguous); several
    are interleaved into a new (columns, rows) array of their common dtype, then transposed.
    Unsupported for other columns, which scikit-learn converts first (bool, extension dtypes)."""
    blocks = frame._mgr.blocks
    dtypes = {block.dtype for block in blocks}  # (each checked once: a frame may have a block a column)
    if not blocks or not all(isinstance(d, np.dtype) and d.kind in "iuf" for d in dtypes):
        raise Unsupported("columns that are not numpy ints or floats (scikit-learn converts them)")
    if len(blocks) == 1:
        return blocks[0].values.T
    return interleaved(frame, np.result_type(*dtypes))


def checked_values(frame: pd.DataFrame, dtype=None, objects=None) -> np.ndarray:
    """The array ``check_array(frame, dtype)`` makes of ``frame``: ``frame_values`` of numbers; with bools
    among them (``pd.get_dummies``' columns), scikit-learn first casts the frame to ``dtype`` (None: numpy's
    ``result_type`` of its dtypes), each block to it, and pandas interleaves the cast blocks; with object
    columns among numbers (numbers ``replace`` put in text), numpy converts pandas' interleaved objects to
    ``objects``, the dtype the model's check converts them to (None: not compiled)."""
    dtypes = {block.dtype for block in frame._mgr.blocks}
    if not all(isinstance(d, np.dtype) for d in dtypes):
        return frame_values(frame)  # (extension dtypes: refused)
    kinds = {d.kind for d in dtypes}
    if "b" in kinds and kinds <= set("biuf"):
        return _cast(interleaved, frame, dtype or np.result_type(*dtypes))
    if "O" in kinds and kinds <= set("iufO") and objects is not None:
        return _cast(_converted_objects, frame, objects)
    return frame_values(frame)


def _converted_objects(frame: pd.DataFrame, dtype) -> np.ndarray:
    """``np.asarray(frame, dtype)`` as pandas gives it for object columns: its interleaved objects converted;
    Unsupported where numpy raises or warns (complex numbers: scikit-learn raises)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return np.asarray(frame._mgr.as_array(), dtype=dtype)
        except (TypeError, ValueError, Warning):
            raise Unsupported("objects numpy cannot convert to numbers, or warns of (scikit-learn raises)") from None


def columns_values(columns: Columns, dtype=None) -> np.ndarray:
    """``checked_values`` of the frame the columns stand for."""
    if any(type(a) is np.ndarray and a.dtype == bool for a in columns.arrays()):
        return _cast(columns.numbers, "biuf", dtype)
    if type(columns) is SelectedColumns and len(columns.positions) > 1 and columns.positions[1] < columns.positions[0]:
        # ``frame[["b", "a"]]``: pandas' own array (of one block's columns a constant negative step apart, a view
        # with that step, whose product numpy sums without BLAS, in another order than a copy's); of ints,
        # scikit-learn's float copy keeps the layout numpy gives a copy
        values = selection_values(columns)
        if values.dtype == np.float64:
            return values
    return columns.numbers()


def _cast(build, *args) -> np.ndarray:
    """``build(*args)``; Unsupported where a cast it makes overflows (numpy warns, at the call as written)."""
    with np.errstate(over="raise"):
        try:
            return build(*args)
        except FloatingPointError:
            raise Unsupported("values the cast cannot hold (numpy warns of them)") from None


def interleaved(frame: pd.DataFrame, dtype) -> np.ndarray:
    """The frame's blocks as one (rows, columns) array of ``dtype``, as pandas interleaves them:
    into a new (columns, rows) array, transposed."""
    values = np.empty(frame._mgr.shape, dtype)
    for block in frame._mgr.blocks:
        values[block.mgr_locs.indexer] = block.values
    return values.T


def _sparse_blocks(X, width: int, converts: bool = False) -> list:
    """The CSR blocks of ``X`` (a CSR matrix, or compiled sparse rows), checked as scikit-learn checks X;
    ``converts``: values of another real dtype converted to float64, as scipy's product with float64
    weights converts them."""
    if isinstance(X, Stacked):
        blocks = X.blocks
    elif isinstance(X, SparseRows):
        blocks = [X]
    elif type(X) in (sp.csr_matrix, sp.csr_array) and len(X.data) == len(X.indices) == X.indptr[-1] and not X.indptr[0]:
        blocks = [SparseRows.of(X)]
    else:
        raise Unsupported(f"input of type {kind_of(X)}")
    if blocks[0].rows == 0 or sum(b.width for b in blocks) != width:
        raise Unsupported("no rows, or not the model's width (scikit-learn raises)")
    dtype = np.result_type(*[b.data.dtype for b in blocks])  # what the stacked matrix holds
    if converts and (dtype.kind in "biu" or dtype == np.float32):
        dtype = np.dtype(np.float64)
    if dtype != np.float64:
        raise Unsupported(f"{dtype} values (scikit-learn converts them)")
    blocks = [b if b.data.dtype == dtype else SparseRows(b.data.astype(dtype), b.indices, b.indptr, b.width) for b in blocks]
    if not all(np.isfinite(b.data).all() for b in blocks):
        raise Unsupported("values that are not finite (scikit-learn raises)")
    return blocks


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))
