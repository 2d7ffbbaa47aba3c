"""Helpers shared by the kernel tests: a model stand-in, and running a function both ways."""

import pytest


class Identity:
    """A model that returns its input: the model call makes willump build a graph and compile."""

    def predict(self, X):
        return X


identity = Identity()


def answers(optimized, *args):
    """(optimized result, original result); or None after checking that both raise the same type."""
    try:
        expected = optimized.py_func(*args)
    except Exception as error:
        with pytest.raises(type(error)):
            optimized(*args)
        return None
    return optimized(*args), expected
