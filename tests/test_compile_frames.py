"""pandas calls that build DataFrames (``willump.compile.frames``): ``frame[names]``, ``frame.fillna``,
``pd.concat(axis=1)``, ``pd.DataFrame({...})`` and ``frame.assign`` give pandas' DataFrame: values to
the bit, dtypes, column names, index, and the same blocks (a model given the frame turns it into an
array whose memory order follows them); or they refuse, and the call runs as written.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import willump
from sklearn.ensemble import RandomForestRegressor
from answers import answers, identity
from test_compile_kernels import hypothesis_settings
from willump.compile import frames
from willump.compile.forms import Unsupported

pytestmark = pytest.mark.filterwarnings("ignore::willump.WillumpWarning")

DTYPES = ["float64", "float64", "int64", "bool", "int32", "float32", "uint8"]
NAMES = ["a", "b", "c", "d", "e", "x y", ""]


def layout(frame: pd.DataFrame) -> list:
    """The blocks: dtype, columns, shape and memory order."""
    flags = [getattr(b.values, "flags", None) for b in frame._mgr.blocks]
    return [
        (b.dtype, b.mgr_locs.as_array.tolist(), b.values.shape, f and f.c_contiguous, f and f.f_contiguous)
        for b, f in zip(frame._mgr.blocks, flags)
    ]


def assert_same_frame(result, expected) -> None:
    assert type(result) is type(expected) is pd.DataFrame
    pd.testing.assert_frame_equal(result, expected, check_exact=True, check_index_type=True, check_column_type=True,
                                  check_flags=True)
    assert type(result.index) is type(expected.index) and result.index.name == expected.index.name
    assert type(result.columns) is type(expected.columns) and result.columns.dtype == expected.columns.dtype
    assert layout(result) == layout(expected)
    as_array, expected_array = np.asarray(result), np.asarray(expected)
    assert as_array.flags.c_contiguous == expected_array.flags.c_contiguous
    assert as_array.flags.f_contiguous == expected_array.flags.f_contiguous


def pandas_or_refusal(kernel, pandas_call, inputs=()) -> bool:
    """The kernel's frame is pandas' (True), or it refuses (False); where pandas raises it refuses.
    The index is the same object as an input's (or a view of it) where pandas' is."""
    try:
        expected = pandas_call()
    except Exception as error:
        note(f"pandas raises {error!r}")
        with pytest.raises((Unsupported, type(error))):
            kernel()
        return False
    try:
        result = kernel()
    except Unsupported as why:
        note(f"refused: {why}")
        return False
    assert_same_frame(result, expected)
    for given in inputs:
        assert (result.index is given.index) == (expected.index is given.index)
        assert result.index.is_(given.index) == expected.index.is_(given.index)
    return True


@st.composite
def columns(draw, rows: int, count: int = None) -> list:
    """(name, array) pairs: floats with NaNs, ints, bools, and dtypes pandas treats otherwise."""
    count = draw(st.integers(1, 5)) if count is None else count
    result = []
    for _ in range(count):
        dtype = draw(st.sampled_from(DTYPES))
        values = draw(st.lists(st.floats(-1e6, 1e6, width=32) | st.just(np.nan), min_size=rows, max_size=rows))
        array = np.array(values, dtype=np.float64)
        array = array.astype(dtype) if dtype.startswith("float") else np.nan_to_num(array).astype(dtype)
        result.append((draw(st.sampled_from(NAMES)), array))
    return result


@st.composite
def indexes(draw, rows: int) -> pd.Index:
    kind = draw(st.sampled_from(["range", "range", "shuffled", "str", "repeated", "named"]))
    if kind == "range":
        return pd.RangeIndex(rows)
    if kind == "shuffled":
        return pd.Index(draw(st.permutations(list(range(10, 10 + rows)))))
    if kind == "str":
        return pd.Index([f"r{i}" for i in range(rows)])
    if kind == "repeated":
        return pd.Index([0] * rows)
    return pd.RangeIndex(rows, name="row")


@st.composite
def frames_of(draw, rows: int = None, index=None):
    """A DataFrame of several dtypes (its columns built one by one or at once: different blocks)."""
    rows = draw(st.sampled_from([1, 1, 2, 3, 7, 40])) if rows is None else rows
    index = draw(indexes(rows)) if index is None else index
    pairs = draw(columns(rows))
    if draw(st.booleans()):
        frame = pd.DataFrame({name: array for name, array in pairs}, index=index)
    else:
        frame = pd.DataFrame(index=index)
        for name, array in pairs:
            frame[name] = array
    return frame


@st.composite
def frame_and_rows(draw):
    frame = draw(frames_of())
    return frame, len(frame), frame.index


@hypothesis_settings(200)
@given(frames_of(), st.data())
def test_selecting_columns_gives_pandas_frame(frame, data):
    key = data.draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4))
    pandas_or_refusal(lambda: frames.select_columns(frame, key), lambda: frame[key], [frame])


@hypothesis_settings(200)
@given(frames_of(), st.data())
def test_reindexing_columns_gives_pandas_frame(frame, data):
    if data.draw(st.booleans()):
        frame["t"] = np.array(["a"] * len(frame), dtype=object)
    if data.draw(st.integers(0, 4)) == 0:
        frame.columns.name = data.draw(st.sampled_from(["features", 0, None]))
    names = data.draw(st.lists(st.sampled_from(list(frame.columns) + ["new", "t", "q r"]), max_size=6))
    fill = data.draw(st.sampled_from([0, 0, 1.5, np.nan, True, None, -7, "x"]))
    options = {"columns": names} if fill is None and data.draw(st.booleans()) else {"columns": names, "fill_value": fill}
    compiled = pandas_or_refusal(lambda: frames.reindex_columns(frame, names, options.get("fill_value")),
                                 lambda: frame.reindex(**options), [frame])
    assert compiled or not frame.columns.is_unique or fill == "x"


@hypothesis_settings(200)
@given(frames_of(), st.data())
def test_reindexing_columns_to_an_index_gives_pandas_frame(frame, data):
    """``X.reindex(columns=train.columns, ...)``: pandas keeps the given Index itself (and gives a shallow
    copy when it is identical to the frame's)."""
    names = data.draw(st.sampled_from([list(frame.columns), None]))
    if names is None:
        names = data.draw(st.lists(st.sampled_from(list(frame.columns) + ["new", "q r"]), max_size=6, unique=True))
    columns = pd.Index(names, dtype=data.draw(st.sampled_from([object, "str", None])),
                       name=data.draw(st.sampled_from([None, None, "features"])))
    fill = data.draw(st.sampled_from([0, 1.5, None]))
    result = [None]

    def kernel():
        result[0] = frames.reindex_columns(frame, columns, fill)
        return result[0]

    expected = frame.reindex(columns=columns, fill_value=fill)
    compiled = pandas_or_refusal(kernel, lambda: frame.reindex(columns=columns, fill_value=fill), [frame])
    assert compiled or not frame.columns.is_unique
    if compiled:
        assert (result[0].columns is columns) == (expected.columns is columns)
        assert (result[0].columns is frame.columns) == (expected.columns is frame.columns)


TEXT_KINDS = {  # columns of other blocks than numbers: pandas' own take of each
    "object": lambda words: np.array(words, dtype=object), "str": lambda words: pd.array(words, dtype="str"),
    "string": lambda words: pd.array(words, dtype="string"), "category": lambda words: pd.Categorical(words),
    "Int64": lambda words: pd.array([len(w) for w in words], dtype="Int64"),
}


@hypothesis_settings(200)
@given(frames_of(), st.data())
def test_selecting_text_and_extension_columns_gives_pandas_frame(frame, data):
    words = data.draw(st.lists(st.sampled_from(["male", "S", "", "é"]), min_size=len(frame), max_size=len(frame)))
    for name in data.draw(st.lists(st.sampled_from(sorted(TEXT_KINDS)), min_size=1, max_size=3, unique=True)):
        frame[f"t_{name}"] = TEXT_KINDS[name](words)
    key = data.draw(st.lists(st.sampled_from(list(frame.columns)), min_size=1, max_size=5))
    compiled = pandas_or_refusal(lambda: frames.select_columns(frame, key), lambda: frame[key], [frame])
    assert compiled or not frame.columns.is_unique  # (every selection of unique names the frame has)


DROPS = {  # how people spell dropping columns: (positional, keyword) arguments of drop for the names
    "columns": lambda names: ((), {"columns": names}),
    "axis": lambda names: ((names,), {"axis": 1}),
    "labels": lambda names: ((), {"labels": names, "axis": "columns"}),
    "ignored": lambda names: ((), {"columns": names, "errors": "ignore"}),
    "rows": lambda names: ((names,), {}),
}


@hypothesis_settings(200)
@given(frames_of(), st.data())
def test_dropping_columns_gives_pandas_frame(frame, data):
    if data.draw(st.booleans()):  # (text and extension columns among them: pandas' own reindexing of the blocks)
        words = data.draw(st.lists(st.sampled_from(["male", "S", ""]), min_size=len(frame), max_size=len(frame)))
        for name in data.draw(st.lists(st.sampled_from(sorted(TEXT_KINDS)), min_size=1, max_size=3, unique=True)):
            frame[f"t_{name}"] = TEXT_KINDS[name](words)
    names = data.draw(st.lists(st.sampled_from(NAMES + ["absent", "t_str", "t_category"]), min_size=1, max_size=3))
    names = data.draw(st.sampled_from([names, tuple(names), names[0]]))
    args, kwargs = DROPS[data.draw(st.sampled_from(list(DROPS)))](names)
    note(f"drop(*{args!r}, **{kwargs!r})")
    pandas_or_refusal(lambda: frames.CompiledDrop()(frame, *args, **kwargs), lambda: frame.drop(*args, **kwargs), [frame])
    try:
        kept = frames.CompiledDrop().defer(frame, *args, **kwargs)
    except Unsupported:
        return
    if not isinstance(kept, pd.DataFrame):  # (kept as columns; else the frame checked above)
        assert_columns_of(kept, frame.drop(*args, **kwargs))


@hypothesis_settings(200)
@given(frames_of(), st.data())
def test_copying_a_frame_gives_pandas_frame(frame, data):
    """A deep copy: pandas' blocks (consolidated, in its order), each in new memory, whatever the input's blocks."""
    if data.draw(st.booleans()):
        words = data.draw(st.lists(st.sampled_from(["male", "S", ""]), min_size=len(frame), max_size=len(frame)))
        for name in data.draw(st.lists(st.sampled_from(sorted(TEXT_KINDS)), min_size=1, max_size=3, unique=True)):
            frame[f"t_{name}"] = TEXT_KINDS[name](words)
    if data.draw(st.booleans()):
        frame = frame.iloc[::-1]
    assert pandas_or_refusal(lambda: frames.CompiledFrameCopy()(frame), frame.copy, [frame]) or not frame.columns.is_unique
    if not frame.columns.is_unique:
        return
    copied = frames.CompiledFrameCopy()(frame)
    for position in range(frame.shape[1]):
        mine, theirs = copied._mgr.iget_values(position), frame._mgr.iget_values(position)
        if isinstance(theirs, np.ndarray):
            assert not np.shares_memory(mine, theirs)


FILLS = st.sampled_from([0, 0.5, -3, 2**60, np.nan, np.float64(1.5), np.int64(2), True, "text", None])


@hypothesis_settings(200)
@given(frames_of(), st.data())
def test_filling_a_frame_gives_pandas_frame(frame, data):
    if data.draw(st.booleans()):  # (an object column: numbers replace put in text, missing values)
        frame["t"] = np.array(data.draw(st.lists(st.sampled_from([0, 1, 2.5, None, np.nan, "S"]), min_size=len(frame),
                                                 max_size=len(frame))), dtype=object)
    spelling = data.draw(st.sampled_from(["number", "series", "dict"]))
    if spelling == "number":
        value = data.draw(FILLS)
    else:
        names = data.draw(st.lists(st.sampled_from(NAMES + ["absent", "t"]), max_size=5))
        numbers = [data.draw(FILLS.filter(lambda v: v is not None)) for _ in names]
        value = dict(zip(names, numbers)) if spelling == "dict" else pd.Series(numbers, index=names)
    note(f"fillna({value!r})")
    if pandas_or_refusal(lambda: frames.fillna(frame, value), lambda: frame.fillna(value), [frame]) and "t" in frame:
        assert list(map(type, frames.fillna(frame, value)["t"])) == list(map(type, frame.fillna(value)["t"]))
    original = frame.copy(deep=True)
    try:
        result = frames.fillna(frame, value)
    except (Unsupported, Exception):
        return
    if result.shape[1] and len(result):  # the result is a new frame: changing it leaves the input as it was
        first = result.iloc[0, 0]
        result.iloc[0, 0] = (not first) if result.dtypes.iloc[0] == bool else 7
        pd.testing.assert_frame_equal(frame, original)


@st.composite
def side_by_side_objects(draw) -> list:
    """Frames and Series to put side by side, mostly on one index."""
    rows = draw(st.sampled_from([1, 2, 5, 40]))
    index = draw(indexes(rows))
    objs = []
    for _ in range(draw(st.integers(1, 4))):
        own = index if draw(st.integers(0, 6)) else draw(indexes(rows))
        if draw(st.booleans()):
            frame = draw(frames_of(rows, own))
            objs.append(frame.add_suffix(str(len(objs))) if draw(st.integers(0, 3)) else frame)
        else:
            name, array = draw(columns(rows, 1))[0]
            objs.append(pd.Series(array, index=own, name=draw(st.sampled_from([name, None]))))
    return objs


def assert_columns_of(kept, expected: pd.DataFrame) -> None:
    """Columns kept for kernels are the frame's: names, arrays (values, dtype) and index."""
    assert kept.labels == expected.columns.tolist()
    for position, array in enumerate(kept.arrays()):
        column = expected._get_column_array(position)
        assert array.dtype == column.dtype and array.tobytes() == column.tobytes()
    index = kept.index
    assert type(index) is type(expected.index) and index.dtype == expected.index.dtype
    assert index.name == expected.index.name and index.equals(expected.index)


@hypothesis_settings(200)
@given(side_by_side_objects())
def test_frames_kept_as_columns_are_the_frames_pandas_concatenates(objs):
    try:
        kept = frames.kept_columns(objs, build=None)
    except Unsupported as why:
        note(f"refused: {why}")
        return
    assert_columns_of(kept, pd.concat(objs, axis=1))


@hypothesis_settings(200)
@given(st.data())
def test_concatenating_gives_pandas_frame(data):
    objs = data.draw(side_by_side_objects())
    keys = data.draw(st.sampled_from([None, None, [f"k{i}" for i in range(len(objs))], ["k"] * len(objs)]))
    options = {"axis": 1} if keys is None else {"axis": 1, "keys": keys}
    pandas_or_refusal(lambda: frames.concat_columns(objs, keys), lambda: pd.concat(objs, **options), objs)


@hypothesis_settings(200)
@given(st.data())
def test_a_frame_of_series_gives_pandas_frame(data):
    rows = data.draw(st.sampled_from([1, 2, 5, 40]))
    index = data.draw(indexes(rows))
    pairs = data.draw(columns(rows))
    same_index = data.draw(st.integers(0, 5))
    series = {
        name: pd.Series(array, index=index if same_index else data.draw(indexes(rows)), name=data.draw(st.sampled_from([None, "s"])))
        for name, array in pairs
    }
    pandas_or_refusal(lambda: frames.frame_from_dict(series), lambda: pd.DataFrame(series), list(series.values()))


@hypothesis_settings(200)
@given(frames_of(), st.data())
def test_assigning_gives_pandas_frame(frame, data):
    new = {}
    for name, array in data.draw(columns(len(frame))):
        index = frame.index if data.draw(st.integers(0, 5)) else pd.RangeIndex(len(frame))
        new[name + "_new" if data.draw(st.integers(0, 4)) else name] = pd.Series(array, index=index)
    pandas_or_refusal(lambda: frames.assign(frame, new), lambda: frame.assign(**new), [frame, *new.values()])
    try:
        kept = frames.CompiledAssign().defer(frame, **new)
    except Unsupported:
        return
    if not isinstance(kept, pd.DataFrame):  # (kept as columns; else the frame checked above)
        assert_columns_of(kept, frame.assign(**new))


@st.composite
def frame_makers(draw):
    """A function making the same new frame at each call (a copy would consolidate its blocks), its
    names ours (a selection built here) or pandas'."""
    rows = draw(st.sampled_from([1, 1, 2, 3, 7, 40]))
    index, pairs, at_once = draw(indexes(rows)), draw(columns(rows)), draw(st.booleans())
    selected = draw(st.booleans())

    def make():
        if at_once:
            frame = pd.DataFrame({name: array.copy() for name, array in pairs}, index=index)
        else:
            frame = pd.DataFrame(index=index)
            for name, array in pairs:
                frame[name] = array.copy()
        if selected and frame.columns.is_unique:
            return frames.select_columns(frame, frame.columns.tolist()), frame[frame.columns.tolist()]
        return frame, frame
    return make


@st.composite
def column_values(draw, frame: pd.DataFrame):
    """What people set a column to: Series (the frame's index, an equal one, another), arrays, scalars."""
    rows = len(frame)
    kind = draw(st.sampled_from(["same index", "same index", "equal index", "other index", "array", "scalar",
                                 "strings", "nullable", "short array", "column"]))
    array = np.array(draw(st.lists(st.floats(-1e6, 1e6, width=32) | st.just(np.nan), min_size=rows, max_size=rows)))
    array = array.astype(draw(st.sampled_from(DTYPES))) if not np.isnan(array).any() else array
    if kind == "same index":
        return pd.Series(array, index=frame.index, name=draw(st.sampled_from([None, "s"])))
    if kind == "equal index":
        return pd.Series(array, index=frame.index.copy())
    if kind == "other index":
        return pd.Series(array, index=draw(indexes(rows)))
    if kind == "array":
        return array
    if kind == "short array":
        return array[:-1]
    if kind == "strings":
        return pd.Series([f"t{i}" for i in range(rows)], index=frame.index)
    if kind == "nullable":
        return pd.Series(range(rows), index=frame.index, dtype="Int64")
    if kind == "column":
        return frame.iloc[:, 0] * 2
    return draw(st.sampled_from([0, 1.5, True, "text", np.float32(2), np.nan, np.int8(3), 2**63, None]))


def set_values_shared(frame: pd.DataFrame, key) -> bool:
    """Whether the block holding column ``key`` shares its values with another object (copy-on-write)."""
    manager = frame._mgr
    position = frame.columns.get_loc(key)
    return manager.blocks[manager.blknos[position]].refs.has_reference() if isinstance(position, int) else None


@hypothesis_settings(200)
@given(frame_makers(), st.data())
def test_setting_columns_changes_the_frame_as_pandas_does(make, data):
    ours, _ = make()
    _, theirs = make()
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(st.sampled_from([*NAMES, "new", "other", 0, ("a", "b")]))
        value = data.draw(column_values(theirs))
        mine = value.copy() if isinstance(value, (pd.Series, np.ndarray)) else value
        try:
            theirs[key] = value
        except Exception as error:
            note(f"pandas raises {error!r}")
            with pytest.raises((Unsupported, type(error))):
                frames.put_column(ours, key, mine)
            return
        try:
            frames.put_column(ours, key, mine)
        except Unsupported as why:
            note(f"refused: {why}")
            ours[key] = mine  # (the call site runs it as written)
        assert_same_frame(ours, theirs)
        # The values set are shared (tracked for copy-on-write) or copied as pandas shares them.
        assert set_values_shared(ours, key) == set_values_shared(theirs, key)


def test_the_common_cases_compile():
    """The kernels answer (not only refuse) the forms people write."""
    frame = pd.DataFrame({"a": [1.0, np.nan], "b": [2, 3], "c": [np.nan, 0.5], "s": ["x", "y"]}, index=[4, 7])
    medians = frame[["a", "c"]].median()
    assert_same_frame(frames.fillna(frames.select_columns(frame, ["a", "b", "c"]), medians),
                      frame[["a", "b", "c"]].fillna(medians))
    assert_same_frame(frames.fillna(frame[["a", "c"]], 0), frame[["a", "c"]].fillna(0))
    ratios = [frame["a"] / frame["b"], frame["c"] * 2]
    assert_same_frame(frames.concat_columns(ratios, ["r", "t"]), pd.concat(ratios, axis=1, keys=["r", "t"]))
    parts = [frame[["a", "b"]], frame[["c"]], frame["b"].rename("n")]
    assert_same_frame(frames.concat_columns(parts), pd.concat(parts, axis=1))
    columns = {"log": np.log1p(frame["a"]), "n": frame["b"] + 1, "flag": frame["b"] > 2}
    assert_same_frame(frames.frame_from_dict(columns), pd.DataFrame(columns))
    assert_same_frame(frames.assign(frame, {"p": frame["b"] * 2}), frame.assign(p=frame["b"] * 2))
    ours, theirs = frames.select_columns(frame, ["a", "b"]), frame[["a", "b"]]
    for key, value in [("r", frame["a"] / frame["b"]), ("a", np.where(frame["b"] > 2, 1.0, 0.0)), ("one", 1)]:
        frames.put_column(ours, key, value)
        theirs[key] = value
        assert_same_frame(ours, theirs)


# Through willump.optimize, as users write them.

ROWS = pd.DataFrame({
    "credit": [1e5, 2.5e5, np.nan, 4e4, 9e4], "income": [5e4, np.nan, 3e4, 2e4, 1e5],
    "goods": [np.nan, 2e5, 1e5, np.nan, 8e4], "children": [0, 2, 7, 1, 3], "kind": ["a", "b", "a", "c", "b"],
    "owns": [True, False, True, True, False],
})
MEDIANS = ROWS[["credit", "income", "goods"]].median()
NUMERIC = ["credit", "income", "goods"]


def filled_and_concatenated(df):
    ratios = pd.concat([df["credit"] / df["income"], df["goods"] / df["credit"]], axis=1, keys=["ci", "gc"])
    X = pd.concat([df[NUMERIC].fillna(MEDIANS), ratios.fillna(0), df[["children"]]], axis=1)
    return identity.predict(X)


def frame_of_expressions(df):
    X = pd.DataFrame({
        "log_credit": np.log1p(df["credit"]),
        "log_goods": np.log1p(df["goods"].fillna(df["credit"])),
        "children": df["children"].clip(upper=5),
        "owns": df["owns"].astype(float),
    })
    return identity.predict(X)


def assigned(df):
    df = df.assign(half=df["credit"] / 2, many=df["children"] > 2)
    return identity.predict(df)


def filled_with_a_dict(df):
    X = df[["credit", "goods", "children"]].fillna({"goods": 0, "credit": -1})
    return identity.predict(X)


def dropped(df):
    return identity.predict(df.drop(columns=["kind"]).fillna(0))


def dropped_and_selected(df):
    X = df.drop(["kind", "owns"], axis=1)
    return identity.predict(X[["children", "credit"]].assign(owner=df["owns"]))


def kaggle_cell(df):
    X = df[NUMERIC].copy()
    X["credit_income"] = X["credit"] / X["income"]
    X["goods"] = np.where(X["goods"].isna(), X["credit"], X["goods"])
    X["many_children"] = (df["children"] > 2).astype(int)
    X["mean"] = X[["credit", "income"]].mean(axis=1)
    X["one"] = 1
    X["income"] = df["income"].fillna(0)
    return identity.predict(X)


def set_in_place(df):
    df["half"] = df["credit"] / 2
    df["children"] = df["children"].clip(upper=5)
    return identity.predict(df[["half", "children"]])


@pytest.mark.parametrize("function", [filled_and_concatenated, frame_of_expressions, assigned, filled_with_a_dict,
                                      dropped, dropped_and_selected, kaggle_cell])
@pytest.mark.parametrize("rows", [slice(None), slice(2, 3), slice(None, None, -1)])
def test_decorated_functions_give_pandas_frames(function, rows):
    f = willump.optimize(function)
    frame = ROWS.iloc[rows]
    for _ in range(2):
        result, expected = answers(f, frame)
        assert_same_frame(result, expected)
    table = f.explain_compilation()
    sites = table[~table["status"].str.contains("no kernel stands for|is not an operator willump compiles")]
    assert (sites["status"] == "compiled").all(), sites.to_string()


FOREST = RandomForestRegressor(n_estimators=5, random_state=0).fit(ROWS[NUMERIC].fillna(0), [1.0, 2.0, 3.0, 4.0, 5.0])


def filled_by_medians_for_a_forest(df):
    X = df[NUMERIC].fillna(MEDIANS)
    return FOREST.predict(X)


def filled_by_a_dict_for_a_forest(df):
    X = df[NUMERIC]
    X = X.fillna({"goods": 0.0, "credit": -1, "income": MEDIANS["income"], "absent": 3.0})
    return FOREST.predict(X)


@pytest.mark.parametrize("function", [filled_by_medians_for_a_forest, filled_by_a_dict_for_a_forest])
def test_a_fill_by_column_read_only_by_a_model_is_kept_as_its_columns(function):
    """pandas sets each filled column in a block of its own (~2 us a column); read only by the forest's
    kernel, the filled columns are handed to it instead: the same answers."""
    f = willump.optimize(function)
    for rows in (ROWS, ROWS.iloc[[2]], ROWS.iloc[::-1]):
        np.testing.assert_array_equal(f(rows), function(rows), strict=True)
    table = f.explain_compilation().set_index("operator")
    fill = table[((table.index == "DataFrame.fillna") | table.index.str.startswith("element-wise expression", na=False)) & table["call"].str.contains("fillna")]
    assert (fill["status"] == "compiled").all() and fill["kept"].all(), table.to_string()
    assert table.loc["RandomForestRegressor.predict", "status"] == "compiled"


@pytest.mark.parametrize("rows", [slice(None), slice(2, 3)])
def test_columns_set_in_the_callers_frame_are_set_as_pandas_sets_them(rows):
    f = willump.optimize(set_in_place)
    ours, theirs = ROWS.iloc[rows].copy(), ROWS.iloc[rows].copy()
    assert_same_frame(f(ours), set_in_place(theirs))
    assert_same_frame(ours, theirs)
    sites = f.explain_compilation().query("operator == 'DataFrame.__setitem__'")
    assert len(sites) == 2 and (sites["status"] == "compiled").all(), sites.to_string()


def fragmented() -> pd.DataFrame:
    frame = pd.DataFrame({"c0": np.arange(3)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(100):
            frame[f"x{i}"] = np.arange(3.0)
    return frame


def one_more_column(df):
    df["last"] = 1.5
    return identity.predict(df)


def test_a_fragmented_frame_warns_from_the_users_line():
    """pandas warns when an insert leaves more than 100 blocks: the kernel leaves those to pandas, and the
    assignment then runs in the user's code, where the warning points (and raises, as an error)."""
    with pytest.raises(Unsupported, match="100 blocks"):
        frames.put_column(fragmented(), "last", 1.5)
    f = willump.optimize(one_more_column)
    for function in (one_more_column, f):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            function(fragmented())
        assert [(w.category, w.filename, w.lineno) for w in caught] == [
            (pd.errors.PerformanceWarning, __file__, one_more_column.__code__.co_firstlineno + 1)]
        frame = fragmented()
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.PerformanceWarning)
            with pytest.raises(pd.errors.PerformanceWarning):
                function(frame)
        assert "last" in frame.columns  # (pandas set it, then warned)


@pytest.mark.parametrize("names", [[1, True, 1.0], [np.int64(7), 7], ["k", np.str_("k")]])
def test_the_names_of_column_indexes_are_kept_apart(names):
    """Index names equal as dict keys (1, True, 1.0) still give each frame its own."""
    for name in names:
        ours, theirs = pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"a": [1, 2]})
        ours.columns.name = theirs.columns.name = name
        frames.put_column(ours, "new", 1.0)
        theirs["new"] = 1.0
        assert type(ours.columns.name) is type(theirs.columns.name) and ours.columns.name == theirs.columns.name


def test_numpy_str_names_stay_as_they_are():
    """Python-backed names may be np.str_, which pandas keeps; a cached Index of str names would not."""
    def make():
        frame = pd.DataFrame({"a": [1, 2, 3]})
        frame.columns = pd.Index([np.str_("a")], dtype=pd.StringDtype("python"))
        return frame

    frames.put_column(pd.DataFrame({"a": [1, 2, 3]}), "new", 1)
    with pytest.raises(Unsupported, match="np.str_"):
        frames.put_column(make(), "new", 1)
    f = willump.optimize(doubled)
    assert type(f(make()).name) is type(doubled(make()).name) is np.str_


def doubled(df):
    return identity.predict(df["a"] * 2)


def misaligned(df):
    shifted = df["credit"].set_axis(df.index[::-1])
    return identity.predict(pd.DataFrame({"a": df["income"], "b": shifted}))


def repeated_names(df):
    return identity.predict(pd.concat([df[["credit"]], df[["credit", "income"]]], axis=1))


@pytest.mark.parametrize("function", [misaligned, repeated_names])
def test_what_pandas_aligns_or_repeats_runs_as_written(function):
    f = willump.optimize(function)
    result, expected = answers(f, ROWS)
    pd.testing.assert_frame_equal(result, expected, check_exact=True)
    assert layout(result) == layout(expected)
