"""A saved function carries the tree arrays its kernels built from the tree models it holds
(LightGBM; XGBoost's in its own tests): ``willump.load`` does not read the models' trees
again (LightGBM's export of a large model's text is most of a set-up), what it carries is the model
as it was saved, and a save or load never fails or answers otherwise for it (carrying only spares a
reading)."""

import pickle
import textwrap

import cloudpickle
import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

import willump
from willump import persistence
from willump.api import OptimizedFunction
from willump.compile.sites import carried_builds

ROWS = 400


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(ROWS, 5)), columns=[f"f{i}" for i in range(5)])
    X.iloc[::7, 2] = np.nan
    y = (X["f0"] + np.sin(X["f1"]) + rng.normal(scale=0.3, size=ROWS) > 0).astype(int)
    return X, y


def _booster():
    X, y = _data()
    return lgb.train({"objective": "binary", "num_leaves": 15, "verbose": -1, "seed": 1}, lgb.Dataset(X, y),
                     num_boost_round=30)


def _classifier():
    X, y = _data()
    return lgb.LGBMClassifier(n_estimators=30, num_leaves=15, verbose=-1, random_state=1).fit(X, y)


def _optimized(kind):
    """(an optimized closure over a model (it travels by value: the pickle holds the model), the
    object its tree arrays are read from)."""
    if kind == "booster":
        booster = _booster()

        def predict(X):
            return booster.predict(X)
        return willump.optimize(predict), booster
    model = _classifier() if kind == "classifier" else _scikit_learn(kind)

    def predict(X):
        return model.predict_proba(X)[:, 1]
    return willump.optimize(predict), getattr(model, "booster_", model)


def _scikit_learn(kind):
    X, y = _data()
    if kind == "forest":
        return RandomForestClassifier(n_estimators=20, random_state=0).fit(X.fillna(0), y)
    return HistGradientBoostingClassifier(max_iter=20, categorical_features=[4]).fit(_with_codes(X), y)


def _with_codes(X):
    """``X`` with a column of category codes (HistGradientBoosting's categorical feature)."""
    return X.assign(f4=(X["f4"] > 0).astype(int))


def _kernels(optimized) -> list:
    """The kernels answering the function's call sites that hold an ensemble."""
    executor = optimized.executor or optimized._calls
    return [kernel for kernel in (site.found()[2] for site in executor.sites) if getattr(kernel, "ensemble", None)]


def _reloaded(payload: bytes) -> tuple:
    """(the function ``persistence`` builds from a payload, the state it was built from)."""
    state = persistence._unshipped(payload)[0]
    loaded = OptimizedFunction.__new__(OptimizedFunction)
    loaded.__setstate__({**state, "stats": None})
    return loaded, state


@pytest.mark.parametrize("kind", ["booster", "classifier"])
def test_a_saved_function_loads_its_carried_arrays_instead_of_reading_the_model(tmp_path, kind):
    optimized, _ = _optimized(kind)
    X, _ = _data(seed=3)
    path = tmp_path / "model.willump"
    optimized.save(path)
    loaded = willump.load(path)
    assert np.array_equal(loaded(X), optimized.py_func(X))
    assert np.array_equal(loaded(X.iloc[[4]]), optimized.py_func(X.iloc[[4]]))

    rebuilt, state = _reloaded(optimized._shipped(carry=True)[1])
    [(booster, key, ensemble)] = state["carried"]
    cells = [cell.cell_contents for cell in state["py_func"].__closure__]
    assert booster in [getattr(cell, "booster_", cell) for cell in cells]  # (the model read back)
    kernels = _kernels(rebuilt)
    assert kernels and all(kernel.ensemble is ensemble for kernel in kernels)  # (not built again)
    assert np.array_equal(rebuilt(X), optimized.py_func(X))


@pytest.mark.parametrize("kind", ["forest", "histogram"])
def test_scikit_learn_trees_are_read_once_and_read_again_where_loaded(tmp_path, kind):
    """Read from scikit-learn's arrays faster than carried arrays load: not carried."""
    optimized, model = _optimized(kind)
    X, _ = _data(seed=3)
    X = X.fillna(0) if kind == "forest" else _with_codes(X)
    kernels = _kernels(optimized)
    assert len(kernels) == 2 and kernels[0].ensemble is kernels[1].ensemble
    assert persistence._unshipped(optimized._shipped(carry=True)[1])[0]["carried"] == ()
    optimized.save(tmp_path / "trees.willump")
    assert np.array_equal(willump.load(tmp_path / "trees.willump")(X), optimized.py_func(X))


def test_what_a_pickle_or_dask_ships_carries_nothing():
    optimized, _ = _optimized("booster")
    assert persistence._unshipped(optimized._shipped()[1])[0]["carried"] == ()


def test_a_saved_payload_reads_as_the_state_alone_where_willump_is_older():
    """An older willump's ``pickle.loads`` of the payload stops after the state."""
    optimized, _ = _optimized("booster")
    state = pickle.loads(optimized._shipped(carry=True)[1])
    assert set(state) == {"py_func", "source", "options", "fitted"}


def test_trees_changed_in_place_before_a_save_are_saved_as_they_are(tmp_path):
    """``set_leaf_output`` is not seen by a kernel built before it (documented: decorate again); a
    save reads the trees again, so the loaded function answers as the saved model does."""
    optimized, booster = _optimized("booster")
    X, _ = _data(seed=4)
    before = booster.predict(X)
    leaf = booster.get_leaf_output(0, 0)
    booster.set_leaf_output(0, 0, leaf + 3.0)
    assert not np.array_equal(booster.predict(X), before)
    optimized.save(tmp_path / "changed.willump")
    loaded = willump.load(tmp_path / "changed.willump")
    assert np.array_equal(loaded(X), optimized.py_func(X))
    assert np.array_equal(loaded(X), booster.predict(X))


def _training():
    """(an optimized closure over a booster that may train on, the booster)."""
    X, y = _data()
    booster = lgb.train({"objective": "binary", "num_leaves": 7, "verbose": -1}, lgb.Dataset(X, y, free_raw_data=False),
                        num_boost_round=5, keep_training_booster=True)

    def predict(frame):
        return booster.predict(frame)

    return willump.optimize(predict), booster


def test_a_kernel_no_longer_valid_carries_nothing():
    """A booster trained on since its kernel was built: the loaded function reads it again."""
    X, _ = _data()
    optimized, booster = _training()
    booster.update()
    payload = optimized._shipped(carry=True)[1]
    assert persistence._unshipped(payload)[0]["carried"] == ()
    loaded, _ = _reloaded(payload)
    assert np.array_equal(loaded(X), booster.predict(X))


MODULE = '''
import lightgbm as lgb
import numpy as np
import pandas as pd
import willump

rng = np.random.default_rng(0)
X = pd.DataFrame(rng.normal(size=(300, 3)), columns=["a", "b", "c"])
booster = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, X["a"] * 2 + X["b"]),
                    num_boost_round=10)


@willump.optimize
def predict(frame):
    return booster.predict(frame)
'''


def test_a_model_a_module_loads_is_not_carried(tmp_path, monkeypatch):
    """A function its module decorates travels by name: its model is the module's, not the pickle's,
    and its arrays would travel as a copy of the model."""
    (tmp_path / "module_with_booster.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    import module_with_booster

    payload = module_with_booster.predict._shipped(carry=True)[1]
    assert persistence._unshipped(payload)[0]["carried"] == ()
    assert len(payload) < 20_000  # (neither the model nor its arrays)
    loaded = willump.load(_save(module_with_booster.predict, tmp_path))
    assert np.array_equal(loaded(module_with_booster.X), module_with_booster.booster.predict(module_with_booster.X))


def _save(optimized, folder):
    path = folder / "saved.willump"
    optimized.save(path)
    return path


def test_one_set_up_reads_a_model_once_and_another_reads_it_again():
    """The call sites of one model share what one set-up read; the next decoration reads the model
    again (the remedy for trees changed in place)."""
    optimized, booster = _optimized("booster")
    kernels = _kernels(optimized)
    assert len({id(kernel.ensemble) for kernel in kernels}) == 1
    again = willump.optimize(optimized.py_func)
    assert all(kernel.ensemble is not kernels[0].ensemble for kernel in _kernels(again))


def test_a_loaded_function_ships_its_state_alone():
    """Pickled again (``pickle``, Dask), a loaded function sends what a decorated one sends: not the
    arrays its file carried (nor keeps them twice), under the name the state has plainly pickled."""
    optimized, _ = _optimized("booster")
    name, saved = optimized._shipped(carry=True)
    loaded = persistence._built(OptimizedFunction, name, saved, None)
    identity, payload = loaded._shipped()
    state, end = persistence._unshipped(payload)
    assert state["carried"] == () and end == len(payload) < len(saved)
    assert identity == name == persistence.hashlib.sha256(payload).hexdigest() == optimized._shipped()[0]
    X, _ = _data(seed=5)
    assert np.array_equal(pickle.loads(pickle.dumps(loaded))(X), optimized.py_func(X))


def test_a_model_trained_while_it_is_saved_carries_nothing():
    """The arrays are read, then the model trains on before its pickle is written: they are left out."""
    X, _ = _data()
    optimized, booster = _training()
    carried = carried_builds(optimized.executor.sites)
    assert len(carried) == 1
    booster.update()
    state = optimized.__getstate__()
    del state["stats"]
    payload = persistence.shipped_state(state, carried)[1]
    assert persistence._unshipped(payload)[0]["carried"] == ()
    assert np.array_equal(_reloaded(payload)[0](X), booster.predict(X))


def test_carried_arrays_of_another_layout_or_unreadable_are_not_used():
    optimized, booster = _optimized("booster")
    state = optimized.__getstate__()
    del state["stats"]
    carried = [entry[:3] for entry in carried_builds(optimized.executor.sites)]
    for layout in [("willump carried arrays", "0.0.1", 1), persistence._carried_layout()]:
        with persistence.io.BytesIO() as stream:
            pickler = cloudpickle.CloudPickler(stream)
            pickler.dump(state)
            pickler.dump((layout, carried))
            payload = stream.getvalue()
        assert bool(persistence._unshipped(payload)[0]["carried"]) == (layout == persistence._carried_layout())
        assert persistence._unshipped(payload[:-20])[0]["carried"] == ()  # (cut short: read again)
