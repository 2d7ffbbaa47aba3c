"""Batch scoring on Dask (issue 30): ``python -m benchmarks dask [--quick] [--out DIR]``.

For toxic and music, the workload's test rows repeated to at least ``rows`` rows are written once
as Parquet partitions of ``partition_rows`` rows (``dask.dataframe.to_parquet``) to a temporary
directory and read back with ``dd.read_parquet``. Each configuration of ``benchmarks.run`` (the
undecorated function, ``willump.optimize``, and ``willump.optimize`` fitted as ``python -m
benchmarks`` fits it, told it will score batches: ``fit(calls="batches")``) then scores them with
the idiom users write, ``ddf.map_partitions(func, meta=...).compute()``, on a fresh
``distributed.LocalCluster`` (worker processes of one thread) of 1 and of 2 workers; the two
willump configurations also through ``willump.dask.predict(ddf, func)``.

Per configuration and cluster size: rows/s (the rows over the median wall time of repeated jobs)
and its ratio to the undecorated function's; whether the answers equal, to the bit, the same
function's answers in this process; each worker's peak resident memory (VmHWM: the
cluster is fresh, so the peak is this configuration's), against the memory of one partition and
of the whole data set in pandas; the median compute time per partition of the scoring tasks and
of the Parquet reads (``read_parquet`` tasks: reading and turning Arrow into pandas); the
overhead per partition, (wall time x workers - the sum of every task's compute time) /
partitions: what the job costs besides the workers computing (scheduling, serialization and
transfer of tasks and results, the client building the graph and gathering the answers, workers
idle at the end); and the warm-up: the wall time of a first job of one partition per worker on
the fresh cluster (each worker unpickling the function and loading its compiled kernels from
numba's on-disk cache, which this process has filled) against a steady partition's. For the
fitted configuration: what ``fit`` decided (``explain()``'s summary) and the share of the rows
the small model answered on the workers (``willump.dask.stats`` after the idiom's jobs).
"""

import functools
import os
import resource
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.configurations import BASELINE, CONFIGURATIONS, FITTED
from benchmarks.measure import timed
from benchmarks.run import _version_of, machine_facts, write_document
from benchmarks.workloads import WORKLOADS

WORKLOADS_ON_DASK = ("toxic", "music")
READ = "read_parquet-"  # the name of a Parquet read task: read_parquet-<token>
META = ("score", "f8")  # what the idiom's users pass: every workload returns one float per row
HELPED = ("willump", FITTED)  # the configurations also measured through willump.dask.predict
# A batch job: the fitted function is told so (``fit(calls="batches")`` times its cascade on batches).
ON_DASK = CONFIGURATIONS | {FITTED: functools.partial(CONFIGURATIONS[FITTED], calls="batches")}
FIT_FIGURES = ("cascades", "speed", "measured_speedup_batch", "measured_speedup_single_row", "small_model_fraction",
               "threshold")


@dataclass(frozen=True)
class DaskSettings:
    """How much data, in which partitions, on how many workers, how many times."""

    rows: int  # at least this many rows per workload: its test rows repeated
    partition_rows: int  # rows of each Parquet partition
    workers: tuple  # cluster sizes measured (worker processes of one thread)
    repeats: int  # most timed jobs per configuration (median)...
    budget_seconds: float  # ...and fewer once their time passes this (at least one)
    build_rows: int | None  # cap on the rows each workload is built from; None for all
    quick: bool


FULL = DaskSettings(rows=2_000_000, partition_rows=100_000, workers=(1, 2), repeats=3, budget_seconds=40,
                    build_rows=None, quick=False)
QUICK = DaskSettings(rows=20_000, partition_rows=5_000, workers=(1, 2), repeats=2, budget_seconds=10,
                     build_rows=4000, quick=True)


def run_dask(settings: DaskSettings, out: Path, only=WORKLOADS_ON_DASK, log=print) -> dict:
    """Measure the workloads named in ``only``; write ``out/dask.json``; return its document."""
    import dask

    start = time.perf_counter()
    data, records, fits = {}, [], {}
    load_before = os.getloadavg()
    for name in only:
        seconds, workload = timed(WORKLOADS[name].build, settings.build_rows)
        log(f"dask: {name} built in {seconds:.1f} s ({len(workload.test_inputs)} test rows)")
        prepared = {config: prepare(workload) for config, prepare in ON_DASK.items()}
        summary = prepared[FITTED].predict.explain().attrs["summary"]
        fits[name] = {figure: summary[figure] for figure in FIT_FIGURES if figure in summary}
        with tempfile.TemporaryDirectory(prefix=f"willump-dask-{name}-") as directory:
            with dask.config.set(scheduler="threads"):  # (the data set is written and sized here)
                data[name] = write_partitions(workload.test_inputs, settings, Path(directory))
            log(f"dask: {name}: {data[name]['rows']:,} rows in {data[name]['partitions']} Parquet partitions")
            for workers in settings.workers:
                for config, p in prepared.items():
                    measured = measure_on_cluster(directory, p.predict, workers, settings, config in HELPED)
                    expected = p.predict(workload.test_inputs)
                    records += _records(name, config, workers, measured, expected)
                    log(f"dask: {name} {config} on {workers} worker(s): "
                        f"{measured['rows'] / statistics.median(measured['walls']):,.0f} rows/s")
    _add_ratios(records)
    document = {
        "benchmark": "dask",
        "settings": asdict(settings),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "machine": _machine(),
        "data": data,
        "fits": fits,
        "records": records,
    }
    return write_document(out, "dask", document, start)


def _machine() -> dict:
    facts = machine_facts()
    facts["versions"] |= {name: _version_of(name) for name in ("dask", "distributed")}
    return facts


def write_partitions(test_inputs: pd.DataFrame, settings: DaskSettings, directory: Path) -> dict:
    """Write ``test_inputs`` repeated to at least ``settings.rows`` rows to ``directory`` as Parquet
    partitions of ``settings.partition_rows`` rows, once; say what was written and its sizes."""
    import dask.dataframe as dd

    copies = -(-settings.rows // len(test_inputs))
    frame = pd.concat([test_inputs] * copies, ignore_index=True)
    dd.from_pandas(frame, chunksize=settings.partition_rows).to_parquet(directory, write_index=False)
    del frame
    ddf = dd.read_parquet(directory)
    first = ddf.partitions[0].compute()
    return {
        "rows": len(test_inputs) * copies,
        "test_rows": len(test_inputs),
        "partitions": ddf.npartitions,
        "partition_rows": settings.partition_rows,
        "partition_bytes": int(first.memory_usage(deep=True).sum()),
        "dataset_bytes": int(ddf.memory_usage(deep=True).sum().compute()),
        "parquet_bytes": sum(path.stat().st_size for path in directory.rglob("*.parquet")),
        "dtypes": {column: str(dtype) for column, dtype in first.dtypes.items()},
    }


def measure_on_cluster(directory, func, workers: int, settings: DaskSettings, helped: bool) -> dict:
    """Jobs of ``func`` over the Parquet data set on a fresh cluster of ``workers`` processes."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import willump.dask

    ddf = dd.read_parquet(directory)
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        started = _peak_memory(client)
        warm_up = _job(client, ddf.partitions[:workers].map_partitions(func, meta=META))
        if helped:
            willump.dask.reset_stats(func, client)
        jobs = _repeated(lambda: _job(client, ddf.map_partitions(func, meta=META)), settings)
        counts = willump.dask.stats(func, client) if helped else None
        measured = {
            "rows": len(jobs[-1]["answers"]),
            "partitions": ddf.npartitions,
            "workers": workers,
            "walls": [job["wall"] for job in jobs],
            "warm_up": warm_up["wall"],
            "scoring_task": statistics.median(t for job in jobs for t in job["scoring"]),
            "read_task": statistics.median(t for job in jobs for t in job["read"]) if jobs[0]["read"] else 0.0,
            "reads_fused": not jobs[0]["read"],  # (then the scoring tasks' times include the reads)
            "overhead": statistics.median(
                (job["wall"] * workers - job["busy"]) / ddf.npartitions for job in jobs),
            "answers": jobs[-1]["answers"],
            "started_memory": started,
            "peak_memory": _peak_memory(client),
        }
        if counts is not None and counts["rows_seen"]:
            measured["small_model_share"] = counts["rows_small_model"] / counts["rows_seen"]
        if helped:
            helper = _repeated(lambda: _job(client, willump.dask.predict(ddf, func)), settings)
            measured["helper_walls"] = [job["wall"] for job in helper]
            measured["helper_answers"] = helper[-1]["answers"]
    return measured


def _repeated(job, settings: DaskSettings) -> list[dict]:
    """``job()`` run ``settings.repeats`` times, or fewer once they took ``budget_seconds`` (at least once)."""
    jobs = []
    while len(jobs) < settings.repeats and sum(j["wall"] for j in jobs) < settings.budget_seconds:
        jobs.append(job())
    return jobs


def _job(client, scores) -> dict:
    """Compute the collection ``scores`` on ``client``'s cluster: its wall time, answers, and its
    tasks' compute times (scoring tasks, Parquet reads, and all of them summed)."""
    from distributed import get_task_stream

    with get_task_stream(client) as stream:
        start = time.perf_counter()
        answers = scores.compute()
        wall = time.perf_counter() - start
    scoring, read, busy = [], [], 0.0
    for task in stream.data:
        seconds = sum(s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")
        busy += seconds
        name = task["key"][0] if isinstance(task["key"], tuple) else task["key"]
        if name == scores._name or _fused_read(name, scores._name):
            scoring.append(seconds)
        elif name.startswith(READ):
            read.append(seconds)
    return {"wall": wall, "answers": np.asarray(answers), "scoring": scoring, "read": read, "busy": busy}


def _fused_read(name: str, scoring: str) -> bool:
    """Whether task ``name`` is a Parquet read fused with the scoring task named ``scoring`` (older
    Dask, 2024.4.1 for one, fuses them into one task, ``read_parquet-<function>-<token>``)."""
    return name.startswith(READ) and name[len(READ):].rsplit("-", 1)[0] == scoring.rsplit("-", 1)[0]


def _peak_memory(client) -> dict:
    """Each worker's peak resident memory so far, in bytes."""
    return client.run(_worker_peak_memory)


def _worker_peak_memory() -> int:
    """This process's peak resident memory: Linux's VmHWM, the high-water mark of its own address
    space (``ru_maxrss`` would not do: a worker is forked from this process, then execs, and its
    ``ru_maxrss`` starts at this process's size then); ``ru_maxrss`` where there is no /proc."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _records(name: str, config: str, workers: int, measured: dict, expected) -> list[dict]:
    """The records of one configuration on one cluster size; answers compared with ``expected``
    (the same function's answers on the test rows in this process, repeated as the data set is)."""
    expected = np.resize(np.asarray(expected), measured["rows"])
    rows = measured["rows"]
    peaks = list(measured["peak_memory"].values())

    def record(metric, value, unit=""):
        return {"workload": name, "config": config, "workers": workers, "metric": metric, "value": value,
                "unit": unit, "ratio_vs_python": None}

    found = [
        record("throughput", rows / statistics.median(measured["walls"]), "rows/s"),
        record("jobs", len(measured["walls"])),
        record("same_answers", float(np.array_equal(measured["answers"], expected))),
        record("scoring_task_time", measured["scoring_task"], "s"),
        record("read_task_time", measured["read_task"], "s"),
        record("reads_fused", float(measured["reads_fused"])),
        record("overhead_per_partition", measured["overhead"], "s"),
        record("warm_up_time", measured["warm_up"], "s"),
        record("warm_up_extra", measured["warm_up"] - measured["scoring_task"] - measured["read_task"], "s"),
        record("started_worker_memory", max(measured["started_memory"].values()), "B"),
        record("peak_worker_memory", max(peaks), "B"),
    ]
    if "small_model_share" in measured:
        found.append(record("small_model_share", measured["small_model_share"]))
    if "helper_walls" in measured:
        found += [
            record("helper_throughput", rows / statistics.median(measured["helper_walls"]), "rows/s"),
            record("helper_same_answers", float(np.array_equal(measured["helper_answers"], expected))),
        ]
    return found


def _add_ratios(records: list[dict]) -> None:
    """Throughputs (the idiom's and the helper's) over the undecorated idiom's on as many workers."""
    baseline = {(r["workload"], r["workers"]): r["value"] for r in records
                if r["config"] == BASELINE and r["metric"] == "throughput"}
    for r in records:
        if r["unit"] == "rows/s" and not (r["config"] == BASELINE and r["metric"] == "throughput"):
            r["ratio_vs_python"] = r["value"] / baseline[(r["workload"], r["workers"])]
