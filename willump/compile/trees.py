"""LightGBM models through their Booster, with the thread count chosen per query size.

``LGBMClassifier.predict_proba`` on one row spends milliseconds starting
OpenMP threads and converting the DataFrame; the trees take microseconds.
This kernel gives the Booster the float matrix LightGBM itself would build
(same dtype, same values) and one thread for small queries. Each row is
scored by one thread in any case, so the answer does not depend on the
thread count. Inputs may also be compiled joins (``tables.SelectedFrame``):
the matrix is then gathered from the tables directly.
"""

import numpy as np
import pandas as pd
from lightgbm import LGBMClassifier, LGBMRegressor
from lightgbm.basic import _ConfigAliases, _choose_param_value, _InnerPredictor

from willump.compile.forms import Unsupported
from willump.compile.tables import SelectedFrame, numeric_matrix

METHODS = {LGBMClassifier: ("predict_proba", "predict"), LGBMRegressor: ("predict",)}
_ROWS_PER_THREAD = 2000  # smaller queries run on one thread


class CompiledBooster:
    """``predict_proba`` / ``predict`` of a fitted LightGBM scikit-learn model."""

    def __init__(self, model, method: str, workers=None):
        kind = type(model)
        if method not in METHODS.get(kind, ()):
            raise Unsupported(f"{kind.__name__}.{method} is not compiled")
        if not model.__sklearn_is_fitted__() or callable(model.objective):
            raise Unsupported("the model is not fitted, or has a custom objective")
        booster = model.booster_
        if booster.pandas_categorical:
            raise Unsupported("a model trained on pandas categorical columns")
        self.model, self.method, self.booster = model, method, booster
        self.threads = workers.count if workers is not None else 1
        self.parameter_names = tuple(model.get_params(deep=False))
        self.state = self._fingerprint()
        self.width = booster.num_feature()
        # the parameters LGBMModel.predict passes on, computed as it computes them
        params = model._process_params(stage="predict")
        for alias in _ConfigAliases.get_by_alias(
            "data", "X", "raw_score", "start_iteration", "num_iteration", "pred_leaf", "pred_contrib"
        ):
            params.pop(alias, None)
        params = _choose_param_value("num_threads", params, model.n_jobs)
        params.pop("num_threads")
        self.params = params
        # Booster.predict builds this predictor on every call; it depends only on the parameters
        self._predictors = {}
        self._iterations = booster.best_iteration

    def _fingerprint(self) -> tuple:
        """The booster and every parameter value, held and compared by identity (``set_params``
        assigns new values; get_params itself costs ~100 us, more than a one-row prediction)."""
        values = vars(self.model)
        return (self.model._Booster, len(values), *(values.get(name) for name in self.parameter_names))

    def still_valid(self) -> bool:
        """False once the model is refitted or a parameter is set (parameters reach the predictor)."""
        now = self._fingerprint()
        return len(now) == len(self.state) and all(a is b for a, b in zip(now, self.state))

    def __call__(self, *args, **kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported("arguments other than X")
        if isinstance(args[0], np.ndarray) and hasattr(self.model, "feature_names_in_"):
            raise Unsupported("a model fitted on named features, given an array (scikit-learn warns)")
        matrix = _matrix(args[0], self.width)
        threads = 1 if len(matrix) < _ROWS_PER_THREAD else self.threads
        predictor = self._predictors.get(threads)
        if predictor is None:
            predictor = _InnerPredictor.from_booster(booster=self.booster, pred_parameter={**self.params, "num_threads": threads})
            self._predictors[threads] = predictor
        result = predictor.predict(
            data=matrix, start_iteration=0, num_iteration=self._iterations, raw_score=False, pred_leaf=False,
            pred_contrib=False, data_has_header=False, validate_features=False,
        )
        if self.method == "predict_proba" and result.ndim == 1:  # binary, as LGBMClassifier.predict_proba
            return np.vstack((1.0 - result, result)).transpose()
        if self.method == "predict" and isinstance(self.model, LGBMClassifier):
            if result.ndim == 1:
                result = np.vstack((1.0 - result, result)).transpose()
            return self.model._le.inverse_transform(np.argmax(result, axis=1))
        return result


def _matrix(X, width: int) -> np.ndarray:
    """The matrix LightGBM builds from ``X``; Unsupported where it would do more (or raise)."""
    if isinstance(X, SelectedFrame):
        matrix = numeric_matrix(X)
    elif type(X) is pd.DataFrame:
        dtypes = list(X.dtypes)
        if any(not isinstance(d, np.dtype) or d.kind not in "iufb" for d in dtypes):
            raise Unsupported("columns that are not numpy int, float or bool")
        matrix = X.to_numpy(dtype=np.result_type(*[d.type for d in dtypes], np.float32), copy=False)
    elif isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64:
        matrix = X
    else:
        raise Unsupported(f"input of type {type(X).__name__}")
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] != width:
        raise Unsupported("no rows, or not the model's number of features (LightGBM raises)")
    return matrix
