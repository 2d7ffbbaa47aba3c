"""What every workload shares: the :class:`Workload` record, training through the pipeline
itself (:class:`FeatureCapture`), and small data-preparation helpers."""

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np
import pandas as pd
from lightgbm import LGBMClassifier
from sklearn.model_selection import train_test_split

TEST_SIZE = 0.25
VALIDATION_SIZE = 0.15


@dataclass
class Workload:
    """A trained inference pipeline and the data to run it on.

    ``predict`` is the plain, undecorated pipeline function: ``willump.optimize(predict)``
    must return exactly what ``predict`` returns. ``y_train`` / ``y_test`` are the targets
    its output estimates (probabilities of the positive class for classification).
    """

    name: str
    predict: Callable
    train_inputs: Any
    y_train: np.ndarray
    test_inputs: Any
    y_test: np.ndarray
    task: str  # "classification" or "regression"
    description: str
    valid_inputs: Any = None  # rows the model was not trained on, for willump's fit
    y_valid: np.ndarray = None


class FeatureCapture:
    """Stands in for the model while the model is trained: the pipeline returns its features.

    A pipeline defined inside ``build()`` reads its model from the closure variable
    ``model`` at call time, so::

        model = FeatureCapture()
        train_features = predict(train_inputs)
        model = LogisticRegression().fit(train_features, y_train)

    computes the training features with the pipeline's own code, then puts the fitted
    model in its place (:func:`fit_workload` does exactly this). ``predict`` and
    ``decision_function`` return ``X`` unchanged; ``predict_proba`` returns ``X`` wrapped
    so that indexing it (``predict_proba(X)[:, 1]``) gives ``X`` back unchanged too.
    """

    best_iteration = 0  # (a Booster's before early stopping: every tree)

    def predict(self, X, **options):  # (options such as a Booster's num_iteration: X all the same)
        return X

    def decision_function(self, X):
        return X

    def predict_proba(self, X):
        return _CapturedProbabilities(X)


class _CapturedProbabilities:
    """``X`` in the place of a probability matrix: every column of it is ``X``."""

    def __init__(self, features):
        self.features = features

    def __getitem__(self, key):
        return self.features


def cap_rows(frame: pd.DataFrame, rows: int | None, random_state: int) -> pd.DataFrame:
    """At most ``rows`` rows of ``frame``, drawn at random, in their original order."""
    if rows is None or rows >= len(frame):
        return frame
    chosen = np.random.default_rng(random_state).choice(len(frame), size=rows, replace=False)
    return frame.iloc[np.sort(chosen)]


class Split(NamedTuple):
    """A workload's inputs and targets: training, validation and test rows.

    The model is trained on the training rows only; willump's ``fit`` sets its
    thresholds on the validation rows; the test rows are never seen by either.
    """

    train_inputs: pd.DataFrame
    test_inputs: pd.DataFrame
    y_train: np.ndarray
    y_test: np.ndarray
    valid_inputs: pd.DataFrame
    y_valid: np.ndarray


def split(inputs: pd.DataFrame, y, random_state: int) -> Split:
    """A random 60/15/25 train/validation/test split of the inputs and their targets, indexes reset."""
    rest_inputs, test_inputs, y_rest, y_test = train_test_split(
        inputs, np.asarray(y), test_size=TEST_SIZE, random_state=random_state
    )
    train_inputs, valid_inputs, y_train, y_valid = train_test_split(
        rest_inputs, y_rest, test_size=VALIDATION_SIZE / (1 - TEST_SIZE), random_state=random_state
    )
    reset = lambda frame: frame.reset_index(drop=True)  # noqa: E731
    return Split(reset(train_inputs), reset(test_inputs), y_train, y_test, reset(valid_inputs), y_valid)


def fit_workload(
    name: str, predict: Callable, estimator, data: Split, task: str, description: str
) -> Workload:
    """Train ``estimator`` on the features ``predict`` computes and make it ``predict``'s model.

    ``predict`` must read its model from a closure variable named ``model`` (bound in
    the enclosing ``build()``): it is set to a :class:`FeatureCapture` while the training
    features are computed, then to the fitted estimator.
    """
    if "model" not in predict.__code__.co_freevars:
        raise ValueError(f"{predict.__qualname__} does not read its model from a closure variable 'model'")
    model = predict.__closure__[predict.__code__.co_freevars.index("model")]
    model.cell_contents = FeatureCapture()
    train_features = predict(data.train_inputs)
    model.cell_contents = estimator.fit(train_features, data.y_train)
    return Workload(
        name, predict, data.train_inputs, data.y_train, data.test_inputs, data.y_test, task, description,
        data.valid_inputs, data.y_valid,
    )


def gbdt_classifier(random_state: int) -> LGBMClassifier:
    """The gradient-boosted trees of the join workloads (music, credit, tracking).

    Deterministic: by default LightGBM picks its histogram layout (row- or column-wise) by
    timing both, and the trees, so the cascade thresholds, changed from run to run.
    """
    return LGBMClassifier(n_estimators=100, random_state=random_state, verbose=-1,
                          deterministic=True, force_row_wise=True)


def encode_categories(frame: pd.DataFrame, columns=None) -> pd.DataFrame:
    """A copy of ``frame`` whose string columns (or ``columns``) are integer codes, -1 for missing.

    Done at build time, so the pipelines only ever see numbers (LightGBM needs numeric
    columns) and never have to change a frame in place.
    """
    if columns is None:
        columns = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    encoded = frame.copy()
    for column in columns:
        encoded[column] = pd.factorize(frame[column], sort=True)[0]
    return encoded
