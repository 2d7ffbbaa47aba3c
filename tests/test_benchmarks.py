"""The benchmark suite runs, writes its records, and regenerates the README table (no speed assertions)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import report
from benchmarks.__main__ import main
from benchmarks.measure import average_precision, top_k_by_partition, top_k_positions

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {"workload", "config", "mode", "metric", "value", "ratio_vs_python", "quality", "quality_metric"}


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory, datasets):
    out = tmp_path_factory.mktemp("results")
    assert main(["toxic", "--quick", "--out", str(out)]) == 0
    return out


def test_quick_run_writes_records_for_every_configuration_and_mode(quick_results):
    document = json.loads((quick_results / "toxic.json").read_text())
    assert {"cores", "cpu", "versions"} <= set(document["machine"])
    pyarrow = importlib.util.find_spec("pyarrow")  # (pandas then keeps the tweets in pyarrow)
    assert (document["machine"]["versions"]["pyarrow"] == "not installed") == (pyarrow is None)
    records = document["records"]
    assert all(REQUIRED <= set(r) for r in records)
    measured = {(r["config"], r["mode"], r["metric"]) for r in records}
    for config in ["python", "willump", "willump-fit"]:
        for mode, metric in [
            ("batch", "throughput"),
            ("point", "p50_latency"),
            ("point", "p99_latency"),
            ("topk", "top100_throughput"),
            ("topk", "top100_precision"),
            ("topk", "top100_map"),
            ("topk", "top10_precision"),
        ]:
            assert (config, mode, metric) in measured
    assert all(r["ratio_vs_python"] is None for r in records if r["config"] == "python")
    assert all(r["ratio_vs_python"] > 0 for r in records if r["config"] == "willump" and r["mode"] == "batch")
    # The exact drop-in answers exactly: the same quality and the exact top-100.
    exact = [r for r in records if r["config"] in ("python", "willump")]
    assert len({r["quality"] for r in exact}) == 1
    assert all(r["value"] == 1.0 for r in exact if r["metric"].endswith(("_precision", "_map")))
    fitted = {r["metric"] for r in records if r["config"] == "willump-fit"}
    assert {"fit_time", "throughput", "p50_latency", "top100_precision", "accuracy"} <= fitted
    # top_k against the exact bar (decorated call + argpartition), measured in the same rounds
    for k in (100, 10):
        bar = next(r["value"] for r in records if r["metric"] == f"top{k}_argpartition_throughput")
        versus = {r["config"]: r["value"] for r in records if r["metric"] == f"top{k}_vs_exact"}
        assert set(versus) == {"willump", "willump-fit"}
        throughputs = {r["config"]: r["value"] for r in records if r["metric"] == f"top{k}_throughput"}
        for config, value in versus.items():
            assert value == pytest.approx(throughputs[config] / bar)


def test_report_regenerates_the_readme_section(quick_results, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.START}\nold table\n{report.END}\noutro\n")
    assert report.main(["--results", str(quick_results), "--readme", str(readme)]) == 2  # quick: refused
    assert report.main(["--results", str(quick_results), "--readme", str(readme), "--allow-quick"]) == 0
    text = readme.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith("outro\n")
    assert "| toxic | python |" in text and "| toxic | willump |" in text
    assert "quick run of" in text


def test_missing_data_is_a_one_line_error_naming_path_and_variable(tmp_path):
    environment = {**os.environ, "WILLUMP_DATA": str(tmp_path / "nowhere")}
    finished = subprocess.run(
        [sys.executable, "-m", "benchmarks", "toxic", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120,
    )
    assert finished.returncode == 2
    errors = [line for line in finished.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(tmp_path / "nowhere") in errors[0] and "WILLUMP_DATA" in errors[0]


def test_top_k_helpers():
    scores = np.array([0.1, 0.9, 0.5, 0.9, 0.2])
    np.testing.assert_array_equal(top_k_positions(scores, 3), [1, 3, 2])
    np.testing.assert_array_equal(top_k_by_partition(scores, 3), [1, 3, 2])
    np.testing.assert_array_equal(top_k_by_partition(scores, 5), top_k_positions(scores, 5))
    assert average_precision(np.array([1, 3, 2]), np.array([1, 3, 2])) == 1.0
    assert average_precision(np.array([0, 1, 3]), np.array([1, 3, 2])) == pytest.approx((1 / 2 + 2 / 3) / 3)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=40), st.integers(1, 40))
def test_top_k_by_partition_ranks_as_the_stable_argsort_up_to_ties(values, k):
    scores = np.array(values, dtype=float)
    k = min(k, len(scores))
    chosen, exact = top_k_by_partition(scores, k), top_k_positions(scores, k)
    np.testing.assert_array_equal(scores[chosen], scores[exact])  # the same scores, best first
    assert len(set(chosen.tolist())) == k
    tied = scores[exact] == scores[exact[-1]]
    np.testing.assert_array_equal(chosen[~tied], exact[~tied])  # the same rows above the K-th score


def test_music_stream_counts_keys_against_the_undecorated_pipeline(redis_client, datasets):
    """Over KKBox's test plays, in order: every configuration answers as the undecorated
    pipeline does; the six IFVs that look rows up keep their rows (one lookup in the
    feature-row caches per IFV per play), and the table-row caches fetch each key they miss."""
    from benchmarks.remote import music_stream

    result = music_stream(redis_client, rows=60)
    configurations = result["configurations"]
    assert result["rows"] == 60
    assert all(c["same_answers"] for c in configurations.values())
    python, features = configurations["python"], configurations["willump-features"]
    stats = features["stats"]
    assert python["remote_keys"] > 60  # several tables per play
    assert stats["feature_row_hits"] + stats["feature_row_misses"] == 60 * 6
    assert 0 < stats["feature_row_hits"] and 0 < stats["feature_row_misses"]
    assert features["remote_keys"] == stats["cache_misses"] < python["remote_keys"]


@pytest.fixture(scope="module")
def zoo_models(tmp_path_factory):
    """An empty cache of the zoo's fitted models for this module's runs (they train once)."""
    os.environ["WILLUMP_ZOO_CACHE"] = str(tmp_path_factory.mktemp("zoo-models"))
    yield
    del os.environ["WILLUMP_ZOO_CACHE"]


@pytest.fixture(scope="module")
def tiny_zoo(tmp_path_factory, datasets, zoo_models):
    """The whole zoo on a few hundred rows of each data set, measured once, without fit."""
    from benchmarks.zoo.run import ZooSettings, run_zoo

    out = tmp_path_factory.mktemp("zoo-results")
    settings = ZooSettings(rows=500, test_rows=40, fit_rows=None, batch_repeats=1, point_calls=6)
    return out, run_zoo(settings, out, log=lambda message: None)


def test_every_zoo_pipeline_is_exact_without_fit(tiny_zoo):
    _, document = tiny_zoo
    entries, records = document["entries"], document["records"]
    assert len(entries) >= 15
    assert {e["model"] for e in entries.values()} == {"linear", "naive-bayes", "tree-ensemble"}
    assert {e["task"] for e in entries.values()} == {"binary", "multiclass", "regression"}
    exactness = {(r["workload"], r["config"]): r for r in records if r["metric"] == "exact"}
    assert {name for name, config in exactness if config == "willump"} == set(entries)
    assert [name for name, config in exactness if config == "by-hand"]  # the Pipeline text entries' twins
    assert all(r["value"] == 1.0 for r in exactness.values()), [r["detail"] for r in exactness.values() if r["detail"]]
    measured = {(r["workload"], r["config"], r["metric"]) for r in records}
    for name in entries:
        for config in ("python", "willump"):
            assert {(name, config, "throughput"), (name, config, "p50_latency"), (name, config, "quality")} <= measured
    assert not any(config == "willump-fit" for _, config, _ in measured)  # (no fit asked)


def test_zoo_fit_is_measured_against_the_exact_answers(tiny_zoo, tmp_path):
    from benchmarks.zoo.run import ZooSettings, run_zoo

    settings = ZooSettings(rows=500, test_rows=40, fit_rows=150, batch_repeats=1, point_calls=6)
    document = run_zoo(settings, tmp_path, only={"tweets_helper_counts", "annuity_ridge"}, log=lambda message: None)
    assert set(document["entries"]) == {"tweets_helper_counts", "annuity_ridge"}
    fitted = {(r["workload"], r["metric"]): r for r in document["records"] if r["config"] == "willump-fit"}
    for name in document["entries"]:
        assert fitted[(name, "fit_time")]["value"] > 0
        assert fitted[(name, "cascades")]["detail"]  # "on", or why not
        assert fitted[(name, "throughput")]["ratio_vs_python"] > 0
    assert fitted[("annuity_ridge", "quality")]["quality_metric"] == "rmse"


def test_zoo_report_fills_its_readme_section(tiny_zoo, tmp_path):
    out, document = tiny_zoo
    readme = tmp_path / "README.md"
    readme.write_text(f"{report.START}\n{report.END}\nzoo:\n{report.ZOO_START}\nstale zoo table\n{report.ZOO_END}\nend\n")
    (out / "toxic.json").write_text((ROOT / "benchmarks" / "results" / "toxic.json").read_text())
    assert report.main(["--results", str(out), "--readme", str(readme)]) == 2  # quick: refused
    assert report.main(["--results", str(out), "--readme", str(readme), "--allow-quick"]) == 0
    text = readme.read_text()
    assert "stale zoo table" not in text and text.endswith(f"{report.ZOO_END}\nend\n")
    assert all(f"| {name} |" in text for name in document["entries"])
    assert "Tree ensembles" in text


def test_zoo_difference_sees_one_ulp_a_dtype_and_an_index():
    import pandas as pd
    import scipy.sparse as sp

    from benchmarks.zoo.common import difference

    values = np.array([0.25, 0.5, np.nan])
    assert difference(values, values.copy()) is None
    assert difference(np.nextafter(values, 1), values) is not None
    assert difference(values.astype(np.float32), values) is not None
    assert difference(values[:, None], values) is not None
    assert difference(np.array(["a", None], dtype=object), np.array(["a", None], dtype=object)) is None
    series = pd.Series(values)
    assert difference(series, series.copy()) is None
    assert difference(series, series.set_axis([3, 4, 5])) is not None
    matrix = sp.csr_matrix(values[None, :2])
    assert difference(matrix, matrix.copy()) is None
    assert difference(matrix.tocoo(), matrix) is not None
    assert difference(matrix * 1.0000001, matrix) is not None
