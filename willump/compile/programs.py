"""Whole calls as one program: a body that is nothing but a chain of compiled calls.

For one row, running the user's statements through call sites costs more than
the kernels: each site checks its callee, each kernel builds the value it hands
on (a ``Texts``, ``LazyRows``, ``Stacked``), and pandas is asked for a column.
When the body is a chain of call sites from the arguments to the returned value,
e.g.::

    text = df["tweet"].str.lower()
    words = word_vectorizer.transform(text)
    chars = char_vectorizer.transform(text)
    X = sp.hstack([words, chars], format="csr")
    return model.predict_proba(X)[:, 1]

and the kernels the sites found compose into a program willump knows (text
columns, vectorizers, an optional ``hstack``, a linear model: ``TextLinearProgram``;
the ``hstack`` may also take dense blocks, ``np.column_stack`` of element-wise
expressions such as ``np.log1p(df["text"].str.len())``),
the program answers the call instead: it reads the callees, checks they are the
objects it was built for and that their kernels are still valid, reads the
strings, and runs the fused kernel. It answers exactly what the chain of sites
answers. It changes nothing before it answers, so whenever it cannot (another
object, an input the kernels refuse, any error), it returns ``MISS`` and the call
runs through the sites as before, raising whatever the original raises.
"""

import ast
from dataclasses import dataclass, field
from types import MethodType

import numpy as np
import pandas as pd

from willump.compile import fused
from willump.compile.composites import CompiledUnionStack
from willump.compile.dense import CompiledColumnStack
from willump.compile.expressions import CompiledExpression
from willump.compile.forms import Unsupported, stacked_dtype
from willump.compile.linear import CompiledLinearModel
from willump.compile.sites import COLUMN_STR, ExpressionSite
from willump.compile.sparse import DENSE_DTYPES, CompiledHstack
from willump.compile.strings import CompiledColumnLower, ReadOnce, column_array, lowercase_strings, strings
from willump.compile.text import CompiledVectorizer, documents_as_list
from willump.compile.tfidf import CompiledTfidfTransformer

MISS = object()  # a program's answer when the call must run through the call sites
_DENSE_KERNELS = (CompiledColumnStack,)  # kernels of the dense blocks a program stacks with vectorizers
_COMPUTED_KERNELS = (CompiledColumnStack, CompiledExpression)  # kernels a program calls as the sites do

# What a step's argument is: an argument of the call, a column of one, another step's result,
# a list of those, a constant, or a global or closure variable read at each call (``np``).
PARAMETER, COLUMN, STEP, LIST, CONSTANT, GLOBAL = "parameter", "column", "step", "list", "constant", "global"
LOWER = "lower"  # where documents come from: a column, lowercased
_CONSTANT_INDEX = (ast.Constant, ast.Slice, ast.Tuple, ast.UnaryOp, ast.USub, ast.Load)  # nodes of [:, 1]


@dataclass
class Step:
    """One call site in the chain: ``site(callee, *inputs, **keywords)``."""

    site: object
    callee: ast.expr | None  # evaluated at each call (None: a helper, the column string method, an expression)
    inputs: list  # (kind, value) per positional argument after the callee
    keywords: dict = field(default_factory=dict)  # name -> constant
    tocsr: bool = False  # its result is converted by ``.tocsr()`` (``hstack([...]).tocsr()``)


@dataclass
class Chain:
    """A body that is a chain of call sites: its steps, each after the steps whose results it reads."""

    steps: list
    last: int  # the step whose result the function returns
    subscript: ast.expr | None  # a constant index applied to it (``[:, 1]``), or None
    reads: list = field(default_factory=list)  # the variables GLOBAL arguments read (numbered so)

    def kernels(self) -> list:
        """The kernels the steps' sites found for their last callees (None where one ran as written)."""
        return [s.site.found()[2] for s in self.steps]

    def callees(self) -> ast.Tuple:
        """The expression the program evaluates at each call: the callees, the variables GLOBAL
        arguments read, then the subscript."""
        elements = [s.callee for s in self.steps if s.callee is not None] + self.reads
        if self.subscript is not None:
            elements.append(self.subscript)
        return ast.copy_location(ast.Tuple(elements, ast.Load()), elements[0])


def chain_of(body: list, sites: list, parameters, names: dict | None = None) -> Chain | None:
    """The chain of call sites ``body`` (the rewritten function body) is, or None.

    Every statement must be ``name = <site call>`` (a name bound once; the call may be
    converted by ``.tocsr()``) except the last, ``return <site call>`` (optionally indexed
    by constants). The arguments of
    site calls are parameters, names bound by earlier statements, other site calls,
    ``parameter[<constant>]``, lists of these, constants, or global and closure variables
    (an element-wise expression's ``np``). Callees are read from
    names that are neither parameters nor bound in the body (globals and closure
    variables) or from ``names``: names the rewritten body reads fixed objects under (a
    scikit-learn composite's steps), which are also constants as arguments."""
    names = names or {}
    by_name = {site.name: site for site in sites}
    positions = {name: i for i, name in enumerate(parameters)}
    bound, steps, reads = {}, [], []

    def site_call(node):
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in by_name

    def step(call) -> int | None:
        if tocsr_of_site_call(call):
            index = step(call.func.value)
            if index is not None:
                steps[index].tocsr = True
            return index
        if not site_call(call) or not call.args:
            return None
        callee = call.args[0]
        if isinstance(by_name[call.func.id], ExpressionSite):
            if not own_expression(call):
                return None
            callee = None
        elif isinstance(callee, ast.Name) and callee.id == COLUMN_STR:
            callee = None
        elif not readable(callee):
            return None
        inputs = [argument(a) for a in call.args[1:]]
        keywords = {}
        for keyword in call.keywords:
            if keyword.arg is None or not isinstance(keyword.value, ast.Constant):
                return None
            keywords[keyword.arg] = keyword.value.value
        if None in inputs:
            return None
        steps.append(Step(by_name[call.func.id], callee, inputs, keywords))
        return len(steps) - 1

    def tocsr_of_site_call(node) -> bool:
        """``<site call>.tocsr()``, without arguments."""
        return (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "tocsr"
            and not node.args and not node.keywords and site_call(node.func.value)
        )

    def own_expression(call) -> bool:
        """``site(site.expression, ...)``: an expression site calling the function it was made with."""
        callee = call.args[0]
        return (
            isinstance(callee, ast.Attribute) and callee.attr == "expression" and isinstance(callee.value, ast.Name)
            and callee.value.id == call.func.id
        )

    def readable(callee) -> bool:
        """``name`` or ``name.attr...`` of a global or closure variable."""
        while isinstance(callee, ast.Attribute):
            callee = callee.value
        return isinstance(callee, ast.Name) and callee.id not in positions and callee.id not in bound and (
            callee.id in names or not callee.id.startswith("__willump")
        )

    def argument(node):
        if isinstance(node, ast.Name):
            if node.id in bound:
                return (STEP, bound[node.id])
            if node.id in names and node.id not in positions:
                return (CONSTANT, names[node.id])
            if node.id in positions:
                return (PARAMETER, positions[node.id])
            if readable(node):
                reads.append(node)
                return (GLOBAL, len(reads) - 1)
            return None
        if isinstance(node, ast.Constant):
            return (CONSTANT, node.value)
        if isinstance(node, (ast.List, ast.Tuple)):
            elements = [argument(e) for e in node.elts]
            return None if None in elements or isinstance(node, ast.Tuple) else (LIST, elements)
        if (
            isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in positions
            and node.value.id not in bound and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
        ):
            return (COLUMN, (positions[node.value.id], node.slice.value))
        index = step(node)
        return None if index is None else (STEP, index)

    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return None
    for statement in body[:-1]:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
            return None
        name = statement.targets[0].id
        if name in bound or name in positions:
            return None
        index = step(statement.value)
        if index is None:
            return None
        bound[name] = index
    returned, subscript = body[-1].value, None
    if isinstance(returned, ast.Subscript) and all(isinstance(n, _CONSTANT_INDEX) for n in ast.walk(returned.slice)):
        returned, subscript = returned.value, returned.slice
    last = step(returned)
    if last is None or steps[last].callee is None:  # (a program ends in a model's method)
        return None
    return Chain(steps, last, subscript, reads)


def program_for(chain: Chain):
    """The program answering the chain with the kernels its sites found last, or None."""
    try:
        return TextLinearProgram(chain)
    except Unsupported:
        return None


class TextLinearProgram:
    """Text columns, vectorizers, ``hstack`` and a linear model: the fused kernel, called once.

    Built from a chain whose every step is one of: a column's ``.str.lower()``, a
    vectorizer's ``transform`` of a column, of a lowercased column or of an argument
    (and a ``TfidfTransformer``'s of a ``CountVectorizer``'s, as the equivalent ``TfidfVectorizer``),
    an ``hstack`` of the vectorizers' outputs, and last, a linear model's method of
    them. The ``hstack`` (into CSR) may also stack dense blocks: ``np.column_stack`` of
    element-wise expressions (string methods of columns, arithmetic, numpy's ufuncs),
    columns or arguments, which the program computes with the sites' own kernels, in the
    chain's order. Unsupported otherwise.
    """

    def __init__(self, chain: Chain):
        steps = chain.steps
        kernels = chain.kernels()
        self.sites = [s.site for s in steps]
        self.subscripted = chain.subscript is not None
        model = kernels[chain.last]
        if not isinstance(model, CompiledLinearModel) or steps[chain.last].keywords or len(steps[chain.last].inputs) != 1:
            raise Unsupported("the chain does not end in a compiled linear model")
        used = {chain.last}
        kind, value = steps[chain.last].inputs[0]
        if kind != STEP:
            raise Unsupported("the model reads something other than a compiled call")
        self.stacked = type(kernels[value]) in (CompiledHstack, CompiledUnionStack)  # (vectorizers side by side)
        if self.stacked:
            used.add(value)
            blocks = self._stacked(steps[value])
        else:
            blocks = [(kind, value)]
        self.texts, vectorizers = [], []  # per vectorizer: where its documents come from
        computed = set()  # steps the program computes with their kernels (dense blocks, what they read)
        self.blocks = []  # per block of the stacked matrix: (fused.VECTORIZER, None) or (fused.DENSE, step)
        for kind, index in blocks:
            if kind == STEP and type(kernels[index]) in _DENSE_KERNELS:
                self.blocks.append((fused.DENSE, index))
                self._computed(index, steps, kernels, computed)
                continue
            weighing = None  # a TfidfTransformer's kernel reading the vectorizer's counts
            if kind == STEP and type(kernels[index]) is CompiledTfidfTransformer:
                weighing = kernels[index]
                kind, index = self._only_input(steps[index], used, index)
            if kind != STEP or type(kernels[index]) is not CompiledVectorizer:
                raise Unsupported("a block that is not a compiled vectorizer's transform")
            source = self._only_input(steps[index], used, index)
            vectorizers.append(kernels[index] if weighing is None else weighing.paired_with(kernels[index]))
            self.texts.append(self._documents(source, steps, kernels, used))
            self.blocks.append((fused.VECTORIZER, None))
        used |= computed
        if used != set(range(len(steps))):
            raise Unsupported("a call whose result the model does not read")
        if any(s.tocsr for i, s in enumerate(steps) if not (self.stacked and i == value)):
            raise Unsupported("tocsr() of other than the hstack")
        self.dense = len(vectorizers) < len(self.blocks)  # (dense blocks among the vectorizers')
        if self.dense:
            self._check_dense_stack(steps[value], kernels[value], model, vectorizers)
        elif not model.fuses(vectorizers):
            raise Unsupported("vectorizers the fused kernel does not compute exactly for this model")
        self.model, self.plan = model, fused.plan_for(vectorizers, [k.width for k in vectorizers])
        self.vectorized_dtype = stacked_dtype(vectorizers)
        # (callee position, kernel, the method's object, its function), in callee order
        self.methods, self.functions = [], []
        position = 0
        for s, kernel in zip(steps, kernels):
            if s.callee is None:
                continue
            owner, function, _ = s.site.found()
            if owner is None:
                self.functions.append((position, function))
            else:
                self.methods.append((position, kernel, owner, function))
            position += 1
        self.callee_count = position  # (the variables GLOBAL arguments read come after the callees)
        # (step, kernel, inputs, keywords) of the steps computed, in the chain's order
        self.computed = [(i, kernels[i], steps[i].inputs, steps[i].keywords) for i in sorted(computed)]
        self._layouts = {}  # the dense blocks' widths -> fused.block_order of the blocks

    @classmethod
    def _computed(cls, index: int, steps: list, kernels: list, computed: set) -> None:
        """Add step ``index`` (a dense block, or an expression one reads) and the steps it reads to
        ``computed``: steps the program computes with their kernels; Unsupported for other steps."""
        if type(kernels[index]) not in _COMPUTED_KERNELS or steps[index].tocsr:
            raise Unsupported("a dense block of other than numpy's column_stack of element-wise expressions")
        computed.add(index)
        for kind, value in steps[index].inputs:
            for inner_kind, inner in value if kind == LIST else [(kind, value)]:
                if inner_kind == STEP:
                    cls._computed(inner, steps, kernels, computed)
                elif inner_kind == LIST:
                    raise Unsupported("a list in a list")

    @staticmethod
    def _check_dense_stack(step: Step, kernel, model, vectorizers: list) -> None:
        """An ``hstack`` of dense blocks with the vectorizers' gives CSR only with ``format="csr"`` or
        ``.tocsr()`` (else COO, which models may read otherwise); the model must read it as
        float64 (its dtype and width are checked at each call)."""
        options = dict(step.keywords)
        if len(step.inputs) == 2:
            options["format"] = step.inputs[1][1]
        if type(kernel) is not CompiledHstack or not (options.get("format") == "csr" or step.tocsr):
            raise Unsupported("dense blocks stacked into other than CSR")
        if not vectorizers or not fused.fusable_kernels(vectorizers) or model.converts_values:
            raise Unsupported("vectorizers the fused kernel does not compute exactly for this model")

    @staticmethod
    def _only_input(step: Step, used: set, index: int) -> tuple:
        """The one input of a transform step, which the program answers."""
        if len(step.inputs) != 1 or step.keywords:
            raise Unsupported("a transform of other than one argument")
        used.add(index)
        return step.inputs[0]

    @staticmethod
    def _stacked(step: Step) -> list:
        """The blocks ``hstack`` stacks, when its result is CSR (``format="csr"`` or ``.tocsr()``:
        the same matrix, which the fused kernel never builds)."""
        inputs = step.inputs
        if type(step.site.found()[2]) is CompiledUnionStack:  # union_stack(union, [blocks]): sparse blocks
            if len(inputs) != 2 or inputs[1][0] != LIST or step.keywords:
                raise Unsupported("a FeatureUnion's join of other than its list of blocks")
            return inputs[1][1]
        options = dict(step.keywords)
        if len(inputs) == 2 and inputs[1][0] == CONSTANT and "format" not in options:
            options["format"] = inputs[1][1]
        elif len(inputs) != 1:
            raise Unsupported("hstack of other than one list")
        if inputs[0][0] != LIST or set(options) - {"format"} or options.get("format") not in (None, "csr"):
            raise Unsupported("hstack options other than format='csr'")
        return inputs[0][1]

    def _documents(self, source: tuple, steps: list, kernels: list, used: set) -> tuple:
        """Where a vectorizer's documents come from: (PARAMETER, position), (COLUMN, (position, name))
        or (LOWER, (position, name, whether read as ``frame.name``))."""
        kind, value = source
        if kind in (PARAMETER, COLUMN):
            return source
        if kind == STEP and type(kernels[value]) is CompiledColumnLower:
            inputs = steps[value].inputs
            if len(inputs) in (3, 4) and inputs[0][0] == PARAMETER and {i[0] for i in inputs[1:]} == {CONSTANT}:
                attribute = len(inputs) == 4 and inputs[3][1] is True
                if inputs[2][1] == "lower" and isinstance(inputs[1][1], str) and not steps[value].keywords:
                    used.add(value)
                    return (LOWER, (inputs[0][1], inputs[1][1], attribute))
        raise Unsupported("documents from other than a column, its lowercase, or an argument")

    def __call__(self, arguments: tuple, callees: tuple):
        """The function's result for ``arguments`` (its parameters, in order), given its callees
        and subscript (``Chain.callees``) as they are now; ``MISS`` when the sites must answer."""
        with ReadOnce():  # (a column's strings decoded once, for the vectorizers and the string methods)
            texts = self.documents(arguments, callees)
            if texts is MISS:
                return MISS
            try:
                dense = self.dense_blocks(arguments, callees) if self.dense else None
                result = self.model.from_texts(self.plan, texts, dense)
            except Unsupported:
                return MISS
        return self.answered(result, callees)

    def dense_blocks(self, arguments: tuple, callees: tuple) -> fused.DenseBlocks:
        """The dense blocks' values, computed by the steps' kernels as the sites would (without a
        floating-point warning: one would be given again when the sites answer instead), as the
        stacked matrix holds them; Unsupported where the sites would answer otherwise."""
        values = {}
        with _unwarned():
            for index, kernel, inputs, keywords in self.computed:
                given = [self._value(i, values, arguments, callees) for i in inputs]
                if type(kernel) is CompiledColumnStack and type(given[0]) is list:
                    given[0] = [_as_array(v) for v in given[0]]
                values[index] = kernel(*given, **keywords)
        arrays = [values[index] for kind, index in self.blocks if kind == fused.DENSE]
        if not all(type(a) is np.ndarray and a.ndim == 2 and a.dtype in DENSE_DTYPES for a in arrays):
            raise Unsupported("a dense block that is not a 2-D array of numbers")
        if np.result_type(self.vectorized_dtype, *[a.dtype for a in arrays]) != np.float64:
            raise Unsupported("a stacked matrix of other than float64 (the model converts it)")
        widths = tuple(a.shape[1] for a in arrays)
        layout = self._layouts.get(widths)
        if layout is None:
            if sum(widths) + sum(self.plan.widths) != self.model.width:
                raise Unsupported("not the model's width (scikit-learn raises)")
            dense_widths, vectorizer_widths = iter(widths), iter(self.plan.widths)
            layout = self._layouts[widths] = fused.block_order([
                (kind, next(dense_widths if kind == fused.DENSE else vectorizer_widths)) for kind, _ in self.blocks
            ])
        return fused.DenseBlocks(np.concatenate(arrays, axis=1, dtype=np.float64), *layout)

    def _value(self, argument: tuple, values: dict, arguments: tuple, callees: tuple):
        """The value of a computed step's argument, as the site call gets it."""
        kind, value = argument
        if kind == STEP:
            return values[value]
        if kind == PARAMETER:
            return arguments[value]
        if kind == COLUMN:  # (as written: the frame's own __getitem__)
            return arguments[value[0]][value[1]]
        if kind == GLOBAL:
            return callees[self.callee_count + value]
        if kind == LIST:
            return [self._value(v, values, arguments, callees) for v in value]
        return value

    def documents(self, arguments: tuple, callees: tuple):
        """Each vectorizer's documents (lists of ``str`` or ``CodePoints``), or ``MISS`` when the callees are not the
        ones the program was built for or the kernels would not read these arguments exactly."""
        for position, kernel, owner, function in self.methods:
            method = callees[position]
            if type(method) is not MethodType or method.__self__ is not owner or method.__func__ is not function:
                return MISS
            if not kernel.still_valid():
                return MISS
        for position, function in self.functions:
            if callees[position] is not function:
                return MISS
        texts, read = [], {}
        try:
            for source in self.texts:
                documents = read.get(source)
                if documents is None:
                    documents = read[source] = _read_documents(source, arguments)
                texts.append(documents)
        except Unsupported:
            return MISS
        return texts

    def answered(self, output, callees: tuple):
        """The function's result when the model's method returned ``output``; the call is counted."""
        for site in self.sites:
            site.whole_calls += 1
        return output[callees[-1]] if self.subscripted else output


def _as_array(value):
    """A Series of numpy's values as ``np.column_stack`` reads it (its array, without pandas'
    ``__array__`` and the attribute look-ups numpy makes first); anything else as it is."""
    if type(value) is pd.Series and type(value._values) is np.ndarray:
        return value._values
    return value


def _raise(kind: str, flag: int):
    raise FloatingPointError(kind)


def _unwarned():
    """numpy's error state with every floating-point error that would warn (or call, or print)
    raising instead, so that a program that meets one answers nothing (the sites then warn once)."""
    return np.errstate(call=_raise, **{kind: "ignore" if mode == "ignore" else "call" for kind, mode in np.geterr().items()})


def _read_documents(source: tuple, arguments: tuple):
    """The documents as the vectorizer's kernel reads them (a list of ``str``, or ``CodePoints``
    of pyarrow's strings; not empty); Unsupported otherwise."""
    kind, value = source
    if kind == PARAMETER:
        texts = documents_as_list(arguments[value])
    else:
        position, column, *attribute = value  # (a LOWER's column may be read as an attribute)
        values = column_array(arguments[position], column, *attribute)
        texts = lowercase_strings(values) if kind == LOWER else strings(values)
    if not texts:
        raise Unsupported("no documents (scikit-learn raises)")
    return texts
