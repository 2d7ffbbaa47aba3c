"""``python -m benchmarks dask`` runs on a real LocalCluster, writes its records and fills its README
table (no speed assertions). Runs in the pass with pyarrow (``dask.dataframe`` needs it)."""

import dataclasses
import json

import pytest

from benchmarks import report
from report_sections import filled_section


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, datasets, dask_cluster):
    """The toxic workload on a few thousand rows, at 1 and 2 workers, one job per configuration, each
    on a cluster of its own (``dask_cluster`` only checks the dask extra is installed)."""
    from benchmarks.on_dask import QUICK, run_dask

    out = tmp_path_factory.mktemp("dask-results")
    settings = dataclasses.replace(QUICK, rows=3000, partition_rows=1000, repeats=1)
    return out, run_dask(settings, out, only=("toxic",), log=lambda message: None)


def test_every_configuration_answers_as_in_one_process_at_each_cluster_size(tiny_run):
    out, document = tiny_run
    assert json.loads((out / "dask.json").read_text())["records"] == document["records"]
    data = document["data"]["toxic"]
    assert data["rows"] >= 3000 and data["partitions"] == -(-data["rows"] // 1000)
    assert 0 < data["partition_bytes"] < data["dataset_bytes"]
    assert document["machine"]["versions"]["pyarrow"] != "not installed"
    found = {(r["config"], r["workers"], r["metric"]): r for r in document["records"]}
    for workers in (1, 2):
        for config in ("python", "willump", "willump-fit"):
            assert found[(config, workers, "same_answers")]["value"] == 1.0
            assert found[(config, workers, "scoring_task_time")]["value"] > 0
            # (older Dask, 2024.4.1 for one, fuses each Parquet read into the scoring task, timed there)
            fused = found[(config, workers, "reads_fused")]["value"] == 1.0
            assert (found[(config, workers, "read_task_time")]["value"] > 0) != fused
            started = found[(config, workers, "started_worker_memory")]["value"]
            assert 0 < started <= found[(config, workers, "peak_worker_memory")]["value"]
        assert found[("python", workers, "throughput")]["ratio_vs_python"] is None
        for config in ("willump", "willump-fit"):
            assert found[(config, workers, "helper_same_answers")]["value"] == 1.0
            throughput = found[(config, workers, "throughput")]
            assert throughput["ratio_vs_python"] == pytest.approx(
                throughput["value"] / found[("python", workers, "throughput")]["value"])
        # The rows the fitted function's small model answered on the workers: none without a cascade.
        share = found[("willump-fit", workers, "small_model_share")]["value"]
        cascading = document["fits"]["toxic"]["cascades"] == "on"
        assert (0 < share <= 1) if cascading else share == 0
        assert found[("willump", workers, "small_model_share")]["value"] == 0


def test_the_fitted_configuration_is_told_it_scores_batches(tiny_run):
    _, document = tiny_run
    fit = document["fits"]["toxic"]
    assert fit["cascades"] == "on" or fit["cascades"].startswith("off: ")
    assert fit["speed"] == "checked on batches (calls='batches')"
    if "measured_speedup_batch" in fit:  # (timed on batches alone)
        assert "measured_speedup_single_row" not in fit


def test_report_fills_the_dask_section_and_refuses_a_quick_run(tiny_run, tmp_path):
    out, _ = tiny_run
    text = filled_section(out, tmp_path, report.DASK_START, report.DASK_END)
    assert "| toxic | 1 | python |" in text and "| toxic | 2 | willump-fit |" in text
    assert "From 1 to 2 workers: toxic python" in text
    assert '`willump-fit` is fitted with `fit(calls="batches")` (a batch job): toxic: cascades ' in text
