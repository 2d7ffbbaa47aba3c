"""Compiled ``CountVectorizer`` / ``TfidfVectorizer`` ``.transform``.

The kernels find each document's n-grams in a flat array of code points and
look them up in an open-addressing hash table built once from the fitted
vocabulary. They reproduce scikit-learn's analyzers (``word`` with the default
token pattern, ``char``, ``char_wb``) and return, per document, the sorted
vocabulary columns and their counts: the CSR matrix scikit-learn builds.
Weighting then runs the same numpy operations scikit-learn runs (``np.log``,
multiplication by ``idf_``), and the row norms are summed in the same order as
scikit-learn's Cython loop, so the values are bit for bit the same.
"""

import copy
import operator
import threading

import numpy as np
import pandas as pd
from sklearn.feature_extraction.text import (
    CountVectorizer, HashingVectorizer, TfidfVectorizer, strip_accents_ascii, strip_accents_unicode,
)

from willump.compile.forms import LazyRows, SparseRows, Texts, Unsupported
from willump.compile.jit import njit
from willump.compile.parallel import SERIAL
from willump.compile.arrow import arrow_documents, is_arrow_strings
from willump.compile.unicode import SPACE, WORD, CodePoints, char_classes, code_point_tables, encode, mapped

DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
# Patterns whose tokens are the maximal runs of \w of any length (the default's: of two or more)
SINGLE_CHARACTER_PATTERNS = {
    prefix + pattern for prefix in ("", "(?u)") for pattern in (r"\w+", r"\w{1,}", r"\b\w+\b", r"\b\w{1,}\b")
}
ANALYZERS = {"word": 0, "char": 1, "char_wb": 2}
WORDS_OF_ONE_OR_MORE = 3  # the word analyzer of a SINGLE_CHARACTER_PATTERNS pattern
ACCENTS = {"unicode": strip_accents_unicode, "ascii": strip_accents_ascii}  # (strip_accents: scikit-learn's functions)
_ROWS_PER_TASK = 256  # fewer rows than this per worker are not worth a thread
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)
_SPACE_CODE = 32
_inline = njit(inline="always")  # no call, no reference counting per n-gram


# --- the vocabulary as a hash table ------------------------------------------------------


@_inline
def _hash(codes, start, end):
    """(hash, packed): the FNV-1a hash of the code points, and the term itself in 64 bits when
    it is short and ASCII (``_PACKED`` | length << 56 | 7 bits a code point), else 0."""
    h = _FNV_OFFSET
    packed = np.uint64(0)
    ascii_ = end - start <= 8
    for i in range(start, end):
        c = np.uint64(codes[i])
        h = (h ^ c) * _FNV_PRIME
        ascii_ = ascii_ and c < np.uint64(128)
        packed |= c << np.uint64(7 * (i - start))
    if ascii_:
        packed |= _PACKED | (np.uint64(end - start) << np.uint64(56))
    else:
        packed = np.uint64(0)
    return h ^ (h >> np.uint64(29)), packed  # (the low bits, used for the slot, see every input bit)


_LOW32 = np.uint64(0xFFFFFFFF)
_HIGH32 = np.uint64(0xFFFFFFFF00000000)
_LENGTH_BITS = np.uint64(24)  # terms of up to 16M code points (longer ones are not compiled)
_LENGTH_MASK = np.uint64((1 << 24) - 1)
_PACKED = np.uint64(1 << 63)  # the slot holds the term itself, not where its code points are


@njit
def _build_slots(term_codes, term_offsets, term_columns, size):
    """Open addressing, 16 bytes a slot: the high half of the term's hash beside its column + 1
    (0 when empty), then the term packed (see ``_hash``) or, for terms that do not pack, where
    its code points are (start << 24 | length). One probe reads one slot, and the term's code
    points only when the hashes agree on a term that does not pack: most n-grams cost one
    cache line, which is what a single row waits for."""
    slots = np.zeros((size, 2), np.uint64)
    mask = np.uint64(size - 1)
    for t in range(len(term_offsets) - 1):
        start, end = term_offsets[t], term_offsets[t + 1]
        h, packed = _hash(term_codes, start, end)
        i = h & mask
        while slots[i, 0] & _LOW32:
            i = (i + np.uint64(1)) & mask
        slots[i, 0] = (h & _HIGH32) | np.uint64(term_columns[t] + 1)
        slots[i, 1] = packed if packed else (np.uint64(start) << _LENGTH_BITS) | np.uint64(end - start)
    return slots


@_inline
def _find(buffer, start, end, vocabulary):
    """Column of the term ``buffer[start:end]``, or -1 (``vocabulary``: its first two arrays)."""
    term_codes, slots = vocabulary[0], vocabulary[1]
    mask = np.uint64(len(slots) - 1)
    h, packed = _hash(buffer, start, end)
    i = h & mask
    high = h & _HIGH32
    length = np.uint64(end - start)
    while True:
        entry = slots[i, 0]
        if not entry & _LOW32:
            return -1
        where = slots[i, 1]
        if packed:
            if where == packed and entry & _HIGH32 == high:
                return np.int64(entry & _LOW32) - 1
        elif entry & _HIGH32 == high and not where & _PACKED and where & _LENGTH_MASK == length:
            s = np.int64(where >> _LENGTH_BITS)
            k = 0
            while k < end - start and term_codes[s + k] == buffer[start + k]:
                k += 1
            if k == end - start:
                return np.int64(entry & _LOW32) - 1
        i = (i + np.uint64(1)) & mask


class Vocabulary:
    """A fitted ``vocabulary_`` (term -> column) as arrays the kernels can search, followed by
    the stop words' table (no slots when there are none): (codes, slots, stop codes, stop slots)."""

    def __init__(self, vocabulary: dict, stop_words=None):
        stop = {w: 0 for w in stop_words or () if type(w) is str}  # (tokens are str: others never match)
        self.arrays = _table(vocabulary) + (_table(stop) if stop else _NO_TABLE)
        self.width = len(vocabulary)


def _table(vocabulary: dict) -> tuple:
    """(code points, slots) of the terms, searched by ``_find``."""
    terms = list(vocabulary)
    codes, offsets = encode(terms)
    columns = np.fromiter(vocabulary.values(), dtype=np.int64, count=len(terms))
    if len(terms) and (
        np.diff(offsets).max() >= 1 << 24 or len(codes) >= 1 << 39 or columns.max() >= (1 << 32) - 1
        or columns.min() < 0
    ):
        raise Unsupported("a vocabulary term of 16M characters or more, 2**39 in all, or column numbers beyond 32 bits")
    size = 1 << max(4, (2 * len(terms)).bit_length())
    return _read_only(codes), _build_slots(codes, offsets, columns, size)


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view: every table's code points have one numba type, so a kernel reading
    several vectorizers' tables (``fused``) takes them as one tuple type."""
    view = array.view()
    view.flags.writeable = False
    return view


_NO_TABLE = (_read_only(np.empty(0, np.uint32)), np.empty((0, 2), np.uint64))  # no stop words


# --- counting n-grams --------------------------------------------------------------------


@_inline
def _column(buffer, start, end, vocabulary, hashing):
    """The n-gram ``buffer[start:end]``'s vocabulary column, or -1; with ``hashing = (n_features,
    alternate_sign)``, 2 * its hashed column + 1 if its sign is negative. (It returns the column
    rather than writing it: an inlined function given an array it writes to costs numba an
    unpruned reference count increment and decrement per array per n-gram, 8x the lookup.)"""
    n_features, alternate_sign = hashing
    if n_features:
        h = _murmur3_utf8(buffer, start, end)
        if h == -2147483648:
            column = (2147483647 - (n_features - 1)) % n_features
        else:
            column = abs(h) % n_features
        return 2 * column + (1 if alternate_sign and h < 0 else 0)
    return _find(buffer, start, end, vocabulary)


@_inline
def _murmur3_mix(h, k):
    k = (k * 0xCC9E2D51) & 0xFFFFFFFF
    k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
    k = (k * 0x1B873593) & 0xFFFFFFFF
    h ^= k
    h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
    return (h * 5 + 0xE6546B64) & 0xFFFFFFFF


@_inline
def _murmur3_utf8(buffer, start, end):
    """scikit-learn's ``murmurhash3_bytes_s32(text.encode("utf-8"), seed=0)`` of the code points."""
    h = 0
    k = 0
    filled = 0  # bytes in k
    length = 0
    for i in range(start, end):
        c = np.int64(buffer[i])
        if c < 0x80:
            count, first = 1, c
        elif c < 0x800:
            count, first = 2, 0xC0 | (c >> 6)
        elif c < 0x10000:
            count, first = 3, 0xE0 | (c >> 12)
        else:
            count, first = 4, 0xF0 | (c >> 18)
        for b in range(count):
            byte = first if b == 0 else 0x80 | ((c >> (6 * (count - 1 - b))) & 0x3F)
            k |= byte << (8 * filled)
            filled += 1
            length += 1
            if filled == 4:
                h = _murmur3_mix(h, k)
                k = 0
                filled = 0
    if filled:
        k = (k * 0xCC9E2D51) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        k = (k * 0x1B873593) & 0xFFFFFFFF
        h ^= k
    h ^= length & 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - 0x100000000 if h >= 0x80000000 else h


@njit
def _char_ngrams(codes, s, e, classes, min_n, max_n, buffer, found, vocabulary, hashing):
    # scikit-learn first replaces each run of two or more \s characters by one space
    length = 0
    i = s
    while i < e:
        if classes[codes[i]] & SPACE and i + 1 < e and classes[codes[i + 1]] & SPACE:
            while i < e and classes[codes[i]] & SPACE:
                i += 1
            buffer[length] = _SPACE_CODE
        else:
            buffer[length] = codes[i]
            i += 1
        length += 1
    n_found = 0
    for n in range(min_n, min(max_n, length) + 1):
        for start in range(length - n + 1):
            column = _column(buffer, start, start + n, vocabulary, hashing)
            if column >= 0:
                found[n_found] = column
                n_found += 1
    return n_found


@njit
def _char_wb_ngrams(codes, s, e, classes, min_n, max_n, buffer, found, vocabulary, hashing):
    n_found = 0
    i = s
    while i < e:
        if classes[codes[i]] & SPACE:
            i += 1
            continue
        # a word, padded with one space on each side
        length = 1
        buffer[0] = _SPACE_CODE
        while i < e and not classes[codes[i]] & SPACE:
            buffer[length] = codes[i]
            length += 1
            i += 1
        buffer[length] = _SPACE_CODE
        length += 1
        for n in range(min_n, max_n + 1):
            whole = n >= length  # a short word counts once, whole
            for start in range(1 if whole else length - n + 1):
                column = _column(buffer, start, length if whole else start + n, vocabulary, hashing)
                if column >= 0:
                    found[n_found] = column
                    n_found += 1
            if whole:
                break
    return n_found


@njit
def _word_ngrams(codes, s, e, classes, shortest, min_n, max_n, buffer, starts, ends, found, vocabulary, hashing):
    # tokens of r"(?u)\b\w\w+\b": maximal runs of \w characters, two or longer (``shortest``), less the stop words
    stop_words = (vocabulary[2], vocabulary[3])
    n_tokens = 0
    i = s
    while i < e:
        if classes[codes[i]] & WORD:
            j = i
            while j < e and classes[codes[j]] & WORD:
                j += 1
            if j - i >= shortest and not (len(stop_words[1]) and _find(codes, i, j, stop_words) >= 0):
                starts[n_tokens] = i
                ends[n_tokens] = j
                n_tokens += 1
            i = j
        else:
            i += 1
    n_found = 0
    for n in range(min_n, min(max_n, n_tokens) + 1):
        for first in range(n_tokens - n + 1):
            if n == 1:
                column = _column(codes, starts[first], ends[first], vocabulary, hashing)
                if column >= 0:
                    found[n_found] = column
                    n_found += 1
                continue
            length = 0
            for k in range(first, first + n):
                if k > first:
                    buffer[length] = _SPACE_CODE
                    length += 1
                for c in range(starts[k], ends[k]):
                    buffer[length] = codes[c]
                    length += 1
            column = _column(buffer, 0, length, vocabulary, hashing)
            if column >= 0:
                found[n_found] = column
                n_found += 1
    return n_found


_DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DE_BRUIJN_POSITIONS = np.zeros(64, np.int64)
for _i in range(64):
    _DE_BRUIJN_POSITIONS[((1 << _i) * 0x03F79D71B4CB0A89 % 2**64) >> 58] = _i


@_inline
def _bit_position(single_bit):
    return _DE_BRUIJN_POSITIONS[(single_bit * _DE_BRUIJN) >> np.uint64(58)]


@_inline
def find_ngrams(codes, s, e, classes, analyzer, min_n, max_n, buffer, starts, ends, found, vocabulary, hashing):
    """The n-grams of the document ``codes[s:e]`` into ``found`` (see ``_column``); returns how many."""
    if analyzer == 0 or analyzer == WORDS_OF_ONE_OR_MORE:
        shortest = 1 if analyzer == WORDS_OF_ONE_OR_MORE else 2
        return _word_ngrams(codes, s, e, classes, shortest, min_n, max_n, buffer, starts, ends, found, vocabulary,
                            hashing)
    if analyzer == 1:
        return _char_ngrams(codes, s, e, classes, min_n, max_n, buffer, found, vocabulary, hashing)
    return _char_wb_ngrams(codes, s, e, classes, min_n, max_n, buffer, found, vocabulary, hashing)


@_inline
def sorted_counts(found, n_found, tally, bits, hashing, columns, counts, nnz):
    """The distinct columns of ``found[:n_found]`` in increasing order, and their counts, written
    from ``columns[nnz]`` and ``counts[nnz]`` on, as after scikit-learn's ``sort_indices``; returns
    the new ``nnz``. ``tally`` (one count per column) and ``bits`` (one bit per column) are zeros
    on entry and on exit: scratch reused between calls, so a single row does not pay for
    clearing arrays as wide as the vocabulary."""
    if hashing[0]:  # sum the signs of each hashed column, as scipy's sum_duplicates does
        row = found[:n_found]
        row.sort()
        k = 0
        while k < n_found:
            column = row[k] >> 1
            total = 0
            while k < n_found and row[k] >> 1 == column:
                total += -1 if row[k] & 1 else 1
                k += 1
            columns[nnz] = column
            counts[nnz] = total
            nnz += 1
        return nnz
    width = len(tally)
    distinct = 0
    for k in range(n_found):
        column = found[k]
        if tally[column] == 0:
            distinct += 1
            bits[column >> 6] |= np.uint64(1) << np.uint64(column & 63)
        tally[column] += 1
    # Columns in increasing order: scan the bitmap, or sort when the row is sparse in a wide vocabulary.
    k = nnz
    if 8 * distinct * 64 >= width:
        for word in range(len(bits)):
            value = bits[word]
            while value:
                low = value & (~value + np.uint64(1))
                column = word * 64 + _bit_position(low)
                columns[k] = column
                counts[k] = tally[column]
                tally[column] = 0
                k += 1
                value ^= low
            bits[word] = 0
    else:
        for j in range(n_found):
            column = found[j]
            if tally[column] > 0:
                columns[k] = column
                counts[k] = tally[column]
                tally[column] = 0
                bits[column >> 6] = 0
                k += 1
        order = np.argsort(columns[nnz:k])
        columns[nnz:k] = columns[nnz:k][order]
        counts[nnz:k] = counts[nnz:k][order]
    return nnz + distinct


@_inline
def workspace(longest, min_n, max_n):
    """Scratch for documents of up to ``longest`` code points: (buffer, starts, ends, found)."""
    found = np.empty((3 * longest + 2) * (max_n - min_n + 1), np.int64)
    buffer = np.empty(2 * longest + 2 * max_n + 4, np.uint32)
    return buffer, np.empty(longest + 1, np.int64), np.empty(longest + 1, np.int64), found


@njit
def count_ngrams(codes, offsets, classes, analyzer, min_n, max_n, vocabulary, tally, bits, hashing):
    """(indptr, columns, counts) of the documents ``codes[offsets[i]:offsets[i + 1]]``: the
    CSR matrix of counts scikit-learn builds, columns sorted within rows."""
    n_docs = len(offsets) - 1
    longest = 0
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    buffer, starts, ends, found = workspace(longest, min_n, max_n)
    indptr = np.zeros(n_docs + 1, np.int64)
    capacity = max(16, len(codes))
    columns = np.empty(capacity, np.int64)
    counts = np.empty(capacity, np.int64)
    nnz = 0
    for d in range(n_docs):
        n_found = find_ngrams(
            codes, offsets[d], offsets[d + 1], classes, analyzer, min_n, max_n, buffer, starts, ends, found,
            vocabulary, hashing,
        )
        if nnz + n_found > capacity:
            capacity = max(2 * capacity, nnz + n_found)
            columns = np.concatenate((columns[:nnz], np.empty(capacity - nnz, np.int64)))
            counts = np.concatenate((counts[:nnz], np.empty(capacity - nnz, np.int64)))
        nnz = sorted_counts(found, n_found, tally, bits, hashing, columns, counts, nnz)
        indptr[d + 1] = nnz
    return indptr, columns[:nnz], counts[:nnz]


@_inline
def weigh_row(columns, counts, start, end, binary, log_table, idf, norm, data):
    """scikit-learn's weights of one row's counts ``[start, end)`` into ``data``: binary,
    sublinear TF (``log_table[c]`` is ``np.log(c) + 1`` computed by numpy), idf, then the
    l1 / l2 norm summed in scikit-learn's order. ``norm``: 0 none, 1 l1, 2 l2. False when a
    count is beyond the table."""
    for j in range(start, end):
        count = 1 if binary else counts[j]
        if len(log_table):
            if count >= len(log_table):
                return False
            data[j] = log_table[count]
        else:
            data[j] = count
        if len(idf):
            data[j] = data[j] * idf[columns[j]]
    if norm:
        total = 0.0
        for j in range(start, end):
            total += data[j] * data[j] if norm == 2 else abs(data[j])
        if total != 0.0:
            if norm == 2:
                total = np.sqrt(total)
            for j in range(start, end):
                data[j] = data[j] / total
    return True


@njit
def tfidf_weights(indptr, columns, counts, binary, log_table, idf, norm, data):
    """``weigh_row`` for every row; False when a count is beyond the table."""
    for i in range(len(indptr) - 1):
        if not weigh_row(columns, counts, indptr[i], indptr[i + 1], binary, log_table, idf, norm, data):
            return False
    return True


# --- the compiled transform --------------------------------------------------------------


class CompiledVectorizer:
    """``vectorizer.transform`` for lists of ``str``, computed by the kernels above.

    Raises ``Unsupported`` at construction for options it does not reproduce,
    and when called for inputs it does not reproduce (anything but ``str``
    documents); the call site then runs scikit-learn's own transform.
    """

    def __init__(self, vectorizer, workers=SERIAL):
        self.workers = workers
        kind = type(vectorizer)
        if kind not in (CountVectorizer, TfidfVectorizer, HashingVectorizer):
            raise Unsupported(f"{kind.__name__} is not a vectorizer willump compiles")
        problem = _unsupported_option(vectorizer)
        if problem:
            raise Unsupported(problem)
        self.dtype = np.dtype(vectorizer.dtype)
        self.tfidf = kind is TfidfVectorizer
        self.vectorizer = vectorizer
        self.state = _state(vectorizer)
        # The same attributes read at once, for a check by identity first (~0.3 µs, not ~1.3).
        transformer = getattr(vectorizer, "_tfidf", None)
        names = [a for a in _STATE_ATTRIBUTES if hasattr(vectorizer, a)]
        names += [f"_tfidf.{a}" for a in ("norm", "sublinear_tf", "idf_") if hasattr(transformer, a)]
        self._read_state = operator.attrgetter(*names)
        self._held = self._read_state(vectorizer)
        self._vocabulary_at = names.index("vocabulary_") if "vocabulary_" in names else None
        self._vocabulary_size = len(vectorizer.vocabulary_) if self._vocabulary_at is not None else 0
        stops = vectorizer.stop_words
        self._stop_list = (stops, list(stops)) if isinstance(stops, list) else None  # (the list, as it was)
        if kind is HashingVectorizer:
            if vectorizer.norm is not None and self.dtype not in (np.float64, np.float32):
                raise Unsupported(f"HashingVectorizer with norm and dtype {self.dtype}")
            self.hashing = (int(vectorizer.n_features), bool(vectorizer.alternate_sign))
            self.width = self.hashing[0]
            self.vocabulary = Vocabulary({}, self._stop_words(vectorizer))
            self.norm = {None: 0, "l1": 1, "l2": 2}.get(vectorizer.norm, -1)
            if self.norm < 0:
                raise Unsupported(f"norm={vectorizer.norm!r}")
        else:
            vocabulary = getattr(vectorizer, "vocabulary_", None)
            if not isinstance(vocabulary, dict) or not vocabulary:
                raise Unsupported("the vectorizer is not fitted")
            if self.tfidf and self.dtype not in (np.float64, np.float32):
                raise Unsupported(f"TfidfVectorizer with dtype {self.dtype} (only float64 and float32 are compiled)")
            self.hashing = (0, False)
            self.vocabulary = Vocabulary(vocabulary, self._stop_words(vectorizer))
            self.width = self.vocabulary.width
        self.analyzer = ANALYZERS[vectorizer.analyzer]
        if self.analyzer == 0 and vectorizer.token_pattern in SINGLE_CHARACTER_PATTERNS:
            self.analyzer = WORDS_OF_ONE_OR_MORE
        self.ngram_range = tuple(int(n) for n in vectorizer.ngram_range)
        self.lowercase = bool(vectorizer.lowercase)
        strip = ACCENTS.get(vectorizer.strip_accents)
        self.accents = None if strip is None else code_point_tables(strip)  # (applied after lowercase, as scikit-learn)
        self.binary = bool(vectorizer.binary)
        if self.tfidf:
            self._weigh_as(vectorizer._tfidf)
        self.classes = char_classes()
        self._scratch = threading.local()

    def _weigh_as(self, transformer) -> None:
        """Weigh the counts as this fitted ``TfidfTransformer`` does."""
        if transformer.norm not in (None, "l1", "l2"):
            raise Unsupported(f"norm={transformer.norm!r}")
        self.norm = {None: 0, "l1": 1, "l2": 2}[transformer.norm]
        idf = getattr(transformer, "idf_", None)
        self.idf = np.empty(0) if idf is None else idf  # the live array: in-place edits are seen
        self.sublinear = bool(transformer.sublinear_tf)
        self.log_table = self._log_table(64) if self.sublinear else np.empty(0, self.dtype)

    def followed_by(self, transformer, dtype) -> "CompiledVectorizer":
        """A ``CountVectorizer``'s kernel whose counts (converted to ``dtype``) a fitted
        ``TfidfTransformer`` weighs: the kernel of the equivalent ``TfidfVectorizer``."""
        if self.tfidf or self.hashing[0]:
            raise Unsupported("a TfidfTransformer after other than a CountVectorizer")
        paired = copy.copy(self)
        paired.dtype, paired.tfidf, paired._scratch = np.dtype(dtype), True, threading.local()
        paired._weigh_as(transformer)
        return paired

    @staticmethod
    def _stop_words(vectorizer):
        """The stop words scikit-learn removes from the tokens (the word analyzer's only)."""
        return vectorizer.get_stop_words() if vectorizer.analyzer == "word" else None

    def still_valid(self) -> bool:
        """False once the vectorizer was refitted or its options changed."""
        try:
            now = self._read_state(self.vectorizer)
        except AttributeError:
            now = None
        if now is not None and all(map(operator.is_, now, self._held)):
            at = self._vocabulary_at  # (a vocabulary edited in place: its size changed)
            stops = self._stop_list  # (a stop list edited in place)
            if (at is None or len(now[at]) == self._vocabulary_size) and (stops is None or stops[0] == stops[1]):
                return True
        return same_state(_state(self.vectorizer), self.state)

    def __call__(self, documents):
        """``vectorizer.transform(documents)``."""
        return self.defer(documents).materialize()

    def defer(self, documents) -> SparseRows:
        """The transform's CSR arrays, from documents or from compiled ``Texts``."""
        return self._transform(self._texts(documents))

    def defer_lazily(self, documents) -> LazyRows:
        """As ``defer``, computed when first needed: a linear model reading only these rows and
        other vectorizers' computes its scores without building them (see ``fused``)."""
        texts = self._texts(documents)
        if self.hashing[0] and not isinstance(texts, CodePoints):  # (decoded UTF-8 holds no lone surrogate)
            # the one input computing refuses, refused now: lazy rows never raise later
            try:
                for text in texts:
                    text.encode()
            except UnicodeEncodeError:
                raise Unsupported("a lone surrogate (scikit-learn's UTF-8 encoding raises)") from None
        fallback = lambda: self.vectorizer.transform(documents.materialize() if isinstance(documents, Texts) else documents)  # noqa: E731
        return LazyRows(lambda: self._transform(texts), fallback, (self, texts), len(texts), self.width, self.dtype)

    def _texts(self, documents) -> list:
        texts = documents.texts if isinstance(documents, Texts) else documents_as_list(documents)
        if (self.tfidf or self.hashing[0]) and not texts:
            raise Unsupported("no documents (scikit-learn raises)")
        return texts

    def _transform(self, texts: list) -> SparseRows:
        parts = self.workers.split(len(texts), _ROWS_PER_TASK)
        if len(parts) == 1:
            indptr, columns, counts = self._count(texts)
        else:
            counted = self.workers.map(lambda rows: self._count(texts[rows.start : rows.stop]), parts)
            offsets = np.cumsum([0] + [c[0][-1] for c in counted[:-1]])
            indptr = np.concatenate([np.zeros(1, np.int64)] + [c[0][1:] + o for c, o in zip(counted, offsets)])
            columns = np.concatenate([c[1] for c in counted])
            counts = np.concatenate([c[2] for c in counted])
        rows = self._weigh(indptr, columns, counts)
        return rows

    def _count(self, texts: list) -> tuple:
        codes, offsets = self.encoded(texts)
        tally, bits = self.scratch()
        return count_ngrams(
            codes, offsets, self.classes, self.analyzer, *self.ngram_range, self.vocabulary.arrays, tally, bits,
            self.hashing,
        )

    def encoded(self, texts: list | CodePoints) -> tuple:
        """(code points, offsets) of the documents as the analyzer sees them; Unsupported for
        text scikit-learn would fail to encode."""
        if isinstance(texts, CodePoints):
            if self.lowercase:
                texts = texts.python_lowered()
            codes, offsets = texts.codes, texts.offsets
        else:
            codes, offsets = encode([t.lower() for t in texts] if self.lowercase else texts)
        if self.accents is not None:
            codes, offsets = mapped(codes, offsets, *self.accents)
        if self.hashing[0] and ((codes >= 0xD800) & (codes <= 0xDFFF)).any():
            raise Unsupported("a lone surrogate (scikit-learn's UTF-8 encoding raises)")
        return codes, offsets

    def scratch(self) -> tuple:
        """This thread's (tally, bits), zeros between calls (see ``sorted_counts``)."""
        scratch = self._scratch.__dict__
        if "tally" not in scratch:  # hashing sorts instead
            width = 0 if self.hashing[0] else self.width
            scratch["tally"] = np.zeros(width, np.int64)
            scratch["bits"] = np.zeros(width // 64 + 1, np.uint64)
        return scratch["tally"], scratch["bits"]

    def _weigh(self, indptr, columns, counts) -> SparseRows:
        """The values scikit-learn computes for these counts."""
        indices = columns.astype(np.int32)
        indptr = indptr.astype(np.int32)
        if self.tfidf:
            data = np.empty(len(counts), self.dtype)
            while not tfidf_weights(indptr, columns, counts, self.binary, self.log_table, self.idf, self.norm, data):
                self.log_table = self._log_table(2 * int(counts.max()) + 1)
            return SparseRows(data, indices, indptr, self.width)
        data = counts.astype(self.dtype)  # counts, or HashingVectorizer's signed counts
        if self.hashing[0] and self.norm:  # binary, then the row norm
            tfidf_weights(indptr, columns, counts, self.binary, np.empty(0, self.dtype), np.empty(0), self.norm, data)
        elif self.binary:
            data.fill(1)
        return SparseRows(data, indices, indptr, self.width)

    def _log_table(self, size: int) -> np.ndarray:
        """``np.log(c) + 1`` for counts c < size, computed by numpy as scikit-learn computes it."""
        table = np.log(np.arange(size, dtype=self.dtype).clip(1))
        table += 1.0
        return table


def documents_as_list(documents) -> list | CodePoints:
    """The documents as a list of ``str`` (or code points, for a Series of pyarrow's strings);
    Unsupported for anything scikit-learn would treat differently."""
    if isinstance(documents, (list, tuple)):
        texts = list(documents)
    elif isinstance(documents, pd.Series) and is_arrow_strings(documents):
        return arrow_documents(documents)
    elif isinstance(documents, pd.Series) or (isinstance(documents, np.ndarray) and documents.ndim == 1):
        texts = documents.tolist()
    else:
        raise Unsupported(f"documents of type {type(documents).__name__}")
    if not all(type(t) is str for t in texts):
        raise Unsupported("a document that is not a str")
    return texts


def _unsupported_option(vectorizer) -> str | None:
    if vectorizer.input != "content":
        return f"input={vectorizer.input!r}"
    if callable(vectorizer.analyzer) or vectorizer.analyzer not in ANALYZERS:
        return "a custom analyzer"
    if vectorizer.preprocessor is not None:
        return "a custom preprocessor"
    if vectorizer.strip_accents is not None and vectorizer.strip_accents not in ACCENTS:
        return f"strip_accents={vectorizer.strip_accents!r}"
    if vectorizer.analyzer == "word":
        if vectorizer.tokenizer is not None:
            return "a custom tokenizer"
        if vectorizer.token_pattern != DEFAULT_TOKEN_PATTERN and vectorizer.token_pattern not in SINGLE_CHARACTER_PATTERNS:
            return (f"token_pattern={vectorizer.token_pattern!r} (compiled: the default, and runs of word characters "
                    "of any length such as r'\\w+', r'\\w{1,}')")
        try:
            vectorizer.get_stop_words()
        except Exception as error:  # (scikit-learn raises too)
            return f"stop_words={vectorizer.stop_words!r} ({type(error).__name__})"
    min_n, max_n = vectorizer.ngram_range
    if not (1 <= min_n <= max_n):
        return f"ngram_range={vectorizer.ngram_range!r}"
    return None


_STATE_ATTRIBUTES = (
    "input", "analyzer", "preprocessor", "tokenizer", "token_pattern", "stop_words", "strip_accents",
    "lowercase", "ngram_range", "binary", "dtype", "n_features", "alternate_sign", "norm", "vocabulary_",
)


def _state(vectorizer) -> tuple:
    """What the compiled transform depends on: option values, and the fitted objects themselves
    (held, and compared by identity, so a refit or a replaced vocabulary is noticed)."""
    values = [getattr(vectorizer, a, None) for a in _STATE_ATTRIBUTES]
    stops = _STATE_ATTRIBUTES.index("stop_words")
    if isinstance(values[stops], list):  # its words, as they are now
        values[stops] = tuple(values[stops])
    vocabulary = values[-1]
    values[-1] = len(vocabulary) if vocabulary is not None else 0
    objects = [vocabulary]
    transformer = getattr(vectorizer, "_tfidf", None)
    if transformer is not None:
        values += [transformer.norm, transformer.sublinear_tf]
        objects.append(getattr(transformer, "idf_", None))
    return tuple(values), tuple(objects)


def same_state(a: tuple, b: tuple) -> bool:
    return a[0] == b[0] and len(a[1]) == len(b[1]) and all(x is y for x, y in zip(a[1], b[1]))
