"""fit's own ROC AUC and accuracy give scikit-learn's numbers (they skip its input checks for speed)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, roc_auc_score

from willump.optimizations.cascades import accuracy, roc_auc

labels = st.sampled_from([(0, 1), (-1, 1), ("ham", "spam"), (False, True), (2, 7)])
scores = st.sampled_from([-1.0, 0.0, 0.25, 0.5, 1.0, 3.0, np.nan])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@settings(max_examples=300)
@given(labels, st.lists(st.tuples(st.booleans(), scores), min_size=1, max_size=60))
def test_roc_auc_is_scikit_learns(pair, rows):
    y = np.array([pair[positive] for positive, _ in rows])
    s = np.array([score for _, score in rows])
    try:
        expected = roc_auc_score(y, s)
    except ValueError as error:  # one class only, or NaN scores: the same error
        with pytest.raises(ValueError, match=str(error)[:30]):
            roc_auc(y, s)
        return
    if np.isnan(expected):  # (newer scikit-learn: one class only gives NaN and a warning)
        assert np.isnan(roc_auc(y, s))
    else:
        assert roc_auc(y, s) == pytest.approx(expected, abs=1e-12)


@given(labels, st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=60))
def test_accuracy_is_scikit_learns(pair, rows):
    y = np.array([pair[a] for a, _ in rows])
    predicted = np.array([pair[b] for _, b in rows])
    assert accuracy(y, predicted) == accuracy_score(y, predicted)
