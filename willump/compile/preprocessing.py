"""Compiled scikit-learn preprocessing ``transform``: scalers, ``SimpleImputer``,
``FunctionTransformer`` and ``PolynomialFeatures`` (the encoders are in ``encoders``).

For one row, scikit-learn's ``transform`` spends nearly all its time validating
the input (``validate_data``: feature names, dtypes, finiteness, a copy). These
kernels make the checks that decide the answer directly, then run the very
numpy operations scikit-learn runs, in its order (``X -= mean_`` then
``X /= scale_``), so the values are the same to the bit. Whatever scikit-learn
would warn about, raise on, or convert in a way not reproduced here (float32
input, sparse input, ``copy=False``, feature names that do not match) is
refused with ``Unsupported``, and scikit-learn's own call runs.

The options and fitted attributes a kernel read are held and compared by
identity on each call (``still_valid``): a refit or a changed option builds a
new kernel. Fitted arrays are read live, so in-place edits are seen.
"""

import math
import operator

import numpy as np
import pandas as pd
import sklearn
from sklearn.impute import SimpleImputer
from sklearn.preprocessing import (
    FunctionTransformer,
    MinMaxScaler,
    PolynomialFeatures,
    RobustScaler,
    StandardScaler,
)
from sklearn.utils._set_output import _auto_wrap_is_configured, _wrap_data_with_container

from willump.compile.forms import Columns, Deferred, FrameColumns, Unsupported, side_by_side
from willump.compile.jit import njit
from willump.compile.parallel import SERIAL

_NUMBERS = "iuf"  # numpy kinds the numeric kernels read (bools and others go to scikit-learn)
_FEW = 32  # values checked one by one in Python rather than by numpy


class FittedKernel:
    """What every kernel here shares: the fitted object, the attributes it read (held, and
    compared by identity in ``still_valid``), and scikit-learn's checks of ``X`` against the
    features seen in fit. Subclasses name ``KIND`` and ``ATTRIBUTES``; ``transform(X)``
    gives the answer before ``set_output``'s wrapping."""

    KIND = None
    ATTRIBUTES = ()
    reads_columns = True  # (Columns: see columns)
    WRAPS = True  # the output follows set_output (scikit-learn's auto-wrapping)

    def __init__(self, model, workers=SERIAL, fitted: bool = True):
        if type(model) is not self.KIND:
            raise Unsupported(f"{type(model).__name__} is not a {self.KIND.__name__}")
        self.model = model
        names = ("n_features_in_",) * fitted + self.ATTRIBUTES
        self._read = operator.attrgetter(*names)
        try:
            self._held = self._read(model)
        except AttributeError:
            raise Unsupported(f"the {self.KIND.__name__} is not fitted") from None
        self._names = getattr(model, "feature_names_in_", None)
        self.names = None if self._names is None else self._names.tolist()
        self.width = getattr(model, "n_features_in_", None)

    def still_valid(self) -> bool:
        """False once the object was refitted or an option it depends on was set."""
        model = self.model
        try:
            now = self._read(model)
        except AttributeError:
            return False
        return all(map(operator.is_, now, self._held)) and getattr(model, "feature_names_in_", None) is self._names

    def __call__(self, X, *args, **kwargs):
        if args or kwargs:
            raise Unsupported("arguments other than X")
        out = self.transform(X)
        if not self._wraps():
            return out
        X, out = (value.materialize() if isinstance(value, Columns) else value for value in (X, out))
        return _wrap_data_with_container("transform", out, X, self.model)

    def defer(self, X, *args, **kwargs):
        """As calling it; a frame ``set_output(transform="pandas")`` makes of the answer is kept as
        its columns (``FrameColumns``), built by scikit-learn's wrapping when a call needs it."""
        if args or kwargs:
            raise Unsupported("arguments other than X")
        out = self.transform(X)
        if not self._wraps():
            return out
        if isinstance(out, Columns):  # (the identity's: its input)
            arrays = out.arrays()
        elif type(out) is np.ndarray and out.ndim == 2:
            arrays = [out[:, j] for j in range(out.shape[1])]
        else:
            raise Unsupported(f"an answer of type {type(out).__name__} under set_output")
        index = X.index if isinstance(X, (Columns, pd.DataFrame)) else None
        labels = self.model.get_feature_names_out().tolist()
        return FrameColumns(labels, arrays, index, lambda: self._wrapped(out, index))

    def _wraps(self) -> bool:
        """Whether scikit-learn wraps the answer in a DataFrame; Unsupported for other wrappings."""
        config = output_config(self.model)
        if config == "default":
            return False
        if config != "pandas" or not self.WRAPS:
            raise Unsupported(f'set_output(transform="{config}")')
        return _auto_wrap_is_configured(self.model)

    def _wrapped(self, out, index: pd.Index | None) -> pd.DataFrame:
        """The frame scikit-learn's wrapping makes of ``out`` for an input with this ``index``."""
        out = out.materialize() if isinstance(out, Columns) else out
        return _wrap_data_with_container("transform", out, None if index is None else pd.DataFrame(index=index), self.model)

    def columns(self, X) -> list:
        """The columns of ``X`` (a DataFrame or a 2-D ndarray) as scikit-learn reads them, after
        its checks of feature names and count; Unsupported where scikit-learn warns or raises."""
        kind = type(X)
        if isinstance(X, Columns):  # (a frame with rows, its labels unique)
            return X.named(self.names).arrays()
        if kind is pd.DataFrame:
            if self.names is None or X.columns.tolist() != self.names:
                raise Unsupported("a DataFrame whose columns are not the feature names seen in fit")
            if not len(X):
                raise Unsupported("no rows (scikit-learn raises)")
            return frame_columns(X)
        if kind is not np.ndarray or X.ndim != 2:
            raise Unsupported(f"input of type {kind.__name__} (only DataFrames and 2-D arrays are compiled)")
        if self.names is not None:
            raise Unsupported("an array given to an object fitted on a DataFrame (scikit-learn warns)")
        if X.shape[1] != self.width or not len(X):
            raise Unsupported("not the width seen in fit, or no rows (scikit-learn raises)")
        return X

    def float_input(self, X, finite: bool = False) -> np.ndarray:
        """A new float64 array of ``X``'s values (ints, and bools as ``pd.get_dummies`` makes them, converted),
        as ``validate_data(..., dtype=FLOAT_DTYPES, copy=True)`` gives it; Unsupported for infinities (NaN too when ``finite``) and for
        input scikit-learn would keep as float32 or convert some other way."""
        columns = self.columns(X)
        array = type(columns) is np.ndarray
        dtype = columns.dtype if array else numeric_dtype(columns, bools=True)
        if dtype.kind not in _NUMBERS + "b" or (dtype.kind == "f" and dtype != np.float64):
            raise Unsupported(f"{dtype} values (scikit-learn keeps float32 and float16; only float64 and integers are compiled)")
        values = np.array(columns, dtype=np.float64) if array else side_by_side(columns, np.float64)
        check_finite(values, finite)
        return values


def output_config(model) -> str:
    """scikit-learn's ``_get_output_config("transform", model)["dense"]``, read without copying
    the global configuration (a microsecond or two of a one-row call)."""
    own = getattr(model, "_sklearn_output_config", None)
    if own and "transform" in own:
        return own["transform"]
    return _configuration()["transform_output"]


_configuration = getattr(sklearn._config, "_get_threadlocal_config", sklearn.get_config)


def frame_columns(frame: pd.DataFrame) -> list:
    """The frame's column arrays, without building a Series for each."""
    return [frame._get_column_array(i) for i in range(frame.shape[1])]


def numeric_dtype(columns: list, bools: bool = False) -> np.dtype:
    """The dtype numpy (and scikit-learn's checks) give these columns side by side; Unsupported
    unless all are numpy ints or floats, or (``bools``: for checks converting to float64, where True
    is 1.0 either way) bools (scikit-learn converts others its own ways)."""
    dtypes = [c.dtype for c in columns]
    kinds = _NUMBERS + "b" if bools else _NUMBERS
    if not all(isinstance(d, np.dtype) and d.kind in kinds for d in dtypes):
        raise Unsupported("a column that is not int or float (scikit-learn converts it)")
    return np.result_type(*dtypes)


def check_finite(values: np.ndarray, finite: bool) -> None:
    """Unsupported where scikit-learn's ``ensure_all_finite`` raises (NaN allowed unless ``finite``)."""
    if values.dtype.kind != "f":
        return
    if values.size <= _FEW:  # a row or two: in Python, without numpy's per-call overhead
        check = math.isfinite if finite else _not_infinite
        if not all(map(check, values.flat)):
            raise Unsupported("values that are not finite (scikit-learn raises)")
    elif finite:
        if not np.isfinite(values).all():
            raise Unsupported("values that are not finite (scikit-learn raises)")
    elif np.isinf(values).any():
        raise Unsupported("infinite values (scikit-learn raises)")


def _not_infinite(value) -> bool:
    return not math.isinf(value)


# --- scalers ------------------------------------------------------------------------------


class CompiledStandardScaler(FittedKernel):
    """``StandardScaler.transform`` of dense input: ``X -= mean_`` then ``X /= scale_``."""

    KIND = StandardScaler
    CENTER, SCALE = ("with_mean", "mean_"), ("with_std", "scale_")  # (option, fitted attribute)
    ATTRIBUTES = ("copy", *CENTER, *SCALE)

    def __init__(self, model, workers=SERIAL):
        super().__init__(model, workers)
        if model.copy is not True:
            raise Unsupported("copy=False (scikit-learn scales the input in place)")

    def transform(self, X):
        values = self.float_input(X)  # a new array: scaled in place below, as scikit-learn scales its copy
        model = self.model
        (centers, center), (scales, scale) = self.CENTER, self.SCALE
        if getattr(model, centers):
            values -= getattr(model, center)
        if getattr(model, scales):
            values /= getattr(model, scale)
        return values


class CompiledRobustScaler(CompiledStandardScaler):
    """``RobustScaler.transform`` of dense input: ``X -= center_`` then ``X /= scale_``."""

    KIND = RobustScaler
    CENTER, SCALE = ("with_centering", "center_"), ("with_scaling", "scale_")
    ATTRIBUTES = ("copy", *CENTER, *SCALE)


class CompiledMinMaxScaler(CompiledStandardScaler):
    """``MinMaxScaler.transform``: ``X *= scale_``, ``X += min_``, then the clip to ``feature_range``."""

    KIND = MinMaxScaler
    ATTRIBUTES = ("feature_range", "clip", "copy", "scale_", "min_")

    def transform(self, X):
        values = self.float_input(X)
        model = self.model
        values *= model.scale_
        values += model.min_
        if model.clip:
            low, high = model.feature_range
            np.clip(values, np.asarray(low, dtype=values.dtype), np.asarray(high, dtype=values.dtype), out=values)
        return values


# --- SimpleImputer ------------------------------------------------------------------------


class CompiledSimpleImputer(FittedKernel):
    """``SimpleImputer.transform`` of dense input, numbers (fitted on numbers) or categories (fitted
    on objects, NaN missing: strings from pandas' ``str`` columns or object arrays): the missing
    entries replaced by the statistics, and the missing indicator after them when asked for."""

    KIND = SimpleImputer
    ATTRIBUTES = (
        "strategy", "missing_values", "fill_value", "copy", "add_indicator", "keep_empty_features", "statistics_",
        "_fit_dtype", "_fill_dtype", "indicator_",
    )

    def __init__(self, model, workers=SERIAL):
        super().__init__(model, workers)
        try:
            model._validate_params()  # as each transform does (its _fit_context)
        except (ValueError, TypeError) as error:  # scikit-learn's InvalidParameterError is both
            raise Unsupported(f"invalid parameters ({error})") from None
        if model.copy is not True:
            raise Unsupported("copy=False (scikit-learn imputes the input in place)")
        self.objects = model._fit_dtype.kind == "O"
        if model._fit_dtype.kind not in _NUMBERS and not self.objects:
            raise Unsupported(f"fitted on {model._fit_dtype} data (only numbers and objects are compiled)")
        missing = model.missing_values
        self.nan = isinstance(missing, float) and math.isnan(missing)
        if not self.nan and (type(missing) not in (int, float) or isinstance(missing, bool) or self.objects):
            raise Unsupported(f"missing_values={missing!r} (only NaN, and numbers in numbers, are compiled)")
        statistics = model.statistics_
        if not model.keep_empty_features and _missing(statistics if self.objects else statistics.astype(np.float64)).any():
            raise Unsupported("features without observed values (scikit-learn warns and drops them)")
        self.statistics = statistics.astype(model._fill_dtype, copy=False)
        self.floats = model.strategy in ("mean", "median")  # validated as FLOAT_DTYPES, else as they are
        indicator = model.indicator_
        if indicator is not None:
            if indicator.features != "missing-only" or indicator.sparse not in ("auto", False) or indicator.error_on_new:
                raise Unsupported("a missing indicator other than SimpleImputer's own")
            self.indicated = indicator.features_
            self.all_indicated = self.indicated.size >= indicator._n_features

    def transform(self, X):
        model = self.model
        if self.objects:
            values = self._objects(X)
        elif self.floats:
            values = self.float_input(X, finite=not self.nan)
        else:
            values = self._input(X)
        if model.strategy == "constant" and not np.can_cast(model._fill_dtype, values.dtype, casting="same_kind"):
            raise Unsupported("a fill value of another kind than the data (scikit-learn raises)")
        mask = _missing(values) if self.nan else values == model.missing_values
        np.copyto(values, self.statistics, casting="unsafe", where=mask)
        if model.indicator_ is None:
            return values
        return np.hstack((values, mask if self.all_indicated else mask[:, self.indicated]))

    def _input(self, X) -> np.ndarray:
        """A new array of ``X``'s values in their own dtype (``validate_data(..., dtype=None, copy=True)``)."""
        columns = self.columns(X)
        if type(columns) is np.ndarray:
            if columns.dtype.kind not in _NUMBERS:
                raise Unsupported(f"{columns.dtype} values")
            values = np.array(columns)
        else:
            values = side_by_side(columns, numeric_dtype(columns))
        check_finite(values, finite=not self.nan)
        return values

    def _objects(self, X) -> np.ndarray:
        """A new object array of ``X``'s values (``validate_data(..., dtype=object, copy=True)``):
        an object array's, or the str and NaN of pandas' ``str`` columns."""
        columns = self.columns(X)
        if type(columns) is np.ndarray:
            if columns.dtype.kind != "O":
                raise Unsupported(f"{columns.dtype} values for an imputer fitted on objects")
            return np.array(columns)
        return side_by_side([_strings(column) for column in columns], object)


def _strings(column) -> np.ndarray:
    """A pandas ``str`` column (NaN missing) as numpy converts it to objects: its str and NaN."""
    if not isinstance(column.dtype, pd.StringDtype) or column.dtype.na_value is pd.NA:
        raise Unsupported(f"a column of dtype {column.dtype} for an imputer fitted on objects")
    return column._ndarray if column.dtype.storage == "python" else np.asarray(column, dtype=object)


def _missing(values: np.ndarray) -> np.ndarray:
    """scikit-learn's ``_get_mask(values, np.nan)``: NaN floats (``x != x`` among objects)."""
    kind = values.dtype.kind
    if kind == "f":
        return np.isnan(values)
    return values != values if kind == "O" else np.zeros(values.shape, dtype=bool)


# --- FunctionTransformer -----------------------------------------------------------------


class CompiledFunctionTransformer(FittedKernel):
    """``FunctionTransformer.transform`` of a numpy ufunc of one argument (or none, the identity),
    without ``kw_args``: with ``validate=False`` it is ``func(X)`` and nothing else; with
    ``validate=True``, ``func`` of the checked array (numbers, finite). With
    ``feature_names_out="one-to-one"`` (a ColumnTransformer's ``remainder="passthrough"``, or
    ``FunctionTransformer(np.log1p, feature_names_out="one-to-one")`` as scikit-learn's examples
    write it) a frame is taken when its columns are the names seen in fit: ``func`` keeps them,
    so scikit-learn has nothing to rename (it renames others, or raises). Other functions run as
    written: they may have side effects, which must happen once."""

    KIND = FunctionTransformer
    ATTRIBUTES = ("func", "kw_args", "validate", "feature_names_out", "accept_sparse")
    WRAPS = False  # FunctionTransformer follows set_output its own way: only the identity's frame is wrapped

    def __init__(self, model, workers=SERIAL):
        # With validate=False, scikit-learn checks nothing: the object need not even be fitted.
        super().__init__(model, workers, fitted=model.validate is True)
        if model.kw_args:
            raise Unsupported("kw_args")
        self.one_to_one = model.feature_names_out == "one-to-one"
        self.WRAPS = self.one_to_one  # (its output, a frame of the names seen in fit, is wrapped as any other)
        if model.feature_names_out is not None and not self.one_to_one:
            raise Unsupported('feature_names_out other than None and "one-to-one"')
        func = model.func
        if not ((isinstance(func, np.ufunc) and func.nin == 1) or (func is None and not model.validate)):
            raise Unsupported("a func other than a numpy ufunc of one argument")
        self.function = _identity if func is None else func

    def transform(self, X):
        if not self.model.validate:
            if self.one_to_one:
                self._check_names_out(X)
            return self.function(X)
        columns = self.columns(X)
        if type(columns) is not np.ndarray:
            columns = side_by_side(columns, numeric_dtype(columns))
        elif columns.dtype.kind not in _NUMBERS:
            raise Unsupported(f"{columns.dtype} values (scikit-learn converts them)")
        check_finite(columns, finite=True)
        return self.function(columns)

    def _check_names_out(self, X) -> None:
        """Unsupported unless the identity's output keeps its columns: none, or a frame's that are
        ``get_feature_names_out()`` (the names seen in fit)."""
        if isinstance(X, Columns):
            labels = X.labels
        elif isinstance(X, Deferred) or hasattr(X, "columns"):
            if type(X) is not pd.DataFrame:
                raise Unsupported("a frame other than a DataFrame")
            labels = X.columns.tolist()
        else:
            return
        if self.names is None or labels != self.names:
            raise Unsupported("columns other than the names seen in fit (scikit-learn renames them or raises)")


def is_identity(transformer: FunctionTransformer) -> bool:
    """A FunctionTransformer without a function, checks or arguments (``remainder="passthrough"``):
    it hands its input on."""
    return transformer.func is None and not transformer.validate and not transformer.kw_args


def _identity(X):
    return X


# --- PolynomialFeatures ------------------------------------------------------------------


@njit
def _polynomial(X, include_bias, plan, out):
    """scikit-learn's dense expansion: the bias, the features, then for each step of ``plan``
    (destination, source start, length, feature) the products of earlier columns and a feature."""
    n_samples, n_features = X.shape
    first = 1 if include_bias else 0
    for r in range(n_samples):
        if include_bias:
            out[r, 0] = 1.0
        for j in range(n_features):
            out[r, first + j] = X[r, j]
        for s in range(plan.shape[0]):
            destination, start, length, feature = plan[s, 0], plan[s, 1], plan[s, 2], plan[s, 3]
            factor = X[r, feature]
            for k in range(length):
                out[r, destination + k] = out[r, start + k] * factor


def _expansion_plan(n_features: int, include_bias: bool, max_degree: int, interaction_only: bool) -> np.ndarray:
    """The column products scikit-learn's ``PolynomialFeatures.transform`` computes, in its order."""
    current = 1 if include_bias else 0
    index = list(range(current, current + n_features))
    current += n_features
    index.append(current)
    plan = []
    for _ in range(2, max_degree + 1):
        new_index = []
        end = index[-1]
        for feature in range(n_features):
            start = index[feature]
            new_index.append(current)
            if interaction_only:
                start += index[feature + 1] - index[feature]
            following = current + end - start
            if following <= current:
                break
            plan.append((current, start, end - start, feature))
            current = following
        new_index.append(current)
        index = new_index
    return np.array(plan, dtype=np.int64).reshape(-1, 4)


class CompiledPolynomialFeatures(FittedKernel):
    """``PolynomialFeatures.transform`` of dense float64 input (minimum degree 0 or 1)."""

    KIND = PolynomialFeatures
    ATTRIBUTES = ("degree", "interaction_only", "include_bias", "order", "_min_degree", "_max_degree", "_n_out_full")

    def __init__(self, model, workers=SERIAL):
        super().__init__(model, workers)
        if model._min_degree > 1 or model._max_degree < 1 or model.order not in ("C", "F"):
            raise Unsupported("a minimum degree above 1, a maximum degree of 0, or another order")
        self.plan = _expansion_plan(self.width, bool(model.include_bias), model._max_degree, bool(model.interaction_only))
        self.out_width = model._n_out_full

    def transform(self, X):
        values = self.float_input(X, finite=True)
        model = self.model
        out = np.empty((len(values), self.out_width), dtype=np.float64, order=model.order)
        _polynomial(values, bool(model.include_bias), self.plan, out)
        return out


KERNELS = {
    StandardScaler: CompiledStandardScaler,
    RobustScaler: CompiledRobustScaler,
    MinMaxScaler: CompiledMinMaxScaler,
    SimpleImputer: CompiledSimpleImputer,
    FunctionTransformer: CompiledFunctionTransformer,
    PolynomialFeatures: CompiledPolynomialFeatures,
}
