"""``python -m benchmarks <workload|all|zoo> [--mode batch|point|topk|all] [--quick] [--out DIR]``.

``zoo`` measures the zoo (``benchmarks/zoo/``: pipelines written as scikit-learn's examples and
public notebooks write them) instead of the workloads; ``--mode`` does not apply to it."""

import argparse
import sys
from pathlib import Path

from benchmarks import report
from benchmarks.run import FULL, MODES, QUICK, run_workload, table
from benchmarks.workloads import WORKLOADS
from benchmarks.zoo import run as zoo


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure the undecorated pipelines and willump side by side on the paper's workloads.",
    )
    parser.add_argument("workload", choices=sorted(WORKLOADS) + ["all", "zoo"])
    parser.add_argument("--mode", choices=MODES + ("all",), default="all")
    parser.add_argument("--quick", action="store_true", help="smaller splits and fewer repetitions")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results", help="results directory")
    args = parser.parse_args(argv)
    try:
        return _zoo(args) if args.workload == "zoo" else _workloads(args)
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


if __name__ == "__main__":
    sys.exit(main())
