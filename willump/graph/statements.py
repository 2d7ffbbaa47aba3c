"""One graph node per body statement: which variables it reads and writes.

The analysis is conservative. Whatever might change a variable counts as
writing it: assigning to an attribute or item of it, calling a method of it in
an expression statement, passing ``inplace=True``. Compound statements
(``if``/``for``/``while``/``try``/``with``) are *opaque*: they read every name
they mention and may or may not write the names they assign.
"""

import ast
from dataclasses import dataclass, field

COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With, ast.AsyncWith, ast.Match)
if hasattr(ast, "TryStar"):
    COMPOUND = COMPOUND + (ast.TryStar,)

_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass
class Statement:
    """A body statement as a node of the transformation graph."""

    index: int
    node: ast.stmt
    reads: set[str]
    writes: set[str]
    opaque: str | None = None  # why the statement is not understood, if it is not
    side_effects: bool = False  # must run on every call, in order: never skipped
    maybe_writes: set[str] = field(default_factory=set)  # writes that may not happen
    display: str | None = None  # the user's code, when ``node`` is a rewrite of it
    binds: set[str] | None = None  # names it binds (writes minus mere mutations); None: all writes

    @property
    def bound(self) -> set[str]:
        """Names this statement makes local to the function."""
        return self.writes if self.binds is None else self.binds

    @property
    def lineno(self) -> int:
        return self.node.lineno

    @property
    def source(self) -> str:
        return self.display if self.display is not None else ast.unparse(self.node)


def walk_scope(tree: ast.AST):
    """Like ``ast.walk``, but does not enter lambdas and comprehensions."""
    pending = [tree]
    while pending:
        node = pending.pop(0)
        yield node
        pending.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, _SCOPES))


def names_read(tree: ast.AST) -> set[str]:
    """Names an expression or statement loads from its enclosing scope.

    Names bound by lambdas and comprehensions inside it are their own scope's.
    """
    reads: set[str] = set()
    _collect_reads(tree, frozenset(), reads)
    return reads


def _collect_reads(node: ast.AST, bound: frozenset, reads: set[str]) -> None:
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id not in bound:
            reads.add(node.id)
        return
    if isinstance(node, ast.Lambda):
        args = node.args
        for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
            _collect_reads(default, bound, reads)
        _collect_reads(node.body, bound | _argument_names(args), reads)
        return
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        inner = set(bound)
        for position, generator in enumerate(node.generators):
            # The first iterable is evaluated in the enclosing scope.
            _collect_reads(generator.iter, bound if position == 0 else frozenset(inner), reads)
            inner |= _stored_names(generator.target)
            for condition in generator.ifs:
                _collect_reads(condition, frozenset(inner), reads)
        elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for element in elements:
            _collect_reads(element, frozenset(inner), reads)
        return
    for child in ast.iter_child_nodes(node):
        _collect_reads(child, bound, reads)


def _argument_names(args: ast.arguments) -> frozenset:
    every = args.posonlyargs + args.args + args.kwonlyargs
    names = {a.arg for a in every}
    if args.vararg:
        names.add(args.vararg.arg)
    if args.kwarg:
        names.add(args.kwarg.arg)
    return frozenset(names)


# Methods whose result is a new object, never their receiver (pandas' and numpy's, without
# inplace=, out= or copy=): changing it, under pandas' copy-on-write, leaves the receiver as it was.
_NEW_OBJECT_METHODS = frozenset({
    "copy", "replace", "fillna", "assign", "rename", "astype", "drop", "dropna", "reset_index", "set_index",
    "sort_values", "sort_index", "round", "clip", "abs", "add_prefix", "add_suffix", "merge", "reindex",
    "select_dtypes", "ffill", "bfill", "to_frame",
})


def new_object_call(value: ast.expr) -> bool:
    """``x.copy()``, ``x.fillna(0)``...: a call of one of those methods, none of those options given."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _NEW_OBJECT_METHODS
            and not any(k.arg in ("inplace", "out", "copy") for k in value.keywords))


def _stored_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _target_writes(target: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound, names mutated) by an assignment target."""
    if isinstance(target, ast.Name):
        return {target.id}, set()
    if isinstance(target, (ast.Tuple, ast.List)):
        bound, mutated = set(), set()
        for element in target.elts:
            b, m = _target_writes(element)
            bound |= b
            mutated |= m
        return bound, mutated
    if isinstance(target, ast.Starred):
        return _target_writes(target.value)
    if isinstance(target, (ast.Attribute, ast.Subscript)):
        base = _base_name(target)
        return set(), ({base} if base else set())
    return set(), set()


def _base_name(node: ast.AST) -> str | None:
    """``df`` for ``df["a"].b[0]``; None when the chain starts elsewhere."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _walrus_writes(tree: ast.AST) -> set[str]:
    return {
        n.target.id
        for n in ast.walk(tree)
        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name)
    }


def _inplace_receivers(tree: ast.AST) -> set[str]:
    """Receivers of calls that pass ``inplace=True`` (pandas' in-place methods)."""
    receivers = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            for keyword in node.keywords:
                if (
                    keyword.arg == "inplace"
                    and isinstance(keyword.value, ast.Constant)
                    and keyword.value.value is True
                ):
                    base = _base_name(node.func.value)
                    if base:
                        receivers.add(base)
    return receivers


def analyze_statement(index: int, node: ast.stmt) -> Statement:
    """Build the graph node of one body statement."""
    reads = names_read(node)
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        bound, mutated = set(), set()
        for target in targets:
            b, m = _target_writes(target)
            bound |= b
            mutated |= m
        if isinstance(node, ast.AnnAssign) and node.value is None:
            # A bare annotation makes the name local without giving it a value.
            return Statement(index, node, set(), set(), binds=bound)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            reads.add(node.target.id)
        mutated |= _inplace_receivers(node)
        # Mutating a variable reads its old value too.
        bound |= _walrus_writes(node)
        return Statement(index, node, reads | mutated, bound | mutated, side_effects=bool(mutated), binds=bound)
    if isinstance(node, ast.Return):
        return Statement(index, node, reads, _walrus_writes(node))
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        bound = {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        return Statement(index, node, reads, bound)
    if isinstance(node, ast.Delete):
        deleted, mutated = set(), set()
        for target in node.targets:
            b, m = _target_writes(target)
            deleted |= b
            mutated |= m
        touched = deleted | mutated
        return Statement(
            index, node, reads | touched, touched, maybe_writes=deleted, side_effects=bool(mutated), binds=deleted
        )
    if isinstance(node, (ast.Pass,)):
        return Statement(index, node, set(), set())
    if isinstance(node, ast.Assert):
        return Statement(index, node, reads, _walrus_writes(node), side_effects=True)
    if isinstance(node, ast.Expr):
        if isinstance(node.value, ast.Constant):  # a bare string or number: no effect
            return Statement(index, node, set(), set())
        # A call for its side effects may change anything it is given.
        bound = _walrus_writes(node)
        touched = reads | bound
        return Statement(
            index,
            node,
            touched,
            touched,
            opaque="a call made for its side effects, which willump cannot see",
            side_effects=True,
            binds=bound,
        )
    if isinstance(node, COMPOUND):
        stored = set()
        mutated = set()
        for child in ast.walk(node):
            if isinstance(child, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.withitem, ast.Delete)):
                for target in _assignment_targets(child):
                    b, m = _target_writes(target)
                    stored |= b
                    mutated |= m
            elif isinstance(child, ast.ExceptHandler) and child.name:
                stored.add(child.name)
            elif isinstance(child, ast.Expr):
                mutated |= names_read(child)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                stored |= {(a.asname or a.name).split(".")[0] for a in child.names}
        stored |= _walrus_writes(node)
        for n in ast.walk(node):
            if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
                stored.add(n.name)
            elif isinstance(n, ast.MatchMapping) and n.rest:
                stored.add(n.rest)
        mutated |= _inplace_receivers(node)
        writes = stored | mutated
        kind = type(node).__name__.lower().replace("async", "async ")
        return Statement(
            index,
            node,
            reads | writes,  # a write that does not happen leaves the old value
            writes,
            opaque=f"'{kind}' statement (control flow is not analyzed)",
            side_effects=bool(mutated),
            maybe_writes=stored,
            binds=stored,
        )
    # Anything else is read-and-written conservatively and kept in order.
    bound = _walrus_writes(node)
    return Statement(
        index,
        node,
        reads | bound,
        reads | bound,
        opaque=f"'{type(node).__name__}' statement is not analyzed",
        side_effects=True,
        binds=bound,
    )


def _assignment_targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, ast.withitem):
        return [node.optional_vars] if node.optional_vars is not None else []
    if isinstance(node, ast.Delete):
        return node.targets
    return []


def replace_node(tree: ast.AST, old: ast.AST, new: ast.expr) -> ast.AST:
    """``tree`` (changed in place) with the node ``old`` (by identity) replaced by ``new``, at its position."""

    class Replacer(ast.NodeTransformer):
        def visit(self, node):
            if node is old:
                return ast.copy_location(new, old)
            return self.generic_visit(node)

    return ast.fix_missing_locations(Replacer().visit(tree))
