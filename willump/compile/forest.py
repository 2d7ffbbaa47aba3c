"""Tree ensembles as flat arrays, scored by numba kernels with each library's arithmetic.

A reader per library (``trees`` for LightGBM, ``sktrees`` for scikit-learn, ``xgbtrees`` for
XGBoost) turns a fitted model's trees into ``Trees``, which ``joined`` makes one ``Forest``: every
node of every tree, trees one after the other:

- ``nodes`` (int64, a row of ``NODE_WORDS`` per node, so a turn reads one cache line): word 0
  holds ``threshold``'s bits (``thresholds`` is the same memory as float64), word 1 its left child
  in the low half and its right child in the high half (a leaf's children are itself), word 2 its
  ``feature`` in the low half and its ``flags`` in the high half;
- ``feature``: the column of the row it reads (0 for a leaf);
- ``threshold``: a value goes left when ``value <= threshold`` (a library comparing
  ``value < t`` has ``t``'s largest double below it stored instead); of a categorical node, the
  index of its bitset;
- ``flags``: ``MISSING_LEFT``: a NaN goes left (else right); ``ZERO_MISSING``: a value
  with ``abs(value) <= ZERO`` is missing too; ``CATEGORICAL``: the value's integer part ``c``
  (truncated toward zero) goes left when it is in ``[0, 2**31)`` and bit ``c % 32`` of word
  ``c // 32`` of the node's bitset is set, right when it is not but is among the feature's
  ``known`` categories (or the feature has none), else (a NaN, a negative or unknown category)
  the missing way. Bitset ``b`` is ``cat_bits[cat_bounds[b]:cat_bounds[b + 1]]`` (uint32 words);
  ``known[feature]`` is a bitset's index, or -1;
- ``values`` (float64, one row per node, ``width`` columns): what a leaf adds to its tree's outputs.

``trees`` (int64, one row per tree in the order their values are summed): the root, the steps
rows walk it in step (its depth; 0 when it has categorical or zero-missing nodes, which rows walk
one by one), the first output column its values add to, the index of its first word in a row's
bit vector when rows are scored in a batch (-1: it is walked), its first leaf, its words, and its
first word when a single row is scored (every tree the tables take is scored by bits then: a
single row's walk is a mispredicted branch a level). ``split_*`` and ``category_*``: the
splits of trees scored by bits (see ``_bit_splits``); ``word_*``: their numerical splits again by
word, for batches (see ``_word_splits``).

The kernels read a row as the library reads it (``Reading``: converted to float32 and checked
as scikit-learn's ``check_array`` does, or as float64; categories of some columns encoded as
positions among known numbers), then each output starts at ``initial`` and each tree, in order,
adds ``scale * value``; the outputs are then divided by ``divisor`` when it is not 0 and mapped
by ``link``, as LightGBM's ``ConvertOutput`` computes it. (``-0.0 + v`` is ``v`` for every ``v``:
a single tree's values come out as they are.) ``score_rows`` scores a batch: trees of at most
``WORDS_A_TREE`` words of leaves by bit vectors (QuickScorer; ``COLUMN_ROWS`` rows at a time, each
split applied to all of them in one vector loop) when the fitted costs say so, the others walked
in blocks of rows every tree walks in turn, ``LANES`` rows in step without branches; a batch is
split in ranges over ``workers``. ``_score_row`` scores a single row: every tree the tables take by
bits, the others walked turn by turn.
"""

import contextlib
import contextvars
import math
from typing import NamedTuple

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from willump.compile.forms import Unsupported
from willump.compile.jit import njit
from willump.compile.sorting import lexsorted

LEAF = -1
NODE_WORDS = 4  # int64 words a node takes (two nodes a cache line)
LOW_HALF = (1 << 32) - 1
MISSING_LEFT, CATEGORICAL, ZERO_MISSING = 1, 2, 4  # flags
SPECIAL = CATEGORICAL | ZERO_MISSING  # nodes walked one row at a time
ZERO = float(np.float32(1e-35))  # LightGBM's kZeroThreshold (a float literal widened to double)
FLOAT64, CHECKED_FLOAT32, FLOAT32, CAST_FLOAT32 = 0, 1, 2, 3  # how a row is read (``Reading.mode``)
# links: outputs as they are, LightGBM's sigmoid of each output (binary, multiclassova,
# cross_entropy), softmax, exp (poisson, gamma, tweedie), sign(x) * x * x (reg_sqrt), log1p(exp(x))
IDENTITY, SIGMOID, SOFTMAX, EXP, SIGNED_SQUARE, LOG1P_EXP = range(6)
# XGBoost's links, in float32 (its sums are float32 too: ``single``): common::Sigmoid, common::Softmax
# (a double sum of float32 terms), expf (count:poisson, reg:gamma, reg:tweedie)
SIGMOID32, SOFTMAX32, EXP32 = 6, 7, 8
ROWS_PER_BLOCK = 1024  # rows every tree walks in turn
BLOCK_BYTES = 1 << 18  # (fewer rows per block when they are wide)
COLUMN_ROWS = 64  # rows of a block when a batch scores trees by bits (``_leaf_bits_block``)
COLUMN_WIDTH = 2048  # (for rows of at most so many columns: a block's rows then take at most 1 MB)
LANES = 12  # rows walking a tree in step (``_walk_lanes`` writes them out; 8 measured 10% slower, 16 too)
PHASE = 8  # the steps rows walk a deep tree in step before the ones not at a leaf are gathered
WORD = 64  # bits a word of a row's bit vector holds
WORDS_A_TREE = 4  # the most words of a tree scored by bits
# a row's costs in a batch (ns, one core; fitted to 28 LightGBM and random forests of 8-255 leaves,
# depth 6-23 and 8-120 features, 10,000 rows, measured twice: the layout chosen by them was the
# faster in 53 of 56 measurements, at worst 10% slower): by bits, each split and each word of leaves;
# walked, each turn a row takes (``_preorders``) and each tree
SPLIT_NS, WORD_NS, LEVEL_NS, TREE_NS = 0.134, 1.22, 1.20, 3.55
CODES_A_BITSET = 1024  # the most categories a categorical split scored by bits lists
ALL_LEAVES = np.uint64(2 ** WORD - 1)
NODE_WORK_PER_TASK = 50_000  # rows x trees below which a part of a batch is not worth a thread
PARTS_A_WORKER = 4  # parts of a batch a worker scores (taken in turn: a slower core takes fewer)


class Tree(NamedTuple):
    """One tree as a reader gives it: nodes indexed within the tree, ``left == LEAF`` for a leaf
    (categorical nodes' ``threshold``: the index of their bitset in the whole forest)."""

    feature: np.ndarray
    left: np.ndarray
    right: np.ndarray
    flags: np.ndarray
    threshold: np.ndarray
    values: np.ndarray  # (nodes, width)
    column: int  # the output its first value adds to


class Trees(NamedTuple):
    """Trees one after the other, as ``Tree``'s arrays joined (children still indexed within their
    tree): tree ``t``'s nodes are ``starts[t]:starts[t + 1]``, its first value adds to ``columns[t]``."""

    feature: np.ndarray
    left: np.ndarray
    right: np.ndarray
    flags: np.ndarray
    threshold: np.ndarray
    values: np.ndarray
    starts: np.ndarray
    columns: np.ndarray


def stacked(trees: list) -> Trees:
    """The ``Trees`` of a list of ``Tree``."""
    starts = np.cumsum([0] + [len(tree.left) for tree in trees])
    return Trees(*(np.concatenate([getattr(tree, name) for tree in trees]) for name in Tree._fields[:-1]), starts,
                 np.array([tree.column for tree in trees], np.int64))


class Forest(NamedTuple):
    """The arrays of a tree ensemble (see the module's docstring), in the kernels' argument order."""

    nodes: np.ndarray
    thresholds: np.ndarray
    values: np.ndarray
    trees: np.ndarray
    cat_bounds: np.ndarray
    cat_bits: np.ndarray
    known: np.ndarray
    split_threshold: np.ndarray
    split_word: np.ndarray
    split_mask: np.ndarray
    split_bounds: np.ndarray
    category_lists: np.ndarray
    category_bounds: np.ndarray
    word_feature: np.ndarray
    word_threshold: np.ndarray
    word_mask: np.ndarray
    word_bounds: np.ndarray


# Trees renumbered (``_in_order``): nodes absolute, each tree's splits in preorder then its leaves
# left to right, a leaf's children itself; per tree its splits and depth, per node its tree.
_Ordered = NamedTuple("_Ordered", [(name, np.ndarray) for name in (*Trees._fields, "splits", "depths", "turns",
                                                                   "tree_of")])


def joined(trees: Trees, cat_bounds, cat_bits, known) -> Forest:
    """The forest of ``trees`` in order (renumbered by ``_in_order``); the splits of trees scored by
    bits (``_word_counts``) in the bit-vector tables. (Whole-forest array passes: about 0.06 s for
    10,000 trees of 31 leaves.)"""
    if trees.starts[-1] >= 2 ** 31:
        raise Unsupported("more nodes than 32-bit indices hold")
    cat_bounds, cat_bits = np.ascontiguousarray(cat_bounds, np.int64), np.ascontiguousarray(cat_bits, np.uint32)
    known = np.ascontiguousarray(known, np.int64)
    ordered = _in_order(trees)
    counts, batch_bits = _word_counts(ordered, cat_bounds, known)  # (0: walked)
    words = np.cumsum(counts) - counts  # each tree's first word
    row_words = np.where(counts > 0, words, -1)
    special = np.bincount(ordered.tree_of, (ordered.flags & SPECIAL) != 0, len(counts)) > 0
    table = np.column_stack([ordered.starts[:-1], np.where(special, 0, ordered.depths), ordered.columns,
                             row_words if batch_bits else np.full(len(counts), -1),
                             ordered.starts[:-1] + ordered.splits, counts, row_words])
    read = int(ordered.feature.max(initial=0)) + 1  # (the columns splits read)
    entries = _split_entries(ordered.left, ordered.right, ordered.starts, ordered.splits, np.asarray(words, np.int64),
                             np.asarray(counts, np.int64))
    splits = _bit_splits(ordered, entries, read, cat_bounds, cat_bits, known)
    nodes = _node_words(ordered)
    return Forest(nodes, nodes.view(np.float64), np.ascontiguousarray(ordered.values, np.float64),
                  np.ascontiguousarray(table, np.int64).reshape(-1, 7), cat_bounds, cat_bits, known, *splits,
                  *_word_splits(ordered, entries, int(np.sum(counts))))


def _node_words(ordered: _Ordered) -> np.ndarray:
    """The nodes as rows of ``NODE_WORDS`` int64 words (see the module's docstring)."""
    words = np.zeros((len(ordered.left), NODE_WORDS), np.int64)
    words[:, 0] = np.ascontiguousarray(ordered.threshold, np.float64).view(np.int64)
    words[:, 1] = ordered.left | (ordered.right << 32)
    words[:, 2] = ordered.feature | (ordered.flags.astype(np.int64) << 32)
    return words


def _word_counts(ordered: _Ordered, cat_bounds: np.ndarray, known: np.ndarray) -> tuple:
    """The words of each tree's bit vector (a bit per leaf; 0 for a tree always walked: one with a
    ``ZERO_MISSING`` node, a bitset of more than ``CODES_A_BITSET`` categories or more leaves than
    ``WORDS_A_TREE`` words hold), and whether batches score those trees by bits too (not when that
    would cost a row more than walking them in step, by the fitted costs ``*_NS``)."""
    leaves = np.diff(ordered.starts) - ordered.splits
    eligible = (leaves <= WORDS_A_TREE * WORD) & _bits_take(ordered, cat_bounds, known)
    counts = np.where(eligible, -(-leaves // WORD), 0)
    by_bits = SPLIT_NS * ordered.splits[eligible].sum() + WORD_NS * counts.sum()
    walked = LEVEL_NS * ordered.turns[eligible].sum() + TREE_NS * np.count_nonzero(eligible)
    return counts, bool(by_bits <= walked)


def _bits_take(ordered: _Ordered, cat_bounds: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Per tree, whether its nodes have bit-vector tables: no ``ZERO_MISSING`` node, categorical
    nodes' bitsets and their features' known categories of at most ``CODES_A_BITSET`` codes (a
    list of nodes per code)."""
    categorical = np.flatnonzero((ordered.flags & CATEGORICAL) != 0)
    own, of_feature = ordered.threshold[categorical].astype(np.int64), known[ordered.feature[categorical]]
    too_many = np.zeros(len(categorical), bool)
    for bitsets in (own, of_feature):
        present = bitsets >= 0
        too_many[present] |= (cat_bounds[bitsets[present] + 1] - cat_bounds[bitsets[present]]) * 32 > CODES_A_BITSET
    refused = ((ordered.flags & ZERO_MISSING) != 0).astype(np.int64)
    refused[categorical] += too_many
    return np.bincount(ordered.tree_of, refused, len(ordered.splits)) == 0


def _in_order(trees: Trees) -> _Ordered:
    """The trees renumbered: each one's splits in preorder, then its leaves left to right, nodes
    absolute (nodes its root does not reach, as pruned trees keep them, dropped)."""
    left, right = np.ascontiguousarray(trees.left, np.int64), np.ascontiguousarray(trees.right, np.int64)
    starts = np.ascontiguousarray(trees.starts, np.int64)
    order, splits, depths, turns = _preorders(left, right, starts)
    reached = order >= 0  # (each tree's nodes reached come first in its slots)
    sizes = np.bincount(np.repeat(np.arange(len(splits)), np.diff(starts)), reached, len(splits)).astype(np.int64)
    order = order[reached]
    new = np.empty(len(left), np.int64)
    new[order] = np.arange(len(order))
    tree_of = np.repeat(np.arange(len(splits)), sizes)
    old_starts = starts[tree_of]

    def renumbered(children):
        children = children[order]
        return np.where(children == LEAF, np.arange(len(order)), new[np.maximum(children, 0) + old_starts])

    return _Ordered(np.ascontiguousarray(trees.feature[order], np.int64), renumbered(left), renumbered(right),
                    trees.flags[order], trees.threshold[order], trees.values[order],
                    np.concatenate([[0], np.cumsum(sizes)]), trees.columns, splits, depths, turns, tree_of)


@njit
def _preorders(left, right, starts):
    """Per tree: its nodes reached from its first, as absolute indices (its splits in preorder,
    then its leaves left to right; -1 past the end for nodes never reached), its number of splits,
    its depth (the steps to its deepest leaf) and the turns a row walking it in a batch takes
    (``_walk``): its depth; past ``PHASE`` levels, the mean over its leaves of the phases' steps to
    reach them, as rows gathered between phases walk about their own path."""
    order = np.full(len(left), -1, np.int64)
    splits, depths = np.zeros(len(starts) - 1, np.int64), np.zeros(len(starts) - 1, np.int64)
    turns = np.zeros(len(starts) - 1, np.float64)
    most = 0
    for t in range(len(starts) - 1):
        most = max(most, starts[t + 1] - starts[t])
    leaves = np.empty(most, np.int64)
    stack, steps = np.empty(most + 1, np.int64), np.empty(most + 1, np.int64)
    for t in range(len(starts) - 1):
        first, n = starts[t], starts[t + 1] - starts[t]
        stack[0], steps[0], top, split, found = 0, 0, 1, 0, 0
        while top and split + found < n:
            top -= 1
            node, step = stack[top], steps[top]
            if left[first + node] == LEAF:
                leaves[found] = first + node
                found += 1
                depths[t] = max(depths[t], step)
                turns[t] += PHASE * -(-step // PHASE)  # (in phases, if the tree is deeper)
            else:
                order[first + split] = first + node
                split += 1
                stack[top], stack[top + 1] = right[first + node], left[first + node]  # (left first)
                steps[top], steps[top + 1] = step + 1, step + 1
                top += 2
        for k in range(found):  # (a loop: copying a slice compiles numba's shape-error messages, 2 s cold)
            order[first + split + k] = leaves[k]
        splits[t] = split
        turns[t] = depths[t] if depths[t] <= PHASE else turns[t] / max(found, 1)
    return order, splits, depths, turns


@njit
def _split_entries(left, right, starts, splits, first_words, counts):
    """(split, word, mask) of each word a split of a tree scored by bits (``counts`` > 0) clears
    leaves in: the leaves left of it (its left child's subtree, a run of leaf positions)."""
    low_leaf, stop_leaf = np.empty(len(left), np.int64), np.empty(len(left), np.int64)
    count = 0
    for t in range(len(splits)):
        if counts[t] == 0:
            continue
        leaves = starts[t] + splits[t]  # (its first leaf: nodes before it are splits)
        for node in range(starts[t], leaves):
            low, high = left[node], left[node]
            while low < leaves:
                low = left[low]
            while high < leaves:
                high = right[high]
            low_leaf[node], stop_leaf[node] = low - leaves, high - leaves + 1
            count += (stop_leaf[node] - 1) // WORD - low_leaf[node] // WORD + 1
    entries, words, masks = np.empty(count, np.int64), np.empty(count, np.int64), np.empty(count, np.uint64)
    e = 0
    for t in range(len(splits)):
        if counts[t] == 0:
            continue
        for node in range(starts[t], starts[t] + splits[t]):
            first, stop = low_leaf[node], stop_leaf[node]
            for w in range(first // WORD, (stop - 1) // WORD + 1):
                low, high = max(first, w * WORD) - w * WORD, min(stop, (w + 1) * WORD) - w * WORD
                cleared = ALL_LEAVES if high - low == WORD else ((np.uint64(1) << np.uint64(high - low)) - np.uint64(1)) << np.uint64(low)
                entries[e], words[e], masks[e] = node, first_words[t] + w, ~cleared
                e += 1
    return entries, words, masks


def _bit_splits(ordered: _Ordered, entries: tuple, width: int, cat_bounds, cat_bits, known) -> tuple:
    """The splits of the trees scored by bits (``entries``: ``_split_entries``' nodes, words and
    masks) as ``split_*`` and ``category_*`` tables, each split once for every word of its tree
    holding leaves left of it, with the word and the mask clearing their bits. Numerical splits by
    feature, in order of threshold (ties in order of tree), then the ones a NaN takes right
    (``split_bounds``: a feature's three bounds); after them, categorical splits listed by feature
    and category: for each of a feature's ``codes`` categories (row ``k`` of ``category_lists``: its
    first list and ``codes``), then for any other category, then for a value that is no category
    (NaN, negative, from 2**31), the splits it goes right at (``category_bounds``: a list's entries)."""
    nodes, words, masks = entries
    kinds = ordered.flags[nodes]
    plain = (kinds & CATEGORICAL) == 0
    nan_right = plain & ((kinds & MISSING_LEFT) == 0)
    keys = np.concatenate([ordered.feature[nodes[plain]] * 2, ordered.feature[nodes[nan_right]] * 2 + 1])
    thresholds = np.concatenate([ordered.threshold[nodes[plain]], ordered.threshold[nodes[nan_right]]])
    order = lexsorted(keys, thresholds)  # (stable: ties in order of tree)
    bounds = np.searchsorted(keys[order], np.arange(2 * width + 1))
    listed_words, listed_masks = [], []  # the categorical lists' entries, after the numerical splits'
    lists, list_bounds = np.full((width, 2), -1, np.int64), [len(keys)]
    for feature, listed in _categorical_entries(ordered, nodes[~plain], words[~plain], masks[~plain]):
        codes = _codes(ordered, listed, feature, cat_bounds, known)
        lists[feature] = len(list_bounds) - 1, codes
        for code in [*range(codes), codes, -1]:  # (its categories, any other, no category)
            for node, node_words, node_masks in listed:
                if _goes_right(ordered, node, feature, code, codes, cat_bounds, cat_bits, known):
                    listed_words += node_words
                    listed_masks += node_masks
            list_bounds.append(len(keys) + len(listed_words))
    return (np.concatenate([thresholds[order].astype(np.float64), np.full(len(listed_words), np.nan)]),
            np.concatenate([np.concatenate([words[plain], words[nan_right]])[order], listed_words]).astype(np.uint32),
            np.concatenate([np.concatenate([masks[plain], masks[nan_right]])[order], np.array(listed_masks, np.uint64)]),
            np.ascontiguousarray(bounds, np.int64), lists, np.array(list_bounds, np.int64))


def _word_splits(ordered: _Ordered, entries: tuple, n_words: int) -> tuple:
    """The numerical splits of ``entries`` (``_split_entries``': each split of a tree scored by bits
    once for every word of its tree holding leaves left of it) in order of word (``word_bounds``: a
    word's entries): ``word_feature`` (the feature, and ``1 << 32`` when a NaN goes right),
    ``word_threshold`` and ``word_mask``. A batch's block applies a word's splits one after the
    other while its 64 rows' words stay in the first-level cache (``_leaf_bits_block``)."""
    nodes, words, masks = entries
    kinds = ordered.flags[nodes]
    plain = (kinds & CATEGORICAL) == 0
    order = np.argsort(words[plain], kind="stable")
    nan_right = ((kinds[plain] & MISSING_LEFT) == 0).astype(np.int64) << 32
    feature = (ordered.feature[nodes[plain]].astype(np.int64) | nan_right)[order]
    bounds = np.searchsorted(words[plain][order], np.arange(n_words + 1))
    threshold = ordered.threshold[nodes[plain]][order]
    return (np.ascontiguousarray(feature, np.int64), np.ascontiguousarray(threshold, np.float64),
            np.ascontiguousarray(masks[plain][order], np.uint64), np.ascontiguousarray(bounds, np.int64))


def _categorical_entries(ordered: _Ordered, nodes, words, masks) -> list:
    """[(feature, [(node, its words, its masks)...])...] of the categorical splits' entries, by feature."""
    by_feature = {}
    for node in np.unique(nodes):
        at = nodes == node
        by_feature.setdefault(int(ordered.feature[node]), []).append((int(node), words[at].tolist(), masks[at].tolist()))
    return sorted(by_feature.items())


def _codes(ordered: _Ordered, listed: list, feature: int, cat_bounds, known) -> int:
    """The categories the bitsets of a feature's categorical nodes (and its known ones) hold bits for."""
    bitsets = [int(ordered.threshold[node]) for node, _, _ in listed] + ([int(known[feature])] if known[feature] >= 0 else [])
    return max(int(cat_bounds[b + 1] - cat_bounds[b]) * 32 for b in bitsets)


def _goes_right(ordered: _Ordered, node: int, feature: int, code: int, codes: int, cat_bounds, cat_bits, known) -> bool:
    """Whether category ``code`` (``codes``: any category past the bitsets; -1: no category) goes
    right at a categorical node, as ``_special_left`` decides."""
    missing_right = not ordered.flags[node] & MISSING_LEFT
    if code < 0:
        return missing_right
    if code < codes and _bit_set(cat_bounds, cat_bits, int(ordered.threshold[node]), code):
        return False
    if known[feature] < 0 or (code < codes and _bit_set(cat_bounds, cat_bits, int(known[feature]), code)):
        return True
    return missing_right


def _bit_set(cat_bounds, cat_bits, bitset: int, code: int) -> bool:
    first, stop = int(cat_bounds[bitset]), int(cat_bounds[bitset + 1])
    return code // 32 < stop - first and bool((int(cat_bits[first + code // 32]) >> (code % 32)) & 1)


class Reading(NamedTuple):
    """How the kernels read an input row: ``mode`` ``CHECKED_FLOAT32``: values converted to
    float32, as ``check_array(dtype=float32)`` makes them (NaN refused unless ``allow_nan``;
    infinity refused); ``FLOAT32``: converted to float32, anything allowed (XGBoost's DMatrix);
    ``CAST_FLOAT32``: converted to float32, NaN and infinity allowed, a finite value float32 cannot
    hold refused (``check_array(dtype=float32, ensure_all_finite=False)``: numpy warns of it);
    ``FLOAT64``: as float64, anything allowed. ``encoding``: rows (column, first, stop): the column
    holds a category, read as its position among ``categories[first:stop]`` (sorted), NaN when
    it is not there (infinity refused)."""

    mode: int
    allow_nan: bool
    encoding: np.ndarray
    categories: np.ndarray


def plain_reading(mode: int = FLOAT64, allow_nan: bool = True) -> Reading:
    return Reading(int(mode), bool(allow_nan), np.zeros((0, 3), np.int64), np.zeros(0))


@njit
def _read(X, first, stop, rows, mode, allow_nan, encoding, categories):
    """Rows ``first:stop`` of ``X`` into ``rows`` as the library reads them; -1, or the first row
    holding a value it refuses. (A block at a time: arrays passed to a call cost reference counting.)"""
    width = X.shape[1]
    for i in range(first, stop):
        r = i - first
        if mode != FLOAT64:
            for j in range(width):
                rows[r, j] = np.float64(np.float32(X[i, j]))
        if mode == CHECKED_FLOAT32:
            for j in range(width):
                value = rows[r, j]
                if value - value != 0.0 and (np.isinf(value) or not allow_nan):  # (NaN or infinity)
                    return i
        if mode == CAST_FLOAT32:
            for j in range(width):
                if np.isinf(rows[r, j]) and not np.isinf(X[i, j]):
                    return i
        if mode == FLOAT64:
            for j in range(width):
                rows[r, j] = np.float64(X[i, j])
        for e in range(len(encoding)):  # a category: its position among the sorted known ones, or NaN
            column, low, high = encoding[e, 0], encoding[e, 1], encoding[e, 2]
            value = rows[r, column]
            if np.isinf(value):
                return i  # (scikit-learn's OrdinalEncoder raises)
            while low < high:
                middle = (low + high) // 2
                if categories[middle] < value:
                    low = middle + 1
                else:
                    high = middle
            found = low < encoding[e, 2] and categories[low] == value
            rows[r, column] = np.float64(low - encoding[e, 1]) if found else np.nan
    return -1


@njit
def _has_nan(rows, n):
    """Whether the first ``n`` of ``rows`` hold a NaN (if not, walks skip the missing-value turns)."""
    for r in range(n):
        for j in range(rows.shape[1]):
            if np.isnan(rows[r, j]):
                return True
    return False


@njit(inline="always")
def _in_bitset(cat_bounds, cat_bits, bitset, code):
    first, stop = cat_bounds[bitset], cat_bounds[bitset + 1]
    word = code >> 5
    return word < stop - first and ((cat_bits[first + word] >> np.uint32(code & 31)) & np.uint32(1)) != 0


@njit
def _special_left(flags, threshold, value, feature, cat_bounds, cat_bits, known):
    """Whether a value goes left at a categorical or ``ZERO_MISSING`` node (a call: the loop over
    plain nodes stays small)."""
    if flags & CATEGORICAL:
        if -1.0 < value < 2147483648.0:  # (not NaN; its integer part a category)
            code = np.int64(value)
            if _in_bitset(cat_bounds, cat_bits, np.int64(threshold), code):
                return True
            bitset = known[feature]
            if bitset < 0 or _in_bitset(cat_bounds, cat_bits, bitset, code):
                return False
        return (flags & MISSING_LEFT) != 0
    if np.isnan(value) or -ZERO <= value <= ZERO:
        return (flags & MISSING_LEFT) != 0
    return value <= threshold


@njit
def _finish(out, first, stop, divisor, link, sigmoid):
    """Rows ``first:stop`` of ``out`` (summed outputs) divided and mapped by the link, as LightGBM does."""
    n = out.shape[1]
    for i in range(first, stop):
        if divisor != 0.0:
            for k in range(n):
                out[i, k] /= divisor
        if link == SIGMOID:
            for k in range(n):
                out[i, k] = 1.0 / (1.0 + math.exp(-sigmoid * out[i, k]))
        elif link == SOFTMAX:
            largest = out[i, 0]
            for k in range(1, n):
                if not out[i, k] < largest:  # (std::max(out[k], largest))
                    largest = out[i, k]
            total = 0.0
            for k in range(n):
                out[i, k] = math.exp(out[i, k] - largest)
                total += out[i, k]
            for k in range(n):
                out[i, k] /= total
        elif link == EXP:
            for k in range(n):
                out[i, k] = math.exp(out[i, k])
        elif link == SIGNED_SQUARE:
            for k in range(n):
                x = out[i, k]
                out[i, k] = float((x > 0.0) - (x < 0.0)) * x * x
        elif link == LOG1P_EXP:
            for k in range(n):
                out[i, k] = math.log1p(math.exp(out[i, k]))
        elif link == SIGMOID32:
            for k in range(n):
                out[i, k] = _sigmoid32(np.float32(out[i, k]))
        elif link == SOFTMAX32:
            _softmax32(out[i])
        elif link == EXP32:
            for k in range(n):
                out[i, k] = np.float64(np.float32(math.exp(np.float32(out[i, k]))))


@njit(inline="always")
def _sigmoid32(x):
    """XGBoost's ``common::Sigmoid(float)``: every step in float32 (``expf``)."""
    x = min(-x, np.float32(88.7))
    denom = np.float32(np.float32(math.exp(x)) + np.float32(1.0)) + np.float32(1e-16)
    return np.float64(np.float32(np.float32(1.0) / np.float32(denom)))


@njit(inline="always")
def _softmax32(outputs):
    """XGBoost's ``common::Softmax`` of float32 outputs, in place: ``expf`` of each less the largest,
    divided by their sum taken in double and rounded to float32."""
    largest = np.float32(outputs[0])
    for k in range(1, len(outputs)):
        largest = max(np.float32(outputs[k]), largest)
    total = 0.0
    for k in range(len(outputs)):
        outputs[k] = np.float64(np.float32(math.exp(np.float32(np.float32(outputs[k]) - largest))))
        total += outputs[k]
    for k in range(len(outputs)):
        outputs[k] = np.float64(np.float32(np.float32(outputs[k]) / np.float32(total)))


@njit(inline="always")
def _add(sums, column, r, value, single):
    """``sums[column, r] += value``, rounded to float32 when ``single`` (a library summing in float32)."""
    total = sums[column, r] + value
    sums[column, r] = np.float64(np.float32(total)) if single else total


@njit(inline="always")
def _child(nodes, node, right):
    """The node's left child (``right`` 0) or right child (1)."""
    return (nodes[node, 1] >> (right << 5)) & LOW_HALF


@njit(inline="always")
def _turn(rows, r, node, nodes, thresholds, nan):
    """The node row ``r`` of ``rows`` goes to from a plain ``node`` (from a leaf: the leaf), without a
    branch (``nan``: whether the row may hold a NaN, which goes the node's missing way)."""
    at = np.uint64(node)  # (numba does not check an unsigned index for a negative: 1.25x)
    word = nodes[at, 2]
    value = rows[np.uint64(r), np.uint64(word & LOW_HALF)]
    to_left = value <= thresholds[at, 0]
    if nan:
        to_left |= np.isnan(value) & (((word >> 32) & MISSING_LEFT) != 0)
    return (nodes[at, 1] >> (np.int64(not to_left) << 5)) & LOW_HALF


@njit
def _walk(rows, size, root, depth, first_leaf, nodes, thresholds, pending, node_of, nan):
    """Into ``node_of``, the leaf each of the first ``size`` rows of ``rows`` reaches in a tree of
    ``depth`` levels without special nodes (its leaves: its nodes from ``first_leaf`` on). The rows
    walk ``LANES`` at a time in step (``_walk_lanes``): all of them the tree's depth when it has at
    most ``PHASE`` levels; in a deeper tree, ``PHASE`` steps at a time, the rows not at a leaf yet
    gathered between phases (``pending``), so that a row walks about its own path, not the deepest
    one (``nan``: whether the rows may hold a NaN)."""
    for r in range(size):
        pending[r], node_of[r] = r, root
    count, steps = size, min(depth, PHASE)
    while count:
        for first in range(0, count, LANES):
            if nan:
                _walk_lanes(rows, pending, first, count, steps, nodes, thresholds, node_of, True)
            else:
                _walk_lanes(rows, pending, first, count, steps, nodes, thresholds, node_of, False)
        kept = 0
        for p in range(count):  # (without a branch)
            r = pending[p]
            pending[kept] = r
            kept += node_of[r] < first_leaf
        count = kept


@njit(inline="always")
def _walk_lanes(rows, pending, first, count, steps, nodes, thresholds, node_of, nan):
    """Rows ``pending[first:first + LANES]`` of ``rows`` (lanes past ``count`` walk the last one
    again) take ``steps`` turns each from their node in ``node_of`` (at a leaf, a row stays there;
    ``nan``: whether the rows may hold a NaN, a constant at each call so that rows without one skip
    its test: 20% faster). Written out lane by lane so that each lane's node stays in a register and
    the lanes' turns overlap in the processor (a loop over an array of lanes stores and reloads them
    every turn: 1.7x slower)."""
    last = count - 1
    r0, r1, r2, r3 = _lane_row(pending, first, last), _lane_row(pending, first + 1, last), \
        _lane_row(pending, first + 2, last), _lane_row(pending, first + 3, last)
    r4, r5, r6, r7 = _lane_row(pending, first + 4, last), _lane_row(pending, first + 5, last), \
        _lane_row(pending, first + 6, last), _lane_row(pending, first + 7, last)
    r8, r9, r10, r11 = _lane_row(pending, first + 8, last), _lane_row(pending, first + 9, last), \
        _lane_row(pending, first + 10, last), _lane_row(pending, first + 11, last)
    n0, n1, n2, n3, n4, n5 = node_of[r0], node_of[r1], node_of[r2], node_of[r3], node_of[r4], node_of[r5]
    n6, n7, n8, n9, n10, n11 = node_of[r6], node_of[r7], node_of[r8], node_of[r9], node_of[r10], node_of[r11]
    for _ in range(steps):
        n0 = _turn(rows, r0, n0, nodes, thresholds, nan)
        n1 = _turn(rows, r1, n1, nodes, thresholds, nan)
        n2 = _turn(rows, r2, n2, nodes, thresholds, nan)
        n3 = _turn(rows, r3, n3, nodes, thresholds, nan)
        n4 = _turn(rows, r4, n4, nodes, thresholds, nan)
        n5 = _turn(rows, r5, n5, nodes, thresholds, nan)
        n6 = _turn(rows, r6, n6, nodes, thresholds, nan)
        n7 = _turn(rows, r7, n7, nodes, thresholds, nan)
        n8 = _turn(rows, r8, n8, nodes, thresholds, nan)
        n9 = _turn(rows, r9, n9, nodes, thresholds, nan)
        n10 = _turn(rows, r10, n10, nodes, thresholds, nan)
        n11 = _turn(rows, r11, n11, nodes, thresholds, nan)
    node_of[r0], node_of[r1], node_of[r2], node_of[r3] = n0, n1, n2, n3
    node_of[r4], node_of[r5], node_of[r6], node_of[r7] = n4, n5, n6, n7
    node_of[r8], node_of[r9], node_of[r10], node_of[r11] = n8, n9, n10, n11


@njit(inline="always")
def _lane_row(pending, lane, last):
    """The row lane ``lane`` walks (past ``last``, the last one's), unsigned like the indices it makes."""
    return np.uint64(pending[np.uint64(min(lane, last))])


@njit
def _leaf_bits(rows, r, bits, split_threshold, split_word, split_mask, split_bounds, category_lists, category_bounds):
    """Into ``bits`` (a word per tree scored by bits), the leaves row ``r`` of ``rows`` may still
    reach once every split it does not go left at has cleared the leaves left of it (a
    feature's splits in order of threshold: the ones below its value; of a NaN, the listed ones).
    (The tables are indexed by unsigned numbers, which numba does not check for a negative: 1.4x
    faster on the large credit model, 18,000 splits a row; the loops are written out: through an
    inlined function they measured 20% slower.)"""
    for w in range(len(bits)):
        bits[w] = ALL_LEAVES
    for k in range((len(split_bounds) - 1) // 2):
        first, stop = split_bounds[2 * k], split_bounds[2 * k + 1]
        if first == split_bounds[2 * k + 2]:
            continue  # (no split reads the feature)
        value = rows[r, k]
        if np.isnan(value):
            for j in range(stop, split_bounds[2 * k + 2]):
                at = np.uint64(j)
                bits[split_word[at]] &= split_mask[at]
            continue
        for j in range(first, _below(split_threshold, first, stop, value)):
            at = np.uint64(j)
            bits[split_word[at]] &= split_mask[at]
    for k in range(len(category_lists)):
        if category_lists[k, 0] >= 0:
            which = _category_list(category_lists, k, rows[r, k])
            for j in range(category_bounds[which], category_bounds[which + 1]):
                at = np.uint64(j)
                bits[split_word[at]] &= split_mask[at]


@njit(inline="always")
def _category_list(category_lists, k, value):
    """The list of categorical splits a value of feature ``k`` goes right at (its integer part a
    category, as ``_special_left`` reads it; else the list of no category)."""
    first, codes = category_lists[k, 0], category_lists[k, 1]
    if -1.0 < value < 2147483648.0:
        return first + min(np.int64(value), codes)
    return first + codes + 1


@njit
def _leaf_bits_block(rows, words, word_feature, word_threshold, word_mask, word_bounds, split_word, split_mask,
                     category_lists, category_bounds):
    """``_leaf_bits`` of the ``COLUMN_ROWS`` rows of ``rows`` at once into the columns of ``words``
    (a row's words in its column): word by word, each of its numerical splits (``_word_splits``)
    applied to the 64 rows in one loop without branches, which LLVM turns into vector instructions,
    reading the rows' values by feature (``columns``), the word's row and the values staying in the
    first-level cache: 2-4x faster than row by row on the music, credit and tracking models, 1.8x
    faster than the splits taken by feature on a random forest of 133-leaf trees."""
    columns = np.empty((len(category_lists), COLUMN_ROWS), np.float64)
    for k in range(len(columns)):
        for r in range(COLUMN_ROWS):
            columns[k, r] = rows[r, k]
    for w in range(len(words)):
        row_words = words[w]
        row_words[:] = ALL_LEAVES
        for j in range(word_bounds[w], word_bounds[w + 1]):
            values, threshold, mask = columns[word_feature[j] & LOW_HALF], word_threshold[j], word_mask[j]
            if word_feature[j] >> 32:  # (a NaN goes right: it clears the leaves left of the split too)
                for r in range(COLUMN_ROWS):
                    row_words[r] &= ALL_LEAVES if values[r] <= threshold else mask
            else:
                for r in range(COLUMN_ROWS):
                    row_words[r] &= mask if threshold < values[r] else ALL_LEAVES
    for k in range(len(category_lists)):
        if category_lists[k, 0] >= 0:
            for r in range(COLUMN_ROWS):
                which = _category_list(category_lists, k, rows[r, k])
                for j in range(category_bounds[which], category_bounds[which + 1]):
                    words[split_word[j], r] &= split_mask[j]


@njit(inline="always")
def _exit_leaves(words, word, count, first_leaf, size, leaves):
    """Into ``leaves``, the exit leaf of each of ``size`` rows (columns of ``words``) of a tree whose
    ``count`` words start at ``word``: the first leaf still set, found without branches."""
    found = words[word]
    for r in range(size):
        leaves[r] = first_leaf + trailing_zeros(found[r]) if found[r] != 0 else -1
    for w in range(1, count):
        found = words[word + w]
        for r in range(size):
            here = first_leaf + w * WORD + trailing_zeros(found[r])
            leaves[r] = here if leaves[r] < 0 and found[r] != 0 else leaves[r]


@njit(inline="always")
def _below(thresholds, first, stop, value):
    """The end of the run of ``thresholds[first:stop]`` (ascending) below ``value`` (a binary search;
    counting them instead measured 10% slower on the music, credit and tracking models)."""
    low, high = first, stop
    while low < high:
        middle = (low + high) >> 1
        if thresholds[middle] < value:
            low = middle + 1
        else:
            high = middle
    return low


@njit
def score_rows(X, start, stop, mode, allow_nan, encoding, categories, nodes, thresholds, values, trees,
               cat_bounds, cat_bits, known, split_threshold, split_word, split_mask, split_bounds, category_lists,
               category_bounds, word_feature, word_threshold, word_mask, word_bounds, initial, scale, single,
               divisor, link, sigmoid, out):
    """The outputs of rows ``start:stop`` of ``X`` into the same rows of ``out``; -1, or the first
    row holding a value the library refuses.

    Rows are taken in blocks. A tree of at most ``WORDS_A_TREE`` words of leaves without special
    nodes is scored as QuickScorer does (Lucchese et al.): its leaf is the first still set in the
    row's words (see ``_leaf_bits``; in a batch, blocks of ``COLUMN_ROWS`` rows and
    ``_leaf_bits_block``), no walk and no branch on the path. Every other tree walks the block in turn
    (its nodes stay in cache), ``LANES`` rows at a time in step without branches (``_walk``): their
    paths overlap in the processor instead of each mispredicted turn stalling it; trees with special
    nodes row by row. Each row sums the trees in order. (A single row: ``_score_row``.)"""
    width = X.shape[1]
    n_words, walked_in_step = 0, False
    for t in range(len(trees)):
        if trees[t, 3] >= 0:
            n_words = max(n_words, trees[t, 3] + trees[t, 5])
        elif trees[t, 1]:
            walked_in_step = True
    by_columns = n_words > 0 and width <= COLUMN_WIDTH  # (the bits in blocks of 64 rows)
    per_block = COLUMN_ROWS if by_columns else max(1, min(ROWS_PER_BLOCK, BLOCK_BYTES // (8 * max(width, 1))))
    rows = np.empty((min(per_block, stop - start), width), np.float64)
    words = np.empty((n_words, len(rows)), np.uint64)  # (by column: a row's words in its column)
    row_bits = np.empty(n_words, np.uint64)  # (a row's words, when not a full block of columns)
    sums = np.empty((len(initial), len(rows)), np.float64)  # (by column: a row's outputs in its column)
    leaves = np.empty(len(rows), np.int64)  # (a tree's exit leaf of each row of a block)
    pending = np.empty(len(rows), np.int64)  # (the rows of a block not at a leaf yet)
    n_values = values.shape[1]
    for block in range(start, stop, per_block):
        end = min(block + per_block, stop)
        size = end - block
        refused = _read(X, block, end, rows, mode, allow_nan, encoding, categories)
        if refused >= 0:
            return refused
        nan = walked_in_step and _has_nan(rows, size)  # (only walks in step read it)
        for k in range(len(initial)):
            sums[k, :size] = initial[k]
        if by_columns and size == COLUMN_ROWS:
            _leaf_bits_block(rows, words, word_feature, word_threshold, word_mask, word_bounds, split_word, split_mask,
                             category_lists, category_bounds)
        elif n_words:
            for r in range(size):
                _leaf_bits(rows, r, row_bits, split_threshold, split_word, split_mask, split_bounds, category_lists,
                           category_bounds)
                for w in range(len(row_bits)):
                    words[w, r] = row_bits[w]
        for t in range(len(trees)):
            root, column, word = trees[t, 0], trees[t, 2], trees[t, 3]
            if word >= 0:  # (the rows' leaves in loops LLVM makes vector instructions of)
                _exit_leaves(words, word, trees[t, 5], trees[t, 4], size, leaves)
            elif trees[t, 1]:  # (a tree without special nodes: the rows walk it in step)
                _walk(rows, size, root, trees[t, 1], trees[t, 4], nodes, thresholds, pending, leaves, nan)
            else:
                for r in range(size):
                    leaves[r] = _walked_on(rows, r, root, nodes, thresholds, cat_bounds, cat_bits, known)
            for k in range(n_values):
                for r in range(size):
                    _add(sums, column + k, r, scale * values[np.uint64(leaves[r]), k], single)  # (unsigned: 2-6%)
        for r in range(size):
            for k in range(len(initial)):
                out[block + r, k] = sums[k, r]
        _finish(out, block, end, divisor, link, sigmoid)
    return -1


@njit
def _score_row(X, i, blob, raw, out):
    """``score_rows`` of row ``i`` of ``X`` alone, of ``packed``'s arrays: every tree the tables take
    by its first leaf still set in the row's words (a walk would mispredict a branch a level), the
    others walked turn by turn. (Apart from the batch's blocks and called with the buffer: 0.5 us
    faster a row on 100 trees, 4 us on 1,000.)"""
    settings, (divisor, link, sigmoid) = _float64s(blob, SETTINGS), _finishing(blob, raw)
    mode, allow_nan, scale, single = np.int64(settings[0]), settings[1] != 0.0, settings[2], settings[3] != 0.0
    nodes, thresholds, values, trees = (_int64_rows(blob, NODES), _float64_rows(blob, NODES),
                                        _float64_rows(blob, VALUES), _int64_rows(blob, TREES))
    cat_bounds, cat_bits, known = _int64s(blob, CAT_BOUNDS), _uint32s(blob, CAT_BITS), _int64s(blob, KNOWN)
    initial = _float64s(blob, INITIAL)
    rows = np.empty((1, X.shape[1]), np.float64)
    refused = _read(X, i, i + 1, rows, mode, allow_nan, _int64_rows(blob, ENCODING), _float64s(blob, CATEGORIES))
    if refused >= 0:
        return refused
    bits = np.empty(np.int64(settings[7]), np.uint64)
    _leaf_bits(rows, 0, bits, _float64s(blob, SPLIT_THRESHOLD), _uint32s(blob, SPLIT_WORD), _uint64s(blob, SPLIT_MASK),
               _int64s(blob, SPLIT_BOUNDS), _int64_rows(blob, CATEGORY_LISTS), _int64s(blob, CATEGORY_BOUNDS))
    sums = np.empty((len(initial), 1), np.float64)
    for k in range(len(initial)):
        sums[k, 0] = initial[k]
    for t in range(len(trees)):
        word, count = trees[t, 6], trees[t, 5]
        if word < 0:
            leaf = _walked_on(rows, 0, trees[t, 0], nodes, thresholds, cat_bounds, cat_bits, known)
        else:
            w = word
            while w < word + count - 1 and bits[w] == 0:  # (its leaf is in the first word not cleared)
                w += 1
            leaf = trees[t, 4] + (w - word) * WORD + trailing_zeros(bits[w])
        for k in range(values.shape[1]):
            _add(sums, trees[t, 2] + k, 0, scale * values[leaf, k], single)
    for k in range(len(initial)):
        out[i, k] = sums[k, 0]
    _finish(out, i, i + 1, divisor, link, sigmoid)
    return -1


@njit(inline="always")
def _walked_on(rows, r, node, nodes, thresholds, cat_bounds, cat_bits, known):
    """The leaf row ``r`` of ``rows`` reaches from ``node``, turn by turn (special nodes too)."""
    while _child(nodes, node, 0) != node:
        feature, kind = nodes[node, 2] & LOW_HALF, nodes[node, 2] >> 32
        value = rows[r, feature]
        if kind & SPECIAL:
            to_left = _special_left(kind, thresholds[node, 0], value, feature, cat_bounds, cat_bits, known)
        elif value <= thresholds[node, 0]:
            to_left = True
        else:  # (NaN compares False: checked only then)
            to_left = np.isnan(value) and (kind & MISSING_LEFT) != 0
        node = _child(nodes, node, np.int64(not to_left))
    return node


# ``score_packed``'s arrays: the ``Reading``'s and the ``Forest``'s (``thresholds`` is ``nodes``), then
# ``initial`` and the settings (mode, allow_nan, scale, single, divisor, link, sigmoid, the words of a
# single row's bit vector) as float64
ENCODING, CATEGORIES, NODES, VALUES, TREES, CAT_BOUNDS, CAT_BITS, KNOWN, SPLIT_THRESHOLD, SPLIT_WORD, SPLIT_MASK, \
    SPLIT_BOUNDS, CATEGORY_LISTS, CATEGORY_BOUNDS, WORD_FEATURE, WORD_THRESHOLD, WORD_MASK, WORD_BOUNDS, INITIAL, \
    SETTINGS = range(20)
PACKED_LAYOUT = 1  # (of ``packed`` and ``Ensemble``'s attributes: raise it when they change; saved functions carry them)
PACKED_TYPES = (np.int64, np.float64, np.int64, np.float64, np.int64, np.int64, np.uint32, np.int64, np.float64,
                np.uint32, np.uint64, np.int64, np.int64, np.int64, np.int64, np.float64, np.uint64, np.int64,
                np.float64, np.float64)


def packed(arrays: list) -> np.ndarray:
    """``arrays`` in one int64 buffer, after a header of (offset, rows, columns) each (columns 1: one
    dimension); each starts at a word. (A kernel's call takes ~50 ns an argument: 27 cost 1.4 us.)"""
    header = 3 * len(arrays)
    parts, offsets, at = [], [], header
    for array in arrays:
        words = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        words = np.concatenate([words, np.zeros(-len(words) % 8, np.uint8)]).view(np.int64)
        parts.append(words)
        offsets.append((at, array.shape[0], array.shape[1] if array.ndim == 2 else 1))
        at += len(words)
    return np.concatenate([np.array(offsets, np.int64).reshape(-1), *parts])


_FOREST_ARRAYS = (NODES, *range(VALUES, WORD_BOUNDS + 1))  # (``Forest``'s, but ``thresholds``: ``nodes`` again)


def _view_of(blob: np.ndarray, k: int, shape: tuple) -> np.ndarray:
    """``packed``'s array ``k`` of ``shape`` (the array's it was packed from): the buffer's memory."""
    kind = np.dtype(PACKED_TYPES[k])
    return blob[int(blob[3 * k]):].view(np.uint8)[:math.prod(shape) * kind.itemsize].view(kind).reshape(shape)


@njit(inline="always")
def _words(blob, k):
    """The words of ``packed``'s array ``k`` and its shape (rows, columns)."""
    at, rows, columns = blob[3 * k], blob[3 * k + 1], blob[3 * k + 2]
    return blob[at:], rows, columns


@njit(inline="always")
def _int64s(blob, k):
    words, rows, columns = _words(blob, k)
    return words[:rows * columns]


@njit(inline="always")
def _int64_rows(blob, k):
    words, rows, columns = _words(blob, k)
    return words[:rows * columns].reshape((rows, columns))


@njit(inline="always")
def _float64s(blob, k):
    words, rows, columns = _words(blob, k)
    return words[:rows * columns].view(np.float64)


@njit(inline="always")
def _float64_rows(blob, k):
    words, rows, columns = _words(blob, k)
    return words[:rows * columns].view(np.float64).reshape((rows, columns))


@njit(inline="always")
def _uint32s(blob, k):
    words, rows, _ = _words(blob, k)
    return words[:(rows + 1) // 2].view(np.uint32)[:rows]


@njit(inline="always")
def _uint64s(blob, k):
    words, rows, _ = _words(blob, k)
    return words[:rows].view(np.uint64)


@njit(inline="always")
def _finishing(blob, raw):
    """(divisor, link, sigmoid) of ``packed``'s settings (``raw``: the sums as they are)."""
    settings = _float64s(blob, SETTINGS)
    return (0.0, IDENTITY, 1.0) if raw else (settings[4], np.int64(settings[5]), settings[6])


@njit
def score_packed(X, start, stop, blob, raw, out):
    """``score_rows`` of ``packed``'s arrays (``raw``: the sums, not divided or linked). (Apart from
    ``_score_row``: a process scoring only single rows, or only batches, compiles only its kernel, 5-7 s
    of numba's 12 s on a cold cache.)"""
    settings, (divisor, link, sigmoid) = _float64s(blob, SETTINGS), _finishing(blob, raw)
    return score_rows(X, start, stop, np.int64(settings[0]), settings[1] != 0.0, _int64_rows(blob, ENCODING),
                      _float64s(blob, CATEGORIES), _int64_rows(blob, NODES), _float64_rows(blob, NODES),
                      _float64_rows(blob, VALUES), _int64_rows(blob, TREES), _int64s(blob, CAT_BOUNDS),
                      _uint32s(blob, CAT_BITS), _int64s(blob, KNOWN), _float64s(blob, SPLIT_THRESHOLD),
                      _uint32s(blob, SPLIT_WORD), _uint64s(blob, SPLIT_MASK), _int64s(blob, SPLIT_BOUNDS),
                      _int64_rows(blob, CATEGORY_LISTS), _int64s(blob, CATEGORY_BOUNDS), _int64s(blob, WORD_FEATURE),
                      _float64s(blob, WORD_THRESHOLD), _uint64s(blob, WORD_MASK), _int64s(blob, WORD_BOUNDS),
                      _float64s(blob, INITIAL), settings[2], settings[3] != 0.0, divisor, link, sigmoid, out)


class Ensemble:
    """A forest, how its rows are read and how its outputs are summed and finished: the outputs
    (float64, shape (rows, outputs)) of a matrix's rows, the library's to the bit."""

    def __init__(self, forest: Forest, reading: Reading, n_features: int, initial, scale: float = 1.0,
                 divisor: float = 0.0, link: int = IDENTITY, sigmoid: float = 1.0, single: bool = False):
        initial = np.ascontiguousarray(initial, np.float64)
        self.n_features, self.n_outputs = n_features, len(initial)
        self.minimum_rows = max(1, NODE_WORK_PER_TASK // max(len(forest.trees), 1))  # rows per part of a batch
        row_words = max(int((forest.trees[:, 6] + forest.trees[:, 5]).max(initial=0)), 0)  # (a single row's bits)
        settings = np.array([reading.mode, reading.allow_nan, scale, single, divisor, link, sigmoid, row_words],
                            np.float64)
        arrays = (reading.encoding, reading.categories, forest.nodes, *forest[2:], initial, settings)
        arrays = [np.ascontiguousarray(array, kind) for array, kind in zip(arrays, PACKED_TYPES)]
        self._blob = packed(arrays)
        self._shapes = {k: arrays[k].shape for k in _FOREST_ARRAYS}
        self.forest = self._forest()

    def _forest(self) -> Forest:
        """The forest's arrays: views of the buffer, not copies."""
        nodes = _view_of(self._blob, NODES, self._shapes[NODES])
        return Forest(nodes, nodes.view(np.float64), *(_view_of(self._blob, k, self._shapes[k])
                                                       for k in _FOREST_ARRAYS[1:]))

    def __getstate__(self) -> dict:
        """The buffer alone: the forest's arrays are its views (pickled, they would be copies beside it)."""
        return {**self.__dict__, "forest": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.forest = self._forest()

    def _readable(self, X: np.ndarray) -> np.ndarray:
        """``X`` as the kernels read it, or a ValueError saying what it should be."""
        if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.shape[1] == self.n_features and X.dtype.kind in "iuf"):
            raise ValueError(f"expected a matrix of numbers with {self.n_features} columns; got "
                             f"{getattr(X, 'dtype', type(X).__name__)} of shape {getattr(X, 'shape', None)}")
        return X.astype(np.float32) if X.dtype == np.float16 else X  # (each library reads these as float32 or 64)

    def predict(self, X: np.ndarray, workers=None, raw: bool = False) -> np.ndarray:
        """The outputs of the rows of a matrix, shape (rows, outputs), a batch in parts over ``workers``
        when it is large enough (``raw``: the sums, not divided or linked)."""
        X = self._readable(X)
        n = len(X)
        out = np.empty((n, self.n_outputs))
        blob, raw = self._blob, bool(raw)
        if n == 1:
            refused = _score_row(X, 0, blob, raw, out)
        elif n < 2 * self.minimum_rows or workers is None or workers.count == 1:
            refused = score_packed(X, 0, n, blob, raw, out)
        else:
            parts = workers.split(n, self.minimum_rows, PARTS_A_WORKER)
            refused = max(workers.map(lambda rows: score_packed(X, rows.start, rows.stop, blob, raw, out), parts))
        if refused >= 0:
            raise _refused()
        return out


KEPT_ENSEMBLES = 4  # the ensembles of calls' other iterations a kernel keeps


def kept_ensemble(kept: dict, key, build):
    """``kept[key]``, built by ``build()`` the first time it is asked for and kept among a few (all
    dropped once ``KEPT_ENSEMBLES`` are kept: calls ask for one or two other iterations, not many)."""
    ensemble = kept.get(key)
    if ensemble is None:
        if len(kept) >= KEPT_ENSEMBLES:
            kept.clear()
        ensemble = kept[key] = build()
    return ensemble


# An optimized function is set up within ``shared_builds``: the kernels of its call sites that read
# one model (a call and the fallback that repeats it) build its ensemble once, and a saved
# function's ensembles (``carried``) are not built again. Outside one set-up nothing is shared: a
# model changed where no kernel sees it (LightGBM's ``set_leaf_output``) is read again by the next
# decoration.
_SHARED_BUILDS: contextvars.ContextVar = contextvars.ContextVar("willump_shared_builds", default=None)


@contextlib.contextmanager
def shared_builds(carried=()):
    """Within it, ``built_once`` builds what one model gives under one key once; ``carried``:
    (model, key, ensemble) built before (a saved function's, each valid for the model as it is)."""
    token = _SHARED_BUILDS.set({(id(owner), key): (owner, built) for owner, key, built in carried})
    try:
        yield
    finally:
        _SHARED_BUILDS.reset(token)


def built_once(owner, key, build):
    """``build()`` (an ensemble of ``owner``, or the Unsupported saying why there is none), or what
    it gave for this model and key before, within one ``shared_builds``."""
    builds = _SHARED_BUILDS.get()
    if builds is None:
        return build()
    found = builds.get((id(owner), key))
    if found is not None and found[0] is owner:
        return found[1]
    built = build()
    builds[(id(owner), key)] = (owner, built)
    return built


def _refused() -> Unsupported:
    return Unsupported("a value the library refuses (infinity, NaN or an unknown kind of category)")
