"""Compiled ``TfidfTransformer.transform``, as after a ``CountVectorizer``.

Rows a ``CountVectorizer``'s kernel has not computed yet (``LazyRows``) are
handed on as the rows of the equivalent ``TfidfVectorizer`` kernel
(``CompiledVectorizer.followed_by``): the counts, converted to float as the
transformer's input check converts them, then sublinear TF, idf and the norm
with the vectorizer kernels' weighing, which are scikit-learn's bits. A model
reading them fuses with the vectorizer as it does with a ``TfidfVectorizer``.
Count rows already computed (or a user's integer CSR matrix) are weighed by
the same weighing on their CSR arrays.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer

from willump.compile.forms import LazyRows, SparseRows, Unsupported, configured_csr, kind_of
from willump.compile.parallel import SERIAL
from willump.compile.text import CompiledVectorizer, tfidf_weights

METHODS = {TfidfTransformer: ("transform",)}
_NORMS = {None: 0, "l1": 1, "l2": 2}


class CompiledTfidfTransformer:
    """``transformer.transform(X)`` for count rows, without scikit-learn's per-call overhead."""

    def __init__(self, transformer, workers=SERIAL):
        if type(transformer) is not TfidfTransformer:
            raise Unsupported(f"{type(transformer).__name__} is not compiled")
        if not hasattr(transformer, "n_features_in_"):
            raise Unsupported("the transformer is not fitted")
        if transformer.norm not in _NORMS:
            raise Unsupported(f"norm={transformer.norm!r}")
        self.transformer, self.workers = transformer, workers
        self.state = _state(transformer)
        self._paired = None  # (the count kernel, the kernel of both), the last built

    def still_valid(self) -> bool:
        now = _state(self.transformer)
        return now[0] == self.state[0] and now[1] is self.state[1]

    def __call__(self, X, copy=True):
        return self.defer(X, copy).materialize()

    def defer(self, X, copy=True) -> SparseRows:
        """The transform's rows: lazy for a count kernel's lazy rows (see the module), else weighed now."""
        if type(copy) is not bool:
            raise Unsupported("copy other than True or False")
        if type(X) is LazyRows and X._done is None and type(X.source[0]) is CompiledVectorizer:
            paired = self.paired_with(X.source[0])
            texts = X.source[1]
            return LazyRows(
                lambda: paired.defer(texts), lambda: self.transformer.transform(X.materialize(), copy=copy),
                (paired, texts), X.rows, X.width, paired.dtype,
            )
        return self._weighed(X)

    defer_lazily = defer

    def paired_with(self, counting: CompiledVectorizer) -> CompiledVectorizer:
        """The kernel of the count vectorizer followed by this transformer (built once per count kernel)."""
        if type(counting.vectorizer) is not CountVectorizer:
            raise Unsupported("a TfidfTransformer after other than a CountVectorizer's kernel")
        held = self._paired
        if held is None or held[0] is not counting:
            dtype = _float_dtype(counting.dtype)
            self._check(counting.width, dtype)
            held = self._paired = (counting, counting.followed_by(self.transformer, dtype))
        return held[1]

    def _check(self, width: int, dtype) -> None:
        """Unsupported unless scikit-learn takes rows of this width and dtype as they are."""
        transformer = self.transformer
        if width != transformer.n_features_in_:
            raise Unsupported("not the transformer's width (scikit-learn raises)")
        idf = getattr(transformer, "idf_", None)
        if idf is not None and (not isinstance(idf, np.ndarray) or idf.dtype != dtype or idf.shape != (width,)):
            raise Unsupported("idf_ of another dtype or shape than its input")

    def _weighed(self, X) -> SparseRows:
        """Integer counts in CSR arrays, weighed (as scikit-learn's transform weighs them)."""
        if isinstance(X, SparseRows):
            rows = X
        elif type(X) is configured_csr() and X.has_canonical_format:
            rows = SparseRows.of(X)
        else:
            raise Unsupported(f"input of type {kind_of(X)} (only integer count rows are compiled)")
        counts = rows.data
        if counts.dtype.kind != "i" or rows.kind is not configured_csr() or not len(rows.indptr) > 1:
            raise Unsupported(f"{counts.dtype} values (only integer counts are compiled)")
        dtype = _float_dtype(counts.dtype)
        self._check(rows.width, dtype)
        transformer = self.transformer
        if transformer.sublinear_tf and len(counts) and counts.min() < 1:
            raise Unsupported("a count below 1 (its log is not finite)")
        idf = getattr(transformer, "idf_", None)
        log_table = _log_table(counts, dtype) if transformer.sublinear_tf else np.empty(0, dtype)
        data = np.empty(len(counts), dtype)
        tfidf_weights(
            rows.indptr, rows.indices, counts, False, log_table, np.empty(0, dtype) if idf is None else idf,
            _NORMS[transformer.norm], data,
        )
        return SparseRows(data, rows.indices.copy(), rows.indptr.copy(), rows.width, sorted_indices=rows.sorted_indices)


def _float_dtype(dtype) -> np.dtype:
    """The dtype the transformer's input check converts values of ``dtype`` to."""
    return np.dtype(dtype) if np.dtype(dtype) in (np.float32, np.float64) else np.dtype(np.float64)


def _log_table(counts: np.ndarray, dtype) -> np.ndarray:
    """``np.log(c) + 1`` for the counts c up to the largest, as the transformer computes it."""
    table = np.log(np.arange(int(counts.max()) + 1 if len(counts) else 1, dtype=dtype).clip(1))
    table += 1.0
    return table


def _state(transformer) -> tuple:
    """(option values, the fitted idf_ itself)."""
    return (transformer.norm, transformer.sublinear_tf, transformer.use_idf, transformer.n_features_in_), getattr(
        transformer, "idf_", None
    )
