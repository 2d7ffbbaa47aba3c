"""Recognizing the model call and the concatenation (commutative) calls.

Callees are resolved to the objects they name in the function's globals,
closure and local imports, so any import alias works (``sp.hstack``,
``from scipy.sparse import hstack as hs``...).
"""

import ast
import builtins
import importlib
import types

import numpy as np
import pandas as pd
import scipy.sparse

from willump.compile.composites import column_stack, union_stack
from willump.graph.statements import walk_scope

MODEL_METHODS = ("predict", "predict_proba", "decision_function", "score_samples", "inplace_predict")  # (the last: XGBoost's Booster)

# Concatenation functions, each with the axis arguments under which it joins columns.
_CONCATENATIONS = {
    "scipy.sparse.hstack": (scipy.sparse.hstack, None),
    "numpy.hstack": (np.hstack, None),
    "numpy.column_stack": (np.column_stack, None),
    "numpy.concatenate": (np.concatenate, ({1, -1}, 1)),
    "pandas.concat": (pd.concat, ({1, "columns"}, None)),
    "FeatureUnion": (union_stack, None),  # a FeatureUnion's or ColumnTransformer's branches, written out
    "ColumnTransformer": (column_stack, None),
}
COMPOSITE_JOINS = ("FeatureUnion", "ColumnTransformer")  # their blocks are the second argument


class Resolver:
    """Finds the object a callee expression names, without side effects."""

    def __init__(self, func: types.FunctionType, definition: ast.FunctionDef, names: dict | None = None):
        self.func = func
        self.local_imports = _local_imports(definition)
        self.names = names or {}  # names the rewritten body reads besides the function's (see composites)

    def resolve(self, expr: ast.AST):
        if isinstance(expr, ast.Name):
            return self._lookup(expr.id)
        if isinstance(expr, ast.Attribute):
            owner = self.resolve(expr.value)
            # Only look into modules and classes: getattr on other objects may run code.
            if isinstance(owner, (types.ModuleType, type)):
                return getattr(owner, expr.attr, None)
        return None

    def _lookup(self, name: str):
        if name in self.names:
            return self.names[name]
        if name in self.local_imports:
            module_name, attribute = self.local_imports[name]
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                return None
            return getattr(module, attribute, None) if attribute else module
        code = self.func.__code__
        if name in code.co_freevars and self.func.__closure__:
            cell = self.func.__closure__[code.co_freevars.index(name)]
            try:
                return cell.cell_contents
            except ValueError:
                return None
        if name in self.func.__globals__:
            return self.func.__globals__[name]
        return getattr(builtins, name, None)


def _local_imports(definition: ast.FunctionDef) -> dict[str, tuple[str, str | None]]:
    """Names bound by import statements in the body: name -> (module, attribute)."""
    found = {}
    for statement in definition.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                if alias.asname:
                    found[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    found[top] = (top, None)
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
            for alias in statement.names:
                found[alias.asname or alias.name] = (statement.module, alias.name)
    return found


def model_call(expr: ast.AST) -> ast.Call | None:
    """The first ``<anything>.predict/predict_proba/decision_function/score_samples(X)`` call in ``expr``."""
    for node in walk_scope(expr):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MODEL_METHODS
            and node.args
            and not isinstance(node.args[0], ast.Starred)
        ):
            return node
    return None


def keyword_model_call(expr: ast.AST) -> ast.Call | None:
    """The first model method call given its input by keyword only (``model.predict(X=df)``)."""
    for node in walk_scope(expr):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MODEL_METHODS:
            if not node.args and node.keywords:
                return node
    return None


def concatenation_kind(call: ast.Call, resolver: Resolver) -> str | None:
    """The qualified name of the concatenation ``call`` performs along columns, or None."""
    target = resolver.resolve(call.func)
    if target is None:
        return None
    for name, (function, axis_rule) in _CONCATENATIONS.items():
        if target is not function:
            continue
        if axis_rule is None:
            return name
        allowed, position = axis_rule
        axis = next((k.value for k in call.keywords if k.arg == "axis"), None)
        if axis is None and position is not None and len(call.args) > position:
            axis = call.args[position]
        if isinstance(axis, ast.Constant) and axis.value in allowed:
            return name
    return None


def concatenation_calls(tree: ast.AST, resolver: Resolver) -> list[tuple[ast.Call, str]]:
    """Every column-concatenation call in ``tree``, outermost first."""
    found = []
    for node in walk_scope(tree):
        if isinstance(node, ast.Call):
            kind = concatenation_kind(node, resolver)
            if kind:
                found.append((node, kind))
    return found
