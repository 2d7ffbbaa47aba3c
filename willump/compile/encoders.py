"""Compiled ``OneHotEncoder.transform`` and ``OrdinalEncoder.transform``.

Each feature's categories become, once, a lookup from a value to its position
in ``categories_`` (a dict for object and string columns, with scikit-learn's
rules for ``None`` and NaN; a sorted search for numbers), and a table from that
position to what the encoder outputs for it: the one-hot column (or none),
or the ordinal value. The table is computed by the same steps scikit-learn
takes on each call (infrequent categories grouped, unknown values handled,
dropped categories removed), run once over every position and an unknown
value, so a call only looks values up and gathers. Unknown values scikit-learn
raises or warns about are refused, and its own call runs.
"""

import math

import numpy as np
import pandas as pd
from pandas._libs.hashtable import PyObjectHashTable
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

from willump.compile.arrow import is_arrow_strings, pa, pc
from willump.compile.forms import SparseRows, Unsupported
from willump.compile.jit import njit
from willump.compile.preprocessing import FittedKernel, check_finite, output_config

_PYTHON_STRINGS = pd.arrays.StringArray
UNKNOWN = -1  # a value's position when it is not a category (the tables' last entry is for it)


class Categories:
    """One feature's fitted categories as a lookup: value -> position, -1 when unknown."""

    def __init__(self, categories: np.ndarray):
        self.size = len(categories)
        self.categorical = None, None  # (the last pandas categorical's dtype; its categories' and NaN's positions, None: read its values)
        self.objects = categories.dtype.kind == "O"
        if self.objects:
            values = categories.tolist()
            self.nan = next((i for i, v in enumerate(values) if _is_nan(v)), None)
            self.positions = {v: i for i, v in enumerate(values) if not _is_nan(v)}
            strings = [i for i, v in enumerate(values) if isinstance(v, str)]
            self.strings = [values[i] for i in strings]
            # For many rows, pandas' hash table of the str categories and NaN (equal to any float NaN there)
            hashed = strings + ([self.nan] if self.nan is not None else [])
            self.table = PyObjectHashTable(len(hashed))
            self.table.map_locations(np.array([values[i] if i != self.nan else math.nan for i in hashed], dtype=object))
            self.string_positions = np.array(hashed + [UNKNOWN], dtype=np.intp)
            self.arrow_sets = {}  # pyarrow string type -> the str categories as a pyarrow array of it
        else:
            if categories.dtype.kind not in "iuf":
                raise Unsupported(f"categories of dtype {categories.dtype}")
            has_nan = categories.dtype.kind == "f" and self.size and np.isnan(categories[-1])
            self.nan = self.size - 1 if has_nan else None
            self.sorted = categories[:-1] if has_nan else categories

    def positions_of(self, column) -> np.ndarray:
        """Each value's position in ``categories_``, or -1; Unsupported for a column scikit-learn
        would read differently (another kind of values, infinities, objects it cannot hash)."""
        if self.objects and _arrow_text(column):
            if len(column) <= _FEW:  # (pyarrow's list of str, missing values NaN: ~1 us, numpy's objects ~7)
                strings = column._pa_array
                values = strings.to_pylist()
                return self._one_by_one([math.nan if v is None else v for v in values] if strings.null_count else values)
            found = self._arrow_positions(column._pa_array)
            if found is not None:
                return found
        if type(column) is pd.Categorical:
            return self._categorical_positions(column)
        values = _values(column)
        if self.objects:
            if values.dtype.kind != "O":
                raise Unsupported(f"a {values.dtype} column for categories that are objects")
            return self._object_positions(values)
        kind, fitted = values.dtype.kind, self.sorted.dtype.kind
        if kind != fitted:
            raise Unsupported(f"a {values.dtype} column for {self.sorted.dtype} categories")
        check_finite(values, finite=False)
        found = np.searchsorted(self.sorted, values)
        inside = found < len(self.sorted)
        known = inside.copy()
        known[inside] = self.sorted[found[inside]] == values[inside]
        positions = np.where(known, found, UNKNOWN)
        if self.nan is not None:
            positions[np.isnan(values)] = self.nan
        return positions

    def _categorical_positions(self, column: pd.Categorical) -> np.ndarray:
        """The positions of a pandas categorical's values, as of the values ``np.asarray`` gives
        (what scikit-learn reads): each category's found once per categories, gathered by code
        (a missing value, NaN there, is at the NaN category or unknown)."""
        dtype, positions = self.categorical
        if dtype is not column.dtype:
            dtype = column.dtype
            values = np.asarray(pd.Categorical.from_codes(np.arange(len(dtype.categories)), dtype=dtype))
            if values.dtype.kind in "Of":
                positions = np.append(self.positions_of(values), self.nan if self.nan is not None else UNKNOWN)
            else:  # (ints and bools: a missing value makes them floats, so the column's values are read)
                positions = None
            self.categorical = dtype, positions
        if positions is None:
            return self.positions_of(np.asarray(column))
        return positions[column.codes]

    def _object_positions(self, values: np.ndarray) -> np.ndarray:
        if len(values) > _FEW:  # the str categories found by pandas; the other values as below
            try:
                found = self.string_positions[self.table.lookup(values)]
            except TypeError:
                raise Unsupported("a value that cannot be hashed (scikit-learn raises)") from None
            missed = np.flatnonzero(found == UNKNOWN)
            if len(missed):
                found[missed] = self._one_by_one(values[missed])
            return found
        return self._one_by_one(values)

    def _arrow_positions(self, strings) -> np.ndarray | None:
        """The positions of pyarrow strings, found by pyarrow (missing values are NaN to scikit-learn);
        None for categories pyarrow cannot hold (not UTF-8)."""
        kind = strings.type
        if kind not in self.arrow_sets:
            try:
                self.arrow_sets[kind] = pa.array(self.strings, type=kind)
            except (pa.ArrowException, UnicodeError):
                self.arrow_sets[kind] = None
        categories = self.arrow_sets[kind]
        if categories is None:
            return None
        found = pc.index_in(strings, value_set=categories).fill_null(UNKNOWN).to_numpy()
        positions = self.string_positions[found]
        if self.nan is not None and strings.null_count:
            positions[pc.is_null(strings).to_numpy()] = self.nan
        return positions

    def _one_by_one(self, values) -> np.ndarray:
        """The positions of ``values`` (an array or a list), looked up one by one."""
        get, nan = self.positions.get, self.nan
        values = values.tolist() if isinstance(values, np.ndarray) else values
        try:
            found = [get(v, UNKNOWN) for v in values]
        except TypeError:
            raise Unsupported("a value that cannot be hashed (scikit-learn raises)") from None
        if UNKNOWN in found:
            for i, position in enumerate(found):
                if position == UNKNOWN:
                    value = values[i]
                    if nan is not None and _is_nan(value):
                        found[i] = nan
                    elif type(value) not in _PLAIN:
                        raise Unsupported(f"an unknown value of type {type(value).__name__}")
        return np.array(found, dtype=np.intp)


_FEW = 64  # rows looked up one by one in a dict; more in pandas' hash table (pyarrow's index_in for its strings)
_PLAIN = (str, int, float, type(None), bool)


def _arrow_text(column) -> bool:
    """Whether the column is pandas' pyarrow-backed ``str`` (missing values NaN), in UTF-8 arrays."""
    return is_arrow_strings(column) and column.dtype.na_value is not pd.NA and column._pa_array.type in _ARROW_TEXT


_ARROW_TEXT = () if pa is None else (pa.string(), pa.large_string())


def _is_nan(value) -> bool:
    """scikit-learn's ``is_scalar_nan``."""
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _values(column) -> np.ndarray:
    """A column's values as scikit-learn's ``check_array(..., dtype=None)`` gives them: numbers as
    they are, strings (numpy's, pandas' ``str``) as Python objects."""
    if isinstance(column, np.ndarray):
        return column.astype(object) if column.dtype.kind == "U" else column
    if type(column) is _PYTHON_STRINGS and column.dtype.na_value is not pd.NA:
        return column._ndarray  # its str values and NaN, as numpy would convert them
    if isinstance(column.dtype, pd.StringDtype) and column.dtype.na_value is not pd.NA:
        # (from its array: numpy's conversion of a Series took 11.5 us a column, of its array 2.9)
        return np.asarray(getattr(column, "array", column), dtype=object)
    raise Unsupported(f"a column of dtype {column.dtype}")


class _Encoding(FittedKernel):
    """What both encoders share: each feature's lookup and its table of outputs."""

    ATTRIBUTES = ("categories_", "handle_unknown", "dtype", "_infrequent_enabled")

    def __init__(self, model, workers=None):
        super().__init__(model)
        self.lookups = [Categories(c) for c in model.categories_]
        self.infrequent = model._infrequent_enabled
        self.raises = model.handle_unknown == "error"

    def positions(self, X) -> list:
        """Each feature's positions (-1: unknown); Unsupported for unknowns scikit-learn raises on."""
        columns = self.columns(X)
        if type(columns) is np.ndarray:
            if columns.dtype.kind not in "OUiuf":
                raise Unsupported(f"{columns.dtype} values")
            columns = [columns[:, i] for i in range(columns.shape[1])]
        found = [lookup.positions_of(column) for lookup, column in zip(self.lookups, columns)]
        if self.raises and any((p == UNKNOWN).any() for p in found):
            raise Unsupported("an unknown category (scikit-learn raises)")
        return found

    def grouped(self, feature: int, ignored=None) -> tuple:
        """(codes, valid) of every position and then an unknown value after scikit-learn's
        ``_transform`` and ``_map_infrequent_categories``, for one feature."""
        model = self.model
        size = self.lookups[feature].size
        codes = np.append(np.arange(size), 0)  # scikit-learn encodes an unknown value as the first category
        valid = np.append(np.ones(size, dtype=bool), False)
        if not self.infrequent:
            return codes, valid
        infrequent = model._infrequent_indices[feature]
        if infrequent is not None:
            codes[~valid] = infrequent[0]
            if model.handle_unknown in ("infrequent_if_exist", "warn"):
                valid[:] = True
        mapping = model._default_to_infrequent_mappings[feature]
        if mapping is not None:
            rows = codes != ignored if ignored is not None else slice(None)
            codes[rows] = np.take(mapping, codes[rows])
        return codes, valid


class CompiledOneHotEncoder(_Encoding):
    """``OneHotEncoder.transform``: CSR (int32 indices, sorted) or the dense array, of ``dtype``."""

    KIND = OneHotEncoder
    ATTRIBUTES = _Encoding.ATTRIBUTES + ("drop", "sparse_output", "_drop_idx_after_grouping", "_n_features_outs")

    def __init__(self, model, workers=None):
        super().__init__(model, workers)
        # scikit-learn warns about unknown values when it drops a category (or is asked to warn)
        self.warns = model.handle_unknown == "warn" or (
            model.drop is not None and model.handle_unknown in ("ignore", "infrequent_if_exist")
        )
        offsets = np.cumsum([0] + list(model._n_features_outs))
        self.out_width = int(offsets[-1])
        self.tables = [self._table(i, offsets[i]) for i in range(len(self.lookups))]
        self.dtype = np.dtype(model.dtype)

    def _table(self, feature: int, offset: int) -> np.ndarray:
        """The output column of each position and of an unknown value (last), -1 for none."""
        codes, valid = self.grouped(feature)
        drop = self.model._drop_idx_after_grouping
        if drop is not None and drop[feature] is not None:
            valid &= codes != drop[feature]
            codes[codes > drop[feature]] -= 1
        return np.where(valid, codes + offset, -1).astype(np.int32)

    def transform(self, X):
        if not self.model.sparse_output:
            return _dense(self._columns(X), self.out_width, self.dtype)
        return self.defer(X).materialize()

    def defer(self, X):
        """As calling it; sparse output kept as ``SparseRows`` for the compiled calls reading it."""
        if not self.model.sparse_output:
            return super().defer(X)
        if output_config(self.model) != "default":
            raise Unsupported("set_output with sparse output (scikit-learn raises)")
        indices, indptr = _csr_arrays(self._columns(X))
        return SparseRows(np.ones(len(indices), dtype=self.dtype), indices, indptr, self.out_width)

    def _columns(self, X) -> np.ndarray:
        """Each row's output column per feature (-1: none)."""
        found = self.positions(X)
        if self.warns and any((p == UNKNOWN).any() for p in found):
            raise Unsupported("an unknown category (scikit-learn warns)")
        rows = len(found[0])
        if len(found) == 1:
            return self.tables[0][found[0]].reshape(rows, 1)
        columns = np.empty((rows, len(found)), dtype=np.int32)
        for i, (table, positions) in enumerate(zip(self.tables, found)):
            columns[:, i] = table[positions]
        return columns


@njit
def _csr_arrays(columns):
    """(indices, indptr) of the rows' output columns, -1 left out; in feature order, so sorted."""
    rows, features = columns.shape
    indptr = np.empty(rows + 1, np.int32)
    indices = np.empty(rows * features, np.int32)
    indptr[0] = 0
    n = 0
    for r in range(rows):
        for f in range(features):
            column = columns[r, f]
            if column >= 0:
                indices[n] = column
                n += 1
        indptr[r + 1] = n
    return indices[:n], indptr


def _dense(columns: np.ndarray, width: int, dtype) -> np.ndarray:
    out = np.zeros((len(columns), width), dtype=dtype)
    _set_ones(columns, out)
    return out


@njit
def _set_ones(columns, out):
    for r in range(columns.shape[0]):
        for f in range(columns.shape[1]):
            if columns[r, f] >= 0:
                out[r, columns[r, f]] = 1


class CompiledOrdinalEncoder(_Encoding):
    """``OrdinalEncoder.transform``: each feature's codes, missing and unknown values encoded as asked."""

    KIND = OrdinalEncoder
    ATTRIBUTES = _Encoding.ATTRIBUTES + ("unknown_value", "encoded_missing_value", "_missing_indices")

    def __init__(self, model, workers=None):
        super().__init__(model, workers)
        self.dtype = np.dtype(model.dtype)
        self.tables = [self._table(i) for i in range(len(self.lookups))]

    def _table(self, feature: int) -> np.ndarray:
        """The output of each position and of an unknown value (last), as scikit-learn computes them."""
        model = self.model
        missing = model._missing_indices.get(feature)
        codes, valid = self.grouped(feature, missing)
        table = codes.astype(self.dtype)
        if missing is not None:
            table[codes == missing] = model.encoded_missing_value
        if model.handle_unknown == "use_encoded_value":
            table[~valid] = model.unknown_value
        return table

    def transform(self, X):
        found = self.positions(X)
        out = np.empty((len(found[0]), len(found)), dtype=self.dtype)
        for i, (table, positions) in enumerate(zip(self.tables, found)):
            out[:, i] = table[positions]
        return out


KERNELS = {OneHotEncoder: CompiledOneHotEncoder, OrdinalEncoder: CompiledOrdinalEncoder}
