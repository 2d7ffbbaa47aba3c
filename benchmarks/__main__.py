"""``python -m benchmarks <workload|all|zoo|dask|trees> [--mode batch|point|topk|all] [--quick] [--out DIR]``.

``zoo`` measures the zoo (``benchmarks/zoo/``: pipelines written as scikit-learn's examples and
public notebooks write them) instead of the workloads; ``dask`` measures batch scoring on a Dask
cluster (``benchmarks/on_dask.py``; needs ``willump[dask]``); ``trees`` measures tree ensembles alone
and in held-out pipelines (``benchmarks/on_trees.py``; ``--compare-venv PATH`` adds lleaves and
treelite from another virtualenv); ``--mode`` applies to none of them."""

import argparse
import os
import sys
from pathlib import Path

# Before LightGBM's OpenMP runtime starts: its threads otherwise spin for milliseconds after each
# call, taking a core from whatever is measured next (a 10,000-row batch of willump's on 2 cores:
# 10.5 ms right after a Booster.predict, 6.7 ms 20 ms later), while a passive wait leaves
# LightGBM's own batch as it is (music, 10,000 rows: 22.1 ms spinning, 22.3 ms passive).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from benchmarks import report  # noqa: E402 (after the OpenMP setting)
from benchmarks.run import FULL, MODES, QUICK, run_workload, table  # noqa: E402
from benchmarks.workloads import WORKLOADS  # noqa: E402
from benchmarks.zoo import run as zoo  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure the undecorated pipelines and willump side by side on the paper's workloads.",
    )
    parser.add_argument("workload", choices=sorted(WORKLOADS) + ["all", "zoo", "dask", "trees"])
    parser.add_argument("--mode", choices=MODES + ("all",), default="all")
    parser.add_argument("--quick", action="store_true", help="smaller splits and fewer repetitions")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results", help="results directory")
    parser.add_argument("--compare-venv", type=Path, default=None,
                        help="trees only: a virtualenv with lleaves/treelite to time beside willump "
                             "(default: $WILLUMP_TREES_VENV, else none)")
    args = parser.parse_args(argv)
    try:
        if args.workload in ("zoo", "dask", "trees"):
            return {"zoo": _zoo, "dask": _dask, "trees": _trees}[args.workload](args)
        return _workloads(args)
    except FileNotFoundError as missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2


def _workloads(args) -> int:
    names = sorted(WORKLOADS) if args.workload == "all" else [args.workload]
    modes = MODES if args.mode == "all" else (args.mode,)
    settings = QUICK if args.quick else FULL
    for name in names:
        records = run_workload(name, modes, settings, args.out, log=lambda m: print(m, file=sys.stderr))
        print(f"\n== {name}\n{table(records)}")
    print(f"\nresults written to {args.out}")
    return 0


def _zoo(args) -> int:
    settings = zoo.QUICK if args.quick else zoo.FULL
    document = zoo.run_zoo(settings, args.out, log=lambda m: print(m, file=sys.stderr))
    print(f"\n== zoo\n{report.render_zoo(document)}")
    print(f"\nresults written to {args.out / 'zoo.json'}")
    return 0


def _dask(args) -> int:
    from benchmarks import on_dask

    try:
        import dask.dataframe  # noqa: F401 (dask is an extra: imported only here; it needs pyarrow)
        import distributed  # noqa: F401
    except ImportError as missing:
        print(f"error: python -m benchmarks dask needs willump's dask extra ({missing}): "
              "pip install \".[dask]\"", file=sys.stderr)
        return 2
    settings = on_dask.QUICK if args.quick else on_dask.FULL
    document = on_dask.run_dask(settings, args.out, log=lambda m: print(m, file=sys.stderr))
    print(f"\n== dask\n{report.render_dask(document)}")
    print(f"\nresults written to {args.out / 'dask.json'}")
    return 0


def _trees(args) -> int:
    from benchmarks import on_trees

    return on_trees.main_entry(args)


if __name__ == "__main__":
    sys.exit(main())
