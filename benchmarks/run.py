"""Running one workload in every configuration and writing its results.

Results are records (one per measured number) in ``<out>/<workload>.json``,
with the machine's facts once per file. ``ratio_vs_python`` is always a
speed-up: higher is better (throughput ratio, or latency of the undecorated
function over latency of the configuration); it is null for the baseline.
In top-K mode, ``top<K>_vs_exact`` is a willump configuration's ``top_k`` throughput over
that of the exact bar, the decorated call's scores plus ``np.argpartition`` (recorded as
``top<K>_argpartition_throughput``): below 1, ``top_k`` is slower than exact.
"""

import datetime
import functools
import json
import importlib.metadata
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.configurations import (
    BASELINE,
    CONFIGURATIONS,
    EXACT_TOP_K,
    exact_top_k,
    positive_class_accuracy,
    scoring_and_argpartition,
)
from benchmarks.measure import batch_throughputs, blocked_latencies, point_latencies, quality, timed, top_k_queries
from benchmarks.workloads import WORKLOADS

MODES = ("batch", "point", "topk")
TOP_KS = (100, 10)  # the filter keeps 10 K rows by default: at 10, it filters test splits of 100+ rows
ARGPARTITION = "scoring + argpartition"  # the exact top-K bar, measured in the same rounds as the configurations


@dataclass(frozen=True)
class Settings:
    """How much data and how many repetitions."""

    rows: int | None  # cap on the data set's rows; None for all of it
    batch_repeats: int
    point_calls: int
    topk_repeats: int


FULL = Settings(rows=None, batch_repeats=9, point_calls=1000, topk_repeats=7)
QUICK = Settings(rows=4000, batch_repeats=5, point_calls=200, topk_repeats=5)


def run_workload(name: str, modes, settings: Settings, out: Path, log=print) -> list[dict]:
    """Measure workload ``name`` in every configuration; write ``out/<name>.json``; return the records."""
    start = time.perf_counter()
    build_seconds, workload = timed(WORKLOADS[name].build, settings.rows)
    log(f"{name}: built in {build_seconds:.1f} s ({len(workload.test_inputs)} test rows)")
    prepared = {config: prepare(workload) for config, prepare in CONFIGURATIONS.items()}
    records = []

    def record(config, mode, measured, value, unit):
        metric, score = scores[config]
        records.append(
            {
                "workload": name,
                "config": config,
                "mode": mode,
                "metric": measured,
                "value": value,
                "unit": unit,
                "ratio_vs_python": None,
                "quality": score,
                "quality_metric": metric,
            }
        )

    scores = {
        config: quality(workload.task, workload.y_test, p.predict(workload.test_inputs))
        for config, p in prepared.items()
    }
    for config, p in prepared.items():
        for stage, seconds in p.times.items():
            record(config, "optimization", f"{stage}_time", seconds, "s")
        if workload.task == "classification":
            predictions = p.predict(workload.test_inputs)
            record(config, "quality", "accuracy", positive_class_accuracy(workload.y_test, predictions), "")
        if hasattr(p.predict, "stats"):
            p.predict.reset_stats()
            p.predict(workload.test_inputs)
            stats = p.predict.stats
            if stats["rows_seen"]:
                record(config, "quality", "small_model_fraction", stats["rows_small_model"] / stats["rows_seen"], "")
            if getattr(p.predict, "_fitted", None) is not None:  # the drift guard over the test split
                record(config, "quality", "drift_checks", stats["drift_checks"], "")
                record(config, "quality", "drift_alarms", stats["drift_alarms"], "")
    predictors = {config: p.predict for config, p in prepared.items()}
    if "batch" in modes:
        for config, value in batch_throughputs(predictors, workload.test_inputs, settings.batch_repeats).items():
            record(config, "batch", "throughput", value, "rows/s")
        log(f"{name}: batch measured")
    if "point" in modes:
        rows = _single_rows(workload.test_inputs, settings.point_calls)
        for config, (p50, p99) in point_latencies(predictors, rows).items():
            record(config, "point", "p50_latency", p50, "ms")
            record(config, "point", "p99_latency", p99, "ms")
        for config, p50 in blocked_latencies(predictors, rows).items():
            record(config, "point", "p50_latency_in_blocks", p50, "ms")
        log(f"{name}: point measured")
    if "topk" in modes:
        for wanted in TOP_KS:
            k = min(wanted, len(workload.test_inputs))
            exact = exact_top_k(workload, k)
            queries = {config: functools.partial(_top_k, p.top_k, k=k) for config, p in prepared.items()}
            queries[ARGPARTITION] = functools.partial(_top_k, scoring_and_argpartition(prepared[EXACT_TOP_K]), k=k)
            measured = top_k_queries(queries, workload.test_inputs, k, exact, settings.topk_repeats)
            bar = measured.pop(ARGPARTITION)["throughput"]
            record(EXACT_TOP_K, "topk", f"top{k}_argpartition_throughput", bar, "rows/s")
            for config, query in measured.items():
                record(config, "topk", f"top{k}_throughput", query["throughput"], "rows/s")
                record(config, "topk", f"top{k}_precision", query["precision"], "")
                record(config, "topk", f"top{k}_map", query["map"], "")
                if config != BASELINE:
                    record(config, "topk", f"top{k}_vs_exact", query["throughput"] / bar, "x")
        log(f"{name}: top-K measured")
    _add_ratios(records)
    document = {
        "workload": name,
        "description": workload.description,
        "settings": settings.__dict__,
        "machine": machine_facts(),
        "records": records,
    }
    write_document(out, name, document, start)
    return records


def write_document(out: Path, name: str, document: dict, start: float) -> dict:
    """``document`` with the date and the seconds since ``start`` (``time.perf_counter``), written
    to ``out/<name>.json``."""
    document = {**document, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "seconds": time.perf_counter() - start}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
    return document


def _top_k(top_k, inputs, k):
    return top_k(inputs, k)


def _single_rows(inputs, calls: int) -> list:
    """``calls`` one-row inputs, going round the test split if it is shorter."""
    return [inputs.iloc[[i % len(inputs)]] for i in range(calls)]


def _add_ratios(records: list[dict]) -> None:
    baseline = {(r["mode"], r["metric"]): r["value"] for r in records if r["config"] == BASELINE}
    for r in records:
        reference = baseline.get((r["mode"], r["metric"]))
        if r["config"] == BASELINE or not reference or not r["value"] or r["mode"] == "optimization":
            continue
        if r["unit"] == "rows/s":
            r["ratio_vs_python"] = r["value"] / reference
        elif r["unit"] == "ms":
            r["ratio_vs_python"] = reference / r["value"]


def machine_facts() -> dict:
    """Cores, CPU model and library versions of this machine; pyarrow's too, or "not installed":
    with it pandas keeps text in pyarrow, which the text kernels read another way."""
    import lightgbm
    import numba
    import numpy
    import pandas
    import scipy
    import sklearn

    import willump

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        "versions": {
            module.__name__: module.__version__
            for module in (willump, numpy, pandas, scipy, sklearn, lightgbm, numba)
        } | {"pyarrow": _version_of("pyarrow")},
    }


def _version_of(distribution: str) -> str:
    """The installed version of a package, or "not installed"."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def table(records: list[dict]) -> str:
    """The records of one workload as a text table."""
    header = f"{'config':<10} {'mode':<12} {'metric':<18} {'value':>12} {'unit':<6} {'ratio':>7}  quality"
    lines = [header, "-" * len(header)]
    for r in records:
        ratio = "" if r["ratio_vs_python"] is None else f"{r['ratio_vs_python']:.2f}x"
        lines.append(
            f"{r['config']:<10} {r['mode']:<12} {r['metric']:<18} {_number(r['value']):>12} {r['unit']:<6} "
            f"{ratio:>7}  {r['quality_metric']} {r['quality']:.4f}"
        )
    return "\n".join(lines)


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value < 1 else f"{value:.2f}"
