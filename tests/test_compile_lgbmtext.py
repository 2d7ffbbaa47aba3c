"""LightGBM's model text read in numba: every double exactly what ``strtod`` (Python's ``float``)
reads, every line's numbers what numpy's ``fromstring`` reads, the text what ``model_to_string``
gives."""

import lightgbm as lgb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from willump.compile.forms import Unsupported
from willump.compile import lgbmtext
from willump.compile.lgbmtext import KEYS, Lines, model_text, sections

SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, database=None)


def _lines(*values: str) -> Lines:
    """``Lines`` of one text holding ``values`` on lines of their own."""
    text = np.frombuffer("\n".join(values).encode(), np.uint8)
    ends = np.cumsum([len(v.encode()) + 1 for v in values]) - 1
    return Lines(text, ends - [len(v.encode()) for v in values], ends)


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float64).view(np.uint64)


@SETTINGS
@given(st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=30),
       st.sampled_from(["{!r}", "{:.17g}", "{:.16e}", "{:.3g}", "{:.25g}", "{:.40f}"]))
def test_doubles_read_as_strtod_reads_them(values, spelling):
    texts = [spelling.format(v) for v in values]
    assert (_bits(_lines(" ".join(texts)).numbers(np.float64, len(values))) == _bits([float(t) for t in texts])).all()


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 10**19 - 1), st.integers(-360, 330), st.booleans()), min_size=1, max_size=20))
def test_decimals_of_any_exponent_round_to_nearest_even(parts):
    """Significands of up to 19 digits at exponents from underflow to overflow: subnormals,
    halfway cases and the edges of inf and 0.0 rounded as ``float`` rounds them."""
    texts = [f"{'-' if negative else ''}{significand}e{exponent}" for significand, exponent, negative in parts]
    assert (_bits(_lines(*texts).numbers(np.float64, len(texts))) == _bits([float(t) for t in texts])).all()


@pytest.mark.parametrize("text", ["2.2250738585072011e-308", "2.2250738585072012e-308", "4.9406564584124654e-324",
                                  "2.4703282292062327e-324", "2.4703282292062328e-324", "1.7976931348623157e308",
                                  "1.7976931348623158e308", "1.7976931348623159e308", "9007199254740993",
                                  "0.1", "-0", "0e999", "1e-400", "1E+5", "+3.", ".5", "123456789012345678901234567890",
                                  "inf", "-inf", "INF", "nan", "-nan", "Infinity"])
def test_edge_doubles_and_spellings_the_loop_leaves_to_numpy(text):
    read = _lines(text).numbers(np.float64, 1)
    expected = np.fromstring(text, np.float64, sep=" ")
    assert _bits(read)[0] == _bits(expected)[0] or (np.isnan(read[0]) and np.isnan(expected[0]))


@SETTINGS
@given(st.lists(st.lists(st.integers(-(2**62), 2**62), max_size=8), min_size=1, max_size=8))
def test_integers_of_lines_in_order(lines):
    numbers = [n for line in lines for n in line]
    read = _lines(*(" ".join(map(str, line)) for line in lines)).numbers(np.int64, len(numbers))
    assert read.dtype == np.int64 and read.tolist() == numbers


def test_a_count_that_does_not_match_is_unsupported():
    with pytest.raises(Unsupported):
        _lines("1 2", "3").numbers(np.int64, 4)
    with pytest.raises(Unsupported):
        _lines("1.5 2").numbers(np.float64, 1)
    with pytest.raises(Unsupported):
        _lines("1 x").numbers(np.int64, 2)
    assert _lines("4294967295 7").numbers(np.uint32, 2).tolist() == [2**32 - 1, 7]
    with pytest.raises(Unsupported):  # (numpy's reading of what no uint32 holds: not one number)
        _lines("4294967296 -1").numbers(np.uint32, 2)


@pytest.mark.parametrize("leaves", [2, 31, 255])
def test_model_text_is_model_to_string_without_pandas_categories(leaves):
    rng = np.random.default_rng(leaves)
    X = rng.normal(size=(600, 5))
    X[:, 4] = rng.integers(0, 40, 600)
    booster = lgb.train({"num_leaves": leaves, "min_data_in_leaf": 2, "verbose": -1},
                        lgb.Dataset(X, X[:, 0] + (X[:, 4] % 3 == 0), categorical_feature=[4]), num_boost_round=30)
    text = model_text(booster)
    assert bytes(text).decode() == booster.model_to_string(num_iteration=-1).split("\npandas_categorical:")[0]
    header, lines = sections(text)
    assert header["version"].startswith("v") and set(lines) == set(KEYS) and len(lines["Tree"]) == 30
    assert lines["num_leaves"].numbers(np.int64, 30).max() <= leaves


def test_model_text_of_a_model_larger_than_its_leaves_suggest():
    """A booster whose parameters say nothing of its leaves (loaded from a string without them)."""
    X = np.random.default_rng(0).normal(size=(2000, 3))
    booster = lgb.train({"num_leaves": 200, "min_data_in_leaf": 1, "verbose": -1}, lgb.Dataset(X, X[:, 0]), 100)
    loaded = lgb.Booster(model_str=booster.model_to_string())
    loaded.params = {"num_leaves": 2}  # (the guess: 2 leaves a tree, far too few)
    text = booster.model_to_string(num_iteration=-1).split("\npandas_categorical:")[0]
    assert len(text) > (1 << 20) + 100 * 2 * 2 * lgbmtext._BYTES_A_NODE  # (more than the buffer first given)
    assert bytes(model_text(loaded)).decode() == text
