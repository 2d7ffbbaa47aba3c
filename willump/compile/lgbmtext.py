"""LightGBM's model text: exported once, its trees' lines found and their numbers read in numba.

LightGBM gives its trees only as text. ``Booster.model_to_string`` has LightGBM write a model over
1 MB twice (into a 1 MB buffer, then into one of the size it reported) and decodes it to ``str``:
``model_text`` asks once, with a buffer the model's trees fit in, and keeps the bytes. numpy's
``fromstring`` reads a number in ~80 ns through the C library; ``Lines.numbers`` reads the lines
of a key in one numba loop, doubles exactly as ``strtod`` does (``decimals``), and leaves a line
it does not understand to ``fromstring``. A 10,000-tree model's 36 MB: lines found in ~16 ms, the
trees' numbers read in ~60 ms (``fromstring`` took ~210 ms).
"""

import ctypes
from typing import NamedTuple

import numpy as np
from lightgbm.basic import _LIB, _ConfigAliases, _safe_call

from willump.compile.decimals import MAX_DIGITS, POWERS_OF_FIVE, decimal_to_bits
from willump.compile.forms import Unsupported
from willump.compile.jit import njit

KEYS = ("Tree", "num_leaves", "num_cat", "split_feature", "threshold", "decision_type", "left_child", "right_child",
        "leaf_value", "cat_boundaries", "cat_threshold", "is_linear")  # the tree lines the readers use
_END = "end of trees"
_BYTES_A_NODE = 128  # more than a node's numbers take in the text (about 75: 17-digit doubles, counts)
_MOST_GUESSED = 1 << 30  # the largest first buffer (a larger text is asked for again, at its size)
_DEFAULT_LEAVES = 31  # LightGBM's num_leaves


def model_text(booster) -> np.ndarray:
    """The bytes (uint8) of ``booster.model_to_string(num_iteration=-1)``, pandas categories left out,
    LightGBM asked once when the text is no larger than its trees' leaves suggest (the buffer's
    pages past the text are never touched)."""
    guess = min((1 << 20) + booster.num_trees() * 2 * _most_leaves(booster.params) * _BYTES_A_NODE, _MOST_GUESSED)
    buffer = np.empty(guess, np.uint8)
    length = _write_text(booster, buffer)
    if length > len(buffer):  # (LightGBM wrote what fitted and said how long the text is: again)
        buffer = np.empty(length, np.uint8)
        if _write_text(booster, buffer) != length:
            raise ValueError("LightGBM's model text changed while it was read")
    return buffer[:length - 1]  # (without the terminating NUL)


def _write_text(booster, buffer: np.ndarray) -> int:
    """Has LightGBM write the model's text into ``buffer`` as far as it fits; the text's length with its NUL."""
    length = ctypes.c_int64(0)
    _safe_call(_LIB.LGBM_BoosterSaveModelToString(
        booster._handle, ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(0), ctypes.c_int64(len(buffer)),
        ctypes.byref(length), ctypes.c_void_p(buffer.ctypes.data)))
    return length.value


def _most_leaves(params: dict) -> int:
    """The leaves a tree of a booster with these parameters may have (``num_leaves`` or an alias)."""
    for alias in _ConfigAliases.get("num_leaves"):
        if alias in params:
            return max(int(params[alias]), 2)
    return _DEFAULT_LEAVES


class Lines(NamedTuple):
    """The values of the lines of one key, in the order of the text (``text[starts[i]:ends[i]]``)."""
    text: np.ndarray
    starts: np.ndarray
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, which: slice) -> "Lines":
        return Lines(self.text, self.starts[which], self.ends[which])

    def strings(self) -> list:
        return [bytes(self.text[start:end]).decode() for start, end in zip(self.starts, self.ends)]

    def numbers(self, dtype, count: int) -> np.ndarray:
        """The ``count`` numbers of these lines, in order, as ``dtype`` (int64, uint32 or float64); a
        double is the one ``strtod`` reads (inf and nan too). Unsupported when there are not ``count``."""
        kind = np.dtype(dtype)
        read, numbers = _read_numbers(self.text, self.starts, self.ends, count, bool(kind == np.float64), POWERS_OF_FIVE)
        if kind == np.float64:
            numbers = numbers.view(np.float64)
        elif kind == np.uint32 and read == count and not ((0 <= numbers) & (numbers < 2**32)).all():
            read = -1
        if read == -1:  # (a line the loops do not read)
            try:
                numbers = np.fromstring(" ".join(self.strings()), dtype=kind, sep=" ")
            except ValueError as problem:
                raise Unsupported(f"a model string numpy cannot read ({problem})") from None
            read = len(numbers)
        if read != count:
            raise Unsupported("a model string whose trees do not match their sizes")
        return numbers.astype(kind, copy=False)


def sections(text: np.ndarray) -> tuple:
    """(header, lines) of a model text: the header's ``key=value`` dict (a line without ``=`` maps
    to ""), and for each of ``KEYS`` its ``Lines`` in the trees, tree by tree."""
    names = np.zeros((len(KEYS) + 1, max(map(len, KEYS + (_END,))) + 1), np.uint8)
    for row, name in enumerate(KEYS + (_END,)):
        names[row, :len(name) + 1] = np.frombuffer(name.encode() + b"=", np.uint8)
    keys, starts, ends, trees_at = _key_lines(text, names, np.array([len(k) + 1 for k in KEYS] + [len(_END)]))
    head = bytes(text[:trees_at]).decode()
    header = dict(line.split("=", 1) if "=" in line else (line, "") for line in head.strip().splitlines())
    return header, {name: Lines(text, starts[keys == k], ends[keys == k]) for k, name in enumerate(KEYS)}


@njit
def _key_lines(text, names, lengths) -> tuple:
    """(key, value start, value end) of each line of ``text`` that starts with one of the ``names``
    (``lengths`` bytes of a row, its ``=`` included), up to the last one's (``end of trees``), and
    where the first (``Tree=``) is: the header ends there."""
    keys, starts, ends = [], [], []
    n, last, position, trees_at = len(text), len(names) - 1, 0, len(text)
    while position < n:
        key = _key_at(text, position, names, lengths)
        if key == last:
            break
        stop = position
        while stop < n and text[stop] != 10:  # "\n"
            stop += 1
        if key >= 0:
            trees_at = min(trees_at, position)
            keys.append(key)
            starts.append(position + lengths[key])
            ends.append(stop)
        position = stop + 1
    return np.array(keys, np.int64), np.array(starts, np.int64), np.array(ends, np.int64), trees_at


@njit(inline="always")
def _key_at(text, position, names, lengths) -> int:
    """The row of ``names`` the text at ``position`` starts with, or -1."""
    for key in range(len(names)):
        length = lengths[key]
        if position + length <= len(text) and text[position] == names[key, 0]:
            same = True
            for i in range(1, length):
                if text[position + i] != names[key, i]:
                    same = False
                    break
            if same:
                return key
    return -1


@njit
def _read_numbers(text, starts, ends, count, doubles, powers) -> tuple:
    """(how many, the numbers: int64, or of ``doubles`` their bits) of the space-separated numbers of
    the spans; -1 when one is not read (``_read_integer``, ``_read_double``) or there are more than ``count``."""
    out = np.zeros(count, np.int64)
    read = 0
    for line in range(len(starts)):
        position, end = starts[line], ends[line]
        while position < end:
            if text[position] == 32:
                position += 1
                continue
            if read == count:
                return -1, out
            if doubles:
                position = _read_double(text, position, end, powers, out, read)
            else:
                position = _read_integer(text, position, end, out, read)
            if position < 0:
                return -1, out
            read += 1
    return read, out


@njit(inline="always")
def _read_integer(text, position, end, out, at) -> int:
    """Reads the optionally signed integer of at most 18 digits at ``position`` into ``out[at]``;
    where it ends, or -1."""
    negative = text[position] == 45  # "-"
    first = position = position + negative
    value = 0
    while position < end and 48 <= text[position] <= 57:
        value = value * 10 + (text[position] - 48)
        position += 1
    if position == first or position - first > 18:
        return -1
    out[at] = -value if negative else value
    return _token_end(text, position, end)


_INF, _NAN = np.uint64(0x7FF0000000000000), np.uint64(0x7FF8000000000000)


@njit
def _read_double(text, position, end, powers, out, at) -> int:
    """Reads the double at ``position`` into ``out[at]``; where it ends, or -1."""
    negative = text[position] == 45  # "-"
    if negative or text[position] == 43:  # "+"
        position += 1
    word = _word_at(text, position, end)
    if word == _INF_WORD or word == _NAN_WORD:
        out[at] = np.int64((_INF if word == _INF_WORD else _NAN) | (np.uint64(negative) << np.uint64(63)))
        return _token_end(text, position + 3, end)
    first = position
    position, significand = _digits(text, position, end, np.uint64(0))
    digits, exponent = position - first, 0
    if position < end and text[position] == 46:  # "."
        fraction = position + 1
        position, significand = _digits(text, fraction, end, significand)
        exponent = fraction - position
        digits -= exponent
    if digits == 0 or (digits > MAX_DIGITS and _significant(text, first, position) > MAX_DIGITS):
        return -1
    if position < end and (text[position] == 101 or text[position] == 69):  # "e", "E"
        position, power = _exponent(text, position + 1, end)
        if position < 0:
            return -1
        exponent += power
    out[at] = np.int64(decimal_to_bits(significand, exponent, negative, powers))  # (the bits as they are)
    return _token_end(text, position, end)


@njit(inline="always")
def _digits(text, position, end, significand) -> tuple:
    """(where a run of digits at ``position`` ends, ``significand`` with them appended: modulo 2**64)."""
    while position < end:
        digit = np.uint64(text[position]) - np.uint64(48)
        if digit > np.uint64(9):
            break
        significand = significand * np.uint64(10) + digit
        position += 1
    return position, significand


@njit
def _significant(text, first, stop) -> int:
    """The digits of the number ``text[first:stop]`` from its first that is not 0 (its point not counted)."""
    count, started = 0, False
    for position in range(first, stop):
        byte = text[position]
        started = started or (49 <= byte <= 57)
        count += started and byte != 46
    return count


_INF_WORD = ord("i") | ord("n") << 8 | ord("f") << 16
_NAN_WORD = ord("n") | ord("a") << 8 | ord("n") << 16


@njit(inline="always")
def _word_at(text, position, end) -> int:
    """The three bytes at ``position``, lowercase, as one number (0 when fewer are left)."""
    if position + 3 > end:
        return 0
    return (text[position] | 32) | (text[position + 1] | 32) << 8 | (text[position + 2] | 32) << 16


@njit(inline="always")
def _exponent(text, position, end) -> tuple:
    """(where it ends or -1, the value) of an optionally signed exponent; beyond 100,000 it is
    kept at that (every significand is then 0.0 or inf)."""
    negative = position < end and text[position] == 45
    if position < end and (negative or text[position] == 43):
        position += 1
    value, digits = 0, 0
    while position < end and 48 <= text[position] <= 57:
        value = min(value * 10 + (text[position] - 48), 100_000)
        digits += 1
        position += 1
    return (position if digits else -1), (-value if negative else value)


@njit(inline="always")
def _token_end(text, position, end) -> int:
    """``position`` when a token ends there (a space or the line's end), else -1."""
    return position if position == end or text[position] == 32 else -1
