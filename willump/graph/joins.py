"""IFVs of a chain of left joins whose columns feed the model directly.

    df = df.merge(members, on="msno", how="left")
    df = df.merge(songs, on="song_id", how="left")
    return model.predict(df[FEATURES])

Each joined table supplies its own columns, so each is its own feature
generator; the columns the frame had before the joins are one more IFV. The
chain is rewritten as

    return model.predict(JOIN_ASSEMBLE([JOIN_BASE(df, FEATURES, ...),
                                        JOIN_PART(df, FEATURES, ...), ...], FEATURES))

whose runtime helpers (``willump.runtime.joins``) give the same frame as the
chain, or raise ``NotSeparable`` when they cannot (a column that two sources
share, a key that matches several rows), and the function then runs as written.
"""

import ast
import copy
from dataclasses import dataclass

import pandas as pd

JOIN_BASE = "__willump_join_base"
JOIN_PART = "__willump_join_part"
JOIN_ASSEMBLE = "__willump_join_assemble"
HELPERS = (JOIN_BASE, JOIN_PART, JOIN_ASSEMBLE)


@dataclass
class _Join:
    statement_index: int
    call: ast.Call
    table: ast.expr
    on: ast.expr


@dataclass
class JoinChain:
    """A recognized chain, and the body rewritten to compute one IFV per source."""

    body: list[ast.stmt]  # the statements, joins removed and the selection rewritten
    holder_position: int  # position in ``body`` of the rewritten selection statement
    sources: list[int]  # for each statement of ``body``, the original statement it comes from
    joins: list[int]  # the original join statements
    origins: list[list[int]]  # for each IFV, the original statements it stands for
    names: list[str]
    descriptions: list[str]


def find_join_chain(statements, flow, model, resolver, parameter_marker) -> JoinChain | None:
    """Recognize ``frame[columns]`` feeding the model after a chain of left joins."""
    selection, holder = _selection(statements, flow, model, parameter_marker)
    if selection is None or not isinstance(selection.value, ast.Name):
        return None
    columns = selection.slice
    if isinstance(columns, ast.Constant):  # df["a"] is a Series, not a block of columns
        return None
    joins: list[_Join] = []
    frame_name = selection.value.id
    index = flow.reaching[holder.index].get(frame_name, parameter_marker)
    base = None
    while index != parameter_marker:
        statement = statements[index]
        found = _joins_of(statement, frame_name, resolver)
        if found is None:
            break
        receiver, statement_joins = found
        joins[:0] = statement_joins
        base = receiver
        index = flow.reaching[index].get(receiver, parameter_marker)
        frame_name = receiver
    if not joins:
        return None
    join_indices = sorted({j.statement_index for j in joins})
    # The joined frames must be used by the next join and the selection only.
    users = {holder.index} | set(join_indices)
    for i in join_indices:
        for s in statements:
            if i in flow.deps[s.index] and s.index not in users:
                return None
    if flow.definitions(holder.index, _names(columns)) & set(join_indices):
        return None
    if _reads_outside(holder.node, selection.value.id, selection):
        return None  # (the rewrite would leave that read seeing the frame before the joins)
    # The rewrite reads the frame and the tables at the selection: they must not change before it.
    for join in joins:
        operands = _names(join.table) | _names(join.on)
        if join is joins[0]:
            operands.add(base)
        for s in statements[join.statement_index + 1 : holder.index]:
            if s.writes & operands and not (s.index in join_indices and s.writes & operands == {base}):
                return None
    groups = _groups(joins, resolver)
    return _rewrite(statements, holder, selection, columns, base, joins, groups)


def _reads_outside(statement: ast.stmt, name: str, selection: ast.Subscript) -> bool:
    """Does ``statement`` read ``name`` anywhere but in ``selection`` (``df[cols].assign(r=df["a"])``)?"""
    inside = {id(n) for n in ast.walk(selection)}
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in inside
        for n in ast.walk(statement)
    )


def _selection(statements, flow, model, parameter_marker):
    """The ``frame[columns]`` subscript the model input is made of, and its statement."""
    expr, holder = model.call.args[0], model.statement
    for _ in range(len(statements)):
        while isinstance(expr, (ast.Attribute, ast.Call)):  # .to_numpy(), .values, .astype(...)
            expr = expr.func if isinstance(expr, ast.Call) else expr.value
        if isinstance(expr, ast.Subscript):
            return expr, holder
        if not isinstance(expr, ast.Name):
            return None, None
        index = flow.reaching[holder.index].get(expr.id, parameter_marker)
        if index == parameter_marker or not isinstance(statements[index].node, ast.Assign):
            return None, None
        holder = statements[index]
        if len(holder.node.targets) != 1 or not isinstance(holder.node.targets[0], ast.Name):
            return None, None
        expr = holder.node.value
    return None, None


def _joins_of(statement, frame_name, resolver):
    """(receiver name, left joins) when the statement is ``frame = receiver.merge(...)...``."""
    node = statement.node
    if statement.opaque or not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return None
    if not (isinstance(node.targets[0], ast.Name) and node.targets[0].id == frame_name):
        return None
    joins = []
    expr = node.value
    while True:
        join = _left_join(expr, statement.index, resolver)
        if join is None:
            break
        joins.insert(0, join[1])
        expr = join[0]
    if not joins or not isinstance(expr, ast.Name):
        return None
    return expr.id, joins


def _left_join(expr, index, resolver):
    """(left frame expression, join) for ``left.merge(T, on=k, how="left")`` or ``pd.merge(left, T, ...)``."""
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, ast.Attribute) or expr.func.attr != "merge":
        return None
    args = list(expr.args)
    if resolver.resolve(expr.func) is pd.merge and len(args) >= 2:
        left, args = args[0], args[1:]
    else:
        left = expr.func.value
    keywords = {k.arg: k.value for k in expr.keywords}
    if len(args) != 1 or set(keywords) != {"on", "how"}:
        return None
    how = keywords["how"]
    if not (isinstance(how, ast.Constant) and how.value == "left"):
        return None
    return left, _Join(index, expr, args[0], keywords["on"])


def _names(expr) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


def _constant_keys(on: ast.expr) -> list[str] | None:
    if isinstance(on, ast.Constant) and isinstance(on.value, str):
        return [on.value]
    if isinstance(on, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in on.elts
    ):
        return [e.value for e in on.elts]
    return None


def _join_keys(on: ast.expr, resolver) -> list[str] | None:
    """The key columns of a join, written out or named by a global or closure variable."""
    keys = _constant_keys(on)
    if keys is None and isinstance(on, ast.Name):
        value = resolver.resolve(on)
        if isinstance(value, str):
            keys = [value]
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            keys = list(value)
    return keys


def _groups(joins: list[_Join], resolver) -> list[list[int]]:
    """Joins grouped so that a join keyed by a column of an earlier table joins that table's IFV.

    When a key cannot be known before the call, all joins form one group.
    """
    groups: list[list[int]] = []
    provider: dict[str, int] = {}  # column -> group that brings it in
    for j, join in enumerate(joins):
        keys = _join_keys(join.on, resolver)
        if keys is None:
            return [list(range(len(joins)))]
        owner = next((provider[k] for k in keys if k in provider), None)
        if owner is None:
            groups.append([j])
            owner = len(groups) - 1
        else:
            groups[owner].append(j)
        table = resolver.resolve(join.table) if isinstance(join.table, ast.Name) else None
        if isinstance(table, pd.DataFrame):
            for column in table.columns:
                if column not in keys:
                    provider.setdefault(column, owner)
    return groups


def _rewrite(statements, holder, selection, columns, base, joins, groups) -> JoinChain:
    def located(node, where):
        return ast.copy_location(node, where)

    def name(identifier, where):
        return located(ast.Name(identifier, ast.Load()), where)

    def pairs(members, where):
        return located(
            ast.List(
                [
                    located(ast.Tuple([copy.deepcopy(joins[j].table), copy.deepcopy(joins[j].on)], ast.Load()), where)
                    for j in members
                ],
                ast.Load(),
            ),
            where,
        )

    first = joins[0].call
    every = pairs(range(len(joins)), first)
    elements = [
        located(
            ast.Call(name(JOIN_BASE, first), [name(base, first), copy.deepcopy(columns), every], []),
            first,
        )
    ]
    for members in groups:
        where = joins[members[0]].call
        elements.append(
            located(
                ast.Call(
                    name(JOIN_PART, where),
                    [name(base, where), copy.deepcopy(columns), pairs(members, where), copy.deepcopy(every)],
                    [],
                ),
                where,
            )
        )
    container = located(ast.List(elements, ast.Load()), selection)
    assemble = located(ast.Call(name(JOIN_ASSEMBLE, selection), [container, copy.deepcopy(columns)], []), selection)

    class Replace(ast.NodeTransformer):
        def visit_Subscript(self, node):
            if (node.lineno, node.col_offset, node.end_col_offset) == (
                selection.lineno,
                selection.col_offset,
                selection.end_col_offset,
            ):
                return assemble
            return self.generic_visit(node)

    join_indices = {j.statement_index for j in joins}
    body, sources, holder_position = [], [], None
    for s in statements:
        if s.index in join_indices:
            continue
        sources.append(s.index)
        if s is holder:
            holder_position = len(body)
            body.append(ast.fix_missing_locations(Replace().visit(copy.deepcopy(s.node))))
        else:
            body.append(s.node)
    origins = [[]] + [sorted({joins[j].statement_index for j in g}) for g in groups]
    tables = [" + ".join(ast.unparse(joins[j].table) for j in g) for g in groups]
    descriptions = [f"selected columns of {base} before the joins"] + [
        f"selected columns joined from {t}" for t in tables
    ]
    return JoinChain(body, holder_position, sources, sorted(join_indices), origins, [base] + tables, descriptions)
