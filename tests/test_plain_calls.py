"""Calls of pandas, numpy or scikit-learn operators that no kernel answers run as written, and are said:
one WillumpWarning at the first call that meets them, naming each line and operator, and a row each in
explain_compilation(). Python's own calls (builtins, str methods, the user's objects) are not listed."""

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.impute import KNNImputer

import willump
from willump import WillumpWarning


class WeightedSum:
    def predict(self, X):
        return np.asarray(X, dtype=float) @ np.arange(1, np.asarray(X).shape[1] + 1)


model = WeightedSum()
IMPUTER = KNNImputer(n_neighbors=1).fit(np.array([[1.0, 2.0], [2.0, 3.0], [3.0, 1.0]]))
PEOPLE = pd.DataFrame({
    "age": [4.0, 15.0, 33.0, 71.0, 52.0, 8.0],
    "fare": [7.25, 71.3, 8.05, 53.1, 13.0, 30.0],
    "sex": ["m", "f", "f", "m", "m", "f"],
})


def titanic_features(df):
    codes = pd.factorize(df["sex"], sort=True)[0]
    band = pd.qcut(df["age"], q=4, labels=False, duplicates="drop")
    stage = np.digitize(df["age"], [12.0, 60.0])
    ratio = df.apply(lambda row: row["fare"] / (row["age"] + 1), axis=1)
    return model.predict(np.column_stack([codes, band, stage, ratio]))


def line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def calls_warning(call) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if issubclass(w.category, WillumpWarning)]


def test_library_calls_without_a_kernel_are_named_once_with_their_lines():
    optimized, decoration = calls_warning(lambda: willump.optimize(titanic_features))
    assert decoration == []  # (what the callees are is known when the call runs)
    result, first = calls_warning(lambda: optimized(PEOPLE))
    np.testing.assert_array_equal(result, titanic_features(PEOPLE))
    assert len(first) == 1, first
    for fragment, operator in [("pd.factorize", "pandas.factorize"), ("pd.qcut", "pandas.qcut"),
                               ("np.digitize", "numpy.digitize"), ("df.apply", "DataFrame.apply")]:
        assert f"line {line_of(titanic_features, fragment)}: {operator}" in first[0]
    _, second = calls_warning(lambda: optimized(PEOPLE.iloc[:2]))
    assert second == []


def test_explain_compilation_lists_them_with_their_counts():
    optimized = willump.optimize(titanic_features)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WillumpWarning)
        for rows in (PEOPLE, PEOPLE.iloc[:1], PEOPLE.iloc[3:]):
            np.testing.assert_array_equal(optimized(rows), titanic_features(rows))
    table = optimized.explain_compilation().set_index("operator")
    for operator, fragment in [("pandas.factorize", "pd.factorize"), ("numpy.digitize", "np.digitize"),
                               ("DataFrame.apply", "df.apply")]:
        row = table.loc[operator]
        assert row["line"] == line_of(titanic_features, fragment)
        assert row["status"] == f"plain Python: no kernel stands for {operator} as called here"
        assert (row["calls"], row["compiled_calls"]) == (3, 0)


def own_calls(df):
    names = " ".join(["fare", "age"]).split()
    scale = float(len(names))
    fares = df["fare"].tolist()
    rounded = [round(v, 1) for v in fares]  # (in a comprehension: runs many times per call)
    return model.predict(np.column_stack([df[names].to_numpy() / scale, rounded]))


def test_python_own_calls_are_not_listed():
    optimized = willump.optimize(own_calls)
    result, messages = calls_warning(lambda: optimized(PEOPLE))
    np.testing.assert_array_equal(result, own_calls(PEOPLE))
    assert len(messages) == 1, messages
    assert f"({__file__}), line {line_of(own_calls, '.tolist()')}: Series.tolist)" in messages[0]  # (pandas', alone)
    operators = set(optimized.explain_compilation()["operator"])
    assert not {"str.join", "str.split", "join", "split", "float", "len", "round"} & operators


calls_made = []


def record(value):
    calls_made.append(value)
    return value


def missing_method(df):
    values = df.no_such_method(record("argument"))
    return model.predict(values)


def bad_bins(df):
    band = pd.qcut(df["age"], q=[0.9, 0.1])
    return model.predict(np.column_stack([band.cat.codes]))


@pytest.mark.parametrize("function, fragment", [(missing_method, "df.no_such_method"), (bad_bins, "pd.qcut")])
def test_a_plain_call_raises_what_the_original_raises_where_it_raises(function, fragment):
    calls_made.clear()
    with pytest.raises(Exception) as original:
        function(PEOPLE)
    evaluated = list(calls_made)
    calls_made.clear()
    optimized = willump.optimize(function)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WillumpWarning)
        with pytest.raises(type(original.value)) as raised:
            optimized(PEOPLE)
    assert str(raised.value) == str(original.value)
    assert calls_made == evaluated  # the callee is evaluated before the arguments, as written
    in_this_file = [entry for entry in raised.traceback if str(entry.path) == __file__]
    assert in_this_file[-1].lineno + 1 == line_of(function, fragment)


def scored_one_at_a_time(df):
    X = np.column_stack([pd.factorize(df["sex"], sort=True)[0]])
    scores = []
    for row in X:  # a model in a loop: no graph, the calls as written
        scores.append(model.predict(row[None, :])[0])
    return np.array(scores)


def test_a_function_without_a_graph_names_them_too():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimized = willump.optimize(scored_one_at_a_time)
        result = optimized(PEOPLE)
    np.testing.assert_array_equal(result, scored_one_at_a_time(PEOPLE))
    messages = [str(w.message) for w in caught if issubclass(w.category, WillumpWarning)]
    assert any(f"line {line_of(scored_one_at_a_time, 'pd.factorize')}: pandas.factorize" in m for m in messages)


def raises_late(df):
    bands = pd.qcut(df["age"], q=2, labels=False, duplicates="drop")
    fares = df["no_such_column"]
    return model.predict(np.column_stack([bands, fares]))


def test_an_exception_of_the_call_is_raised_even_where_warnings_are_errors():
    optimized = willump.optimize(raises_late)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WillumpWarning)
        with pytest.raises(KeyError, match="no_such_column"):
            optimized(PEOPLE)
    _, messages = calls_warning(lambda: optimized(PEOPLE.assign(no_such_column=1.0)))  # (named once one returns)
    assert any("pandas.qcut" in m for m in messages), messages


def test_a_call_that_raises_names_them_itself():
    """Said by the call that met them, which raised, not by the next call of any function."""
    optimized = willump.optimize(raises_late)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyError, match="no_such_column"):
            optimized(PEOPLE)
    said = [w for w in caught if issubclass(w.category, WillumpWarning)]
    assert len(said) == 1 and "pandas.qcut" in str(said[0].message) and said[0].filename == __file__, said
    _, messages = calls_warning(lambda: optimized(PEOPLE.assign(no_such_column=1.0)))
    assert not any("pandas.qcut" in m for m in messages), messages


def imputed(X):
    filled = IMPUTER.transform(X)  # (a scikit-learn transformer no kernel stands for)
    return model.predict(filled)


def test_a_library_estimators_method_no_kernel_stands_for_is_named_too():
    optimized = willump.optimize(imputed)
    X = np.array([[1.0, np.nan], [2.0, 3.0], [np.nan, 1.0]])
    result, messages = calls_warning(lambda: optimized(X))
    np.testing.assert_array_equal(result, imputed(X))
    assert len(messages) == 1 and f"line {line_of(imputed, 'IMPUTER.transform')}: KNNImputer.transform" in messages[0]
    assert calls_warning(lambda: optimized(X))[1] == []  # (once)
    row = optimized.explain_compilation().set_index("call").loc["IMPUTER.transform(X)"]
    assert row["status"] == "plain Python: KNNImputer.transform is not an operator willump compiles"


def median_filled(df):
    age = df["age"].fillna(df["age"].median())  # (a call's result as the fill value: no expression)
    return model.predict(np.column_stack([age]))


def test_a_method_compiled_only_in_expressions_says_how_to_write_it():
    optimized = willump.optimize(median_filled)
    result, messages = calls_warning(lambda: optimized(PEOPLE))
    np.testing.assert_array_equal(result, median_filled(PEOPLE))
    assert any(f"line {line_of(median_filled, 'fillna')}: Series.fillna" in m for m in messages), messages
    status = optimized.explain_compilation().set_index("operator").loc["Series.fillna", "status"]
    assert "compiled in element-wise expressions" in status and "to a name first" in status, status


def filled_in_a_lambda(df):
    ages = df.assign(age=lambda d: d["age"].fillna(d["age"].mean()))["age"]  # (the lambda runs as written)
    return model.predict(np.column_stack([ages]))


def test_calls_in_a_lambda_are_not_named():
    optimized = willump.optimize(filled_in_a_lambda)
    result, messages = calls_warning(lambda: optimized(PEOPLE))
    np.testing.assert_array_equal(result, filled_in_a_lambda(PEOPLE))
    assert not any("Series.fillna" in m for m in messages), messages


def inner_features(df):
    return model.predict(np.column_stack([np.digitize(df["age"], [12.0])]))


inner = willump.optimize(inner_features)


def outer_features(df):
    bands = pd.qcut(df["age"], q=2, labels=False, duplicates="drop")
    return model.predict(np.column_stack([bands, inner(df)]))


def test_nested_functions_are_named_each_with_its_own_lines():
    optimized = willump.optimize(outer_features)
    _, messages = calls_warning(lambda: optimized(PEOPLE))
    text = " ".join(messages)
    assert f"in outer_features ({__file__}), line {line_of(outer_features, 'pd.qcut')}: pandas.qcut" in text, text
    assert f"in inner_features ({__file__}), line {line_of(inner_features, 'np.digitize')}: numpy.digitize" in text, text


class Proxy:
    """A callable answering every attribute by a lookup that raises KeyError (as RPC clients and lazy
    proxies do): willump must not read its attributes."""

    def __init__(self):
        self.asked = []

    def __getattr__(self, name):
        if name.startswith("__") and name in ("__qualname__", "__wrapped__", "__code__", "__func__", "__signature__"):
            raise AttributeError(name)
        self.asked.append(name)
        raise KeyError(name)

    def __call__(self, frame):
        return frame


proxy = Proxy()


def through_a_proxy(df):
    return model.predict(proxy(df[["age", "fare"]]))


def missing_pandas_method(df):
    return model.predict(df.no_such_method())


def test_callees_are_known_by_their_types_alone():
    optimized = willump.optimize(through_a_proxy)
    proxy.asked.clear()
    for _ in range(3):
        np.testing.assert_array_equal(optimized(PEOPLE), through_a_proxy(PEOPLE))
    assert proxy.asked == []
    assert "Proxy" not in " ".join(optimized.explain_compilation()["operator"].astype(str))
    missing = willump.optimize(missing_pandas_method)
    with pytest.raises(AttributeError):
        missing(PEOPLE)
    assert "DataFrame.no_such_method" not in missing.explain_compilation()["operator"].tolist()
