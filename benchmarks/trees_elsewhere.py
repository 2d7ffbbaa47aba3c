"""Tree compilers that cannot share willump's environment, timed in another one (issue 31).

Run by ``python -m benchmarks trees --compare-venv PATH`` as ``PATH/bin/python -I trees_elsewhere.py
...``: a stand-alone script (numpy and whatever it finds of lightgbm, lleaves, treelite, tl2cgen; never
willump nor the ``benchmarks`` package), because lleaves needs an llvmlite older than the one numba
0.68 needs. It loads a LightGBM model file (``Booster.save_model``), compiles it with each tool it can
import (the compile timed apart), times single rows (p50, p90) and a batch (median) the way the main
harness does, and compares every answer, to the bit, with the answers LightGBM gave in the main
environment. It writes one JSON document: the environment's versions, one result per tool, and why a
tool could not run.
"""

import argparse
import importlib.metadata
import json
import os
import platform
import sys
import tempfile
import time
import traceback

import numpy as np

DISTRIBUTIONS = ("numpy", "lightgbm", "lleaves", "llvmlite", "treelite", "tl2cgen")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="LightGBM model file (Booster.save_model)")
    parser.add_argument("--features", required=True, help=".npy of the test rows' float64 features")
    parser.add_argument("--expected", required=True, help=".npy of LightGBM's answers for them, main environment")
    parser.add_argument("--batch-rows", type=int, required=True)
    parser.add_argument("--single-rows", type=int, required=True)
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    features, expected = np.load(args.features), np.load(args.expected)
    positions = np.resize(np.arange(len(features)), args.batch_rows)
    batch, batch_expected = np.ascontiguousarray(features[positions]), expected[positions]
    rows = [features[i % len(features)][None, :] for i in range(args.single_rows)]
    row_expected = expected[np.arange(args.single_rows) % len(features)]
    results, errors = {}, {}
    with tempfile.TemporaryDirectory(prefix="willump-trees-elsewhere-") as directory:
        for name, build in TOOLS.items():
            try:
                seconds, (single, whole) = _timed(build, args.model, directory)
                results[name] = _measure(single, whole, rows, batch, args.repeats)
            except Exception as failed:  # noqa: BLE001 (a tool that fails is reported, not fatal)
                errors[name] = f"{type(failed).__name__}: {failed}".strip()[:300]
                traceback.print_exc(file=sys.stderr)
                continue
            results[name]["compile_seconds"] = seconds
            results[name].update(_exactness(single, whole, rows, row_expected, batch, batch_expected))
    document = {"python": sys.executable, "python_version": platform.python_version(),
                "versions": {d: _version(d) for d in DISTRIBUTIONS}, "cores": os.cpu_count(),
                "results": results, "errors": errors}
    with open(args.out, "w") as out:
        json.dump(document, out, indent=1)
    return 0


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def lightgbm_booster(model_file: str, directory: str):
    """LightGBM's own Booster in this environment: the reference its version gives here (one thread
    for a single row, as in the main harness; its default, every core, for a batch)."""
    import lightgbm

    booster = lightgbm.Booster(model_file=model_file)
    return (lambda row: booster.predict(row, num_threads=1)), booster.predict


def lleaves_model(model_file: str, directory: str):
    """lleaves: compiled once (LLVM); one thread for a single row, every core for a batch."""
    import lleaves

    model = lleaves.Model(model_file=model_file)
    model.compile()
    return (lambda row: model.predict(row, n_jobs=1)), (lambda batch: model.predict(batch, n_jobs=os.cpu_count()))


def treelite_compiled(model_file: str, directory: str):
    """treelite's model compiled to C by tl2cgen and gcc (treelite 4); a DMatrix made per call."""
    import tl2cgen

    model = _treelite_model(model_file)
    library = os.path.join(directory, f"model-{os.getpid()}.so")
    tl2cgen.export_lib(model, toolchain="gcc", libpath=library, params={"parallel_comp": os.cpu_count()})
    predictor = tl2cgen.Predictor(library, nthread=os.cpu_count())
    single = tl2cgen.Predictor(library, nthread=1)

    def answer(chosen, X):
        return np.asarray(chosen.predict(tl2cgen.DMatrix(X, dtype="float64"))).reshape(len(X))

    return (lambda row: answer(single, row)), (lambda batch: answer(predictor, batch))


def treelite_gtil(model_file: str, directory: str):
    """treelite's own interpreter (GTIL): no compile."""
    import treelite

    model = _treelite_model(model_file)

    def answer(X, threads):
        return np.asarray(treelite.gtil.predict(model, X, nthread=threads)).reshape(len(X))

    return (lambda row: answer(row, 1)), (lambda batch: answer(batch, os.cpu_count()))


def _treelite_model(model_file: str):
    import treelite

    if hasattr(treelite, "frontend"):  # treelite >= 4
        return treelite.frontend.load_lightgbm_model(model_file)
    return treelite.Model.load(model_file, model_format="lightgbm")


TOOLS = {"lightgbm": lightgbm_booster, "lleaves": lleaves_model, "treelite-tl2cgen": treelite_compiled,
         "treelite-gtil": treelite_gtil}


def _measure(single, whole, rows: list, batch: np.ndarray, repeats: int) -> dict:
    """Single-row p50/p90 (µs) over ``rows`` after ten warm-up calls; the batch's median time."""
    for row in rows[:10]:
        single(row)
    seconds = [_timed(single, row)[0] for row in rows]
    whole(batch)
    batch_seconds = float(np.median([_timed(whole, batch)[0] for _ in range(repeats)]))
    return {"single_p50_us": float(np.percentile(seconds, 50)) * 1e6,
            "single_p90_us": float(np.percentile(seconds, 90)) * 1e6,
            "batch_ms": batch_seconds * 1e3, "batch_rows_per_s": len(batch) / batch_seconds}


def _exactness(single, whole, rows, row_expected, batch, batch_expected) -> dict:
    """Whether the answers, of single rows and of the batch, equal LightGBM's bits; how far they are if not."""
    answers = np.concatenate([np.asarray(whole(batch), dtype=np.float64).ravel(),
                              np.concatenate([np.asarray(single(row), dtype=np.float64).ravel() for row in rows])])
    expected = np.concatenate([batch_expected, row_expected])
    if answers.shape != expected.shape:
        return {"exact": False, "difference": f"shape {answers.shape}, expected {expected.shape}"}
    unequal = answers.view(np.uint64) != expected.view(np.uint64)
    if not unequal.any():
        return {"exact": True, "difference": None}
    largest = float(np.max(np.abs(answers - expected)))
    return {"exact": False,
            "difference": f"values differ ({int(unequal.sum())} of {unequal.size}; largest {largest:.3g})"}


if __name__ == "__main__":
    sys.exit(main())
