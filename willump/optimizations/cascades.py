"""End-to-end cascades (paper §4.2): a small model on the efficient IFVs answers the rows it is sure of.

Outputs are merged at the model's output: the small model's answers for the
confident rows and the full model's for the others fill one array in input
order, and the user's own statements after the model call turn it into the
function's result, so type, dtype, shape and index are those of the original.
"""

import numpy as np
from sklearn.metrics import accuracy_score, roc_auc_score

from willump.optimizations.models import confidence
from willump.runtime.features import feature_matrix

THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 11))


def roc_auc(y_true, output) -> float:
    """ROC AUC of scores: a binary probability column, or one-vs-rest for several classes."""
    output = np.asarray(output, dtype=float)
    if output.ndim == 2 and output.shape[1] == 2:
        output = output[:, 1]
    if output.ndim == 2:
        return float(roc_auc_score(y_true, output, multi_class="ovr"))
    return float(roc_auc_score(y_true, output))


def accuracy(y_true, output) -> float:
    return float(accuracy_score(y_true, np.asarray(output)))


def default_metric(method: str):
    """Accuracy when the function returns labels (``predict``), ROC AUC when it returns scores."""
    return ("accuracy", accuracy) if method == "predict" else ("roc_auc", roc_auc)


def merged(small_output: np.ndarray, full_output, unsure: np.ndarray) -> np.ndarray:
    """The small model's output with the rows ``unsure`` replaced by the full model's."""
    if len(unsure) == 0:
        return small_output
    full_output = np.asarray(full_output)
    result = small_output.astype(np.result_type(small_output, full_output), copy=True)
    result[unsure] = full_output
    return result


def choose_threshold(executor, env, small_output, confidences, full_output, y, score, accuracy_loss,
                     bootstrap=0, random_state=0):
    """(threshold, validation score, fraction answered by the small model), or None if none qualifies.

    The lowest threshold of the 0.1 grid whose cascade scores within ``accuracy_loss``
    of the full model on the validation rows. With ``bootstrap`` resamples of those
    rows, the loss must also stay within ``accuracy_loss`` in 95% of them (a one-sided
    paired bootstrap), so that a threshold that passes by the luck of the validation
    sample is not chosen.
    """
    y = np.asarray(y)
    full_result = np.asarray(executor.finish(env, full_output))
    target = score(y, full_result) - accuracy_loss
    samples = [np.random.default_rng(random_state + i).integers(0, len(y), len(y)) for i in range(bootstrap)]
    full_scores = [_score_or_nan(score, y[s], full_result[s]) for s in samples]
    for threshold in THRESHOLDS:
        unsure = np.flatnonzero(confidences < threshold)
        if len(unsure) == len(confidences):
            break  # the small model would answer no row: no cascade
        result = np.asarray(executor.finish(env, merged(small_output, np.asarray(full_output)[unsure], unsure)))
        value = score(y, result)
        if value < target:
            continue
        if samples:
            losses = [f - _score_or_nan(score, y[s], result[s]) for s, f in zip(samples, full_scores)]
            if np.nanpercentile(losses, 95) > accuracy_loss:
                continue
        return threshold, value, 1 - len(unsure) / len(confidences)
    return None


def _score_or_nan(score, y, output) -> float:
    try:
        return float(score(y, output))
    except ValueError:  # a resample with one class only
        return float("nan")


def serve(executor, fitted, arguments: dict, stats) -> object:
    """The function's result for one call, cascaded."""
    env = executor.preprocess(arguments)
    efficient = {i: executor.compute(env, i) for i in fitted.selected}
    small_input = feature_matrix([efficient[i] for i in fitted.selected])
    small_output = np.asarray(getattr(fitted.small_model, fitted.method)(small_input))
    if fitted.method == "predict_proba":
        sure = small_output.max(axis=1)
    else:
        sure = confidence(fitted.small_model, small_input)
    unsure = np.flatnonzero(sure < fitted.threshold)
    full_output = []
    if len(unsure):
        rest = [i for i in range(len(executor.graph.ifvs)) if i not in efficient]
        unsure_env, computed = executor.evaluate(arguments, ifvs=rest, rows=unsure)
        values = [executor.take_rows(i, efficient[i], unsure) if i in efficient else computed[i] for i in range(len(executor.graph.ifvs))]
        model, X = executor.model_input(unsure_env, values)
        full_output = getattr(model, fitted.method)(X)
    stats.count(rows=len(sure), small=len(sure) - len(unsure), full=len(unsure))
    return executor.finish(env, merged(small_output, full_output, unsure))
