"""The radix sort of splits is numpy's ``lexsort`` (stable, -0.0 equal to 0.0, infinities at the ends)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from willump.compile.sorting import lexsorted

THRESHOLDS = st.one_of(st.floats(allow_nan=False), st.sampled_from([0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324]))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.data(), st.integers(0, 3000), st.sampled_from([1, 3, 2**11 + 5, 2**40]))
def test_lexsorted_is_numpys_lexsort(data, n, most_key):
    keys = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, most_key)))
    thresholds = data.draw(hnp.arrays(np.float64, n, elements=THRESHOLDS))
    if n > 1 and data.draw(st.booleans()):  # (many ties, as a forest's splits have)
        thresholds = thresholds[np.arange(n) % 3] if n > 3 else thresholds
    assert (lexsorted(keys, thresholds) == np.lexsort((thresholds, keys))).all()
