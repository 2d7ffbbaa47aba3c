"""An optimized function travels: pickled (pickle for module-level functions, cloudpickle for
``__main__``, notebooks and closures) or saved with ``save``/``willump.load``, before or after
``fit``, it answers exactly the same in a new process that cannot read its source file."""

import json
import pickle
import subprocess
import sys
import textwrap
import warnings

import cloudpickle
import numpy as np
import pytest

import willump
from willump import persistence
from willump.demo import make_messages

# A pipeline written as a data scientist writes it, in a script run as __main__: word and char
# TF-IDF, a length feature, logistic regression; fitted with cascades on generated messages.
SCRIPT = '''
import sys
import cloudpickle
import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

import willump
from willump.demo import make_messages

messages, labels = make_messages(3_000)
text = messages["message"].str.lower()
words = TfidfVectorizer().fit(text)
chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5)).fit(text)
lengths = np.log1p(messages["message"].str.len().to_numpy()).reshape(-1, 1)
model = LogisticRegression(max_iter=1000).fit(
    sp.hstack([words.transform(text), chars.transform(text), sp.csr_matrix(lengths)], format="csr"), labels)


@willump.optimize
def predict(df):
    text = df["message"].str.lower()
    word_features = words.transform(text)
    char_features = chars.transform(text)
    lengths = np.log1p(df["message"].str.len().to_numpy()).reshape(-1, 1)
    X = sp.hstack([word_features, char_features, sp.csr_matrix(lengths)], format="csr")
    return model.predict_proba(X)[:, 1]


def scorer(scale):
    @willump.optimize
    def scaled(df):
        counts = df["message"].str.len().to_numpy().reshape(-1, 1) * scale
        X = np.hstack([counts, counts ** 2])
        return model_of_counts.predict(X)
    return scaled


model_of_counts = LogisticRegression().fit(np.c_[np.arange(20.0), np.arange(20.0) ** 2], np.arange(20) % 2)
exact, closure = cloudpickle.dumps(predict), cloudpickle.dumps(scorer(0.5))
train, valid = slice(0, 2_000), slice(2_000, 3_000)
# (costs about as measured here, and no speed check: fit cascades on the word TF-IDF and the length whatever the load)
predict.fit(messages.iloc[train], y=labels[train], validation=(messages.iloc[valid], labels[valid]),
            accuracy_loss=0.01, costs={"word_features": 5e-7, "char_features": 5e-6, "lengths": 2e-7},
            check_speed=False, progress=False)
test, _ = make_messages(500, random_state=7)
out = sys.argv[1]
predict.save(out + "/fitted.willump")
with open(out + "/pickles", "wb") as file:
    cloudpickle.dump({"exact": exact, "closure": closure, "fitted": cloudpickle.dumps(predict), "test": test,
                      "answers": {"exact": predict.py_func(test), "closure": scorer(0.5).py_func(test),
                                  "fitted": predict(test), "fitted rows": [predict(test.iloc[[i]]) for i in range(20)]},
                      "summary": predict.explain().attrs["summary"]}, file)
'''

LOADER = '''
import pickle, sys, cloudpickle, numpy as np, willump
saved = pickle.load(open(sys.argv[1] + "/pickles", "rb"))
test, answers = saved["test"], saved["answers"]
exact, closure = cloudpickle.loads(saved["exact"]), cloudpickle.loads(saved["closure"])
for fitted in (cloudpickle.loads(saved["fitted"]), willump.load(sys.argv[1] + "/fitted.willump")):
    assert isinstance(fitted, willump.OptimizedFunction)
    assert fitted.explain().attrs["summary"] == saved["summary"], (fitted.explain().attrs["summary"], saved["summary"])
    result = fitted(test)
    assert result.dtype == answers["fitted"].dtype and np.array_equal(result, answers["fitted"])
    assert all(np.array_equal(fitted(test.iloc[[i]]), row) for i, row in enumerate(answers["fitted rows"]))
    if saved["summary"]["cascades"] == "on":
        assert fitted.stats["rows_small_model"] > 0, fitted.stats
for name, function in [("exact", exact), ("closure", closure)]:
    result = function(test)
    assert result.dtype == answers[name].dtype and np.array_equal(result, answers[name]), name
    assert function.executor is not None, name  # (the graph, not the function run unmodified)
print("loaded", saved["summary"]["cascades"])
'''


def _run(code_or_file, *arguments, cwd):
    command = [sys.executable, *(["-c", code_or_file] if "\n" in code_or_file else [code_or_file]), *arguments]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_fitted_function_from_a_script_loads_in_a_process_that_cannot_read_the_script(tmp_path):
    script, out, elsewhere = _folders(tmp_path, SCRIPT)
    _run(str(script), str(out), cwd=script.parent)
    script.unlink()
    assert _run(LOADER, str(out), cwd=elsewhere).strip() == "loaded on"


def _folders(tmp_path, script_text):
    """(a script holding ``script_text`` in a folder of its own, a folder for what it writes, another
    folder for the process that loads it)."""
    folders = [tmp_path / name for name in ("script", "out", "elsewhere")]
    for folder in folders:
        folder.mkdir()
    script = folders[0] / "pipeline.py"
    script.write_text(script_text)
    return script, folders[1], folders[2]


# A module-level function decorated where it is defined: plain pickle saves it by its module and
# name (the module attribute is the OptimizedFunction, not the function) with its fitted state.
MODULE = '''
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
import willump

rng = np.random.default_rng(0)
TRAIN = pd.DataFrame({"a": rng.normal(size=600), "b": rng.normal(size=600), "c": rng.normal(size=600)})
LABELS = (TRAIN["a"] + 0.1 * TRAIN["b"] > 0).to_numpy().astype(int)
model = LogisticRegression().fit(np.c_[TRAIN["a"], TRAIN["b"], np.sin(TRAIN["c"])], LABELS)


@willump.optimize
def predict(df):
    a = df[["a"]].to_numpy()
    b = df[["b"]].to_numpy()
    c = np.sin(df[["c"]].to_numpy())
    return model.predict(np.hstack([a, b, c]))
'''


def test_a_module_level_function_pickles_with_pickle_before_and_after_fit(tmp_path, monkeypatch):
    (tmp_path / "scoring_module.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import scoring_module

    unfitted = pickle.dumps(scoring_module.predict)
    fitted = pickle.loads(unfitted).fit(scoring_module.TRAIN, y=scoring_module.LABELS, progress=False,
                                        validation=(scoring_module.TRAIN, scoring_module.LABELS))
    test = scoring_module.TRAIN.sample(200, random_state=1)
    expected = {"unfitted": scoring_module.predict.py_func(test), "fitted": fitted(test)}
    (tmp_path / "pickles").write_bytes(pickle.dumps({"unfitted": unfitted, "fitted": pickle.dumps(fitted),
                                                      "test": test, "expected": expected,
                                                      "summary": fitted.explain().attrs["summary"]}))
    loaded = _run(textwrap.dedent('''
        import pickle, sys, numpy as np
        saved = pickle.load(open(sys.argv[1], "rb"))
        for name in ("unfitted", "fitted"):
            function = pickle.loads(saved[name])
            assert np.array_equal(function(saved["test"]), saved["expected"][name]), name
        assert function.explain().attrs["summary"] == saved["summary"]
        print(function.explain().attrs["summary"]["fitted"])
    '''), str(tmp_path / "pickles"), cwd=tmp_path)
    assert loaded.strip() == "True"
    (tmp_path / "scoring_module.py").write_text(MODULE.replace("np.sin", "np.cos"))  # (edited since)
    _run(textwrap.dedent('''
        import pickle, sys, numpy as np, pytest
        saved = pickle.load(open(sys.argv[1], "rb"))
        with pytest.raises(ValueError, match="has changed since it was fitted"):
            pickle.loads(saved["fitted"])
        unfitted = pickle.loads(saved["unfitted"])  # (the module's definition as it is now)
        assert np.array_equal(unfitted(saved["test"]), unfitted.py_func(saved["test"]))
        assert not np.array_equal(unfitted(saved["test"]), saved["expected"]["unfitted"])
    '''), str(tmp_path / "pickles"), cwd=tmp_path)


def test_a_module_cloudpickle_pickles_by_value_needs_no_import_where_it_is_loaded(tmp_path, monkeypatch):
    (tmp_path / "module_by_value.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import module_by_value

    test = module_by_value.TRAIN.head(50)
    cloudpickle.register_pickle_by_value(module_by_value)
    try:
        pickled = cloudpickle.dumps({"function": module_by_value.predict, "test": test,
                                     "expected": module_by_value.predict.py_func(test)})
    finally:
        cloudpickle.unregister_pickle_by_value(module_by_value)
    (tmp_path / "by value").write_bytes(pickled)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _run(textwrap.dedent('''
        import pickle, sys, numpy as np
        saved = pickle.load(open(sys.argv[1], "rb"))
        assert "module_by_value" not in sys.modules
        assert np.array_equal(saved["function"](saved["test"]), saved["expected"])
    '''), str(tmp_path / "by value"), cwd=elsewhere)


def _saved(tmp_path):
    optimized = willump.optimize(_lengths)
    path = tmp_path / "lengths.willump"
    optimized.save(path)
    return path


def _lengths(df):
    counts = df["message"].str.len().to_numpy().reshape(-1, 1)
    return _TOTAL.predict(np.hstack([counts, counts]))


class _Total:
    def predict(self, X):
        return X.sum(axis=1)


_TOTAL = _Total()


def test_save_and_load_in_this_process(tmp_path):
    path = _saved(tmp_path)
    loaded = willump.load(path)
    messages, _ = make_messages(50)
    assert np.array_equal(loaded(messages), _lengths(messages))
    assert str(loaded.graph) == str(willump.optimize(_lengths).graph)
    assert list(tmp_path.iterdir()) == [path]  # (no temporary file left)


def test_a_saved_file_has_the_mode_any_new_file_gets(tmp_path):
    path = _saved(tmp_path)
    other = tmp_path / "other"
    other.write_bytes(b"")
    assert path.stat().st_mode & 0o777 == other.stat().st_mode & 0o777


def test_a_file_that_is_not_willumps_is_named(tmp_path):
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="not a willump file"):
        willump.load(path)


@pytest.mark.parametrize("keep", [5, 20, -1, -100])
def test_a_truncated_file_is_named(tmp_path, keep):
    path = _saved(tmp_path)
    content = path.read_bytes()
    path.write_bytes(content[:keep])
    with pytest.raises(ValueError, match="truncated"):
        willump.load(path)


def test_a_corrupted_payload_is_named(tmp_path):
    path = _saved(tmp_path)
    content = bytearray(path.read_bytes())
    content[-10] ^= 0xFF
    path.write_bytes(bytes(content))
    with pytest.raises(ValueError, match="corrupted"):
        willump.load(path)


def _rewrite_header(path, change):
    content = path.read_bytes()
    start = len(persistence.SIGNATURE) + 4
    length = int.from_bytes(content[len(persistence.SIGNATURE):start], "little")
    header = json.loads(content[start:start + length])
    change(header)
    encoded = json.dumps(header).encode()
    path.write_bytes(persistence.SIGNATURE + len(encoded).to_bytes(4, "little") + encoded + content[start + length:])


def test_a_newer_format_asks_for_a_newer_willump(tmp_path):
    path = _saved(tmp_path)
    _rewrite_header(path, lambda header: header.update(format=persistence.FORMAT + 1))
    with pytest.raises(ValueError, match="newer willump.*upgrade willump"):
        willump.load(path)


def test_other_versions_warn_and_name_each_package(tmp_path):
    path = _saved(tmp_path)
    _rewrite_header(path, lambda header: header["versions"].update(numpy="1.0.0", lightgbm="3.0.0"))
    with pytest.warns(willump.InconsistentVersionWarning, match="numpy 1.0.0") as caught:
        loaded = willump.load(path)
    warning = caught[0].message
    assert set(warning.versions) == {"numpy", "lightgbm"}
    assert warning.versions["numpy"] == ("1.0.0", np.__version__)
    messages, _ = make_messages(20)
    assert np.array_equal(loaded(messages), _lengths(messages))


def test_the_same_versions_load_without_warning(tmp_path):
    path = _saved(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        willump.load(path)


def test_a_failed_save_leaves_the_file_that_was_there(tmp_path):
    path = _saved(tmp_path)
    before = path.read_bytes()
    unpicklable = willump.optimize(_lengths)
    unpicklable.options = {**unpicklable.options, "lock": __import__("threading").Lock()}
    with pytest.raises(TypeError):
        unpicklable.save(path)
    assert path.read_bytes() == before
    assert list(tmp_path.iterdir()) == [path]


def test_a_file_holding_something_else_is_refused(tmp_path):
    path = tmp_path / "other.willump"
    persistence.save(_TOTAL, path)
    _rewrite_header(path, lambda header: header.update(object="willump.api.OptimizedFunction"))
    with pytest.raises(ValueError, match="_Total, not the willump.api.OptimizedFunction"):
        willump.load(path)


# A function reading feature tables in Redis, with caches: the tables travel as their server's
# address and options and reconnect in the new process; the caches start empty there.
REDIS_SCRIPT = '''
import sys
import cloudpickle
import numpy as np
import pandas as pd
import redis
from sklearn.linear_model import LogisticRegression
import willump

client = redis.Redis(host=sys.argv[2], port=int(sys.argv[3]))
rng = np.random.default_rng(0)
users = willump.RedisTable(client, "users", key="userId")
songs = willump.RedisTable(client, "songs", key="songId")
users.put(pd.DataFrame({"userId": np.arange(100), "age": rng.integers(15, 70, 100),
                        "plays": rng.exponential(50.0, 100)}))
songs.put(pd.DataFrame({"songId": np.arange(300), "length": rng.normal(200.0, 40.0, 300),
                        "year": rng.integers(1960, 2024, 300).astype(float)}))
plays = pd.DataFrame({"userId": rng.integers(0, 110, 400), "songId": rng.integers(0, 320, 400)})
model = LogisticRegression().fit(
    np.hstack([users.lookup(plays["userId"]).fillna(0).to_numpy(dtype=float),
               songs.lookup(plays["songId"]).fillna(0).to_numpy(dtype=float)]), rng.integers(0, 2, 400))


@willump.optimize(cache_size=1_000)
def predict(df):
    u = users.lookup(df["userId"]).fillna(0)
    s = songs.lookup(df["songId"]).fillna(0)
    X = np.hstack([u.to_numpy(dtype=float), s.to_numpy(dtype=float)])
    return model.predict_proba(X)[:, 1]


test = plays.head(100)
out = sys.argv[1]
predict(test)  # (its caches fill here; they do not travel)
predict.save(out + "/tables.willump")
with open(out + "/pickles", "wb") as file:
    cloudpickle.dump({"function": cloudpickle.dumps(predict), "test": test,
                      "answers": predict.py_func(test), "rows": [predict.py_func(test.iloc[[i]]) for i in range(10)]},
                     file)
'''

REDIS_LOADER = '''
import pickle, sys, cloudpickle, numpy as np, willump
saved = pickle.load(open(sys.argv[1] + "/pickles", "rb"))
for function in (cloudpickle.loads(saved["function"]), willump.load(sys.argv[1] + "/tables.willump")):
    function.reset_stats()
    assert np.array_equal(function(saved["test"]), saved["answers"])
    assert function.stats["remote_keys"] > 0, function.stats  # (fetched anew: no cache travelled)
    assert all(np.array_equal(function(saved["test"].iloc[[i]]), row) for i, row in enumerate(saved["rows"]))
print("loaded")
'''


def test_a_function_holding_redis_tables_loads_in_a_new_process(tmp_path, redis_server, redis_client):
    script, out, elsewhere = _folders(tmp_path, REDIS_SCRIPT)  # (redis_client: an empty database)
    host, port = redis_server
    _run(str(script), str(out), host, str(port), cwd=script.parent)
    script.unlink()
    assert "loaded" in _run(REDIS_LOADER, str(out), cwd=elsewhere)


def _fitted_counts():
    """A closure fitted with cascades on generated messages (so it pickles by value)."""
    from sklearn.linear_model import LogisticRegression

    messages, labels = make_messages(3000, random_state=5)
    counts = np.column_stack([messages["message"].str.len(), messages["message"].str.count(" ")]) * 1.0
    model = LogisticRegression().fit(counts, labels)

    def counted(df):
        length = df["message"].str.len().to_numpy().reshape(-1, 1) * 1.0
        spaces = df["message"].str.count(" ").to_numpy().reshape(-1, 1) * 1.0
        return model.predict_proba(np.hstack([length, spaces]))[:, 1]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return willump.optimize(counted).fit(messages, y=labels, progress=False, check_speed=False), messages


def test_a_pickle_names_the_state_it_holds_and_a_copy_pickled_again_keeps_the_name():
    """What a Dask scheduler does (unpickle, pickle again per task) keeps the identity workers share by."""
    fitted, _ = _fitted_counts()
    identity, payload = fitted._shipped()
    assert fitted._shipped() == (identity, payload)  # (pickled once per state)
    copy = cloudpickle.loads(cloudpickle.dumps(fitted))
    assert copy._shipped() == (identity, payload)
    assert cloudpickle.loads(cloudpickle.dumps(copy))._shipped()[0] == identity


def test_set_threshold_and_fit_change_the_name():
    fitted, messages = _fitted_counts()
    names = {fitted._shipped()[0]}
    fitted.set_threshold(0.99)
    names.add(fitted._shipped()[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted.fit(messages, y=messages.index % 2, progress=False, check_speed=False)
    names.add(fitted._shipped()[0])
    assert len(names) == 3
    assert cloudpickle.loads(cloudpickle.dumps(fitted)).explain().attrs["summary"] == fitted.explain().attrs["summary"]


def test_outside_a_dask_worker_every_unpickle_is_its_own_function():
    fitted, messages = _fitted_counts()
    payload = cloudpickle.dumps(fitted)
    first, second = cloudpickle.loads(payload), cloudpickle.loads(payload)
    assert first is not second and first._fitted is not second._fitted
    first(messages.head(10))
    assert first.stats["rows_seen"] == 10 and second.stats["rows_seen"] == 0
    import copy

    assert copy.deepcopy(fitted) is not fitted and copy.deepcopy(fitted)._fitted is not fitted._fitted


def test_a_pickle_written_before_pickles_were_named_still_loads():
    """Pickles and files written by willump 0.1.0 before this change hold the state dict alone."""
    fitted, messages = _fitted_counts()

    class OldPickler(cloudpickle.Pickler):
        def reducer_override(self, obj):
            if isinstance(obj, willump.api.OptimizedFunction):
                import copyreg

                return copyreg.__newobj__, (type(obj),), obj.__getstate__()
            return super().reducer_override(obj)

    import io

    buffer = io.BytesIO()
    OldPickler(buffer).dump(fitted)
    loaded = pickle.loads(buffer.getvalue())
    assert np.array_equal(loaded(messages), fitted(messages))
    assert np.array_equal(cloudpickle.loads(cloudpickle.dumps(loaded))(messages), fitted(messages))
