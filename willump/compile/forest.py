"""Tree ensembles as flat arrays, scored by numba kernels: LightGBM's predictions to the bit.

A ``Forest`` is read once from a fitted model. Every internal node of every tree
is one record of ``nodes``, trees one after the other:

- ``threshold`` (float64): a value going left when ``value <= threshold``
  (``compare == LESS_EQUAL``, LightGBM's and scikit-learn's rule) or
  ``value < threshold`` (``LESS``);
- ``feature`` (int32): the column of the row it reads;
- ``left``, ``right`` (int32): the next node's index in ``nodes``, or ``~leaf`` (negative)
  for a leaf, ``leaf`` indexing ``leaves`` (float64, the leaf values);
- ``decision`` (int32): LightGBM's ``decision_type`` bits: ``CATEGORICAL`` (1),
  ``DEFAULT_LEFT`` (2), and the missing type ``(decision >> 2) & 3``: ``MISSING_NONE`` (a NaN
  reads as 0.0), ``MISSING_ZERO`` (a value with ``abs(value) <= tiny`` goes the default way) or
  ``MISSING_NAN`` (a NaN goes the default way);
- ``category`` (int32): of a categorical node, its bitset: ``cat_bits[cat_bounds[category]:
  cat_bounds[category + 1]]`` (uint32 words; category c is bit ``c % 32`` of word ``c // 32``,
  LightGBM's ``cat_threshold`` layout). A categorical node sends a value left when it is not NaN,
  its integer part ``c`` (truncated toward zero) is in ``[0, 2**31)`` and bit c is set.

``trees`` (int32, one row per tree in the order their values are summed): the root
(a node index, or ``~leaf`` for a tree of one leaf) and the output it adds to. Before
any comparison a value with ``abs(value) <= tiny`` reads as 0.0 (LightGBM drops such
values from the row it predicts: ``kZeroThreshold``).

The outputs of a row start at 0.0 and each tree's leaf value is added in tree order
(LightGBM's ``GBDT::PredictRaw``); then divided by ``divisor`` when it is not 0
(``average_output``, random-forest mode) and mapped by ``link``, each computed as
LightGBM's ``ConvertOutput`` computes it.
"""

import math

import numpy as np

from willump.compile.forms import Unsupported
from willump.compile.jit import njit

NODE = np.dtype(
    [("threshold", np.float64), ("feature", np.int32), ("left", np.int32), ("right", np.int32),
     ("decision", np.int32), ("category", np.int32)], align=True,
)
CATEGORICAL, DEFAULT_LEFT = 1, 2
MISSING_NONE, MISSING_ZERO, MISSING_NAN = 0, 1, 2
LESS_EQUAL, LESS = 0, 1
# links: outputs as they are, LightGBM's sigmoid of each output (binary, multiclassova,
# cross_entropy), softmax, exp (poisson, gamma, tweedie), sign(x) * x * x (reg_sqrt), log1p(exp(x))
IDENTITY, SIGMOID, SOFTMAX, EXP, SIGNED_SQUARE, LOG1P_EXP = range(6)
LIGHTGBM_ZERO = float(np.float32(1e-35))  # kZeroThreshold (a float literal widened to double)
ROWS_PER_TASK = 512  # fewer rows than this per worker are not worth a thread
_BLOCK = 64  # rows scored tree by tree together (the tree stays in cache)


@njit(inline="always")
def _leaf(nodes, cat_bounds, cat_bits, row, root, compare, tiny):
    """The leaf a row reaches from ``root`` (LightGBM's ``Tree::GetLeaf``)."""
    node = root
    while node >= 0:
        record = nodes[node]
        value = row[record.feature]
        if -tiny <= value <= tiny:
            value = 0.0
        decision = record.decision
        if decision & CATEGORICAL:
            left = False
            if not math.isnan(value) and value > -1.0 and value < 2147483648.0:
                category = int(value)
                first = cat_bounds[record.category]
                word = category // 32
                if word < cat_bounds[record.category + 1] - first:
                    left = ((cat_bits[first + word] >> np.uint32(category % 32)) & np.uint32(1)) != 0
        else:
            missing = (decision >> 2) & 3
            if math.isnan(value) and missing != MISSING_NAN:
                value = 0.0
            if (missing == MISSING_ZERO and -tiny <= value <= tiny) or (missing == MISSING_NAN and math.isnan(value)):
                left = (decision & DEFAULT_LEFT) != 0
            elif compare == LESS_EQUAL:
                left = value <= record.threshold
            else:
                left = value < record.threshold
        node = record.left if left else record.right
    return ~node


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
            largest = max(out[k], largest)
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
def score_row(row, nodes, cat_bounds, cat_bits, leaves, trees, compare, tiny, link, sigmoid, divisor, out):
    """The outputs of one row into ``out`` (zeroed here)."""
    for k in range(len(out)):
        out[k] = 0.0
    for t in range(len(trees)):
        out[trees[t, 1]] += leaves[_leaf(nodes, cat_bounds, cat_bits, row, trees[t, 0], compare, tiny)]
    _finish(out, link, sigmoid, divisor)


@njit
def score_rows(X, first, stop, nodes, cat_bounds, cat_bits, leaves, trees, compare, tiny, link, sigmoid, divisor, out):
    """The outputs of rows ``first..stop`` of ``X`` into the same rows of ``out``: blocks of rows
    go through the trees one tree at a time (each row's sum still in tree order)."""
    for start in range(first, stop, _BLOCK):
        end = min(start + _BLOCK, stop)
        for r in range(start, end):
            for k in range(out.shape[1]):
                out[r, k] = 0.0
        for t in range(len(trees)):
            root, k = trees[t, 0], trees[t, 1]
            for r in range(start, end):
                out[r, k] += leaves[_leaf(nodes, cat_bounds, cat_bits, X[r], root, compare, tiny)]
        for r in range(start, end):
            _finish(out[r], link, sigmoid, divisor)


class Forest:
    """The arrays of a tree ensemble (see the module's docstring) and how its outputs are finished."""

    def __init__(self, nodes, cat_bounds, cat_bits, leaves, trees, n_outputs: int, n_features: int,
                 compare: int, tiny: float, link: int, sigmoid: float, divisor: float):
        self.nodes, self.cat_bounds, self.cat_bits, self.leaves, self.trees = nodes, cat_bounds, cat_bits, leaves, trees
        self.n_outputs, self.n_features = n_outputs, n_features
        self.compare, self.tiny, self.link, self.sigmoid, self.divisor = compare, tiny, link, sigmoid, divisor

    def _finishing(self, raw: bool) -> tuple:
        return (IDENTITY, 1.0, 0.0) if raw else (self.link, self.sigmoid, self.divisor)

    def predict_row(self, row: np.ndarray, raw: bool = False) -> np.ndarray:
        """The outputs (float64, one per output) of one float64 row."""
        out = np.empty(self.n_outputs)
        score_row(row, self.nodes, self.cat_bounds, self.cat_bits, self.leaves, self.trees, self.compare, self.tiny,
                  *self._finishing(raw), out)
        return out

    def predict(self, X: np.ndarray, workers=None, raw: bool = False) -> np.ndarray:
        """The outputs of the rows of a C-contiguous float64 matrix, shape (rows, outputs)."""
        out = np.empty((len(X), self.n_outputs))
        settings = (self.nodes, self.cat_bounds, self.cat_bits, self.leaves, self.trees, self.compare, self.tiny,
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
    return Forest(*arrays, per_iteration, int(header["max_feature_idx"]) + 1, LESS_EQUAL, LIGHTGBM_ZERO, link,
                  sigmoid, divisor)


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
            node["threshold"] = _numbers(tree["threshold"], np.float64)
            node["feature"] = _numbers(tree["split_feature"], np.int32)
            node["decision"] = _numbers(tree["decision_type"], np.int32)
            for side in ("left", "right"):
                child = _numbers(tree[f"{side}_child"], np.int32)
                node[side] = np.where(child >= 0, child + n_nodes, ~(~child + n_leaves))
            categorical = (node["decision"] & CATEGORICAL) != 0
            if categorical.any():
                bounds = _numbers(tree["cat_boundaries"], np.int64)
                node["category"][categorical] = node["threshold"][categorical].astype(np.int32) + len(cat_bounds) - 1
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
