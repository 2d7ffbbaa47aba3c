"""Call sites: the calls in the user's code that a compiled kernel may answer.

At decoration, ``rewrite_calls`` turns each call whose callee is named like a
compiled operator (``v.transform(x)``, ``model.predict_proba(X)``,
``sp.hstack([...])``) into ``site(v.transform, x)``: the callee is still
evaluated first, as in the original. At run time the site looks at the object
the callee really is; when a kernel reproduces it for this input, the kernel
answers, and otherwise the original call runs. The answer is the same either
way; only the time differs.
"""

import ast
import copy
import threading

from willump.compile import registry
from willump.compile.parallel import SERIAL
from willump.compile.forms import Deferred, Unsupported

SITE_PREFIX = "__willump_site_"


class CallSite:
    """One rewritten call: picks the kernel for its callee and counts what ran."""

    def __init__(self, name: str, call: ast.Call, workers=SERIAL):
        self.name, self.line, self.source = name, call.lineno, ast.unparse(call)
        self.workers = workers
        self.defers = False  # its result only reaches other call sites: it may stay in a kernel's form
        self.callee = call.func  # the callee expression, as written
        self.operator = None  # e.g. "TfidfVectorizer.transform", once the callee was seen
        self.reason = "not called yet"  # why the last call ran as written, or None
        self.calls = 0
        self.compiled_calls = 0
        self._cache = None  # (owner, function, kernel or None, fingerprint)
        self._lock = threading.Lock()

    def __call__(self, callee, /, *args, **kwargs):
        kernel = self.kernel(callee)
        self.calls += 1
        if kernel is not None:
            try:
                if self.defers and hasattr(kernel, "defer"):
                    result = kernel.defer(*args, **kwargs)
                else:
                    result = kernel(*args, **kwargs)
            except Unsupported as problem:
                self.reason = f"this input: {problem}"
            except Exception as error:  # a kernel must never change the answer: the call runs as written
                self.reason = f"the kernel failed ({type(error).__name__}: {error})"
            else:
                self.compiled_calls += 1
                self.reason = None
                return result
        return callee(*[_real(a) for a in args], **{k: _real(v) for k, v in kwargs.items()})

    def kernel(self, callee):
        """The kernel for ``callee``, built once per object and rebuilt when the object changes."""
        owner = getattr(callee, "__self__", None)
        function = getattr(callee, "__func__", callee)
        cached = self._cache
        if cached is not None and cached[0] is owner and cached[1] is function:
            kernel, fingerprint = cached[2], cached[3]
            if kernel is not None and kernel.still_valid():
                return kernel
            if kernel is None and fingerprint == _fingerprint(owner):
                return None
        with self._lock:
            kernel, reason = registry.kernel_for(callee, self.workers)
            self.operator = registry.describe(callee)
            if reason:
                self.reason = reason
            self._cache = (owner, function, kernel, _fingerprint(owner))
        return kernel

    def summary(self) -> dict:
        compiled = self._cache is not None and self._cache[2] is not None
        status = "compiled" if compiled and self.reason is None else f"plain Python: {self.reason}"
        if compiled and self.reason and self.compiled_calls:
            status = f"compiled, some calls plain Python ({self.reason})"
        return {
            "line": self.line, "call": self.source, "operator": self.operator, "status": status,
            "calls": self.calls, "compiled_calls": self.compiled_calls,
        }


def _real(value):
    """The argument the original call gets: compiled forms built into the real objects."""
    if isinstance(value, Deferred):
        return value.materialize()
    if type(value) in (list, tuple) and any(isinstance(v, Deferred) for v in value):
        return type(value)(_real(v) for v in value)
    return value


def _fingerprint(owner) -> int:
    """Changes when a not-yet-compilable object is fitted (fitting adds attributes)."""
    return len(getattr(owner, "__dict__", ())) if owner is not None else 0


class _Rewriter(ast.NodeTransformer):
    def __init__(self, sites: list, make_site):
        self.sites, self.make_site = sites, make_site

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name not in registry.NAMES or name.startswith(SITE_PREFIX):
            return node
        site = self.make_site(node)
        self.sites.append(site)
        call = ast.Call(ast.Name(site.name, ast.Load()), [func] + node.args, node.keywords)
        return ast.copy_location(call, node)


def rewrite_calls(nodes: list, sites: list, workers=SERIAL) -> list:
    """Copies of ``nodes`` with compilable calls going through new CallSites (appended to ``sites``)."""

    def make_site(call):
        return CallSite(f"{SITE_PREFIX}{len(sites)}", call, workers)

    rewriter = _Rewriter(sites, make_site)
    return [ast.fix_missing_locations(rewriter.visit(copy.deepcopy(node))) for node in nodes]




def prepare_kernel(site: CallSite, resolver) -> None:
    """Build the kernel at decoration when the callee's object is already known (``obj.method``
    with ``obj`` a global or closure variable of a compiled class): the first call is then fast."""
    callee = site.callee
    if not isinstance(callee, ast.Attribute):
        function = resolver.resolve(callee)
        if registry.function_kernel(function) is not None:
            site.kernel(function)
        return
    owner = resolver.resolve(callee.value)
    if (type(owner), callee.attr) in registry.METHOD_KERNELS:
        site.kernel(getattr(owner, callee.attr))


def mark_deferred_results(body: list, sites: list) -> None:
    """Let a site keep its result in a kernel's form when that result only reaches other sites.

    The result must be bound once, by a top-level ``name = site(...)`` statement, and
    ``name`` read only as an argument of site calls (directly, or as an element of a
    list or tuple written in the call). Nothing else can then see the kernel's form.
    """
    by_name = {site.name: site for site in sites}
    parents = {}
    for statement in body:
        for node in ast.walk(statement):
            for child in ast.iter_child_nodes(node):
                parents[child] = node

    def site_call(node):
        return (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in by_name
        )

    def read_by_a_site(name_node):
        parent = parents.get(name_node)
        if isinstance(parent, (ast.List, ast.Tuple)):
            name_node, parent = parent, parents.get(parent)
        if isinstance(parent, ast.keyword):
            parent = parents.get(parent)
        return site_call(parent) and parent.func is not name_node

    candidates = {}
    for statement in body:
        if (
            isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and site_call(statement.value)
        ):
            candidates.setdefault(statement.targets[0].id, []).append(by_name[statement.value.func.id])
    uses = {name: [] for name in candidates}
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id in uses:
                uses[node.id].append(node)
    for name, producers in candidates.items():
        stores = [n for n in uses[name] if not isinstance(n.ctx, ast.Load)]
        loads = [n for n in uses[name] if isinstance(n.ctx, ast.Load)]
        if len(producers) == 1 and len(stores) == 1 and loads and all(read_by_a_site(n) for n in loads):
            producers[0].defers = True
