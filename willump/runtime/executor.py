"""Running a transformation graph.

Every statement runs in the namespace of its block: preprocessing, the
generator of one IFV, or the combine step (concatenation and model). A plain
call runs the statements in source order, so calls with hidden effects
(in-place updates, random generators) happen in the user's order; the IFV
values are computed, each by its own generator, just before the statement that
joins them. The same compiled pieces also run block by block: preprocessing
once, any subset of IFVs for any subset of rows, then the combine step on any
list of IFV values. Cascades and caches are built on those three calls.
"""

import ast
import copy
import functools
import itertools
import operator
import threading
import types
from dataclasses import dataclass

from willump.compile.forms import materialized
from willump.compile.parallel import SERIAL
from willump.compile.programs import MISS, chain_of, program_for
from willump.compile.sites import HELPERS as SITE_HELPERS
from willump.compile.sites import (
    PLAIN_PREFIX,
    SITE_PREFIX,
    begin_call,
    end_call,
    keep_results_compiled,
    prepare_kernel,
    rewrite_calls,
)
from willump.errors import warn
from willump.graph.build import COMBINE, MODEL_OUTPUT, PREPROCESSING, ModelSplit, Plan
from willump.graph.graph import PLACEHOLDER
from willump.graph.joins import JOIN_ASSEMBLE, JOIN_BASE, JOIN_PART
from willump.graph.source import FunctionSource, call_on_parameters
from willump.graph.statements import names_read
from willump.runtime.codegen import UNBOUND, compile_binder, compile_block
from willump.runtime.joins import NotSeparable, join_assemble, join_base, join_part
from willump.runtime.models import ranking_method, scores_from
from willump.runtime.rows import take_argument_rows

_HELPERS = {JOIN_BASE: join_base, JOIN_PART: join_part, JOIN_ASSEMBLE: join_assemble}
_PASSED = "__willump_guard_passed"  # what a guard block returns when no branch of the guard ran
_GUARD_PASSED = object()


@dataclass(frozen=True)
class Fired:
    """A leading guard that ended the call: its line, and what the call returns."""

    line: int
    result: object


@dataclass
class _Run:
    """Consecutive statements of one block, compiled as one function."""

    block: object
    function: object
    reads: list[str]
    assigned: frozenset
    returns: bool  # ends with the function's return
    holder: bool  # holds the IFV entries


def _where(source: FunctionSource) -> str:
    """The function and its file, as warnings name them."""
    return f"{source.func.__qualname__} ({source.filename})"


def _module(source: FunctionSource) -> str:
    """The name of the function's module, as warnings name it."""
    return source.func.__globals__.get("__name__", "__main__")


def _column_lists(resolver):
    """Whether a name or attribute (``frame[key]``) holds a list of column names, as decoration finds it."""
    def holds_column_names(key) -> bool:
        value = resolver.resolve(key) if resolver is not None else None
        return type(value) is list and all(type(c) is str for c in value)
    return holds_column_names


class GraphExecutor:
    """The compiled blocks of one plan and the calls that run them."""

    def __init__(self, plan: Plan, source: FunctionSource, compile: bool = True, resolver=None, workers=SERIAL):
        self.graph = plan.graph
        self.sites = []  # calls a compiled kernel may answer (none without ``compile``)
        self.plain_calls = []  # the other calls, each counted and, if a library's, listed and warned about
        self._where = _where(source)
        self._column_lists = _column_lists(resolver)
        self._func = source.func
        self._bind, self.parameters = compile_binder(source.func, source.definition, source.filename)
        self._helpers = {**{name: _HELPERS[name] for name in plan.helpers}, **plan.names}
        self._expansion = plan.expansion  # scikit-learn composites written out: checked before each call
        self._names = plan.names  # the fixed objects the rewritten body reads (a composite's steps)
        self._changed_warned = False
        self._container = plan.container or list
        self._warned = False  # about running part of the function as written
        self._inlined = plan.inlined  # the user's helpers read into the statements, checked at each call
        # Each leading guard, as written, on the parameters: it returns _PASSED when the call goes on.
        self._guards = [
            (guard.lineno, compile_block(source.func, source.filename, [*self.parameters, _PASSED], [guard.node],
                                         ast.Name(_PASSED, ast.Load())))
            for guard in self.graph.guards
        ]
        self._checked = bool(self._guards or plan.inlined or plan.expansion)  # anything to check before a call

        def compile_run(block, nodes, assigned, holder=False, result=None):
            if compile:
                nodes = rewrite_calls(nodes, self.sites, workers, source.filename, self._column_lists,
                                      self.plain_calls, self._where, _module(source))
                if result is not None:
                    result = rewrite_calls([ast.Expr(result)], self.sites, workers, source.filename,
                                           self._column_lists, self.plain_calls, self._where, _module(source))[0].value
            reads = set()
            for node in nodes + ([result] if result is not None else []):
                reads |= names_read(node)
            site_names = {n for n in reads if n.startswith((SITE_PREFIX, PLAIN_PREFIX)) or n in SITE_HELPERS}
            reads = sorted(reads & (plan.local_names | {PLACEHOLDER, MODEL_OUTPUT} | site_names))
            function = compile_block(
                source.func, source.filename, reads, nodes, result, plan.possibly_unbound
            )
            returns = bool(nodes) and nodes[-1].__class__.__name__ == "Return"
            return _Run(block, function, reads, assigned, returns, holder)

        self._runs = []
        # The holder statement runs on its own, so that the IFVs can be computed just before it.
        for _, steps in itertools.groupby(plan.schedule, key=lambda s: (s.block, s.holder, id(s) if s.holder else 0)):
            steps = list(steps)
            assigned = frozenset().union(*(s.assigned for s in steps))
            self._runs.append(compile_run(steps[0].block, [s.node for s in steps], assigned, steps[0].holder))
        self._roots = [compile_run(i, [], frozenset(), result=ifv.expression) for i, ifv in enumerate(self.graph.ifvs)]
        holder = next(s for s in plan.schedule if s.holder)
        self._fallback = compile_run(COMBINE, plan.fallback, holder.assigned) if plan.fallback else None
        split = self.model_split = plan.model_split
        self.model_split_problem = split if isinstance(split, str) else None
        if isinstance(split, ModelSplit):
            self._before_model = compile_run(COMBINE, split.before, frozenset())
            self._after_model = compile_run(COMBINE, split.after, frozenset())
        # Plain calls run the function's own statements, in one block, with the compiled call sites.
        self._compile, self._workers, self._source, self._resolver = compile, workers, source, resolver
        self._local_names = plan.local_names
        body = [statement.node for statement in plan.graph.statements]
        self._plain = self._whole_call(body)
        self._scoring = {}  # ranking method -> the _WholeCall of the body up to the model call, scoring
        self._scoring_lock = threading.Lock()
        if resolver is not None:
            for site in self.sites:
                prepare_kernel(site, resolver)
            if self._plain.chain is not None:  # (kernels found at decoration may already make a program)
                self._plain.update_program()

    def _whole_call(self, body: list) -> "_WholeCall":
        """``body`` (statements of the function) as one block, with compiled call sites."""
        if self._compile:
            first = len(self.sites)
            body = rewrite_calls(body, self.sites, self._workers, self._source.filename, self._column_lists,
                                 self.plain_calls, self._where, _module(self._source))
            body = keep_results_compiled(body, self.sites, first)
        # (a new dict, not an update: other threads may be copying the helpers into a namespace)
        self._helpers = {**self._helpers, **{site.name: site for site in self.sites + self.plain_calls},
                         **SITE_HELPERS}
        # A body that is one chain of compiled calls may be answered by one program (see programs).
        chain = chain_of(body, self.sites, self.parameters, self._names) if self._compile else None
        return _WholeCall(body, self.parameters, self._helpers, chain, self._source)

    # --- running whole calls -------------------------------------------------------------

    def __call__(self, /, *args, **kwargs):
        """The function's result: its guards, then its statements as written, compiled calls answered by kernels."""
        bound = self._bind(*args, **kwargs)
        fired = self._fired(bound) if self._checked else None
        return fired.result if fired is not None else self._answer(bound)

    def guard(self, arguments: dict) -> Fired | None:
        """The first leading guard that ends the call for these arguments (bound by name), with what
        the call returns; what a guard raises, it raises. None: the graph answers. Every way of
        answering a call (plain, cascaded, top-K, fit's rows) runs this first."""
        return self._fired(self.bound(arguments)) if self._checked else None

    def _fired(self, bound: tuple) -> Fired | None:
        if self._inlined is not None and self._inlined.rebound():  # (a helper read in was rebound: as written)
            return Fired(self._func.__code__.co_firstlineno, self._inlined.call_original(bound))
        if self._expansion is not None and not self._expansion.current():
            return Fired(self._expansion.lines[0], self._original(bound))
        for line, guard in self._guards:
            result = guard(*bound, _GUARD_PASSED)
            if result is not _GUARD_PASSED:
                return Fired(line, result)
        return None

    def readable(self, source: str) -> str:
        """A call site's code as the user wrote it: the IFV values, a composite's steps and the
        joins' pieces named as in the function (sites of every path, built at any time)."""
        source = source.replace(f"{PLACEHOLDER}[0]", self.graph.combiner.entries)  # (one IFV)
        source = source.replace(PLACEHOLDER, self.graph.combiner.entries)
        if self._expansion is not None:
            source = self._expansion.readable(source)
        return source.replace("__willump_join_", "join_")

    def _original(self, bound: tuple):
        """The original function's result: a composite it calls no longer holds the steps the
        rewritten code was built from (a step replaced, refitted into new objects...)."""
        if not self._changed_warned:
            self._changed_warned = True
            warn(
                f"willump: in {self._func.__qualname__}, line {self._expansion.lines[0]}: the scikit-learn "
                "composite it calls changed after decoration (a step replaced, refitted into new steps, its "
                "output set to DataFrames or its voting changed): calls run the function as written; decorate "
                "it again to optimize the new steps"
            )
        if self._inlined is not None:  # (the user's own function, not the one its helpers were read into)
            return self._inlined.call_original(bound)
        return call_on_parameters(self._func, self._source.definition, bound)

    def run(self, arguments: dict):
        """As calling the executor, with the arguments already bound by name and the guards passed."""
        return self._answer(self.bound(arguments))

    def bound(self, arguments: dict) -> tuple:
        """The parameters' values, in order, from the arguments bound by name."""
        return tuple(arguments[name] for name in self.parameters)

    def _answer(self, bound: tuple):
        """The result for the parameters' values (see ``_WholeCall.answer``)."""
        return self._plain.answer(bound)

    @property
    def program(self):
        """The program answering whole calls (see ``programs``), or None: built at decoration when
        the callees are globals already known, else after a call the call sites answered."""
        return self._plain.program

    def program_answer(self, program, bound: tuple, *options):
        """``program(bound, callees, *options)`` (see ``_WholeCall.program_answer``)."""
        return self._plain.program_answer(program, bound, *options)

    def scores(self, arguments: dict):
        """The scores top-K ranks by (``models.ranking_score``) of the model's input for these
        arguments, computed as plain calls compute the function: the statements before the model
        call as one block with their compiled calls (or one program), then the model's ranking
        method; None when the model is not a global or closure variable (it is known only after
        the statements run)."""
        model = self._model_reference()
        model = self._resolver.resolve(model) if model is not None and self._resolver is not None else None
        if model is None:
            return None
        method = ranking_method(model)
        scoring = self._scoring.get(method)
        if scoring is None:
            with self._scoring_lock:
                scoring = self._scoring.get(method) or self._scoring.setdefault(method, self._scoring_call(method))
        return scores_from(model, method, scoring.answer(self.bound(arguments)))

    def current_model(self, arguments: dict):
        """The model a call with these arguments calls, when the model expression is a name, or attributes of
        one, the function never assigns: a global, closure variable or argument (attributes of an instance read
        from its own ``__dict__``, no code run); else None."""
        expression, attributes = self.graph.model.model, []
        while isinstance(expression, ast.Attribute):
            expression, attributes = expression.value, [expression.attr, *attributes]
        if not isinstance(expression, ast.Name) or (expression.id in self._local_names and expression.id not in self._names):
            return None
        if expression.id in arguments:
            value = arguments[expression.id]
        elif self._resolver is not None:
            value = self._resolver.resolve(expression)
        else:
            return None
        for attribute in attributes:
            value = getattr(value, attribute, None) if isinstance(value, (types.ModuleType, type)) else (
                getattr(value, "__dict__", {}).get(attribute))
        return value

    def _model_reference(self):
        """The model expression, when it is a name (or its attribute) the function never assigns."""
        root = self.graph.model.model
        while isinstance(root, ast.Attribute):
            root = root.value
        hidden = isinstance(root, ast.Name) and root.id in self._names  # a composite's final step
        if not isinstance(root, ast.Name) or (root.id in self._local_names and not hidden) or not isinstance(
            self.model_split, ModelSplit
        ):
            return None
        return self.graph.model.model

    def _scoring_call(self, method: str) -> "_WholeCall":
        """The statements before the model's, then ``return <model>.<method>(<X>)``."""
        call = self.graph.model.call
        position = (call.lineno, call.col_offset, call.end_col_offset)
        statements = self.graph.statements
        at = next(
            i for i, s in enumerate(statements)
            if any(isinstance(n, ast.Call) and (n.lineno, n.col_offset, n.end_col_offset) == position
                   for n in ast.walk(s.node))
        )
        scored = ast.Call(ast.Attribute(copy.deepcopy(call.func.value), method, ast.Load()), [copy.deepcopy(call.args[0])], [])
        returned = ast.copy_location(ast.Return(scored), statements[at].node)
        return self._whole_call([s.node for s in statements[:at]] + [ast.fix_missing_locations(returned)])

    def run_blocks(self, arguments: dict):
        """The function's result computed block by block, as cascades and caches compute it.

        Statements run in source order; each IFV is computed by its own generator
        just before the statement that joins them.
        """
        shared = {**arguments, **self._helpers}
        generators = [{} for _ in self._roots]
        combine = {}
        for run in self._runs:
            if run.holder:
                try:
                    values = [self._run(root, generators[i], shared) for i, root in enumerate(self._roots)]
                except NotSeparable as reason:
                    run = self._fallback_for(reason)
                else:
                    combine[PLACEHOLDER] = self._container(values)
            own = self._namespace(run.block, shared, generators, combine)
            result = self._run(run, own, shared)
            if run.returns:
                return result
            _update(own, run, result)
        raise AssertionError("the function's return statement was not reached")

    def _fallback_for(self, reason) -> _Run:
        if self._fallback is None:
            raise reason
        if not self._warned:
            self._warned = True
            warn(
                f"willump: in {self._func.__qualname__}, line {self.graph.combiner.statement.lineno}: "
                f"the joins cannot be computed separately for this input ({reason}); "
                "such calls run the joins as written"
            )
        return self._fallback

    # --- running block by block ----------------------------------------------------------

    def arguments(self, args: tuple, kwargs: dict) -> dict:
        """The call's arguments by parameter name, defaults filled in (TypeError as the original)."""
        return dict(zip(self.parameters, self._bind(*args, **kwargs)))

    def defaults(self) -> dict:
        """The function's parameters' default values (as they are now), by name."""
        code = self._func.__code__
        names = code.co_varnames[:code.co_argcount]
        positional = dict(zip(names[len(names) - len(self._func.__defaults__ or ()):], self._func.__defaults__ or ()))
        return {**positional, **(self._func.__kwdefaults__ or {})}

    def preprocess(self, arguments: dict) -> dict:
        """Run the preprocessing statements; returns the namespace the generators read."""
        shared = {**arguments, **self._helpers}
        for run in self._runs:
            if run.block == PREPROCESSING:
                _update(shared, run, self._run(run, shared, shared))
        return shared

    def arguments_only(self, arguments: dict) -> dict:
        """The namespace without preprocessing: enough for blocks that read no preprocessed name."""
        return {**arguments, **self._helpers}

    def reads_preprocessed(self, ifvs) -> bool:
        """Do the generators of ``ifvs``, or the combine step, read a name preprocessing binds?"""
        bound = set().union(*(run.assigned for run in self._runs if run.block == PREPROCESSING))
        blocks = set(ifvs) | {COMBINE}
        runs = [run for run in self._runs if run.block in blocks] + [self._roots[i] for i in ifvs]
        return any(name in bound for run in runs for name in run.reads)

    def compute(self, env: dict, index: int):
        """The value of IFV ``index``, computed by its generator from ``env`` (a value a kernel handed
        on in its own form, as a passthrough branch's ``SelectedColumns``, built: fit and cascades
        take its rows)."""
        own = {}
        for run in self._runs:
            if run.block == index:
                _update(own, run, self._run(run, own, env))
        value = self._run(self._roots[index], own, env)
        return materialized(value)

    def values(self, env: dict, indices=None) -> dict:
        """{index: value} of the IFVs ``indices`` (default all), computed one after the other."""
        return {i: self.compute(env, i) for i in (range(len(self._roots)) if indices is None else indices)}

    def combine(self, env: dict, values: list):
        """Run the concatenation and the model on the given IFV values (in IFV order)."""
        own = {PLACEHOLDER: self._container(values)}
        for run in self._runs:
            if run.block == COMBINE:
                result = self._run(run, own, env)
                if run.returns:
                    return result
                _update(own, run, result)
        raise AssertionError("the function's return statement was not reached")

    def model_input(self, env: dict, values: list) -> tuple:
        """(model, X): the model object and its input, from the given IFV values."""
        return self._run(self._before_model, {PLACEHOLDER: self._container(values)}, env)

    def finish(self, env: dict, output):
        """The function's result when the model's output is ``output`` (rows of ``env``'s batch)."""
        return self._run(self._after_model, {MODEL_OUTPUT: output}, env)

    def features(self, args: tuple, kwargs: dict | None = None, ifvs=None, rows=None) -> tuple[dict, dict]:
        """(namespace, {IFV index: value}) for the IFVs ``ifvs`` (default all) of the rows ``rows``.

        ``rows`` are integer positions in the batch (default all rows).
        """
        return self.evaluate(self.arguments(args, kwargs or {}), ifvs, rows)

    def evaluate(self, arguments: dict, ifvs=None, rows=None, batch_names=None) -> tuple[dict, dict]:
        """As ``features``, from arguments already bound by name (``batch_names``: those holding rows)."""
        env = self.environment(arguments, rows, batch_names)
        return env, self.values(env, ifvs)

    def environment(self, arguments: dict, rows=None, batch_names=None) -> dict:
        """The namespace the generators read: the arguments (their rows ``rows``), preprocessed."""
        if rows is not None:
            arguments = take_argument_rows(arguments, rows, batch_names)
        return self.preprocess(arguments)

    # --- plumbing ------------------------------------------------------------------------

    @staticmethod
    def _namespace(block, shared, generators, combine) -> dict:
        if block == PREPROCESSING:
            return shared
        if block == COMBINE:
            return combine
        return generators[block]

    @staticmethod
    def _run(run: _Run, own: dict, shared: dict):
        return run.function(*[own[n] if n in own else shared.get(n, UNBOUND) for n in run.reads])


class CallsExecutor:
    """A function willump builds no graph of (its model in a loop or under a condition, none found):
    its statements as written, each call a compiled kernel may answer through its site. Bodies
    that yield, await, rebind outer names or read their own frame (``locals()``, ``super()``)
    stay the function itself (``for_function``: None)."""

    def __init__(self, source: FunctionSource, resolver=None, workers=SERIAL):
        self.sites, self.plain_calls = [], []
        self._bind, self.parameters = compile_binder(source.func, source.definition, source.filename)
        body = rewrite_calls(list(source.definition.body), self.sites, workers, source.filename,
                             _column_lists(resolver), self.plain_calls, _where(source), _module(source))
        if not isinstance(body[-1], ast.Return):  # (falling off the end returns None; a block, its namespace)
            body.append(ast.copy_location(ast.Return(ast.Constant(None)), body[-1]))
        helpers = {**{site.name: site for site in self.sites + self.plain_calls}, **SITE_HELPERS}
        self._whole = _WholeCall(body, self.parameters, helpers, None, source)
        if resolver is not None:
            for site in self.sites:
                prepare_kernel(site, resolver)

    @classmethod
    def for_function(cls, source: FunctionSource, resolver=None, workers=SERIAL) -> "CallsExecutor | None":
        """The executor of a function whose body has calls to compile and can run as a block, else None."""
        nodes = [n for statement in source.definition.body for n in ast.walk(statement)]
        if any(isinstance(n, _NOT_A_BLOCK) or isinstance(n, ast.Name) and n.id in _READS_ITS_FRAME for n in nodes):
            return None
        executor = cls(source, resolver, workers)
        return executor if executor.sites else None

    def __call__(self, /, *args, **kwargs):
        return self._whole.answer(self._bind(*args, **kwargs))

    @staticmethod
    def readable(source: str) -> str:
        return source


_NOT_A_BLOCK = (ast.Yield, ast.YieldFrom, ast.Await, ast.Nonlocal, ast.Global)  # (what a block of the body changes)
_READS_ITS_FRAME = {"locals", "vars", "dir", "eval", "exec", "super"}  # (a block's frame holds the sites too)


class _WholeCall:
    """A body of the function run as one block, its calls through their compiled sites; a body
    that is one chain of compiled calls may be answered by one program (see ``programs``)."""

    def __init__(self, body: list, parameters, helpers: dict, chain, source: FunctionSource):
        helper_names = sorted(set().union(*map(names_read, body)) & set(helpers))
        self._function = compile_block(source.func, source.filename, list(parameters) + helper_names, body, None)
        self._sites = [helpers[name] for name in helper_names]
        self.chain = chain
        self.program = None  # built from the kernels the sites found (at decoration, or after a call)
        self._program_kernels = None  # the kernels the last attempt to build it found
        if chain is not None:  # (the callees, read now; names of fixed objects passed in)
            callees = chain.callees()
            fixed = sorted(names_read(callees) & set(helpers))
            self._callees = functools.partial(
                compile_block(source.func, source.filename, fixed, [], callees), *[helpers[n] for n in fixed]
            )

    def answer(self, bound: tuple):
        """The result for the parameters' values: from the program for the whole body when it
        answers, else from the statements with their call sites (after which the program is
        built, or rebuilt for kernels the sites built anew)."""
        program = self.program
        if program is not None:
            result = self.program_answer(program, bound)
            if result is not MISS:
                return result
        outer = begin_call()
        try:
            result = self._function(*bound, *self._sites)
        finally:
            end_call(outer)
        if self.chain is not None:
            self.update_program()
        return result

    def program_answer(self, program, bound: tuple, *options):
        """``program(bound, callees, *options)``, the callees (``Chain.callees``) read now; MISS when
        it raises: the statements then raise what the original raises, in its order (and a
        program must never change the answer)."""
        try:
            return program(bound, self._callees(), *options)
        except Exception:
            return MISS

    def update_program(self) -> None:
        """Build the program for the kernels the chain's sites found, unless the last attempt had them."""
        kernels = self.chain.kernels()
        if self._program_kernels is not None and all(map(operator.is_, kernels, self._program_kernels)):
            return
        self._program_kernels = kernels
        self.program = program_for(self.chain)


def _update(namespace: dict, run: _Run, result: dict) -> None:
    """Record the names the run bound; a name it left unbound (``del``) reads as unbound."""
    for name in run.assigned:
        namespace[name] = result.get(name, UNBOUND)
