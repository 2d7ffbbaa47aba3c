"""Warnings and errors that willump raises itself."""


class WillumpWarning(UserWarning):
    """Part of a function is not understood and runs as plain Python.

    The message names the source line and the reason. Results are unaffected:
    only the optimizations that need that part are given up.
    """
