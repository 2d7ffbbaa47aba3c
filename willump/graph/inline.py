"""Reading the user's helper functions into the function's body.

``X = featurize(df)``, with ``featurize`` a plain ``def`` of the user's, becomes
``featurize``'s statements written in place: its parameters bound to the call's
arguments, its locals renamed where they would collide, its ``return`` value
assigned to ``X``. The graph is then built on the expanded body, so the helper's
vectorizers become IFVs and compile like code written in place. Helper calls
nested in an expression are read in too when nothing but names and attribute
reads would run before them (``sp.hstack([text_features(df), meta(df)])``), and
the statements read in are read again (helpers calling helpers).

The statements keep their positions in the helper's file, so a traceback and a
warning point at the helper's lines. The names a helper reads resolve in *its*
scope: a module global of another module is read as ``<module>.<name>`` (the
module bound under a fresh name), a closure variable through the helper's own
cell, a default argument as the value ``__defaults__`` holds. They are bound as
closure cells of a function compiled from the expanded definition, which stands
for the user's function from then on (same signature, globals and name).

A helper is read in only when that gives the same answer: a readable ``def``
outside installed libraries, ending in its only ``return``, without ``*args``,
``global``/``nonlocal``, nested definitions, generators, ``locals()``-like
dynamic scope, recursion, or side effects on anything but its own new locals.
Any other call of the user's code stays one call, with a note naming it and why.
A helper rebound after decoration is noticed at call time (``Inlined.rebound``):
such calls run the user's function as written.
"""

import ast
import builtins
import copy
import functools
import itertools
import os
import sys
import sysconfig
import types
from dataclasses import dataclass, field

from willump.compile.sites import mark_written
from willump.errors import warn
from willump.graph.recognize import Resolver, model_call
from willump.graph.source import FunctionSource, call_on_parameters, read_function
from willump.graph.statements import analyze_statement, names_read, new_object_call, replace_node

INLINED = "_willump_inlined"  # a statement read in: the (helper, line of its call) it came through, outermost first
_MAX_HELPERS = 64  # calls read in per function: a guard against runaway expansion
_DYNAMIC_SCOPE = {"locals", "vars", "eval", "exec", "super", "__class__", "globals"}
_CONSTANT_TYPES = (int, float, complex, str, bytes, bool, type(None))
# Expression nodes whose own evaluation runs no user code that could notice being moved later.
_PURE = (ast.Name, ast.Constant, ast.Attribute, ast.List, ast.Tuple, ast.keyword, ast.Load)
_LIBRARY_PATHS = tuple(
    os.path.realpath(p) for p in {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")} if p
)


@dataclass
class _Call:
    """A helper call read into the body: how to find the callee now, and what it was."""

    callee: ast.expr  # as it stands in the expanded body (its names resolve in the function's scope)
    helper: types.FunctionType
    code: types.CodeType
    defaults: tuple | None
    kwdefaults: dict | None


@dataclass
class Inlined:
    """The user's function with its helpers read in."""

    source: FunctionSource  # the expanded definition, and the function compiled from it
    original: types.FunctionType  # the user's function, as written
    calls: list = field(default_factory=list)  # the _Call of every helper read in
    _unchanged: object = None  # () -> whether every callee is still the helper read in (its scope's names)
    _warned: bool = False

    def rebound(self) -> bool:
        """Whether a helper read in was rebound (or its code or defaults replaced) since decoration."""
        try:
            if self._unchanged():
                return False
        except Exception:  # (a callee no longer there)
            pass
        if not self._warned:
            self._warned = True
            names = ", ".join(sorted({call.helper.__qualname__ for call in self.calls}))
            warn(
                f"willump: in {self.original.__qualname__}: a helper read into the function ({names}) was "
                "rebound or changed after decoration; calls run the function as written (decorate it again "
                "to optimize the new helper)"
            )
        return True

    def call_original(self, bound: tuple):
        """The user's function called on the parameters' values (in the definition's order)."""
        return call_on_parameters(self.original, self.source.definition, bound)


def inline_helpers(source: FunctionSource) -> tuple[FunctionSource, list[str], Inlined | None]:
    """(the source to build the graph from, notes on helpers left as calls, the Inlined or None).

    Without a helper to read in, the source is returned as it is.
    """
    expansion = _Expansion(source)
    try:
        expansion.run()
        if not expansion.calls:
            return source, expansion.notes, None
        inlined = expansion.result()
    except SyntaxError as error:  # (the expanded definition does not compile outside its class or file)
        return source, [f"line {source.definition.lineno}: helpers are not read in ({error})"], None
    return inlined.source, expansion.notes, inlined


class _Expansion:
    """The body being expanded, with the closure cells its new names are bound to."""

    def __init__(self, source: FunctionSource):
        self.original = source
        self.func = source.func
        self.definition = copy.deepcopy(source.definition)
        self.cells = dict(zip(self.func.__code__.co_freevars, self.func.__closure__ or ()))
        self.aliases = {}  # id(module or cell) -> the name it is bound to
        self.notes: list[str] = []
        self.calls: list[_Call] = []
        self.refusals = {}  # helper -> why it is not read in

    # --- the body ------------------------------------------------------------------------

    def run(self) -> None:
        body = self.definition.body
        position = 0
        while position < len(body):
            statement = body[position]
            found = self._next_call(statement)
            if found is None:
                position += 1
                continue
            call, helper, stack = found
            replacement = self._expand(statement, call, helper, stack)
            body[position:position + 1] = replacement  # read again: the helper's own calls

    def _next_call(self, statement):
        """(call, helper, the helpers it was read from) of the first helper call to read in, or None."""
        value = _value_of(statement)
        if value is None:
            return None
        resolver = self._resolver()
        stack = getattr(statement, INLINED, ())
        for call, hoistable in _calls_in_order(value, statement):
            root = call.func
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self._local_names():
                continue  # (a variable of the function: what it holds is known only when it runs)
            target = resolver.resolve(call.func)
            problem = self._problem(call, target, stack, hoistable)
            if problem is None:
                return call, target, stack
            if problem:
                self._note(call, problem, target, stack)
        return None

    def _problem(self, call, target, stack, hoistable) -> str | None:
        """Why ``call`` is not read in ('' when it is no helper of the user's), or None."""
        if not isinstance(target, types.FunctionType):
            return _opaque_kind(target)
        if _is_library(target):
            return ""
        if target.__name__ == "<lambda>":
            return "it is a lambda, whose statements willump does not read (define it with 'def')"
        if target is self.func or any(helper is target for helper, _ in stack):
            return "it is recursive"
        if len(self.calls) >= _MAX_HELPERS:
            return f"more than {_MAX_HELPERS} helper calls are read into one function"
        if not hoistable:
            return "code that may run other code is evaluated before it in the same statement (assign its result to a variable first)"
        if model_call(call) is not None:
            return ""  # (a function of the model's output: the model call stays where it is written)
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return "it is called with * or ** arguments"
        reason = self.refusals.get(target)
        if reason is None:
            reason = self.refusals[target] = _unreadable(target) or ""
        if reason:
            return reason
        return _signature_problem(read_function(target).definition.args, target, call)

    def _note(self, call: ast.Call, problem: str, target=None, stack=()) -> None:
        written = ast.unparse(call.func)
        name = getattr(target, "__qualname__", None)
        named = f" ({name})" if isinstance(name, str) and name != written else ""
        where = f" of {stack[-1][0].__qualname__} ({stack[-1][0].__code__.co_filename})" if stack else ""
        note = f"line {call.lineno}{where}: {written}(...){named} runs as one call: {problem}"
        if note not in self.notes:
            self.notes.append(note)

    def _expand(self, statement, call, helper, stack) -> list[ast.stmt]:
        """``statement`` with ``call`` replaced by the helper's statements and their result."""
        try:
            statements, result, target = self._read_in(statement, call, helper)
        except _Refused as refused:
            self.refusals[helper] = str(refused)
            self._note(call, str(refused), helper, stack)
            return [statement]
        self.calls.append(_Call(copy.deepcopy(call.func), helper, helper.__code__, helper.__defaults__,
                                helper.__kwdefaults__))
        tag = (*stack, (helper, call.lineno))
        for node in statements:
            setattr(node, INLINED, tag)
        if target and isinstance(result, ast.Name) and result.id == target:
            return statements  # the helper's statements bind the target
        if target is not None or (isinstance(statement, ast.Return) and statement.value is call):
            final = replace_node(statement, call, result)
            if not isinstance(final, ast.Return):  # (the function's own return stays its own)
                setattr(final, INLINED, tag)
            return statements + [final]
        if not isinstance(result, ast.Name):  # (a name is read where the call was)
            name = _fresh(helper.__name__, self._names_in_use(exclude=call) | _identifiers(ast.Module(statements, [])))
            assignment = ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], result), result)
            setattr(assignment, INLINED, tag)
            statements.append(ast.fix_missing_locations(assignment))
            result = ast.Name(name, ast.Load())
        return statements + [replace_node(statement, call, result)]

    def _read_in(self, statement, call, helper):
        """(the helper's statements, renamed, its arguments bound first; its returned expression;
        the call's simple target, see _simple_target); _Refused when it cannot be read in."""
        definition = copy.deepcopy(read_function(helper).definition)
        body = list(definition.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        mark_written(body, helper)  # (its calls shown, and run as written, as and where it writes them)
        own = _own_names(definition, body)
        taken = self._names_in_use(exclude=call) | (_identifiers(ast.Module(body, type_ignores=[])) - own)
        rebound = _local_names_of(body)
        local_names = self._local_names()
        mapping, prologue = {}, []
        for parameter, value in _bind_arguments(definition.args, helper, call):
            if isinstance(value, _Default):
                value = self._default_expression(parameter, value.value, taken, call)
            if parameter not in rebound and (
                isinstance(value, ast.Constant)
                or (isinstance(value, ast.Name) and (value.id in local_names or value.id in self.cells))
            ):
                mapping[parameter] = value  # read where the parameter is read
                continue
            name = mapping[parameter] = _fresh(parameter, taken)
            taken.add(name)
            prologue.append(ast.fix_missing_locations(
                ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), value)
            ))
        returned = body[-1].value
        target = _simple_target(statement, call)
        for name in sorted(own - set(mapping)):
            if target and isinstance(returned, ast.Name) and returned.id == name and target not in names_read(call):
                mapping[name] = target  # ``X = f(df)`` with ``return X``: the helper binds X itself
                continue
            mapping[name] = _fresh(name, taken)
            taken.add(mapping[name])
        local_names |= {v for v in mapping.values() if isinstance(v, str)}  # (the helper's, once read in)
        for name in sorted(_externals(body, own)):
            replacement = self._external(name, helper, taken, local_names)
            if replacement is not None:
                mapping[name] = replacement
        clash = _scoped_clash(body, mapping)
        if clash:
            raise _Refused(f"{clash!r} is both one of its variables and a comprehension or lambda variable in it")
        body = [_Renamer(mapping).visit(s) for s in body]
        result = body.pop().value
        return prologue + [ast.fix_missing_locations(s) for s in body], result, target

    def _default_expression(self, parameter: str, value, taken: set, call: ast.Call) -> ast.expr:
        """The value ``__defaults__`` holds for a parameter the call leaves out: a constant, or a cell."""
        if type(value) in _CONSTANT_TYPES:
            expression = ast.Constant(value)
        else:
            name = self._cell_name(f"{parameter}_default", types.CellType(value), taken)
            taken.add(name)
            expression = ast.Name(name, ast.Load())
        return ast.fix_missing_locations(ast.copy_location(expression, call))

    def _external(self, name: str, helper, taken: set, local_names: set) -> ast.expr | str | None:
        """How the expanded body reads the helper's global or closure variable ``name`` (None: as written)."""
        code = helper.__code__
        if name in code.co_freevars:
            cell = helper.__closure__[code.co_freevars.index(name)]
            if self.cells.get(name) is cell and name not in local_names:
                return None
            alias = self._cell_name(name, cell, taken - {name}, key=id(cell))  # (it replaces the name itself)
            taken.add(alias)
            return alias
        scope_globals = helper.__globals__
        if name in scope_globals:
            if scope_globals is self.func.__globals__ and name not in self.cells and name not in local_names:
                return None
            owner = _module_of(scope_globals, helper)
        elif hasattr(builtins, name):
            if name not in self.func.__globals__ and name not in self.cells and name not in local_names:
                return None
            owner = builtins
        else:
            raise _Refused(f"it reads {name!r}, which its module does not define")
        base = owner.__name__.rsplit(".", 1)[-1]
        if self.func.__globals__.get(base) is owner and base not in self.cells and base not in local_names:
            alias = base  # the module, as the function itself names it
        else:
            alias = self._cell_name(base, types.CellType(owner), taken, key=id(owner))
            taken.add(alias)
        return ast.Attribute(ast.Name(alias, ast.Load()), name, ast.Load())

    def _cell_name(self, base: str, cell, taken: set, key=None) -> str:
        """The name ``cell`` is bound to in the expanded function (one name per module or cell);
        it is added to ``taken``."""
        if key is not None and key in self.aliases:
            return self.aliases[key]
        callees = {n for call in self.calls for n in _identifiers(call.callee)}  # (Inlined.rebound reads them)
        name = _fresh(base, taken | set(self.cells) | callees)
        self.cells[name] = cell
        if key is not None:
            self.aliases[key] = name
        return name

    # --- scope ---------------------------------------------------------------------------

    def _local_names(self) -> set:
        names = {a.arg for a in _arguments(self.definition.args)}
        for statement in self.definition.body:
            names |= analyze_statement(0, statement).bound
        return names

    def _names_in_use(self, exclude=None) -> set:
        skipped = {id(n) for n in ast.walk(exclude.func)} if exclude is not None else set()
        names = {n for node in ast.walk(self.definition) if id(node) not in skipped for n in _node_names(node)}
        return names | set(self.cells)

    def _resolver(self) -> Resolver:
        return Resolver(self._function(), self.definition)

    def _function(self) -> types.FunctionType:
        """The expanded definition compiled: the function it stands for, with its cells."""
        return _compiled(self.definition, self.func, self.cells, self.original.filename)[0]

    def result(self) -> Inlined:
        unchanged = _unchanged_test(self.calls, self.cells)
        function, unchanged = _compiled(self.definition, self.func, self.cells, self.original.filename, unchanged)
        source = FunctionSource(function, self.definition, self.original.filename, self.original.text,
                                self.original.first_line)
        return Inlined(source, self.func, self.calls, unchanged)


# --- what is read in -------------------------------------------------------------------------


def _value_of(statement: ast.stmt) -> ast.expr | None:
    """The expression of a statement helper calls are read out of."""
    if isinstance(statement, (ast.Assign, ast.AugAssign, ast.Return)) or (
        isinstance(statement, ast.AnnAssign) and statement.simple
    ):
        return statement.value
    return None


def _calls_in_order(value: ast.expr, statement: ast.stmt) -> list:
    """(call, hoistable) for the calls ``value`` always evaluates, in the order they run.

    Hoistable: only names, constants, attribute reads and displays (lists, tuples, dicts without ``**``)
    run before it in the statement
    (its own callee and arguments run before its body anyway), so running it first changes nothing.
    A call read in leaves a name, and the statement is searched again.
    """
    found = []

    def visit(node, pure_before: bool) -> bool:
        """Record the calls ``node`` evaluates; returns whether everything evaluated so far is pure."""
        if isinstance(node, ast.Call):
            pure = visit(node.func, pure_before)
            for argument in node.args:
                pure = visit(argument.value if isinstance(argument, ast.Starred) else argument, pure)
            for keyword in node.keywords:
                pure = visit(keyword.value, pure)
            found.append((node, pure_before))
            return False
        if isinstance(node, ast.Dict):  # keys and values in order (hashed once all are built, but for ``**``)
            pure = pure_before
            for key, item in zip(node.keys, node.values):
                pure = visit(item, visit(key, pure) if key is not None else pure) and key is not None
            return pure
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.List, ast.Tuple)):
            pure = pure_before
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    pure = visit(child, pure)
            return pure and isinstance(node, _PURE)
        return pure_before and isinstance(node, _PURE)  # (not entered: conditional or a scope of its own)

    visit(value, not isinstance(statement, ast.AugAssign) or isinstance(statement.target, ast.Name))
    return found


def _opaque_kind(target) -> str:
    """Why a callee of the user's that is no Python function is not read ('' when it is not the user's)."""
    if target is None or isinstance(target, (type, types.ModuleType)):
        return ""
    if isinstance(target, functools.partial):
        inner = target.func
        if isinstance(inner, types.FunctionType) and not _is_library(inner):
            return "it is a functools.partial, which willump does not read into (call the function itself)"
        return ""
    if isinstance(target, (types.BuiltinFunctionType, types.MethodType, types.MethodWrapperType)):
        owner = getattr(target, "__self__", None)
        if isinstance(target, types.MethodType) or owner is None or isinstance(owner, types.ModuleType):
            return ""
    module = getattr(target, "__module__", None) if not isinstance(target, types.MethodType) else None
    if callable(target) and isinstance(module, str) and _is_user_module(module):
        return (f"it is a {type(target).__name__} (compiled or a callable object, not a 'def' whose source "
                "willump reads)")
    return ""


def _is_user_module(name: str) -> bool:
    module = sys.modules.get(name)
    filename = getattr(module, "__file__", None)
    if module is None or name == "builtins":
        return False
    return filename is None or not _in_library(filename)


def _is_library(func: types.FunctionType) -> bool:
    """Is ``func`` installed code (the standard library, site-packages), not the user's?"""
    return _in_library(func.__code__.co_filename)


def _in_library(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return True
    path = os.path.realpath(filename)
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return any(path.startswith(root + os.sep) for root in _LIBRARY_PATHS)


def _unreadable(helper: types.FunctionType) -> str | None:
    """Why the helper cannot be read in as written, or None."""
    try:
        source = read_function(helper)
    except TypeError as error:
        return f"its source cannot be read ({error})"
    definition = source.definition
    if isinstance(definition, ast.AsyncFunctionDef):
        return "it is an async function"
    args = definition.args
    if args.vararg or args.kwarg:
        return "it takes *args or **kwargs"
    body = definition.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return "it does not end with 'return <value>'"
    own = _own_names(definition, body)
    for node in ast.walk(ast.Module(body, type_ignores=[])):
        line = f"line {getattr(node, 'lineno', definition.lineno)}"
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return f"{line}: it rebinds names outside it ('{type(node).__name__.lower()}')"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return f"{line}: it defines {node.name!r} inside it"
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return f"{line}: it is a generator or coroutine"
        if isinstance(node, ast.Return) and node is not body[-1]:
            return f"{line}: it returns early"
        if isinstance(node, ast.Name) and node.id in _DYNAMIC_SCOPE:
            return f"{line}: it uses {node.id}(), which reads its scope"
        if isinstance(node, ast.Match):
            return f"{line}: it uses a 'match' statement"
        if isinstance(node, ast.Import) and any("." in a.name and not a.asname for a in node.names):
            return f"{line}: it imports a dotted module without 'as'"
    parameters = {a.arg for a in _arguments(args)}
    fresh = set()  # parameters the helper rebound to an object it made (df = df.copy())
    for statement in body:
        analyzed = analyze_statement(0, statement)
        changed = (analyzed.writes - analyzed.bound) if analyzed.binds is not None else set()
        if isinstance(statement, ast.Expr) and not isinstance(statement.value, ast.Constant):
            if names_read(statement) - own or names_read(statement) & parameters:
                return (f"line {statement.lineno}: {ast.unparse(statement.value)} is called for its side "
                        "effects, which willump cannot see")
        elif analyzed.opaque and analyzed.side_effects:
            changed |= analyzed.writes - analyzed.maybe_writes
        outside = sorted(n for n in changed if n not in own or (n in parameters and n not in fresh))
        if outside:
            return (f"line {statement.lineno}: it changes {', '.join(outside)}, which it did not create "
                    "(a side effect willump cannot see)")
        fresh = (fresh - analyzed.bound) | _made_anew(statement, parameters)
    late = _late_lambda(body, own)
    if late:
        return late
    return None


def _made_anew(statement: ast.stmt, parameters: set) -> set:
    """The parameter ``statement`` rebinds to a new object (``df = df.copy()``), as a set."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id in parameters):
        return set()
    return {statement.targets[0].id} if new_object_call(statement.value) else set()


def _late_lambda(body, own) -> str | None:
    """A lambda or generator expression kept for later that reads the helper's locals."""
    consumed = set()
    for node in ast.walk(ast.Module(body, type_ignores=[])):
        if isinstance(node, ast.Call):
            consumed.update(id(a) for a in node.args)
            consumed.update(id(k.value) for k in node.keywords)
    for node in ast.walk(ast.Module(body, type_ignores=[])):
        if isinstance(node, (ast.Lambda, ast.GeneratorExp)) and id(node) not in consumed and names_read(node) & own:
            return f"line {node.lineno}: a lambda or generator expression kept for later reads its variables"
    return None


def _arguments(args: ast.arguments) -> list[ast.arg]:
    return args.posonlyargs + args.args + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]


def _own_names(definition: ast.FunctionDef, body: list) -> set:
    """The helper's local names: its parameters and what its statements bind."""
    names = {a.arg for a in _arguments(definition.args)}
    for statement in body:
        names |= analyze_statement(0, statement).bound
    return names


def _local_names_of(statements) -> set:
    return set().union(*(analyze_statement(0, s).bound for s in statements)) if statements else set()


def _externals(body: list, own: set) -> set:
    return set().union(*(names_read(s) for s in body)) - own


def _bind_arguments(args: ast.arguments, helper, call: ast.Call) -> list:
    """(parameter, expression or _Default): the arguments in the order the call evaluates them, then
    the defaults of the parameters it leaves out (the call matches the signature)."""
    positional = [a.arg for a in args.posonlyargs + args.args]
    keyword_only = [a.arg for a in args.kwonlyargs]
    given = {}
    order = []
    for name, value in zip(positional, call.args):
        given[name] = value
        order.append(name)
    for keyword in call.keywords:
        given[keyword.arg] = keyword.value
        order.append(keyword.arg)
    defaults = dict(zip(positional[len(positional) - len(helper.__defaults__ or ()):], helper.__defaults__ or ()))
    defaults.update(helper.__kwdefaults__ or {})
    bound = [(name, given[name]) for name in order]
    bound += [(name, _Default(defaults[name])) for name in positional + keyword_only if name not in given]
    return bound


@dataclass(frozen=True)
class _Default:
    value: object


def _signature_problem(args: ast.arguments, helper, call: ast.Call) -> str | None:
    """Why ``call`` does not match the helper's signature (it raises TypeError as written), or None."""
    positional = [a.arg for a in args.posonlyargs + args.args]
    keyword_only = [a.arg for a in args.kwonlyargs]
    named = [k.arg for k in call.keywords]
    defaults = set(positional[len(positional) - len(helper.__defaults__ or ()):]) | set(helper.__kwdefaults__ or {})
    if len(call.args) > len(positional) or len(set(named)) != len(named):
        return "the call does not match its signature"
    given = set(positional[:len(call.args)])
    for name in named:
        if name in given or name not in positional + keyword_only or name in {a.arg for a in args.posonlyargs}:
            return "the call does not match its signature"
        given.add(name)
    if any(name not in given and name not in defaults for name in positional + keyword_only):
        return "the call does not match its signature"
    return None


def _substitutable(value: ast.expr, parameter: str, rebound: set, local_names: set) -> bool:
    """Can the argument be written where the parameter is read (no statement binding it)?"""
    if parameter in rebound:
        return False
    return isinstance(value, ast.Constant) or (isinstance(value, ast.Name) and value.id in local_names)


def _simple_target(statement: ast.stmt, call: ast.Call) -> str | None:
    """``X`` of ``X = <call>``, where the helper's returned variable may be X itself; None otherwise.

    Other whole-value forms (``a, b = f()``, ``X: T = f()``) are marked by returning '' (truthy for
    'replace the call in place', never a name)."""
    if isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is call:
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            return targets[0].id
        return ""
    return None


def _scoped_clash(body, mapping) -> str | None:
    """A name bound by a lambda or comprehension inside the helper that the renaming would touch."""
    for node in ast.walk(ast.Module(body, type_ignores=[])):
        if isinstance(node, ast.Lambda):
            bound = {a.arg for a in _arguments(node.args)}
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            bound = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
        else:
            continue
        for name in sorted(bound & set(mapping)):
            return name
    return None


def _module_of(scope_globals: dict, helper):
    """The module whose namespace ``scope_globals`` is (ValueError when there is none to read it from)."""
    module = sys.modules.get(helper.__module__)
    if module is not None and getattr(module, "__dict__", None) is scope_globals:
        return module
    for module in list(sys.modules.values()):
        if getattr(module, "__dict__", None) is scope_globals:
            return module
    raise _Refused(f"its globals are not a module's ({helper.__module__!r} is not imported)")


class _Refused(Exception):
    """Why a helper cannot be read in at this call."""


def _fresh(base: str, taken: set) -> str:
    if base not in taken:
        return base
    return next(f"{base}_{n}" for n in itertools.count(2) if f"{base}_{n}" not in taken)


def _node_names(node) -> tuple:
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.arg):
        return (node.arg,)
    if isinstance(node, ast.alias):
        return ((node.asname or node.name).split(".")[0],)
    if isinstance(node, ast.ExceptHandler) and node.name:
        return (node.name,)
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return (node.name,)
    return ()


def _identifiers(tree) -> set:
    return {n for node in ast.walk(tree) for n in _node_names(node)}


class _Renamer(ast.NodeTransformer):
    """Renames the helper's names: str -> that name; an expression -> a copy of it (reads only)."""

    def __init__(self, mapping: dict):
        self.mapping = mapping

    def visit_Name(self, node):
        new = self.mapping.get(node.id)
        if new is None:
            return node
        if isinstance(new, str):
            return ast.copy_location(ast.Name(new, node.ctx), node)
        return ast.copy_location(copy.deepcopy(new), node)

    def visit_ExceptHandler(self, node):
        if node.name in self.mapping:
            node.name = self.mapping[node.name]
        return self.generic_visit(node)

    def visit_alias(self, node):
        bound = (node.asname or node.name).split(".")[0]
        if isinstance(self.mapping.get(bound), str):
            node.asname = self.mapping[bound]
        return node


def _unchanged_test(calls: list, cells: dict) -> ast.expr:
    """``callee is <helper> and callee.__code__ is <its code> and ...`` for every call read in, the
    objects read in bound to new cells (added to ``cells``): compiled, a check of a few hundred ns."""
    tests = []
    for position, call in enumerate(calls):
        expected = {None: call.helper, "__code__": call.code, "__defaults__": call.defaults,
                    "__kwdefaults__": call.kwdefaults}
        for attribute, value in expected.items():
            name = f"__willump_read_in_{position}{attribute or ''}"
            cells[name] = types.CellType(value)
            current = copy.deepcopy(call.callee)
            if attribute is not None:
                current = ast.Attribute(current, attribute, ast.Load())
            tests.append(ast.Compare(current, [ast.Is()], [ast.Name(name, ast.Load())]))
    return ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0]


def _compiled(definition, func, cells: dict, filename: str, test: ast.expr | None = None):
    """(the function ``definition`` compiles to, with ``func``'s globals, defaults and name and the
    closure ``cells``; a function returning ``test`` evaluated in its scope)."""
    inner = copy.deepcopy(definition)
    inner.decorator_list = []
    inner.returns = None
    for argument in _arguments(inner.args):
        argument.annotation = None
    inner.args.defaults = [ast.Constant(None) for _ in inner.args.defaults]
    inner.args.kw_defaults = [None if d is None else ast.Constant(None) for d in inner.args.kw_defaults]
    checker = ast.FunctionDef(
        "__willump_callees", ast.arguments([], [], None, [], [], None, []),
        [ast.Return(test if test is not None else ast.Constant(None))], [], None,
        **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}),
    )
    outer_body = [ast.Assign([ast.Name(name, ast.Store())], ast.Constant(None)) for name in cells]
    outer_body += [inner, checker, ast.Return(ast.Tuple([ast.Name(inner.name, ast.Load()),
                                                         ast.Name(checker.name, ast.Load())], ast.Load()))]
    outer = ast.FunctionDef("__willump_outer", ast.arguments([], [], None, [], [], None, []), outer_body, [], None,
                            **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}))
    for node in ast.walk(outer):
        if "lineno" in node._attributes and getattr(node, "lineno", None) is None:
            node.lineno = node.end_lineno = definition.lineno
            node.col_offset = node.end_col_offset = 0
    module = ast.fix_missing_locations(ast.Module([outer], type_ignores=[]))
    code = compile(module, filename, "exec", dont_inherit=True)
    outer_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    made = []
    for name in (inner.name, checker.name):
        inner_code = next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
        closure = tuple(cells[v] for v in inner_code.co_freevars)
        made.append(types.FunctionType(inner_code, func.__globals__, name, None, closure))
    function, checker_function = made
    function.__code__ = function.__code__.replace(co_qualname=func.__qualname__)
    function.__qualname__ = func.__qualname__
    function.__defaults__, function.__kwdefaults__ = func.__defaults__, func.__kwdefaults__
    function.__module__, function.__doc__ = func.__module__, func.__doc__
    return function, checker_function
