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

import numba
import numpy as np

from willump.compile.forms import LazyRows, Unsupported
from willump.compile.text import CompiledVectorizer, find_ngrams, sorted_counts, weigh_row, workspace

ROWS_PER_TASK = 256  # fewer rows than this per worker are not worth a thread
# settings columns, one row per vectorizer
_ANALYZER, _MIN_N, _MAX_N, _BINARY, _NORM, _HASHED, _ALTERNATE = range(7)


@numba.njit(cache=True, nogil=True)
def text_scores(codes, offsets, first, stop, classes, settings, vocabularies, idfs, log_tables, tallies, bits,
                weights, block_offsets):
    """(scores of documents ``first..stop``, status): status 0, or v + 1 when vectorizer v's
    log table is too short, or -1 for a weight that is not finite (scikit-learn refuses it)."""
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
            hashing = (settings[v, _HASHED], settings[v, _ALTERNATE] != 0)
            n_found = find_ngrams(
                codes[v], offsets[v][d], offsets[v][d + 1], classes, settings[v, _ANALYZER], settings[v, _MIN_N],
                settings[v, _MAX_N], buffer, starts, ends, found, vocabularies[v], hashing,
            )
            end = sorted_counts(found, n_found, tallies[v], bits[v], hashing, columns, counts, nnz)
            if not weigh_row(columns, counts, nnz, end, settings[v, _BINARY] != 0, log_tables[v], idfs[v],
                             settings[v, _NORM], data):
                return out, v + 1
            nnz = end
        bounds[n_vectorizers] = nnz
        for j in range(nnz):
            if not np.isfinite(data[j]):
                return out, -1
        for k in range(n_outputs):
            total = 0.0
            for v in range(n_vectorizers):
                offset = block_offsets[v]
                for j in range(bounds[v], bounds[v + 1]):
                    total += data[j] * weights[columns[j] + offset, k]
            out[d - first, k] = total
    return out, 0


def fusable(blocks: list) -> bool:
    """All blocks are vectorizer rows not computed yet, of kernels whose values are float64 (or integer counts)."""
    return all(
        type(b) is LazyRows and b._done is None and isinstance(b.source[0], CompiledVectorizer)
        and _exact_in_float64(b.source[0]) for b in blocks
    )


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
        self.kernels = kernels
        weighing = [_weighing(k) for k in kernels]
        self.settings = np.array([[k.analyzer, *k.ngram_range, k.binary, w[2], *k.hashing] for k, w in zip(kernels, weighing)], np.int64)
        self.offsets = np.cumsum([0] + widths[:-1]).astype(np.int64)
        self.vocabularies = tuple(k.vocabulary.arrays for k in kernels)
        self.idfs, self.log_tables = tuple(w[0] for w in weighing), tuple(w[1] for w in weighing)

    def current(self) -> bool:
        now = [_weighing(k)[:2] for k in self.kernels]
        return all(w[0] is i and w[1] is t for w, i, t in zip(now, self.idfs, self.log_tables))


_checked: dict = {}  # kernel id -> (kernel, idf, log table, exact): what _exact_in_float64 found
_plans: dict = {}  # kernel ids -> Plan (the plan holds the kernels, so their ids stay theirs)
_MAX_PLANS = 64


def scores(blocks: list, weights: np.ndarray, workers) -> np.ndarray:
    """``X @ weights`` for ``X`` the blocks side by side (``fusable`` blocks, of one number of rows)."""
    kernels = [b.source[0] for b in blocks]
    key = tuple(map(id, kernels))
    plan = _plans.get(key)
    if plan is None or not plan.current():
        if len(_plans) >= _MAX_PLANS:  # refitted vectorizers leave plans nobody asks for again
            _plans.clear()
        plan = _plans[key] = Plan(kernels, [b.width for b in blocks])
    encoded, codes, offsets = {}, [], []
    for kernel, block in zip(kernels, blocks):
        texts = block.source[1]
        same = (id(texts), kernel.lowercase, bool(kernel.hashing[0]))
        if same not in encoded:
            encoded[same] = kernel.encoded(texts)
        codes.append(encoded[same][0])
        offsets.append(encoded[same][1])
    codes, offsets = tuple(codes), tuple(offsets)

    def part(rows: range) -> np.ndarray:
        while True:
            tallies, bits = zip(*[k.scratch() for k in kernels])
            out, status = text_scores(
                codes, offsets, rows.start, rows.stop, kernels[0].classes, plan.settings, plan.vocabularies,
                plan.idfs, plan.log_tables, tallies, bits, weights, plan.offsets,
            )
            if status == 0:
                return out
            if status < 0:
                raise Unsupported("weights that are not finite (scikit-learn raises)")
            kernel = kernels[status - 1]  # a count beyond the sublinear TF table: a longer table
            kernel.log_table = kernel._log_table(2 * len(kernel.log_table) + 1)
            plan.__init__(kernels, [b.width for b in blocks])

    n_rows = blocks[0].rows
    if n_rows < 2 * ROWS_PER_TASK or workers.count == 1:
        return part(range(n_rows))
    results = workers.map(part, workers.split(n_rows, ROWS_PER_TASK))
    return np.concatenate(results)
