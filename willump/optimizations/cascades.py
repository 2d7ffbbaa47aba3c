"""End-to-end cascades (paper §4.2): a small model on the efficient IFVs answers the rows it is sure of.

Outputs are merged at the model's output: the small model's answers for the
confident rows and the full model's for the others fill one array in input
order, and the user's own statements after the model call turn it into the
function's result, so type, dtype, shape and index are those of the original.
"""

import weakref

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.metrics import accuracy_score, roc_auc_score

from willump.compile import fused
from willump.compile.forms import Unsupported
from willump.compile.linear import CompiledLinearModel
from willump.compile.programs import MISS, TextLinearProgram
from willump.optimizations.models import call, confidence
from willump.runtime.caches import MISSING
from willump.runtime.executor import GraphExecutor
from willump.runtime.features import feature_matrix
from willump.runtime.rows import take_argument_rows, take_rows

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
    return float(roc_auc_score(y_true, output))


def accuracy(y_true, output) -> float:
    return float(accuracy_score(y_true, np.asarray(output)))


def default_metric(returns_labels: bool):
    """Accuracy when the model call returns labels, ROC AUC when it returns scores."""
    return ("accuracy", accuracy) if returns_labels else ("roc_auc", roc_auc)


def merged(small_output: np.ndarray, full_output, unsure: np.ndarray, dtype=None) -> np.ndarray:
    """The small model's output with the rows ``unsure`` replaced by the full model's, as ``dtype``."""
    result = small_output.astype(dtype or small_output.dtype, copy=len(unsure) > 0)
    if len(unsure):
        result[unsure] = np.asarray(full_output)
    return result


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


def take_reused(fitted, index, value, rows):
    """Rows of an already computed IFV value, as its generator would give them for those rows."""
    taken = take_rows(value, rows)
    return taken.reset_index(drop=True) if fitted.reuse[index] == "reset" else taken


def reusable(fitted, computed: dict) -> dict:
    """The computed IFVs whose rows can be taken instead of computed again."""
    return {i: v for i, v in computed.items() if fitted.reuse[i] != "recompute"}


def choose_threshold(executor, env, small_output, confidences, full_output, y, score, accuracy_loss,
                     bootstrap=0, random_state=0, level=0.95):
    """(threshold, validation score, fraction answered by the small model), or None if none qualifies.

    The lowest threshold of the 0.1 grid whose cascade scores within ``accuracy_loss``
    of the full model on the validation rows. With ``bootstrap`` resamples of those
    rows, the loss must also stay within ``accuracy_loss`` in a ``level`` share of
    them (a one-sided paired bootstrap), so that a threshold that passes by the luck of
    the validation sample is not chosen.
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
            if np.nanpercentile(losses, 100 * level) > accuracy_loss:
                continue
        return threshold, value, 1 - len(unsure) / len(confidences)
    return None


def _score_or_nan(score, y, output) -> float:
    try:
        return float(score(y, output))
    except ValueError:  # a resample with one class only
        return float("nan")


def small_confidence(fitted, small_output: np.ndarray, small_input) -> np.ndarray:
    """The small model's confidence per row, from its output when that holds the probabilities."""
    if fitted.method == "predict_proba":
        return small_output.max(axis=1)
    return confidence(fitted.small_model, small_input)


def full_model_input(executor, fitted, arguments: dict, computed: dict, rows, feature_rows=None) -> tuple:
    """(model, X) for the rows ``rows``: IFVs already in ``computed`` are reused, the others
    computed (those ``feature_rows`` caches from its caches)."""
    kept = reusable(fitted, computed)
    count = len(executor.graph.ifvs)
    rest = [i for i in range(count) if i not in kept]
    part = take_argument_rows(arguments, rows, fitted.batch_names)
    env = executor.preprocess(part)
    if feature_rows is not None and feature_rows.parameter not in fitted.batch_names:
        feature_rows = None  # (its argument is not cut to the rows: its keys would not be theirs)
    fresh = ifv_values(executor, env, part, rest, feature_rows)
    values = [take_reused(fitted, i, kept[i], rows) if i in kept else fresh[i] for i in range(count)]
    return executor.model_input(env, values)


def ifv_values(executor, env: dict, arguments: dict, indices, feature_rows=None) -> dict:
    """{index: value} of the IFVs ``indices`` for the rows of ``arguments`` (``env`` their
    namespace): those ``feature_rows`` caches from its caches, the others by their generators."""
    cached = {}
    if feature_rows is not None and indices:
        cached = feature_rows.cached_values(arguments, indices)
        if cached is MISSING:  # (computed as written: the same values, or the function's own error)
            cached = {}
    rest = [i for i in indices if i not in cached]
    computed = executor.values(env, rest) if rest else {}
    return {i: cached[i] if i in cached else computed[i] for i in indices}


def serve(executor, fitted, arguments: dict, stats, feature_rows=None) -> object:
    """The function's result for one call, cascaded: by the cascaded whole-call program when
    there is one and it answers, else block by block, the IFVs ``feature_rows`` caches from
    its caches."""
    program = _program(executor, fitted)
    if program is not None:
        answer = executor.program_answer(program, executor.bound(arguments), fitted.threshold)
        if answer is not MISS:
            result, rows, small = answer
            stats.count(rows=rows, small=small, full=rows - small)
            return result
    env = executor.preprocess(arguments)
    efficient = ifv_values(executor, env, arguments, fitted.selected, feature_rows)
    small_input = feature_matrix([efficient[i] for i in fitted.selected])
    small_output = np.asarray(call(fitted.small_model, fitted.method, small_input))
    sure = small_confidence(fitted, small_output, small_input)
    unsure = np.flatnonzero(sure < fitted.threshold)
    full_output = []
    if len(unsure):
        model, X = full_model_input(executor, fitted, arguments, efficient, unsure, feature_rows)
        full_output = call(model, fitted.method, X)
    stats.count(rows=len(sure), small=len(sure) - len(unsure), full=len(unsure))
    return executor.finish(env, merged(small_output, full_output, unsure, fitted.output_dtype))


_programs = weakref.WeakKeyDictionary()  # executor -> (its whole-call program, small model, that cascaded or None)


def _program(executor, fitted):
    """The cascaded program for the executor's whole-call program and the fitted small model as
    they are now, or None."""
    if type(executor) is not GraphExecutor or executor.program is None:
        return None
    known = _programs.get(executor)
    if known is None or known[0] is not executor.program or known[1] is not fitted.small_model:
        known = _programs[executor] = (executor.program, fitted.small_model, _cascaded(executor, fitted))
    return known[2]


def _cascaded(executor, fitted):
    program, graph = executor.program, executor.graph
    # The program's vectorizers are the IFVs only when they are the blocks of the hstack joining them.
    if not program.stacked or "hstack" not in graph.combiner.kind or len(graph.ifvs) != len(program.texts):
        return None
    if program.model.method != fitted.method:
        return None
    try:
        return CascadedTextProgram(program, fitted.selected, fitted.small_model, fitted.output_dtype)
    except Unsupported:
        return None


class CascadedTextProgram:
    """A ``TextLinearProgram`` (see ``willump.compile.programs``) cascaded: a small model
    reads the vectorizers ``selected``; rows it is sure of (confidence at least the threshold)
    take its answer, the others the full model's. The same kernels as the block by block
    cascade, so the same answers: the small model's scores are the fused kernel's over the
    selected vectorizers side by side, as its input is, and the full model's are computed
    for the unsure rows only."""

    def __init__(self, program: TextLinearProgram, selected: list, small_model, dtype):
        model = program.model
        self.program, self.selected, self.dtype = program, list(selected), dtype
        self.small = CompiledLinearModel(small_model, model.method, model.workers)
        # the small model's confidence: its probabilities, from the same scores
        self.confident = self.small if model.method == "predict_proba" else CompiledLinearModel(small_model, "predict_proba")
        vectorizers = [program.plan.kernels[i] for i in self.selected]
        if not self.small.fuses(vectorizers):
            raise Unsupported("the selected vectorizers are not an input the fused kernel answers exactly")
        self.plan = fused.plan_for(vectorizers, [k.width for k in vectorizers])

    def __call__(self, arguments: tuple, callees: tuple, threshold: float):
        """(result, rows, rows answered by the small model), or ``MISS``."""
        program = self.program
        texts = program.documents(arguments, callees)
        if texts is MISS:
            return MISS
        try:
            product = self.small.text_product(self.plan, [texts[i] for i in self.selected])
            small_output = self.small.finish(product)
            probabilities = small_output if self.confident is self.small else self.confident.finish(product)
            unsure = np.flatnonzero(probabilities.max(axis=1) < threshold)
            full_output = []
            if len(unsure):
                taken = {}  # (vectorizers reading the same documents share them, as the program's do)
                full_output = program.model.from_texts(
                    program.plan, [taken.setdefault(id(t), [t[i] for i in unsure]) for t in texts]
                )
            output = merged(small_output, full_output, unsure, self.dtype)
        except Unsupported:
            return MISS
        rows = len(texts[0])
        return program.answered(output, callees), rows, rows - len(unsure)
