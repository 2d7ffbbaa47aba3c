"""Decimal text to the nearest double, in numba, exactly as ``strtod`` reads it.

Model texts (LightGBM's) hold hundreds of thousands of 17-digit doubles; numpy reads them
at ~80 ns each through the C library, one call a number. ``decimal_to_bits`` is the
Eisel-Lemire algorithm as fast_float computes it (``compute_float``): the decimal's
significand, at most 19 digits, times a 128-bit truncation of the power of five, which
Mushtak and Lemire ("Fast number parsing without fallback", 2023) prove is always enough to
round to nearest, ties to even. A number of more digits is left to the caller.
"""

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from willump.compile.jit import njit

SMALLEST_POWER, LARGEST_POWER = -342, 308  # of ten: below, every significand is 0.0; above, inf
MAX_DIGITS = 19  # significant digits a uint64 always holds


def _powers_of_five() -> np.ndarray:
    """(high, low) 64-bit words of ``5**q`` for ``q`` in ``[SMALLEST_POWER, LARGEST_POWER]``, normalized
    to 128 bits with the top one set: truncated, or for negative ``q`` the reciprocal rounded up
    (fast_float's ``table_generation.py``)."""
    words = []
    for q in range(SMALLEST_POWER, LARGEST_POWER + 1):
        power = 5 ** abs(q)
        if q < 0:
            bits = power.bit_length()  # (its log2 rounded up: a power of five is no power of two)
            value = 2 ** (bits + 127 if q >= -27 else 2 * bits + 128) // power + 1
        else:
            value = power << max(0, 127 - power.bit_length() + 1)
        value >>= max(0, value.bit_length() - 128)
        words.append((value >> 64, value & (2**64 - 1)))
    return np.array(words, dtype=np.uint64)


POWERS_OF_FIVE = _powers_of_five()
_LOW32 = np.uint64(0xFFFFFFFF)
_EXPLICIT_BITS = 52
_MIN_EXPONENT, _INFINITE = -1023, 0x7FF
_PRECISION_MASK = np.uint64(0xFFFFFFFFFFFFFFFF >> (_EXPLICIT_BITS + 3))


@njit(inline="always")
def _product(a, b) -> tuple:
    """(high, low) words of the 128-bit product of two uint64."""
    a_low, a_high, b_low, b_high = a & _LOW32, a >> np.uint64(32), b & _LOW32, b >> np.uint64(32)
    low_low, low_high, high_low = a_low * b_low, a_low * b_high, a_high * b_low
    middle = (low_low >> np.uint64(32)) + (low_high & _LOW32) + (high_low & _LOW32)
    high = a_high * b_high + (low_high >> np.uint64(32)) + (high_low >> np.uint64(32)) + (middle >> np.uint64(32))
    return high, (low_low & _LOW32) | (middle << np.uint64(32))


@njit(inline="always")
def _bits(mantissa, power2, negative):
    """The bits of the double of a mantissa's explicit bits, a biased exponent and a sign."""
    return mantissa | (np.uint64(power2) << np.uint64(_EXPLICIT_BITS)) | (np.uint64(negative) << np.uint64(63))


@njit
def decimal_to_bits(significand, exponent, negative, powers):
    """The bits (uint64) of the double nearest ``significand * 10**exponent`` (negated when
    ``negative``), ties to even; ``significand`` a uint64 of at most ``MAX_DIGITS`` digits,
    ``powers`` ``POWERS_OF_FIVE``."""
    if significand == 0 or exponent < SMALLEST_POWER:
        return _bits(np.uint64(0), 0, negative)
    if exponent > LARGEST_POWER:
        return _bits(np.uint64(0), _INFINITE, negative)
    zeros = leading_zeros(significand)
    w = significand << np.uint64(zeros)
    index = exponent - SMALLEST_POWER
    high, low = _product(w, powers[index, 0])
    if (high & _PRECISION_MASK) == _PRECISION_MASK:  # (the low word may carry into the bits kept)
        second_high, _ = _product(w, powers[index, 1])
        low += second_high
        if second_high > low:
            high += np.uint64(1)
    upper = int(high >> np.uint64(63))
    shift = np.uint64(upper + 64 - _EXPLICIT_BITS - 3)
    mantissa = high >> shift
    power2 = (((152170 + 65536) * exponent) >> 16) + 63 + upper - int(zeros) - _MIN_EXPONENT
    if power2 <= 0:  # subnormal, or zero
        if -power2 + 1 >= 64:
            return _bits(np.uint64(0), 0, negative)
        mantissa >>= np.uint64(-power2 + 1)
        mantissa += mantissa & np.uint64(1)
        mantissa >>= np.uint64(1)
        power2 = 0 if mantissa < (np.uint64(1) << np.uint64(_EXPLICIT_BITS)) else 1
        return _bits(mantissa & ~(np.uint64(1) << np.uint64(_EXPLICIT_BITS)), power2, negative)
    if low <= np.uint64(1) and -4 <= exponent <= 23 and (mantissa & np.uint64(3)) == np.uint64(1):
        if (mantissa << shift) == high:  # exactly halfway: round down to the even one
            mantissa &= ~np.uint64(1)
    mantissa += mantissa & np.uint64(1)
    mantissa >>= np.uint64(1)
    if mantissa >= (np.uint64(2) << np.uint64(_EXPLICIT_BITS)):
        mantissa = np.uint64(1) << np.uint64(_EXPLICIT_BITS)
        power2 += 1
    if power2 >= _INFINITE:
        return _bits(np.uint64(0), _INFINITE, negative)
    return _bits(mantissa & ~(np.uint64(1) << np.uint64(_EXPLICIT_BITS)), power2, negative)
