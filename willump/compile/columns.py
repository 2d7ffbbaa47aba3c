"""A frame's column as code reads it: ``frame["age"]``, or ``frame.age`` as notebooks write it.

``frame.age`` is ``frame["age"]`` only when Python's own lookup finds no attribute ``age`` and
pandas' ``NDFrame.__getattr__`` then finds the column; otherwise it is that attribute, or an
``AttributeError`` where the subscript raises ``KeyError``. Kernels reading a column by attribute
check that first (``check_attribute_column``) and leave every other case to the code as written.
Another object's attribute (``cfg.scale``) is read where reading it runs no code (``plain_attribute``).
"""

import ast
import types

import pandas as pd

from willump.compile.forms import Unsupported

MODULE_NAMES = {"np", "numpy", "pd", "pandas", "math"}  # ``np.pi`` is not a frame's column
_GENERIC_LOOKUPS = (object.__getattribute__, types.SimpleNamespace.__getattribute__)  # the instance's dict, then its type's


def column_read(node) -> tuple | None:
    """(the frame's name, the column's name, whether read by attribute) of ``name["column"]`` (a str
    constant) or ``name.column`` (read; a public name that is not pandas' own, of a name that is not a
    module's usual name), else None."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        key = node.slice
        return (node.value.id, key.value, False) if isinstance(key, ast.Constant) and type(key.value) is str else None
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and isinstance(node.ctx, ast.Load)
            and not node.attr.startswith("_") and node.value.id not in MODULE_NAMES and not _pandas_attribute(node.attr)):
        return node.value.id, node.attr, True
    return None


def _pandas_attribute(name: str) -> bool:
    """Whether a DataFrame's or a Series' ``.name`` is pandas' own (``s.values``, ``df.shape``): never a column."""
    return hasattr(pd.DataFrame, name) or hasattr(pd.Series, name)


def plain_attribute(owner, key: str):
    """``owner.<key>`` of a module, or of an object holding it in its own ``__dict__`` (no attribute
    of that name on its type, no ``__getattribute__`` of its own: ``cfg.scale``, ``self.alpha``),
    read without running code; Unsupported otherwise (a Series' label, a property...)."""
    kind = type(owner)
    if isinstance(owner, (pd.DataFrame, pd.Series)):
        raise Unsupported(f"`.{key}` of a {kind.__name__}")
    if kind is not types.ModuleType and (kind.__getattribute__ not in _GENERIC_LOOKUPS or hasattr(kind, key)):
        raise Unsupported(f"`.{key}` of a {kind.__name__} may run code")
    found = getattr(owner, "__dict__", None)
    if type(found) is not dict or key not in found:
        raise Unsupported(f"`.{key}` is not in the {kind.__name__}'s own attributes")
    return found[key]


def check_attribute_column(frame, key: str) -> None:
    """Unsupported unless ``frame.<key>`` reads the frame's column ``key``, as pandas decides it."""
    if type(frame) is not pd.DataFrame:
        raise Unsupported(f"`.{key}` of a {type(frame).__name__}, not of a DataFrame")
    if hasattr(pd.DataFrame, key) or key in vars(frame):
        raise Unsupported(f"`.{key}` is an attribute of the DataFrame, not its column")
    if (key in frame._internal_names_set or key in frame._metadata or key in frame._accessors
            or not frame.columns._can_hold_identifiers_and_holds_name(key)):
        raise Unsupported(f"the frame has no column `{key}` that pandas reads as an attribute")
