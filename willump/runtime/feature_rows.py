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

An IFV's rows, cached or new, are put together in the layout its statements give the
whole batch: F order, as ``to_numpy`` lays out a lookup's frame (``Table.lookup`` keeps its
blocks row-major whatever keys it finds), since the concatenation takes its layout from
its blocks and a model computes other bits on a C-ordered matrix. An IFV whose statements
give a C-ordered array is computed as before from then on.

The commonest such IFV, ``table.lookup(keys)[columns].to_numpy(dtype=float)`` (keys a
column of the argument or of another lookup), has a ``RowPlan``: its missed rows are made
from the tables' stored rows (``Table.float_rows``), with no DataFrame built, and the
lookups of all plans at one depth are fetched together (``fetch_together``). A plan that
meets a column it cannot turn into floats the way pandas does (a str column) leaves its
IFV to its statements from then on.

Memory: per IFV at most ``capacity`` rows, each its width x 8 bytes plus about
300 bytes (key tuple, array header, LRU entry).
"""

import ast
from dataclasses import dataclass

import numpy as np
import pandas as pd

from willump.runtime.caches import MISSING, LRUCache, key_values, row_keys
from willump.runtime.calls import count_rows_cached
from willump.runtime.tables import RemoteLookupError, Table, canonical_key, fetch_together

_CONVERSIONS = {"to_numpy", "astype", "fillna"}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
_FLOAT_NAMES = {"float", "float64", "f8"}


@dataclass
class KeyedIFV:
    """An IFV whose rows depend only on ``columns`` of the argument, through ``tables``."""

    index: int
    columns: tuple[str, ...]
    tables: tuple[str, ...]  # names (globals or closure variables) of the tables it looks up
    plan: "RowPlan | None" = None  # its rows from the tables' stored rows, when its text is that simple


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
            bindings = _bindings([*graph.preprocessing, *ifv.generator], parameter)
            proof = _Proof(parameter, resolver, bindings)
            proof.ends_in_floats(ifv.expression)
            if not proof.tables:
                raise _NotPerKey("it looks nothing up in a table (computing it is as cheap as caching it)")
            keyed[ifv.index] = KeyedIFV(ifv.index, tuple(proof.columns), tuple(proof.tables),
                                        _plan(parameter, resolver, bindings, ifv.expression))
        except _NotPerKey as reason:
            reasons[ifv.index] = str(reason)
    return keyed, reasons


def _plan(parameter, resolver, bindings, expression) -> "RowPlan | None":
    try:
        return _Planner(parameter, resolver, bindings).plan(expression)
    except _NotPerKey:
        return None  # (its missed rows are computed by its statements)


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

    def _through(self, node, read):
        """``read`` of the expression ``node`` stands for: a bound name's expression, read where
        that binding is (so `s = s * 2` reads the `s` before it)."""
        bound = self._bound(node.id) if isinstance(node, ast.Name) else None
        if bound is None:
            return read(node)
        outer, self._before = self._before, bound[0]
        try:
            return self._through(bound[1], read)
        finally:
            self._before = outer

    def kind(self, node) -> str:
        """"input" (made of the argument's columns), "table" (looked up) or "number"."""
        return self._through(node, self._kind)

    def _kind(self, node) -> str:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return "number"
        if isinstance(node, ast.Subscript):
            names = self._column_names(node)
            if isinstance(node.value, ast.Name) and node.value.id == self.parameter:
                if isinstance(names, ast.Name):  # (the rows would be kept by the columns it names now)
                    raise _NotPerKey(f"`{ast.unparse(node)}`: key columns named by a variable, which may change")
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

    def _is_lookup(self, node) -> bool:
        """``name.lookup(keys)`` with ``name`` a table among the function's globals or closure."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "lookup"
                and isinstance(node.func.value, ast.Name) and len(node.args) == 1 and not node.keywords):
            return False
        if self._bound(node.func.value.id) is not None:
            raise _NotPerKey(f"`{node.func.value.id}` is bound in the function, so which table it is may vary")
        return isinstance(self.resolver.resolve(node.func.value), Table)

    def _call(self, node) -> str:
        owner, method = node.func.value, node.func.attr
        if self._is_lookup(node):
            if self.kind(node.args[0]) not in ("input", "table"):
                raise _NotPerKey(f"`{ast.unparse(node.args[0])}` is not a column of keys")
            self.tables[owner.id] = None
            return "table"
        if method in _CONVERSIONS and all(self._plain(a) for a in [*node.args, *(k.value for k in node.keywords)]):
            kind = self.kind(owner)
            if kind != "number":
                return kind
        raise _NotPerKey(f"`{ast.unparse(node)}` is not a per-key operation")

    def _column_names(self, subscript) -> "list | ast.Name":
        """The names a subscript selects: a str or a list of them written out, or the name of a
        global or closure list of str (which the caller reads again on each call)."""
        node = subscript.slice
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.List):  # (not a tuple: pandas takes a tuple for one label)
            names = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(names) == len(node.elts):
                return names
        if isinstance(node, ast.Name) and self._bound(node.id) is None:
            value = self.resolver.resolve(node)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return node
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


class _Planner(_Proof):
    """The commonest per-key IFV, ``table.lookup(keys)[columns].to_numpy(dtype=float)`` with
    keys a column of the argument or of a looked-up frame, as a ``RowPlan``: its rows
    computed from the tables' stored rows, with no DataFrame built."""

    def plan(self, node) -> "RowPlan":
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_numpy"
                and len(node.args) + len(node.keywords) == 1 and self._floats(node)):
            raise _NotPerKey(f"`{ast.unparse(node)}` is not `.to_numpy(dtype=float)` alone")
        return self._through(node.func.value, self._selection)

    def _selection(self, node) -> "RowPlan":
        if isinstance(node, ast.Subscript):
            names = self._column_names(node)
            single = isinstance(node.slice, ast.Constant)  # (a Series: rows of one value)
            return RowPlan(self._through(node.value, self._lookup),
                           names if isinstance(names, ast.Name) else tuple(names), single)
        return RowPlan(self._lookup(node), None, False)

    def _lookup(self, node) -> "_Lookup":
        if not self._is_lookup(node):
            raise _NotPerKey(f"`{ast.unparse(node)}` is not a table's lookup")
        return _Lookup(node.func.value, self._through(node.args[0], self._keys))

    def _keys(self, node):
        if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)):
            raise _NotPerKey(f"`{ast.unparse(node)}` is not one column")
        if isinstance(node.value, ast.Name) and node.value.id == self.parameter:
            return _InputKeys(node.slice.value)
        return _LookedUpKeys(self._through(node.value, self._lookup), node.slice.value)


@dataclass(frozen=True)
class _InputKeys:
    """A column of the argument, as lookup keys."""

    column: str


@dataclass(frozen=True)
class _Lookup:
    table: ast.Name
    keys: "_InputKeys | _LookedUpKeys"

    def resolved(self, resolver) -> Table:
        table = resolver.resolve(self.table)
        if not isinstance(table, Table):
            raise TypeError(f"{self.table.id} is no longer a table")
        return table


@dataclass(frozen=True)
class _LookedUpKeys:
    """A column of a looked-up frame, as lookup keys (``artists.lookup(song["artist"])``)."""

    lookup: _Lookup
    column: str


@dataclass(frozen=True)
class RowPlan:
    """``lookup[columns].to_numpy(dtype=float)`` (all columns for None; 1-D for one by name)."""

    lookup: _Lookup
    columns: "tuple | ast.Name | None"  # (a name is read on each call: a list of str, or no plan)
    single: bool

    def names(self, resolver) -> "tuple | None":
        if not isinstance(self.columns, ast.Name):
            return self.columns
        names = resolver.resolve(self.columns)
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise TypeError(f"{self.columns.id} is no longer a list of column names")
        return tuple(names)

    def chain(self) -> list:
        """Its lookups, the one keyed by the argument first, each keyed by the one before."""
        chain = [self.lookup]
        while isinstance(chain[0].keys, _LookedUpKeys):
            chain.insert(0, chain[0].keys.lookup)
        return chain


def planned_rows(work: dict, resolver) -> dict:
    """{IFV: its rows, or the TypeError or KeyError that stopped them} for {IFV: (RowPlan, the
    ``row_keys`` of its rows, the argument's columns they are of)}. The lookups of all plans at
    one depth are fetched together: the Redis tables of one server in one round trip."""
    chains = {i: plan.chain() for i, (plan, _, _) in work.items()}
    canonical = {}
    for i, (_, keys, columns) in work.items():
        position = columns.index(chains[i][0].keys.column)
        canonical[i] = [canonical_key(v) for v in key_values(keys, position)]
    results, depth = {}, 0
    while len(results) < len(work):
        tables, requests = {}, {}
        for i in [i for i in work if i not in results]:  # (in IFV order: the first table's request goes first)
            try:
                tables[i] = table = chains[i][depth].resolved(resolver)
            except TypeError as error:
                results[i] = error
                continue
            requests.setdefault(table, {}).update(dict.fromkeys(k for k in canonical[i] if k is not None))
        fetched = fetch_together({t: list(k) for t, k in requests.items()})
        for i, table in tables.items():
            chain = chains[i]
            try:
                if depth + 1 < len(chain):
                    canonical[i] = table.column_keys(canonical[i], chain[depth + 1].keys.column, fetched[table])
                    continue
                plan = work[i][0]
                rows = table.float_rows(canonical[i], plan.names(resolver), fetched[table])
                results[i] = rows[:, 0] if plan.single else rows
            except (TypeError, KeyError) as error:
                results[i] = error
        depth += 1
    return results


class FeatureRows:
    """The feature-row caches of one optimized function."""

    def __init__(self, keyed: dict, executor, values, capacity: int, resolver):
        """``values(env, indices)`` computes the executor's IFVs (side by side or not)."""
        self.keyed_ifvs = keyed  # (all, including those stopped: ``keyed`` are those still cached)
        self._executor, self._values = executor, values
        others = [i for i in range(len(executor.graph.ifvs)) if i not in keyed]
        self._needs_preprocessing = executor.reads_preprocessed(others)  # (what the others or the combine step read)
        self.capacity = capacity
        self.parameter = executor.parameters[0]
        self._resolver = resolver
        self._caches = {i: LRUCache(capacity) for i in keyed}
        self._plans = {i: k.plan for i, k in keyed.items() if k.plan is not None}
        self._table_names = {i: [ast.Name(n, ast.Load()) for n in k.tables] for i, k in keyed.items()}
        self.stopped = {}  # IFV index -> why its rows stopped being cached

    @property
    def keyed(self) -> dict:
        """{index: KeyedIFV} of the IFVs whose rows are cached."""
        return {i: self.keyed_ifvs[i] for i in self._caches}

    @property
    def planned(self) -> set:
        """Indices of the IFVs whose missed rows are computed from their tables' stored rows."""
        return set(self._plans) & set(self._caches)

    def clear(self) -> None:
        for cache in self._caches.values():
            cache.clear()

    def serve(self, arguments: dict):
        """The function's result, its keyed IFVs' rows from the caches where held; ``MISSING``
        when this call is not one the caches can serve (then the caller runs it as before)."""
        if not self._caches:
            return MISSING
        executor, values = self._executor, self._values
        found = self.cached_values(arguments, range(len(executor.graph.ifvs)))
        if found is MISSING:
            return MISSING
        try:
            env = executor.environment(arguments) if self._needs_preprocessing else executor.arguments_only(arguments)
            others = [i for i in range(len(executor.graph.ifvs)) if i not in found]
            computed = values(env, others) if others else {}
        except RemoteLookupError:
            raise
        except Exception:  # the function as written raises it, with its own message
            return MISSING
        computed.update(found)
        return executor.combine(env, [computed[i] for i in range(len(computed))])

    def cached_values(self, arguments: dict, indices):
        """{index: its rows} for the IFVs among ``indices`` whose rows are cached, every row of
        the argument, from the caches where held, the others computed and cached; ``MISSING``
        when this call is not one the caches can serve (the caller computes them as written)."""
        frame = arguments[self.parameter]
        if type(frame) is not pd.DataFrame or not len(frame):
            return MISSING
        current = self._caches  # (as they are now: another thread may stop caching an IFV)
        caches = {i: current[i] for i in indices if i in current}
        try:
            keys = {}
            for i in caches:
                columns = self.keyed_ifvs[i].columns
                if columns not in keys:
                    keys[columns] = row_keys(frame, columns)
        except Exception:  # (a missing column: the function as written raises what it raises)
            return MISSING
        if any(k is None for k in keys.values()):
            return MISSING
        found, missing = {}, {}
        for i, cache in caches.items():
            self._check_tables(i, cache)
            found[i] = cache.get_many(keys[self.keyed_ifvs[i].columns])
            missing[i] = [r for r, row in enumerate(found[i]) if row is MISSING]
        misses = sum(map(len, missing.values()))
        count_rows_cached(len(frame) * len(found) - misses, misses)
        if misses:
            try:
                planned = self._planned(keys, found, missing)
                rest = {i: m for i, m in missing.items() if m and i not in planned}
                if rest and not self._compute(arguments, len(frame), keys, found, rest):
                    return MISSING
            except RemoteLookupError:
                raise
            except Exception:  # the function as written raises it, with its own message
                return MISSING
        return {i: as_to_numpy(rows) for i, rows in found.items()}

    def _planned(self, keys, found, missing) -> set:
        """Compute the missing rows of the IFVs with a ``RowPlan`` from the tables' stored rows,
        fill them in and cache them; the indices of those IFVs."""
        plans = self._plans
        work = {}
        for i, rows in missing.items():
            if rows and i in plans:
                columns = self.keyed_ifvs[i].columns
                work[i] = (plans[i], [keys[columns][r] for r in rows], columns)
        done = set()
        if not work:
            return done
        for i, value in planned_rows(work, self._resolver).items():
            if isinstance(value, Exception):  # (a str column, one the table lacks: computed as written from now on)
                self._plans = {j: p for j, p in self._plans.items() if j != i}
                continue
            self._fill(i, keys[self.keyed_ifvs[i].columns], found, zip(missing[i], value))
            done.add(i)
        return done

    def _compute(self, arguments, n, keys, found, missing) -> bool:
        """Compute the missing rows of each keyed IFV (on the rows any of them misses), fill
        them in and cache them; False if an IFV's value is not float rows after all."""
        rows = sorted(set().union(*missing.values()))
        env = self._executor.environment(arguments, rows if len(rows) < n else None, [self.parameter])
        computed = self._values(env, list(missing))
        at = {r: j for j, r in enumerate(rows)}
        for i, wanted in missing.items():
            value = computed[i]
            if not (type(value) is np.ndarray and value.dtype == np.float64 and value.ndim in (1, 2)
                    and value.shape[0] == len(rows)):
                self._stop(i, f"its value was a {_described(value)}, not float rows")
                return False
            if not column_major(value):
                self._stop(i, "its value was a C-ordered array; its cached rows are laid out as a frame's "
                              "to_numpy is (F order), and a model computes other bits on the other layout")
                return False
            self._fill(i, keys[self.keyed_ifvs[i].columns], found, ((r, value[at[r]]) for r in wanted))
        return True

    def _fill(self, index: int, column_keys: list, found: dict, fresh) -> None:
        """Cache the computed rows ``fresh`` ((row, its features)) of IFV ``index`` and fill them in."""
        fresh = [(r, row.copy()) for r, row in fresh]
        self._caches[index].put_many((column_keys[r], row) for r, row in fresh)
        for r, row in fresh:
            found[index][r] = row

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


def as_to_numpy(rows: list) -> np.ndarray:
    """An IFV's rows as one array laid out as ``to_numpy`` lays out a lookup's frame (its
    row-major blocks transposed: F order), so that the concatenation, and the model after it,
    read the layout the function's own statements give (``column_major`` checks it of every
    value they compute). Rows of a 1-D IFV are numbers."""
    if np.ndim(rows[0]) == 0:
        return np.array(rows, dtype=float)
    return np.stack(rows, axis=1).T


def column_major(value: np.ndarray) -> bool:
    """Whether numpy orders ``value``'s axes as an F-ordered array's when it lays out a
    concatenation of it (or its rows or columns are too few for the order to tell)."""
    return value.ndim < 2 or min(value.shape) < 2 or abs(value.strides[0]) < abs(value.strides[1])


def _described(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.ndim}-d {value.dtype} array"
    return type(value).__name__
