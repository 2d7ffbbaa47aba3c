"""Tree ensembles as flat arrays, scored by numba kernels: LightGBM's predictions to the bit.

A ``Forest`` is read once from a fitted model. Every internal node of every tree
is one record of ``nodes``, trees one after the other:

- ``threshold`` (float64): a value goes left when ``value <= threshold`` (a library comparing
  ``value < t`` has ``t``'s largest double below it stored instead); of a categorical node, the
  index of its bitset;
- ``feature`` (int32): the column of the row it reads;
- ``left``, ``right`` (int32): the next node's index in ``nodes``, or ``~leaf`` (negative)
  for a leaf, ``leaf`` indexing ``leaves`` (float64, the leaf values);
- ``flags`` (int32): ``NAN_LEFT``: a NaN goes left (else right); ``CATEGORICAL``: the value's
  integer part ``c`` (truncated toward zero) goes left when it is in ``[0, 2**31)`` and bit
  ``c % 32`` of word ``c // 32`` of the node's bitset is set (a NaN goes right); the bitset is
  ``cat_bits[cat_bounds[i]:cat_bounds[i + 1]]`` (uint32 words, LightGBM's ``cat_threshold``
  layout); ``ZERO_MISSING``: a NaN or a value with ``abs(value) <= tiny`` goes the default way,
  left when ``DEFAULT_LEFT``.

``trees`` (int32, one row per tree in the order their values are summed): the root
(a node index, or ``~leaf`` for a tree of one leaf) and the output it adds to.

The outputs of a row start at 0.0 and each tree's leaf value is added in tree order
(LightGBM's ``GBDT::PredictRaw``); then divided by ``divisor`` when it is not 0
(``average_output``, random-forest mode) and mapped by ``link``, each computed as
LightGBM's ``ConvertOutput`` computes it. One kernel, ``score_rows``, scores a range of
rows: a single row is a range of one, a batch is split in ranges over ``workers``.

LightGBM's own rules become these flags when the model is read (``_lightgbm_flags``):
a NaN reads as 0.0 unless NaN is the node's missing value, and a value with
``abs(value) <= kZeroThreshold`` as 0.0 (LightGBM drops it from the row), which moves a
threshold lying within that distance of 0 to its edge.
"""

import math

import numpy as np

from willump.compile.forms import Unsupported
from willump.compile.jit import njit

NODE = np.dtype(
    [("threshold", np.float64), ("feature", np.int32), ("left", np.int32), ("right", np.int32), ("flags", np.int32)],
    align=True,
)
NAN_LEFT, CATEGORICAL, ZERO_MISSING, DEFAULT_LEFT = 1, 2, 4, 8  # flags
# links: outputs as they are, LightGBM's sigmoid of each output (binary, multiclassova,
# cross_entropy), softmax, exp (poisson, gamma, tweedie), sign(x) * x * x (reg_sqrt), log1p(exp(x))
IDENTITY, SIGMOID, SOFTMAX, EXP, SIGNED_SQUARE, LOG1P_EXP = range(6)
LIGHTGBM_ZERO = float(np.float32(1e-35))  # kZeroThreshold (a float literal widened to double)
ROWS_PER_TASK = 512  # fewer rows than this per worker are not worth a thread


@njit
def _special_decision(cat_bounds, cat_bits, threshold, flags, value, tiny):
    """Whether a value goes left at a categorical or ``ZERO_MISSING`` node (a call: the loop over
    plain nodes stays small)."""
    if flags & CATEGORICAL:
        if math.isnan(value) or not -1.0 < value < 2147483648.0:  # int(value) negative, or beyond int32
            return False
        category = int(value)
        first, stop = cat_bounds[int(threshold)], cat_bounds[int(threshold) + 1]
        word = category // 32
        return word < stop - first and ((cat_bits[first + word] >> np.uint32(category % 32)) & np.uint32(1)) != 0
    if math.isnan(value) or -tiny <= value <= tiny:
        return (flags & DEFAULT_LEFT) != 0
    return value <= threshold


@njit(inline="always")
def _finish(out, link, sigmoid, divisor):
    """``out`` (a row's summed outputs) averaged and mapped by the link, as LightGBM does."""
    n = len(out)
    if divisor != 0.0:
        for k in range(n):
            out[k] /= divisor
    if link == SIGMOID:
        for k in range(n):
            out[k] = 1.0 / (1.0 + math.exp(-sigmoid * out[k]))
    elif link == SOFTMAX:
        largest = out[0]
        for k in range(1, n):
            if not out[k] < largest:  # (std::max(out[k], largest))
                largest = out[k]
        total = 0.0
        for k in range(n):
            out[k] = math.exp(out[k] - largest)
            total += out[k]
        for k in range(n):
            out[k] /= total
    elif link == EXP:
        for k in range(n):
            out[k] = math.exp(out[k])
    elif link == SIGNED_SQUARE:
        for k in range(n):
            x = out[k]
            out[k] = float((x > 0.0) - (x < 0.0)) * x * x
    elif link == LOG1P_EXP:
        for k in range(n):
            out[k] = math.log1p(math.exp(out[k]))


@njit
def score_rows(X, first, stop, nodes, cat_bounds, cat_bits, leaves, trees, tiny, link, sigmoid, divisor, out):
    """The outputs of rows ``first..stop`` of ``X`` into the same rows of ``out``: each row's
    leaves summed in tree order (LightGBM's ``GBDT::PredictRaw``), then finished."""
    one = out.shape[1] == 1  # (then the sum is held in a register)
    for r in range(first, stop):
        out[r, :] = 0.0
        total = 0.0
        for t in range(len(trees)):
            node = trees[t, 0]
            while node >= 0:  # (LightGBM's Tree::GetLeaf; written here, not called: it is the hot loop)
                record = nodes[node]
                value = X[r, record.feature]
                flags = record.flags
                if flags & (CATEGORICAL | ZERO_MISSING):
                    left = _special_decision(cat_bounds, cat_bits, record.threshold, flags, value, tiny)
                elif math.isnan(value):
                    left = (flags & NAN_LEFT) != 0
                else:
                    left = value <= record.threshold
                node = record.left if left else record.right
            if one:
                total += leaves[~node]
            else:
                out[r, trees[t, 1]] += leaves[~node]
        if one:
            out[r, 0] = total
        _finish(out[r], link, sigmoid, divisor)


class Forest:
    """The arrays of a tree ensemble (see the module's docstring) and how its outputs are finished."""

    def __init__(self, nodes, cat_bounds, cat_bits, leaves, trees, n_outputs: int, n_features: int, tiny: float,
                 link: int, sigmoid: float, divisor: float):
        self.nodes, self.cat_bounds, self.cat_bits, self.leaves, self.trees = nodes, cat_bounds, cat_bits, leaves, trees
        self.n_outputs, self.n_features = n_outputs, n_features
        self.tiny, self.link, self.sigmoid, self.divisor = tiny, link, sigmoid, divisor

    def _finishing(self, raw: bool) -> tuple:
        return (IDENTITY, 1.0, 0.0) if raw else (self.link, self.sigmoid, self.divisor)

    def _check(self, X: np.ndarray) -> None:
        """The kernels read rows of ``n_features`` float64 values, one after the other."""
        if not (X.dtype == np.float64 and X.ndim == 2 and X.shape[1] == self.n_features and X.flags.c_contiguous):
            raise ValueError(f"expected a C-contiguous float64 matrix of {self.n_features} columns; got {X.dtype} "
                             f"of shape {X.shape}")

    def predict_row(self, X: np.ndarray, raw: bool = False) -> np.ndarray:
        """The outputs (float64, one per output) of a C-contiguous float64 matrix of one row."""
        self._check(X)
        if len(X) != 1:
            raise ValueError(f"expected one row; got {len(X)}")
        out = np.empty((1, self.n_outputs))
        score_rows(X, 0, 1, self.nodes, self.cat_bounds, self.cat_bits, self.leaves, self.trees, self.tiny,
                   *self._finishing(raw), out)
        return out[0]

    def predict(self, X: np.ndarray, workers=None, raw: bool = False) -> np.ndarray:
        """The outputs of the rows of a C-contiguous float64 matrix, shape (rows, outputs)."""
        self._check(X)
        out = np.empty((len(X), self.n_outputs))
        settings = (self.nodes, self.cat_bounds, self.cat_bits, self.leaves, self.trees, self.tiny,
                    *self._finishing(raw), out)
        if workers is None or workers.count == 1 or len(X) < 2 * ROWS_PER_TASK:
            score_rows(X, 0, len(X), *settings)
        else:
            workers.map(lambda rows: score_rows(X, rows.start, rows.stop, *settings), workers.split(len(X), ROWS_PER_TASK))
        return out


def lightgbm_forest(booster, iterations: int | None = None) -> Forest:
    """The forest of a LightGBM ``Booster`` scoring as ``booster.predict(X, num_iteration=iterations)``
    (``None``: its best iteration, else all); Unsupported for what the kernels do not reproduce."""
    if iterations is None:
        iterations = booster.best_iteration
    header, trees = _model_sections(booster.model_to_string(num_iteration=-1))
    per_iteration = int(header["num_tree_per_iteration"])
    available = len(trees) // per_iteration
    used = min(iterations, available) if iterations > 0 else available
    link, sigmoid = _link(header.get("objective"), booster.params)
    arrays = _tree_arrays(trees[: used * per_iteration], per_iteration)
    divisor = float(used) if "average_output" in header else 0.0
    return Forest(*arrays, per_iteration, int(header["max_feature_idx"]) + 1, LIGHTGBM_ZERO, link, sigmoid, divisor)


def _model_sections(text: str) -> tuple:
    """(header, trees) of a LightGBM model string: ``key=value`` dicts (a line without ``=`` maps to "")."""
    body = text.split("\nend of trees", 1)[0]
    blocks = body.split("\n\n")
    header = _fields(blocks[0])
    trees = [_fields(block) for block in blocks[1:] if block.strip().startswith("Tree=")]
    return header, trees


def _fields(block: str) -> dict:
    pairs = (line.split("=", 1) if "=" in line else (line, "") for line in block.strip().splitlines())
    return {key: value for key, value in pairs}


def _numbers(text: str, dtype) -> np.ndarray:
    """The numbers of a line (doubles parsed by Python: exact for LightGBM's 17 digits, inf and nan)."""
    return np.array([float(x) for x in text.split()] if dtype is np.float64 else [int(x) for x in text.split()], dtype)


def _tree_arrays(trees: list, per_iteration: int) -> tuple:
    """(nodes, cat_bounds, cat_bits, leaves, trees) of LightGBM's trees, in order."""
    nodes, leaves, cat_words, roots = [], [], [], []
    cat_bounds = [0]
    n_nodes = n_leaves = 0
    for index, tree in enumerate(trees):
        if tree.get("is_linear", "0") != "0":
            raise Unsupported("linear trees (linear_tree=True)")
        n = int(tree["num_leaves"])
        values = _numbers(tree["leaf_value"], np.float64)
        if len(values) != n:
            raise Unsupported("a tree whose leaves do not match its size")
        if n == 1:
            roots.append((~n_leaves, index % per_iteration))
        else:
            node = np.zeros(n - 1, NODE)
            node["feature"] = _numbers(tree["split_feature"], np.int32)
            for side in ("left", "right"):
                child = _numbers(tree[f"{side}_child"], np.int32)
                node[side] = np.where(child >= 0, child + n_nodes, ~(~child + n_leaves))
            threshold, decision = _numbers(tree["threshold"], np.float64), _numbers(tree["decision_type"], np.int32)
            node["threshold"], node["flags"] = _lightgbm_flags(threshold, decision)
            categorical = (decision & _LIGHTGBM_CATEGORICAL) != 0
            if categorical.any():  # (the threshold: the tree's own index of the bitset)
                node["threshold"][categorical] += len(cat_bounds) - 1
                bounds = _numbers(tree["cat_boundaries"], np.int64)
                cat_bounds.extend((bounds[1:] + cat_bounds[-1]).tolist())
                cat_words.append(_numbers(tree["cat_threshold"], np.uint32))
            nodes.append(node)
            roots.append((n_nodes, index % per_iteration))
            n_nodes += n - 1
        leaves.append(values)
        n_leaves += n
    return (
        np.concatenate(nodes) if nodes else np.zeros(0, NODE),
        np.array(cat_bounds, np.int32),
        np.concatenate(cat_words) if cat_words else np.zeros(0, np.uint32),
        np.concatenate(leaves) if leaves else np.zeros(0),
        np.array(roots, np.int32).reshape(-1, 2),
    )


_LIGHTGBM_CATEGORICAL, _LIGHTGBM_DEFAULT_LEFT = 1, 2  # decision_type bits; the missing type: (d >> 2) & 3
_LIGHTGBM_ZERO_MISSING, _LIGHTGBM_NAN_MISSING = 1, 2


def _lightgbm_flags(threshold: np.ndarray, decision: np.ndarray) -> tuple:
    """(thresholds, flags) of nodes of LightGBM's ``threshold`` and ``decision_type``, deciding as
    ``Tree::Decision`` does on the row LightGBM predicts (where ``abs(value) <= kZeroThreshold`` is 0.0)."""
    categorical = (decision & _LIGHTGBM_CATEGORICAL) != 0
    default_left = (decision & _LIGHTGBM_DEFAULT_LEFT) != 0
    missing = (decision >> 2) & 3
    zero_missing = ~categorical & (missing == _LIGHTGBM_ZERO_MISSING)
    plain = ~categorical & ~zero_missing
    # a NaN: the default way when it is the missing value, else 0.0 compared
    nan_left = np.where(missing == _LIGHTGBM_NAN_MISSING, default_left, 0.0 <= threshold)
    # values within kZeroThreshold of 0 compare as 0.0: a threshold among them moves to their edge
    threshold = threshold.copy()
    threshold[plain & (0.0 <= threshold) & (threshold < LIGHTGBM_ZERO)] = LIGHTGBM_ZERO
    threshold[plain & (-LIGHTGBM_ZERO <= threshold) & (threshold < 0.0)] = np.nextafter(-LIGHTGBM_ZERO, -np.inf)
    flags = (np.where(plain & nan_left, NAN_LEFT, 0) | np.where(categorical, CATEGORICAL, 0)
             | np.where(zero_missing, ZERO_MISSING, 0) | np.where(default_left, DEFAULT_LEFT, 0))
    return threshold, flags.astype(np.int32)


_IDENTITY_OBJECTIVES = {"regression", "regression_l1", "quantile", "mape", "huber", "fair", "lambdarank",
                        "rank_xendcg", "custom"}
_FIXED_LINKS = {"multiclass": SOFTMAX, "poisson": EXP, "gamma": EXP, "tweedie": EXP, "cross_entropy": SIGMOID,
                "cross_entropy_lambda": LOG1P_EXP}


def _link(objective: str | None, params: dict) -> tuple:
    """(link, sigmoid) of the model string's ``objective=`` line (none: the outputs as they are)."""
    if objective is None:
        return IDENTITY, 1.0
    name, *options = objective.split()
    settings = dict(o.split(":", 1) for o in options if ":" in o)
    if name in ("binary", "multiclassova"):
        sigmoid = float(settings["sigmoid"])
        if "sigmoid" in params and float(params["sigmoid"]) != sigmoid:  # (the string has 6 digits)
            raise Unsupported("a sigmoid parameter the model string does not hold exactly")
        return SIGMOID, sigmoid
    if name in _FIXED_LINKS:
        return _FIXED_LINKS[name], 1.0
    if name in _IDENTITY_OBJECTIVES:
        return (SIGNED_SQUARE if "sqrt" in options else IDENTITY), 1.0
    raise Unsupported(f"the objective {name!r}")
