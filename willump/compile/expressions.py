"""Compiled element-wise expressions over pandas columns: ``+ - * / **``, unary ``-``/``+`` and numpy ufuncs.

Every pandas operation on a Series costs tens of microseconds, even for one row
(alignment checks, dtype dispatch, a new Series); numpy on the arrays costs
about one. Call sites rewrite a whole expression such as ``digits / (length + 1)``
or ``np.log1p(frame["n"])`` into one call of a function computing it as written
(``expression_function``); this kernel answers that call when it can give
pandas' answer, and otherwise the function runs.

It answers when every Series (or ``frame["column"]``, ``frame.column``) is float64 or of a numpy int dtype with
an index equal to the others' (pandas does not align then), and the other values
are numbers. pandas computes these operations with the same numpy calls on the
same arrays: ``left op right`` under ``np.errstate(all="ignore")``, numpy scalars
first made Python numbers; a ufunc on a Series is called on its array, with the
caller's error state, so it warns as the original does. The result is built once,
with the index object and name pandas gives. Numba is not used: its
transcendental functions may differ from numpy's in the last bit.

String methods with constant arguments, ``name.str.len()`` or ``frame["text"].str.count("!")``
(``strings.StringMethod``), are leaves: their Series are computed from the strings' code points.

What pandas does differently from numpy is not compiled: ``//`` and ``%`` (it
fills divisions by zero), numexpr for long arrays. Nor is ``**`` with a negative
int or a non-constant exponent: numpy raises for an int to a negative int power
only when it meets one, after other operations may have warned.
"""

import ast
import operator

import numpy as np
import pandas as pd
from pandas.core.computation import expressions as pandas_expressions
from pandas.core.indexes.multi import MultiIndex
from pandas._libs.internals import get_blkno_placements
from pandas._libs.lib import maybe_indices_to_slice
from pandas.core import nanops

from willump.compile import frames
from willump.compile.categories import ASTYPE, CompiledFrameAstype, categorical_dtype
from willump.compile.columns import check_attribute_column, column_read, plain_attribute
from willump.compile.forms import Deferred, Unsupported, python_number, series_of
from willump.compile.strings import string_method

BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.Pow: operator.pow}
UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
NUMPY_NAMES = {"np", "numpy"}  # how a ufunc's module is written: np.log1p(x)
CONSTANTS = {name: NUMPY_NAMES | {"math"} for name in ("nan", "inf", "pi", "e")}  # np.nan: the modules writing each
UFUNCS = {  # each gives int64 or float64 for int64 or float64 (tests check it), so pandas' rules stay these
    name: getattr(np, name)
    for name in (
        "abs", "absolute", "fabs", "sign", "negative", "positive", "square", "sqrt", "cbrt",
        "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
        "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
        "floor", "ceil", "trunc", "rint",
    )
}
_VIEWED = {np.absolute, np.negative, np.positive}  # pandas calls Series.__abs__/__neg__/__pos__: the index is a view
_DTYPES = {np.dtype(np.int64), np.dtype(np.float64)}
_INTEGERS = {np.dtype(kind) for kind in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}
# bools and other ints: for np.where and astype (not arithmetic, where pandas differs)
_LEAF_DTYPES = _DTYPES | _INTEGERS | {np.dtype(bool)}
_ARITHMETIC_DTYPES = _DTYPES | _INTEGERS  # (``series.dt.hour`` is int32)
_NAMES = {type(None), str, int, float}  # Series names whose comparison is plain ==
_NUMBERS = (int, float, np.integer, np.floating)
PLAIN = {int, float, bool, np.float64, np.int64, np.ndarray, type(np)}  # values whose arithmetic runs no user code
_INT64 = 2**63
_NUMEXPR_FROM = getattr(pandas_expressions, "_MIN_ELEMENTS", 0)  # longer arrays may go through numexpr
_NOT_CONSTANT = object()
_ABSENT = object()  # an argument not given
OPERAND = "__willump_operand"  # the name standing for a leading operand computed otherwise (leading_operand)
COMPARISONS = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le,
               ast.Eq: operator.eq, ast.NotEq: operator.ne}
ROUNDING = {"round", "around"}  # np.round(x, n): Series.round(n)
METHODS = {"clip": ("lower", "upper"), "fillna": ("value",), "astype": ("dtype",), "abs": (), "round": ("decimals",),
           "isna": (), "isnull": (), "notna": (), "notnull": (), "between": ("left", "right", "inclusive")}
BETWEEN = {"both": (operator.ge, operator.le), "neither": (operator.gt, operator.lt), "left": (operator.ge, operator.lt),
           "right": (operator.gt, operator.le)}  # Series.between's comparisons of each ``inclusive``
_MISSING = {"isna": False, "isnull": False, "notna": True, "notnull": True}  # method -> whether it is negated
REDUCTIONS = {"sum", "mean", "min", "max"}  # frame[[...]].sum(axis=1)
_NUMBER, _LEAF, _COLUMN, _UNARY, _BINARY, _UFUNC = range(6)  # kinds of steps
_COMPARE, _WHERE, _METHOD, _REDUCE, _DTYPE, _NONE, _STRING, _SELECT, _ATTRIBUTE = range(6, 15)


def is_element_wise(node: ast.expr) -> bool:
    """Whether ``node`` is an operation whose whole tree is made of the compiled operations over names,
    numbers and ``name["column"]`` or ``name.column``, and reads at least one name."""
    return isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Compare)) and _reads_names(node) is True


def _reads_names(node):
    """True (reads a name), False (numbers only), or None (something else is in the tree)."""
    if isinstance(node, ast.Constant):
        return False if type(node.value) in (int, float) else None
    if isinstance(node, ast.Name):
        return True if node.id != "__debug__" else None  # a constant no function can take as a parameter
    if isinstance(node, (ast.Subscript, ast.Attribute)):  # frame["column"], frame.column, np.nan
        return True if column_read(node) is not None or _module_constant(node) else None
    if isinstance(node, ast.UnaryOp):
        return _reads_names(node.operand) if type(node.op) in UNARY else None
    if isinstance(node, ast.BinOp):
        if type(node.op) not in BINARY or (type(node.op) is ast.Pow and not _safe_exponent(node.right)):
            return None
        return _all_read(node.left, node.right)
    if isinstance(node, ast.Compare):  # one comparison: a < b < c is ``and``, which pandas refuses
        if string_method(node) is not None:  # frame["column"] == "literal"
            return True
        if len(node.ops) != 1 or type(node.ops[0]) not in COMPARISONS:
            return None
        return _all_read(node.left, node.comparators[0])
    if not isinstance(node, ast.Call) or any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return None
    if string_method(node) is not None:  # name.str.len(), name["column"].str.count("!"), ...
        return True
    if _ufunc_call(node):
        return _reads_names(node.args[0])
    numpy_function = _numpy_function(node)
    if numpy_function == "where" and len(node.args) == 3 and not node.keywords:
        return _all_read(*node.args)
    if numpy_function in ROUNDING and _arguments(node, ("a", "decimals")) is not None:
        arguments = _arguments(node, ("a", "decimals"))
        return _reads_names(arguments[0]) if _round_decimals(arguments[1:]) else None
    if not isinstance(node.func, ast.Attribute):
        return None
    method, receiver = node.func.attr, node.func.value
    if method in REDUCTIONS and _columns_selection(receiver):
        return True if _reduction_options(node) is not None else None
    parameters = METHODS.get(method)
    arguments = _arguments(node, parameters) if parameters is not None else None
    if arguments is None or not _method_arguments_fit(method, arguments):
        return None
    if method == "astype":  # the dtype: a name (float), numpy's (np.float32) or a string
        return _reads_names(receiver)
    if method == "fillna" and _columns_selection(receiver):  # frame[names].fillna(value): a DataFrame
        return True if _reads_names(arguments[0]) is not None else None
    if method == "between":  # (inclusive: a literal, checked by _method_arguments_fit)
        arguments = arguments[:2]
    return _all_read(receiver, *[a for a in arguments if a is not None and not _is_none(a)])


def leading_operand(node: ast.expr):
    """(parent, field, operand): the operand evaluated first in a chain of compiled methods (and
    operations on their left), when it is something else (``s.map(d)`` in ``s.map(d).fillna(0) > 1``);
    else None. The expression of a name standing for it may then be compiled: the operand is still
    evaluated first, and only names are read after it before the expression runs. (Not inside a ufunc's
    argument: Python looks the ufunc up before evaluating its argument.)"""
    parent = field = None
    methods = False
    current = node
    while True:
        if isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute) and current.func.attr in METHODS:
            parent, field, current, methods = current.func, "value", current.func.value, True
        elif isinstance(current, (ast.BinOp, ast.Compare)):
            parent, field, current = current, "left", current.left
        elif isinstance(current, ast.UnaryOp):
            parent, field, current = current, "operand", current.operand
        else:
            break
    if not methods or _reads_names(current) is not None or isinstance(current, ast.Starred):
        return None
    return parent, field, current


def _module_constant(node) -> bool:
    """``np.nan``, ``math.pi``...: a number read from the module at run time (``columns.plain_attribute``)."""
    return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr in CONSTANTS
            and node.value.id in CONSTANTS[node.attr])


def _all_read(*nodes):
    """_reads_names of several operands: None if one is None, else whether one reads a name."""
    reads = [_reads_names(n) for n in nodes]
    return None if None in reads else any(reads)


def _numpy_function(node) -> str | None:
    """The name of ``np.<name>(...)``, else None."""
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in NUMPY_NAMES:
        return func.attr
    return None


def _arguments(node: ast.Call, parameters: tuple) -> list | None:
    """The call's argument nodes for ``parameters`` (None where not given), as Python binds them;
    None when they do not bind (too many, unknown or repeated keywords)."""
    if len(node.args) > len(parameters):
        return None
    bound = list(node.args) + [None] * (len(parameters) - len(node.args))
    for keyword in node.keywords:
        if keyword.arg not in parameters or bound[parameters.index(keyword.arg)] is not None:
            return None
        bound[parameters.index(keyword.arg)] = keyword.value
    return bound


def _round_decimals(arguments) -> bool:
    """``round``'s decimals: none given, or an int written as a number."""
    return arguments[0] is None or type(_constant(arguments[0])) is int


def _method_arguments_fit(method: str, arguments: list) -> bool:
    if method == "clip":  # numbers, or None
        return any(a is not None and not _is_none(a) for a in arguments)
    if method == "fillna":
        return arguments[0] is not None and not _is_none(arguments[0])
    if method == "astype":  # (not to "category": a call, compiled by ``categories``)
        category = isinstance(arguments[0], ast.Constant) and arguments[0].value == "category"
        return arguments[0] is not None and _is_dtype(arguments[0]) and not category
    if method == "round":
        return _round_decimals(arguments)
    if method == "between":
        inclusive = arguments[2]
        return None not in arguments[:2] and _literal(inclusive) in (_ABSENT, *BETWEEN)
    return True  # abs()


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_dtype(node) -> bool:
    """A dtype written as a string, a name (``float``) or numpy's (``np.float32``)."""
    if isinstance(node, ast.Constant):
        return type(node.value) is str
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id in NUMPY_NAMES
    return isinstance(node, ast.Name)


def _columns_selection(node) -> bool:
    """``frame[["a", "b"]]`` or ``frame[names]``."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
        return False
    key = node.slice
    if isinstance(key, ast.List):
        return bool(key.elts) and all(isinstance(e, ast.Constant) and type(e.value) is str for e in key.elts)
    return isinstance(key, ast.Name)


def _reduction_options(node: ast.Call) -> bool | None:
    """skipna of ``.sum(axis=1)``, ``.mean(axis="columns", skipna=False)``...; None for other options."""
    arguments = _arguments(node, ("axis", "skipna"))
    if arguments is None or node.args:  # (pandas warns that they will be keyword-only)
        return None
    axis, skipna = (_literal(a) for a in arguments)
    if axis not in (1, "columns") or type(axis) is bool or skipna not in (True, False, _ABSENT):
        return None
    return skipna is not False


def _literal(node):
    if node is None:
        return _ABSENT
    return node.value if isinstance(node, ast.Constant) else _NOT_CONSTANT


def _safe_exponent(node) -> bool:
    """A constant exponent no numpy power raises for: a float, or an int >= 0."""
    value = _constant(node)
    return type(value) is float or (type(value) is int and value >= 0)


def _ufunc_call(node) -> bool:
    """``np.<ufunc>(x)``: one positional argument, no keywords."""
    func = getattr(node, "func", None)
    return (
        isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in NUMPY_NAMES
        and func.attr in UFUNCS and len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Starred)
    )


def _constant(node):
    """The value of a tree of numbers and operations, as Python computes it, else _NOT_CONSTANT."""
    try:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
            operand = _constant(node.operand)
            return _NOT_CONSTANT if operand is _NOT_CONSTANT else UNARY[type(node.op)](operand)
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
            left, right = _constant(node.left), _constant(node.right)
            if _NOT_CONSTANT not in (left, right) and not (type(node.op) is ast.Pow and abs(right) > 64):
                return BINARY[type(node.op)](left, right)  # (a huge power is left for run time)
    except ArithmeticError:  # 1 / 0: left for run time, where the function raises as written
        pass
    return _NOT_CONSTANT


def expression_function(node: ast.expr, filename: str):
    """(function, parameters): ``node`` as a function of the names it reads, in reading order (numpy's
    too), compiled with the user's file name and lines so that a traceback shows the user's line.
    The function carries ``willump_kernel``, the CompiledExpression standing in for it."""
    parameters = list(dict.fromkeys(_names(node)))
    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in parameters], vararg=None,
                              kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    function = ast.copy_location(ast.Lambda(arguments, node), node)
    code = compile(ast.fix_missing_locations(ast.Expression(function)), filename, "eval", dont_inherit=True)
    function = eval(code, {})
    function.willump_kernel = CompiledExpression(node, parameters)
    function.operator_name = _operator_name(function.willump_kernel)  # for explain_compilation
    return function, parameters


def _operator_name(kernel) -> str:
    """What explain_compilation calls the expression, with the method when a DataFrame's kernel may answer it
    (``df.astype(dtypes)``, ``df.fillna(values)``: a frame's or a column's, known only at run time)."""
    if kernel.frame_method or (kernel.cast is not None and kernel.cast[0][0] == _LEAF):
        return f"element-wise expression (.{kernel.steps[-1][1]})"
    return "element-wise expression"


def _names(node):
    """The names ``node`` reads, in the order Python reads them."""
    if isinstance(node, ast.Name):
        yield node.id
    for child in ast.iter_child_nodes(node):  # fields in order: left before right, callee before argument
        yield from _names(child)


_FRAME_FILL = frames.CompiledFrameFillna()
_FRAME_ASTYPE = CompiledFrameAstype()  # (name.astype(dtypes) of a DataFrame: a dict of dtypes, as often as not)


class CompiledUfunc:
    """``np.log1p(value)`` (any of ``UFUNCS``) of a value another call computes (``np.log1p(s.map(d).fillna(0))``:
    not an expression of names, so its own call site): the expression kernel of ``np.<ufunc>(value)``."""

    def __init__(self, name: str):
        self.name = name
        self._expression = CompiledExpression(ast.parse(f"np.{name}(value)", mode="eval").body, ["np", "value"])

    def __call__(self, /, *args, **kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported(f"numpy.{self.name} options (out, where, dtype...)")
        return self._expression(np, args[0])

    @staticmethod
    def still_valid() -> bool:
        return True


class CompiledExpression:
    """The kernel of one expression function: numpy on the columns' arrays, one Series at the end.

    The tree is flattened into steps, operands first. A call first checks every step against
    pandas' rules, computing only numbers, so that nothing has warned when it refuses; then
    it computes the arrays.
    """

    def __init__(self, node: ast.expr, parameters: list):
        self.steps = []  # (kind, function or value, operand steps, parameter), operands first
        self._add(node, {name: i for i, name in enumerate(parameters)})
        self.leaves = sorted({step[3] for step in self.steps if step[0] in (_LEAF, _COLUMN, _ATTRIBUTE, _STRING, _SELECT)} | {
            step[3][0] for step in self.steps if step[0] == _REDUCE})  # where Series or frames may be
        self.frame_method = self.steps[-1][0] == _METHOD and self.steps[-1][1] == "fillna"  # may give a DataFrame
        self.binary = any(  # operations pandas may give numexpr (clip compares, then np.where)
            step[0] in (_BINARY, _COMPARE) or (step[0] == _METHOD and step[1] in ("clip", "between")) for step in self.steps
        )
        self.cast = self._cast()  # (name.astype(name): categories' cast for a CategoricalDtype, or of a frame)
        if self.frame_method:  # (only these may keep their result in a kernel's form: see _deferred_fill)
            self.defer = self._deferred_fill

    def _add(self, node, position: dict) -> int:
        """Append the steps computing ``node`` (``position``: of each name among the parameters); its step's."""
        value = _constant(node)
        if node is None or _is_none(node):
            step = (_NONE, None, (), None)
        elif value is not _NOT_CONSTANT:
            step = (_NUMBER, value, (), None)
        elif isinstance(node, ast.Name):
            step = (_LEAF, None, (), position[node.id])
        elif _module_constant(node):  # np.nan: read as Python reads it, when it runs
            step = (_ATTRIBUTE, node.attr, (), position[node.value.id])
        elif isinstance(node, (ast.Subscript, ast.Attribute)):
            frame, key, attribute = column_read(node)
            step = (_ATTRIBUTE if attribute else _COLUMN, key, (), position[frame])
        elif isinstance(node, ast.UnaryOp):
            step = (_UNARY, UNARY[type(node.op)], (self._add(node.operand, position),), None)
        elif isinstance(node, ast.BinOp):
            operands = (self._add(node.left, position), self._add(node.right, position))
            step = (_BINARY, BINARY[type(node.op)], operands, None)
        elif string_method(node) is not None:
            name, method = string_method(node)
            step = (_STRING, method, (), position[name])
        elif isinstance(node, ast.Compare):
            operands = (self._add(node.left, position), self._add(node.comparators[0], position))
            step = (_COMPARE, COMPARISONS[type(node.ops[0])], operands, None)
        elif _ufunc_call(node):
            module = (position[node.func.value.id], node.func.attr)
            step = (_UFUNC, UFUNCS[node.func.attr], (self._add(node.args[0], position),), module)
        elif _numpy_function(node) == "where":
            module = (position[node.func.value.id], "where")
            step = (_WHERE, np.where, tuple(self._add(a, position) for a in node.args), module)
        elif _numpy_function(node) in ROUNDING:
            receiver, decimals = _arguments(node, ("a", "decimals"))
            module = (position[node.func.value.id], node.func.attr)
            step = (_METHOD, "round", (self._add(receiver, position),), (module, _decimals(decimals)))
        elif node.func.attr in REDUCTIONS and _columns_selection(node.func.value):
            selection = node.func.value
            key = selection.slice
            columns = tuple(e.value for e in key.elts) if isinstance(key, ast.List) else position[key.id]
            step = (_REDUCE, node.func.attr, (), (position[selection.value.id], columns, _reduction_options(node)))
        else:
            method = node.func.attr
            arguments = _arguments(node, METHODS[method])
            receiver = self._add_receiver(node.func.value, position)
            if method == "astype":
                step = (_METHOD, method, (receiver, self._add_dtype(arguments[0], position)), None)
            elif method == "round":
                step = (_METHOD, method, (receiver,), (None, _decimals(arguments[0])))
            elif method == "between":
                inclusive = "both" if arguments[2] is None else _literal(arguments[2])
                step = (_METHOD, method, (receiver, *[self._add(a, position) for a in arguments[:2]]), (None, inclusive))
            else:
                step = (_METHOD, method, (receiver, *[self._add(a, position) for a in arguments]), None)
        self.steps.append(step)
        return len(self.steps) - 1

    def _cast(self) -> tuple | None:
        """(receiver's step, the dtype's parameter) of an expression that is only ``name.astype(dtype)`` or
        ``frame["column"].astype(dtype)``, a name holding the dtype; else None."""
        kind, method, operands, _ = self.steps[-1]
        if kind != _METHOD or method != "astype":
            return None
        receiver, dtype = (self.steps[i] for i in operands)
        if receiver[0] not in (_LEAF, _COLUMN) or dtype[1] is not None or type(dtype[3]) is not int:
            return None
        return receiver, dtype[3]

    def _add_receiver(self, node, position: dict) -> int:
        """The step of a method's receiver: ``frame[names]`` (a DataFrame, or a column when ``names``
        holds a str) is a selection step, anything else as ``_add`` makes it."""
        if not _columns_selection(node):
            return self._add(node, position)
        key = node.slice
        columns = tuple(e.value for e in key.elts) if isinstance(key, ast.List) else position[key.id]
        self.steps.append((_SELECT, columns, (), position[node.value.id]))
        return len(self.steps) - 1

    def _frame_fill(self, arguments):
        """``frame.fillna(value)`` or ``frame[names].fillna(value)`` of a DataFrame, else None (a Series
        or something else: the steps decide)."""
        kind, _, operands, _ = self.steps[-1]
        if kind != _METHOD or self.steps[-1][1] != "fillna":
            return None
        receiver, value = (self.steps[i] for i in operands)
        if receiver[0] == _SELECT:
            key = list(receiver[1]) if type(receiver[1]) is tuple else arguments[receiver[1]]
            if type(key) is not list:
                return None
            frame = frames.select_columns(arguments[receiver[3]], key)
        elif receiver[0] == _LEAF and _is_frame(arguments[receiver[3]]):
            frame = arguments[receiver[3]]
        else:
            return None
        if value[0] not in (_NUMBER, _LEAF):
            raise Unsupported("fillna of a DataFrame with an expression")
        return frames.fillna(frame, value[1] if value[0] == _NUMBER else arguments[value[3]])

    def _categorical_cast(self, arguments) -> pd.Series:
        """``series.astype(CategoricalDtype(...))`` by ``categories``' kernel (the column read as pandas reads it)."""
        (kind, key, _, position), dtype = self.cast[0], arguments[self.cast[1]]
        series = arguments[position]
        if kind == _COLUMN:
            if type(series) is not pd.DataFrame:
                raise Unsupported("a column of something other than a DataFrame, cast to categories")
            series = series[key]
        return ASTYPE(series, dtype)

    def _add_dtype(self, node, position: dict) -> int:
        """The step of a dtype argument: a string, a name's value, or numpy's attribute."""
        if isinstance(node, ast.Constant):
            step = (_DTYPE, node.value, (), None)
        elif isinstance(node, ast.Name):
            step = (_DTYPE, None, (), position[node.id])
        else:
            step = (_DTYPE, node.attr, (), (position[node.value.id], node.attr))
        self.steps.append(step)
        return len(self.steps) - 1

    @staticmethod
    def still_valid() -> bool:
        return True

    def _deferred_fill(self, *arguments):
        """``defer`` of an expression that may fill a frame: ``frame.fillna(name)`` of a dict or Series read
        only by kernels kept as the frame's columns (``CompiledFrameFillna.defer``), else the call's answer."""
        receiver, value = (self.steps[i] for i in self.steps[-1][2])
        if receiver[0] == _LEAF and value[0] == _LEAF and _is_frame(arguments[receiver[3]]):
            return _FRAME_FILL.defer(arguments[receiver[3]], arguments[value[3]])
        return self(*arguments)

    def __call__(self, *arguments):
        if self.cast is not None and categorical_dtype(arguments[self.cast[1]]):
            return self._categorical_cast(arguments)
        if self.cast is not None and self.cast[0][0] == _LEAF and _is_frame(arguments[self.cast[0][3]]):
            return _FRAME_ASTYPE(arguments[self.cast[0][3]], arguments[self.cast[1]])
        if self.frame_method:
            frame = self._frame_fill(arguments)
            if frame is not None:
                return frame
        if not any(type(arguments[i]) in (pd.Series, pd.DataFrame) for i in self.leaves):
            raise Unsupported("no Series or DataFrame among the values (Python computes lists, strings and numbers as fast)")
        values, columns, tape = self._check(arguments)
        if columns[-1] is None:
            raise Unsupported("a number")
        index, name, viewed, _ = columns[-1]
        rows = next((len(c[0]) for c in columns if c is not None and c[0] is not None), 0)
        if self.binary and getattr(pandas_expressions, "USE_NUMEXPR", True) and rows > _NUMEXPR_FROM:
            raise Unsupported("pandas computes arrays this long with numexpr")
        loud = not all(step[3] for step in tape)
        if loud and "raise" in np.geterr().values():
            raise Unsupported("numpy raises for some floating-point errors (a kernel must not stop halfway)")
        if loud and any(getattr(step[1], "late", False) for step in tape):
            raise Unsupported("a cast to int after operations that may warn (the cast may refuse after they warned)")
        if loud:  # pandas' operations quiet, as in pandas; ufuncs as the caller's error state says
            for position, function, operands, quiet in tape:
                if quiet:
                    with np.errstate(all="ignore"):
                        values[position] = function(*[values[i] for i in operands])
                else:
                    values[position] = function(*[values[i] for i in operands])
        else:
            with np.errstate(all="ignore"):
                for position, function, operands, _ in tape:
                    values[position] = function(*[values[i] for i in operands])
        if index is None:  # np.where's array
            return values[-1]
        return series_of(values[-1], index.view() if viewed else index, name)

    def _check(self, arguments):
        """(values, columns, tape): per step its number or array (None until computed) and, for a Series,
        (index, name, whether the index is a view, dtype), for an array (None, length, None, dtype); the
        tape computes the arrays. Unsupported where pandas would do something else."""
        values, columns, tape = [], [], []
        for position, (kind, function, operands, parameter) in enumerate(self.steps):
            column = None
            if kind in (_NUMBER, _NONE):
                value = function
            elif kind == _LEAF:
                value, column = _leaf(arguments[parameter])
            elif kind == _ATTRIBUTE and not isinstance(arguments[parameter], pd.DataFrame):  # cfg.scale
                value, column = _leaf(plain_attribute(arguments[parameter], function))
            elif kind in (_COLUMN, _ATTRIBUTE):
                if kind == _ATTRIBUTE:
                    check_attribute_column(arguments[parameter], function)
                value, column = _frame_column(arguments[parameter], function)
            elif kind == _SELECT:  # frame[name] of a str: a column
                key = function if type(function) is str else arguments[function]
                if type(key) is not str:
                    raise Unsupported("columns selected by other than a list of str")
                value, column = _frame_column(arguments[parameter], key)
            elif kind == _STRING:  # (a Series of numbers or bools; only numbers enter arithmetic)
                value, column = function.leaf(arguments[parameter])
                column = (*column, getattr(value, "dtype", None))
                if len(self.steps) > 1 and column[3] not in _LEAF_DTYPES:  # (bools: astype, np.where)
                    raise Unsupported(f"arithmetic on a .str result of dtype {column[3]}")
            elif kind == _DTYPE:
                value = _dtype(function, parameter, arguments)
            elif kind == _REDUCE:
                frame, key, skipna = parameter
                key = list(key) if type(key) is tuple else arguments[key]
                blocks, column = _selected_blocks(arguments[frame], key)
                if function == "mean":
                    column = (*column[:3], np.dtype(np.float64))
                value = None
                tape.append((position, _reduction(function, blocks, skipna, len(column[0])), (), False))
            else:
                if kind in (_UFUNC, _WHERE):
                    _check_numpy(arguments[parameter[0]], parameter[1], function)
                elif kind == _METHOD and parameter is not None and parameter[0] is not None:
                    _check_numpy(arguments[parameter[0][0]], parameter[0][1], getattr(np, parameter[0][1], None))
                if all(columns[i] is None for i in operands):
                    if kind == _METHOD:
                        raise Unsupported(f"{function}() of a number")
                    value = _numbers(function, *[values[i] for i in operands])
                elif kind == _METHOD:
                    value, (function, column) = None, _method(function, operands, parameter, values, columns)
                    tape.append((position, function, operands[:getattr(function, "arity", 1)], function.quiet))
                else:
                    value, column = None, _result(kind, function, operands, values, columns)
                    tape.append((position, function, operands, kind not in _LOUD))
            values.append(value)
            columns.append(column)
        return values, columns, tape


_LOUD = (_UFUNC, _REDUCE)  # kinds of steps that warn as the caller's error state says (the others run quiet, as in pandas)


def _result(kind, function, operands, values, columns) -> tuple:
    """(index, name, whether the index is a view, dtype) of the Series pandas gives for an operation on a
    Series, or (None, length, None, dtype) of np.where's array."""
    if kind == _WHERE:
        return _where(operands, values, columns)
    for i in operands:
        column = columns[i]
        if column is not None and (column[0] is None or column[3] not in _ARITHMETIC_DTYPES):
            kind_of = "an array" if column[0] is None else f"a Series of dtype {column[3]}"
            raise Unsupported(f"{kind_of} in arithmetic (not compiled)")
    if kind == _UNARY:  # Series.__neg__ and __pos__ view the index
        index, name, _, dtype = columns[operands[0]]
        return index, name, True, dtype
    if kind == _UFUNC:  # Series.__array_ufunc__, which calls __abs__, __neg__, __pos__ for some
        index, name, viewed, dtype = columns[operands[0]]
        return index, name, viewed or function in _VIEWED, _result_dtype(function, dtype)
    left, right = (columns[i] for i in operands)  # Series._arith_method: the Series' own, reversed or not
    if left is None or right is None:
        number = operands[0] if left is None else operands[1]
        values[number] = _operand(values[number])
        index, name, viewed, dtype = left or right
        _check_in_range(values[number], dtype)
        other = type(values[number])
        dtypes = (dtype, other) if left is not None else (other, dtype)
    else:
        if not left[0].equals(right[0]):
            raise Unsupported("Series with different indexes (pandas aligns them)")
        index, name, viewed, dtypes = left[0], _result_name(left[1], right[1]), left[2], (left[3], right[3])
    return index, name, viewed, np.dtype(bool) if kind == _COMPARE else _result_dtype(function, *dtypes)


_DTYPE_SAMPLES = {int: 1, float: 1.0}
_result_dtypes = {}


def _result_dtype(function, *dtypes) -> np.dtype:
    """The dtype numpy gives for ``function`` of arrays of these dtypes and Python numbers of these types."""
    key = (function, *dtypes)
    dtype = _result_dtypes.get(key)
    if dtype is None:
        samples = [_DTYPE_SAMPLES[d] if d in _DTYPE_SAMPLES else np.ones(1, d) for d in dtypes]
        with np.errstate(all="ignore"):
            dtype = _result_dtypes[key] = function(*samples).dtype
    return dtype


def _where(operands, values, columns) -> tuple:
    """np.where of Series (their arrays), arrays and numbers: an array, as long as the Series."""
    lengths = {columns[i][1] if columns[i][0] is None else len(columns[i][0]) for i in operands if columns[i] is not None}
    if len(lengths) != 1:
        raise Unsupported("np.where of arrays of different lengths")
    samples = []
    for i in operands:
        if columns[i] is not None and columns[i][3] not in _LEAF_DTYPES:
            raise Unsupported(f"np.where of a Series of dtype {columns[i][3]}")
        if columns[i] is not None:
            samples.append(np.ones(1, columns[i][3]))
        elif type(values[i]) in (int, float, bool):
            samples.append(values[i])
        else:
            raise Unsupported(f"np.where of a {type(values[i]).__name__}")
    return None, lengths.pop(), None, np.where(*samples).dtype


def _decimals(node) -> int:
    return 0 if node is None else _constant(node)


def _dtype(written, parameter, arguments) -> np.dtype:
    """The numpy dtype an astype argument names, for those compiled."""
    if written is None:  # a name: float, int, bool, or a variable
        value = arguments[parameter]
    elif parameter is None:  # a string
        value = written
    else:
        value = getattr(arguments[parameter[0]], written, None) if arguments[parameter[0]] is np else None
    try:
        dtype = _CASTS.get(value)
    except TypeError:  # unhashable
        dtype = None
    if dtype is None:
        raise Unsupported(f"astype to {value!r}")
    return dtype


_CASTS = {  # what pandas_dtype gives for each (numpy's dtypes)
    value: np.dtype(value) for value in (
        float, int, bool, "float", "float64", "float32", "int", "bool", np.float64, np.float32, np.bool_,
        *[str(dtype) for dtype in _INTEGERS], *[dtype.type for dtype in _INTEGERS],
    )
}


def _method(method: str, operands, parameter, values, columns):
    """(function of the receiver's array, column) of ``series.<method>(...)``."""
    receiver = columns[operands[0]]
    if receiver is None or receiver[0] is None:
        raise Unsupported(f"{method}() of an array")
    index, name, _, dtype = receiver
    if method == "astype":
        target = values[operands[1]]
        if isinstance(dtype, pd.CategoricalDtype):
            return _categories_cast(target, dtype), (index, name, True, target)
        if dtype not in _CAST_SOURCES:
            raise Unsupported(f"astype of a Series of dtype {dtype}")
        function = _cast(target, dtype)
        return function, (index, name, True, target)
    if method == "between":
        return _between(values[operands[1]], values[operands[2]], parameter[1], dtype), (index, name, receiver[2],
                                                                                         np.dtype(bool))
    if method in _MISSING:
        if isinstance(dtype, pd.CategoricalDtype):  # (not hashed: a CategoricalDtype hashes its categories)
            raise Unsupported(f"{method}() of a Series of dtype {dtype}")
        return _missing(_MISSING[method], dtype), (index, name, receiver[2] or _MISSING[method], np.dtype(bool))
    if dtype not in _DTYPES:
        raise Unsupported(f"{method}() of a Series of dtype {dtype}")
    if method == "abs":
        function = _quiet(lambda array: np.abs(array))
    elif method == "round":  # (to 0 decimals numpy's rint, which never warns; otherwise a product may overflow)
        function = (_quiet if parameter[1] == 0 else _loud)(
            lambda array, decimals=parameter[1]: _copied(array.round(decimals), array))
    elif method == "fillna" and columns[operands[1]] is not None:
        function = _fillna_series(columns[operands[1]], receiver, dtype)
    elif method == "fillna":
        function = _fillna(values[operands[1]], dtype)
    else:
        function = _clip(values[operands[1]], values[operands[2]], dtype)
    return function, (index, name, True, dtype)


_CAST_SOURCES = _LEAF_DTYPES


def _quiet(function):
    function.quiet = True
    return function


def _loud(function):
    function.quiet = False
    return function


def _copied(result: np.ndarray, array: np.ndarray) -> np.ndarray:
    """``result``, never ``array`` itself (pandas shares it by reference, a kernel must not)."""
    return result.copy() if result is array else result


def _cast(target: np.dtype, source: np.dtype):
    """``values.astype(target)``, as pandas' astype_array; a cast to int refuses values out of its range
    (pandas raises for non-finite floats and negative ones to unsigned ints; numpy's answer for the
    others is left to it)."""
    if target.kind not in "iu" or np.can_cast(source, target):  # (only float64 to float32 may warn: overflow)
        cast = lambda array: array.astype(target)  # noqa: E731
        return _loud(cast) if source.kind == "f" and target == np.float32 else _quiet(cast)
    bounds = np.iinfo(target)
    lowest, beyond = (bounds.min, bounds.max + 1) if source.kind == "f" else (bounds.min, None)

    def cast(array):
        inside = (array >= lowest).all() and (
            (array < beyond).all() if beyond is not None else not len(array) or array.max() <= bounds.max)
        if not inside or source.kind == "f" and not np.isfinite(array).all():
            raise Unsupported("a cast to int of non-finite or out-of-range values")
        return array.astype(target)

    cast.late = True  # it may refuse after other steps ran
    return _quiet(cast)


def _missing(negated: bool, dtype):
    """Series.isna (isnull): NaN where floats, none in ints and bools, what pandas' ``isna`` finds in
    text (object arrays: None, NaN, NaT, NA...; string arrays: their own ``isna``); notna (notnull)
    the inverse, whose ``~`` views the index."""
    if not isinstance(dtype, np.dtype) or dtype == object:
        return _quiet(lambda values: ~pd.isna(values) if negated else pd.isna(values))
    if dtype.kind == "f":
        return _quiet(lambda array: ~np.isnan(array) if negated else np.isnan(array))
    return _quiet(lambda array: np.full(len(array), negated))


def _categories_cast(target: np.dtype, dtype: pd.CategoricalDtype):
    """``Categorical.astype(target)`` of numbers: its categories cast (as ``_cast`` casts them), taken
    by the codes. A missing value (pandas raises for ints, fills others) or no categories or rows:
    as written."""
    cast = _cast(target, dtype.categories.dtype)

    def taken(categorical):
        codes = categorical.codes
        if not len(codes) or not len(dtype.categories) or (codes < 0).any():
            raise Unsupported("a missing value, or no rows or categories, cast from categories")
        return cast(dtype.categories._values).take(codes)

    taken.late = getattr(cast, "late", False)
    return _quiet(taken)


def _fillna(value, dtype):
    """Block.fillna with a number: NaNs set to it; an int Series has none (whatever the number)."""
    number = _threshold(value, np.dtype(np.float64), "fillna")  # (a number, as a float64)
    if dtype.kind != "f":
        return _quiet(lambda array: array.copy())
    return _quiet(lambda array: _put(array, np.isnan(array), number))


def _fillna_series(filler, receiver, dtype):
    """Series.fillna(other Series): ``other.reindex(self.index)``'s values put where ``self`` is NaN;
    compiled for the same unique index, float64 values into float64 (ints and bools have no NaN)."""
    if filler[0] is None or not (filler[0] is receiver[0] or filler[0].equals(receiver[0])) or not receiver[0].is_unique:
        raise Unsupported("fillna with an array, or a Series with another or a repeated index (pandas aligns it)")
    if dtype.kind == "f" and filler[3] != np.float64:
        raise Unsupported(f"fillna of float64 with a Series of dtype {filler[3]} (pandas may change the dtype)")
    if dtype.kind != "f":
        function = lambda array, other: array.copy()  # noqa: E731
    else:
        function = lambda array, other: _put(array, np.isnan(array), other)  # noqa: E731
    function.arity = 2
    return _quiet(function)


def _put(array, mask, number):
    if not mask.any():
        return array.copy()
    result = array.copy()
    np.putmask(result, mask, number)
    return result


def _clip(lower, upper, dtype):
    """NDFrame.clip with numbers: NaN bounds ignored, bounds swapped into order, then for each
    ``where(isna | self >= lower, lower)`` and ``where(isna | self <= upper, upper)``."""
    bounds = [python_number(b) for b in (lower, upper)]  # (np.float64("nan") is a NaN bound too)
    bounds = [None if b is None or (type(b) is float and b != b) else b for b in bounds]
    lower, upper = bounds
    if lower is None and upper is None:
        raise Unsupported("clip with no bound but NaN (pandas gives the Series itself)")
    if lower is not None and upper is not None:
        lower, upper = min(lower, upper), max(lower, upper)
    lower = None if lower is None else _threshold(lower, dtype, "clip")
    upper = None if upper is None else _threshold(upper, dtype, "clip")

    def clip(array):
        mask = np.isnan(array) if dtype.kind == "f" else None
        result = array
        for bound, compare in ((lower, operator.ge), (upper, operator.le)):
            if bound is not None:
                keep = compare(array, bound)
                if mask is not None:
                    keep |= mask
                if not keep.all():
                    result = np.where(keep, result, bound)
        return result.copy() if result is array else result

    return _quiet(clip)


def _between(left, right, inclusive: str, dtype: np.dtype):
    """Series.between: its two comparisons (each a number as ``maybe_prepare_scalar_for_op`` passes it to
    numpy), and-ed."""
    if dtype not in _ARITHMETIC_DTYPES:
        raise Unsupported(f"between() of a Series of dtype {dtype}")
    left, right = _operand(left), _operand(right)
    _check_in_range(left, dtype)
    _check_in_range(right, dtype)
    above, below = BETWEEN[inclusive]
    return _quiet(lambda array: above(array, left) & below(array, right))


def _threshold(number, dtype: np.dtype, method: str):
    """The number as pandas' np_can_hold_element casts it to the Series' dtype; Unsupported where
    pandas would change the dtype. numpy's float64 and int64 (what ``median()``, ``mean()`` and ``max()``
    give) are read as the Python float and int they hold, as pandas reads them."""
    number = python_number(number)
    if type(number) not in (int, float):
        raise Unsupported(f"{method} with a {type(number).__name__}")
    if dtype.kind == "f":
        if type(number) is int and not -_EXACT_FLOAT <= number <= _EXACT_FLOAT:
            raise Unsupported(f"{method} with an int beyond float64's exact ints")
        return np.float64(number)
    if type(number) is float and not number.is_integer() or not -_INT64 <= number < _INT64:
        raise Unsupported(f"{method} of an int Series with {number!r} (pandas may change the dtype)")
    return np.int64(number)


_EXACT_FLOAT = 2**53


def _selected_blocks(frame, key) -> tuple:
    """(blocks, column) of ``frame[key]`` for a list of column names: the arrays of the blocks pandas'
    take makes (same memory layout, same order), and the reduction's (index, None, True, dtype)."""
    if type(frame) is not pd.DataFrame:
        raise Unsupported(f"columns of a {type(frame).__name__}")
    if type(key) is not list or not key or not all(type(k) is str for k in key):
        raise Unsupported("columns selected by other than a list of strings")
    if not _REDUCTIONS_KNOWN:
        raise Unsupported(f"row-wise reductions are compiled for pandas 3.1 (this is {pd.__version__})")
    columns = frame.columns
    if isinstance(columns, MultiIndex) or not columns.is_unique:
        raise Unsupported("MultiIndex or repeated column names")
    _check_metadata(frame, None)
    try:  # (get_loc: get_indexer would build an Index of the names, ~100 us)
        positions = np.array([columns.get_loc(k) for k in key], dtype=np.intp)
    except KeyError:
        raise Unsupported("a column the frame does not have") from None
    if not len(frame.index):
        raise Unsupported("no rows")
    manager = frame._mgr
    blocks = []
    for number, placement in get_blkno_placements(manager.blknos[positions], group=True):
        block = manager.blocks[number].values
        if not isinstance(block, np.ndarray) or block.dtype not in _DTYPES:
            raise Unsupported(f"a column of dtype {block.dtype}")
        taker = manager.blklocs[positions][placement.indexer]
        taker = maybe_indices_to_slice(taker, max(len(placement), taker.max() + 1))
        blocks.append(block[taker] if isinstance(taker, slice) else block.take(taker, axis=0))
    dtypes = {b.dtype for b in blocks}
    return blocks, (frame.index, None, True, max(dtypes, key=lambda d: d.kind == "f"))


def _reduction(name: str, blocks: list, skipna: bool, rows: int):
    """DataFrame._reduce(axis=1) of pandas 3.1 on the selection's blocks (the same numpy and nanops
    calls on arrays of the same layout): one block reduced along its columns (or, for sums and means
    of fewer than 6 rows, transposed), several block by block (``_reduce_axis1``)."""
    op = getattr(nanops, f"nan{name}")
    if len(blocks) == 1:
        values = blocks[0]
        if name in ("sum", "mean") and rows < 6:
            return lambda: op(values.T, axis=1, skipna=skipna)
        return lambda: op(values, axis=0, skipna=skipna)
    return lambda: _reduce_blocks(name, op, blocks, skipna)


def _reduce_blocks(name, op, blocks, skipna):
    """DataFrame._reduce_axis1 for numpy blocks of ints and floats."""
    if name in ("sum", "mean"):
        accumulated = np.result_type(*[b.dtype for b in blocks])
        if name == "mean" and accumulated.kind != "f":
            accumulated = np.dtype(np.float64)
        combine = np.add
    else:
        accumulated = None
        combine = {"min": np.fmin if skipna else np.minimum, "max": np.fmax if skipna else np.maximum}[name]
    result = None
    for values in blocks:
        if accumulated is not None and values.dtype != accumulated:
            values = values.astype(accumulated)
        if name in ("min", "max"):
            middle = combine.reduce(values, axis=0)
        else:
            middle = nanops.nansum(values, axis=0, skipna=skipna, min_count=0)
        result = middle.copy() if result is None else combine(result, middle)
    if name == "mean":
        counts = np.zeros(len(result), dtype=np.intp)
        for values in blocks:
            if values.dtype.kind in "biu" or not skipna:
                counts += values.shape[0]
            else:
                counts += values.shape[0] - np.isnan(values).sum(axis=0)
        empty = counts == 0
        result[~empty] /= counts[~empty]
        result[empty] = np.nan
    return result


_REDUCTIONS_KNOWN = pd.__version__.startswith("3.1.")  # the paths above are pandas 3.1's DataFrame._reduce


def _is_frame(value) -> bool:
    return type(value) is pd.DataFrame or (isinstance(value, Deferred) and value.stands_for is pd.DataFrame)


def _check_numpy(module, name: str, ufunc) -> None:
    if module is not np or getattr(np, name, None) is not ufunc:
        raise Unsupported(f"{name} is not numpy's ufunc {name}")


def _leaf(value):
    """(number or array, column) of a name's value (for a Series of categories or text: its
    Categorical, string array or object array, which only ``_method``'s casts and missing-value tests
    read)."""
    if type(value) is pd.Series:
        if not (isinstance(value.dtype, np.dtype) and value.dtype in _LEAF_DTYPES or _tested_or_cast(value.dtype)):
            raise Unsupported(f"a Series of dtype {value.dtype}")
        _check_metadata(value, value.name)
        return value._values, (value.index, value.name, False, value.dtype)
    if type(value) is bool or not isinstance(value, _NUMBERS):
        raise Unsupported(f"a value of type {type(value).__name__}")
    return value, None


def _frame_column(frame, key):
    """(array, column) of ``frame[key]``, as DataFrame.__getitem__ finds a single column."""
    if type(frame) is not pd.DataFrame:
        raise Unsupported(f"a column of a {type(frame).__name__}")
    columns = frame.columns
    if isinstance(columns, MultiIndex):
        raise Unsupported("MultiIndex columns")
    try:
        position = columns.get_loc(key)
    except Exception as error:  # pandas then tries other readings of the key
        raise Unsupported(f"no column {key!r} ({type(error).__name__})") from None
    if not isinstance(position, int):
        raise Unsupported(f"several columns {key!r}")
    values = frame._get_column_array(position)
    if not (isinstance(values, np.ndarray) and values.dtype in _LEAF_DTYPES or _tested_or_cast(values.dtype)):
        raise Unsupported(f"a column of dtype {values.dtype}")
    # A str key found among pyarrow's str names is the name (pandas' lookup of the name costs more;
    # Python-backed names may be np.str_).
    pyarrow_names = isinstance(columns.dtype, pd.StringDtype) and columns.dtype.storage == "pyarrow"
    name = key if type(key) is str and pyarrow_names else columns[position]
    _check_metadata(frame, name)
    return values, (frame.index, name, True, values.dtype)  # the column's index is a view of the frame's


def _tested_or_cast(dtype) -> bool:
    """Whether a Series of ``dtype`` may be read for ``_method``'s missing-value tests (text: object,
    ``str``) or casts (categories of numpy numbers): no other step takes it (each checks its dtypes
    for numpy's before hashing one: a CategoricalDtype hashes its categories, ~80 us)."""
    if isinstance(dtype, pd.CategoricalDtype):
        return dtype.categories.dtype in _ARITHMETIC_DTYPES
    return dtype == object or isinstance(dtype, pd.StringDtype)


def _check_metadata(obj, name) -> None:
    """Unsupported for what pandas would carry over to the result besides index and name."""
    if obj.attrs or not obj.flags.allows_duplicate_labels:
        raise Unsupported("attrs or flags (pandas carries them over)")
    if type(name) not in _NAMES:
        raise Unsupported(f"a name of type {type(name).__name__}")


def _numbers(function, *operands):
    """``function`` of numbers, as written; Unsupported instead of a warning or an error (the
    expression then runs as written, giving them in its own order)."""
    try:
        with np.errstate(all="raise"):
            return function(*operands)
    except ArithmeticError as error:
        raise Unsupported(f"the numbers give {type(error).__name__}: {error}") from None


def _operand(number):
    """A number meeting a Series, as pandas' ``maybe_prepare_scalar_for_op`` passes it to numpy."""
    if isinstance(number, np.integer):
        number = int(number)
    elif isinstance(number, np.floating):
        number = float(number)
    if type(number) not in (int, float) or (type(number) is int and not -_INT64 <= number < _INT64):
        raise Unsupported(f"the number {number!r} (not an int64 or a float)")
    return number


def _check_in_range(number, dtype: np.dtype) -> None:
    """numpy raises OverflowError for a Python int outside an int array's dtype (NEP 50), after
    the expression's other operations may have warned: such a number is left to the code as written."""
    if type(number) is int and dtype.kind in "iu":
        bounds = np.iinfo(dtype)
        if not bounds.min <= number <= bounds.max:
            raise Unsupported(f"the number {number} outside {dtype}")


def _result_name(left, right):
    """pandas' ``get_op_result_name`` of two Series, for the name types compiled."""
    return left if left == right or (left != left and right != right) else None
