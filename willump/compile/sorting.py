"""A stable sort of tree splits by (key, threshold) in numba: LSD radix passes.

Building a forest sorts every split of its trees by feature and threshold (``forest._bit_splits``);
numpy's ``lexsort`` of the 600,000 splits of 10,000 trees takes ~0.1 s, these passes ~0.02 s.
"""

import numpy as np

from willump.compile.jit import njit

DIGIT_BITS = 11  # a pass's digit: 2,048 counters, in the first-level cache


def lexsorted(keys: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """``np.lexsort((thresholds, keys))``: the order of non-negative int64 ``keys``, then of
    float64 ``thresholds`` (-0.0 equal to 0.0), ties in the order given."""
    bits = (np.asarray(thresholds, np.float64) + 0.0).view(np.uint64)  # (+ 0.0: -0.0 becomes 0.0)
    return _lexsorted(np.ascontiguousarray(keys, np.int64), np.ascontiguousarray(bits))


@njit
def _lexsorted(keys, threshold_bits):
    n = len(keys)
    ordered_bits = np.empty(n, np.uint64)  # (a double's bits made to sort as unsigned numbers)
    for i in range(n):
        bits = threshold_bits[i]
        ordered_bits[i] = ~bits if bits >> np.uint64(63) else bits | (np.uint64(1) << np.uint64(63))
    order = _sorted_by(ordered_bits, np.arange(n), 64)
    key_bits, top = 1, keys.max() if n else 0
    while key_bits < 64 and (top >> key_bits) > 0:
        key_bits += 1
    return _sorted_by(keys[order].view(np.uint64), order, key_bits)


@njit
def _sorted_by(values, order, bits):
    """``order`` sorted stably by the low ``bits`` of ``values`` (``values[i]`` belongs to ``order[i]``)."""
    values_out, order_out = np.empty_like(values), np.empty_like(order)
    for shift in range(0, bits, DIGIT_BITS):
        if _pass(values, order, np.uint64(shift), values_out, order_out):
            values, values_out, order, order_out = values_out, values, order_out, order
    return order


@njit
def _pass(values, order, shift, values_out, order_out) -> bool:
    """One stable counting pass by the digit at ``shift`` into the ``*_out`` arrays; False (and
    nothing written) when every value has the same digit there."""
    mask = np.uint64((1 << DIGIT_BITS) - 1)
    starts = np.zeros((1 << DIGIT_BITS) + 1, np.int64)
    for value in values:
        starts[np.int64((value >> shift) & mask) + 1] += 1
    if starts.max() == len(values):
        return False
    starts = np.cumsum(starts)
    for i in range(len(values)):
        digit = np.int64((values[i] >> shift) & mask)
        values_out[starts[digit]], order_out[starts[digit]] = values[i], order[i]
        starts[digit] += 1
    return True
