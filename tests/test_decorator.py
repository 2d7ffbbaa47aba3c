"""The decorator and the object it returns behave as the function."""

import inspect
import warnings
import weakref

import cloudpickle
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

import willump
from willump import persistence
from willump.compile.sites import AS_WRITTEN
from willump import WillumpWarning


class SumModel:
    """A tiny model: the sum of each row's features, times ``k``."""

    def __init__(self, k=1.0):
        self.k = k

    def predict(self, X):
        return np.asarray(X, dtype=float).sum(axis=1) * self.k


model = SumModel()
FRAME = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [4.0, 9.0, 16.0]})


def pipeline(df, scale=2):
    """Scores rows."""
    a = df[["x"]].to_numpy() * scale
    b = np.sqrt(df[["y"]].to_numpy())
    return model.predict(np.hstack([a, b]))


def test_bare_and_with_options():
    bare = willump.optimize(pipeline)
    configured = willump.optimize(strict=True)(pipeline)
    expected = pipeline(FRAME)
    np.testing.assert_array_equal(bare(FRAME), expected)
    np.testing.assert_array_equal(configured(FRAME), expected)


def test_unknown_options_are_named():
    with pytest.raises(TypeError, match="'speed'.*'turbo'|'turbo'.*'speed'"):
        willump.optimize(turbo=True, speed=3)


def test_behaves_as_the_function():
    optimized = willump.optimize(pipeline)
    assert optimized.py_func is pipeline
    assert optimized.__name__ == "pipeline"
    assert optimized.__doc__ == "Scores rows."
    assert optimized.__module__ == pipeline.__module__
    assert inspect.signature(optimized) == inspect.signature(pipeline)
    np.testing.assert_array_equal(optimized(FRAME, scale=3), pipeline(FRAME, scale=3))
    np.testing.assert_array_equal(optimized(df=FRAME), pipeline(df=FRAME))


def test_wrong_arguments_raise_the_original_error():
    optimized = willump.optimize(pipeline)
    for args, kwargs in [((), {}), ((FRAME, 1, 2), {}), ((FRAME,), {"bogus": 1})]:
        with pytest.raises(TypeError) as original:
            pipeline(*args, **kwargs)
        with pytest.raises(TypeError) as ours:
            optimized(*args, **kwargs)
        assert str(ours.value) == str(original.value)


def test_pickles_with_cloudpickle_and_works_after():
    optimized = willump.optimize(pipeline)
    restored = cloudpickle.loads(cloudpickle.dumps(optimized))
    assert isinstance(restored, willump.OptimizedFunction)
    np.testing.assert_array_equal(restored(FRAME), pipeline(FRAME))
    assert [i.name for i in restored.graph.ifvs] == ["a", "b"]


def test_pickles_a_function_defined_in_a_function():
    factor = 5.0

    def local(df):
        a = df[["x"]].to_numpy() * factor
        return model.predict(np.hstack([a, a]))

    restored = cloudpickle.loads(cloudpickle.dumps(willump.optimize(local)))
    np.testing.assert_array_equal(restored(FRAME), local(FRAME))


def test_methods_bind_self():
    class Scorer:
        def __init__(self, k):
            self.model = SumModel(k)

        @willump.optimize
        def predict(self, df):
            a = df[["x"]].to_numpy()
            b = df[["y"]].to_numpy()
            return self.model.predict(np.column_stack([a, b]))

    scorer = Scorer(2.0)
    np.testing.assert_array_equal(scorer.predict(FRAME), Scorer.predict.py_func(scorer, FRAME))
    assert [i.name for i in Scorer.predict.graph.ifvs] == ["a", "b"]


class Scorer:
    """A model held by an object whose method is the pipeline, as services write it."""

    def __init__(self, threshold):
        self.model = LogisticRegression().fit(RANKED[["x", "y"]].to_numpy(), RANKED["x"] > threshold)

    @willump.optimize
    def predict(self, df):
        """Scores rows."""
        a = df[["x"]].to_numpy()
        b = df[["y"]].to_numpy()
        return self.model.predict_proba(np.column_stack([a, b]))[:, 1]


RANKED = pd.DataFrame({"x": np.arange(200.0) % 37, "y": np.arange(200.0) % 11})


def test_a_bound_method_fits_ranks_and_saves_with_its_instance(tmp_path):
    """``scorer.predict.fit``/``top_k``/``save`` are the method's, with ``scorer`` as ``self`` (a plain
    bound method handed them to the function alone: ``fit`` and a loaded file missed ``self``)."""
    scorer, other = Scorer(18), Scorer(3)
    bound = scorer.predict
    assert bound.__doc__ == "Scores rows." and str(inspect.signature(bound)) == "(df)"
    assert bound == scorer.predict != other.predict and bound.explain_compilation is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WillumpWarning)  # (the validation split is of the training rows)
        assert bound.fit(RANKED, y=RANKED["x"] > 18, progress=False, validation=(RANKED, RANKED["x"] > 18)) == bound
    assert set(Scorer.predict.explain()["ifv"]) == {"a", "b"}
    expected = Scorer.predict.py_func(scorer, RANKED)
    np.testing.assert_array_equal(bound(RANKED), expected)
    np.testing.assert_array_equal(bound.top_k(RANKED, k=5), Scorer.predict.top_k(scorer, RANKED, k=5))
    bound.save(tmp_path / "scorer.willump")
    loaded = willump.load(tmp_path / "scorer.willump")
    np.testing.assert_array_equal(loaded(RANKED), expected)
    np.testing.assert_array_equal(cloudpickle.loads(cloudpickle.dumps(other.predict))(RANKED),
                                  Scorer.predict.py_func(other, RANKED))


def test_what_fit_learned_for_one_object_is_not_served_to_another(tmp_path):
    """The cascade and filter ``fit`` trained for one scorer's model answer only that scorer's calls (and
    its copy, saved with it); another scorer's calls are answered exactly, with a warning once."""
    fitted, other = Scorer(18), Scorer(3)
    labels = RANKED["x"] > 18
    fitted.predict.fit(RANKED, y=labels, validation=(RANKED, labels), progress=False, check_speed=False,
                       costs={"a": 1e-6, "b": 1e-5}, accuracy_loss=0.05)
    assert Scorer.predict.explain().attrs["summary"]["cascades"] == "on"
    Scorer.predict.reset_stats()
    fitted.predict(RANKED)
    assert Scorer.predict.stats["rows_small_model"] > 0
    with pytest.warns(WillumpWarning, match="fitted with other values of self"):
        np.testing.assert_array_equal(other.predict(RANKED), Scorer.predict.py_func(other, RANKED))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (said once)
        scores = Scorer.predict.py_func(other, RANKED)
        np.testing.assert_array_equal(other.predict.top_k(RANKED, k=7), np.argsort(-scores, kind="stable")[:7])
    fitted.predict.save(tmp_path / "fitted.willump")
    loaded = willump.load(tmp_path / "fitted.willump")
    loaded.reset_stats()
    loaded(RANKED)
    assert loaded.stats["rows_small_model"] > 0 and loaded.__self__ is not fitted


def test_each_copy_of_a_fitted_object_a_worker_unpickles_is_served(monkeypatch):
    """On a Dask worker each task brings its copy of the object, and the tasks share one function: every
    copy is the object fit was given, not only the last one to arrive."""
    fitted = Scorer(18)
    labels = RANKED["x"] > 18
    fitted.predict.fit(RANKED, y=labels, validation=(RANKED, labels), progress=False, check_speed=False,
                       costs={"a": 1e-6, "b": 1e-5}, accuracy_loss=0.05)
    shipped = cloudpickle.dumps(fitted.predict)
    monkeypatch.setattr(persistence, "in_dask_worker", lambda: True)
    first, second = cloudpickle.loads(shipped), cloudpickle.loads(shipped)
    assert first.__func__ is second.__func__ and first.__self__ is not second.__self__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for bound in (second, first, second):
            bound.reset_stats()
            bound(RANKED)
            assert bound.stats["rows_small_model"] > 0
    assert weakref.ref(first)() is first


SCORING = Scorer(18).model


def scored_by(df, model=SCORING, columns=("x", "y")):
    a = df[[columns[0]]].to_numpy()
    b = df[[columns[1]]].to_numpy()
    return model.predict_proba(np.column_stack([a, b]))[:, 1]


def test_a_model_passed_in_is_one_fit_was_given_or_the_call_is_exact():
    """A parameter's default stands for itself (pickled, the function's own default); another model passed
    in is answered exactly, with a warning once."""
    optimized = willump.optimize(scored_by)
    labels = RANKED["x"] > 18
    optimized.fit(RANKED, y=labels, validation=(RANKED, labels), progress=False, check_speed=False,
                  costs={"a": 1e-6, "b": 1e-5}, accuracy_loss=0.05)
    for function in (optimized, cloudpickle.loads(cloudpickle.dumps(optimized))):
        function.reset_stats()
        np.testing.assert_allclose(function(RANKED), scored_by(RANKED), atol=0.5)  # (cascaded: within the target)
        assert function.stats["rows_small_model"] > 0
    other = Scorer(3).model
    with pytest.warns(WillumpWarning, match="fitted with other values of columns, model"):
        np.testing.assert_array_equal(optimized(RANKED, other), scored_by(RANKED, other))
    np.testing.assert_array_equal(optimized(RANKED, columns=["x", "y"]), scored_by(RANKED, columns=["x", "y"]))


def test_unreadable_functions_raise_type_error():
    with pytest.raises(TypeError, match="lambda"):
        willump.optimize(lambda df: model.predict(df))
    with pytest.raises(TypeError, match="Python function"):
        willump.optimize(len)
    namespace = {}
    exec("def made(df):\n    return df\n", namespace)
    with pytest.raises(TypeError, match="cannot read the source"):
        willump.optimize(namespace["made"])


def test_strict_turns_warnings_into_errors():
    def looping(df):
        total = 0
        for column in ["x", "y"]:
            total = total + df[column]
        return model.predict(total.to_numpy().reshape(-1, 1))

    with pytest.raises(TypeError, match="line .*'for' statement"):
        willump.optimize(strict=True)(looping)


def test_no_warning_for_a_fully_understood_function():
    with warnings.catch_warnings():
        warnings.simplefilter("error", WillumpWarning)
        willump.optimize(pipeline)


def test_function_defined_in_a_notebook_cell():
    """IPython keeps each cell's source in linecache under a pseudo file name; so do we here."""
    import linecache

    cell = (
        "def cell_pipeline(df):\n"
        "    a = df[['x']].to_numpy()\n"
        "    b = df[['y']].to_numpy() * 2\n"
        "    return model.predict(np.hstack([a, b]))\n"
    )
    filename = "<ipython-input-7-0123456789ab>"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    namespace = {"np": np, "model": model}
    exec(compile(cell, filename, "exec"), namespace)
    optimized = willump.optimize(namespace["cell_pipeline"])
    assert [i.name for i in optimized.graph.ifvs] == ["a", "b"]
    np.testing.assert_array_equal(optimized(FRAME), namespace["cell_pipeline"](FRAME))
    with pytest.raises(KeyError) as error:
        optimized(FRAME[["x"]])
    import traceback

    cell_frames = [f for f in traceback.extract_tb(error.value.__traceback__) if f.filename == filename]
    assert [(f.lineno, f.name) for f in cell_frames] == [(3, "cell_pipeline"), (3, AS_WRITTEN)]  # (the call as written)


_SUMS = None  # (a LinearRegression, set by the test)


def _ranked(df):
    roots = df.transform(np.sqrt)  # (DataFrame.transform: a call site no kernel answers)
    return _SUMS.predict(roots.to_numpy())


def test_a_call_no_kernel_answers_does_not_keep_its_receiver_alive():
    """A batch's frame is freed when the call returns, not when the next call replaces it."""
    import gc
    import weakref

    from sklearn.linear_model import LinearRegression

    global _SUMS
    _SUMS = LinearRegression().fit(np.arange(10.0).reshape(5, 2), np.arange(5.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WillumpWarning)
        optimized = willump.optimize(_ranked)
    frame = pd.DataFrame({"a": [3.0, 1.0, 2.0], "b": [1.0, 5.0, 2.0]})
    assert np.array_equal(optimized(frame.copy()), _ranked(frame))
    assert np.array_equal(optimized(frame), _ranked(frame))  # (the site's cache is hit: same function)
    assert any(site.source == "df.transform(np.sqrt)" for site in optimized.executor.sites)
    gone = weakref.ref(frame)
    del frame
    gc.collect()
    assert gone() is None
