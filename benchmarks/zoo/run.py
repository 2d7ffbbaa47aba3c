"""Measuring the zoo: every entry, in one process, on the same test rows.

For each entry: whether ``willump.optimize(predict)`` answers exactly what ``predict`` answers
(to the bit, dtype, shape, index) on the test batch and on single rows; batch throughput (median
of repeated runs of the whole test batch) and single-row p50 latency of the undecorated function,
the decorated one, the decorated one after ``fit`` on labelled training and validation rows, and,
for the Pipeline text entries, the same steps written by hand and decorated; the quality (ROC AUC,
accuracy or RMSE) of the exact and of the fitted answers. Results go to ``<out>/zoo.json`` in the
records of the other benchmarks (``workload`` is the entry's name).

OpenMP thread pools (HistGradientBoosting's, LightGBM's) are limited to one thread in every
configuration alike: on a small machine shared with other work, their teams' busy-waiting made a
HistGradientBoosting call last from 20 ms to over a second depending on the machine's load, and
one entry's measurement several minutes.
"""

import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from sklearn.metrics import accuracy_score, mean_squared_error, roc_auc_score

import willump
from benchmarks.measure import batch_throughputs, point_latencies, timed
from benchmarks.run import _add_ratios, machine_facts, write_document
from benchmarks.zoo import FAMILIES
from benchmarks.zoo.common import Entry, difference

PYTHON, WILLUMP, FITTED, BY_HAND = "python", "willump", "willump-fit", "by-hand"
EXACT_SINGLE_ROWS = 20  # single rows whose answers are compared, besides the whole batch
OPENMP_THREADS = 1
BATCH_SECONDS, MOST_BATCH_REPEATS = 0.5, 25  # (see _batch_repeats)


@dataclass(frozen=True)
class ZooSettings:
    """How much data and how many repetitions."""

    rows: int | None  # cap on each data set's rows; None for all of it
    test_rows: int  # test rows measured (the batch)
    fit_rows: int | None  # training rows fit learns from (validation: half as many); None: no fit
    batch_repeats: int
    point_calls: int


FULL = ZooSettings(rows=None, test_rows=2000, fit_rows=4000, batch_repeats=5, point_calls=300)
QUICK = ZooSettings(rows=1500, test_rows=300, fit_rows=600, batch_repeats=3, point_calls=60)


def run_zoo(settings: ZooSettings, out: Path, only=None, log=print) -> dict:
    """Measure the entries (those named in ``only``, or all); write ``out/zoo.json``; return its document."""
    start = time.perf_counter()
    entries, records = {}, []
    with threadpool_limits(limits=OPENMP_THREADS, user_api="openmp"):
        _measure_families(settings, only, entries, records, log)
    document = {
        "workload": "zoo",
        "settings": {**settings.__dict__, "openmp_threads": OPENMP_THREADS},
        "machine": machine_facts(),
        "entries": entries,
        "records": records,
    }
    return write_document(out, "zoo", document, start)


def _measure_families(settings: ZooSettings, only, entries: dict, records: list, log) -> None:
    for family, module in FAMILIES.items():
        seconds, built = timed(module.build, settings.rows)
        chosen = [entry for entry in built if only is None or entry.name in only]
        log(f"zoo: {family} built in {seconds:.1f} s")
        for entry in chosen:
            seconds, (described, measured) = timed(measure_entry, entry, settings)
            entries[entry.name] = described
            records += measured
            log(f"zoo: {entry.name} measured in {seconds:.1f} s")


def measure_entry(entry: Entry, settings: ZooSettings) -> tuple[dict, list[dict]]:
    """(the entry's description, its records)."""
    test = entry.data.test_inputs.iloc[: settings.test_rows]
    y_test = np.asarray(entry.data.y_test)[: settings.test_rows]
    classes = np.unique(entry.data.y_train)
    records = []

    def record(config, mode, metric, value, unit="", detail=None, quality=(None, None)):
        records.append({
            "workload": entry.name, "config": config, "mode": mode, "metric": metric, "value": value,
            "unit": unit, "ratio_vs_python": None, "quality": quality[1], "quality_metric": quality[0],
            "detail": detail,
        })

    functions = {PYTHON: entry.predict}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", willump.WillumpWarning)
        functions.update(_decorated(WILLUMP, entry.predict, test, record))
        if entry.by_hand is not None:
            functions.update(_decorated(BY_HAND, entry.by_hand, test, record))
    notes = sorted({str(w.message) for w in caught if issubclass(w.category, willump.WillumpWarning)})
    rows = [test.iloc[[i % len(test)]] for i in range(settings.point_calls)]
    for config, plain in ((WILLUMP, entry.predict), (BY_HAND, entry.by_hand)):
        if config in functions:
            problem = _first_difference(functions[config], plain, [test] + rows[:EXACT_SINGLE_ROWS])
            record(config, "exactness", "exact", float(problem is None), detail=problem)
    if settings.fit_rows is not None:
        functions.update(_fitted(entry, settings.fit_rows, record))
    for config, function in functions.items():
        record(config, "quality", "quality", None, quality=_quality(entry.task, y_test, function(test), classes))
    repeats = _batch_repeats(settings.batch_repeats, timed(entry.predict, test)[0])
    for config, value in batch_throughputs(functions, test, repeats).items():
        record(config, "batch", "throughput", value, "rows/s")
    for config, (p50, p99) in point_latencies(functions, rows).items():
        record(config, "point", "p50_latency", p50, "ms")
    _add_ratios(records)
    described = {"family": entry.family, "model": entry.model, "task": entry.task, "style": entry.style,
                 "test_rows": len(test), "willump_warnings": notes}
    return described, records


def _batch_repeats(least: int, seconds: float) -> int:
    """Runs of the batch per configuration: at least ``least``, and more (up to ``MOST_BATCH_REPEATS``)
    for a batch the undecorated function answers in under ``BATCH_SECONDS / least``, whose time a
    loaded machine's noise would otherwise decide."""
    return max(least, min(MOST_BATCH_REPEATS, int(BATCH_SECONDS / max(seconds, 1e-6))))


def _decorated(config: str, plain, test, record) -> dict:
    """{config: the decorated ``plain``}, its decoration and first-call times recorded."""
    seconds, optimized = timed(willump.optimize, plain)
    record(config, "optimization", "decoration_time", seconds, "s")
    record(config, "optimization", "first_call_time", timed(optimized, test.iloc[:1])[0], "s")
    return {config: optimized}


def _fitted(entry: Entry, fit_rows: int, record) -> dict:
    """{FITTED: the entry decorated and fitted on ``fit_rows`` training rows}; {} (and an error
    record) when fit refuses."""
    data = entry.data
    optimized = willump.optimize(entry.predict)
    valid_rows = max(1, fit_rows // 2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", willump.WillumpWarning)
            seconds, _ = timed(lambda: optimized.fit(
                data.train_inputs.iloc[:fit_rows], y=np.asarray(data.y_train)[:fit_rows],
                validation=(data.valid_inputs.iloc[:valid_rows], np.asarray(data.y_valid)[:valid_rows]),
                cascades=entry.task != "regression", progress=False,
            ))
    except ValueError as refused:
        record(FITTED, "optimization", "fit_error", None, detail=str(refused))
        return {}
    record(FITTED, "optimization", "fit_time", seconds, "s")
    cascades = optimized.explain().attrs["summary"]["cascades"]
    record(FITTED, "optimization", "cascades", float(cascades == "on"), detail=cascades)
    return {FITTED: optimized}


def _first_difference(optimized, plain, batches: list) -> str | None:
    """How the decorated function first answers otherwise than the plain one over ``batches``."""
    for position, batch in enumerate(batches):
        problem = difference(optimized(batch), plain(batch))
        if problem is not None:
            return problem if position == 0 else f"single row {position - 1}: {problem}"
    return None


def _quality(task: str, y, output, classes) -> tuple[str, float]:
    """(metric, value): RMSE for regressions, accuracy for labels and class probabilities, ROC AUC for scores."""
    output = np.asarray(output)
    if task == "regression":
        return "rmse", float(np.sqrt(mean_squared_error(y, output)))
    if output.ndim == 2:
        return "accuracy", float(accuracy_score(y, classes[np.argmax(output, axis=1)]))
    if output.dtype.kind == "f":  # (undefined with one class in y: NaN, as newer scikit-learn gives with a warning)
        return "roc_auc", float(roc_auc_score(y, output)) if len(np.unique(y)) > 1 else float("nan")
    return "accuracy", float(accuracy_score(y, output))
