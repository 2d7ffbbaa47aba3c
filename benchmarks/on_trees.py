"""Tree ensembles, alone and in held-out pipelines (issue 31): ``python -m benchmarks trees [--quick]
[--out DIR] [--compare-venv PATH]``.

Models alone: the LightGBM models of the music, credit and tracking workloads (100 small trees each),
on the features their pipelines compute for the test rows (the workload run with its model standing
aside), and a large ensemble (``credit-large``: 1,000 trees of up to 63 leaves on the 5,000 credit
applications' numbers and category codes), the test rows repeated to ``batch_rows`` for the batch. Each is answered, in this process, by LightGBM's
``Booster.predict`` on a float64 array, by the scikit-learn API (``model.predict_proba(X)[:, 1]``) on
the feature frame and on the array, and by ``willump.optimize`` of a function that is only that call,
given the frame and given the array, and by willump's tree kernel alone (``willump-kernel``: the
booster read into ``willump.compile.forest``'s arrays, as lleaves' and treelite's predictors are
measured). Single rows: p50 and p90 latency (µs) of calls on one row at a time, each method called
50 times in a row, the methods taking turns (each in its steady state, as a process serving one
model); batch: the median time of repeated runs, the methods called alternately (ms, rows/s). Every
answer, single rows and batch, is compared to the bit with ``Booster.predict``'s. Batches run with
LightGBM's default threads (OpenMP, every core): the issue's batch target is against its multi-threaded
predict. Single rows run with OpenMP limited to one thread: a row gains nothing from a team, and on a
loaded 2-core machine the team's busy-waiting made a 30 µs ``Booster.predict`` of one row take 15 ms.

Pipelines: scikit-learn's ``HistGradientBoostingClassifier`` and ``RandomForestClassifier`` as users
write them on the credit applications (the zoo's two tree entries and a ``Pipeline`` of a
``ColumnTransformer`` and a forest), undecorated and decorated: batch and single-row speed-ups, and
whether the decorated answers equal the undecorated ones to the bit. OpenMP pools are limited to one
thread there, as in the zoo (their busy-waiting made HistGradientBoosting's times swing tenfold).

Elsewhere: with ``--compare-venv PATH`` (or ``$WILLUMP_TREES_VENV``), each model is saved
(``Booster.save_model``) and ``benchmarks/trees_elsewhere.py`` runs in that virtualenv's python on the
same rows: LightGBM of that environment, lleaves and treelite (compiled by tl2cgen, and its GTIL
interpreter) where installed there, their compile times apart. willump measures ``willump.optimize``
end to end and nothing of its internals, so its rows change by themselves as its tree kernels change.
"""

import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from lightgbm import Booster, LGBMClassifier
from sklearn.base import is_classifier
from sklearn.compose import ColumnTransformer, make_column_selector, make_column_transformer
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import (
    AdaBoostClassifier, BaggingClassifier, HistGradientBoostingClassifier, RandomForestClassifier, StackingClassifier, VotingClassifier,
)
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OrdinalEncoder, StandardScaler
from threadpoolctl import threadpool_limits

import willump
from willump.compile.parallel import Workers
from willump.compile.lgbmtext import model_text
from willump.compile.trees import lightgbm_ensemble
from benchmarks.measure import _rounds, blocked_rounds, timed
from benchmarks.run import machine_facts, write_document
from benchmarks.workloads import WORKLOADS
from benchmarks.workloads.common import FeatureCapture, Split, encode_categories, split
from benchmarks.zoo import tabular
from benchmarks.zoo.common import Entry, FittedModels, difference
from benchmarks.zoo.run import _first_difference

LARGE_MODEL = "credit-large"
MODELS = ("music", "credit", "tracking", LARGE_MODEL)
PIPELINES = ("credit_hist_gradient_boosting", "credit_native_categories", "credit_pandas_output",
             "credit_bureau_forest", "credit_forest_pipeline", "credit_default_forest_pipeline", "credit_voting",
             "credit_stacking", "credit_calibrated", "credit_bagging", "credit_adaboost")
BOOSTER = "lightgbm-booster"  # the reference every model's answers are compared with
KERNEL = "willump-kernel"  # the tree kernel alone, as the other environment's predictors are measured
VENV_VARIABLE = "WILLUMP_TREES_VENV"
ELSEWHERE = Path(__file__).with_name("trees_elsewhere.py")
PIPELINE_OPENMP_THREADS = 1
EXACT_SINGLE_ROWS = 50  # single rows whose answers are compared, besides the batch


@dataclass(frozen=True)
class TreeSettings:
    """How much data and how many repetitions."""

    build_rows: int | None  # cap on the rows each workload and the credit data are built from; None: all
    batch_rows: int  # rows of a batch: the test rows repeated
    single_rows: int  # single-row calls per method
    batch_repeats: int  # timed batches per method (median)
    quick: bool
    many_trees: int  # trees of the model whose build alone is measured (issue 31: 10,000)


FULL = TreeSettings(build_rows=None, batch_rows=10_000, single_rows=1000, batch_repeats=7, quick=False,
                    many_trees=10_000)
QUICK = TreeSettings(build_rows=4000, batch_rows=2000, single_rows=200, batch_repeats=3, quick=True, many_trees=200)
BUILD_REPEATS = 3  # builds and loads timed per model (the fastest kept)


def run_trees(settings: TreeSettings, out: Path, models=MODELS, pipelines=PIPELINES,
              compare_venv: Path | None = None, log=print) -> dict:
    """Measure the ``models`` and ``pipelines``; write ``out/trees.json``; return its document."""
    start = time.perf_counter()
    load_before = os.getloadavg()
    described, records, elsewhere, builds = {}, [], {}, {}
    with tempfile.TemporaryDirectory(prefix="willump-trees-") as directory:
        for name in models:
            model, features = model_and_features(name, settings.build_rows)
            described[name] = describe_model(model, features)
            builds[name] = measure_build(model.booster_)
            records += measure_model(name, model, features, settings)
            log(f"trees: {name}'s model measured ({described[name]['trees']} trees)")
            if compare_venv is not None:
                elsewhere[name] = measure_elsewhere(compare_venv, model, features, settings, Path(directory))
                records += elsewhere_records(name, elsewhere[name])
                log(f"trees: {name}'s model measured in {compare_venv}")
    many = many_trees_model(settings.build_rows, settings.many_trees)
    builds[f"{settings.many_trees:,}-trees"] = measure_build(many.booster_)
    log(f"trees: the build of {settings.many_trees:,} trees measured")
    with threadpool_limits(limits=PIPELINE_OPENMP_THREADS, user_api="openmp"):
        for entry in credit_pipelines(settings.build_rows, pipelines):
            records += measure_pipeline(entry, settings)
            log(f"trees: {entry.name} measured")
    document = {
        "benchmark": "trees",
        "settings": {**asdict(settings), "pipeline_openmp_threads": PIPELINE_OPENMP_THREADS},
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "machine": machine_facts(),
        "models": described,
        "elsewhere": {name: {k: v for k, v in found.items() if k != "results"} for name, found in elsewhere.items()},
        "records": records,
        "builds": builds,
    }
    return write_document(out, "trees", document, start)


def measure_build(booster) -> dict:
    """Seconds (the fastest of ``BUILD_REPEATS``) willump takes to build its arrays from the booster,
    of which LightGBM writing its model text once (``model_text``: willump's input; the rest is
    willump reading it); LightGBM's ``model_to_string`` (which writes a model over 1 MB twice) and
    LightGBM's own load of that text; then a function that is only ``booster.predict(X)``:
    ``willump.optimize`` of it (its set-up), ``willump.load`` of it saved (the booster and the arrays
    it carries; checked on rows against the booster's answers) and ``pickle.loads`` of the booster
    alone (LightGBM's load as a pickled model's)."""
    text = booster.model_to_string()
    willump_build = min(timed(lightgbm_ensemble, booster)[0] for _ in range(BUILD_REPEATS))
    export = min(timed(model_text, booster)[0] for _ in range(BUILD_REPEATS))
    to_string = min(timed(booster.model_to_string)[0] for _ in range(BUILD_REPEATS))
    load = min(timed(lambda: Booster(model_str=text))[0] for _ in range(BUILD_REPEATS))
    pickled = pickle.dumps(booster)
    pickle_load = min(timed(pickle.loads, pickled)[0] for _ in range(BUILD_REPEATS))

    def predict(X):
        return booster.predict(X)

    decorate = min(timed(willump.optimize, predict)[0] for _ in range(BUILD_REPEATS))
    rows = np.random.default_rng(0).normal(size=(50, booster.num_feature()))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "predict.willump"
        willump.optimize(predict).save(path)
        saved_load = min(timed(willump.load, path)[0] for _ in range(BUILD_REPEATS))
        if not np.array_equal(willump.load(path)(rows), booster.predict(rows)):
            raise AssertionError("a loaded function answered otherwise than its booster")
    return {"trees": booster.num_trees(), "willump_build_s": willump_build, "export_s": export,
            "model_to_string_s": to_string, "lightgbm_load_s": load, "lightgbm_pickle_load_s": pickle_load,
            "willump_optimize_s": decorate, "willump_load_s": saved_load}


def many_trees_model(rows: int | None, trees: int, random_state: int = 0):
    """A LightGBM ensemble of ``trees`` trees of up to 31 leaves on the credit applications' numbers
    and category codes (its build alone is measured: issue 31 asks for 10,000 trees)."""
    applications = tabular._applications(rows, random_state)
    features = encode_categories(applications[tabular.NUMERIC + tabular.CATEGORICAL])
    return FittedModels(__file__, rows, random_state)(f"credit-{trees}-trees", lambda: LGBMClassifier(
        n_estimators=trees, learning_rate=0.01, min_child_samples=5, random_state=random_state, verbose=-1,
        deterministic=True, force_row_wise=True).fit(features, applications["TARGET"]))


def model_and_features(name: str, rows: int | None) -> tuple:
    """(the fitted model named ``name``, the feature frame of its test rows)."""
    if name == LARGE_MODEL:
        return large_credit_model(rows)
    return workload_model_and_features(WORKLOADS[name], rows)


def workload_model_and_features(workload_module, rows: int | None) -> tuple:
    """(the workload's fitted model, the feature frame its pipeline gives the model for the test rows):
    the pipeline run with a :class:`FeatureCapture` in its model's place, then the model put back."""
    workload = workload_module.build(rows)
    cell = workload.predict.__closure__[workload.predict.__code__.co_freevars.index("model")]
    model = cell.cell_contents
    cell.cell_contents = FeatureCapture()
    try:
        features = workload.predict(workload.test_inputs)
    finally:
        cell.cell_contents = model
    return model, features.reset_index(drop=True)


def large_credit_model(rows: int | None, random_state: int = 0) -> tuple:
    """(a LightGBM ensemble of 1,000 trees of up to 63 leaves trained on the 5,000 credit applications'
    numbers and category codes, the feature frame of its test rows): the workloads' models are 100
    small trees, a size where a call's fixed costs dominate; this one is the per-tree work's."""
    applications = tabular._applications(rows, random_state)
    features = encode_categories(applications[tabular.NUMERIC + tabular.CATEGORICAL])
    data = split(features, applications["TARGET"], random_state)
    model = FittedModels(__file__, rows, random_state)(LARGE_MODEL, lambda: LGBMClassifier(
        n_estimators=1000, num_leaves=63, min_child_samples=5, learning_rate=0.05, random_state=random_state,
        verbose=-1, deterministic=True, force_row_wise=True).fit(data.train_inputs, data.y_train))
    return model, data.test_inputs


def describe_model(model, features: pd.DataFrame) -> dict:
    """What the ensemble is: trees, leaves, objective; and the rows it is measured on."""
    dumped = model.booster_.dump_model()
    return {
        "estimator": type(model).__name__,
        "objective": model.booster_.params.get("objective", dumped.get("objective", "")),
        "trees": model.booster_.num_trees(),
        "leaves": sum(tree["num_leaves"] for tree in dumped["tree_info"]),
        "features": features.shape[1],
        "test_rows": len(features),
    }


def scoring_function(model):
    """The function willump is given: nothing but the model's call, as a pipeline's last line writes it."""
    if is_classifier(model):
        def score(X):
            return model.predict_proba(X)[:, 1]
    else:
        def score(X):
            return model.predict(X)
    return score


def measure_model(name: str, model, features: pd.DataFrame, settings: TreeSettings) -> list[dict]:
    """One record per method of answering ``model`` on ``features``: timings and exactness."""
    inputs = model_inputs(features, settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the scikit-learn API warns of an array without the fitted names
        decorated = {kind: willump.optimize(scoring_function(model)) for kind in inputs}
        first_calls = {kind: timed(function, inputs[kind][1][0])[0] for kind, function in decorated.items()}
        plain = scoring_function(model)
        methods = {  # name: (input kind, the function answering it)
            BOOSTER: ("array", model.booster_.predict),
            "sklearn-api": ("frame", plain),
            "sklearn-api-array": ("array", plain),
            "willump": ("frame", decorated["frame"]),
            "willump-array": ("array", decorated["array"]),
            KERNEL: ("array", kernel_function(model)),
        }
        with threadpool_limits(limits=1, user_api="openmp"):  # (see the module's docstring)
            callers = {m: _row_caller(function, inputs[kind][1]) for m, (kind, function) in methods.items()}
            single = blocked_rounds(callers, list(range(settings.single_rows)))
        batch = _rounds({m: _batch_caller(function, inputs[kind][0]) for m, (kind, function) in methods.items()},
                        [None] * settings.batch_repeats)
        reference = model.booster_.predict(inputs["array"][0])
        exactness = {m: _model_exactness(function, *inputs[kind], reference) for m, (kind, function) in methods.items()}
    records = []
    for method, (kind, _) in methods.items():
        record = _timing_record(single[method], batch[method], settings.batch_rows)
        record |= {"part": "model", "model": name, "method": method, "input": kind, "environment": "main",
                   "compile_seconds": None, "exact": exactness[method] is None, "difference": exactness[method]}
        if method in ("willump", "willump-array"):  # (the decorated functions)
            record |= {"first_call_seconds": first_calls[kind], "status": _model_call_status(decorated[kind])}
        records.append(record)
    return _with_ratios(records)


def kernel_function(model):
    """willump's tree kernel alone (``lightgbm_ensemble``'s ``Ensemble`` of the booster, batches split over
    every core), as lleaves' and treelite's predictors are measured: the float64 array in, the
    booster's predictions out."""
    ensemble, workers = lightgbm_ensemble(model.booster_), Workers(os.cpu_count() or 1)

    def predict(X):
        out = ensemble.predict(X, workers)
        return out[:, 0] if out.shape[1] == 1 else out
    return predict


def model_inputs(features: pd.DataFrame, settings: TreeSettings) -> dict:
    """{"frame" or "array": (the batch, the single rows)}: :func:`batch_and_rows` of the feature frame,
    as frames and as C-contiguous float64 arrays."""
    batch, rows = batch_and_rows(features, settings)
    return {"frame": (batch, rows), "array": (_float64(batch), [_float64(row) for row in rows])}


def _float64(frame: pd.DataFrame) -> np.ndarray:
    return np.ascontiguousarray(frame.to_numpy(dtype=np.float64))


def batch_and_rows(frame: pd.DataFrame, settings: TreeSettings) -> tuple:
    """(``frame``'s rows repeated to ``batch_rows`` rows, ``single_rows`` one-row frames of them in turn)."""
    positions = np.resize(np.arange(len(frame)), settings.batch_rows)
    turns = np.arange(settings.single_rows) % len(frame)
    return frame.iloc[positions].reset_index(drop=True), [frame.iloc[[i]] for i in turns]


def _row_caller(function, rows: list):
    return lambda i: function(rows[i])


def _batch_caller(function, batch):
    return lambda _: function(batch)


def _timing_record(single_seconds: list, batch_seconds: list, batch_rows: int) -> dict:
    batch_median = float(np.median(batch_seconds))
    return {"single_p50_us": float(np.percentile(single_seconds, 50)) * 1e6,
            "single_p90_us": float(np.percentile(single_seconds, 90)) * 1e6,
            "batch_ms": batch_median * 1e3, "batch_rows_per_s": batch_rows / batch_median}


def _model_exactness(function, batch, rows: list, reference: np.ndarray) -> str | None:
    """How ``function``'s answers (the batch, then single rows) differ from ``Booster.predict``'s
    (``reference``, of the batch); None when they are the same to the bit."""
    problem = difference(np.asarray(function(batch)), reference)
    if problem is not None:
        return f"batch: {problem}"
    chosen = rows[:EXACT_SINGLE_ROWS]
    answers = np.concatenate([np.asarray(function(row)) for row in chosen])
    problem = difference(answers, reference[: len(chosen)])
    return None if problem is None else f"single rows: {problem}"


def _model_call_status(decorated) -> str:
    """How willump answers the model's call, as ``explain_compilation()`` says."""
    calls = decorated.explain_compilation()
    model_calls = calls[calls["call"].astype(str).str.contains(r"\.(?:predict\w*|decision_function|score_samples)\(")]
    described = [f"{call.status} ({call.compiled_calls} of {call.calls} calls)" for call in model_calls.itertuples()]
    return "; ".join(described) or "not listed by explain_compilation()"


def _with_ratios(records: list[dict]) -> list[dict]:
    """Each record's speed-ups over the reference of its environment (LightGBM's Booster there):
    single-row p50 and batch."""
    references = {r["environment"]: r for r in records if r["method"] in (BOOSTER, "lightgbm")}
    for r in records:
        reference = references.get(r["environment"])
        r["single_speedup"] = None if reference is None else reference["single_p50_us"] / r["single_p50_us"]
        r["batch_speedup"] = None if reference is None else reference["batch_ms"] / r["batch_ms"]
    return records


def compare_venv_from(argument: Path | None) -> Path | None:
    """The virtualenv given by ``--compare-venv`` or ``$WILLUMP_TREES_VENV``; None for neither."""
    given = argument or os.environ.get(VENV_VARIABLE)
    if not given:
        return None
    python = Path(given) / "bin" / "python"
    if not python.is_file():
        raise ValueError(f"{given} is not a virtualenv: {python} does not exist; create it with "
                         f"'python -m venv {given} && {given}/bin/pip install lleaves \"llvmlite<0.45\" lightgbm numpy "
                         "treelite tl2cgen'")
    return Path(given)


def measure_elsewhere(venv: Path, model, features: pd.DataFrame, settings: TreeSettings, directory: Path) -> dict:
    """``trees_elsewhere.py`` run by ``venv``'s python on the model's file and the same rows: its document."""
    model_file, rows_file, expected_file, out = (directory / f"{id(model)}-{part}" for part in
                                                 ("model.txt", "features.npy", "expected.npy", "out.json"))
    array = features.to_numpy(dtype=np.float64)
    model.booster_.save_model(model_file)
    np.save(rows_file, array)
    np.save(expected_file, model.booster_.predict(array))
    command = [str(venv / "bin" / "python"), "-I", str(ELSEWHERE), "--model", str(model_file),
               "--features", str(rows_file), "--expected", str(expected_file),
               "--batch-rows", str(settings.batch_rows), "--single-rows", str(settings.single_rows),
               "--repeats", str(settings.batch_repeats), "--out", str(out)]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        return {"python": command[0], "versions": {}, "results": {},
                "errors": {"trees_elsewhere.py": (finished.stderr.strip().splitlines() or ["failed"])[-1]}}
    return json.loads(out.read_text())


def elsewhere_records(name: str, found: dict) -> list[dict]:
    """The records of the tools ``trees_elsewhere.py`` could run, in the main harness's form."""
    records = [{**result, "part": "model", "model": name, "method": tool, "input": "array", "environment": "venv"}
               for tool, result in found["results"].items()]
    return _with_ratios(records)


def credit_pipelines(rows: int | None, names=PIPELINES, random_state: int = 0) -> list[Entry]:
    """The held-out style pipelines named in ``names``: the zoo's HistGradientBoosting and forest
    entries, and a ``Pipeline`` of a ``ColumnTransformer`` and a random forest on the same applications."""
    fitted = FittedModels(tabular.__file__, rows, random_state)
    applications = tabular._applications(rows, random_state)
    default = split(applications.drop(columns="TARGET"), applications["TARGET"], random_state)
    builders = {
        "credit_hist_gradient_boosting": lambda: tabular.categorical_gradient_boosting(default, fitted),
        "credit_native_categories": lambda: native_categories(default, FittedModels(__file__, rows, random_state)),
        "credit_pandas_output": lambda: pandas_output(default, FittedModels(__file__, rows, random_state)),
        "credit_bureau_forest": lambda: tabular.bureau_lookups_forest(rows, random_state, fitted),
        "credit_forest_pipeline": lambda: forest_pipeline(
            "credit_forest_pipeline", RandomForestClassifier(n_estimators=100, min_samples_leaf=5, random_state=0,
                                                             n_jobs=1),
            "RandomForestClassifier(min_samples_leaf=5)", default, FittedModels(__file__, rows, random_state)),
        "credit_default_forest_pipeline": lambda: forest_pipeline(
            "credit_default_forest_pipeline", RandomForestClassifier(random_state=0, n_jobs=1),
            "RandomForestClassifier() (deep trees: every leaf one row)", default,
            FittedModels(__file__, rows, random_state)),
        "credit_voting": lambda: forest_pipeline(
            "credit_voting", VotingClassifier(notebook_estimators(), voting="soft"), "VotingClassifier(scaled LogisticRegression, RandomForestClassifier(n_jobs=-1), "
            "HistGradientBoostingClassifier, voting='soft')", default, FittedModels(__file__, rows, random_state)),
        "credit_stacking": lambda: forest_pipeline(
            "credit_stacking", StackingClassifier(notebook_estimators(), final_estimator=LogisticRegression()),
            "StackingClassifier(the same three, final_estimator=LogisticRegression())", default,
            FittedModels(__file__, rows, random_state)),
        "credit_calibrated": lambda: forest_pipeline(
            "credit_calibrated", CalibratedClassifierCV(HistGradientBoostingClassifier(random_state=0), cv=3),
            "CalibratedClassifierCV(HistGradientBoostingClassifier(), cv=3)", default,
            FittedModels(__file__, rows, random_state)),
        "credit_bagging": lambda: forest_pipeline(
            "credit_bagging", BaggingClassifier(n_estimators=50, max_samples=0.5, max_features=0.5, random_state=0),
            "BaggingClassifier(decision trees, n_estimators=50, max_samples=0.5, max_features=0.5)", default,
            FittedModels(__file__, rows, random_state)),
        "credit_adaboost": lambda: forest_pipeline(
            "credit_adaboost", AdaBoostClassifier(n_estimators=100, random_state=0),
            "AdaBoostClassifier(decision stumps, n_estimators=100)", default, FittedModels(__file__, rows, random_state)),
    }
    return [builders[name]() for name in names]


def native_categories(data, fitted) -> Entry:
    """scikit-learn's "Categorical Feature Support in Gradient Boosting": the categories as pandas
    categorical columns in fit (``categorical_features="from_dtype"``), the applications' string
    columns as they come at prediction."""
    columns = tabular.CATEGORICAL + tabular.NUMERIC
    model = fitted("credit_native_categories", lambda: HistGradientBoostingClassifier(
        categorical_features="from_dtype", random_state=42).fit(
        data.train_inputs[columns].astype({c: "category" for c in tabular.CATEGORICAL}), data.y_train))

    def predict(df):
        return model.predict_proba(df[columns])[:, 1]

    return Entry("credit_native_categories", "credit", "tree-ensemble", "binary",
                 "HistGradientBoostingClassifier(categorical_features='from_dtype') fitted on pandas categories, "
                 "given string columns", predict, data)


def pandas_output(data, fitted) -> Entry:
    """scikit-learn's "Categorical Feature Support in Gradient Boosting" as its example writes it:
    the categories (pandas categorical columns, as the example's data comes) ordinal-encoded by a
    ColumnTransformer with DataFrame output, the model told the categorical columns by name."""
    categories = {c: pd.CategoricalDtype(sorted(data.train_inputs[c].dropna().unique())) for c in tabular.CATEGORICAL}
    data = Split(*(frame.astype(categories) if isinstance(frame, pd.DataFrame) else frame for frame in data))
    columns = tabular.CATEGORICAL + tabular.NUMERIC
    encoder = make_column_transformer(
        (OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan), make_column_selector(dtype_include="category")),
        remainder="passthrough", verbose_feature_names_out=False,
    )
    model = fitted("credit_pandas_output", lambda: make_pipeline(
        encoder, HistGradientBoostingClassifier(categorical_features=tabular.CATEGORICAL, random_state=42),
    ).set_output(transform="pandas").fit(data.train_inputs[columns], data.y_train))

    def predict(df):
        return model.predict_proba(df[columns])[:, 1]

    return Entry("credit_pandas_output", "credit", "tree-ensemble", "binary",
                 "make_pipeline(make_column_transformer(OrdinalEncoder, remainder='passthrough'), "
                 "HistGradientBoostingClassifier(categorical_features=names)).set_output(transform='pandas') "
                 "on pandas categories", predict, data)


def notebook_estimators() -> list:
    """The estimators notebooks vote and stack: a scaled logistic regression, a forest on all the
    cores and gradient boosting (the forest's leaves hold one row each: its sums are exact in any order)."""
    return [
        ("lr", make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))),
        ("rf", RandomForestClassifier(n_estimators=100, n_jobs=-1, random_state=0)),
        ("hgb", HistGradientBoostingClassifier(random_state=0)),
    ]



def forest_pipeline(name: str, classifier, written: str, data, fitted) -> Entry:
    """Imputed numbers and ordinal-encoded categories by a ColumnTransformer, then ``classifier``."""
    preprocessor = ColumnTransformer(transformers=[
        ("num", SimpleImputer(strategy="median"), tabular.NUMERIC),
        ("cat", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=-1),
         tabular.CATEGORICAL),
    ])
    return tabular.positive_class_pipeline(
        name, "tree-ensemble", [("preprocessor", preprocessor), ("classifier", classifier)],
        f"Pipeline(ColumnTransformer(SimpleImputer numbers, OrdinalEncoder categories), {written})"
        ".predict_proba(df)[:, 1]", data, fitted)


def measure_pipeline(entry: Entry, settings: TreeSettings) -> list[dict]:
    """The undecorated and the decorated pipeline on the test rows repeated to a batch, and on single
    rows: timings, and whether the decorated answers equal the undecorated ones to the bit."""
    batch, rows = batch_and_rows(entry.data.test_inputs, settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", willump.WillumpWarning)
        decoration, decorated = timed(willump.optimize, entry.predict)
        first_call = timed(decorated, rows[0])[0]
    functions = {"python": entry.predict, "willump": decorated}
    single = _rounds({c: _row_caller(f, rows) for c, f in functions.items()}, list(range(settings.single_rows)),
                     warm_up=10)
    timings = _rounds({c: _batch_caller(f, batch) for c, f in functions.items()}, [None] * settings.batch_repeats)
    problem = _first_difference(decorated, entry.predict, [batch] + rows[:EXACT_SINGLE_ROWS])
    records = [{"part": "pipeline", "pipeline": entry.name, "style": entry.style, "config": config,
                **_timing_record(single[config], timings[config], settings.batch_rows)} for config in functions]
    python, willump_record = records
    willump_record |= {"exact": problem is None, "difference": problem, "decoration_seconds": decoration,
                       "first_call_seconds": first_call, "status": _model_call_status(decorated),
                       "single_speedup": python["single_p50_us"] / willump_record["single_p50_us"],
                       "batch_speedup": python["batch_ms"] / willump_record["batch_ms"]}
    return records


def main_entry(args) -> int:
    """``python -m benchmarks trees``: run, print the section, say where the results are."""
    from benchmarks import report

    settings = QUICK if args.quick else FULL
    try:
        venv = compare_venv_from(args.compare_venv)
    except ValueError as wrong:
        print(f"error: {wrong}", file=sys.stderr)
        return 2
    document = run_trees(settings, args.out, compare_venv=venv, log=lambda m: print(m, file=sys.stderr))
    print(f"\n== trees\n{report.render_trees(document)}")
    print(f"\nresults written to {args.out / 'trees.json'}")
    return 0
