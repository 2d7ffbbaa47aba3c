"""Call sites: the calls in the user's code that a compiled kernel may answer.

At decoration, ``rewrite_calls`` turns each call whose callee is named like a
compiled operator (``v.transform(x)``, ``model.predict_proba(X)``,
``sp.hstack([...])``) into ``site(v.transform, x)``: the callee is still
evaluated first, as in the original. At run time the site looks at the object
the callee really is; when a kernel reproduces it for this input, the kernel
answers, and otherwise the original call runs. The answer is the same either
way; only the time differs. A whole element-wise expression over names
(``digits / (length + 1)``) becomes one site too, whose callee computes it as
written (``expressions``).
"""

import ast
import builtins
import copy
import operator
import threading
import time
import types
import weakref
from types import BuiltinFunctionType, BuiltinMethodType, FunctionType, MethodType, ModuleType

import pandas as pd

from willump.compile import registry
from willump.compile.parallel import SERIAL, WORTH_A_THREAD
from willump.compile.datetimes import FIELDS as DATETIME_FIELDS
from willump.compile.datetimes import datetime_field
from willump.compile.categories import may_cast_to_categories
from willump.compile.columns import column_read
from willump.compile.expressions import OPERAND, PLAIN, expression_function, is_element_wise, leading_operand
from willump.compile.forms import Columns, Deferred, DeferredMethod, Unsupported
from willump.compile.forest import shared_builds
from willump.compile.frames import frame_to_numpy, frame_values, set_column
from willump.compile.lookups import loc_lookup
from willump.compile.strings import COLUMN_STR_METHODS, column_str_method

SITE_PREFIX = "__willump_site_"
PLAIN_PREFIX = "__willump_plain_"
LIBRARIES = frozenset({"pandas", "numpy", "scipy", "sklearn", "lightgbm", "xgboost"})  # whose calls willump compiles
_BUILTINS = frozenset(dir(builtins))  # len(x), float(v): Python's own, never a library's operator
_REFUSED = object()  # a kernel's answer when it does not reproduce the call
_BUILT_ANYWAY = 3  # kept values built by the original operation before a site computes its result at once


def as_written(node: ast.AST) -> str:
    """``node``'s code as the user wrote it: a helper's, read into the function, as in the helper (before its
    names were bound to the call's, ``mark_written``)."""
    return getattr(node, "willump_written", None) or ast.unparse(node)


def mark_written(statements: list, helper: types.FunctionType) -> None:
    """Keep each expression's code in ``statements``, a ``helper``'s, as written (``as_written``, once they
    are renamed) and where: its file, module and name (``written_in``), for tracebacks and warnings."""
    filename = helper.__code__.co_filename
    where = (filename, helper.__module__, f"{helper.__qualname__} ({filename})")
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, (ast.expr, ast.Assign)) and not isinstance(node, (ast.Name, ast.Constant)):
                node.willump_written, node.willump_written_in = ast.unparse(node), where


class CallSite:
    """One rewritten call: picks the kernel for its callee and counts what ran."""

    def __init__(self, name: str, call: ast.expr | None = None, workers=SERIAL):
        self.name = name
        self.line, self.source = (call.lineno, as_written(call)) if call is not None else (None, name)
        self.workers = workers
        self.defers = False  # its result only reaches other call sites: it may stay in a kernel's form
        self.deferred = 0  # results it kept that only the original operation builds (Deferred.built_as_written)
        self.materialized = 0  # of those, the ones something built
        self.cost = 0.0  # seconds per compiled call, a moving average
        self.overlaps = False  # deferred, and other calls run before its result is read: a worker may compute it
        self.callee = getattr(call, "func", None)  # the callee expression, as written
        self.helper = None  # the function the rewritten call goes through instead, if any
        self.operator = None  # e.g. "TfidfVectorizer.transform", once the callee was seen
        self.reason = "not called yet"  # why the last call ran as written, or None
        self.said = False  # named in a warning as running as written, no kernel standing for its callee
        self.repeated = False  # written in code that may run many times per call (a loop, a lambda...)
        self.where = ""  # the function (and file) it is written in, for that warning
        self.last_plain = None  # why the last call that ran as written did (kept past compiled calls)
        self.calls = 0
        self.compiled_calls = 0
        self.whole_calls = 0  # answered by a program for the whole call instead (see programs)
        self._cache = None  # (owner (with no kernel: ``_weakly(owner)``), function, kernel or None, fingerprint)
        self._shared = None  # the kernel, when it is one of registry.RECEIVER_KERNELS
        self._lock = threading.Lock()
        self.as_written = _as_written  # (rewrite_calls gives one that runs at the user's line: written_at)

    def __call__(self, callee, /, *args, **kwargs):
        waiting = getattr(_outstanding, "pending", None)  # results workers are still computing
        if waiting:
            args = [_ready(a) for a in args]
            kwargs = {k: _ready(v) for k, v in kwargs.items()}
        kernel = self.kernel(callee)
        self.calls += 1
        if kernel is not None:
            if getattr(_outstanding, "kept", None) and not getattr(kernel, "reads_columns", False):
                args, kwargs = [_selected(a) for a in args], {k: _selected(v) for k, v in kwargs.items()}
            inputs = (callee.__self__, *args) if getattr(kernel, "takes_receiver", False) else args
            deferring = self._keeps(kernel)
            if deferring and self.overlaps and self.cost >= WORTH_A_THREAD:
                pending = self.workers.try_submit(self._measured, kernel.defer, inputs, kwargs)
                if pending is not None:  # computed by a worker while this thread goes on
                    result = Pending(pending, self.as_written, callee, args, kwargs)
                    if getattr(_outstanding, "pending", None) is None:
                        _outstanding.pending = []
                    _outstanding.pending.append(result)
                    return result
            if deferring and hasattr(kernel, "defer_lazily") and not waiting:
                run = kernel.defer_lazily  # computed by whoever needs it (while workers compute, compute now)
            else:
                run = kernel.defer if deferring else kernel
            result = (self._measured if self.overlaps else self._attempt)(run, inputs, kwargs)  # (the cost decides only that)
            if result is not _REFUSED:
                if isinstance(result, Deferred):
                    if result.built_as_written:
                        result.kept_by = self
                        self.deferred += 1
                    kept = getattr(_outstanding, "kept", None)
                    if kept is not None:
                        kept.append(result)
                return result
        _settle()  # an earlier call computed by a worker may have to raise first, as in the original order
        for value in getattr(_outstanding, "kept", None) or ():  # the callee may change its arguments in place
            value.protect()
        return self.as_written(callee, args, kwargs)

    def _keeps(self, kernel) -> bool:
        """Whether its result may stay in the kernel's form: not once most of the values it kept were
        built by the original operation all the same (a merge whose frame Python reads: the joins'
        preparation would be work done twice)."""
        if not (self.defers and hasattr(kernel, "defer")):
            return False
        return self.materialized < _BUILT_ANYWAY or self.materialized * 4 < self.deferred * 3

    def _measured(self, kernel, args, kwargs):
        """``_attempt``, its time kept in the moving average ``cost``, where it runs (here, or on a
        worker: work that became cheap, such as a first call's compilation, comes back here)."""
        started = time.perf_counter()
        result = self._attempt(kernel, args, kwargs)
        if result is not _REFUSED:
            self.cost = 0.8 * self.cost + 0.2 * (time.perf_counter() - started)
        return result

    def _attempt(self, kernel, args, kwargs):
        """The kernel's answer, or _REFUSED (and why) when the call must run as written."""
        try:
            result = kernel(*args, **kwargs)
        except Unsupported as problem:
            self.reason = f"this input: {problem}"
        except Exception as error:  # a kernel must never change the answer: the call runs as written
            self.reason = f"the kernel failed ({type(error).__name__}: {error})"
        else:
            self.compiled_calls += 1
            self.reason = None
            return result
        self.last_plain = self.reason
        return _REFUSED

    def kernel(self, callee):
        """The kernel for ``callee``, built once per object and rebuilt when the object changes."""
        shared = registry.receiver_kernel(callee)
        if shared is not None:  # one kernel for every receiver
            if self.operator is None:
                self.operator = registry.describe(callee)
            self._shared = shared
            return shared
        self._shared = None
        owner = getattr(callee, "__self__", None)
        function = getattr(callee, "__func__", callee)
        cached = self._cache
        if cached is not None and cached[1] is function:
            kernel = cached[2]
            if kernel is not None:
                if cached[0] is owner and kernel.still_valid():
                    return kernel
            elif cached[0]() is owner and cached[3] == _fingerprint(owner):
                return None
        with self._lock:
            kernel, reason = registry.kernel_for(callee, self.workers)
            if self.operator is None:
                self.operator = registry.describe(callee)
            if reason:
                self.reason = reason
                self._say_plain(callee, owner)
            self._cache = (owner if kernel is not None else _weakly(owner), function, kernel, _fingerprint(owner))
        return kernel

    def _say_plain(self, callee, owner) -> None:
        """Have the next warning name this call (once) when no kernel stands for its callee, a library's
        (``KNNImputer.transform``, a model of options no kernel takes), as ``PlainCall`` has them named."""
        if self.said or self.line is None or self.repeated:  # (a model call of a cascade or filter has no line of
            return  # its own; calls in loops, comprehensions and lambdas are not named, as PlainCall leaves them)
        method = getattr(callee, "__name__", None) if owner is not None else None
        if _library_operator(owner if owner is not None else callee, method) is not None:
            self.said = True
            with _newly_plain_lock:
                _newly_plain.append(self)

    listed = True  # shown by explain_compilation

    def found(self) -> tuple:
        """(object, function, kernel) of the last callee: its method's object (None for a function)
        and function, and the kernel answering it (None when it runs as written)."""
        if self._shared is not None:
            return None, None, self._shared
        if self._cache is None:
            return None, None, None
        owner, function, kernel, _ = self._cache
        return (owner if kernel is not None else owner()), function, kernel

    def summary(self) -> dict:
        kernel = self.found()[2]
        compiled = kernel is not None
        answered = self.reason is None or (self.whole_calls and not self.calls)  # (only by programs)
        status = "compiled" if compiled and answered else f"plain Python: {self.reason}"
        if status == "compiled" and getattr(kernel, "how", None):  # e.g. a model answered by its library
            status = f"compiled, {kernel.how}"
        plain_calls = self.calls - self.compiled_calls
        if compiled and self.last_plain and plain_calls > 0 and self.compiled_calls:
            status = f"compiled, {plain_calls} of {self.calls} calls plain Python (the last: {self.last_plain})"
        return {
            "line": self.line, "call": self.source, "operator": self.operator, "status": status,
            "calls": self.calls + self.whole_calls, "compiled_calls": self.compiled_calls + self.whole_calls,
            "fused_calls": getattr(kernel, "fused_calls", 0),  # answered in one kernel with the calls feeding it
            "whole_calls": self.whole_calls,
            "kept": self._keeps(kernel),  # its result may stay in the kernel's form
        }


class ExpressionSite(CallSite):
    """A rewritten element-wise expression, ``site(site.expression, *names)``. With only numbers and
    numpy arrays among the values it runs as written at once: no kernel is faster than numpy there."""

    expression = None  # the function computing the expression as written, from the names it reads

    def __call__(self, callee, /, *args):
        if PLAIN.issuperset(map(type, args)) and not getattr(_outstanding, "pending", None) and not getattr(
            _outstanding, "kept", None
        ):  # (otherwise the call site's own path: values kept so far are settled before it runs as written)
            self.calls += 1
            self.reason = self.last_plain = "this input: numbers and numpy arrays only (numpy computes those as fast)"
            return callee(*args)
        return CallSite.__call__(self, callee, *args)


class ColumnSite(CallSite):
    """A rewritten ``frame[key] = value``, ``site(set_column, value, frame, key)``: None once the kernel
    set the column, else ``(value, key)`` for the statement to set as written. What is not a DataFrame
    (a dict, a list, an array) is not counted as a call (the site is listed once it met a DataFrame)."""

    def __call__(self, callee, value, frame, key):
        if type(frame) is not pd.DataFrame:
            return value, key
        kernel = self.kernel(callee)
        self.calls += 1
        if kernel is not None and self._attempt(kernel, (value, frame, key), {}) is not _REFUSED:
            return None
        return value, key

    @property
    def listed(self) -> bool:
        return self.calls > 0


class PlainCall:
    """A call named like no compiled operator: it runs as written, counted, through ``plain(obj).method(...)``
    (the receiver passed through: Python still makes a method call, with the same traceback lines) or
    ``plain(callee)(...)``. Once the receiver or callee is seen to be a library's (pandas' ``get_dummies``,
    a DataFrame's ``apply``, numpy's ``select``), ``explain_compilation`` lists the call and a WillumpWarning
    names it (``take_newly_plain``): what willump does not compile is said, not silent. What it is is
    decided by type, once per type met (no attribute of the user's objects is read)."""

    def __init__(self, name: str, call: ast.Call, written: str, where: str):
        method = call.func.attr if isinstance(call.func, ast.Attribute) else None
        self.name, self.source, self.method, self.where = name, written, method, where
        self.line = call.func.end_lineno if method else call.lineno  # (Python's line for a method call)
        self.key = (call.lineno, call.col_offset, call.end_lineno, call.end_col_offset)  # (one per call as written)
        self.operator = None  # e.g. "pandas.get_dummies", once a library's callee was seen
        self.calls = 0
        self._kind = None  # the type of the last receiver or callee looked at

    def __call__(self, value):
        self.calls += 1
        if self.operator is None and type(value) is not self._kind:
            self._kind = type(value)
            operator = _library_operator(value, self.method)
            if operator is not None:
                with _newly_plain_lock:
                    if self.operator is None:  # (threads making first calls at once: named once)
                        self.operator = operator
                        _newly_plain.append(self)
        return value

    @property
    def listed(self) -> bool:
        return self.operator is not None

    def summary(self) -> dict:
        return {
            "line": self.line, "call": self.source, "operator": self.operator,
            "status": f"plain Python: no kernel stands for {self.operator} as called here", "calls": self.calls,
            "compiled_calls": 0, "fused_calls": 0, "whole_calls": 0, "kept": False,
        }


_newly_plain = []  # PlainCalls that met a library's callee (CallSites no kernel stands for), not yet named in a warning
_newly_plain_lock = threading.Lock()


def put_back_plain(calls: list) -> None:
    """Give back PlainCalls taken but not yet named (a warning that could not be given): the next ask takes them."""
    with _newly_plain_lock:
        _newly_plain[:0] = calls


def take_newly_plain() -> list:
    """The PlainCalls that met a library's callee since the last time this was asked (oldest first)."""
    if not _newly_plain:  # (every call asks: no lock when there is nothing new)
        return []
    with _newly_plain_lock:
        taken = _newly_plain[:]
        _newly_plain.clear()
    return taken


def _library_operator(value, method: str | None) -> str | None:
    """The name of the operator called, if it is one of the LIBRARIES' and exists: ``value`` is the receiver
    of ``method`` (a module, a class or an object: ``frame.apply`` is pandas', ``" ".join`` is not), or the
    callee itself when ``method`` is None. Read from types and modules only."""
    kind = type(value)
    if method is None and kind in (MethodType, BuiltinMethodType) and not isinstance(value.__self__, ModuleType):
        value, method = value.__self__, value.__name__  # (a bound method, by its object's class)
        kind = type(value)
    if isinstance(value, ModuleType):
        module = value.__name__
        found = type(module) is str and module.partition(".")[0] in LIBRARIES and type(method) is str and hasattr(value, method)
        return f"{module}.{method}" if found and method else None
    if method is None:  # a function, a class, or a library's callable object (a ufunc)
        itself = kind in (FunctionType, BuiltinFunctionType) or isinstance(value, type)
        module = value.__module__ if itself else kind.__module__
        if not (type(module) is str and module.partition(".")[0] in LIBRARIES):
            return None
        package, name = module.partition(".")[0], getattr(value, "__name__", None)  # (a library's object)
        if type(name) is str and getattr(__import__(package), name, None) is value:
            return f"{package}.{name}"  # pandas.get_dummies rather than where pandas defines it
        return registry.describe(value)
    owner = value if isinstance(value, type) else kind
    module = owner.__module__
    if not (type(module) is str and module.partition(".")[0] in LIBRARIES and hasattr(owner, method)):
        return None
    return f"{owner.__name__}.{method}"


class Pending:
    """A deferred result a worker thread is computing; only call sites ever see it."""

    def __init__(self, future, as_written, callee, args, kwargs):
        self.future, self.as_written, self.callee, self.args, self.kwargs = future, as_written, callee, args, kwargs

    _done = False

    def result(self):
        if not self._done:
            value = self.future.result()
            if value is _REFUSED:  # the kernel refused this input: the call runs as written
                value = self.as_written(self.callee, self.args, self.kwargs)
            self._value, self._done = value, True
        return self._value


_outstanding = threading.local()  # the current call's .pending worker results (oldest first)
# and .kept values in kernel form


def begin_call():
    """Start tracking what one call keeps in kernel form or hands to workers; returns what
    ``end_call`` restores (calls may nest)."""
    outer = (getattr(_outstanding, "kept", None), getattr(_outstanding, "pending", None))
    _outstanding.kept, _outstanding.pending = [], None
    return outer


def end_call(outer) -> None:
    _outstanding.kept, _outstanding.pending = outer


def _settle() -> None:
    """Read this call's worker results, oldest first (raising what they raise)."""
    for pending in getattr(_outstanding, "pending", None) or ():
        pending.result()


def _ready(value):
    """``value`` with results still being computed by workers waited for."""
    return _converted(value, Pending, Pending.result)


def _selected(value):
    """``value``, a frame kept as ``Columns`` built (for a kernel reading frames only)."""
    return value.materialize() if isinstance(value, Columns) else value


def _real(value):
    """The argument the original call gets: compiled forms built into the real objects."""
    return _converted(value, Deferred, Deferred.materialize)


def _converted(value, kind: type, convert):
    """``convert(value)`` for a ``kind``, also for the elements of a list or tuple written in the call."""
    if isinstance(value, kind):
        return convert(value)
    if type(value) in (list, tuple) and any(isinstance(v, kind) for v in value):
        return type(value)(convert(v) if isinstance(v, kind) else v for v in value)
    return value


def _as_written(callee, args, kwargs):
    """The original call, given real objects."""
    return callee(*[_real(a) for a in args], **{k: _real(v) for k, v in kwargs.items()})


def written_at(filename: str, line: int, module: str):
    """``_as_written`` in a function whose code is at ``filename``'s ``line``, in ``module``'s name: the
    warnings pandas and numpy give name the first frame outside them, so that they point at the user's
    line and module (``site.as_written``; a filter by module applies), not at willump; tracebacks list it
    as the call as written."""
    tree = ast.parse("def as_written(callee, args, kwargs): "
                     "return callee(*[real(a) for a in args], **{k: real(v) for k, v in kwargs.items()})")
    ast.increment_lineno(tree, line - 1)
    namespace = {"real": _real, "__name__": module}
    exec(compile(ast.fix_missing_locations(tree), filename, "exec"), namespace)
    function = namespace["as_written"]
    function.__code__ = function.__code__.replace(co_name=AS_WRITTEN)
    return function


AS_WRITTEN = "<the call as written, run by willump>"  # (how a traceback names the frame)


def _weakly(owner):
    """A callable giving ``owner`` back while it lives (None when it has died): a site does not keep
    the receiver of a call no kernel answers alive after the call (a batch's frame); objects without
    weak references (dicts, lists, strings) are held."""
    try:
        return weakref.ref(owner)
    except TypeError:
        return lambda: owner


def _fingerprint(owner) -> int:
    """Changes when a not-yet-compilable object is fitted (fitting adds attributes)."""
    return len(getattr(owner, "__dict__", ())) if owner is not None else 0


class _Rewriter(ast.NodeTransformer):
    def __init__(self, sites: list, make_site, filename: str, column_lists, plain_calls, where: str, module: str):
        self.sites, self.make_site, self.column_lists = sites, make_site, column_lists
        self.plain_calls, self.function = plain_calls, (filename, module, where)
        self.repeated = 0  # inside code that may run many times per call (loops, lambdas, comprehensions, defs)

    def written_in(self, node) -> tuple:
        """(file, module, function as named in warnings) of the code ``node`` was written in: a helper's, read in
        (``mark_written``), or the function's."""
        return getattr(node, "willump_written_in", self.function)

    def visit_Call(self, node: ast.Call):
        if not self.repeated and is_element_wise(node):  # np.log1p(x)
            return self._expression_site(node)
        if not self.repeated:  # s.map(d).fillna(0): the lookup a site, then the rest an expression of its result
            site = self._operand_site(node)
            if site is not None:
                return site
        written = as_written(node)  # before the calls inside it become sites
        node.func.willump_called = True  # (``d.values()`` is not ``frame.values``)
        to_numpy = _array_of_frame(node.func, "to_numpy")  # (before ``frame[key]`` becomes a site)
        self.generic_visit(node)
        if not self.repeated and to_numpy and all(
                isinstance(n, _INERT + (ast.Attribute,)) for a in [*node.args, *node.keywords] for n in ast.walk(a)):
            return self._helper_site(node, written, frame_to_numpy, TO_NUMPY, [node.func.value, *node.args],
                                     node.keywords)
        column = _column_str_call(node)
        if column is not None:  # frame["column"].str.lower() -> site(column_str_method, frame, "column", "lower")
            arguments = [*column[:2], ast.Constant(node.func.attr), *column[2:]]
            return self._helper_site(node, written, column_str_method, COLUMN_STR, arguments, [])
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name not in registry.NAMES or name.startswith(SITE_PREFIX) or (name == "astype" and not may_cast_to_categories(node)) or (
                any(k.arg == "inplace" for k in node.keywords)):  # (pandas counts the receiver's references: a site holds more)
            return self._plain_call(node, written)
        site = self.make_site(node, written, self.written_in(node))
        site.repeated = self.repeated > 0
        self.sites.append(site)
        call = ast.Call(ast.Name(site.name, ast.Load()), [func] + node.args, node.keywords)
        return ast.copy_location(call, node)

    def _plain_call(self, node: ast.Call, written: str):
        """``obj.method(...)`` -> ``plain(obj).method(...)``, ``callee(...)`` -> ``plain(callee)(...)``
        (``PlainCall``), outside code that may run many times per call; not Python's builtins, willump's helpers,
        or ``site(...).tocsr()``, which whole-call programs read."""
        func = node.func
        if self.repeated or self.plain_calls is None or (
                isinstance(func, ast.Name) and (func.id in _BUILTINS or func.id.startswith("__willump"))):
            return node
        if isinstance(func, ast.Attribute) and func.attr == "tocsr" and isinstance(func.value, ast.Call) and isinstance(
                func.value.func, ast.Name) and func.value.func.id.startswith(SITE_PREFIX):
            return node
        plain = PlainCall(f"{PLAIN_PREFIX}{len(self.plain_calls)}", node, written, self.written_in(node)[2])
        known = next((p for p in self.plain_calls if p.key == plain.key), None)
        if known is None:
            self.plain_calls.append(plain)
        elif "__willump" in known.source and "__willump" not in written:  # (a path's rewriting: the call as written)
            known.source = written
        passed = func.value if isinstance(func, ast.Attribute) else func
        through = ast.copy_location(ast.Call(ast.Name((known or plain).name, ast.Load()), [passed], []), passed)
        if isinstance(func, ast.Attribute):
            func.value = through
        else:
            node.func = through
        return node

    def visit_Assign(self, node: ast.Assign):
        """``frame[key] = value`` (outside loops, a name indexed by one key) ->
        ``if (unset := site(set_column, value, frame, key)) is not None: frame[unset[1]] = unset[0]``:
        value, frame and key evaluated in Python's order, and set as written (in the user's code, where
        pandas' warnings point) unless the kernel set the column."""
        target = node.targets[0]
        if self.repeated or len(node.targets) != 1 or not (
                isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and not isinstance(target.slice, (ast.Slice, ast.Tuple))):
            return self.generic_visit(node)
        written = as_written(node)
        self.generic_visit(node)
        site = self.make_site(node, written, self.written_in(node), ColumnSite)
        site.helper = set_column
        self.sites.append(site)
        call = ast.Call(ast.Name(site.name, ast.Load()), [ast.Name(SET_COLUMN, ast.Load()), node.value, target.value,
                                                          target.slice], [])
        unset = ast.NamedExpr(ast.Name(UNSET, ast.Store()), call)
        test = ast.Compare(unset, [ast.IsNot()], [ast.Constant(None)])
        part = lambda i: ast.Subscript(ast.Name(UNSET, ast.Load()), ast.Constant(i), ast.Load())  # noqa: E731
        assign = ast.Assign([ast.Subscript(ast.Name(target.value.id, ast.Load()), part(1), ast.Store())], part(0))
        return ast.copy_location(ast.If(test, [assign], []), node)

    def visit_Attribute(self, node: ast.Attribute):
        """``frame.values`` (read, not called) -> ``site(frame_values, frame)``; ``series.dt.<field>``
        -> ``site(datetime_field, series, "<field>")``."""
        if self.repeated or getattr(node, "willump_called", False) or not isinstance(node.ctx, ast.Load):
            return self.generic_visit(node)
        written = as_written(node)
        accessor = node.value
        if node.attr in DATETIME_FIELDS and isinstance(accessor, ast.Attribute) and accessor.attr == "dt":
            self.generic_visit(accessor)
            return self._helper_site(node, written, datetime_field, DATETIME_FIELD,
                                     [accessor.value, ast.Constant(node.attr)], [])
        if not _array_of_frame(node, "values"):
            return self.generic_visit(node)
        self.generic_visit(node)
        return self._helper_site(node, written, frame_values, VALUES, [node.value], [])

    def _helper_site(self, node, written: str, helper, name: str, args: list, keywords: list):
        """``site(<name>, *args, **keywords)``: a site whose callee is ``helper``, read as ``name``."""
        site = self.make_site(node, written, self.written_in(node))
        site.helper = helper
        self.sites.append(site)
        call = ast.Call(ast.Name(site.name, ast.Load()), [ast.Name(name, ast.Load()), *args], keywords)
        return ast.copy_location(call, node)

    def visit_Subscript(self, node: ast.Subscript):
        """``table.loc[keys]`` (read, one key expression) -> ``site(loc_lookup, table.loc, keys)``;
        ``frame[columns]`` (read; a list of str, a name holding one, or a sum of these) -> ``site(getitem, frame,
        columns)``."""
        written = as_written(node)
        columns = not self.repeated and _column_list(node.slice, self.column_lists)  # (names and str: left as written)
        if columns:
            node.value = self.visit(node.value)
        else:
            self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load):
            return node
        loc = node.value
        if isinstance(loc, ast.Attribute) and loc.attr == "loc" and not isinstance(node.slice, (ast.Tuple, ast.Slice)):
            return self._helper_site(node, written, loc_lookup, LOC, [loc, node.slice], [])  # (not table.loc[a:b])
        if columns:
            return self._helper_site(node, written, operator.getitem, GETITEM, [node.value, node.slice], [])
        return node

    def visit_BinOp(self, node):
        """A whole element-wise expression, ``digits / (length + 1)`` -> ``site(site.expression, digits, length)``
        (``site.expression`` computes it as written); only the names are read before it runs."""
        if not self.repeated and is_element_wise(node):
            return self._expression_site(node)
        site = self._operand_site(node) if not self.repeated else None  # s.map(d).fillna(0) > 1
        return site if site is not None else self.generic_visit(node)

    visit_UnaryOp = visit_Compare = visit_BinOp

    def _expression_site(self, node, written=None, operand=None):
        """``operand``: the node computing the value of the expression's OPERAND name, evaluated first."""
        site = self.make_site(node, written or as_written(node), self.written_in(node), ExpressionSite)
        self.sites.append(site)
        site.expression, parameters = expression_function(node, self.written_in(node)[0])
        site.kernel(site.expression)  # built now: the first call is fast
        callee = ast.Attribute(ast.Name(site.name, ast.Load()), "expression", ast.Load())
        arguments = [operand if p == OPERAND else ast.Name(p, ast.Load()) for p in parameters]
        call = ast.Call(ast.Name(site.name, ast.Load()), [callee, *arguments], [])
        return ast.copy_location(call, node)

    def _operand_site(self, node):
        """A chain of compiled methods on a value computed otherwise, ``s.map(d).fillna(0).astype(int) > 1``:
        an expression of that value (evaluated first, as in the original), else None."""
        found = leading_operand(node)
        if found is None:
            return None
        parent, field, operand = found
        written = as_written(node)
        setattr(parent, field, ast.copy_location(ast.Name(OPERAND, ast.Load()), operand))
        if not is_element_wise(node):
            setattr(parent, field, operand)
            return None
        return self._expression_site(node, written, self.visit(operand))

    def _repeated_code(self, node):
        """Arithmetic there is mostly on numbers, one element at a time: a site's few microseconds
        would cost more than they save, so there only calls become sites."""
        self.repeated += 1
        try:
            return self.generic_visit(node)
        finally:
            self.repeated -= 1

    visit_For = visit_AsyncFor = visit_While = visit_Lambda = _repeated_code
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _repeated_code
    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _repeated_code


def _array_of_frame(node, attribute: str) -> bool:
    """Whether ``node`` reads ``<name>.<attribute>`` or ``<name>[<key>].<attribute>``."""
    if not (isinstance(node, ast.Attribute) and node.attr == attribute and isinstance(node.ctx, ast.Load)):
        return False
    receiver = node.value
    return isinstance(receiver, ast.Name) or isinstance(receiver, ast.Subscript) and isinstance(receiver.value, ast.Name)


def _column_list(key, column_lists) -> bool:
    """Whether a subscript's ``key`` is a list of str constants, a name ``column_lists`` says holds one,
    or a sum of these (``df[NUMERIC + CATEGORICAL]``)."""
    if isinstance(key, ast.BinOp) and isinstance(key.op, ast.Add):
        return _column_list(key.left, column_lists) and _column_list(key.right, column_lists)
    if isinstance(key, ast.List):
        return bool(key.elts) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in key.elts)
    return isinstance(key, (ast.Name, ast.Attribute)) and column_lists(key)


def _column_str_call(node: ast.Call):
    """The arguments of ``column_str_method`` but the method's name (frame, column[, True]) for a call written
    ``frame[<str>].str.<method>()`` (or ``frame.<column>.str.<method>()``), else None."""
    func = node.func
    if node.args or node.keywords or not isinstance(func, ast.Attribute) or func.attr not in COLUMN_STR_METHODS:
        return None
    accessor = func.value
    read = column_read(accessor.value) if isinstance(accessor, ast.Attribute) and accessor.attr == "str" else None
    if read is None:
        return None
    return [accessor.value.value, ast.Constant(read[1])] + ([ast.Constant(True)] if read[2] else [])  # (the frame's Name)


def rewrite_calls(nodes: list, sites: list, workers=SERIAL, filename: str = "<unknown>", column_lists=None,
                  plain_calls: list | None = None, where: str = "", module: str = "__main__") -> list:
    """Copies of ``nodes`` with compilable calls going through new CallSites (appended to ``sites``)
    and, given ``plain_calls``, other calls through PlainCalls (appended there, one per call as written;
    ``where``: the function's name, for their warning; ``module``: its module's name, for warnings);
    ``filename`` is the source's, for the functions computing element-wise expressions;
    ``column_lists(key)``: whether a name indexing a frame holds a list of column names (a name of one
    column stays pandas' own, read by text programs)."""

    def make_site(call, written, written_in, kind=CallSite):
        site = kind(f"{SITE_PREFIX}{len(sites)}", call, workers)
        site.source = written
        site.as_written = written_at(written_in[0], _line_of(call), written_in[1])
        site.where = written_in[2]
        return site

    rewriter = _Rewriter(sites, make_site, filename, column_lists or (lambda key: False), plain_calls, where, module)
    return [ast.fix_missing_locations(rewriter.visit(copy.deepcopy(node))) for node in nodes]




def _line_of(node: ast.expr) -> int:
    """The line Python gives a call: a method call's is its attribute's last line."""
    return node.func.end_lineno if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else node.lineno


def prepare_kernel(site: CallSite, resolver) -> None:
    """Build the kernel at decoration when the callee is already known: ``obj.method`` with ``obj``
    a global or closure variable of a compiled class, or a compiled function (``sp.hstack``, the
    helpers rewritten calls go through). The first call is then fast, and a whole-call program
    (see ``programs``) can be built before it. (An expression's site calls its expression function, not
    the callee written first in it: ``np.log1p(x)``.)"""
    if isinstance(site, ExpressionSite):
        return
    callee = site.callee
    owner = resolver.resolve(callee.value) if isinstance(callee, ast.Attribute) else None
    if owner is None or isinstance(owner, (ModuleType, type)):
        function = site.helper if site.helper is not None else resolver.resolve(callee)
        if registry.function_kernel(function) is not None:
            site.kernel(function)
    elif registry.method_kernel(type(owner), callee.attr) is not None:
        site.kernel(getattr(owner, callee.attr))



def carried_builds(sites) -> list:
    """(model, key, arrays, still valid) of what the kernels answering ``sites`` build from their
    models, built again from the models as they are now (``forest.shared_builds``), each once: what a
    saved function carries, while ``still valid()`` (the kernel's check that its model has not
    changed since it was built: asked again once the model is pickled). A model that cannot be read
    again carries nothing (carrying only spares a reading)."""
    found = {}
    with shared_builds():  # (the kernels of one model read it once)
        for site in sites:
            kernel = site.found()[2]
            if not hasattr(kernel, "carried") or not kernel.still_valid():
                continue
            try:
                entries = kernel.carried()
            except Exception:  # noqa: BLE001 (the load reads the model then, and says why it cannot)
                continue
            found.update({(id(owner), key): (owner, key, built, kernel.still_valid) for owner, key, built in entries})
    return list(found.values())

# Expression nodes that run no user code by themselves (names, literals, slices, keyword arguments).
_INERT = (ast.Name, ast.Constant, ast.List, ast.Tuple, ast.keyword, ast.Load, ast.Slice, ast.UnaryOp, ast.USub)
ATTRIBUTE = "__willump_attr"  # attribute(obj, name): obj.name, or the method of a compiled form
GETITEM = "__willump_getitem"  # operator.getitem, the callee of rewritten subscripts
COLUMN_STR = "__willump_column_str"  # strings.column_str_method, the callee of frame["column"].str.<method>()
LOC = "__willump_loc"  # lookups.loc_lookup, the callee of table.loc[keys]
PROTECT = "__willump_protect"  # protect_kept, called before Python code that runs while values are kept
VALUES, TO_NUMPY = "__willump_values", "__willump_to_numpy"  # frames.frame_values and frame_to_numpy
SET_COLUMN = "__willump_set_column"  # frames.set_column, the callee of frame[key] = value
UNSET = "__willump_unset"  # (value, key) of a frame[key] = value the kernel did not set
DATETIME_FIELD = "__willump_datetime_field"  # datetimes.datetime_field, the callee of series.dt.<field>
HELPERS = {ATTRIBUTE: None, GETITEM: operator.getitem, COLUMN_STR: column_str_method}  # name -> object the rewritten code reads
HELPERS.update({LOC: loc_lookup, VALUES: frame_values, TO_NUMPY: frame_to_numpy, SET_COLUMN: set_column,
                DATETIME_FIELD: datetime_field})


def attribute(value, name: str):
    value = _ready(value)
    return DeferredMethod(value, name) if isinstance(value, Deferred) else getattr(value, name)


HELPERS[ATTRIBUTE] = attribute


def keep_results_compiled(body: list, sites: list, first: int = 0) -> list:
    """Let a site keep its result in a kernel's form when that result only reaches other sites.

    The result must be bound once, by a top-level ``name = site(...)`` statement.
    Method calls and subscripts on ``name`` become sites too (``name.merge(t)``,
    ``name[cols]``); if every other read of ``name`` is an argument of a site call
    (directly, or as an element of a list or tuple written in the call), nothing
    but kernels can see the kernel's form. Statements reading it must run nothing but
    site calls; other statements may run in between (the paper orders Python nodes so
    that they do not split compiled blocks, §5.2; reordering would change which
    exception or side effect comes first, so here they stay in place and a call of
    ``protect_kept()`` before each keeps the answer the same). Returns the rewritten
    statements; ``sites`` gets the new subscript sites (``sites[first:]`` are the ones
    ``body`` calls). A ``frame[columns]`` site kept is ``tables.CompiledSelection``'s: the columns
    where they are.
    """
    # A column assignment changes its frame in place: for what follows it is Python code.
    by_name = {site.name: site for site in sites[first:] if site.helper is not set_column}

    def site_call(node):
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in by_name

    def only_site_calls(statement):
        """A statement that runs nothing but site calls (and indexing of their results by constants)."""
        if not isinstance(statement, (ast.Assign, ast.Return, ast.Expr)) or statement.value is None:
            return False
        if isinstance(statement, ast.Assign) and not all(isinstance(t, ast.Name) for t in statement.targets):
            return False
        return runs_only_sites(statement.value)

    def runs_only_sites(expression):
        for node in ast.walk(expression):
            if isinstance(node, ast.Call):
                if not (site_call(node) or (isinstance(node.func, ast.Name) and node.func.id == ATTRIBUTE)):
                    return False
            elif isinstance(node, ast.Subscript):  # result[:, 1], frame["column"]: indexing by constants
                if not (site_call(node.value) or isinstance(node.value, ast.Name)) or not all(
                    isinstance(n, _INERT) for n in ast.walk(node.slice)
                ):
                    return False
            elif isinstance(node, ast.Attribute):
                if not (site_callee(node) or read_of_a_name(node)):
                    return False
            elif not isinstance(node, _INERT):
                return False
        return True

    def site_callee(node) -> bool:
        """``obj.method`` written as a site's callee."""
        caller = parents.get(node)
        return site_call(caller) and caller.args[0] is node

    def read_of_a_name(node) -> bool:
        """``name.attribute`` read as a value (``num_iteration=booster.best_iteration``): nothing kept
        reaches it, and it runs no code of the kept values."""
        return isinstance(node.value, ast.Name) and not site_callee(node)

    def may_raise(statement):
        """Whether the statement runs code besides site calls: Python, an element-wise expression
        (which runs as written on plain numbers), an attribute read as a value, or indexing a name
        that is not a site's result."""
        if not only_site_calls(statement):
            return True
        for node in ast.walk(statement):
            if site_call(node) and isinstance(by_name[node.func.id], ExpressionSite):
                return True
            if isinstance(node, ast.Subscript) and not site_call(node.value):
                return True
            if isinstance(node, ast.Attribute) and not site_callee(node):
                return True
        return False

    def produced_by(statement):
        """The name a top-level ``name = site(...)`` statement binds, else None."""
        if (
            isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and site_call(statement.value)
        ):
            return statement.targets[0].id
        return None

    parents = _parents(body)  # (runs_only_sites reads it)
    candidates = {produced_by(statement) for statement in body} - {None}

    class Uses(ast.NodeTransformer):
        def visit_Call(self, node):
            only_sites = site_call(node) and runs_only_sites(node)
            self.generic_visit(node)
            callee = node.args[0] if site_call(node) and node.args else None
            if not isinstance(callee, ast.Attribute):
                return node
            receiver = callee.value
            if isinstance(receiver, ast.Name) and receiver.id in candidates or site_call(receiver) and only_sites:
                if site_call(receiver):  # site(...).method(...): only that site sees the receiver
                    by_name[receiver.func.id].defers = True
                node.args[0] = ast.copy_location(
                    ast.Call(ast.Name(ATTRIBUTE, ast.Load()), [receiver, ast.Constant(callee.attr)], []), callee
                )
            return node

        def visit_Subscript(self, node):
            self.generic_visit(node)
            if isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and node.value.id in candidates:
                site = CallSite(f"{SITE_PREFIX}{len(sites)}", node)
                sites.append(site)
                by_name[site.name] = site
                call = ast.Call(ast.Name(site.name, ast.Load()), [ast.Name(GETITEM, ast.Load()), node.value, node.slice], [])
                return ast.copy_location(call, node)
            return node

    body = [ast.fix_missing_locations(Uses().visit(statement)) for statement in body]

    parents = _parents(body)

    def read_by_a_site(name_node):
        parent = parents.get(name_node)
        if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == ATTRIBUTE:
            return site_call(parents.get(parent))  # the callee of a site: obj.method(...)
        if isinstance(parent, (ast.List, ast.Tuple)):
            name_node, parent = parent, parents.get(parent)
        if isinstance(parent, ast.keyword):
            parent = parents.get(parent)
        return site_call(parent) and parent.func is not name_node and parent.args[:1] != [name_node]

    # Each top-level assignment starts a new value of the name (the body is straight-line at the
    # top level); a site's value is read from the next statement until the name is bound again.
    candidates = {produced_by(statement) for statement in body} - {None}  # subscripts are sites now
    rebinds_only_at_top = {name: True for name in candidates}
    for statement in body:
        plain = isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id in candidates and not isinstance(node.ctx, ast.Load):
                if not (plain and node is statement.targets[0]):
                    rebinds_only_at_top[node.id] = False
    # A site call written as an argument of another site call: only that site sees its result.
    for statement in body:
        for node in ast.walk(statement):
            if site_call(node) and node.args[:1] and runs_only_sites(node):
                for argument in node.args[1:] + [k.value for k in node.keywords]:
                    for inner in argument.elts if isinstance(argument, (ast.List, ast.Tuple)) else [argument]:
                        if site_call(inner):
                            by_name[inner.func.id].defers = True
    # A name read inside a lambda or comprehension may be read at any time: never kept compiled.
    for statement in body:
        for scope in ast.walk(statement):
            if isinstance(scope, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                for node in ast.walk(scope):
                    if isinstance(node, ast.Name) and node.id in rebinds_only_at_top:
                        rebinds_only_at_top[node.id] = False
    guarded = set()  # ids of statements that run Python code while values are kept
    for position, statement in enumerate(body):
        name = produced_by(statement)
        if name is None or not rebinds_only_at_top[name]:
            continue
        loads, first, last = [], None, position
        for offset, later in enumerate(body[position + 1 :], position + 1):
            found = [n for n in ast.walk(later) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
            if found:
                loads, last = loads + found, offset
                first = offset if first is None else first
            if isinstance(later, ast.Assign) and isinstance(later.targets[0], ast.Name) and later.targets[0].id == name:
                break
        # The statements reading it run only compiled calls. Other code in between may change what the
        # kernel's form refers to, or raise: kept values are protected and settled before it runs.
        between = body[position + 1 : last + 1]
        readers = [s for s in between if any(n in loads for n in ast.walk(s))]
        if loads and all(read_by_a_site(n) for n in loads) and all(only_site_calls(s) for s in readers):
            site = by_name[statement.value.func.id]
            site.defers = True
            # Other calls run before its result is needed: a worker may compute it meanwhile, unless code
            # that may raise runs before (the worker's result, read later, may have to raise first).
            site.overlaps = first > position + 1 and not any(may_raise(s) for s in body[position + 1 : first])
            guarded.update(id(s) for s in between if not only_site_calls(s))
    return [guarded_statement for s in body for guarded_statement in _guarded(s, id(s) in guarded)]


def _parents(body: list) -> dict:
    """Each node's parent, in the statements of ``body``."""
    return {child: node for statement in body for node in ast.walk(statement) for child in ast.iter_child_nodes(node)}


def _guarded(statement, guard: bool) -> list:
    """``statement``, after a call of ``protect_kept()`` when Python code runs while values are kept."""
    if not guard:
        return [statement]
    call = ast.Expr(ast.Call(ast.Name(PROTECT, ast.Load()), [], []))
    return [ast.fix_missing_locations(ast.copy_location(call, statement)), statement]


def protect_kept() -> None:
    """Before Python code runs amid kept values: computed in source order by now (raising what the
    calls as written raise, as the original would have raised it before this code), and no longer
    sharing what that code may change in place."""
    _settle()
    for value in getattr(_outstanding, "kept", None) or ():
        value.protect()
    for pending in getattr(_outstanding, "pending", None) or ():  # results computed by workers
        value = pending.result()
        if isinstance(value, Deferred):
            value.protect()


HELPERS[PROTECT] = protect_kept
