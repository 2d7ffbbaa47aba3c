"""Vectorizers fused into a linear model: documents in, scores out, in one numba call.

When a linear model reads nothing but vectorizer outputs kept lazy (``LazyRows``,
e.g. ``model.predict(sp.hstack([words.transform(t), chars.transform(t)]))`` with
the intermediate results read by nothing else), the CSR matrix is never built.
Per document, each vectorizer's sorted columns and weights go into scratch
space and are multiplied with the coefficients at once, summed in the order
scipy's ``csr_matvec`` sums the stacked matrix, so the scores are the same
bits as the unfused kernels (and scikit-learn) give. For one row this removes
every Python step between the text and the scores.
"""

import threading

import numpy as np

from willump.compile.forms import Unsupported
from willump.compile.jit import njit
from willump.compile.text import CompiledVectorizer, find_ngrams, sorted_counts, weigh_row, workspace
from willump.compile.unicode import document_size

ROWS_PER_TASK = 256  # fewer rows than this per worker are not worth a thread
# settings columns, one row per vectorizer
_ANALYZER, _MIN_N, _MAX_N, _BINARY, _NORM, _HASHED, _ALTERNATE = range(7)
VECTORIZER, DENSE = 0, 1  # kinds of blocks of the stacked matrix


@njit
def text_scores(codes, offsets, first, stop, classes, settings, vocabularies, idfs, log_tables, tallies, bits,
                weights, order, block_offsets, dense):
    """(scores of documents ``first..stop``, status): status 0, or v + 1 when vectorizer v's
    log table is too short, or -1 for a value that is not finite (scikit-learn refuses it).

    The stacked matrix's blocks are in ``order``: (VECTORIZER, v, 0), or (DENSE, first column,
    stop column) of ``dense`` (rows of documents), whose nonzero values are stored entries
    (as scipy keeps them); ``block_offsets``: each block's first column."""
    n_vectorizers = len(settings)
    n_outputs = weights.shape[1]
    out = np.zeros((stop - first, n_outputs))
    longest, max_n, span = 0, 1, 1
    for v in range(n_vectorizers):
        for d in range(first, stop):
            longest = max(longest, offsets[v][d + 1] - offsets[v][d])
        max_n = max(max_n, settings[v, _MAX_N])
        span = max(span, settings[v, _MAX_N] - settings[v, _MIN_N] + 1)
    buffer, starts, ends, found = workspace(longest, max_n - span + 1, max_n)
    capacity = n_vectorizers * len(found)
    columns = np.empty(capacity, np.int64)
    counts = np.empty(capacity, np.int64)
    data = np.empty(capacity, np.float64)
    bounds = np.zeros(n_vectorizers + 1, np.int64)
    for d in range(first, stop):
        nnz = 0
        for v in range(n_vectorizers):
            bounds[v] = nnz
            nnz, weighed = _weighted_row(
                codes[v], offsets[v][d], offsets[v][d + 1], classes, settings[v], vocabularies[v], idfs[v],
                log_tables[v], tallies[v], bits[v], buffer, starts, ends, found, columns, counts, data, nnz,
            )
            if not weighed:
                return out, v + 1
        bounds[n_vectorizers] = nnz
        for j in range(nnz):
            if not np.isfinite(data[j]):
                return out, -1
        for c in range(dense.shape[1]):
            if not np.isfinite(dense[d, c]):
                return out, -1
        for k in range(n_outputs):
            total = 0.0
            for b in range(len(order)):
                offset = block_offsets[b]
                if order[b, 0] == VECTORIZER:
                    for j in range(bounds[order[b, 1]], bounds[order[b, 1] + 1]):
                        total += data[j] * weights[columns[j] + offset, k]
                else:
                    start = order[b, 1]
                    for c in range(start, order[b, 2]):
                        if dense[d, c] != 0.0:  # (scipy stores no zero of a dense block, nor -0.0)
                            total += dense[d, c] * weights[c - start + offset, k]
            out[d - first, k] = total
    return out, 0


@njit(inline="always")
def _weighted_row(codes, s, e, classes, setting, vocabulary, idf, log_table, tally, bits, buffer, starts, ends, found,
                  columns, counts, data, nnz):
    """One vectorizer's sorted columns and weights of the document ``codes[s:e]``, written from
    ``nnz`` on: (new nnz, False when its log table is too short)."""
    hashing = (setting[_HASHED], setting[_ALTERNATE] != 0)
    n_found = find_ngrams(
        codes, s, e, classes, setting[_ANALYZER], setting[_MIN_N], setting[_MAX_N], buffer, starts, ends, found,
        vocabulary, hashing,
    )
    end = sorted_counts(found, n_found, tally, bits, hashing, columns, counts, nnz)
    return end, weigh_row(columns, counts, nnz, end, setting[_BINARY] != 0, log_table, idf, setting[_NORM], data)


@njit
def vectorizer_row(codes, s, e, classes, setting, vocabulary, idf, log_table, tally, bits):
    """(columns, weights, weighed) of one vectorizer for one document, as ``text_scores`` computes
    them: the part of a row one worker computes while another computes another vectorizer's."""
    buffer, starts, ends, found = workspace(e - s, setting[_MIN_N], setting[_MAX_N])
    columns = np.empty(len(found), np.int64)
    counts = np.empty(len(found), np.int64)
    data = np.empty(len(found), np.float64)
    nnz, weighed = _weighted_row(
        codes, s, e, classes, setting, vocabulary, idf, log_table, tally, bits, buffer, starts, ends, found,
        columns, counts, data, 0,
    )
    return columns[:nnz], data[:nnz], weighed


@njit
def row_scores(columns, datas, weights, block_offsets):
    """(scores, status) of one row from its vectorizers' parts, summed as ``text_scores`` sums them."""
    out = np.zeros((1, weights.shape[1]))
    for v in range(len(datas)):
        for j in range(len(datas[v])):
            if not np.isfinite(datas[v][j]):
                return out, -1
    for k in range(weights.shape[1]):
        total = 0.0
        for v in range(len(datas)):
            data, column, offset = datas[v], columns[v], block_offsets[v]
            for j in range(len(data)):
                total += data[j] * weights[column[j] + offset, k]
        out[0, k] = total
    return out, 0


def fusable_kernels(kernels: list) -> bool:
    """All are vectorizer kernels whose values are float64 (or integer counts)."""
    return all(isinstance(k, CompiledVectorizer) and _exact_in_float64(k) for k in kernels)


def _exact_in_float64(kernel: CompiledVectorizer) -> bool:
    """Weights computed in float64 are the vectorizer's own: float64, or integer counts."""
    if kernel.dtype == np.float64:
        idf, log_table, _ = _weighing(kernel)
        checked = _checked.get(id(kernel))  # (the arrays are replaced, not edited, when they change)
        if checked is not None and checked[0] is kernel and checked[1] is idf and checked[2] is log_table:
            return checked[3]
        exact = all(a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable for a in (idf, log_table))
        if len(_checked) >= _MAX_PLANS:
            _checked.clear()
        _checked[id(kernel)] = (kernel, idf, log_table, exact)
        return exact
    # (narrower integers wrap around where scikit-learn's counts do; float64 counts would not)
    return kernel.dtype in (np.int64, np.uint64) and not kernel.tfidf and not (kernel.hashing[0] and kernel.norm)


def _weighing(kernel: CompiledVectorizer) -> tuple:
    """(idf, log table, norm) of a vectorizer; empty arrays when it has none."""
    if kernel.tfidf:
        return kernel.idf, kernel.log_table, kernel.norm
    return _NONE, _NONE, kernel.norm if kernel.hashing[0] else 0


_NONE = np.empty(0, np.float64)


class Plan:
    """What ``text_scores`` reads of some vectorizers, gathered once (rebuilt when a table changes)."""

    def __init__(self, kernels: list, widths: list):
        self.kernels, self.widths = kernels, widths
        weighing = [_weighing(k) for k in kernels]
        self.settings = np.array([[k.analyzer, *k.ngram_range, k.binary, w[2], *k.hashing] for k, w in zip(kernels, weighing)], np.int64)
        self.order, self.offsets = block_order([(VECTORIZER, w) for w in widths])
        self.vocabularies = tuple(k.vocabulary.arrays for k in kernels)
        self.idfs, self.log_tables = tuple(w[0] for w in weighing), tuple(w[1] for w in weighing)
        self._scratch = threading.local()

    def scratch(self) -> tuple:
        """This thread's (tallies, bits) of the vectorizers (see ``CompiledVectorizer.scratch``)."""
        held = getattr(self._scratch, "held", None)
        if held is None:
            held = self._scratch.held = tuple(zip(*[k.scratch() for k in self.kernels]))
        return held

    def current(self) -> bool:
        now = [_weighing(k)[:2] for k in self.kernels]
        return all(w[0] is i and w[1] is t for w, i, t in zip(now, self.idfs, self.log_tables))


_checked: dict = {}  # kernel id -> (kernel, idf, log table, exact): what _exact_in_float64 found
_plans: dict = {}  # kernel ids -> Plan (the plan holds the kernels, so their ids stay theirs)
_MAX_PLANS = 64


def plan_for(kernels: list, widths: list) -> Plan:
    """The current plan of these vectorizers (of these output widths), built once."""
    key = tuple(map(id, kernels))
    plan = _plans.get(key)
    if plan is None or not plan.current():
        if len(_plans) >= _MAX_PLANS:  # refitted vectorizers leave plans nobody asks for again
            _plans.clear()
        plan = _plans[key] = Plan(kernels, widths)
    return plan


def scores(blocks: list, weights: np.ndarray, workers, by_vectorizer: bool = False) -> np.ndarray:
    """``X @ weights`` for ``X`` the blocks side by side: vectorizer rows not computed yet (``LazyRows``)
    of ``fusable_kernels``, of one number of rows.

    ``by_vectorizer``: for one row, the vectorizers' parts computed side by side on the workers
    (the same sums, in the same order)."""
    plan = plan_for([b.source[0] for b in blocks], [b.width for b in blocks])
    return planned_scores(plan, [b.source[1] for b in blocks], weights, workers, by_vectorizer)


class DenseBlocks:
    """Dense blocks stacked with the vectorizers' (``sp.hstack([words, counts])``): their values side by
    side (float64, a row per document), and every block's place in the stacked matrix (``block_order``)."""

    def __init__(self, values: np.ndarray, order: np.ndarray, offsets: np.ndarray):
        self.values, self.order, self.offsets = values, order, offsets


def block_order(blocks: list) -> tuple:
    """(order, offsets) of ``text_scores`` for blocks (kind, width) side by side: vectorizers numbered
    in order, dense blocks' columns one after the other in the dense values."""
    order, offsets, vectorizer, column, offset = [], [], 0, 0, 0
    for kind, width in blocks:
        if kind == VECTORIZER:
            order.append((VECTORIZER, vectorizer, 0))
            vectorizer += 1
        else:
            order.append((DENSE, column, column + width))
            column += width
        offsets.append(offset)
        offset += width
    return np.array(order, np.int64).reshape(-1, 3), np.array(offsets, np.int64)


def planned_scores(plan: Plan, texts: list, weights: np.ndarray, workers, by_vectorizer: bool = False,
                   dense: DenseBlocks | None = None) -> np.ndarray:
    """As ``scores``, from the plan of the vectorizers and the documents each reads (lists of ``str``
    or ``CodePoints``), and the ``dense`` blocks stacked with them, if any."""
    kernels = plan.kernels
    n_rows = len(texts[0])
    if dense is None:
        dense = DenseBlocks(np.empty((n_rows, 0)), plan.order, plan.offsets)
    elif dense.values.shape[0] != n_rows:
        raise Unsupported("dense blocks of another number of rows (scipy raises)")
    else:
        by_vectorizer = False  # (the parts of one row on the workers are the vectorizers' only)
    if by_vectorizer and n_rows == 1 and workers.count > 1 and len(kernels) > 1:
        out = _by_vectorizer(plan, texts, weights, workers)
        if out is not None:
            return out
    encoded, codes, offsets = {}, [], []
    for kernel, documents in zip(kernels, texts):
        same = (id(documents), kernel.lowercase, id(kernel.accents), bool(kernel.hashing[0]))
        if same not in encoded:
            encoded[same] = kernel.encoded(documents)
        codes.append(encoded[same][0])
        offsets.append(encoded[same][1])
    codes, offsets = tuple(map(_read_only, codes)), tuple(offsets)
    if n_rows < 2 * ROWS_PER_TASK or workers.count == 1:
        return _part(plan, codes, offsets, weights, dense, 0, n_rows)
    parts = workers.split(n_rows, ROWS_PER_TASK)
    return np.concatenate(workers.map(lambda rows: _part(plan, codes, offsets, weights, dense, rows.start, rows.stop), parts))


def _read_only(codes: np.ndarray) -> np.ndarray:
    """The code points as one type for numba's tuple of every vectorizer's (``encode``'s are read-only
    buffers; accents stripped or pyarrow's decoded are new arrays)."""
    if codes.flags.writeable:
        codes = codes.view()
        codes.flags.writeable = False
    return codes


def _part(plan: Plan, codes: tuple, offsets: tuple, weights: np.ndarray, dense: DenseBlocks, first: int,
          stop: int) -> np.ndarray:
    """The scores of documents ``first..stop``."""
    kernels = plan.kernels
    while True:
        tallies, bits = plan.scratch()
        out, status = text_scores(
            codes, offsets, first, stop, kernels[0].classes, plan.settings, plan.vocabularies, plan.idfs,
            plan.log_tables, tallies, bits, weights, dense.order, dense.offsets, dense.values,
        )
        if status == 0:
            return out
        if status < 0:
            raise Unsupported("values that are not finite (scikit-learn raises)")
        kernel = kernels[status - 1]  # a count beyond the sublinear TF table: a longer table
        kernel.log_table = kernel._log_table(2 * len(kernel.log_table) + 1)
        plan.__init__(kernels, plan.widths)


def _by_vectorizer(plan: Plan, texts: list, weights: np.ndarray, workers):
    """The scores of one document, each worker encoding it and computing the parts of some of the
    vectorizers (assigned by their n-grams to look up); None when a part needs a longer log table."""
    kernels = plan.kernels

    def part(group: list) -> list:
        rows = []
        for v in group:
            kernel = kernels[v]
            (codes, offsets), (tally, bits) = kernel.encoded(texts[v]), kernel.scratch()
            rows.append(vectorizer_row(
                codes, offsets[0], offsets[1], kernel.classes, plan.settings[v], plan.vocabularies[v], plan.idfs[v],
                plan.log_tables[v], tally, bits,
            ))
        return rows

    settings = plan.settings
    ngrams = [document_size(texts[v], 0) * (settings[v, _MAX_N] - settings[v, _MIN_N] + 1) for v in range(len(kernels))]
    groups = [[] for _ in range(min(workers.count, len(kernels)))]
    loads = [0] * len(groups)
    for v in sorted(range(len(kernels)), key=lambda v: -ngrams[v]):  # the costliest first, to the least loaded
        lightest = loads.index(min(loads))
        groups[lightest].append(v)
        loads[lightest] += ngrams[v]
    rows = [None] * len(kernels)
    for group, parts in zip(groups, workers.map(part, groups)):
        for v, row in zip(group, parts):
            rows[v] = row
    if not all(weighed for _, _, weighed in rows):
        return None  # (the serial kernel lengthens the table)
    out, status = row_scores(tuple(r[0] for r in rows), tuple(r[1] for r in rows), weights, plan.offsets)
    if status < 0:
        raise Unsupported("weights that are not finite (scikit-learn raises)")
    return out
