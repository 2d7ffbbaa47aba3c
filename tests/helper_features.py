"""Helpers in a module of their own, imported by tests/test_inline_helpers.py: their globals are
this module's, and some of its names mean other objects in the test module."""

import numpy as np
import scipy.sparse as sparse

word_vectorizer = None  # set by the test
char_vectorizer = None
model = "this module's own 'model', not the test's"
scale = 10.0  # the test module binds another 'scale'


def word_block(df, column="tweet", *, lower=True):
    text = df[column].str.lower() if lower else df[column]
    return word_vectorizer.transform(text)


def char_block(df):
    return char_vectorizer.transform(df["tweet"].str.lower())


def length_block(df):
    lengths = df["tweet"].str.len().to_numpy(dtype=np.float64).reshape(-1, 1)
    return sparse.csr_matrix(lengths / scale)


def featurize(df):
    return sparse.hstack([word_block(df), char_block(df), length_block(df)], format="csr")


def broken_block(df):
    lengths = df["tweet"].str.len().to_numpy(dtype=np.float64)
    return lengths.reshape(1, -1).sum(axis=3)  # raises AxisError


def ratio_block(df):
    ratios = [len(text) / text.count("@") for text in df["tweet"]]  # raises ZeroDivisionError in the comprehension
    return sparse.csr_matrix(np.array(ratios).reshape(-1, 1))
