"""``python -m benchmarks trees`` on tiny data: every way of answering a workload's tree model, and every
decorated held-out pipeline, answers exactly; the other environment's script runs; the report fills its
section (no speed assertions)."""

import dataclasses
import json
import stat
import sys

import pytest

from benchmarks import report
from benchmarks.__main__ import main
from benchmarks.on_trees import PIPELINES, QUICK, run_trees
from benchmarks.trees_elsewhere import TOOLS
from report_sections import filled_section


@pytest.fixture(scope="module")
def other_environment(tmp_path_factory):
    """A virtualenv's layout whose python is this interpreter: ``trees_elsewhere.py`` runs in it for real
    and reports the tools this environment lacks (lleaves cannot be installed beside numba 0.68)."""
    venv = tmp_path_factory.mktemp("venv")
    (venv / "bin").mkdir()
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return venv


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, datasets, other_environment):
    """The credit workload's model and the credit pipelines on 1,000 rows, a few calls each."""
    out = tmp_path_factory.mktemp("trees-results")
    settings = dataclasses.replace(QUICK, build_rows=1000, batch_rows=300, single_rows=20, batch_repeats=1)
    document = run_trees(settings, out, models=("credit",), compare_venv=other_environment, log=lambda m: None)
    return out, document


def test_every_way_of_answering_the_model_gives_lightgbms_bits(tiny_run):
    out, document = tiny_run
    assert json.loads((out / "trees.json").read_text())["records"] == document["records"]
    assert document["models"]["credit"]["trees"] == 100
    here = {r["method"]: r for r in document["records"] if r["part"] == "model" and r["environment"] == "main"}
    assert set(here) == {"lightgbm-booster", "sklearn-api", "sklearn-api-array", "willump", "willump-array",
                         "willump-kernel"}
    for method, record in here.items():
        assert record["exact"], (method, record["difference"])
        assert 0 < record["single_p50_us"] <= record["single_p90_us"] and record["batch_rows_per_s"] > 0
    assert here["lightgbm-booster"]["single_speedup"] == here["lightgbm-booster"]["batch_speedup"] == 1
    for method in ("willump", "willump-array"):
        assert here[method]["first_call_seconds"] > 0 and here[method]["status"]
    assert set(document["builds"]) == {"credit", "200-trees"} and document["builds"]["200-trees"]["trees"] == 200
    for build in document["builds"].values():
        assert 0 < build["model_to_string_s"] and 0 < build["lightgbm_load_s"] and 0 < build["willump_build_s"]
        assert 0 < build["export_s"]  # (a part of the build timed apart: no ordering of two noisy minima)
        assert 0 < build["willump_optimize_s"] and 0 < build["willump_load_s"] and 0 < build["lightgbm_pickle_load_s"]


def test_the_other_environment_runs_each_tool_or_says_why_not(tiny_run):
    _, document = tiny_run
    elsewhere = document["elsewhere"]["credit"]
    there = {r["method"]: r for r in document["records"] if r.get("environment") == "venv"}
    assert set(there) | set(elsewhere["errors"]) == set(TOOLS)
    assert there["lightgbm"]["exact"] and there["lightgbm"]["single_speedup"] == 1
    assert elsewhere["versions"]["lightgbm"] == document["machine"]["versions"]["lightgbm"]


def test_decorated_pipelines_answer_as_the_undecorated_ones(tiny_run):
    _, document = tiny_run
    decorated = {r["pipeline"]: r for r in document["records"] if r["part"] == "pipeline" and r["config"] == "willump"}
    assert set(decorated) == set(PIPELINES)
    for name, record in decorated.items():
        assert record["exact"], (name, record["difference"])
        assert record["batch_speedup"] > 0 and record["single_speedup"] > 0


def test_report_fills_the_trees_section_and_refuses_a_quick_run(tiny_run, tmp_path):
    out, _ = tiny_run
    text = filled_section(out, tmp_path, report.TREES_START, report.TREES_END)
    assert "| credit | willump | frame | main |" in text and "| credit | lightgbm | array | venv |" in text
    assert all(f"| {name} |" in text for name in PIPELINES)
    assert "Building (target: well under the library's load time" in text and "200-trees (200 trees) willump" in text
    assert "`willump.load` of it saved" in text and "`pickle.loads` of the booster" in text


def test_a_compare_venv_that_is_not_one_is_refused(tmp_path, capsys):
    assert main(["trees", "--quick", "--out", str(tmp_path), "--compare-venv", str(tmp_path / "nowhere")]) == 2
    assert "is not a virtualenv" in capsys.readouterr().err
