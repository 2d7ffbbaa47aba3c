"""Feature-row caches: an IFV's rows kept by the input values they come from (paper §4.5).

Some IFVs give a row the same features whenever a few columns of the function's
DataFrame argument hold the same values, whatever the rest of the batch:
``users.lookup(df["userId"]).to_numpy(dtype=float)``. With ``cache_size``, each
such IFV keeps its rows in an LRU cache keyed by those values (and the columns'
dtypes). A call looks every row up first; only the rows some cache misses are
computed, by the IFVs' own generators on those rows alone, so a row seen before
is neither fetched, nor turned into a DataFrame, nor converted again. The
tables' row caches (``caches.LookupCaches``) still serve the rows computed.

That an IFV is per-key is read from its text, not guessed from samples. Its
generator, and the preprocessing, may only bind names to: columns
of the argument selected by name; arithmetic of those with each other and with
numbers; a table's ``lookup`` of such keys or of a column looked up before;
columns of a looked-up frame selected by name; ``to_numpy``, ``astype``,
``fillna`` or ``.values`` of these. The IFV itself must end in a conversion to
float, so a cached row has the dtype and values the whole batch would give it.
Anything else (another call, a statement that is not such a binding) and the
IFV is computed as before; ``keyed_ifvs`` says why.

Memory: per IFV at most ``capacity`` rows, each its width x 8 bytes plus about
300 bytes (key tuple, array header, LRU entry).
"""

import ast
from dataclasses import dataclass

import numpy as np
import pandas as pd

from willump.runtime.caches import MISSING, LRUCache, row_keys
from willump.runtime.calls import count_rows_cached
from willump.runtime.tables import RemoteLookupError, Table

_CONVERSIONS = {"to_numpy", "astype", "fillna"}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
_FLOAT_NAMES = {"float", "float64", "f8"}


@dataclass
class KeyedIFV:
    """An IFV whose rows depend only on ``columns`` of the argument, through ``tables``."""

    index: int
    columns: tuple[str, ...]
    tables: tuple[str, ...]  # names (globals or closure variables) of the tables it looks up


class _NotPerKey(Exception):
    """Why a statement or expression does not show its rows to be per key."""


def keyed_ifvs(graph, parameters, resolver) -> tuple[dict, dict]:
    """({IFV index: KeyedIFV}, {IFV index: why not}) for the graph's IFVs."""
    reasons = {}
    if len(parameters) != 1:
        return {}, dict.fromkeys(range(len(graph.ifvs)), "the function takes more than one argument")
    parameter = parameters[0]
    keyed = {}
    for ifv in graph.ifvs:
        try:
            # The order the executor runs them in: the preprocessing, then the IFV's generator.
            proof = _Proof(parameter, resolver, _bindings([*graph.preprocessing, *ifv.generator], parameter))
            proof.ends_in_floats(ifv.expression)
            if not proof.tables:
                raise _NotPerKey("it looks nothing up in a table (computing it is as cheap as caching it)")
            keyed[ifv.index] = KeyedIFV(ifv.index, tuple(proof.columns), tuple(proof.tables))
        except _NotPerKey as reason:
            reasons[ifv.index] = str(reason)
    return keyed, reasons


def _bindings(statements, parameter) -> list:
    """[(name, expression)] of statements that each bind one name, in the order they run."""
    bound = []
    for statement in statements:
        node = statement.node
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise _NotPerKey(f"line {node.lineno}: `{ast.unparse(node)}` is not `name = expression`")
        if node.targets[0].id == parameter:
            raise _NotPerKey(f"line {node.lineno}: the argument {parameter!r} is bound again")
        bound.append((node.targets[0].id, node.value))
    return bound


class _Proof:
    """Shows expressions to be per key, collecting the argument's columns and the tables they read."""

    def __init__(self, parameter, resolver, bindings: list):
        self.parameter, self.resolver, self.bindings = parameter, resolver, bindings
        self.columns, self.tables = {}, {}  # (ordered sets)
        self._before = len(bindings)  # a name read now is the one bound by the last of bindings[:_before]

    def _bound(self, name: str):
        """(position, expression) of the binding of ``name`` a read at this point sees, or None."""
        return next(((i, self.bindings[i][1]) for i in reversed(range(self._before)) if self.bindings[i][0] == name),
                    None)

    def ends_in_floats(self, node) -> None:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("to_numpy", "astype") and self._floats(node)):
            raise _NotPerKey(f"`{ast.unparse(node)}` does not end in `.to_numpy(dtype=float)` or `.astype(float)`")
        self.kind(node)

    def kind(self, node) -> str:
        """"input" (made of the argument's columns), "table" (looked up) or "number"."""
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return "number"
        bound = self._bound(node.id) if isinstance(node, ast.Name) else None
        if bound is not None:  # (read where that binding is, so `s = s * 2` reads the `s` before it)
            outer, self._before = self._before, bound[0]
            try:
                return self.kind(bound[1])
            finally:
                self._before = outer
        if isinstance(node, ast.Subscript):
            names = self._column_names(node)
            if isinstance(node.value, ast.Name) and node.value.id == self.parameter:
                self.columns.update(dict.fromkeys(names))
                return "input"
            return self.kind(node.value)
        if isinstance(node, ast.Attribute) and node.attr == "values":
            return self.kind(node.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return self._call(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
            kinds = {self.kind(node.left), self.kind(node.right)}
            if kinds <= {"input", "number"} and "input" in kinds:  # (no looked-up frames: their index
                return "input"  # is the keys', and arithmetic aligns on it)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and self.kind(node.operand) == "input":
            return "input"
        raise _NotPerKey(f"`{ast.unparse(node)}` is not a per-key operation")

    def _call(self, node) -> str:
        owner, method = node.func.value, node.func.attr
        if method == "lookup" and isinstance(owner, ast.Name) and len(node.args) == 1 and not node.keywords:
            if isinstance(self.resolver.resolve(owner), Table):
                if self.kind(node.args[0]) not in ("input", "table"):
                    raise _NotPerKey(f"`{ast.unparse(node.args[0])}` is not a column of keys")
                self.tables[owner.id] = None
                return "table"
        if method in _CONVERSIONS and all(self._plain(a) for a in [*node.args, *(k.value for k in node.keywords)]):
            kind = self.kind(owner)
            if kind != "number":
                return kind
        raise _NotPerKey(f"`{ast.unparse(node)}` is not a per-key operation")

    def _column_names(self, subscript) -> list:
        node = subscript.slice
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.List, ast.Tuple)):
            names = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(names) == len(node.elts):
                return names
        if isinstance(node, ast.Name) and self._bound(node.id) is None:
            value = self.resolver.resolve(node)
            if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                return list(value)
        raise _NotPerKey(f"`{ast.unparse(subscript)}` is not a selection of columns by name")

    def _plain(self, node) -> bool:
        """A number, a string, or a name of a type (float, np.float64): an option, not data."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float, str, bool))
        return isinstance(self.resolver.resolve(node), type)

    def _floats(self, call) -> bool:
        dtype = [k.value for k in call.keywords if k.arg == "dtype"] + call.args[:1]
        if len(dtype) != 1:
            return False
        if isinstance(dtype[0], ast.Constant):
            return dtype[0].value in _FLOAT_NAMES
        return self.resolver.resolve(dtype[0]) in (float, np.float64)


class FeatureRows:
    """The feature-row caches of one optimized function."""

    def __init__(self, keyed: dict, parameter: str, capacity: int, resolver, needs_preprocessing: bool):
        self.keyed_ifvs = keyed  # (all, including those stopped: ``keyed`` are those still cached)
        self._needs_preprocessing = needs_preprocessing  # the other IFVs or the combine step read what it binds
        self.capacity = capacity
        self._parameter = parameter
        self._resolver = resolver
        self._caches = {i: LRUCache(capacity) for i in keyed}
        self._table_names = {i: [ast.Name(n, ast.Load()) for n in k.tables] for i, k in keyed.items()}
        self.stopped = {}  # IFV index -> why its rows stopped being cached

    @property
    def keyed(self) -> dict:
        """{index: KeyedIFV} of the IFVs whose rows are cached."""
        return {i: self.keyed_ifvs[i] for i in self._caches}

    def clear(self) -> None:
        for cache in self._caches.values():
            cache.clear()

    def serve(self, executor, values, arguments: dict):
        """The function's result, its keyed IFVs' rows from the caches where held; ``MISSING``
        when this call is not one the caches can serve (then the caller runs it as before).

        ``values(env, indices)`` computes IFVs (side by side or not)."""
        frame = arguments[self._parameter]
        if type(frame) is not pd.DataFrame or not len(frame) or not self._caches:
            return MISSING
        try:
            keys = {}
            for keyed in self.keyed_ifvs.values():
                if keyed.columns not in keys:
                    keys[keyed.columns] = row_keys(frame, keyed.columns)
        except Exception:  # (a missing column: the function as written raises what it raises)
            return MISSING
        if any(k is None for k in keys.values()):
            return MISSING
        found, missing = {}, {}
        caches = self._caches  # (as they are now: another thread may stop caching an IFV)
        for i, cache in caches.items():
            keyed = self.keyed_ifvs[i]
            self._check_tables(i, cache)
            found[i] = cache.get_many(keys[keyed.columns])
            missing[i] = [r for r, row in enumerate(found[i]) if row is MISSING]
        misses = sum(map(len, missing.values()))
        count_rows_cached(len(frame) * len(found) - misses, misses)
        try:
            if misses and not self._compute(executor, values, arguments, len(frame), keys, found, missing):
                return MISSING
            env = executor.environment(arguments) if self._needs_preprocessing else executor.arguments_only(arguments)
            others = [i for i in range(len(executor.graph.ifvs)) if i not in found]
            computed = values(env, others) if others else {}
        except RemoteLookupError:
            raise
        except Exception:  # the function as written raises it, with its own message
            return MISSING
        computed.update((i, np.stack(rows)) for i, rows in found.items())
        return executor.combine(env, [computed[i] for i in range(len(computed))])

    def _compute(self, executor, values, arguments, n, keys, found, missing) -> bool:
        """Compute the missing rows of each keyed IFV (on the rows any of them misses), fill
        them in and cache them; False if an IFV's value is not float rows after all."""
        rows = sorted(set().union(*missing.values()))
        wanted = [i for i, m in missing.items() if m]
        env = executor.environment(arguments, rows if len(rows) < n else None, [self._parameter])
        computed = values(env, wanted)
        at = {r: j for j, r in enumerate(rows)}
        for i in wanted:
            value = computed[i]
            if not (type(value) is np.ndarray and value.dtype == np.float64 and value.ndim in (1, 2)
                    and value.shape[0] == len(rows)):
                self._stop(i, f"its value was a {_described(value)}, not float rows")
                return False
            column_keys = keys[self.keyed_ifvs[i].columns]
            fresh = [(r, value[at[r]].copy()) for r in missing[i]]
            self._caches[i].put_many((column_keys[r], row) for r, row in fresh)
            for r, row in fresh:
                found[i][r] = row
        return True

    def _check_tables(self, index: int, cache: LRUCache) -> None:
        """Empty the cache when a table it read is another object, or had rows put since."""
        tables = map(self._resolver.resolve, self._table_names[index])
        version = tuple((table, getattr(table, "version", None)) for table in tables)
        if cache.version is None or len(cache.version) != len(version) or any(
            a[0] is not b[0] or a[1] != b[1] for a, b in zip(cache.version, version)
        ):
            cache.clear()
            cache.version = version

    def _stop(self, index: int, reason: str) -> None:
        """Compute IFV ``index`` as before from now on."""
        self._caches = {i: c for i, c in self._caches.items() if i != index}
        self.stopped[index] = reason


def _described(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.ndim}-d {value.dtype} array"
    return type(value).__name__
