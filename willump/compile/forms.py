"""What kernels pass each other: values in a kernel's own form, and ``Unsupported``.

A call site whose result only ever reaches other call sites may keep it in
this form (see ``sites``), so consecutive compiled operators do not build the
pandas or scipy objects in between. ``materialize`` gives the object the
original code would have produced, once.
"""

from operator import is_

import numpy as np
import pandas as pd
import scipy.sparse as sp
import sklearn
from pandas.core.internals import SingleBlockManager


class Unsupported(Exception):
    """This object, option or input is not compiled; the Python call runs instead."""


def held_attributes(model) -> tuple:
    """A fitted model's attributes (its fitted state and parameters), held so that ``same_attributes``
    compares them by identity: refitting or ``set_params`` replaces them."""
    return tuple(vars(model).values())


def same_attributes(model, held: tuple) -> bool:
    """Whether ``model``'s attributes are still the ones ``held_attributes`` held."""
    now = vars(model)
    return len(now) == len(held) and all(map(is_, now.values(), held))


def stand_in(fitted, **attributes):
    """A copy of ``fitted`` (its class, its attributes) with ``attributes`` set on the instance,
    where they come before the class's methods: the library's own code then runs on answers
    already computed (``answering``)."""
    twin = object.__new__(type(fitted))
    twin.__dict__.update(vars(fitted))
    twin.__dict__.update(attributes)
    return twin


def answering(name: str, response):
    """A method named ``name`` that answers ``response`` (libraries read the names of methods)."""
    def answer(X):
        return response
    answer.__name__ = name
    return answer


class ReceiverKernel:
    """A kernel for a method of short-lived objects (each call's frame, accessor or Series):
    built once, it is given the object as its first argument, and depends on nothing else."""

    takes_receiver = True

    @staticmethod
    def still_valid() -> bool:
        return True


class Deferred:
    """A value kept in a kernel's form; ``materialize()`` builds the real object (once)."""

    _real = None
    stands_for = object  # the type of the real object, whose methods kernels stand in for
    built_as_written = False  # ``_build`` runs the original operation: keeping the value pays only when nothing builds it
    kept_by = None  # the call site that kept it, told when it is built (``CallSite.materialized``)

    def materialize(self):
        if self._real is None:
            self._real = self._build()
            if self.kept_by is not None:
                self.kept_by.materialized += 1
        return self._real

    def protect(self) -> None:
        """Stop sharing the caller's objects, before code that may change them in place runs."""


def python_number(value):
    """numpy's float64 and int64 (what ``median()``, ``mean()`` and ``max()`` give) as the Python float and
    int they hold, as pandas reads them; any other value as it is."""
    kind = type(value)
    return float(value) if kind is np.float64 else int(value) if kind is np.int64 else value


def series_of(values: np.ndarray, index: pd.Index, name) -> pd.Series:
    """``pd.Series(values, index=index, name=name, copy=False)`` of a numpy array, without the constructor's checks."""
    manager = SingleBlockManager.from_array(values, index)
    result = pd.Series._from_mgr(manager, manager.axes)
    object.__setattr__(result, "_name", name)
    return result


def materialized(value):
    """The object ``value`` stands for when it is kept in a kernel's form (built once), else ``value``."""
    return value.materialize() if isinstance(value, Deferred) else value


class DeferredMethod:
    """``form.name`` for a value kept in a kernel's form: calling it runs the real method."""

    def __init__(self, form: Deferred, name: str):
        self.__self__, self.__name__ = form, name

    def __call__(self, /, *args, **kwargs):
        return getattr(self.__self__.materialize(), self.__name__)(*args, **kwargs)


class Texts(Deferred):
    """A list of ``str``, standing for the pandas Series ``original()`` returns."""

    def __init__(self, texts: list, original):
        self.texts, self._original = texts, original

    def _build(self):
        return self._original()


class Columns(Deferred):
    """Named columns standing for a DataFrame (``labels``, ``arrays()``, ``index``): kernels that
    read frames read the arrays, and the frame is built only for a call that runs as written."""

    stands_for = pd.DataFrame
    labels: list

    def named(self, names: list | None, library: str = "scikit-learn") -> "Columns":
        """The columns, when their labels are the feature names seen in fit (``names``), in order;
        Unsupported otherwise (the library raises or warns)."""
        if self.labels != names:
            raise Unsupported(f"columns that are not the feature names seen in fit, in order ({library} raises or warns)")
        return self

    def arrays(self) -> list:
        """The columns' arrays, in order."""
        raise NotImplementedError

    def numbers(self, kinds: str = "iuf", dtype=None) -> np.ndarray:
        """``np.asarray(frame, dtype)`` of columns of numpy numbers of ``kinds``: the arrays side
        by side in ``dtype``, else their common dtype, as pandas interleaves them; Unsupported for others."""
        arrays = self.arrays()
        if not all(type(a) is np.ndarray and a.dtype.kind in kinds for a in arrays):
            raise Unsupported("columns other than numpy numbers (converted by the library first)")
        return side_by_side(arrays, dtype or np.result_type(*[a.dtype for a in arrays]))


class FrameColumns(Columns):
    """The DataFrame scikit-learn's ``set_output(transform="pandas")`` makes of a kernel's answer
    (or a ColumnTransformer makes of its branches' frames), kept as its columns; ``build()`` makes
    it as scikit-learn does."""

    def __init__(self, labels: list, arrays: list, index: pd.Index | None, build):
        self.labels, self._arrays, self.index, self._make = labels, arrays, index, build

    def arrays(self) -> list:
        return self._arrays

    def protect(self) -> None:
        """Built now (its arrays may be the caller's columns): code that runs before a kernel reads
        them may change them in place."""
        frame = self.materialize()
        self._arrays = [frame._get_column_array(i) for i in range(frame.shape[1])]

    def _build(self):
        return self._make()


def kind_of(value) -> str:
    """The name of ``value``'s type as the user knows it (a value kept in a kernel's form is named
    by what it stands for), for the reasons explanations give."""
    if isinstance(value, (SparseRows, Stacked)):
        return "sparse matrix"
    return (value.stands_for if isinstance(value, Deferred) and value.stands_for is not object else type(value)).__name__


def side_by_side(columns: list, dtype) -> np.ndarray:
    """A new array of the columns side by side, converted to ``dtype`` as numpy converts them
    (column-major, as scikit-learn's copy of a DataFrame's values)."""
    if len(columns[0]) == 1:  # one row: from the scalars, without a numpy call per column
        return np.array([[column[0] for column in columns]], dtype=dtype)
    values = np.empty((len(columns[0]), len(columns)), dtype=dtype, order="F")
    for i, column in enumerate(columns):
        values[:, i] = column
    return values


class SparseRows(Deferred):
    """CSR arrays (int32 indices, sorted within rows) standing for a scipy CSR matrix."""

    def __init__(self, data, indices, indptr, width: int, kind=None, sorted_indices=True):
        self.data, self.indices, self.indptr, self.width = data, indices, indptr, width
        self.kind = kind or configured_csr()
        self.sorted_indices = sorted_indices

    @property
    def rows(self) -> int:
        return len(self.indptr) - 1

    def _build(self):
        matrix = csr(self.kind, self.data, self.indices, self.indptr, (self.rows, self.width))
        if self.sorted_indices:
            matrix.has_sorted_indices = True
        return matrix

    @classmethod
    def of(cls, matrix):
        """The arrays of a real CSR matrix (no copy until ``protect``)."""
        rows = cls(matrix.data, matrix.indices, matrix.indptr, matrix.shape[1], type(matrix), False)
        rows.borrowed = True
        return rows

    borrowed = False  # the arrays are a user's matrix's

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def protect(self) -> None:
        if self.borrowed:
            self.data, self.indices, self.indptr = self.data.copy(), self.indices.copy(), self.indptr.copy()
            self.borrowed = False


class LazyRows(SparseRows):
    """Sparse rows not computed yet: ``compute()`` gives their ``SparseRows`` when first needed.

    A consumer that knows the ``source`` (e.g. the linear model, for a vectorizer's rows) may
    compute what it needs without them. If ``compute`` refuses, ``fallback()`` (the call as
    written) gives the real matrix (should a kernel fail).
    """

    def __init__(self, compute, fallback, source, rows: int, width: int, dtype):
        self._compute, self._fallback, self.source = compute, fallback, source
        self._rows, self.width, self._dtype = rows, width, np.dtype(dtype)
        self.sorted_indices = True
        self._done = None

    rows = property(lambda self: self._rows)
    kind = property(lambda self: self.force().kind)
    dtype = property(lambda self: self._dtype if self._done is None else self._done.dtype)
    data = property(lambda self: self.force().data)
    indices = property(lambda self: self.force().indices)
    indptr = property(lambda self: self.force().indptr)

    def force(self) -> SparseRows:
        if self._done is None:
            if self._failed is not None:  # the call as written raised: it raises the same again, once run
                raise self._failed
            try:
                done = self._compute()
            except Exception:  # Unsupported, or a failing kernel: the call as written decides
                try:
                    self._real = self._fallback()
                except Exception as error:
                    self._failed = error
                    raise
                done = SparseRows.of(self._real)
            self._done = done
        return self._done

    _failed = None

    def _build(self):
        return self.force().materialize()

    def protect(self) -> None:
        """Nothing to do: the documents are the kernel's own list of (immutable) ``str``, and the
        kernel checked when making these rows that computing them will not refuse, so computing
        them later raises nothing the call as written would have raised then."""


class Stacked(Deferred):
    """Blocks side by side (``hstack``), without copying them."""

    def __init__(self, blocks: list, build):
        self.blocks, self._stack = blocks, build

    def _build(self):
        return self._stack(self.blocks)

    def protect(self) -> None:
        for block in self.blocks:
            block.protect()


def stacked_dtype(blocks) -> np.dtype:
    """The dtype of blocks side by side (``np.result_type``; all float64, the common case, is
    recognized without it: numpy's builtin dtypes are singletons)."""
    if all(b.dtype is _FLOAT64 for b in blocks):
        return _FLOAT64
    return np.result_type(*[b.dtype for b in blocks])


_FLOAT64 = np.dtype(np.float64)


def configured_csr():
    """The CSR class scikit-learn is configured to return (spmatrix or sparray)."""
    return sp.csr_array if sklearn.get_config().get("sparse_interface") == "sparray" else sp.csr_matrix


def _construct_directly(kind, data, indices, indptr, shape):
    matrix = kind.__new__(kind)
    matrix.__dict__.update(_shape=shape, maxprint=_MAXPRINT, indices=indices, indptr=indptr, data=data)
    return matrix


def _construct_checked(kind, data, indices, indptr, shape):
    return kind((data, indices, indptr), shape=shape, copy=False)


def _direct_construction_matches() -> bool:
    """scipy's constructor re-checks arrays the kernels built correctly, which costs more than a
    one-row kernel; instances are built directly only if that gives scipy's own attributes."""
    arrays = (np.ones(2), np.array([0, 3], np.int32), np.array([0, 2], np.int32))
    for kind in (sp.csr_matrix, sp.csr_array):
        checked = _construct_checked(kind, *arrays, (1, 4))
        direct = _construct_directly(kind, *arrays, (1, 4))
        if vars(checked).keys() != vars(direct).keys() or direct.format != "csr":
            return False
        if (direct != checked).nnz != 0:
            return False
    return True


_MAXPRINT = sp.csr_matrix((1, 1)).maxprint
csr = _construct_directly if _direct_construction_matches() else _construct_checked
