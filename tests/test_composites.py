"""scikit-learn Pipelines, FeatureUnions and ColumnTransformers read as their steps.

Each composite is written the way scikit-learn's documentation writes it; the optimized function
must return exactly what the composite returns (values, dtype, shape), raise what it raises, split
its branches into IFVs and compile the steps willump knows.
"""

import warnings

import cloudpickle
import numpy as np
import pandas as pd
import pytest
import sklearn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.compose import ColumnTransformer, make_column_selector, make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import FeatureUnion, Pipeline, make_pipeline, make_union
from sklearn.preprocessing import (
    FunctionTransformer, MinMaxScaler, OneHotEncoder, OrdinalEncoder, QuantileTransformer, StandardScaler,
)

import willump

rng = np.random.default_rng(0)
N = 600
WORDS = ["good", "bad", "late", "great", "food", "never", "again", "ok", "fine", "slow"]
FRAME = pd.DataFrame({
    "amount": rng.lognormal(size=N),
    "age": rng.integers(18, 90, N),
    "city": rng.choice(["paris", "lyon", "nice", "metz"], N),
    "text": [" ".join(rng.choice(WORDS, rng.integers(1, 6))) for _ in range(N)],
})
FRAME.loc[::9, "amount"] = np.nan
Y = ((FRAME["amount"].fillna(1) > 1.2) ^ (FRAME["city"] == "nice")).astype(int).to_numpy()
NUMERIC = ["amount", "age"]


def column_transformers():
    """The ColumnTransformers of scikit-learn's 'Column Transformer with Mixed Types' example and
    its variants: remainder, drop, sparse_threshold, selectors, nested pipelines."""
    numeric = Pipeline([("imputer", SimpleImputer(strategy="median")), ("scaler", StandardScaler())])
    return {
        "mixed_types": ColumnTransformer([
            ("num", numeric, NUMERIC), ("cat", OneHotEncoder(handle_unknown="ignore"), ["city"]),
            ("text", TfidfVectorizer(), "text"),
        ]),
        "remainder_passthrough": ColumnTransformer(
            [("cat", OneHotEncoder(handle_unknown="ignore"), ["city"]), ("text", CountVectorizer(), "text"),
             ("amount", SimpleImputer(), ["amount"])],
            remainder="passthrough",
        ),
        "remainder_transformer": ColumnTransformer(
            [("cat", OneHotEncoder(sparse_output=False), ["city"]), ("drop_text", "drop", ["text"])],
            remainder=make_pipeline(SimpleImputer(), StandardScaler()),
        ),
        "dense_output": ColumnTransformer(
            [("num", numeric, NUMERIC), ("cat", OneHotEncoder(handle_unknown="ignore"), ["city"])], sparse_threshold=0,
        ),
        "sparse_output": ColumnTransformer(
            [("num", numeric, NUMERIC), ("cat", OneHotEncoder(handle_unknown="ignore"), ["city"])], sparse_threshold=1,
        ),
        "selectors": make_column_transformer(
            (numeric, make_column_selector(dtype_include="number")),
            (OneHotEncoder(handle_unknown="ignore"), make_column_selector(pattern="city")),
            verbose_feature_names_out=False,
        ),
        "imputed_categories": ColumnTransformer([
            ("num", numeric, NUMERIC),
            ("cat", make_pipeline(SimpleImputer(strategy="constant", fill_value="missing"),
                                  OneHotEncoder(handle_unknown="ignore")), ["city"]),
        ]),
        "encoders_and_scalers": ColumnTransformer([
            ("codes", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), ["city"]),
            ("strict", OneHotEncoder(handle_unknown="error", drop="first"), ["city"]),
            ("range", make_pipeline("passthrough", SimpleImputer(), MinMaxScaler().set_output(transform="pandas")), NUMERIC),
            ("log", FunctionTransformer(np.log1p), ["age"]),
        ]),
        "pandas_output": make_column_transformer(  # (scikit-learn's categorical-features example)
            (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan), ["city"]), (numeric, NUMERIC),
            verbose_feature_names_out=False,
        ).set_output(transform="pandas"),
        "pandas_output_prefixed": ColumnTransformer([
            ("num", numeric, NUMERIC), ("cat", OneHotEncoder(sparse_output=False, handle_unknown="ignore"), ["city"]),
        ]).set_output(transform="pandas"),
        "union_inside": ColumnTransformer([
            ("text", make_union(TfidfVectorizer(), TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 3))), "text"),
            ("num", numeric, NUMERIC),
        ]),
    }


def fitted(name):
    global composite
    composite = make_pipeline(column_transformers()[name], LogisticRegression(max_iter=1000)).fit(FRAME, Y)
    return composite


_OPTIMIZED = {}


def probability_of(name):
    """(function, optimized function) of a fitted pipeline, each built once (closures: one
    composite each)."""
    if name not in _OPTIMIZED:
        pipe = make_pipeline(column_transformers()[name], LogisticRegression(max_iter=1000)).fit(FRAME, Y)

        def closure_probability(frame):
            return pipe.predict_proba(frame)[:, 1]

        _OPTIMIZED[name] = closure_probability, optimize_quietly(closure_probability)
    return _OPTIMIZED[name]


def outcome(function, *args):
    """What the call returns, or the type and message of what it raises."""
    try:
        return function(*args)
    except Exception as error:
        return type(error), str(error)


def probability(frame):
    return composite.predict_proba(frame)[:, 1]


def assert_same(got, expected):
    assert type(got) is type(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def optimize_quietly(function):
    with warnings.catch_warnings():
        warnings.simplefilter("error", willump.WillumpWarning)  # nothing is left as one call here
        return willump.optimize(function)


@pytest.mark.parametrize("name", sorted(column_transformers()))
def test_column_transformers_are_exact_on_batches_and_single_rows(name):
    fitted(name)
    optimized = optimize_quietly(probability)
    assert len(optimized.graph.ifvs) >= 2
    for rows in (FRAME, FRAME.iloc[[7]], FRAME.iloc[100:103], FRAME.iloc[::-1]):
        assert_same(optimized(rows), probability(rows))
    table = optimized.explain_compilation()
    assert not table["call"].str.contains("__willump").any(), table["call"].tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(
            st.one_of(st.none(), st.floats(-1e6, 1e6)), st.integers(0, 120),
            st.sampled_from(["paris", "lyon", "nice", "metz", "rome", "", None]),
            st.lists(st.sampled_from(WORDS + ["unseen", "É"]), max_size=5).map(" ".join),
        ),
        min_size=1, max_size=6,
    ),
    name=st.sampled_from(
        ["mixed_types", "remainder_passthrough", "dense_output", "union_inside", "encoders_and_scalers", "imputed_categories",
         "pandas_output", "pandas_output_prefixed"]
    ),
)
def test_any_rows_give_the_composites_answers(rows, name):
    function, optimized = probability_of(name)
    frame = pd.DataFrame(rows, columns=["amount", "age", "city", "text"]).astype({"amount": float})
    expected, got = outcome(function, frame), outcome(optimized, frame)
    if isinstance(expected, tuple):
        assert got == expected
    else:
        assert_same(got, expected)


def test_a_text_pipeline_is_its_steps_compiled_and_fused():
    global pipe
    pipe = Pipeline([("tfidf", TfidfVectorizer()), ("clf", LogisticRegression())]).fit(FRAME["text"], Y)

    def predict(frame):
        return pipe.predict_proba(frame["text"])[:, 1]

    optimized = optimize_quietly(predict)
    for rows in (FRAME, FRAME.iloc[[3]]):
        assert_same(optimized(rows), predict(rows))
    table = optimized.explain_compilation().set_index("call")
    assert table.loc["pipe['tfidf'].transform(frame['text'])", "status"] == "compiled"
    assert table.loc["pipe['clf'].predict_proba(tfidf)", "status"] == "compiled"


def test_a_feature_union_of_vectorizers_splits_into_one_ifv_per_branch():
    global pipe
    pipe = Pipeline([
        ("features", FeatureUnion([("words", TfidfVectorizer()), ("chars", TfidfVectorizer(analyzer="char_wb"))])),
        ("clf", LogisticRegression()),
    ]).fit(FRAME["text"], Y)

    def predict(frame):
        return pipe.predict(frame["text"])

    optimized = optimize_quietly(predict)
    assert [ifv.name for ifv in optimized.graph.ifvs] == ["features__words", "features__chars"]
    assert_same(optimized(FRAME), predict(FRAME))
    for row in range(3):  # one program for the whole call, as for the same steps written by hand
        assert_same(optimized(FRAME.iloc[[row]]), predict(FRAME.iloc[[row]]))
    table = optimized.explain_compilation()
    assert (table["status"] == "compiled").all()
    assert (table["whole_calls"] >= 3).all(), table


def test_a_dense_feature_union_with_passthrough_and_drop():
    global pipe
    union = make_union(StandardScaler(), FunctionTransformer(np.abs), "passthrough")
    union.transformer_list.append(("dropped", "drop"))
    pipe = make_pipeline(union, Ridge()).fit(FRAME[NUMERIC].fillna(0), FRAME["age"])

    def predict(frame):
        return pipe.predict(frame[NUMERIC].fillna(0))

    optimized = optimize_quietly(predict)
    assert len(optimized.graph.ifvs) == 3
    for rows in (FRAME, FRAME.iloc[[0]]):
        assert_same(optimized(rows), predict(rows))


def test_a_transform_call_is_written_out_too():
    global prep, model
    prep = column_transformers()["mixed_types"].fit(FRAME)
    model = LogisticRegression().fit(prep.transform(FRAME), Y)

    def predict(frame):
        X = prep.transform(frame)
        return model.predict_proba(X)[:, 1]

    optimized = optimize_quietly(predict)
    assert [ifv.name for ifv in optimized.graph.ifvs] == ["num__scaler", "cat", "text"]
    assert_same(optimized(FRAME), predict(FRAME))


@pytest.mark.parametrize("bad", ["missing column", "array", "wrong type"])
def test_bad_input_raises_what_the_composite_raises(bad):
    fitted("mixed_types")
    optimized = optimize_quietly(probability)
    frame = {
        "missing column": FRAME.drop(columns=["city"]), "array": FRAME.to_numpy(),
        "wrong type": FRAME.assign(age=["x"] * N),
    }[bad]
    with pytest.raises(Exception) as expected:
        probability(frame)
    with pytest.raises(type(expected.value)) as got:
        optimized(frame)
    assert str(got.value) == str(expected.value)


@pytest.mark.parametrize("name", ["mixed_types", "encoders_and_scalers"])
def test_frames_of_other_layouts_select_as_the_composite_selects(name):
    """The branches read columns by name wherever they are: in frames built per call (new column
    objects, same names), with other columns or another order, or names given twice."""
    function, optimized = probability_of(name)
    frames = [
        FRAME.assign(extra=1.0), FRAME.assign(extra=2.0), FRAME[FRAME.columns[::-1]].iloc[:40],
        FRAME.iloc[[3]].assign(amount=np.inf), pd.concat([FRAME, FRAME[["city"]]], axis=1),
        pd.concat([FRAME, FRAME[["amount"]]], axis=1).iloc[:5], FRAME.iloc[:0],
    ]
    for frame in frames:
        expected, got = outcome(function, frame), outcome(optimized, frame)
        if isinstance(expected, tuple):
            assert got == expected
        else:
            assert_same(got, expected)


def test_a_composite_changed_after_decoration_runs_as_written_with_a_warning():
    fitted("mixed_types")
    optimized = optimize_quietly(probability)
    before = optimized(FRAME)
    composite.set_params(logisticregression=LogisticRegression(C=0.01).fit(composite[:-1].transform(FRAME), Y))
    with pytest.warns(willump.WillumpWarning, match="changed after decoration"):
        after = optimized(FRAME)
    assert_same(after, probability(FRAME))
    assert not np.array_equal(after, before)
    composite.fit(FRAME, 1 - Y)  # refitted: new fitted transformers
    assert_same(optimized(FRAME.iloc[:5]), probability(FRAME.iloc[:5]))


def test_the_categorical_features_example_with_pandas_output_is_its_steps_and_exact():
    """scikit-learn's 'Categorical Feature Support in Gradient Boosting': an OrdinalEncoder on the
    categories, the rest passed through, the frame's names telling the model which are categorical."""
    global composite
    encoder = make_column_transformer(
        (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan), ["city"]),
        remainder="passthrough", verbose_feature_names_out=False,
    )
    composite = make_pipeline(
        encoder, HistGradientBoostingClassifier(categorical_features=["city"], max_iter=20, random_state=0),
    ).set_output(transform="pandas").fit(FRAME[["city", *NUMERIC]], Y)

    def predict(frame):
        return composite.predict_proba(frame[["city", *NUMERIC]])[:, 1]

    optimized = optimize_quietly(predict)
    unseen = FRAME.iloc[:4].assign(city=["rome", None, "paris", ""])
    for rows in (FRAME, FRAME.iloc[[7]], FRAME.iloc[::-1], unseen):
        assert_same(optimized(rows), predict(rows))
    assert optimized.explain_compilation()["status"].eq("compiled").all()  # (the frames joined as columns)


def fit_pandas_columns():
    """The functions below read ``columns`` (a ColumnTransformer with pandas output) and ``model``."""
    global columns, model
    columns = ColumnTransformer([
        ("num", make_pipeline(SimpleImputer(), StandardScaler()), NUMERIC),
        ("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), ["city"]),
        ("rest", "passthrough", ["age"]),
    ]).set_output(transform="pandas").fit(FRAME)
    model = LogisticRegression().fit(columns.transform(FRAME), Y)


def test_a_pandas_output_returned_is_scikit_learns_frame():
    fit_pandas_columns()

    def scores_and_features(frame):
        X = columns.transform(frame)
        return model.predict_proba(X)[:, 1], X

    optimized = optimize_quietly(scores_and_features)
    for rows in (FRAME, FRAME.iloc[[4]], FRAME.iloc[::-1].set_axis([f"r{i}" for i in range(N)])):
        (got, got_frame), (expected, expected_frame) = optimized(rows), scores_and_features(rows)
        assert_same(got, expected)
        pd.testing.assert_frame_equal(got_frame, expected_frame, check_exact=True)


def test_pandas_output_kept_as_columns_until_the_model_reads_them():
    fit_pandas_columns()

    def probability_after_change(frame):
        X = columns.transform(frame)
        frame.loc[:, "age"] = 0  # in place, while the features are kept as the frame's columns
        probabilities = model.predict_proba(X)
        return probabilities[:, 1]

    optimized = optimize_quietly(probability_after_change)
    for rows in (FRAME, FRAME.iloc[[4]]):
        assert_same(optimized(rows.copy()), probability_after_change(rows.copy()))
    status = optimized.explain_compilation().set_index("call")["status"]
    assert status.filter(like="column_stack").eq("compiled").all(), status


def test_a_branch_frame_built_as_written_on_the_way_still_joins_as_columns():
    """A step without a kernel (here QuantileTransformer) wraps its frame in an index of its own,
    equal to the others: the join still keeps the columns, as pandas joins them without aligning."""
    global composite
    composite = make_pipeline(ColumnTransformer([
        ("num", make_pipeline(QuantileTransformer(n_quantiles=10), SimpleImputer(), StandardScaler()), NUMERIC),
        ("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1), ["city"]),
    ]).set_output(transform="pandas"), LogisticRegression()).fit(FRAME, Y)
    optimized = optimize_quietly(probability)
    for rows in (FRAME, FRAME.iloc[[5]], FRAME.iloc[::-1].set_axis([f"r{i}" for i in range(N)])):
        assert_same(optimized(rows), probability(rows))
    status = optimized.explain_compilation().set_index("call")["status"]
    assert status.filter(like="column_stack").eq("compiled").all(), status
    assert status.filter(like="quantiletransformer'].transform").str.startswith("plain Python").all(), status


def test_a_global_pandas_output_is_read_and_a_change_of_it_runs_as_written():
    """``sklearn.config_context(transform_output="pandas")`` around decoration and calls; outside it
    the composites return arrays again (scikit-learn warns of the names its steps no longer get)."""
    global composite
    with sklearn.config_context(transform_output="pandas"):
        composite = make_pipeline(ColumnTransformer([
            ("num", make_pipeline(SimpleImputer(), StandardScaler()), NUMERIC),
            ("cat", OneHotEncoder(sparse_output=False, handle_unknown="ignore"), ["city"]),
        ]), LogisticRegression()).fit(FRAME, Y)
        optimized = optimize_quietly(probability)
        for rows in (FRAME, FRAME.iloc[[3]]):
            assert_same(optimized(rows), probability(rows))
    with pytest.warns(willump.WillumpWarning, match="changed after decoration"):
        assert_same(optimized(FRAME), probability(FRAME))


@pytest.mark.parametrize("why, make", [
    ("set_output", lambda: make_union(StandardScaler(), MinMaxScaler()).set_output(transform="pandas")),
    ("transformer_weights", lambda: ColumnTransformer([("num", StandardScaler(), NUMERIC)], transformer_weights={"num": 2.0})),
])
def test_a_composite_left_as_one_call_says_so(why, make):
    global composite
    composite = make_pipeline(SimpleImputer().set_output(transform="pandas"), make(), LogisticRegression())
    composite.fit(FRAME[NUMERIC], Y)

    def predict(frame):
        return composite.predict_proba(frame[NUMERIC])[:, 1]

    with pytest.warns(willump.WillumpWarning, match=f"runs as one call .{why}"):
        optimized = willump.optimize(predict)
    assert_same(optimized(FRAME), predict(FRAME))


def test_a_pipeline_fitted_after_decoration_is_read_as_its_steps_once_fitted():
    """A script decorates at import and fits later: the first call after fit reads the steps."""
    global composite
    composite = make_pipeline(
        make_union(StandardScaler(), FunctionTransformer(np.abs)), LogisticRegression()
    )
    with pytest.warns(willump.WillumpWarning, match="not fitted when the function was decorated"):
        optimized = willump.optimize(lambda_free_probability)
    assert len(optimized.graph.ifvs) == 1
    composite.fit(FRAME[NUMERIC].fillna(0), Y)
    assert_same(optimized(FRAME), lambda_free_probability(FRAME))
    assert [ifv.name for ifv in optimized.graph.ifvs] == [
        "featureunion__standardscaler", "featureunion__functiontransformer"
    ]
    assert_same(optimized(FRAME.iloc[[2]]), lambda_free_probability(FRAME.iloc[[2]]))


def lambda_free_probability(frame):
    return composite.predict_proba(frame[NUMERIC].fillna(0))[:, 1]


def test_a_name_bound_to_another_composite_after_decoration_runs_as_written():
    fitted("mixed_types")
    optimized = optimize_quietly(probability)
    fitted("dense_output")
    with pytest.warns(willump.WillumpWarning, match="changed after decoration"):
        assert_same(optimized(FRAME), probability(FRAME))


def test_a_local_variable_named_like_a_global_composite_is_not_read_as_it():
    global composite, other
    fitted("mixed_types")
    other = make_pipeline(StandardScaler(), LogisticRegression()).fit(FRAME[NUMERIC].fillna(0), Y)

    def predict(frame):
        composite = other
        return composite.predict_proba(frame[NUMERIC].fillna(0))[:, 1]

    optimized = willump.optimize(predict)
    assert len(optimized.graph.ifvs) == 1
    assert_same(optimized(FRAME), predict(FRAME))


def test_the_optimized_pipeline_function_pickles():
    fitted("union_inside")
    optimized = optimize_quietly(probability)
    loaded = cloudpickle.loads(cloudpickle.dumps(optimized))
    assert_same(loaded(FRAME), probability(FRAME))
    assert [ifv.name for ifv in loaded.graph.ifvs] == [ifv.name for ifv in optimized.graph.ifvs]


def test_explain_compilation_lists_each_call_once_as_written_after_fit():
    """No phantom rows: the paths fit adds (cascades, top-K) answer the same calls as written."""
    global vectorizer, model
    vectorizer = TfidfVectorizer().fit(FRAME["text"])
    model = LogisticRegression().fit(vectorizer.transform(FRAME["text"]), Y)

    def predict(frame):
        X = vectorizer.transform(frame["text"])
        return model.predict_proba(X)[:, 1]

    optimized = willump.optimize(predict)
    optimized(FRAME.iloc[:5])
    optimized.fit(FRAME.iloc[:400], y=Y[:400], validation=(FRAME.iloc[400:], Y[400:]), progress=False)
    optimized.top_k(FRAME, k=5)
    table = optimized.explain_compilation()
    assert table["call"].tolist() == ["vectorizer.transform(frame['text'])", "model.predict_proba(X)"]
    assert (table["calls"] > 0).all()


def _matrices_equal(got, expected):
    import scipy.sparse as sp

    assert type(got) is type(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if sp.issparse(expected):
        assert got.format == expected.format == "csr"
        assert got.indices.dtype == expected.indices.dtype and got.indptr.dtype == expected.indptr.dtype
        np.testing.assert_array_equal(got.indptr, expected.indptr)
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_array_equal(got.data, expected.data)
    else:
        np.testing.assert_array_equal(got, expected)


def _blocks(draw, rows):
    """2-4 blocks of ``rows`` rows: CSR matrices, dense arrays of floats, ints or bools, and frames
    of them (a passthrough branch's), of one dtype or of ints and floats."""
    import scipy.sparse as sp

    blocks = []
    for _ in range(draw(st.integers(2, 4))):
        width = draw(st.integers(1, 4))
        dtype = draw(st.sampled_from([np.float64, np.float32, np.int64, np.bool_]))
        values = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, -2.5, np.nan, 3.0]), min_size=rows * width,
                               max_size=rows * width))
        array = np.array(values).reshape(rows, width)
        array = np.nan_to_num(array).astype(dtype) if dtype is not np.float64 else array
        kind = draw(st.sampled_from(["dense", "csr_matrix", "csr_array", "frame"]))
        if kind == "frame":
            frame = pd.DataFrame(array, columns=[f"c{i}" for i in range(width)])
            if dtype is np.float64 and draw(st.booleans()):
                frame["c0"] = np.nan_to_num(array[:, 0]).astype(np.int64)
            blocks.append(frame)
        else:
            blocks.append(array if kind == "dense" else getattr(sp, kind)(array))
    return blocks


@st.composite
def joins(draw):
    rows = draw(st.integers(1, 5))
    return draw(st.sampled_from(["sparse", "dense", "union"])), _blocks(draw, rows)


_SPARSE_CT = ColumnTransformer([("text", CountVectorizer(), "text")], sparse_threshold=1).fit(FRAME)
_DENSE_CT = ColumnTransformer([("text", CountVectorizer(), "text")], sparse_threshold=0).fit(FRAME)
_UNION = make_union(CountVectorizer(), CountVectorizer(analyzer="char")).fit(FRAME["text"])


@settings(max_examples=200, deadline=None)
@given(joins())
def test_the_join_kernels_give_scikit_learns_joins(join):
    """CompiledColumnStack / CompiledUnionStack against the composites' own _hstack."""
    from willump.compile.composites import (
        CompiledColumnStack, CompiledUnionStack, Unsupported, column_stack, union_stack,
    )

    kind, blocks = join
    if kind == "union":
        expected, compute = outcome(union_stack, _UNION, blocks), lambda: CompiledUnionStack()(_UNION, blocks)
    else:
        transformer = _SPARSE_CT if kind == "sparse" else _DENSE_CT
        frame = FRAME.iloc[: blocks[0].shape[0]]
        expected = outcome(column_stack, transformer, blocks, frame)
        compute = lambda: CompiledColumnStack()(transformer, blocks, frame)  # noqa: E731
    try:
        got = compute()
    except Unsupported:  # (scikit-learn's code joins them): only where scikit-learn raises
        assert isinstance(expected, tuple)
        return
    assert not isinstance(expected, tuple), expected
    _matrices_equal(got.materialize() if hasattr(got, "materialize") else got, expected)


@pytest.mark.parametrize("remainder", [["amount", "age"], ["age"], ["amount", "age", "flag"]])
def test_a_dense_passthrough_remainder_is_handed_on_unread(remainder):
    """``remainder="passthrough"`` (a FunctionTransformer without a function, its names "one-to-one"):
    the columns go to the join where they are, in their common dtype, exact on batches and single
    rows; bools beside numbers (pandas joins them as objects) join as scikit-learn joins them."""
    global composite
    frame = FRAME.assign(flag=FRAME["age"] > 50)[["city", *remainder]]
    composite = make_pipeline(
        make_column_transformer((OrdinalEncoder(), ["city"]), remainder="passthrough"),
        HistGradientBoostingClassifier(max_iter=20, random_state=0),
    ).fit(frame, Y)
    optimized = optimize_quietly(probability)
    for rows in (frame, frame.iloc[[0]], frame.iloc[5:9]):
        assert_same(optimized(rows), probability(rows))
    table = optimized.explain_compilation()
    calls = dict(zip(table["operator"], table["status"]))
    assert calls["FunctionTransformer.transform"] == "compiled", table
    joined = table.loc[table["operator"] == "willump.compile.composites.column_stack"]
    assert (joined["compiled_calls"] > 0).all() == ("flag" not in remainder), table


def test_the_identity_with_names_one_to_one_keeps_scikit_learns_checks_of_names():
    """A frame whose columns are not the names seen in fit: scikit-learn renames them (so the model
    after it sees the names it was fitted on); the compiled identity hands on only frames whose
    names are those, and runs the others as written."""
    global identity, regressor
    identity = FunctionTransformer(feature_names_out="one-to-one").fit(FRAME[NUMERIC])
    regressor = HistGradientBoostingRegressor(max_iter=10, random_state=0).fit(FRAME[NUMERIC], Y)

    def passed(frame):
        return regressor.predict(identity.transform(frame))

    optimized = optimize_quietly(passed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (an array given to a model fitted on names)
        for frame in (FRAME[NUMERIC], FRAME[NUMERIC].rename(columns={"age": "years"}), FRAME[NUMERIC].to_numpy()):
            expected, got = outcome(passed, frame), outcome(optimized, frame)
            if isinstance(expected, tuple):
                assert got == expected
            else:
                assert_same(got, expected)
    table = optimized.explain_compilation().set_index("operator")
    assert table.loc["FunctionTransformer.transform", "compiled_calls"] == 2, table  # (the renamed frame: as written)


NUMBERS = make_pipeline(SimpleImputer(), StandardScaler())
BOOSTED = make_pipeline(make_column_transformer((NUMBERS, NUMERIC), (OneHotEncoder(handle_unknown="ignore"), ["city"])),
                        HistGradientBoostingRegressor(max_iter=20)).fit(FRAME, FRAME["age"].fillna(0) + Y)
LINEAR = make_pipeline(make_column_transformer((NUMBERS, NUMERIC)), Ridge()).fit(FRAME, FRAME["age"].fillna(0) + Y)


def blended_in_one_statement(frame):
    return 0.6 * BOOSTED.predict(frame) + 0.4 * LINEAR.predict(frame)


def transformed_after_the_model(frame):
    predicted = LINEAR.predict(frame)
    predicted = np.expm1(predicted / 100)
    return predicted


def blended_by_name(frame):
    first = BOOSTED.predict(frame)
    second = LINEAR.predict(frame)
    blend = 0.5 * first + 0.5 * second
    return blend


@pytest.mark.parametrize("function", [blended_in_one_statement, transformed_after_the_model, blended_by_name])
def test_pipelines_blended_or_transformed_after_are_read_as_their_steps(function):
    """A Kaggle blend of two Pipelines in one statement (the second's steps run after the first's final
    estimator was bound, which computes the same there), and a prediction transformed in later
    statements before it is returned: each Pipeline read as its steps, no warning, the answers exact."""
    optimized = optimize_quietly(function)
    for rows in (FRAME, FRAME.iloc[[3]], FRAME.iloc[[7]]):
        assert_same(optimized(rows), function(rows))
    table = optimized.explain_compilation()
    assert not table["status"].str.contains("runs as one call").any(), table.to_string()
    assert {"Ridge.predict"} <= set(table["operator"]), table.to_string()
