"""Compiled element-wise expressions over pandas columns: ``+ - * / **``, unary ``-``/``+`` and numpy ufuncs.

Every pandas operation on a Series costs tens of microseconds, even for one row
(alignment checks, dtype dispatch, a new Series); numpy on the arrays costs
about one. Call sites rewrite a whole expression such as ``digits / (length + 1)``
or ``np.log1p(frame["n"])`` into one call of a function computing it as written
(``expression_function``); this kernel answers that call when it can give
pandas' answer, and otherwise the function runs.

It answers when every Series (or ``frame["column"]``) is int64 or float64 with
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
from pandas.core.internals import SingleBlockManager

from willump.compile.forms import Unsupported
from willump.compile.strings import string_method

BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.Pow: operator.pow}
UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
NUMPY_NAMES = {"np", "numpy"}  # how a ufunc's module is written: np.log1p(x)
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
_NAMES = {type(None), str, int, float}  # Series names whose comparison is plain ==
_NUMBERS = (int, float, np.integer, np.floating)
PLAIN = {int, float, bool, np.float64, np.int64, np.ndarray, type(np)}  # values whose arithmetic runs no user code
_INT64 = 2**63
_NUMEXPR_FROM = getattr(pandas_expressions, "_MIN_ELEMENTS", 0)  # longer arrays may go through numexpr
_NOT_CONSTANT = object()
_NUMBER, _LEAF, _COLUMN, _UNARY, _BINARY, _UFUNC, _STRING = range(7)  # kinds of steps


def is_element_wise(node: ast.expr) -> bool:
    """Whether ``node`` is an operation whose whole tree is made of the compiled operations over names,
    numbers and ``name["column"]``, and reads at least one name."""
    return isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call)) and _reads_names(node) is True


def _reads_names(node):
    """True (reads a name), False (numbers only), or None (something else is in the tree)."""
    if isinstance(node, ast.Constant):
        return False if type(node.value) in (int, float) else None
    if isinstance(node, ast.Name):
        return True if node.id != "__debug__" else None  # a constant no function can take as a parameter
    if isinstance(node, ast.Subscript):  # frame["column"]
        key = node.slice
        return True if isinstance(node.value, ast.Name) and isinstance(key, ast.Constant) and type(key.value) is str else None
    if isinstance(node, ast.UnaryOp):
        return _reads_names(node.operand) if type(node.op) in UNARY else None
    if isinstance(node, ast.BinOp):
        if type(node.op) not in BINARY or (type(node.op) is ast.Pow and not _safe_exponent(node.right)):
            return None
        left, right = _reads_names(node.left), _reads_names(node.right)
        return None if left is None or right is None else left or right
    if string_method(node) is not None:  # name.str.len(), name["column"].str.count("!"), ...
        return True
    return _reads_names(node.args[0]) if _ufunc_call(node) else None


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
    function.operator_name = "element-wise expression"  # for explain_compilation
    function.willump_kernel = CompiledExpression(node, parameters)
    return function, parameters


def _names(node):
    """The names ``node`` reads, in the order Python reads them."""
    if isinstance(node, ast.Name):
        yield node.id
    for child in ast.iter_child_nodes(node):  # fields in order: left before right, callee before argument
        yield from _names(child)


class CompiledExpression:
    """The kernel of one expression function: numpy on the columns' arrays, one Series at the end.

    The tree is flattened into steps, operands first. A call first checks every step against
    pandas' rules, computing only numbers, so that nothing has warned when it refuses; then
    it computes the arrays.
    """

    def __init__(self, node: ast.expr, parameters: list):
        self.steps = []  # (kind, function or value, operand steps, parameter), operands first
        self._add(node, {name: i for i, name in enumerate(parameters)})
        self.leaves = sorted({step[3] for step in self.steps if step[0] in (_LEAF, _COLUMN, _STRING)})  # where Series may be
        self.binary = any(step[0] == _BINARY for step in self.steps)
        self.ufuncs = any(step[0] == _UFUNC for step in self.steps)

    def _add(self, node, position: dict) -> int:
        """Append the steps computing ``node`` (``position``: of each name among the parameters); its step's."""
        value = _constant(node)
        if value is not _NOT_CONSTANT:
            step = (_NUMBER, value, (), None)
        elif isinstance(node, ast.Name):
            step = (_LEAF, None, (), position[node.id])
        elif isinstance(node, ast.Subscript):
            step = (_COLUMN, node.slice.value, (), position[node.value.id])
        elif isinstance(node, ast.UnaryOp):
            step = (_UNARY, UNARY[type(node.op)], (self._add(node.operand, position),), None)
        elif isinstance(node, ast.BinOp):
            operands = (self._add(node.left, position), self._add(node.right, position))
            step = (_BINARY, BINARY[type(node.op)], operands, None)
        elif string_method(node) is not None:
            name, method = string_method(node)
            step = (_STRING, method, (), position[name])
        else:
            module = (position[node.func.value.id], node.func.attr)
            step = (_UFUNC, UFUNCS[node.func.attr], (self._add(node.args[0], position),), module)
        self.steps.append(step)
        return len(self.steps) - 1

    @staticmethod
    def still_valid() -> bool:
        return True

    def __call__(self, *arguments):
        if not any(type(arguments[i]) in (pd.Series, pd.DataFrame) for i in self.leaves):
            raise Unsupported("no Series or DataFrame among the values")
        values, columns, tape = self._check(arguments)
        index, name, viewed = columns[-1]
        if self.binary and getattr(pandas_expressions, "USE_NUMEXPR", True) and len(index) > _NUMEXPR_FROM:
            raise Unsupported("pandas computes arrays this long with numexpr")
        if self.ufuncs and "raise" in np.geterr().values():
            raise Unsupported("numpy raises for some floating-point errors (a kernel must not stop halfway)")
        if self.ufuncs:  # binary operations quiet, as in pandas; ufuncs as the caller's error state says
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
        return _series(values[-1], index.view() if viewed else index, name)

    def _check(self, arguments):
        """(values, columns, tape): per step its number or array (None until computed) and, for a Series,
        (index, name, whether the index is a view); the tape computes the arrays. Unsupported where
        pandas would do something else."""
        values, columns, tape = [], [], []
        for position, (kind, function, operands, parameter) in enumerate(self.steps):
            column = None
            if kind == _NUMBER:
                value = function
            elif kind == _LEAF:
                value, column = _leaf(arguments[parameter])
            elif kind == _COLUMN:
                value, column = _frame_column(arguments[parameter], function)
            elif kind == _STRING:  # (a Series of numbers or bools; only numbers enter arithmetic)
                value, column = function.leaf(arguments[parameter])
                if len(self.steps) > 1 and getattr(value, "dtype", None) not in _DTYPES:
                    raise Unsupported(f"arithmetic on a .str result of dtype {value.dtype}")
            else:
                if kind == _UFUNC:
                    _check_numpy(arguments[parameter[0]], parameter[1], function)
                if all(columns[i] is None for i in operands):
                    value = _numbers(function, *[values[i] for i in operands])
                else:
                    value, column = None, _result(kind, function, operands, values, columns)
                    tape.append((position, function, operands, kind == _BINARY))
            values.append(value)
            columns.append(column)
        return values, columns, tape


def _result(kind, function, operands, values, columns) -> tuple:
    """(index, name, whether the index is a view) of the Series pandas gives for an operation on a Series."""
    if kind == _UNARY:  # Series.__neg__ and __pos__ view the index
        index, name, _ = columns[operands[0]]
        return index, name, True
    if kind == _UFUNC:  # Series.__array_ufunc__, which calls __abs__, __neg__, __pos__ for some
        index, name, viewed = columns[operands[0]]
        return index, name, viewed or function in _VIEWED
    left, right = (columns[i] for i in operands)  # Series._arith_method: the Series' own, reversed or not
    if left is None or right is None:
        number = operands[0] if left is None else operands[1]
        values[number] = _operand(values[number])
        return left or right
    if not left[0].equals(right[0]):
        raise Unsupported("Series with different indexes (pandas aligns them)")
    return left[0], _result_name(left[1], right[1]), left[2]


def _check_numpy(module, name: str, ufunc) -> None:
    if module is not np or getattr(np, name, None) is not ufunc:
        raise Unsupported(f"{name} is not numpy's ufunc {name}")


def _leaf(value):
    """(number or array, column) of a name's value."""
    if type(value) is pd.Series:
        if value.dtype not in _DTYPES:
            raise Unsupported(f"a Series of dtype {value.dtype}")
        _check_metadata(value, value.name)
        return value._values, (value.index, value.name, False)
    if type(value) is bool or not isinstance(value, _NUMBERS):
        raise Unsupported(f"a value of type {type(value).__name__}")
    return value, None


def _frame_column(frame, key):
    """(array, column) of ``frame[key]``, as DataFrame.__getitem__ finds a single column."""
    if type(frame) is not pd.DataFrame:
        raise Unsupported(f"a column of a {type(frame).__name__}")
    if isinstance(frame.columns, MultiIndex):
        raise Unsupported("MultiIndex columns")
    try:
        position = frame.columns.get_loc(key)
    except Exception as error:  # pandas then tries other readings of the key
        raise Unsupported(f"no column {key!r} ({type(error).__name__})") from None
    if not isinstance(position, int):
        raise Unsupported(f"several columns {key!r}")
    values = frame._get_column_array(position)
    if not isinstance(values, np.ndarray) or values.dtype not in _DTYPES:
        raise Unsupported(f"a column of dtype {values.dtype}")
    name = frame.columns[position]
    _check_metadata(frame, name)
    return values, (frame.index, name, True)  # the column's index is a view of the frame's


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


def _result_name(left, right):
    """pandas' ``get_op_result_name`` of two Series, for the name types compiled."""
    return left if left == right or (left != left and right != right) else None


def _series(values: np.ndarray, index, name) -> pd.Series:
    """``pd.Series(values, index=index, name=name, copy=False)``, without the constructor's checks."""
    manager = SingleBlockManager.from_array(values, index)
    result = pd.Series._from_mgr(manager, manager.axes)
    object.__setattr__(result, "_name", name)
    return result
