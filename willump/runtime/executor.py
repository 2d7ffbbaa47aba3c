"""Running a transformation graph: preprocessing once, each feature generator, then the combine step.

The executor can compute any subset of the IFVs for any subset of rows, and
combine any list of IFV values through the user's own concatenation and model
code: cascades and caches are built on these three calls.
"""

import warnings

from willump.errors import WillumpWarning
from willump.graph.build import Plan
from willump.graph.graph import PLACEHOLDER
from willump.graph.joins import JOIN_ASSEMBLE, JOIN_BASE, JOIN_PART
from willump.graph.source import FunctionSource
from willump.graph.statements import names_read
from willump.runtime.codegen import UNBOUND, compile_binder, compile_block
from willump.runtime.joins import NotSeparable, join_assemble, join_base, join_part
from willump.runtime.rows import take_argument_rows

_HELPERS = {JOIN_BASE: join_base, JOIN_PART: join_part, JOIN_ASSEMBLE: join_assemble}


class GraphExecutor:
    """The compiled blocks of one plan and the calls that run them."""

    def __init__(self, plan: Plan, source: FunctionSource):
        graph = plan.graph
        func, filename = source.func, source.filename
        self.graph = graph
        self._bind, self.parameters = compile_binder(func, source.definition, filename)
        self._func = func
        self._helpers = [_HELPERS[name] for name in plan.helpers]
        # Locals preprocessing reads before assigning them start unbound, as in the original.
        reads = set()
        for statement in graph.preprocessing:
            reads |= statement.reads
        self._unassigned = sorted((reads & plan.local_names) - set(self.parameters) - set(plan.helpers))
        self._preprocess = compile_block(
            func,
            filename,
            list(self.parameters) + list(plan.helpers) + self._unassigned,
            [s.node for s in graph.preprocessing],
            None,
            plan.possibly_unbound,
        )
        self._generators = []
        for ifv in graph.ifvs:
            reads = names_read(ifv.expression)
            for statement in ifv.generator:
                reads |= statement.reads
            reads = sorted(reads & plan.local_names)
            block = compile_block(
                func, filename, reads, [s.node for s in ifv.generator], ifv.expression, plan.possibly_unbound
            )
            self._generators.append((block, reads))
        tail_reads = set()
        for node in plan.tail_nodes:
            tail_reads |= names_read(node)
        self._tail_reads = sorted((tail_reads - {PLACEHOLDER}) & plan.local_names)
        self._combine = compile_block(
            func, filename, self._tail_reads + [PLACEHOLDER], plan.tail_nodes, None, plan.possibly_unbound
        )
        self._container = plan.container or list
        self._warned = False  # about running the function as written

    def __call__(self, *args, **kwargs):
        arguments = self.arguments(args, kwargs)
        try:
            env = self.preprocess(arguments)
            return self.combine(env, [self.compute(env, i) for i in range(len(self._generators))])
        except NotSeparable as reason:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"willump: in {self._func.__qualname__}, line {self.graph.combiner.statement.lineno}: "
                    f"the joins cannot be computed separately for this input ({reason}); "
                    "such calls run the function as written",
                    WillumpWarning,
                    stacklevel=3,
                )
            return self._func(*args, **kwargs)

    def arguments(self, args: tuple, kwargs: dict) -> dict:
        """The call's arguments by parameter name, defaults filled in (TypeError as the original)."""
        return dict(zip(self.parameters, self._bind(*args, **kwargs)))

    def preprocess(self, arguments: dict) -> dict:
        """Run the preprocessing statements; returns the namespace the generators read."""
        return self._preprocess(
            *[arguments[p] for p in self.parameters], *self._helpers, *[UNBOUND] * len(self._unassigned)
        )

    def compute(self, env: dict, index: int):
        """The value of IFV ``index``, computed by its generator from ``env``."""
        block, reads = self._generators[index]
        return block(*[env.get(name, UNBOUND) for name in reads])

    def combine(self, env: dict, values: list):
        """Run the concatenation and the model on the given IFV values (in IFV order)."""
        return self._combine(*[env.get(name, UNBOUND) for name in self._tail_reads], self._container(values))

    def features(self, args: tuple, kwargs: dict | None = None, ifvs=None, rows=None) -> tuple[dict, dict]:
        """(namespace, {IFV index: value}) for the IFVs ``ifvs`` (default all) of the rows ``rows``.

        ``rows`` are integer positions in the batch (default all rows).
        """
        arguments = self.arguments(args, kwargs or {})
        if rows is not None:
            arguments = take_argument_rows(arguments, rows)
        env = self.preprocess(arguments)
        which = range(len(self._generators)) if ifvs is None else ifvs
        return env, {i: self.compute(env, i) for i in which}
