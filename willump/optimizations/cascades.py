"""Fitting end-to-end cascades (paper §4.2): the threshold at which a small model on the efficient
IFVs may answer a row, chosen on validation rows; ``willump.runtime.cascade`` serves it."""

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.stats import rankdata
from sklearn.metrics import accuracy_score, roc_auc_score

from willump.runtime.cascade import merged
from willump.runtime.rows import take_rows

THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 11))


def roc_auc(y_true, output) -> float:
    """ROC AUC of scores: a binary score column, or one-vs-rest for several classes.

    Several classes' margins (``decision_function``) are turned into probabilities by a softmax.
    """
    output = np.asarray(output, dtype=float)
    if output.ndim == 2 and output.shape[1] == 2:
        output = output[:, 1]
    if output.ndim == 2:
        if output.min() < 0 or not np.allclose(output.sum(axis=1), 1):
            shifted = np.exp(output - output.max(axis=1, keepdims=True))
            output = shifted / shifted.sum(axis=1, keepdims=True)
        return float(roc_auc_score(y_true, output, multi_class="ovr"))
    return binary_roc_auc(np.asarray(y_true), output)


def binary_roc_auc(y_true: np.ndarray, scores: np.ndarray) -> float:
    """``roc_auc_score`` of one score column, as the Mann-Whitney statistic of the ranks (ties
    averaged): the same number, without scikit-learn's input checks, which cost milliseconds per
    call when the threshold's bootstrap asks thousands of times."""
    classes = np.unique(y_true)
    if len(classes) != 2 or y_true.ndim != 1 or scores.ndim != 1 or np.isnan(scores).any():
        return float(roc_auc_score(y_true, scores))  # (its own answer, or its own ValueError)
    positive = y_true == classes[1]
    ranks = rankdata(scores)
    positives = int(positive.sum())
    negatives = len(y_true) - positives
    return float((ranks[positive].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def accuracy(y_true, output) -> float:
    output = np.asarray(output)
    if output.ndim == 1 and np.ndim(y_true) == 1 and len(output) == len(y_true):
        return float(np.mean(np.asarray(y_true) == output))  # (accuracy_score's answer, without its checks)
    return float(accuracy_score(y_true, output))


def default_metric(returns_labels: bool):
    """Accuracy when the model call returns labels, ROC AUC when it returns scores."""
    return ("accuracy", accuracy) if returns_labels else ("roc_auc", roc_auc)


def reuse_policy(full, part, rows) -> tuple[str | None, bool]:
    """How to take ``rows`` of an IFV value so they equal the value computed on those rows alone.

    ``(policy, same)``: policy "slice" (select the rows), "reset" (select, then a fresh
    RangeIndex, as joins and ``reset_index`` give) or "recompute"; ``same`` is False
    when the values themselves differ: the IFV of a row depends on other rows.
    """
    sliced = take_rows(full, rows)
    policy = "slice"
    if isinstance(part, (pd.Series, pd.DataFrame)):
        if not sliced.index.equals(part.index):
            if not part.index.equals(pd.RangeIndex(len(rows))):
                return "recompute", _values_equal(sliced.to_numpy(), part.to_numpy())
            sliced, policy = sliced.reset_index(drop=True), "reset"
        return policy, sliced.equals(part) or _values_equal(sliced.to_numpy(), part.to_numpy())
    return policy, _values_equal(sliced, part)


def _values_equal(a, b) -> bool:
    if sp.issparse(a) or sp.issparse(b):
        if not (sp.issparse(a) and sp.issparse(b)) or a.shape != b.shape:
            return False
        return abs(sp.csr_matrix(a) - sp.csr_matrix(b)).max() <= 1e-9 if a.nnz or b.nnz else True
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    try:
        return bool(np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True))
    except TypeError:  # not numbers
        return bool(pd.DataFrame(a.reshape(len(a), -1)).equals(pd.DataFrame(b.reshape(len(b), -1))))


def choose_threshold(scored, small_output, confidences, full_output, y, score, accuracy_loss,
                     bootstrap=0, random_state=0, level=0.95):
    """(threshold, validation score, fraction answered by the small model), or None if none qualifies.

    The lowest threshold of the 0.1 grid whose cascade scores within ``accuracy_loss``
    of the full model on the validation rows (``score(y, scored(model output))``). With ``bootstrap`` resamples of those
    rows, the loss must also stay within ``accuracy_loss`` in a ``level`` share of
    them (a one-sided paired bootstrap), so that a threshold that passes by the luck of
    the validation sample is not chosen.
    """
    y = np.asarray(y)
    full_result = np.asarray(scored(full_output))
    target = score(y, full_result) - accuracy_loss
    samples = [np.random.default_rng(random_state + i).integers(0, len(y), len(y)) for i in range(bootstrap)]
    full_scores = [_score_or_nan(score, y[s], full_result[s]) for s in samples]
    for threshold in THRESHOLDS:
        unsure = np.flatnonzero(confidences < threshold)
        if len(unsure) == len(confidences):
            break  # the small model would answer no row: no cascade
        result = np.asarray(scored(merged(small_output, np.asarray(full_output)[unsure], unsure)))
        value = score(y, result)
        if value < target:
            continue
        if samples:
            losses = [f - _score_or_nan(score, y[s], result[s]) for s, f in zip(samples, full_scores)]
            if np.nanpercentile(losses, 100 * level) > accuracy_loss:
                continue
        return threshold, value, 1 - len(unsure) / len(confidences)
    return None


def _score_or_nan(score, y, output) -> float:
    try:
        return float(score(y, output))
    except ValueError:  # a resample with one class only
        return float("nan")
