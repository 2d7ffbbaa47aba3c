"""How much the model relies on each IFV (paper §4.2).

Linear models: |coefficient| times the mean |value| of the feature. Tree
ensembles: the drop in validation score when the IFV's whole column block is
permuted. Any other model: gain importances of a LightGBM model trained on the
full feature vectors. An IFV's importance is the sum over its columns.
"""

import numpy as np
import pandas as pd
import scipy.sparse as sp

from willump.runtime.features import width


def column_blocks(values: list, X) -> list[np.ndarray]:
    """For each IFV, the positions of its columns in the model's input ``X``."""
    if isinstance(X, pd.DataFrame) and all(isinstance(v, pd.DataFrame) for v in values):
        return [X.columns.get_indexer(v.columns) for v in values]
    widths = [width(v) for v in values]
    if sum(widths) != X.shape[1]:
        raise ValueError(
            f"the model's input has {X.shape[1]} columns but the IFVs have {sum(widths)} together; "
            "willump cannot tell which columns come from which IFV"
        )
    offsets = np.cumsum([0] + widths)
    return [np.arange(offsets[i], offsets[i + 1]) for i in range(len(values))]


def is_linear(model) -> bool:
    return hasattr(model, "coef_") and not hasattr(model, "steps")


def is_tree_ensemble(model) -> bool:
    import lightgbm

    if isinstance(model, (lightgbm.Booster, lightgbm.LGBMModel)):
        return True
    return hasattr(model, "feature_importances_") and hasattr(model, "estimators_")


def linear_importances(model, X, blocks) -> list[float]:
    coefficients = np.abs(np.atleast_2d(np.asarray(model.coef_, dtype=float))).sum(axis=0)
    if sp.issparse(X):
        mean_magnitude = np.asarray(abs(X).mean(axis=0)).ravel()
    else:
        mean_magnitude = np.nanmean(np.abs(np.asarray(X, dtype=float)), axis=0)
    per_column = coefficients * np.nan_to_num(mean_magnitude)
    return [float(per_column[b].sum()) for b in blocks]


def permutation_importances(score, X, blocks, random_state) -> list[float]:
    """Drop of ``score(X)`` when each block's rows are shuffled together (never below zero)."""
    rng = np.random.default_rng(random_state)
    baseline = score(X)
    order = rng.permutation(X.shape[0])
    result = []
    for block in blocks:
        result.append(max(baseline - score(_permute_block(X, block, order)), 0.0))
    return result


def _permute_block(X, block, order):
    if isinstance(X, pd.DataFrame):
        permuted = X.copy()
        permuted.iloc[:, block] = X.iloc[order, block].to_numpy()
        return permuted
    if sp.issparse(X):
        X = X.tocsc()
        rest = np.setdiff1d(np.arange(X.shape[1]), block)
        columns = np.concatenate([block, rest])
        joined = sp.hstack([X[:, block][order], X[:, rest]], format="csc")
        return joined[:, np.argsort(columns)].tocsr()
    permuted = np.array(X, copy=True)
    permuted[:, block] = X[order][:, block]
    return permuted


def surrogate_importances(X, y, blocks, classification: bool, random_state) -> list[float]:
    """Gain importances of a LightGBM model trained on the full feature vectors."""
    import lightgbm

    kind = lightgbm.LGBMClassifier if classification else lightgbm.LGBMRegressor
    surrogate = kind(n_estimators=100, importance_type="gain", random_state=random_state, verbose=-1)
    surrogate.fit(X, y)
    gains = surrogate.feature_importances_
    return [float(gains[b].sum()) for b in blocks]
