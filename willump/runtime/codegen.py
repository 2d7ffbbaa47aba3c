"""Turning groups of the user's statements back into Python functions.

Each block becomes a function compiled from the user's own AST nodes, with the
file name and line numbers of the original, named like the original, and
bound to the original's globals and closure cells. Globals and closure
variables are therefore looked up when the block runs, and a traceback shows
the user's line.
"""

import __future__
import ast
import builtins
import copy
import itertools
import types

from willump.graph.inline import INLINED
from willump.graph.statements import analyze_statement

UNBOUND = type("Unbound", (), {"__repr__": lambda self: "<unbound>"})()
_UNBOUND_PARAMETER = "__willump_unbound"
_LOCALS_PARAMETER = "__willump_locals"
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag


def compile_block(
    func: types.FunctionType,
    filename: str,
    parameters: list[str],
    body: list[ast.stmt],
    result: ast.expr | None,
    possibly_unbound=frozenset(),
) -> types.FunctionType:
    """A function ``f(*parameters)`` running ``body`` and returning ``result``.

    A body ending in ``return`` returns what it returns; otherwise, without
    ``result``, the block returns its namespace (``locals()``). A parameter in
    ``possibly_unbound`` passed as ``UNBOUND`` is deleted on entry, so reading
    it raises UnboundLocalError as the original would.
    """
    line = body[0].lineno if body else (result.lineno if result is not None else func.__code__.co_firstlineno)
    prologue = []
    unbound = [p for p in parameters if p in possibly_unbound]
    for name in unbound:
        prologue.append(
            ast.If(
                test=ast.Compare(
                    ast.Name(name, ast.Load()), [ast.Is()], [ast.Name(_UNBOUND_PARAMETER, ast.Load())]
                ),
                body=[ast.Delete([ast.Name(name, ast.Del())])],
                orelse=[],
            )
        )
    for node in prologue:
        _locate(node, line)
    ending = []
    if not (body and isinstance(body[-1], ast.Return)):
        if result is None:  # the builtin, passed in: a global named 'locals' must not matter
            result = ast.Call(ast.Name(_LOCALS_PARAMETER, ast.Load()), [], [])
        returned = ast.Return(result)
        if getattr(result, "lineno", None) is None:
            _locate(returned, line)
        else:
            ast.copy_location(returned, result)
        ending = [returned]
    arguments = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(p) for p in parameters],
        vararg=None,
        kwonlyargs=[ast.arg(_UNBOUND_PARAMETER), ast.arg(_LOCALS_PARAMETER)],
        kw_defaults=[None, None],
        kwarg=None,
        defaults=[],
    )
    name = func.__name__
    segments = {}
    body = _segmented(list(body), filename, segments)
    inner = _function_def(name, arguments, prologue + body + ending)
    # Closure variables become free variables of the block through an enclosing function.
    freevars = func.__code__.co_freevars
    outer_body = [ast.Assign([ast.Name(v, ast.Store())], ast.Constant(None)) for v in freevars]
    outer_body += [inner, ast.Return(ast.Name(name, ast.Load()))]
    outer = _function_def("__willump_outer", _no_arguments(), outer_body)
    for node in [outer] + outer_body[:-2] + [outer_body[-1], inner]:
        _locate(node, line, shallow=True)
    module = ast.fix_missing_locations(ast.Module([outer], type_ignores=[]))
    code = compile(module, filename, "exec", flags=func.__code__.co_flags & _FUTURE_FLAGS, dont_inherit=True)
    outer_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner_code = next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    inner_code = _with_qualname(_placed(inner_code, segments), func.__qualname__)
    cells = dict(zip(freevars, func.__closure__ or ()))
    block = types.FunctionType(
        inner_code, func.__globals__, name, None, tuple(cells[v] for v in inner_code.co_freevars)
    )
    block.__kwdefaults__ = {_UNBOUND_PARAMETER: UNBOUND, _LOCALS_PARAMETER: builtins.locals}
    return block


_SEGMENT = "__willump_segment_"


def _segmented(body: list, filename: str, segments: dict, depth: int = 0) -> list:
    """``body`` with each run of statements read in from a helper of another file as a nested function
    (its code gets the helper's file and name, see ``_placed``), called where the helper was called:
    a traceback shows the helper's file and lines, as the call of the helper would."""
    out = []
    for key, group in itertools.groupby(body, key=lambda s: _frame(s, depth)):
        group = list(group)
        if key is None:
            out += group
            continue
        helper, line = key
        inner = _segmented(group, helper.__code__.co_filename, segments, depth + 1)
        if helper.__code__.co_filename == filename:
            out += inner
            continue
        name = f"{_SEGMENT}{len(segments)}"
        segments[name] = helper
        bound = sorted(set().union(*(analyze_statement(0, s).bound for s in group)))
        declared = [ast.Nonlocal(bound)] if bound else []
        # The enclosing function binds them too (in code that never runs), so that they are its variables.
        dummy = [ast.If(ast.Constant(False), [ast.Assign([ast.Name(n, ast.Store())], ast.Constant(None)) for n in bound], [])]
        call = ast.Expr(ast.Call(ast.Name(name, ast.Load()), [], []))
        for node in (*dummy, call) if bound else (call,):
            _locate(node, line)
        definition = _function_def(name, _no_arguments(), declared + inner)
        _locate(definition, group[0].lineno, shallow=True)
        if declared:
            _locate(declared[0], group[0].lineno)
        out = (dummy if bound else []) + out + [definition, call]
    return out


def _frame(statement, depth: int):
    """The (helper, line of its call) ``statement`` was read in through at ``depth``, or None."""
    frames = getattr(statement, INLINED, ())
    return frames[depth] if len(frames) > depth and not isinstance(statement, ast.Return) else None


def _placed(code: types.CodeType, segments: dict, filename: str | None = None) -> types.CodeType:
    """``code`` with the code of each segment given its helper's file and name, and the code nested in
    a segment (comprehensions, lambdas) its file too."""
    if not segments:
        return code
    consts = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            helper = segments.get(const.co_name)
            inner = helper.__code__.co_filename if helper is not None else filename
            const = _placed(const, segments, inner)
            if helper is not None:
                const = _with_qualname(const.replace(co_name=helper.__name__), helper.__qualname__)
        consts.append(const)
    placed = code.replace(co_consts=tuple(consts))
    return placed.replace(co_filename=filename) if filename is not None else placed


def compile_binder(func: types.FunctionType, definition: ast.FunctionDef, filename: str):
    """A function with ``func``'s signature returning its arguments as a tuple.

    Calling it raises exactly the TypeError the original raises for bad arguments.
    """
    args = _strip_annotations(definition.args)
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    returned = ast.Return(ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load()))
    # Defaults come from the function object, so no default expression is evaluated here.
    args.defaults = [ast.Constant(None)] * len(args.defaults)
    args.kw_defaults = [None if d is None else ast.Constant(None) for d in args.kw_defaults]
    binder = _function_def(func.__name__, args, [returned])
    _locate(binder, definition.lineno)
    module = ast.fix_missing_locations(ast.Module([binder], type_ignores=[]))
    code = compile(module, filename, "exec", dont_inherit=True)
    binder_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    function = types.FunctionType(_with_qualname(binder_code, func.__qualname__), {}, func.__name__)
    function.__defaults__ = func.__defaults__
    function.__kwdefaults__ = func.__kwdefaults__
    return function, tuple(names)


def _with_qualname(code: types.CodeType, qualname: str) -> types.CodeType:
    """``code`` named like the user's function in tracebacks (code objects have it from 3.11)."""
    return code.replace(co_qualname=qualname) if hasattr(code, "co_qualname") else code


def _strip_annotations(args: ast.arguments) -> ast.arguments:
    args = copy.deepcopy(args)
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        a.annotation = None
    return args


def _function_def(name: str, args: ast.arguments, body: list[ast.stmt]) -> ast.FunctionDef:
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    return ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None, **extra)


def _no_arguments() -> ast.arguments:
    return ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])


def _locate(node: ast.AST, line: int, shallow: bool = False) -> None:
    targets = [node] if shallow else list(ast.walk(node))
    for child in targets:
        if "lineno" in child._attributes and getattr(child, "lineno", None) is None:
            child.lineno, child.col_offset = line, 0
            child.end_lineno, child.end_col_offset = line, 0
