"""Warnings and errors that willump raises itself."""

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


class WillumpWarning(UserWarning):
    """Part of a function is not understood and runs as plain Python.

    The message names the source line and the reason. Results are unaffected:
    only the optimizations that need that part are given up.
    """


def warn(message: str) -> None:
    """Emit a WillumpWarning attributed to the first caller outside willump."""
    frame, level = sys._getframe(1), 2  # level 1 is this function
    while frame is not None and (
        frame.f_code.co_filename.startswith(_PACKAGE) or frame.f_code.co_filename.endswith("functools.py")
    ):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, WillumpWarning, stacklevel=level)


class RemoteLookupError(RuntimeError):
    """A remote feature table could not answer: the server is down, refused, was slower
    than the timeout, or holds a value that is not a row of the table. The message names
    the table and the server."""


class InconsistentVersionWarning(UserWarning):
    """A file written by ``save`` is loaded under other versions of willump, Python or the
    libraries its models come from; its answers may differ or loading may fail, as with
    scikit-learn's warning of the same name. ``versions`` maps each package that differs to
    (the version that saved the file, the version loading it)."""

    def __init__(self, message: str, versions: dict[str, tuple[str | None, str | None]]):
        super().__init__(message)
        self.versions = versions
