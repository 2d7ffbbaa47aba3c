"""pyarrow-backed strings, read from their buffers.

With pyarrow installed, pandas 3 keeps text columns as ``ArrowStringArray``
(the ``str`` dtype, and ``string[pyarrow]``): a pyarrow chunked array of UTF-8
bytes and offsets. The text kernels read those buffers and decode them in numba
into code points (``CodePoints``), never building a Python ``str`` per document.

pandas computes the methods of these arrays with pyarrow's kernels, which do not
always agree with Python's: ``.str.lower()`` is ``pyarrow.compute.utf8_lower``,
one code point to one code point (no Final_Sigma rule, U+0130 lowers to "i").
That mapping is read once from pyarrow itself, over every code point.

Lookups of pyarrow-backed strings among known keys (``Utf8Keys``: ``series.map``,
``reindex``, ``.loc``) hash and compare their UTF-8 bytes in numba: two strs are
equal exactly when their UTF-8 bytes are.
"""

import numpy as np
import pandas as pd

from willump.compile.forms import Unsupported
from willump.compile.jit import njit
from willump.compile.unicode import CodePoints, Utf8Documents

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ImportError:  # without pyarrow, pandas keeps no strings in arrow arrays
    pa = pc = None

_OFFSET_TYPES = {}
if pa is not None:
    _OFFSET_TYPES = {pa.string(): np.int32, pa.large_string(): np.int64}
_NO_BYTES, _NO_TABLE = np.empty(0, np.uint8), np.empty(0, np.uint32)
_arrow_lower = None  # pyarrow's utf8_lower of every code point alone
FEW_STRINGS = 16  # up to this many are read by pyarrow's to_pylist (more: its to_numpy, or in numba)


def is_arrow_strings(values) -> bool:
    """Whether ``values`` (a Series or an array) holds pandas' pyarrow-backed strings."""
    dtype = values.dtype
    return type(dtype) is pd.StringDtype and dtype.storage == "pyarrow"


def arrow_code_points(values, lowercase: bool = False) -> tuple[CodePoints, np.ndarray | None]:
    """(the strings, as pandas' ``.str.lower()`` lowercases them with ``lowercase``, the missing
    rows as a bool mask or None if none is missing) of a Series or array of pyarrow-backed strings;
    Unsupported for layouts not read here."""
    chunked = (values.array if isinstance(values, pd.Series) else values)._pa_array
    table = _arrow_lower_table() if lowercase else _NO_TABLE
    if chunked.num_chunks == 1:  # (the common case, and a single row's)
        return _chunk_documents(chunked.chunk(0), table)
    parts = [_chunk_documents(chunk, table) for chunk in chunked.chunks]
    mask = None
    if any(m is not None for _, m in parts):
        mask = np.concatenate([np.zeros(len(d), bool) if m is None else m for d, m in parts])
    return _joined([d for d, _ in parts]), mask


def _chunk_documents(chunk, table: np.ndarray) -> tuple[CodePoints, np.ndarray | None]:
    data, offsets, present = utf8_buffers(chunk)
    return Utf8Documents(data, offsets, table), None if present is None else present == 0


def utf8_buffers(chunk) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(UTF-8 bytes, the byte offsets of its strings, their validity bits or None when none is missing)
    of a chunk of pyarrow strings, read where pyarrow keeps them; Unsupported for other types."""
    offset_type = _OFFSET_TYPES.get(chunk.type)
    if offset_type is None:
        raise Unsupported(f"pyarrow strings of type {chunk.type}")
    validity, offsets, data = chunk.buffers()
    start, size = chunk.offset, len(chunk)
    present = None
    if chunk.null_count:
        present = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[start : start + size]
    data = _NO_BYTES if data is None else np.frombuffer(data, np.uint8)
    return data, np.frombuffer(offsets, offset_type)[start : start + size + 1], present


def _joined(parts: list) -> CodePoints:
    """The chunks' documents one after another."""
    if not parts:
        return CodePoints(np.empty(0, np.uint32), np.zeros(1, np.int64))
    codes = np.concatenate([p.codes for p in parts])
    starts = np.cumsum([0] + [len(p.codes) for p in parts[:-1]])
    offsets = np.concatenate([np.zeros(1, np.int64)] + [p.offsets[1:] - p.offsets[0] + s for p, s in zip(parts, starts)])
    return CodePoints(codes, offsets)


def arrow_documents(values, lowercase: bool = False) -> CodePoints:
    """The documents of pyarrow-backed strings (lowercased as pandas does, with ``lowercase``);
    Unsupported when one is missing (not a ``str``)."""
    documents, missing = arrow_code_points(values, lowercase)
    if missing is not None:
        raise Unsupported("a value that is not a str")
    return documents


def _arrow_lower_table() -> np.ndarray:
    """pyarrow's ``utf8_lower`` of each code point alone (surrogates, which pyarrow cannot hold,
    map to themselves). Built once (~0.1 s); Unsupported if a code point lowers to several."""
    global _arrow_lower
    if _arrow_lower is None:
        points = np.arange(0x110000, dtype=np.uint32)
        points = points[(points < 0xD800) | (points > 0xDFFF)]
        sizes = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)  # (their UTF-8 bytes)
        offsets = np.zeros(len(points) + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        data = points.tobytes().decode("utf-32-le").encode("utf-8")
        each = pa.LargeStringArray.from_buffers(len(points), pa.py_buffer(offsets), pa.py_buffer(data))
        lowered = pc.utf8_lower(each)
        if pc.any(pc.not_equal(pc.utf8_length(lowered), 1)).as_py():
            raise Unsupported("pyarrow lowers a code point to several")
        table = np.arange(0x110000, dtype=np.uint32)
        table[points] = np.frombuffer(_utf8_data(lowered).decode("utf-8").encode("utf-32-le"), np.uint32)
        _arrow_lower = table
    return _arrow_lower


def _utf8_data(strings) -> bytes:
    """The UTF-8 bytes of a pyarrow large_string array without missing values, one after another."""
    _, offsets, data = strings.buffers()
    bounds = np.frombuffer(offsets, np.int64)[strings.offset : strings.offset + len(strings) + 1]
    return data.to_pybytes()[bounds[0] : bounds[-1]]


def arrow_objects(values) -> list:
    """The values of pyarrow-backed strings (a Series, Index or array) as Python objects, as pandas'
    ``tolist()`` gives them (NaN where one is missing), a few times faster."""
    chunked = values._values._pa_array if isinstance(values, (pd.Series, pd.Index)) else values._pa_array
    if len(chunked) <= FEW_STRINGS:  # (a single row's: pyarrow's list is quicker for a few)
        objects = chunked.to_pylist()
        return [np.nan if v is None else v for v in objects] if chunked.null_count else objects
    if chunked.num_chunks == 1:
        objects = chunked.chunk(0).to_numpy(zero_copy_only=False)
    else:
        objects = chunked.to_numpy()
    if chunked.null_count:
        objects[pd.isna(objects)] = np.nan
    return objects.tolist()


def arrow_array(values):
    """The pandas array of pyarrow-backed strings of a Series or array, as it is now (its pyarrow
    data never changes: pandas replaces it on assignment)."""
    array = values.array if isinstance(values, pd.Series) else values
    return type(array)(array._pa_array, dtype=array.dtype)


class Utf8Keys:
    """str keys as UTF-8 bytes in an open-addressing hash table, so that pyarrow-backed strings are
    found among them in numba, without a Python ``str`` per value. Keys that are not str, or not
    UTF-8 (lone surrogates), equal no pyarrow string and are left out."""

    def __init__(self, keys: list):
        numbers, encoded = [], []
        for number, key in enumerate(keys):
            if type(key) is str:
                try:
                    encoded.append(key.encode())
                except UnicodeEncodeError:
                    continue
                numbers.append(number)
        self.data = np.frombuffer(b"".join(encoded), np.uint8)
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(k) for k in encoded], out=offsets[1:])
        size = 1 << max(2 * len(encoded), 1).bit_length()  # at most half full
        self.slots = _slots(self.data, offsets, np.array(numbers, dtype=np.int64), size)

    def find(self, values, missing: int) -> np.ndarray:
        """The number of each value of pyarrow-backed strings (a Series, Index or array) among the
        keys (its place in ``keys``), -1 where it is none, ``missing`` where the value is missing."""
        chunked = values._values._pa_array if isinstance(values, (pd.Series, pd.Index)) else values._pa_array
        parts = [self._chunk(chunk, missing) for chunk in chunked.chunks]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.empty(0, np.intp)

    def _chunk(self, chunk, missing: int) -> np.ndarray:
        data, offsets, present = utf8_buffers(chunk)
        found = np.empty(len(chunk), dtype=np.intp)
        _find(data, offsets, _NO_MASK if present is None else present, self.data, self.slots, missing, found)
        return found


_NO_MASK = np.empty(0, np.uint8)
_HASH, _START, _LENGTH, _NUMBER = range(4)  # a slot: its key's hash, bytes, number (-1: empty)


@njit(inline="always")
def _hash(data, start, end) -> np.int64:
    """A hash of ``data[start:end]``, eight bytes at a time, its high bits mixed into the low ones
    (MurmurHash3's finalizer): the table's slot is the low bits."""
    h = np.uint64(end - start) * np.uint64(0x9E3779B97F4A7C15)
    i = start
    while i < end:
        word = np.uint64(0)
        for j in range(min(8, end - i)):
            word |= np.uint64(data[i + j]) << np.uint64(8 * j)
        h = (h ^ word) * np.uint64(0x100000001B3)
        h ^= h >> np.uint64(29)
        i += 8
    h = (h ^ (h >> np.uint64(33))) * np.uint64(0xFF51AFD7ED558CCD)
    h = (h ^ (h >> np.uint64(33))) * np.uint64(0xC4CEB9FE1A85EC53)
    return np.int64(h ^ (h >> np.uint64(33)))


@njit
def _slots(data, offsets, numbers, size):
    """The hash table: ``size`` (a power of two) slots of (hash, start, length, number) in one row,
    so that a lookup reads one slot and the bytes of a key with the same hash."""
    slots = np.zeros((size, 4), np.int64)
    slots[:, _NUMBER] = -1
    mask = size - 1
    for key in range(len(offsets) - 1):
        h = _hash(data, offsets[key], offsets[key + 1])
        slot = h & mask
        while slots[slot, _NUMBER] >= 0:
            slot = (slot + 1) & mask
        slots[slot, _HASH], slots[slot, _START] = h, offsets[key]
        slots[slot, _LENGTH], slots[slot, _NUMBER] = offsets[key + 1] - offsets[key], numbers[key]
    return slots


@njit
def _find(data, offsets, present, key_data, slots, missing, found):
    mask = len(slots) - 1
    for row in range(len(offsets) - 1):
        if len(present) and not present[row]:
            found[row] = missing
            continue
        start, end = offsets[row], offsets[row + 1]
        h = _hash(data, start, end)
        slot = h & mask
        found[row] = -1
        while slots[slot, _NUMBER] >= 0:
            if slots[slot, _HASH] == h and slots[slot, _LENGTH] == end - start:
                key_start, same = slots[slot, _START], True
                for i in range(end - start):
                    if data[start + i] != key_data[key_start + i]:
                        same = False
                        break
                if same:
                    found[row] = slots[slot, _NUMBER]
                    break
            slot = (slot + 1) & mask
