"""``willump.optimize``: the decorator and the function object it returns."""

import functools
import types
import warnings

from willump.errors import WillumpWarning, warn
from willump.graph.build import build_plan
from willump.graph.source import read_function
from willump.runtime.executor import GraphExecutor

_DEFAULT_OPTIONS = {
    "strict": False,  # raise instead of warning when a line runs as plain Python
}


def optimize(func=None, /, **options):
    """Optimize an inference function: ``@willump.optimize`` or ``@willump.optimize(**options)``.

    The function takes raw inputs, computes features and ends in a call to a
    model's ``predict``, ``predict_proba`` or ``decision_function``. The result
    behaves as the function and returns exactly what it returns.

    Options:
        strict: raise ``TypeError`` instead of emitting a ``WillumpWarning``
            when part of the function is not understood (default False).
    """
    unknown = sorted(set(options) - set(_DEFAULT_OPTIONS))
    if unknown:
        raise TypeError(
            f"willump.optimize() got unknown option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(sorted(_DEFAULT_OPTIONS))}"
        )
    if func is None:
        return functools.partial(OptimizedFunction, **options)
    return OptimizedFunction(func, **options)


class OptimizedFunction:
    """A drop-in replacement for an inference function.

    Attributes:
        py_func: the original, undecorated function.
        graph: the transformation graph willump built from it.
    """

    def __init__(self, func, **options):
        source = read_function(func)  # TypeError for lambdas, builtins, missing source
        functools.update_wrapper(self, func)
        self.py_func = func
        self.options = {**_DEFAULT_OPTIONS, **options}
        plan = build_plan(source)
        self.graph = plan.graph
        self._report(self.graph)
        self._executor = GraphExecutor(plan, source) if self.graph.optimizable else None

    def _report(self, graph) -> None:
        problems = list(graph.notes)
        if graph.unmodified_reason:
            problems.append(f"{graph.unmodified_reason}; the whole function runs unmodified")
        if not problems:
            return
        message = f"willump: in {self.py_func.__qualname__} ({self.py_func.__code__.co_filename}): " + "; ".join(
            problems
        )
        if self.options["strict"]:
            raise TypeError(message)
        warn(message)

    def __call__(self, *args, **kwargs):
        if self._executor is None:
            return self.py_func(*args, **kwargs)
        return self._executor(*args, **kwargs)

    @property
    def executor(self) -> GraphExecutor | None:
        """Runs the graph piece by piece; None when the function runs unmodified."""
        return self._executor

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return types.MethodType(self, instance)

    def __getstate__(self):
        return {"py_func": self.py_func, "options": self.options}

    def __setstate__(self, state):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WillumpWarning)  # already reported where it was defined
            self.__init__(state["py_func"], **state["options"])

    def __repr__(self) -> str:
        return f"<willump.optimize of {self.py_func.__qualname__}>"
