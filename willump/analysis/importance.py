"""How much the model relies on each IFV (paper §4.2), measured the same way for every model.

An IFV's importance is the drop in a validation score when its columns are
permuted together: one permutation of the validation rows is applied to the
IFV's whole column block, so each row sees another row's IFV while its other
IFVs stay in place. The drop is in units of the score, not of the IFV's values,
so a TF-IDF block with values near 0.01 and a raw length in the hundreds are
compared by what they do to the model's answers (scale-free); the same measure
serves linear models, tree ensembles and any other model.
"""

from collections.abc import Callable

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.metrics import accuracy_score, log_loss, r2_score, roc_auc_score

from willump.runtime.features import width
from willump.runtime.models import booster_objective, call, is_classifier, ranking_score
from willump.runtime.rows import take_rows

# One permutation's drop depends on which rows happen to be paired; the mean of
# five has sqrt(5) less spread, enough to order IFVs whose importances differ by
# more than that noise, at one model call per IFV per permutation (five is also
# scikit-learn's permutation_importance default).
PERMUTATIONS = 5
# Permutation calls the model PERMUTATIONS times per IFV on the validation rows;
# beyond this many rows, a seeded sample of them is used so that fit stays fast
# (the standard error of a score on 10,000 rows is already well below the drops
# that separate IFVs).
MAX_ROWS = 10_000


class ColumnsUnknown(ValueError):
    """willump cannot tell which columns of the model's input come from which IFV."""


def column_blocks(values: list, X) -> list[np.ndarray]:
    """For each IFV, the positions of its columns in the model's input ``X``.

    By column name when ``X`` is a DataFrame whose every column is named by
    exactly one IFV; else by position when the IFVs' widths add up to ``X``'s
    (the IFVs side by side, in order); a single IFV owns every column. Raises
    ``ColumnsUnknown`` when none of these holds.
    """
    columns = _input_columns(X)
    if len(values) == 1:
        return [np.arange(columns)]
    if isinstance(X, pd.DataFrame):
        named = _blocks_by_name(values, X.columns)
        if named is not None:
            return named
    widths = [width(v) for v in values]
    if sum(widths) != columns:
        raise ColumnsUnknown(
            f"the model's input has {columns} columns but the IFVs have {sum(widths)} together"
            + (" and its column names do not match theirs" if isinstance(X, pd.DataFrame) else "")
            + ": willump cannot tell which columns come from which IFV, so it cannot measure their importances"
        )
    offsets = np.cumsum([0] + widths)
    return [np.arange(offsets[i], offsets[i + 1]) for i in range(len(values))]


def _input_columns(X) -> int:
    """The number of columns of the model's input (a 1-D input, such as a Series of texts, is one)."""
    if isinstance(X, (pd.DataFrame, np.ndarray)) or sp.issparse(X):
        if X.ndim == 2:
            return X.shape[1]
        if X.ndim == 1:
            return 1
    if isinstance(X, (pd.Series, list, tuple)):
        return 1
    raise ColumnsUnknown(
        f"the model's input is a {type(X).__name__}, not a matrix, DataFrame or sequence of rows: "
        "willump cannot permute its rows to measure the IFVs' importances"
    )


def _blocks_by_name(values: list, columns: pd.Index) -> list[np.ndarray] | None:
    """Blocks from the IFVs' column names when they name each of ``columns`` exactly once, else None."""
    if not columns.is_unique:
        return None
    owners = {}
    for i, value in enumerate(values):
        if isinstance(value, pd.DataFrame):
            names = list(value.columns)
        elif isinstance(value, pd.Series) and value.name is not None:
            names = [value.name]
        else:
            return None
        for name in names:
            if name in columns:
                if name in owners:
                    return None  # two IFVs name the same column
                owners[name] = i
    if len(owners) != len(columns):
        return None  # a column no IFV names (renamed, or derived from several IFVs)
    owner = np.array([owners[name] for name in columns])
    return [np.flatnonzero(owner == i) for i in range(len(values))]


def permutation_importances(model, X, y, blocks: list, random_state) -> tuple[list[float], str]:
    """(importance of each block, what was measured): the mean drop of the validation score over
    ``PERMUTATIONS`` seeded permutations of the rows of each block's columns, never below zero.

    ``X`` is the model's input on the validation rows, ``y`` their labels or
    targets; at most ``MAX_ROWS`` of them (a seeded sample) are used. The same
    ``random_state`` gives the same importances.
    """
    rng = np.random.default_rng(random_state)
    n = len(y)
    if n > MAX_ROWS:
        rows = np.sort(rng.choice(n, size=MAX_ROWS, replace=False))
        X, y, n = take_rows(X, rows), y[rows], MAX_ROWS
    score, measured = validation_score(model, y)
    baseline = score(X)
    orders = [rng.permutation(n) for _ in range(PERMUTATIONS)]  # the same for every IFV
    importances = []
    for block in blocks:
        if len(block) == 0:
            importances.append(0.0)
            continue
        shuffle = block_shuffler(X, block)
        drops = [baseline - score(shuffle(order)) for order in orders]
        importances.append(max(float(np.mean(drops)), 0.0))
    how = (
        f"permutation: how much the validation {measured} worsens, on average, when an IFV's columns are "
        f"shuffled together ({PERMUTATIONS} seeded permutations of {n} validation rows)"
    )
    return importances, how


def validation_score(model, y) -> tuple[Callable, str]:
    """(score(X), its name): the model's score on input rows ``X`` labelled ``y``, higher is better.

    A binary classifier: the ROC AUC of its ranking score (what top-K ranks by).
    Several classes: the log loss of its class probabilities (negated), or its
    accuracy when it has none. A regressor: R².
    """
    if not is_classifier(model):
        return (lambda X: r2_score(y, np.asarray(call(model, "predict", X), dtype=float))), "R²"
    classes = _classes(model)
    binary = classes is not None and len(classes) == 2
    if binary and len(np.unique(y)) == 2:
        positive = np.asarray(y) == classes[1]
        return (lambda X: roc_auc_score(positive, ranking_score(model, X))), "ROC AUC of the ranking score"
    if hasattr(model, "predict_proba") or booster_objective(model) is not None:
        score = lambda X: -log_loss(y, _probabilities(model, X), labels=classes)
        return score, "log loss of the class probabilities"
    return (lambda X: accuracy_score(y, call(model, "predict", X))), "accuracy"


def _classes(model):
    """The classifier's classes in the order of its probability columns (a booster's: 0..n-1)."""
    if hasattr(model, "classes_"):
        return np.asarray(model.classes_)
    objective = booster_objective(model)
    if objective is not None:
        return np.arange(max(int(model.params.get("num_class", 1)), 2))
    return None


def _probabilities(model, X) -> np.ndarray:
    """Class probabilities, one column per class (a binary booster's one column becomes two)."""
    if hasattr(model, "predict_proba"):
        return np.asarray(call(model, "predict_proba", X))
    probabilities = np.asarray(call(model, "predict", X))
    return np.column_stack([1 - probabilities, probabilities]) if probabilities.ndim == 1 else probabilities


def block_shuffler(X, block: np.ndarray) -> Callable:
    """order -> ``X`` with the rows of the columns ``block`` taken in ``order`` (the other columns,
    and ``X``'s type, format, dtypes and index, unchanged)."""
    if isinstance(X, pd.DataFrame):
        def shuffle(order):
            shuffled = X.copy()
            for position in block:
                shuffled.isetitem(position, X.iloc[:, position].array.take(order))
            return shuffled
        return shuffle
    if sp.issparse(X):
        columns = X.tocsc()
        rest = np.setdiff1d(np.arange(X.shape[1]), block)
        inside, outside = columns[:, block].tocsr(), columns[:, rest]
        back = np.argsort(np.concatenate([block, rest]))
        return lambda order: sp.hstack([inside[order], outside], format="csc")[:, back].asformat(X.format)
    if isinstance(X, pd.Series):
        return lambda order: X.take(order).set_axis(X.index)
    if isinstance(X, np.ndarray) and X.ndim == 2:
        def shuffle(order):
            shuffled = X.copy()
            shuffled[:, block] = X[np.ix_(order, block)]
            return shuffled
        return shuffle
    return lambda order: take_rows(X, order)  # a 1-D input: its one column is the block
