"""Reading a function's source into an AST whose positions match the file.

Line and column numbers are shifted back to where the code stands in its file
(or notebook cell), so that code generated from these nodes raises exceptions
whose tracebacks point at the user's own lines.
"""

import ast
import inspect
import textwrap
import types
from dataclasses import dataclass


@dataclass(frozen=True)
class FunctionSource:
    """The parsed definition of a user function, and the text it was parsed from."""

    func: types.FunctionType
    definition: ast.FunctionDef
    filename: str
    text: str  # the definition's source, as in its file
    first_line: int  # the file's line the text starts at

    def carried(self) -> tuple[str, int, str]:
        """What ``read_function`` needs, besides the function, to parse it again without its file
        (a pickle carries it: a function loaded elsewhere may have no source to read)."""
        return self.text, self.first_line, self.filename


def read_function(func, carried: tuple[str, int, str] | None = None) -> FunctionSource:
    """Parse ``func``'s definition, from its file or from ``carried`` (``FunctionSource.carried()``);
    raise TypeError when it cannot be read."""
    _check_function(func)
    text, first_line, filename = carried if carried is not None else _source_of(func)
    dedented = textwrap.dedent(text)
    indent = _indent_removed(text, dedented)
    try:
        module = ast.parse(dedented)
        line_offset = first_line - 1
    except SyntaxError:
        # Dedenting fails when a multi-line string starts a line at column 0:
        # parse the indented definition as the body of a block instead.
        try:
            module = ast.parse("if 1:\n" + text)
        except SyntaxError as exc:
            raise TypeError(f"willump.optimize cannot parse the source of {func.__qualname__!r}: {exc}") from None
        module = ast.Module(module.body[0].body, type_ignores=[])
        line_offset, indent = first_line - 2, 0
    definition = next(
        (node for node in module.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))),
        None,
    )
    if definition is None or definition.name != func.__code__.co_name:
        raise TypeError(
            f"willump.optimize cannot find the definition of {func.__qualname__!r} in its source"
        )
    _shift_positions(definition, line_offset, indent)
    owner = _enclosing_class(func.__qualname__)
    if owner:
        _mangle_private_names(definition, owner)
    return FunctionSource(func, definition, filename, text, first_line)


def _check_function(func) -> None:
    if isinstance(func, (types.BuiltinFunctionType, types.MethodWrapperType)) or not isinstance(
        func, types.FunctionType
    ):
        raise TypeError(
            f"willump.optimize needs a Python function defined with 'def'; got {func!r} "
            f"of type {type(func).__name__}"
        )
    if func.__name__ == "<lambda>":
        raise TypeError(
            "willump.optimize cannot optimize a lambda: define the pipeline with 'def' "
            "so that each statement can become a graph node"
        )


def _source_of(func) -> tuple[str, int, str]:
    """(the definition's text, its first line, its file) as Python's inspect finds them."""
    try:
        # The code object, not the function: functools.wraps would lead to the wrapped function.
        source_lines, first_line = inspect.getsourcelines(func.__code__)
    except (OSError, TypeError) as exc:
        raise TypeError(
            f"willump.optimize cannot read the source of {func.__qualname__!r} ({exc}); "
            "define it in a file or a notebook cell, not with exec() or in an interactive "
            "prompt without source"
        ) from None
    filename = inspect.getsourcefile(func) or func.__code__.co_filename
    return "".join(source_lines), first_line, filename


def _enclosing_class(qualname: str) -> str | None:
    """The innermost class around a function, from its qualified name (``A.m.<locals>.f`` -> ``A``)."""
    parts = qualname.split(".")[:-1]
    for position in range(len(parts) - 1, -1, -1):
        following = parts[position + 1] if position + 1 < len(parts) else None
        if parts[position] != "<locals>" and following != "<locals>":
            return parts[position]
    return None


def _mangle_private_names(tree: ast.AST, owner: str) -> None:
    """Rename ``__name`` as the compiler does inside class ``owner`` (the generated code is not in it)."""
    prefix = "_" + owner.lstrip("_")
    if prefix == "_":
        return

    def mangled(name: str) -> str:
        if name.startswith("__") and not name.endswith("__") and "." not in name:
            return prefix + name
        return name

    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            node.id = mangled(node.id)
        elif isinstance(node, ast.Attribute):
            node.attr = mangled(node.attr)
        elif isinstance(node, ast.arg):
            node.arg = mangled(node.arg)


def _indent_removed(text: str, dedented: str) -> int:
    for original, stripped in zip(text.splitlines(), dedented.splitlines()):
        if stripped.strip():
            return len(original) - len(stripped)
    return 0


def _shift_positions(tree: ast.AST, line_offset: int, column_offset: int) -> None:
    for node in ast.walk(tree):
        if "lineno" in node._attributes:
            if getattr(node, "lineno", None) is not None:
                node.lineno += line_offset
                node.col_offset += column_offset
            if getattr(node, "end_lineno", None) is not None:
                node.end_lineno += line_offset
                node.end_col_offset += column_offset


def call_on_parameters(func, definition: ast.FunctionDef, bound: tuple):
    """``func`` called on the parameters' values ``bound``, in ``definition``'s order (positional,
    then keyword-only by name)."""
    args = definition.args
    positional = len(args.posonlyargs) + len(args.args)
    names = [a.arg for a in args.kwonlyargs]
    return func(*bound[:positional], **dict(zip(names, bound[positional:])))
