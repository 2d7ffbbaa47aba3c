"""What the analysis does not understand runs as plain Python: one warning, the same answer."""

import re
import warnings

import numpy as np
import pandas as pd

import willump
from willump import WillumpWarning


class SumModel:
    def predict(self, X):
        return np.asarray(X, dtype=float).sum(axis=1)


model = SumModel()
FRAME = pd.DataFrame({"x": [1.0, -2.0, 3.0], "y": [4.0, 9.0, 16.0]})
counter = 0


def optimize_warning_once(function):
    """Optimize ``function``; return it and the text of the single warning it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimized = willump.optimize(function)
    messages = [str(w.message) for w in caught if issubclass(w.category, WillumpWarning)]
    assert len(messages) == 1, messages
    assert issubclass(WillumpWarning, UserWarning)
    return optimized, messages[0]


def line_of(function, text):
    import inspect

    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def check(function, fragment, reason, whole_function):
    optimized, message = optimize_warning_once(function)
    assert f"line {line_of(function, fragment)}" in message
    assert reason in message
    assert ("runs unmodified" in message) == whole_function
    assert optimized.graph.optimizable is not whole_function
    np.testing.assert_array_equal(optimized(FRAME), function(FRAME))
    return optimized


def with_if(df):
    a = df[["x"]].to_numpy()
    if a.sum() > 0:
        a = a * 2
    b = df[["y"]].to_numpy()
    return model.predict(np.hstack([a, b]))


def test_if_is_an_opaque_node():
    f = check(with_if, "if a.sum()", "'if' statement", whole_function=False)
    assert [i.name for i in f.graph.ifvs] == ["a", "b"]
    negative = FRAME.assign(x=-FRAME["x"])
    np.testing.assert_array_equal(f(negative), with_if(negative))


def with_for(df):
    total = np.zeros(len(df))
    for column in ["x", "y"]:
        total = total + df[column].to_numpy()
    b = df[["y"]].to_numpy()
    return model.predict(np.column_stack([total, b]))


def test_for_is_an_opaque_node():
    check(with_for, "for column", "'for' statement", whole_function=False)


def with_while(df):
    a = df[["x"]].to_numpy()
    steps = 0
    while steps < 3:
        a = a + 1
        steps += 1
    b = df[["y"]].to_numpy()
    return model.predict(np.hstack([a, b]))


def test_while_is_an_opaque_node():
    check(with_while, "while steps", "'while' statement", whole_function=False)


def with_try(df):
    try:
        a = np.log(df[["x"]].to_numpy())
    except FloatingPointError:
        a = np.zeros((len(df), 1))
    b = df[["y"]].to_numpy()
    return model.predict(np.hstack([np.nan_to_num(a), b]))


def test_try_is_an_opaque_node():
    with np.errstate(invalid="ignore"):
        check(with_try, "try:", "'try' statement", whole_function=False)


def with_with(df):
    with np.errstate(divide="ignore"):
        a = 1 / df[["x"]].to_numpy()
    b = df[["y"]].to_numpy()
    return model.predict(np.hstack([a, b]))


def test_with_is_an_opaque_node():
    check(with_with, "with np.errstate", "'with' statement", whole_function=False)


def with_early_return(df):
    a = df[["x"]].to_numpy()
    if len(df) == 0:
        return np.array([])
    b = df[["y"]].to_numpy()
    return model.predict(np.hstack([a, b]))


def test_early_return_runs_the_function_unmodified():
    f = check(with_early_return, "return np.array([])", "early return", whole_function=True)
    np.testing.assert_array_equal(f(FRAME.iloc[:0]), with_early_return(FRAME.iloc[:0]))


def with_global(df):
    global counter
    counter += 1
    a = df[["x"]].to_numpy()
    return model.predict(np.hstack([a, a]))


def test_global_runs_the_function_unmodified():
    before = counter
    check(with_global, "global counter", "global counter", whole_function=True)
    assert counter == before + 2  # the original and the optimized function each counted once


def test_nonlocal_runs_the_function_unmodified():
    calls = 0

    def with_nonlocal(df):
        nonlocal calls
        calls += 1
        a = df[["x"]].to_numpy()
        return model.predict(np.hstack([a, a]))

    check(with_nonlocal, "nonlocal calls", "nonlocal calls", whole_function=True)
    assert calls == 2


def with_nested_definition(df):
    def double(values):
        return values * 2

    a = double(df[["x"]].to_numpy())
    return model.predict(np.hstack([a, a]))


def test_nested_definition_runs_the_function_unmodified():
    check(with_nested_definition, "def double", "nested definition of 'double'", whole_function=True)


def with_star_arguments(df, *extra, **options):
    a = df[["x"]].to_numpy()
    b = df[["y"]].to_numpy()
    return model.predict(np.hstack([a, b]))


def test_star_arguments_run_the_function_unmodified():
    f = check(with_star_arguments, "def with_star_arguments", "star-arguments", whole_function=True)
    np.testing.assert_array_equal(f(FRAME, 1, 2, k=3), with_star_arguments(FRAME, 1, 2, k=3))


def with_starred_blocks(df):
    a = df[["x"]].to_numpy()
    rest = [df[["y"]].to_numpy()]
    return model.predict(np.hstack([a, *rest]))


def test_starred_blocks_form_one_feature_vector():
    f = check(with_starred_blocks, "np.hstack([a, *rest])", "not written out as a list", whole_function=False)
    assert len(f.graph.ifvs) == 1


seen = []


def with_side_effect(df):
    a = df[["x"]].to_numpy()
    seen.append(len(df))
    b = df[["y"]].to_numpy() + len(seen)  # reads a builtin and the global the call changed
    return model.predict(np.hstack([a, b]))


def test_side_effect_call_is_an_opaque_node_that_still_runs():
    f, message = optimize_warning_once(with_side_effect)
    assert f"line {line_of(with_side_effect, 'seen.append')}" in message and "side effects" in message
    seen.clear()
    expected = with_side_effect(FRAME)
    seen.clear()
    np.testing.assert_array_equal(f(FRAME), expected)
    assert seen == [3]
    assert [i.name for i in f.graph.ifvs] == ["a", "b"]
    assert any("seen.append" in s.source for s in f.graph.preprocessing)


def test_dynamic_scope_runs_the_function_unmodified():
    def with_locals(df):
        a = df[["x"]].to_numpy()
        names = locals()
        return model.predict(np.hstack([names["a"], a]))

    check(with_locals, "names = locals()", "'locals'", whole_function=True)


def test_no_return_runs_the_function_unmodified():
    def no_model(df):
        total = df["x"] + df["y"]
        return total

    optimized, message = optimize_warning_once(no_model)
    assert "no call to .predict" in message
    pd.testing.assert_series_equal(optimized(FRAME), no_model(FRAME))


def test_a_model_given_its_input_by_keyword_is_named_in_the_warning():
    def by_keyword(df):
        return model.predict(X=np.hstack([df[["x"]].to_numpy(), df[["y"]].to_numpy()]))

    optimized, message = optimize_warning_once(by_keyword)
    assert re.search(r"line \d+: \.predict\(\.\.\.\) is given its input by keyword; write it by position", message), message
    np.testing.assert_array_equal(optimized(FRAME), by_keyword(FRAME))


def test_match_is_an_opaque_node():
    def with_match(df):
        a = df[["x"]].to_numpy()
        match len(df):
            case 0:
                a = a * 0
            case _:
                a = a + 1
        return model.predict(np.hstack([a, df[["y"]].to_numpy()]))

    check(with_match, "match len(df)", "'match' statement", whole_function=False)
