"""Text as integer code points, and the character classes of Python's ``re``.

Kernels work on one flat ``uint32`` array of code points plus row offsets,
never on Python ``str`` objects. The classes come from running the ``re``
engine itself over every code point, so ``\\s`` and ``\\w`` in a kernel mean
exactly what they mean in scikit-learn's regular expressions.
"""

import re
import threading
import unicodedata

import numpy as np

from willump.compile.forms import Unsupported
from willump.compile.jit import njit

SPACE, WORD = 1, 2  # bits of the class table: re's \s, re's \w
_classes = None


def char_classes() -> np.ndarray:
    """uint8 per code point (0..0x10FFFF): SPACE | WORD bits. Built once (~0.2 s)."""
    global _classes
    if _classes is None:
        everything = "".join(map(chr, range(0x110000)))
        table = np.zeros(0x110000, np.uint8)
        for pattern, bit in ((r"\s+", SPACE), (r"\w+", WORD)):
            for match in re.finditer(pattern, everything):
                table[match.start() : match.end()] |= bit
        _classes = table
    return _classes


def encode(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """(code points, offsets): text i is ``codes[offsets[i]:offsets[i + 1]]``."""
    codes = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if len(texts) == 1:  # a single row: numpy's per-call overhead is most of the cost
        return codes, np.array([0, len(codes)], dtype=np.int64)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), out=offsets[1:])
    return codes, offsets



# --- documents held as code points (pyarrow's strings, decoded without a str per document) ---------

_inline = njit(inline="always")
_NONE = np.empty(0, np.uint32)


class CodePoints:
    """Documents as code points: document i is ``codes[offsets[i]:offsets[i + 1]]``.

    What the text kernels read of strings that are not Python ``str`` objects (pyarrow's),
    in place of a list of ``str``: it has a length, and slices of rows."""

    def __init__(self, codes: np.ndarray, offsets: np.ndarray):
        self.codes, self.offsets = codes, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, rows: slice) -> "CodePoints":
        if type(rows) is not slice or rows.step not in (None, 1):
            raise TypeError("CodePoints take a slice of consecutive rows")
        start, stop, _ = rows.indices(len(self))
        return CodePoints(self.codes, self.offsets[start : max(start, stop) + 1])

    def take(self, rows) -> "CodePoints":
        """The documents at ``rows`` (positions), in that order."""
        return CodePoints(*_take(self.codes, self.offsets, np.asarray(rows, np.int64)))

    def size(self, row: int) -> int:
        """The number of code points of document ``row`` (see ``document_size``)."""
        return int(self.offsets[row + 1] - self.offsets[row])

    def python_lowered(self) -> "CodePoints":
        """The documents as Python's ``str.lower`` lowercases them (kept: asked for once per call)."""
        if self._lowered is None:
            self._lowered = CodePoints(*python_lower(self.codes, self.offsets))
        return self._lowered

    _lowered = None


class Utf8Documents(CodePoints):
    """Documents held as UTF-8 bytes and byte offsets (pyarrow's layout), decoded when first read,
    each code point first mapped by ``table`` (empty: as it is). Asked for Python's lowercase
    straight away, they are decoded and lowercased in one pass."""

    def __init__(self, data: np.ndarray, byte_offsets: np.ndarray, table: np.ndarray = _NONE):
        self.data, self.byte_offsets, self.table = data, byte_offsets, table
        self._decoded = {}

    def _decode(self, lowercase: bool) -> CodePoints:
        decoded = self._decoded.get(lowercase)
        if decoded is None:
            lowering = _lower_tables() if lowercase else (_NONE, _NONE, np.zeros(1, np.int64))
            codes, offsets, status = _decode_utf8(self.data, self.byte_offsets, self.table, *lowering, _sigma_context)
            if status == _NEEDS_CONTEXT:
                codes, offsets, status = _decode_utf8(self.data, self.byte_offsets, self.table, *lowering, _context_table())
            if status != _DONE:
                raise Unsupported("strings that are not valid UTF-8")
            decoded = self._decoded[lowercase] = CodePoints(codes, offsets)
        return decoded

    codes = property(lambda self: self._decode(False).codes)
    offsets = property(lambda self: self._decode(False).offsets)

    def __len__(self) -> int:
        return len(self.byte_offsets) - 1

    def size(self, row: int) -> int:
        """The number of UTF-8 bytes of document ``row`` (see ``document_size``)."""
        return int(self.byte_offsets[row + 1] - self.byte_offsets[row])

    def python_lowered(self) -> CodePoints:
        return self._decode(True)


def select_rows(texts, rows) -> list | CodePoints:
    """The documents at positions ``rows`` of a list of ``str`` or of ``CodePoints``."""
    return texts.take(rows) if isinstance(texts, CodePoints) else [texts[i] for i in rows]


def document_size(texts, row: int) -> int:
    """How long document ``row`` of a list of ``str`` or of ``CodePoints`` is, to divide work by:
    its code points (its UTF-8 bytes, not decoded yet)."""
    return texts.size(row) if isinstance(texts, CodePoints) else len(texts[row])


@njit
def _take(codes, offsets, rows):
    new_offsets = np.zeros(len(rows) + 1, np.int64)
    for k in range(len(rows)):
        new_offsets[k + 1] = new_offsets[k] + offsets[rows[k] + 1] - offsets[rows[k]]
    new_codes = np.empty(new_offsets[-1], np.uint32)
    for k in range(len(rows)):
        start = offsets[rows[k]]
        new_codes[new_offsets[k] : new_offsets[k + 1]] = codes[start : start + new_offsets[k + 1] - new_offsets[k]]
    return new_codes, new_offsets


_DONE, _INVALID, _NEEDS_CONTEXT = 0, 1, 2  # what the decoding kernels return


@_inline
def _next_code_point(data, j, end):
    """(the code point of several bytes starting at ``data[j]``, where the next starts); -1 for invalid UTF-8."""
    b = np.int64(data[j])
    if 0xC2 <= b < 0xE0:
        count, c, least = 1, b & 0x1F, 0x80
    elif 0xE0 <= b < 0xF0:
        count, c, least = 2, b & 0x0F, 0x800
    elif 0xF0 <= b < 0xF5:
        count, c, least = 3, b & 0x07, 0x10000
    else:
        return -1, j
    if j + count >= end:
        return -1, j
    for m in range(1, count + 1):
        continuation = np.int64(data[j + m])
        if continuation & 0xC0 != 0x80:
            return -1, j
        c = (c << 6) | (continuation & 0x3F)
    if c < least or c > 0x10FFFF or 0xD800 <= c <= 0xDFFF:
        return -1, j
    return c, j + count + 1


@njit
def _decode_utf8(data, byte_offsets, table, lower, expansions, expansion_offsets, context):
    """(code points, offsets, status) of the UTF-8 strings ``data[byte_offsets[i]:byte_offsets[i + 1]]``,
    each code point mapped by ``table`` (unless empty), then lowercased as Python does (with
    ``lower`` not empty). Status ``_INVALID`` for invalid UTF-8, ``_NEEDS_CONTEXT`` for a capital
    sigma met without the context table."""
    n = len(byte_offsets) - 1
    longest = _longest_expansion(expansion_offsets)
    out = np.empty((byte_offsets[n] - byte_offsets[0]) * longest, np.uint32)
    scratch = np.empty(0, np.uint32)
    if len(lower):
        most = 0
        for i in range(n):
            most = max(most, byte_offsets[i + 1] - byte_offsets[i])
        scratch = np.empty(most, np.uint32)
    offsets = np.zeros(n + 1, np.int64)
    k = 0
    for i in range(n):
        target = scratch if len(lower) else out
        m = 0 if len(lower) else k
        j, end = byte_offsets[i], byte_offsets[i + 1]
        while j < end:
            c = np.int64(data[j])
            if c < 0x80:  # (ASCII read here: through the call's tuples it cost ~7x more a byte)
                j += 1
            else:
                c, j = _next_code_point(data, j, end)
                if c < 0:
                    return out[:k], offsets, _INVALID
            target[m] = table[c] if len(table) else c
            m += 1
        if len(lower):
            k, status = _lower_one(scratch, 0, m, lower, expansions, expansion_offsets, context, out, k)
            if status != _DONE:
                return out[:k], offsets, status
        else:
            k = m
        offsets[i + 1] = k
    return out[:k], offsets, _DONE


@_inline
def _longest_expansion(expansion_offsets):
    longest = 1
    for e in range(len(expansion_offsets) - 1):
        longest = max(longest, expansion_offsets[e + 1] - expansion_offsets[e])
    return longest


_EXPANDS = np.uint32(1 << 31)  # a lowered table entry: index into the expansions, not a code point
_SIGMA, _FINAL_SIGMA, _SMALL_SIGMA = 0x3A3, 0x3C2, 0x3C3
_CASED, _IGNORABLE = 1, 2  # bits of the context table Python's lower reads around a capital sigma
_lower = None  # (table, expansion codes, expansion offsets), built once
_sigma_context = np.zeros(0, np.uint8)  # built when a capital sigma is first met


def _lower_tables() -> tuple:
    """Python's ``str.lower`` of each code point alone: the lowered code point, or ``_EXPANDS | k``
    for the k-th of those lowering to several code points (U+0130). Built once (~0.1 s)."""
    global _lower
    if _lower is None:
        codes, starts, ends = _lowered_pieces("", "")
        single = ends - starts == 1
        table = np.zeros(0x110000, np.uint32)
        table[single] = codes[starts[single]]
        longer = np.flatnonzero(~single)
        table[longer] = _EXPANDS | np.arange(len(longer), dtype=np.uint32)
        pieces = [codes[starts[c] : ends[c]] for c in longer]
        offsets = np.zeros(len(longer) + 1, np.int64)
        np.cumsum([len(p) for p in pieces], out=offsets[1:])
        _lower = (table, np.concatenate([_NONE, *pieces]), offsets)
    return _lower


def _context_table() -> np.ndarray:
    """Per code point, what Python's lower reads of it around a capital sigma (the Final_Sigma
    rule): case-ignorable, and cased (for the others). Found by asking Python's lower (~0.2 s)."""
    global _sigma_context
    if not len(_sigma_context):
        # "cΣ": final only if c is cased (an ignorable c is skipped, to the start); "AcΣ": final if c
        # is cased or is skipped (to "A").
        codes, _, ends = _lowered_pieces("", "Σ")
        alone = codes[ends - 1] == _FINAL_SIGMA
        codes, _, ends = _lowered_pieces("A", "Σ")
        after_a = codes[ends - 1] == _FINAL_SIGMA
        _sigma_context = (alone * _CASED + (after_a & ~alone) * _IGNORABLE).astype(np.uint8)
    return _sigma_context


def _lowered_pieces(before: str, after: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, starts, ends): Python's lowercase of ``before + chr(c) + after`` is
    ``codes[starts[c]:ends[c]]``, for every code point c. One ``str.lower`` call lowers them all, each
    after a NUL: neither cased nor case-ignorable (as the start of a string, or a space), it ends
    what lowering one piece reads of its neighbours (Final_Sigma)."""
    pattern = np.frombuffer(f"\0{before}\0{after}".encode("utf-32-le"), np.uint32)
    spaced = np.tile(pattern, 0x10FFFF)
    spaced[1 + len(before) :: len(pattern)] = np.arange(1, 0x110000, dtype=np.uint32)
    zero = np.frombuffer(f"{before}\0{after}".lower().encode("utf-32-le"), np.uint32)  # (c = NUL, alone)
    lowered = spaced.tobytes().decode("utf-32-le", "surrogatepass").lower()
    codes = np.concatenate([zero, np.frombuffer(lowered.encode("utf-32-le", "surrogatepass"), np.uint32)])
    separators = np.flatnonzero(codes[len(zero) :] == 0) + len(zero)
    if len(separators) != 0x10FFFF:
        raise Unsupported("this Python lowercases a code point to NUL")
    return codes, np.append(0, separators + 1), np.append(separators, len(codes))


def python_lower(codes: np.ndarray, offsets: np.ndarray) -> tuple:
    """(code points, offsets) of each document lowered as Python's ``str.lower`` lowers it."""
    table, expansions, expansion_offsets = _lower_tables()
    lowered, new_offsets, status = _python_lower(codes, offsets, table, expansions, expansion_offsets, _sigma_context)
    if status == _NEEDS_CONTEXT:  # a capital sigma, whose lowercase depends on its neighbours
        lowered, new_offsets, status = _python_lower(codes, offsets, table, expansions, expansion_offsets, _context_table())
    return lowered, new_offsets


@njit
def _python_lower(codes, offsets, table, expansions, expansion_offsets, context):
    """(lowered code points, offsets, status)."""
    n = len(offsets) - 1
    out = np.empty((offsets[n] - offsets[0]) * _longest_expansion(expansion_offsets), np.uint32)
    new_offsets = np.zeros(n + 1, np.int64)
    k = 0
    for d in range(n):
        k, status = _lower_one(codes, offsets[d], offsets[d + 1], table, expansions, expansion_offsets, context, out, k)
        if status != _DONE:
            return out[:k], new_offsets, status
        new_offsets[d + 1] = k
    return out[:k], new_offsets, _DONE


@_inline
def _lower_one(codes, start, end, table, expansions, expansion_offsets, context, out, k):
    """Python's lowercase of the document ``codes[start:end]``, written from ``out[k]`` on:
    (where it ends, status)."""
    for i in range(start, end):
        c = codes[i]
        lowered = table[c]
        if c == _SIGMA:
            if not len(context):
                return k, _NEEDS_CONTEXT
            lowered = _FINAL_SIGMA if _final_sigma(codes, start, end, i, context) else _SMALL_SIGMA
        if lowered & _EXPANDS:  # (the common case written here: numba compiles it as fast as it runs inline)
            k = _expand(lowered & ~_EXPANDS, expansions, expansion_offsets, out, k)
        else:
            out[k] = lowered
            k += 1
    return k, _DONE


@_inline
def _expand(e, expansions, expansion_offsets, out, k):
    """Expansion ``e`` of a table (a code point mapped to several) written from ``out[k]`` on; where it ends."""
    for j in range(expansion_offsets[e], expansion_offsets[e + 1]):
        out[k] = expansions[j]
        k += 1
    return k


@_inline
def _final_sigma(codes, start, end, i, context):
    """CPython's ``handle_capital_sigma``: cased (case-ignorable skipped) before, and not after."""
    j = i - 1
    while j >= start and context[codes[j]] & _IGNORABLE:
        j -= 1
    if j < start or not context[codes[j]] & _CASED:
        return False
    j = i + 1
    while j < end and context[codes[j]] & _IGNORABLE:
        j += 1
    return j == end or not context[codes[j]] & _CASED


# --- a function of each code point alone (scikit-learn's strip_accents) ---------------------------

_HANGUL = range(0xAC00, 0xD7A4)  # syllables NFKD decomposes by rule (no decomposition() entry)
_PROBE = "\u4e00"  # a code point without decomposition or combining class
_mapped_tables = {}  # function -> (table, expansion codes, expansion offsets)
_mapping = threading.Lock()


def code_point_tables(function) -> tuple:
    """(table, expansions, expansion offsets) of ``function`` (a str -> str of scikit-learn's, such
    as ``strip_accents_unicode``) applied to each code point alone, as ``_lower_tables`` holds lower:
    only for functions of NFKD, which decomposes each code point on its own and then reorders only
    combining marks (which those functions drop), so that a document's result is its code points'
    joined. Code points without a decomposition, a combining class or Hangul's rule map as one such
    does (``_PROBE``: itself, or nothing). Built once per function (~0.3 s)."""
    with _mapping:
        if function not in _mapped_tables:
            _mapped_tables[function] = _code_point_tables(function)
        return _mapped_tables[function]


def _code_point_tables(function) -> tuple:
    probe = function(_PROBE)
    if probe not in (_PROBE, ""):
        raise Unsupported(f"{function.__name__} maps a plain code point to {probe!r}")
    table = np.arange(0x110000, dtype=np.uint32)
    if probe == "":
        table[128:] = _EXPANDS  # (expansion 0: nothing)
    pieces = [_NONE]
    decomposition, combining = unicodedata.decomposition, unicodedata.combining
    for c in range(0x110000):
        character = chr(c)
        if not (decomposition(character) or combining(character) or c in _HANGUL or c < 128):
            continue
        piece = np.frombuffer(function(character).encode("utf-32-le", "surrogatepass"), np.uint32)
        if len(piece) == 1:
            table[c] = piece[0]
        elif not len(piece):
            table[c] = _EXPANDS
        else:
            table[c] = _EXPANDS | np.uint32(len(pieces))
            pieces.append(piece)
    offsets = np.zeros(len(pieces) + 1, np.int64)
    np.cumsum([len(piece) for piece in pieces], out=offsets[1:])
    return table, np.concatenate(pieces), offsets


@njit
def mapped(codes, offsets, table, expansions, expansion_offsets) -> tuple:
    """(code points, offsets) of each document's code points mapped through ``table`` (``code_point_tables``)."""
    n = len(offsets) - 1
    out = np.empty((offsets[n] - offsets[0]) * _longest_expansion(expansion_offsets), np.uint32)
    new_offsets = np.zeros(n + 1, np.int64)
    k = 0
    for d in range(n):
        for i in range(offsets[d], offsets[d + 1]):
            value = table[codes[i]]
            if value & _EXPANDS:
                k = _expand(value & ~_EXPANDS, expansions, expansion_offsets, out, k)
            else:
                out[k] = value
                k += 1
        new_offsets[d + 1] = k
    return out[:k], new_offsets
