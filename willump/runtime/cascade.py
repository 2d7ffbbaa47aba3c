"""Serving a fitted cascade (paper §4.2): a small model on the efficient IFVs answers the rows it is sure of.

``fit`` (``willump.optimizations``) decides; this module serves what it decided, the
plan (``fitted``): ``selected`` (the small model's IFVs), ``small_model``, ``threshold``,
``method``, ``output_dtype``, ``reuse`` (per IFV, how computed rows are taken again),
``batch_names`` (the arguments that hold rows) and ``drift`` (the guard shown the small model's
confidence on every row served, ``willump.runtime.drift``).

Outputs are merged at the model's output: the small model's answers for the
confident rows and the full model's for the others fill one array in input
order, and the user's own statements after the model call turn it into the
function's result, so type, dtype, shape and index are those of the original.
"""

import weakref

import numpy as np

from willump.compile import fused
from willump.compile.forms import Unsupported
from willump.compile.programs import MISS, TextLinearProgram
from willump.compile.unicode import select_rows
from willump.runtime.caches import MISSING
from willump.runtime.executor import GraphExecutor
from willump.runtime.features import feature_matrix
from willump.runtime.models import call, confidence
from willump.runtime.rows import take_argument_rows, take_rows


def merged(small_output: np.ndarray, full_output, unsure: np.ndarray, dtype=None) -> np.ndarray:
    """The small model's output with the rows ``unsure`` replaced by the full model's, as ``dtype``."""
    result = small_output.astype(dtype or small_output.dtype, copy=len(unsure) > 0)
    if len(unsure):
        result[unsure] = np.asarray(full_output)
    return result


def take_reused(fitted, index, value, rows):
    """Rows of an already computed IFV value, as its generator would give them for those rows."""
    taken = take_rows(value, rows)
    return taken.reset_index(drop=True) if fitted.reuse[index] == "reset" else taken


def reusable(fitted, computed: dict) -> dict:
    """The computed IFVs whose rows can be taken instead of computed again."""
    return {i: v for i, v in computed.items() if fitted.reuse[i] != "recompute"}


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
            result, sure, unsure = answer
            _count(fitted, sure, len(unsure), stats)
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
    _count(fitted, sure, len(unsure), stats)
    return executor.finish(env, merged(small_output, full_output, unsure, fitted.output_dtype))


def _count(fitted, sure: np.ndarray, unsure: int, stats) -> None:
    """Count the rows each model answered, and show the small model's confidences to the drift guard."""
    stats.count(rows=len(sure), small=len(sure) - unsure, full=unsure)
    if fitted.drift is not None:
        fitted.drift.observe(sure, fitted.threshold, stats)


def confidences(fitted, small_input) -> np.ndarray:
    """The small model's confidence per row of its input."""
    return small_confidence(fitted, np.asarray(call(fitted.small_model, fitted.method, small_input)), small_input)


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
    # The program's vectorizers are the IFVs only when they are the blocks of the hstack joining them
    # (and no dense block is stacked with them).
    if not program.stacked or program.dense or "hstack" not in graph.combiner.kind or len(graph.ifvs) != len(program.texts):
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
        compiled = type(model)  # (a linear model's kernel, or naive Bayes')
        self.small = compiled(small_model, model.method, model.workers)
        # the small model's confidence: its probabilities, from the same scores
        self.confident = self.small if model.method == "predict_proba" else compiled(small_model, "predict_proba")
        vectorizers = [program.plan.kernels[i] for i in self.selected]
        if not self.small.fuses(vectorizers):
            raise Unsupported("the selected vectorizers are not an input the fused kernel answers exactly")
        self.plan = fused.plan_for(vectorizers, [k.width for k in vectorizers])

    def __call__(self, arguments: tuple, callees: tuple, threshold: float):
        """(result, the small model's confidence per row, the rows it is unsure of), or ``MISS``."""
        program = self.program
        texts = program.documents(arguments, callees)
        if texts is MISS:
            return MISS
        try:
            product = self.small.text_product(self.plan, [texts[i] for i in self.selected])
            small_output = self.small.finish(product)
            probabilities = small_output if self.confident is self.small else self.confident.finish(product)
            sure = probabilities.max(axis=1)
            unsure = np.flatnonzero(sure < threshold)
            full_output = []
            if len(unsure):
                taken = {}  # (vectorizers reading the same documents share them, as the program's do)
                full_output = program.model.from_texts(
                    program.plan, [taken.setdefault(id(t), select_rows(t, unsure)) for t in texts]
                )
            output = merged(small_output, full_output, unsure, self.dtype)
        except Unsupported:
            return MISS
        return program.answered(output, callees), sure, unsure
