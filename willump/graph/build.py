"""Building the transformation graph of a function (paper §5.1).

Steps: find the model call (the sink), find the concatenation closest to it
(the commutative node), take each of its entries as the root of an IFV, and
split the other statements by the paper's three rules into preprocessing and
one feature generator per IFV. The executor runs preprocessing once, then
each generator in its own namespace, then the combine step; the checks at
the end make sure that order gives every statement the same values as the
original order, moving generators into preprocessing where it would not.
Guards the body starts with (``if len(df) == 0: return ...``) stay out of the
graph: every call runs them first, as written, and the graph only when none
of them ends the call.
"""

import ast
import copy
from dataclasses import dataclass

import pandas as pd

from willump.graph.composites import Expansion, expand
from willump.graph.inline import Inlined, inline_helpers
from willump.graph.graph import PLACEHOLDER, IFV, Combiner, ModelNode, TransformationGraph
from willump.graph.joins import HELPERS, JOIN_ASSEMBLE, find_join_chain
from willump.graph.recognize import COMPOSITE_JOINS, Resolver, concatenation_calls, keyword_model_call, model_call
from willump.graph.source import FunctionSource
from willump.graph.statements import Statement, analyze_statement, names_read, new_object_call, replace_node, walk_scope

PARAMETER = -1  # the definition index of a value the function received as an argument
_DYNAMIC_SCOPE = {"locals", "vars", "eval", "exec", "super", "__class__"}

# How to write the function instead, per kind of reason it runs unmodified (fit and top_k say it).
HINTS = {
    "async": "define it with 'def', not 'async def'",
    "star-arguments": "name each argument in the signature instead of *args / **kwargs",
    "outer names": "return the value instead of assigning a name outside the function",
    "nested definition": "define the helper outside the function, at module level",
    "generator": "return the predictions instead of yielding them",
    "early return": (
        "put early returns first, as 'if <test>: return ...' (or raise) reading only the parameters "
        "and globals, before the feature code; or compute the result and return it at the end"
    ),
    "dynamic scope": "name the variables directly instead of locals(), vars(), eval(), exec() or super()",
    "late binding": (
        "pass the lambda or generator expression straight to the call that runs it "
        "(df.apply(lambda r: ...)), or bind the locals it reads as default arguments"
    ),
    "no return": "end the function with 'return model.predict(...)' (or a value computed from it)",
    "no model": (
        "end the function with 'return model.predict(X)' (or predict_proba / decision_function / score_samples), "
        "or assign 'y = model.predict(X)' and return y or a value computed from it"
    ),
    "conditional model": (
        "move the model call out of the condition: call it on every row and choose among its "
        "outputs afterwards (np.where)"
    ),
    "walrus": "compute the features without :=, each assigned to a variable on its own line",
    "rebinding": "give the new value another name, so each variable is assigned once before the features read it",
    "input after model": "use the model's input only in the model call; compute what else you need from the features before it",
    "model arguments": "call the model with the features alone; set its options on the model object",
}


@dataclass
class Plan:
    """The graph plus what code generation needs to run it."""

    graph: TransformationGraph
    local_names: frozenset  # every name local to the original function
    possibly_unbound: frozenset  # local names that may have no value when read
    schedule: list  # every statement as a Step, in source order
    container: type | None = None  # list or tuple: how the IFV entries were written
    helpers: tuple[str, ...] = ()  # runtime helpers the rewritten code calls, passed as locals
    fallback: list | None = None  # the user's joins and selection, for inputs the split cannot serve
    model_split: "ModelSplit | str | None" = None  # the combine step cut at the model call, or why not
    source: FunctionSource | None = None  # what the plan was built from: the user's helpers read in
    inlined: Inlined | None = None  # the helpers read in, when there are
    expansion: Expansion | None = None  # scikit-learn composites written out as their steps, if any
    unfitted: Expansion | None = None  # when composites were left as one call for not being fitted yet

    @property
    def names(self) -> dict:
        """Names the rewritten body reads besides the function's own: the composites' objects."""
        return self.expansion.names if self.expansion is not None else {}


PREPROCESSING, COMBINE = "preprocessing", "combine"
MODEL_OUTPUT = "__willump_model_output"  # the name the finishing statements read the model's output from


@dataclass
class ModelSplit:
    """The combine step cut at the model call.

    ``before`` computes the model's input from the IFV values and returns
    ``(model, X)``; ``after`` turns the model's output into the function's result.
    Together they let other models answer some rows in the user's output format.
    """

    before: list
    after: list


@dataclass(frozen=True)
class Step:
    """One statement to run, and the namespace (block) it runs in."""

    block: object  # PREPROCESSING, COMBINE, or the index of the IFV whose generator it belongs to
    node: ast.stmt  # the statement; the combine step rewritten to read the IFV values
    assigned: frozenset  # local names it may bind
    holder: bool = False  # the statement holding the IFV entries: they are computed just before it


def build_plan(source: FunctionSource) -> Plan:
    source, helper_notes, inlined = inline_helpers(source)
    definition = source.definition
    parameters = _parameters(definition.args)
    graph = TransformationGraph(definition.name, parameters, [], notes=helper_notes)
    plan = Plan(graph, frozenset(parameters), frozenset(), [], source=source, inlined=inlined)
    body = definition.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    guards, body = _leading_guards(body, parameters)
    obstacle = _whole_function_obstacle(definition, guards)
    if obstacle:
        return _unmodified(plan, *obstacle)
    graph.guards = [analyze_statement(i, node) for i, node in enumerate(guards)]

    expansion = expand(body, Resolver(source.func, definition))
    plan.unfitted = expansion if expansion.unfitted else None
    if expansion.names:
        body, plan.expansion = expansion.body, expansion
    hidden = tuple(plan.names)
    statements = [analyze_statement(i, node) for i, node in enumerate(body)]
    for statement in statements:
        if names_read(statement.node) & set(hidden):
            statement.display = expansion.readable(ast.unparse(statement.node))
    graph.statements = statements
    graph.notes += expansion.notes + [f"line {s.lineno}: {s.opaque}" for s in statements if s.opaque]
    last = statements[-1] if statements else None
    if last is None or not isinstance(last.node, ast.Return) or last.node.value is None:
        line = last.lineno if last else definition.lineno
        return _unmodified(plan, line, "the function does not end with 'return <prediction>'", "no return")

    flow = _DataFlow(statements, parameters + hidden)
    plan.local_names = frozenset(flow.local_names)

    model = _find_model(statements, flow)
    if model is None:
        keyword = keyword_model_call(definition)
        if keyword is not None:
            return _unmodified(plan, keyword.lineno, f".{keyword.func.attr}(...) is given its input by keyword; "
                               "write it by position (model.predict(X)) to have the function optimized", "no model")
        return _unmodified(
            plan,
            last.lineno,
            "no call to .predict, .predict_proba, .decision_function or .score_samples was found in the returned value",
            "no model",
        )
    if not _always_evaluated(model.statement.node, model.call):
        return _unmodified(plan, model.statement.lineno, "the model is called under a condition", "conditional model")
    resolver = Resolver(source.func, definition, plan.names)
    holder, container, kind = _find_combiner(statements, flow, model, resolver, graph.notes)
    chain = None if holder else find_join_chain(statements, flow, model, resolver, PARAMETER)
    if chain:
        # Continue on the body rewritten to compute each joined table's columns separately.
        statements = [analyze_statement(i, node) for i, node in enumerate(chain.body)]
        for statement, original in zip(statements, chain.sources):
            statement.display = graph.statements[original].source
        flow = _DataFlow(statements, parameters + hidden + HELPERS)
        model = _find_model(statements, flow)
        holder, kind = statements[chain.holder_position], "left joins"
        container = next(
            n.args[0] for n in ast.walk(holder.node) if isinstance(n, ast.Call) and _calls(n, JOIN_ASSEMBLE)
        )
        plan.local_names = frozenset(flow.local_names)
        plan.helpers = HELPERS
        plan.fallback = [graph.statements[i].node for i in chain.joins + [chain.sources[chain.holder_position]]]
    plan.possibly_unbound = flow.possibly_unbound()
    graph.model = model
    if holder is None:
        holder, container, kind = model.statement, model.call.args[0], "identity"
        elements = [container]
        placeholder = ast.Subscript(ast.Name(PLACEHOLDER, ast.Load()), ast.Constant(0), ast.Load())
    else:
        elements = list(container.elts)
        placeholder = ast.Name(PLACEHOLDER, ast.Load())
        plan.container = tuple if isinstance(container, ast.Tuple) else list
    graph.combiner = Combiner(kind, holder, ast.unparse(container))
    if any(isinstance(n, ast.NamedExpr) for n in ast.walk(holder.node)):
        return _unmodified(plan, holder.lineno, "an assignment expression (:=) where the features are joined", "walrus")

    tail = flow.descendants({holder.index})
    rewritten = {holder.index: _replace(holder.node, container, placeholder)}
    tail_reads = {
        i: (names_read(rewritten[i]) - {PLACEHOLDER} if i in rewritten else statements[i].reads) & flow.local_names
        for i in tail
    }

    root_reads = [names_read(e) & flow.local_names for e in elements]
    root_defs = [flow.definitions(holder.index, reads) for reads in root_reads]
    root_ancestors = [flow.ancestors(defs) for defs in root_defs]
    tail_defs = set()
    for i in tail:
        tail_defs |= flow.definitions(i, tail_reads[i])
    tail_defs -= tail

    # The paper's rules: an ancestor of exactly one IFV belongs to its generator;
    # an ancestor of several is preprocessing. Statements the combine step reads
    # directly, statements with side effects and dead code are preprocessing too.
    users = {i: sum(i in a for a in root_ancestors) for i in range(len(statements)) if i not in tail}
    preprocessing = _preprocessing(flow, resolver, users, tail_defs)
    generators = [sorted(a - preprocessing) for a in root_ancestors]

    problem = _separate_safely(flow, preprocessing, generators, root_reads, holder.index)
    if problem is None:
        problem = _tail_problem(flow, preprocessing, sorted(tail), tail_reads)
    if problem:
        return _unmodified(plan, *problem, "rebinding")

    blocks = {i: PREPROCESSING for i in preprocessing} | {i: COMBINE for i in tail}
    for index, generator in enumerate(generators):
        blocks.update((i, index) for i in generator)
    plan.schedule = [
        Step(blocks[s.index], rewritten.get(s.index, s.node), frozenset(s.bound & flow.local_names), s is holder)
        for s in statements
    ]
    plan.model_split = _split_at_model(flow, sorted(tail), rewritten, model)
    ensemble = expansion.ensembles.get(model.statement.lineno)
    if isinstance(plan.model_split, str) and ensemble:
        plan.model_split = (f"line {model.statement.lineno}: the {ensemble}'s estimators each read the features and "
                            "its answer is theirs together, not one model's: cascades and top-K filters need one model")
    graph.preprocessing = [statements[i] for i in sorted(preprocessing)]
    graph.tail = [statements[i] for i in sorted(tail)]
    names = chain.names if chain else _ifv_names(elements, root_reads, generators, statements, expansion.display)
    originals = graph.statements
    for index, element in enumerate(elements):
        involved = [statements[i].node for i in sorted(root_ancestors[index])] + [element]
        graph.ifvs.append(
            IFV(
                index=index,
                name=names[index],
                expression=element,
                generator=[statements[i] for i in generators[index]],
                inputs=tuple(p for p in parameters if any(p in names_read(n) for n in involved)),
                columns=_columns_read(involved, parameters),
                origin=[originals[i] for i in chain.origins[index]] if chain else None,
                description=chain.descriptions[index] if chain else None,
            )
        )
    return plan


def _own_frame_statements(flow, resolver, index: int) -> set | None:
    """When statement ``index`` only sets columns of DataFrames the function made itself
    (``out = pd.DataFrame(index=df.index)`` or ``c = df[["c"]].copy()``, then ``out["a2"] = ...``):
    the statements making and setting them before it (it may then go with the IFV reading them,
    as a binding would, if they all do); else None."""
    statement = flow.statements[index]
    if not _sets_columns(statement) or not statement.writes:
        return None
    chain = set()
    for name in statement.writes:
        at = index
        while True:
            made = flow.reaching[at].get(name, PARAMETER)
            if made == PARAMETER:  # (the caller's object, or a global's)
                return None
            chain.add(made)
            maker = flow.statements[made]
            if maker.bound == {name} and maker.writes == {name}:
                if not _new_frame(maker.node, resolver):
                    return None
                break
            if not _sets_columns(maker):
                return None
            at = made
    return chain


def _sets_columns(statement) -> bool:
    """``name[key] = value`` (targets only), binding no name: on a DataFrame, a column replaced or added."""
    node = statement.node
    return (isinstance(node, ast.Assign) and not statement.bound and statement.opaque is None
            and all(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) for t in node.targets))


def _new_frame(node, resolver) -> bool:
    """``name = pd.DataFrame(...)`` (no ``copy=``) or ``<value>.copy()`` (``new_object_call``): a frame
    no other object holds (under copy-on-write its columns are its own to replace)."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
        return False
    value = node.value
    return new_object_call(value) or (
        isinstance(value, ast.Call) and resolver.resolve(value.func) is pd.DataFrame
        and not any(k.arg in ("copy", None) for k in value.keywords))


def _preprocessing(flow, resolver, users: dict, tail_defs: set) -> set:
    """The statements run once for every row: the ancestors of what the combine step reads directly,
    of statements several IFVs need, and of statements with side effects, except columns set on a
    frame the function made whose making and setting all stay inside one IFV (nothing else reads it)."""
    own = {}
    for i, n in users.items():
        if n == 1 and flow.statements[i].side_effects:
            chain = _own_frame_statements(flow, resolver, i)
            if chain is not None and all(users.get(c) == 1 for c in chain):
                own[i] = chain
    while True:
        seeds = tail_defs | {i for i, n in users.items() if n != 1 or (flow.statements[i].side_effects and i not in own)}
        preprocessing = flow.ancestors(seeds) | seeds
        shared = [i for i, chain in own.items() if chain & preprocessing]  # (read by the combine step or others too)
        if not shared:
            return preprocessing
        for i in shared:
            del own[i]


def _split_at_model(flow, tail, rewritten, model) -> ModelSplit | str:
    at = model.statement.index
    node = rewritten.get(at, model.statement.node)
    position = (model.call.lineno, model.call.col_offset, model.call.end_col_offset)
    call = next(
        n for n in ast.walk(node)
        if isinstance(n, ast.Call) and (n.lineno, n.col_offset, n.end_col_offset) == position
    )
    returned = ast.copy_location(
        ast.Return(ast.Tuple([copy.deepcopy(call.func.value), copy.deepcopy(call.args[0])], ast.Load())), node
    )
    before = [rewritten.get(i, flow.statements[i].node) for i in tail if i < at] + [returned]
    finishing = _replace(node, call, ast.Name(MODEL_OUTPUT, ast.Load()))
    after = [finishing] + [rewritten.get(i, flow.statements[i].node) for i in tail if i > at]
    for i, statement in zip([at] + [i for i in tail if i > at], after):
        defined = flow.definitions(i, names_read(statement) & flow.local_names)
        if any(d in tail and d < at for d in defined):
            return f"line {flow.statements[i].lineno}: the model's input is used after the model call ({HINTS['input after model']})"
    if call.keywords or len(call.args) != 1:
        return f"line {model.statement.lineno}: the model call has arguments besides the features ({HINTS['model arguments']})"
    return ModelSplit(before, after)


def _calls(call: ast.Call, name: str) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == name


def _unmodified(plan: Plan, line: int, reason: str, kind: str) -> Plan:
    plan.graph.unmodified_reason = f"line {line}: {reason}"
    plan.graph.unmodified_hint = HINTS[kind]
    return plan


def _parameters(args: ast.arguments) -> tuple[str, ...]:
    names = [a.arg for a in args.posonlyargs + args.args]
    if args.vararg:
        names.append(args.vararg.arg)
    names += [a.arg for a in args.kwonlyargs]
    if args.kwarg:
        names.append(args.kwarg.arg)
    return tuple(names)


def _leading_guards(body: list[ast.stmt], parameters) -> tuple[list[ast.If], list[ast.stmt]]:
    """(the guards the body starts with, the statements after them).

    A guard is ``if <test>: ... return`` (or ``raise``), ``elif`` branches alike, no ``else``:
    a branch that runs ends the call, so when none runs the call goes on as if the guard were
    not there. Each guard runs on the parameters alone, before the graph: it may read a local
    name only where it binds it itself, its tests bind none (no ``:=``), and the rest of the
    body reads no name only a guard binds.
    """
    statements = [analyze_statement(i, node) for i, node in enumerate(body)]
    local = set(parameters).union(*(s.bound for s in statements))
    count = 0
    while count < len(body) and _is_guard(body[count]):
        guard, later = statements[count], statements[count + 1:]
        own = guard.bound - set(parameters)
        later_reads = set().union(*(s.reads for s in later))
        later_binds = set().union(*(s.bound for s in later))
        if (
            any(isinstance(n, ast.NamedExpr) for test in _guard_tests(guard.node) for n in ast.walk(test))
            or names_read(guard.node) & (local - set(parameters) - own)
            or own & (later_reads - later_binds)
        ):
            break
        count += 1
    return body[:count], body[count:]


def _is_guard(node: ast.stmt) -> bool:
    """``if``/``elif`` whose every branch ends the call, without ``else``."""
    if not isinstance(node, ast.If) or not node.body or not isinstance(node.body[-1], (ast.Return, ast.Raise)):
        return False
    return not node.orelse or (len(node.orelse) == 1 and _is_guard(node.orelse[0]))


def _guard_tests(node: ast.If) -> list[ast.expr]:
    tests = [node.test]
    while node.orelse:
        node = node.orelse[0]
        tests.append(node.test)
    return tests


def _whole_function_obstacle(definition: ast.AST, guards: list[ast.If]) -> tuple[int, str, str] | None:
    """A construct that keeps the whole function from being split: its line, the reason, its kind.

    The returns of the leading ``guards`` are allowed.
    """
    if isinstance(definition, ast.AsyncFunctionDef):
        return definition.lineno, "async functions are not optimized", "async"
    args = definition.args
    if args.vararg or args.kwarg:
        return definition.lineno, "star-arguments (*args / **kwargs) in the signature", "star-arguments"
    last = definition.body[-1] if definition.body else None
    guarded = {id(n) for guard in guards for n in ast.walk(guard) if isinstance(n, ast.Return)}
    for node in ast.walk(definition):
        if node is definition:
            continue
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            keyword = "global" if isinstance(node, ast.Global) else "nonlocal"
            return node.lineno, f"'{keyword} {', '.join(node.names)}' rebinds names outside the function", "outer names"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.lineno, f"nested definition of {node.name!r}", "nested definition"
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return node.lineno, "generator and coroutine functions are not optimized", "generator"
        if isinstance(node, ast.Return) and node is not last and id(node) not in guarded:
            return node.lineno, "an early return (a 'return' that is not the last statement)", "early return"
        if isinstance(node, ast.Name) and node.id in _DYNAMIC_SCOPE:
            return node.lineno, f"'{node.id}' reads or changes the function's scope dynamically", "dynamic scope"
    late = _late_binding(definition)
    if late:
        return late
    return None


def _late_binding(definition: ast.FunctionDef) -> tuple[int, str, str] | None:
    """A lambda or generator expression that may run after its statement and reads locals.

    It would read the variables when it runs; separate blocks have separate variables.
    Passed straight to a call (``df.apply(lambda r: ...)``) it runs within its statement.
    """
    local = set(_parameters(definition.args))
    for node in ast.walk(definition):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
    consumed = set()
    for node in ast.walk(definition):
        if isinstance(node, ast.Call):
            consumed.update(id(a) for a in node.args)
            consumed.update(id(k.value) for k in node.keywords)
    for node in ast.walk(definition):
        if isinstance(node, (ast.Lambda, ast.GeneratorExp)) and id(node) not in consumed:
            if names_read(node) & local:
                kind = "a lambda" if isinstance(node, ast.Lambda) else "a generator expression"
                return node.lineno, f"{kind} kept for later reads local variables when it runs", "late binding"
    return None


class _DataFlow:
    """Reaching definitions over the body, one statement at a time."""

    def __init__(self, statements: list[Statement], parameters: tuple[str, ...]):
        self.statements = statements
        self.parameters = parameters
        self.local_names = set(parameters)
        for s in statements:
            self.local_names |= s.bound
        self.reaching: list[dict[str, int]] = []  # name -> defining statement, before each statement
        current = {p: PARAMETER for p in parameters}
        for s in statements:
            self.reaching.append(dict(current))
            for name in s.writes & self.local_names:  # mutating a global defines no local
                current[name] = s.index
        self.deps = [self.definitions(s.index, s.reads) for s in statements]

    def definitions(self, index: int, names) -> set[int]:
        """Statements whose values the names have when statement ``index`` runs."""
        before = self.reaching[index]
        return {before[n] for n in names if before.get(n, PARAMETER) != PARAMETER}

    def ancestors(self, start: set[int]) -> set[int]:
        seen, pending = set(start), list(start)
        while pending:
            for d in self.deps[pending.pop()]:
                if d not in seen:
                    seen.add(d)
                    pending.append(d)
        return seen

    def descendants(self, start: set[int]) -> set[int]:
        found = set(start)
        for s in self.statements:
            if s.index not in found and self.deps[s.index] & found:
                found.add(s.index)
        return found

    def possibly_unbound(self) -> frozenset:
        """Local names that some read may find without a value."""
        names = set()
        for s in self.statements:
            names |= s.maybe_writes
            names |= {n for n in s.reads & self.local_names if n not in self.reaching[s.index]}
        return frozenset(names)


def _always_evaluated(statement: ast.stmt, target: ast.AST) -> bool:
    """Whether ``target`` is evaluated whenever ``statement`` runs (not under ``if``/``and``/``or``)."""
    parents = {}
    for node in ast.walk(statement):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    node = target
    while id(node) in parents:
        parent = parents[id(node)]
        if isinstance(parent, ast.IfExp) and node is not parent.test:
            return False
        if isinstance(parent, ast.BoolOp) and node is not parent.values[0]:
            return False
        if isinstance(parent, ast.Compare) and node is not parent.left and node is not parent.comparators[0]:
            return False
        node = parent
    return True


def _find_model(statements: list[Statement], flow: _DataFlow) -> ModelNode | None:
    returned = statements[-1]
    call = model_call(returned.node.value)
    holder = returned
    if call is None:
        # The prediction assigned first: ``y = model.predict(X)`` then ``return y`` or ``return f(y)``, maybe
        # through other assignments (``y = np.expm1(y)``, a blend): the latest assignment of a model call the
        # returned value is computed from.
        for index in sorted(flow.ancestors({returned.index}) - {returned.index}, reverse=True):
            if isinstance(statements[index].node, (ast.Assign, ast.AnnAssign)) and not statements[index].opaque:
                call = model_call(statements[index].node.value)
                if call is not None:
                    holder = statements[index]
                    break
    if call is None:
        return None
    return ModelNode(holder, call.func.attr, call.func.value, call)


def _find_combiner(statements, flow, model, resolver, notes):
    """(statement holding the IFV entries, the list/tuple of entries, kind) closest to the model."""
    order, seen = [model.statement.index], {model.statement.index}
    for index in order:  # breadth-first from the model towards the inputs
        for d in sorted(flow.deps[index], reverse=True):
            if d not in seen:
                seen.add(d)
                order.append(d)
    for index in order:
        statement = statements[index]
        if statement.opaque:
            continue
        tree = model.call.args[0] if statement is model.statement else statement.node
        for call, kind in concatenation_calls(tree, resolver):
            if not _always_evaluated(statement.node, call):
                continue
            container = _entries_argument(call, kind)
            holder = statement
            if isinstance(container, ast.Name):
                holder, container = _list_definition(statements, flow, index, container.id)
            if not isinstance(container, (ast.List, ast.Tuple)) or any(
                isinstance(e, ast.Starred) for e in container.elts
            ):
                notes.append(
                    f"line {statement.lineno}: the blocks joined by {kind} are not written out as a "
                    "list, so they form a single feature vector"
                )
                return None, None, None
            return holder, container, kind
    return None, None, None


def _entries_argument(call: ast.Call, kind: str) -> ast.expr | None:
    if kind in COMPOSITE_JOINS:
        return call.args[1]
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg in ("objs", "blocks", "tup")), None)


def _list_definition(statements, flow, index, name):
    definition = flow.reaching[index].get(name, PARAMETER)
    if definition != PARAMETER:
        node = statements[definition].node
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, (ast.List, ast.Tuple))
        ):
            return statements[definition], node.value
    return statements[index], None


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> ast.AST:
    """A copy of ``tree`` with the node ``old`` (one of its nodes) replaced by ``new``, at its position.
    (By identity: code written out for a composite has many nodes at the one position of the user's call.)"""
    copies = {}
    copied = copy.deepcopy(tree, copies)
    return replace_node(copied, copies[id(old)], copy.deepcopy(new))


def _separate_safely(flow, preprocessing, generators, root_reads, holder):
    """Move generators into preprocessing until every read sees its original value.

    Preprocessing runs in source order, then each generator on a copy of its
    namespace. A generator reading a name that a later preprocessing statement
    rebinds would see the wrong value: running it inside preprocessing, in
    source order, fixes that. Returns a problem (line, reason) if none is left.
    """
    while True:
        final = _last_writers(flow, preprocessing)
        for g, generator in enumerate(generators):
            if generator and not _generator_sees_originals(flow, final, generator, root_reads[g], holder):
                preprocessing |= set(generator)
                generator.clear()
                break
        else:
            break
    final = _last_writers(flow, preprocessing)
    for generator, reads in zip(generators, root_reads):
        if not _generator_sees_originals(flow, final, generator, reads, holder):
            name = next(n for n in sorted(reads) if final.get(n) != flow.reaching[holder].get(n))
            return flow.statements[holder].lineno, _rebinding_reason(name, final.get(name), flow)
    return None


def _generator_sees_originals(flow, final, generator, root_reads, holder) -> bool:
    def seen(name, before):
        own = [i for i in generator if i < before and name in flow.statements[i].writes]
        return own[-1] if own else final.get(name)

    for i in generator:
        for name in flow.statements[i].reads & flow.local_names:
            if seen(name, i) != flow.reaching[i].get(name):
                return False
    return all(seen(name, holder) == flow.reaching[holder].get(name) for name in root_reads)


def _tail_problem(flow, preprocessing, tail, tail_reads):
    final = _last_writers(flow, preprocessing)
    for i in tail:
        for name in tail_reads[i]:
            own = [j for j in tail if j < i and name in flow.statements[j].writes]
            if (own[-1] if own else final.get(name)) != flow.reaching[i].get(name):
                return flow.statements[i].lineno, _rebinding_reason(name, final.get(name), flow)
    return None


def _last_writers(flow, preprocessing) -> dict[str, int]:
    final = {p: PARAMETER for p in flow.parameters}
    for i in sorted(preprocessing):
        for name in flow.statements[i].writes:
            final[name] = i
    return final


def _rebinding_reason(name, writer, flow) -> str:
    where = f" on line {flow.statements[writer].lineno}" if writer not in (None, PARAMETER) else ""
    return f"variable {name!r} is rebound{where} after a feature reads it, so features cannot be computed separately"


def _ifv_names(elements, root_reads, generators, statements, display) -> list[str]:
    names = []
    for element, reads, generator in zip(elements, root_reads, generators):
        if isinstance(element, ast.Name):
            name = display.get(element.id, element.id)
        else:
            produced = [n for i in generator for n in sorted(statements[i].writes) if n in reads]
            candidates = produced or sorted(reads)
            name = candidates[-1] if candidates else ast.unparse(element)
        if len(name) > 40:
            name = name[:37] + "..."
        names.append(name)
    # Make the names unique, keeping the first one of each as it is.
    counts: dict[str, int] = {}
    unique = []
    for name in names:
        counts[name] = counts.get(name, 0) + 1
        unique.append(name if counts[name] == 1 else f"{name}#{counts[name]}")
    return unique


def _columns_read(trees, parameters) -> tuple[str, ...]:
    """Columns of the function's parameters read by ``df["c"]``, ``df[["a", "b"]]`` or ``df.c``."""
    found = []  # (line, column, name): reported in source order
    for tree in trees:
        for node in walk_scope(tree):
            if isinstance(node, ast.Subscript) and _is_parameter(node.value, parameters):
                key = node.slice
                keys = key.elts if isinstance(key, (ast.List, ast.Tuple)) else [key]
                found += [
                    (k.lineno, k.col_offset, k.value)
                    for k in keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                ]
            elif (
                isinstance(node, ast.Attribute)
                and _is_parameter(node.value, parameters)
                and not hasattr(pd.DataFrame, node.attr)
            ):
                found.append((node.lineno, node.col_offset, node.attr))
    return tuple(dict.fromkeys(name for _, _, name in sorted(found)))


def _is_parameter(node, parameters) -> bool:
    return isinstance(node, ast.Name) and node.id in parameters
