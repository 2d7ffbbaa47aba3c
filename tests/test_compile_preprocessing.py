"""The compiled scikit-learn preprocessing kernels give scikit-learn's answer to the bit (values,
dtype, shape, sparse format, DataFrame), or refuse and let scikit-learn answer; never where
scikit-learn would warn or raise."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from answers import answers
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import (
    FunctionTransformer,
    MinMaxScaler,
    OneHotEncoder,
    OrdinalEncoder,
    PolynomialFeatures,
    RobustScaler,
    StandardScaler,
)

import willump
from willump.compile import registry
from willump.compile.forms import Unsupported

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")
SETTINGS = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
LETTERS = ["a", "b", "c", "d", "e"]  # "e" is never fitted: an unknown category


def kernel(model):
    found, why = registry.kernel_for(model.transform)
    assert found is not None, why
    return found


def same_bits(got, want) -> None:
    """Equal to the bit: the same type, dtype, shape, sparse arrays or DataFrame."""
    assert type(got) is type(want), (type(got), type(want))
    if sp.issparse(want):
        assert got.format == want.format and got.dtype == want.dtype and got.shape == want.shape
        for name in ("indices", "indptr", "data"):
            a, b = getattr(got, name), getattr(want, name)
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), name
        assert got.has_sorted_indices == want.has_sorted_indices
    elif isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        same_bits(got.to_numpy(), want.to_numpy())
    else:
        assert got.dtype == want.dtype and got.shape == want.shape
        if got.dtype == object:  # Python objects: the same types and values
            assert [(type(v), repr(v)) for v in got.ravel()] == [(type(v), repr(v)) for v in want.ravel()]
        else:
            assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def check(model, X) -> bool:
    """The kernel's answer is scikit-learn's, with the same warnings (numpy's, from the same
    operations), or it refused; refused wherever scikit-learn raises. Returns whether the
    kernel answered."""
    want, warned = run(model.transform, X)
    compiled, _ = registry.kernel_for(model.transform)
    if compiled is None:
        return False
    got, kernel_warned = run(compiled, X)
    if isinstance(got, Unsupported):
        return False
    if isinstance(got, Exception):  # the call then runs as written (see sites)
        assert type(got) is type(want), f"the kernel raised {got!r}, scikit-learn gave {want!r}"
        return False
    assert not isinstance(want, Exception), f"scikit-learn raised {want!r}; the kernel answered"
    assert kernel_warned == warned
    same_bits(got, want)
    return True


def run(function, X):
    """(answer or exception, [(warning category, message)])."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = function(X)
        except Exception as error:
            result = error
    return result, [(w.category, str(w.message)) for w in caught if not issubclass(w.category, DeprecationWarning)]


# --- encoders -----------------------------------------------------------------------------


STRING_DTYPES = {"str": "str", "python": pd.StringDtype("python", na_value=np.nan)}  # pandas 3's string columns
try:
    import pyarrow  # noqa: F401

    STRING_DTYPES["arrow"] = pd.StringDtype("pyarrow", na_value=np.nan)
except ImportError:
    pass


@st.composite
def category_column(draw, rows: int, kind: str, known: bool):
    """One column of categories: strings (pandas' str dtypes, numpy objects), ints, or floats; with
    missing values, and unknown values when not ``known``."""
    letters = LETTERS[:4] if known else LETTERS
    if kind == "object":  # also numpy's own str and NaN objects, which the hash table and a dict see alike
        alike = [np.str_(letters[1]), np.float64(np.nan)]
        values = draw(st.lists(st.sampled_from(letters + [None, np.nan] + alike), min_size=rows, max_size=rows))
        return np.array(values, dtype=object)
    if kind in STRING_DTYPES:
        values = draw(st.lists(st.sampled_from(letters + [None, np.nan]), min_size=rows, max_size=rows))
        return pd.array(values, dtype=STRING_DTYPES[kind])
    if kind == "int":
        return np.array(draw(st.lists(st.integers(0 if known else -2, 3), min_size=rows, max_size=rows)), dtype=np.int64)
    floats = st.sampled_from([0.5, 1.0, 2.0, -0.0, np.nan] + ([] if known else [7.0, np.inf]))
    return np.array(draw(st.lists(floats, min_size=rows, max_size=rows)), dtype=np.float64)


@st.composite
def category_frames(draw):
    """(fit frame, transform frame): 1-3 columns of one kind each; the transform frame has 0-5
    rows, or a batch of 16 times as many (which the kernels look up differently), and any index."""
    kinds = draw(st.lists(st.sampled_from([*STRING_DTYPES, "object", "int", "float"]), min_size=1, max_size=3))
    names = [f"f{i}" for i in range(len(kinds))]
    fit_rows, rows = draw(st.integers(1, 12)), draw(st.integers(0, 5))
    fit = pd.DataFrame({n: draw(category_column(fit_rows, k, True)) for n, k in zip(names, kinds)})
    new = pd.DataFrame({n: draw(category_column(rows, k, False)) for n, k in zip(names, kinds)})
    if draw(st.integers(0, 3)) == 0:
        new = pd.concat([new] * 16, ignore_index=True)
    fit, new = (draw(categoricals(frame)) if draw(st.booleans()) else frame for frame in (fit, new))
    return fit, new.set_axis(draw(indexes(len(new))))


@st.composite
def categoricals(draw, frame: pd.DataFrame):
    """The frame's columns as pandas categoricals: their values in any order, with or without an
    unused category (missing values are codes -1, NaN once read)."""
    columns = {}
    for name, column in frame.items():
        values = column.dropna().unique().tolist()
        categories = draw(st.permutations(values)) + draw(st.sampled_from([[], ["unused"] if column.dtype == object else [42]]))
        if len(set(map(type, categories))) > 1 and column.dtype != object:
            categories = categories[:len(values)]
        columns[name] = pd.Categorical(column, categories=pd.Index(categories, dtype=column.dtype))
    return pd.DataFrame(columns, index=frame.index)


def indexes(rows: int):
    """A DataFrame's index: the default, or other labels (set_output keeps them)."""
    return st.sampled_from([pd.RangeIndex(rows), pd.RangeIndex(10, 10 + 2 * rows, 2), pd.Index([f"r{i}" for i in range(rows)])])


def as_input(frame: pd.DataFrame, array: bool):
    """The frame, or its values as a 2-D array of one dtype (object when its columns differ)."""
    if not array:
        return frame
    if all(isinstance(d, np.dtype) and d.kind in "iuf" for d in frame.dtypes) and len(set(frame.dtypes)) == 1:
        return frame.to_numpy()
    return frame.astype(object).to_numpy()


@st.composite
def one_hot_options(draw, fit: pd.DataFrame):
    options = {
        "handle_unknown": draw(st.sampled_from(["error", "ignore", "infrequent_if_exist", "warn"])),
        "sparse_output": draw(st.booleans()),
        "dtype": draw(st.sampled_from([np.float64, np.float32, np.int64, np.uint8])),
        "min_frequency": draw(st.sampled_from([None, None, 1, 2, 0.3])),
        "max_categories": draw(st.sampled_from([None, None, 1, 2, 3])),
    }
    drop = draw(st.sampled_from([None, None, "first", "if_binary", "array"]))
    if drop == "array":  # one fitted value per feature
        drop = [fit.iloc[draw(st.integers(0, len(fit) - 1)), i] for i in range(fit.shape[1])]
    options["drop"] = drop
    return options


def fit_or_reject(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return model.fit(X)
        except Exception:  # e.g. dropping an infrequent category (scikit-learn 1.9 then fails on .item())
            assume(False)


@SETTINGS
@given(frames=category_frames(), data=st.data())
def test_one_hot_encoder(frames, data):
    fit, new = frames
    options = data.draw(one_hot_options(fit))
    array = data.draw(st.booleans())
    encoder = fit_or_reject(OneHotEncoder(**options), as_input(fit, array))
    if not options["sparse_output"] and not array and data.draw(st.booleans()):
        encoder.set_output(transform="pandas")
    check(encoder, as_input(new, array))
    check(encoder, as_input(fit.iloc[:1], array))  # a single known row


@st.composite
def ordinal_options(draw):
    options = {
        "handle_unknown": draw(st.sampled_from(["error", "use_encoded_value"])),
        "dtype": draw(st.sampled_from([np.float64, np.float32, np.int64])),
        "encoded_missing_value": draw(st.sampled_from([np.nan, -2, 99])),
        "min_frequency": draw(st.sampled_from([None, None, 2, 0.3])),
        "max_categories": draw(st.sampled_from([None, None, 2, 3])),
    }
    if options["handle_unknown"] == "use_encoded_value":
        options["unknown_value"] = draw(st.sampled_from([-1, np.nan, 7]))
    return options


@SETTINGS
@given(frames=category_frames(), options=ordinal_options(), array=st.booleans(), pandas=st.booleans())
def test_ordinal_encoder(frames, options, array, pandas):
    fit, new = frames
    encoder = fit_or_reject(OrdinalEncoder(**options), as_input(fit, array))
    if pandas and not array:
        encoder.set_output(transform="pandas")
    check(encoder, as_input(new, array))
    check(encoder, as_input(fit.iloc[:1], array))


# --- numeric transformers -------------------------------------------------------------------


NUMBERS = st.floats(-1e6, 1e6, allow_subnormal=True) | st.sampled_from([0.0, -0.0, 1.0, 1e-300, np.nan])


@st.composite
def number_frames(draw, nan=True):
    """(fit frame, transform frame) of 1-4 float64, float32, int64 or bool columns; the transform frame has 0-5
    rows or 8 times as many (which the kernels check differently), any index, sometimes infinities."""
    width = draw(st.integers(1, 4))
    names = [f"x{i}" for i in range(width)]
    kinds = [draw(st.sampled_from(["int", "float64", "float64", "float32", "bool"])) for _ in names]
    extra = [np.inf, -np.inf] if draw(st.integers(0, 4)) == 0 else []

    def frame(rows, values):
        columns = {}
        for name, kind in zip(names, kinds):
            if kind == "int":
                columns[name] = np.array(draw(st.lists(st.integers(-50, 50), min_size=rows, max_size=rows)), dtype=np.int64)
            elif kind == "bool":  # (pd.get_dummies' columns)
                columns[name] = np.array(draw(st.lists(st.booleans(), min_size=rows, max_size=rows)), dtype=bool)
            else:
                column = draw(st.lists(values, min_size=rows, max_size=rows))
                columns[name] = np.array(column, dtype=kind)
        result = pd.DataFrame(columns)
        return result if nan else result.fillna(0.0)

    fit = frame(draw(st.integers(1, 10)), NUMBERS)
    new = frame(draw(st.integers(0, 5)), NUMBERS | st.sampled_from(extra) if extra else NUMBERS)
    if draw(st.integers(0, 3)) == 0:
        new = pd.concat([new] * 8, ignore_index=True)
    return fit, new.set_axis(draw(indexes(len(new))))


SCALERS = st.one_of(
    st.builds(StandardScaler, with_mean=st.booleans(), with_std=st.booleans()),
    st.builds(MinMaxScaler, feature_range=st.sampled_from([(0, 1), (-1.5, 2.0)]), clip=st.booleans()),
    st.builds(RobustScaler, with_centering=st.booleans(), with_scaling=st.booleans(),
              quantile_range=st.sampled_from([(25.0, 75.0), (10.0, 90.0)])),
)


@SETTINGS
@given(frames=number_frames(), scaler=SCALERS, array=st.booleans(), pandas=st.booleans())
def test_scalers(frames, scaler, array, pandas):
    fit, new = frames
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaler.fit(as_input(fit, array))
    if pandas:
        scaler.set_output(transform="pandas")
    check(scaler, as_input(new, array))
    check(scaler, as_input(fit.iloc[:1], array))


def test_bool_columns_among_numbers_are_scaled_as_floats():
    """``pd.get_dummies``' bool columns beside numbers: scikit-learn's checks make them float64, the kernel too."""
    frame = pd.DataFrame({"amount": [1.5, 20.0, np.nan, 3.0], "count": [1, 0, 4, 2], "Sex_male": [True, False, True, True]})
    for scaler in (StandardScaler(), MinMaxScaler(), RobustScaler()):
        scaler.fit(frame)
        assert check(scaler, frame) and check(scaler, frame.iloc[[2]])
    assert check(StandardScaler().fit(frame[["Sex_male"]]), frame[["Sex_male"]])  # (bools alone: float64 too)


@st.composite
def imputers(draw):
    strategy = draw(st.sampled_from(["mean", "median", "most_frequent", "constant"]))
    options = {
        "strategy": strategy,
        "missing_values": draw(st.sampled_from([np.nan, np.nan, 0, -1.0])),
        "add_indicator": draw(st.booleans()),
        "keep_empty_features": draw(st.booleans()),
    }
    if strategy == "constant":
        options["fill_value"] = draw(st.sampled_from([None, 5, 2.5]))
    return SimpleImputer(**options)


@SETTINGS
@given(frames=number_frames(), imputer=imputers(), array=st.booleans(), pandas=st.booleans())
def test_simple_imputer(frames, imputer, array, pandas):
    fit, new = frames
    fit_or_reject(imputer, as_input(fit, array))
    if pandas:
        imputer.set_output(transform="pandas")
    check(imputer, as_input(new, array))
    check(imputer, as_input(fit.iloc[:1], array))


@st.composite
def string_frames(draw):
    """(fit frame, transform frame) of 1-3 string columns (pandas' str dtypes, numpy objects) with
    missing values, as ``category_frames`` draws them."""
    kinds = draw(st.lists(st.sampled_from([*STRING_DTYPES, "object"]), min_size=1, max_size=3))
    names = [f"f{i}" for i in range(len(kinds))]
    fit_rows, rows = draw(st.integers(1, 12)), draw(st.integers(0, 5))
    fit = pd.DataFrame({n: draw(category_column(fit_rows, k, True)) for n, k in zip(names, kinds)})
    new = pd.DataFrame({n: draw(category_column(rows, k, False)) for n, k in zip(names, kinds)})
    return fit, new.set_axis(draw(indexes(len(new))))


@SETTINGS
@given(frames=string_frames(), data=st.data())
def test_simple_imputer_of_categories(frames, data):
    """Imputing strings (as before a OneHotEncoder): most frequent, or a constant."""
    fit, new = frames
    options = {
        "strategy": data.draw(st.sampled_from(["most_frequent", "constant"])),
        "add_indicator": data.draw(st.booleans()),
        "keep_empty_features": data.draw(st.booleans()),
    }
    if options["strategy"] == "constant":
        options["fill_value"] = data.draw(st.sampled_from([None, "missing"]))
    array = data.draw(st.booleans())
    imputer = fit_or_reject(SimpleImputer(**options), as_input(fit, array))
    if data.draw(st.booleans()):
        imputer.set_output(transform="pandas")
    check(imputer, as_input(new, array))
    check(imputer, as_input(fit.iloc[:1], array))


UFUNCS = [np.log1p, np.sqrt, np.abs, np.exp, np.negative, None]


@SETTINGS
@given(frames=number_frames(), func=st.sampled_from(UFUNCS), validate=st.booleans(), array=st.booleans(),
       names_out=st.sampled_from([None, "one-to-one"]), pandas=st.booleans(), renamed=st.booleans())
def test_function_transformer(frames, func, validate, array, names_out, pandas, renamed):
    """``feature_names_out="one-to-one"`` as scikit-learn's examples write it: a frame of the names
    seen in fit keeps them; one of other names scikit-learn renames, or it raises."""
    fit, new = frames
    transformer = FunctionTransformer(func, validate=validate, feature_names_out=names_out)
    if renamed and not array:
        new = new.rename(columns=lambda name: f"{name}_new")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_or_reject(transformer, as_input(fit, array))
        if pandas and names_out:
            transformer.set_output(transform="pandas")
        check(transformer, as_input(new, array))


@SETTINGS
@given(
    frames=number_frames(nan=False), degree=st.sampled_from([2, 2, 3, (1, 2)]), interaction_only=st.booleans(),
    include_bias=st.booleans(), order=st.sampled_from(["C", "F"]), array=st.booleans(), pandas=st.booleans(),
)
def test_polynomial_features(frames, degree, interaction_only, include_bias, order, array, pandas):
    fit, new = frames
    expander = PolynomialFeatures(degree, interaction_only=interaction_only, include_bias=include_bias, order=order)
    fit_or_reject(expander, as_input(fit, array))
    if pandas:
        expander.set_output(transform="pandas")
    check(expander, as_input(new, array))
    check(expander, as_input(fit.iloc[:1], array))


# --- the kernels answer the usual cases, and notice a refit ---------------------------------


AIRLINES = pd.DataFrame({
    "airline": pd.array(["United", "Delta", "Virgin", None, "Delta", "US Airways"], dtype="str"),
    "a": [1.0, 2.5, np.nan, 4.0, 0.5, 3.0],
    "b": [10, 20, 30, 40, 50, 60],
})


# The SimpleImputer kernel follows the transform of scikit-learn versions whose fitted imputer has
# _fill_dtype (1.6 on); with older ones it refuses, and scikit-learn's own transform runs (exact).
IMPUTER_BEFORE_FILL_DTYPE = pytest.mark.xfail(
    not hasattr(SimpleImputer().fit([[1.0]]), "_fill_dtype"),
    reason="this scikit-learn's SimpleImputer has no _fill_dtype: its transform runs as written", strict=True,
)


@pytest.mark.parametrize("model, columns", [
    (OneHotEncoder(), ["airline"]),
    (OneHotEncoder(sparse_output=False, handle_unknown="ignore", drop="first"), ["airline", "b"]),
    (OneHotEncoder(max_categories=3, handle_unknown="infrequent_if_exist"), ["airline"]),
    (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), ["airline"]),
    (StandardScaler(), ["a", "b"]),
    (MinMaxScaler(clip=True), ["a", "b"]),
    (RobustScaler(), ["a", "b"]),
    pytest.param(SimpleImputer(add_indicator=True), ["a", "b"], marks=IMPUTER_BEFORE_FILL_DTYPE),
    pytest.param(SimpleImputer(strategy="most_frequent"), ["a", "b"], marks=IMPUTER_BEFORE_FILL_DTYPE),
    pytest.param(SimpleImputer(strategy="constant", fill_value="missing"), ["airline"], marks=IMPUTER_BEFORE_FILL_DTYPE),
    (FunctionTransformer(np.log1p), ["a", "b"]),
    (FunctionTransformer(np.log1p, feature_names_out="one-to-one"), ["a", "b"]),
    (PolynomialFeatures(), ["b"]),
])
def test_usual_cases_are_compiled(model, columns):
    frame = AIRLINES[columns]
    model.fit(frame)
    for rows in (frame, frame.iloc[1:2]):
        assert check(model, rows)
    if type(model) is not FunctionTransformer and not getattr(model, "sparse_output", False):
        model.set_output(transform="pandas")
        assert check(model, frame.iloc[2:4])


def test_a_refit_builds_a_new_kernel():
    scaler = StandardScaler().fit(AIRLINES[["a", "b"]])
    first = kernel(scaler)
    assert first.still_valid()
    scaler.fit(AIRLINES[["a", "b"]] * 2)
    assert not first.still_valid()
    encoder = OneHotEncoder().fit(AIRLINES[["airline"]])
    compiled = kernel(encoder)
    encoder.handle_unknown = "ignore"
    assert not compiled.still_valid()


def test_functions_other_than_ufuncs_run_as_written():
    """They may have side effects, which must happen once (a kernel's failure reruns the call)."""
    for transformer in (FunctionTransformer(lambda X: X + 1), FunctionTransformer(np.round, validate=True),
                        FunctionTransformer(np.log1p, kw_args={"out": None})):
        assert registry.kernel_for(transformer.fit(AIRLINES[["b"]]).transform)[0] is None


# --- in a decorated function ----------------------------------------------------------------


def test_decorated_pipeline_is_exact_and_compiled():
    frame = pd.concat([AIRLINES] * 5, ignore_index=True)
    encoder = OneHotEncoder(handle_unknown="ignore", sparse_output=False).fit(frame[["airline"]])
    scaler = StandardScaler().fit(frame[["a", "b"]].fillna(0.0))
    labels = np.arange(len(frame)) % 3
    features = np.hstack([encoder.transform(frame[["airline"]]), scaler.transform(frame[["a", "b"]].fillna(0.0))])
    model = LogisticRegression(max_iter=500).fit(features, labels)

    @willump.optimize
    def predict(df):
        X = np.hstack([encoder.transform(df[["airline"]]), scaler.transform(df[["a", "b"]])])
        return model.predict_proba(X)

    clean = frame.fillna({"a": 0.0})
    unknown = clean.assign(airline=pd.array(["Qantas"] * len(clean), dtype="str"))
    for df in (clean, clean.iloc[:1], clean.iloc[3:4], unknown.iloc[:2], frame.iloc[2:3]):
        both = answers(predict, df)
        if both is not None:
            same_bits(*both)
    table = predict.explain_compilation()
    status = dict(zip(table["operator"], table["status"]))
    assert status["OneHotEncoder.transform"] == "compiled", status
    assert status["StandardScaler.transform"].startswith("compiled"), status


@pytest.mark.parametrize("interface", ["sparray", "spmatrix"])
def test_one_hot_follows_the_sparse_interface(interface):
    import sklearn

    if "sparse_interface" not in sklearn.get_config():
        pytest.skip("this scikit-learn has no sparse_interface option")
    encoder = OneHotEncoder(handle_unknown="ignore").fit(AIRLINES[["airline"]])
    with sklearn.config_context(sparse_interface=interface):
        assert check(encoder, AIRLINES[["airline"]].iloc[1:3])


def test_sparse_one_hot_stays_compiled_into_the_model():
    from sklearn.feature_extraction.text import TfidfVectorizer

    frame = pd.DataFrame({
        "airline": pd.array(["United", "Delta", "Virgin", None, "Delta", "US Airways"] * 4, dtype="str"),
        "text": [f"flight {w} was {v}" for w in ("late", "fine", "great") for v in ("bad", "ok", "good", "new", "old", "rude", "kind", "slow")],
    })
    encoder = OneHotEncoder(handle_unknown="ignore").fit(frame[["airline"]])
    vectorizer = TfidfVectorizer().fit(frame["text"])
    features = sp.hstack([encoder.transform(frame[["airline"]]), vectorizer.transform(frame["text"])], format="csr")
    model = LogisticRegression().fit(features, np.arange(len(frame)) % 2)

    @willump.optimize
    def predict(df):
        X = sp.hstack([encoder.transform(df[["airline"]]), vectorizer.transform(df["text"])], format="csr")
        return model.predict_proba(X)[:, 1]

    for df in (frame, frame.iloc[:1], frame.iloc[3:4], frame.assign(airline="Qantas").iloc[:2]):
        both = answers(predict, df)
        if both is not None:
            same_bits(*both)
    table = predict.explain_compilation().set_index("operator")
    assert table.loc["OneHotEncoder.transform", "status"] == "compiled"
    assert table.loc["OneHotEncoder.transform", "kept"]
