"""The operators willump compiles, and the kernel for a callee.

Bound methods are looked up by (exact class, method name), functions by
identity. A subclass is not assumed to behave as its parent, so it runs as
written.
"""

import importlib
import operator
import threading
from functools import partial
from types import FunctionType, MethodType

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, HashingVectorizer, TfidfVectorizer

from willump.compile import (
    bayes, composites, encoders, linear, meta, preprocessing, sktrees, sparse, tables, tfidf, trees,
)
from willump.compile.categories import ASTYPE, CompiledCut, CompiledFrameAstype
from willump.compile.datetimes import CompiledDatetimeField, CompiledToDatetime, datetime_field
from willump.compile.dummies import CompiledGetDummies
from willump.compile.dense import CompiledColumnStack, CompiledConcat, CompiledNumpyHstack, CompiledSelect
from willump.compile.expressions import METHODS as EXPRESSION_METHODS
from willump.compile.expressions import UFUNCS, CompiledExpression, CompiledUfunc
from willump.compile.frames import (
    CompiledAssign, CompiledDrop, CompiledFrameConstructor, CompiledFrameCopy, CompiledFrameFillna, CompiledSetColumn, CompiledValues,
    frame_to_numpy, frame_values, set_column,
)
from willump.compile.parallel import SERIAL
from willump.compile.forms import DeferredMethod, Unsupported
from willump.compile.lookups import CompiledLoc, CompiledReindex, loc_lookup
from willump.compile.maps import CompiledMap
from willump.compile.replace import CompiledFrameReplace, CompiledReplace
from willump.compile.strings import CompiledColumnLower, CompiledLower, StringMethods, column_str_method
from willump.compile.text import CompiledVectorizer

# Kernels built per object (they hold what they read from it: a vocabulary, coefficients).
METHOD_KERNELS = {
    (CountVectorizer, "transform"): CompiledVectorizer,
    (TfidfVectorizer, "transform"): CompiledVectorizer,
    (HashingVectorizer, "transform"): CompiledVectorizer,
    (tfidf.TfidfTransformer, "transform"): tfidf.CompiledTfidfTransformer,
}
for _kind, _kernel in {**preprocessing.KERNELS, **encoders.KERNELS}.items():
    METHOD_KERNELS[(_kind, "transform")] = _kernel


def _method_kernels(methods: dict, kernel) -> dict:
    """{(kind, method): factory(model, workers)} building ``kernel(model, method, workers)`` for each
    of a module's ``METHODS``."""
    return {(kind, method): partial(_built, kernel, method) for kind, names in methods.items() for method in names}


def _built(kernel, method: str, model, workers):
    return kernel(model, method, workers)


METHOD_KERNELS.update(_method_kernels(linear.METHODS, linear.CompiledLinearModel))
METHOD_KERNELS.update(_method_kernels(bayes.METHODS, bayes.CompiledNaiveBayes))
METHOD_KERNELS.update(_method_kernels(trees.METHODS, trees.CompiledBooster))
METHOD_KERNELS.update(_method_kernels(trees.BOOSTER_METHODS, trees.CompiledBoosterPredict))
METHOD_KERNELS.update(_method_kernels(sktrees.METHODS, sktrees.CompiledTrees))
# Libraries willump does not require: the module of their kernels is imported, and its METHODS
# registered, when one of their models is first called (importing the library costs every user).
OPTIONAL_MODULES = {"xgboost": "willump.compile.xgbtrees"}
_OPTIONAL_IMPORT = threading.Lock()  # (a thread meeting the library while another imports it waits)


def method_kernel(kind, name: str):
    """The kernel factory of ``kind.name`` (an optional library's registered when first met), or None."""
    return METHOD_KERNELS.get((kind, name)) or _optional_factory(kind, name)


def _optional_factory(kind, name: str):
    """The kernel factory of an optional library's ``kind.name``, registering the library's kernels once."""
    _register_optional(kind)
    return METHOD_KERNELS.get((kind, name))


def _register_optional(owner) -> None:
    """Register the kernels of the optional library ``owner`` (a class or function) comes from, once:
    its module's ``KERNELS`` ([(METHODS, kernel)]) and ``FUNCTIONS``."""
    library = (getattr(owner, "__module__", None) or "").partition(".")[0]
    if library in OPTIONAL_MODULES:
        with _OPTIONAL_IMPORT:
            if library in OPTIONAL_MODULES:
                module = importlib.import_module(OPTIONAL_MODULES[library])
                for methods, kernel in module.KERNELS:
                    METHOD_KERNELS.update(_method_kernels(methods, kernel))
                FUNCTION_KERNELS.update(module.FUNCTIONS)
                del OPTIONAL_MODULES[library]


# Kernels for methods of short-lived objects (each call's frame, accessor or Series): built once,
# they get the object as their first argument.
RECEIVER_KERNELS = {
    (StringMethods, "lower"): CompiledLower(),
    (pd.DataFrame, "merge"): tables.CompiledMerge(),
    (pd.Series, "map"): CompiledMap(),
    (pd.Series, "astype"): ASTYPE,
    (pd.Series, "replace"): CompiledReplace(),
    (pd.DataFrame, "replace"): CompiledFrameReplace(),
    (pd.DataFrame, "fillna"): CompiledFrameFillna(),
    (pd.DataFrame, "copy"): CompiledFrameCopy(),
    (pd.DataFrame, "astype"): CompiledFrameAstype(),
    (pd.DataFrame, "reindex"): CompiledReindex(),
    (pd.Series, "reindex"): CompiledReindex(),
    (pd.DataFrame, "assign"): CompiledAssign(),
    (pd.DataFrame, "drop"): CompiledDrop(),
}
FUNCTION_KERNELS = {
    sp.hstack: sparse.CompiledHstack(),
    np.hstack: CompiledNumpyHstack(),
    np.column_stack: CompiledColumnStack(),
    pd.concat: CompiledConcat(),
    pd.DataFrame: CompiledFrameConstructor(),
    pd.to_datetime: CompiledToDatetime(),
    pd.get_dummies: CompiledGetDummies(),
    pd.cut: CompiledCut(),
    np.select: CompiledSelect(),
    datetime_field: CompiledDatetimeField(),
    operator.getitem: tables.CompiledSelection(),
    column_str_method: CompiledColumnLower(),
    frame_values: CompiledValues(frame_values),
    frame_to_numpy: CompiledValues(frame_to_numpy),
    set_column: CompiledSetColumn(),
    loc_lookup: CompiledLoc(),
    composites.union_stack: composites.CompiledUnionStack(),
    composites.column_stack: composites.CompiledColumnStack(),
    composites.column_input: composites.CompiledColumnHelper(composites.column_input),
    composites.columns: composites.CompiledColumnHelper(composites.columns),
    **{ufunc: CompiledUfunc(name) for name, ufunc in UFUNCS.items()},  # (np.log1p(s.map(d).fillna(0)))
}
FUNCTION_NAMES = {
    "hstack", "column_stack", "concat", "DataFrame", "to_datetime", "get_dummies", "cut", "select", composites.UNION_STACK,
    composites.COLUMN_STACK,
    composites.COLUMN_INPUT, composites.COLUMNS, *UFUNCS,
}
OPTIONAL_NAMES = {"inplace_predict", "DMatrix"}  # (of the optional libraries' kernels, registered when first met)
NAMES = {method for _, method in [*METHOD_KERNELS, *RECEIVER_KERNELS]} | FUNCTION_NAMES | OPTIONAL_NAMES  # callee names worth a call site


def receiver_kernel(callee):
    """The shared kernel for a method in RECEIVER_KERNELS (not replaced on its class), else None."""
    kind = type(callee)
    if kind is DeferredMethod:
        return RECEIVER_KERNELS.get((callee.__self__.stands_for, callee.__name__))
    if kind is MethodType:
        owner_type, name = type(callee.__self__), callee.__name__
        kernel = RECEIVER_KERNELS.get((owner_type, name))
        if kernel is not None and getattr(owner_type, name, None) is callee.__func__:
            return kernel
    return None


def kernel_for(callee, workers=SERIAL):
    """(kernel, None), or (None, why the callee runs as written)."""
    owner = getattr(callee, "__self__", None)
    if isinstance(callee, DeferredMethod) or (owner is not None and hasattr(callee, "__func__")):
        kind, name = _owner_type(callee), callee.__name__
        factory = method_kernel(kind, name)
        if factory is None and (kind, name) not in RECEIVER_KERNELS:
            return None, _not_compiled(kind, name)
        if not isinstance(callee, DeferredMethod) and _class_function(kind, name) is not callee.__func__:
            return None, f"{kind.__name__}.{name} was replaced on the class"
        if factory is None:
            return RECEIVER_KERNELS[(kind, name)], None
        try:
            return factory(owner, workers), None
        except Unsupported as problem:
            return None, str(problem)
        except Exception as error:  # building a kernel must never change the answer
            return None, f"could not compile it ({type(error).__name__}: {error})"
    kernel = function_kernel(callee)
    if kernel is None:
        return None, f"{getattr(callee, '__qualname__', type(callee).__name__)} is not an operator willump compiles"
    return kernel, None


def _class_function(kind: type, name: str):
    """The function the class defines as its method ``name`` (scikit-learn's ``available_if``
    descriptors hold it as ``fn``), or None."""
    for klass in kind.__mro__:
        if name in vars(klass):
            attribute = vars(klass)[name]
            return getattr(attribute, "fn", attribute)
    return None


def _not_compiled(kind: type, name: str) -> str:
    """Why ``kind.name`` runs as written: for a meta-estimator's method willump reads as its steps
    (``graph.composites``), where it does."""
    if name in meta.READ_AS_STEPS.get(kind, ()):
        return (
            f"a {kind.__name__} runs as one call here: willump reads its {name} as its steps only when it is "
            f"called as <variable>.{name}(X), first in its statement, on a global or closure variable holding "
            "it (not an attribute such as self.pipe, a local variable or an item of a dict); one fitted only "
            "after decorating is read on the first call after fitting, and one left as one call for another "
            "reason is named by a WillumpWarning at decoration"
        )
    package = kind.__module__.partition(".")[0]
    owner = kind.__name__ if package in ("sklearn", "pandas", "numpy") else f"{package}'s {kind.__name__}"  # (xgboost's Booster)
    if kind is pd.Series and name in EXPRESSION_METHODS:
        return (f"Series.{name} is compiled in element-wise expressions, whose arguments are numbers, names or "
                f"columns: not a call's result or a string here (bind a value such as df['a'].median() to a name first)")
    return f"{owner}.{name} is not an operator willump compiles"


def _owner_type(method) -> type:
    if isinstance(method, DeferredMethod):
        return method.__self__.stands_for
    return type(method.__self__)


def describe(callee) -> str:
    if isinstance(callee, DeferredMethod) or (getattr(callee, "__self__", None) is not None and hasattr(callee, "__func__")):
        return f"{_owner_type(callee).__name__}.{callee.__name__}"
    if hasattr(callee, "operator_name"):
        return callee.operator_name
    if isinstance(callee, np.ufunc):  # (numpy < 2.1 gives ufuncs no module)
        return f"numpy.{callee.__name__}"
    module = ".".join(p for p in (getattr(callee, "__module__", "") or "").split(".") if not p.startswith("_"))
    return f"{module}.{getattr(callee, '__qualname__', type(callee).__name__)}".lstrip(".")


def function_kernel(function):
    """The kernel standing in for a plain function, or None."""
    if type(function) is FunctionType and type(function.__dict__.get("willump_kernel")) is CompiledExpression:
        return function.willump_kernel  # a function computing an element-wise expression carries its kernel
    try:
        kernel = FUNCTION_KERNELS.get(function)
    except TypeError:  # unhashable
        return None
    if kernel is None and isinstance(function, type) and function.__module__.partition(".")[0] in OPTIONAL_MODULES:
        _register_optional(function)  # (xgboost.DMatrix)
        kernel = FUNCTION_KERNELS.get(function)
    return kernel
