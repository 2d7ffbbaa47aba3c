"""Inputs and code shapes that once broke exactness (found by an adversarial review)."""

import functools
import types
import warnings

import numpy as np
import pandas as pd
import pytest

import willump


class RowSum:
    def predict(self, X):
        return np.asarray(X, dtype=float).sum(axis=1)


class Identity:
    def predict(self, X):
        return X


model = RowSum()
identity = Identity()
X3 = np.arange(3.0)


def same(function, *args):
    """The optimized function returns what the original returns (given fresh copies of the inputs),
    both as a plain call and computed block by block (IFV by IFV, as cascades compute it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        optimized = willump.optimize(function)
    fresh = lambda: [a.copy() if hasattr(a, "copy") else a for a in args]  # noqa: E731
    paths = [lambda: optimized(*fresh())]
    if optimized.executor is not None:
        paths.append(lambda: optimized.executor.run_blocks(optimized.executor.arguments(fresh(), {})))
    try:
        expected = function(*fresh())
    except Exception as error:
        for path in paths:
            with pytest.raises(type(error)):
                path()
        return optimized
    for path in paths:
        result = path()
        if isinstance(expected, pd.DataFrame):
            pd.testing.assert_frame_equal(result, expected)
        else:
            np.testing.assert_array_equal(result, expected)
    return optimized


def in_place_update_inside_an_assignment(x):
    base = x.copy()
    a = np.log1p(base, out=base)
    b = base * 1
    return model.predict(np.column_stack([b, a]))


def augmented_assignment_through_an_alias(x):
    a = x
    a += 1
    b = x * 10
    return model.predict(np.column_stack([b, a]))


def test_hidden_mutations_happen_in_source_order():
    same(in_place_update_inside_an_assignment, X3)
    same(augmented_assignment_through_an_alias, X3)


def random_draws(x, rng):
    a = rng.normal(size=(len(x), 1))
    b = rng.normal(size=(len(x), 1))
    return model.predict(np.hstack([b, a * 10]))


config = types.SimpleNamespace(scale=1.0)


def shared_object_changed_between_features(x):
    a = (x * config.scale)[:, None]
    config.scale = 5.0
    b = (x * config.scale)[:, None]
    return model.predict(np.hstack([a, b]))


def test_calls_with_state_keep_their_order():
    expected = random_draws(X3, np.random.default_rng(0))
    np.testing.assert_array_equal(willump.optimize(random_draws)(X3, np.random.default_rng(0)), expected)
    config.scale = 1.0
    expected = shared_object_changed_between_features(X3)
    config.scale = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        np.testing.assert_array_equal(willump.optimize(shared_object_changed_between_features)(X3), expected)


def exception_order(df):
    a = df["a"].to_numpy()[:, None]
    s = df["s"].astype(float).to_numpy()[:, None]
    b = s + 1
    c = s * 2
    return model.predict(np.hstack([a, b, c]))


def test_the_first_failing_statement_raises():
    same(exception_order, pd.DataFrame({"s": ["x"]}))


def late_bound_lambda(x):
    k = 1
    h = lambda v: v + k  # noqa: E731
    a = h(x)[:, None]
    k = 100
    b = h(x)[:, None]
    return model.predict(np.hstack([a, b]))


def lambda_reading_a_later_local(x):
    h = lambda v: v * k  # noqa: E731
    k = 3.0
    a = (h(x) + k)[:, None]
    b = h(x)[:, None]
    return model.predict(np.hstack([a, b]))


def lambda_passed_to_a_call(df):
    scale = 2.0
    a = df["x"].map(lambda v: v * scale).to_numpy()[:, None]
    b = df[["x"]].to_numpy()
    return model.predict(np.hstack([a, b]))


def test_lambdas_kept_for_later_run_the_function_unmodified():
    assert not same(late_bound_lambda, X3).graph.optimizable
    assert not same(lambda_reading_a_later_local, X3).graph.optimizable
    assert same(lambda_passed_to_a_call, pd.DataFrame({"x": X3})).graph.optimizable


def walrus_in_entries(x):
    X = np.hstack([(t := x[:, None]), t * 2])
    return model.predict(X)


def model_under_a_condition(x):
    return model.predict(x.reshape(len(x), -1)) if len(x) else np.zeros(0)


def concatenation_under_a_condition(df):
    X = np.hstack([df["a"].to_numpy()[:, None], df["b"].to_numpy()[:, None]]) if "a" in df else np.zeros((len(df), 2))
    return model.predict(X)


def test_entries_evaluated_only_when_the_original_evaluates_them():
    same(walrus_in_entries, X3)
    same(model_under_a_condition, np.zeros(0))
    same(concatenation_under_a_condition, pd.DataFrame({"b": [1.0]}))
    same(concatenation_under_a_condition, pd.DataFrame({"a": [2.0], "b": [1.0]}))


class Private:
    def __init__(self):
        self.__model = RowSum()

    def run(self, x):
        return self.__model.predict(np.hstack([x[:, None], x[:, None]]))

    optimized_run = willump.optimize(run)


def test_private_names_in_methods():
    np.testing.assert_array_equal(Private().optimized_run(X3), Private().run(X3))


def match_star(x):
    match [1, 2, 3]:
        case [n, *rest]:
            pass
    return model.predict(np.hstack([(x * len(rest))[:, None], x[:, None]]))


scale = 3.0


def bare_annotation(x):
    scale: float
    return model.predict(np.hstack([(x * scale)[:, None], x[:, None]]))


locals_shadow = """
locals = dict
def shadowed(x):
    a = x[:, None]
    b = (x * 2)[:, None]
    return model.predict(np.hstack([a, b]))
"""


def test_binding_forms():
    same(match_star, X3)
    same(bare_annotation, X3)


def test_a_global_named_locals(tmp_path):
    import importlib.util

    path = tmp_path / "shadows_locals.py"
    path.write_text("import numpy as np\n" + locals_shadow)
    spec = importlib.util.spec_from_file_location("shadows_locals", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.model = model
    same(module.shadowed, X3)


def doubled(function):
    @functools.wraps(function)
    def wrapper(x):
        return function(x) * 2

    return wrapper


@doubled
def wrapped(x):
    return model.predict(np.hstack([x[:, None], x[:, None]]))


def test_functools_wraps_wrapper_is_not_skipped():
    same(wrapped, X3)


class MultiLineString:
    def run(self, x):
        sep = """
"""
        return model.predict(np.hstack([x[:, None], x[:, None] * len(sep)]))


def test_multi_line_string_in_an_indented_method():
    f = willump.optimize(MultiLineString.run)
    np.testing.assert_array_equal(f(MultiLineString(), X3), MultiLineString().run(X3))
    assert len(f.graph.ifvs) == 2


TABLE = pd.DataFrame({"k": [1, 2], "t": [10.0, 20.0]})
KEYS = pd.DataFrame({"k": [1, 2]})


def frame_rebound_after_the_join(df):
    joined = df.merge(TABLE, on="k", how="left")
    df = df * 100
    return identity.predict(joined[["k", "t"]])


def table_rebound_after_the_join(df, tbl):
    df = df.merge(tbl, on="k", how="left")
    tbl = tbl.assign(t=-1.0)
    return identity.predict(df[["k", "t"]])


def frame_changed_after_the_join(df):
    joined = df.merge(TABLE, on="k", how="left")
    df["k"] = 0
    return identity.predict(joined[["k", "t"]])


def test_join_operands_changed_before_the_selection():
    same(frame_rebound_after_the_join, KEYS)
    same(table_rebound_after_the_join, KEYS, TABLE)
    same(frame_changed_after_the_join, KEYS)


def join_selecting_the_key(df):
    df = df.merge(TABLE, on="k", how="left")
    return identity.predict(df[["k", "t"]])


def join_with_any_selection(df, cols):
    df = df.merge(TABLE, on="k", how="left")
    return identity.predict(df[cols])


def join_on_none(df):
    df = df.merge(TABLE, on=None, how="left")
    return identity.predict(df[["k", "t"]])


@pytest.mark.filterwarnings("ignore::willump.WillumpWarning")
def test_join_inputs_the_split_does_not_handle_run_as_written():
    same(join_selecting_the_key, pd.DataFrame({"k": pd.Categorical([1, 2, 9])}))
    same(join_selecting_the_key, pd.DataFrame({"k": [True, False]}))
    for cols in [slice(None), lambda d: ["t"], ["t"], pd.Index(["k", "t"])]:
        same(join_with_any_selection, KEYS, cols)
    same(join_on_none, KEYS)


def preprocessing_before_an_unsplittable_join(df):
    df["v"] = df["v"] + 1
    df = df.merge(pd.DataFrame({"k": [1, 1], "t": [10.0, 20.0]}), on="k", how="left")
    return identity.predict(df[["v", "t"]])


def test_a_join_fallback_does_not_repeat_preprocessing():
    frame = pd.DataFrame({"k": [1], "v": [0.0]})
    expected = preprocessing_before_an_unsplittable_join(frame.copy())
    executor = willump.optimize(preprocessing_before_an_unsplittable_join).executor
    with pytest.warns(willump.WillumpWarning, match="several rows"):
        result = executor.run_blocks(executor.arguments((frame.copy(),), {}))
    pd.testing.assert_frame_equal(result, expected)


def day_and_month(df):
    when = pd.to_datetime(df["when"])  # (compiled: its kernel leaves day-first dates to pandas, which warns)
    return model.predict(np.column_stack([when.dt.day.to_numpy() * 1.0, when.dt.month.to_numpy() * 1.0]))


def test_a_call_running_as_written_warns_at_the_users_line():
    """pandas names the first frame outside it: the call as written runs in one at the user's line."""
    frame = pd.DataFrame({"when": ["13/01/2020", "14/02/2020"]})
    optimized = willump.optimize(day_and_month)
    line = day_and_month.__code__.co_firstlineno + 1
    for function in (day_and_month, optimized, optimized):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.testing.assert_array_equal(function(frame), [14.0, 16.0])
        [warning] = [w for w in caught if "dayfirst" in str(w.message)]
        assert (warning.filename, warning.lineno) == (__file__, line)
        with warnings.catch_warnings(record=True) as caught:  # (in the user's module: a filter by module applies)
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", module=__name__)
            function(frame)
        assert not [w for w in caught if "dayfirst" in str(w.message)]
    assert optimized.explain_compilation().loc[0, "operator"] == "pandas.to_datetime"


def test_warnings_point_at_the_decorated_function():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @willump.optimize(strict=False)
        def noisy(x):
            print(len(x))
            return model.predict(np.hstack([x[:, None], x[:, None]]))

    [warning] = [w for w in caught if issubclass(w.category, willump.WillumpWarning)]
    assert warning.filename == __file__


def chained_fill(df):
    df[["x"]].fillna(0, inplace=True)  # (chained: changes a copy; pandas warns)
    df["x"].replace(np.nan, 0.0, inplace=True)
    return model.predict(df[["x", "x"]])


def test_chained_inplace_calls_warn_as_pandas_warns():
    """pandas counts a chained call's receiver's references to warn that inplace changes a copy: such a
    call is not a call site (whose arguments hold more references), it runs as written."""
    frame = pd.DataFrame({"x": [1.0, np.nan]})
    optimized = willump.optimize(chained_fill)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = chained_fill(frame.copy())
    for function in (chained_fill, optimized):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            np.testing.assert_array_equal(function(frame.copy()), expected)
        assert [w.category.__name__ for w in caught].count("ChainedAssignmentError") == 2
