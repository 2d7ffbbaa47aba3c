"""``python -m benchmarks <workload|all> [--mode batch|point|topk|all] [--quick] [--out DIR]``."""

import argparse
import sys
from pathlib import Path

from benchmarks.run import FULL, MODES, QUICK, run_workload, table
from benchmarks.workloads import WORKLOADS


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure the undecorated pipelines and willump side by side on the paper's workloads.",
    )
    parser.add_argument("workload", choices=sorted(WORKLOADS) + ["all"])
    parser.add_argument("--mode", choices=MODES + ("all",), default="all")
    parser.add_argument("--quick", action="store_true", help="smaller splits and fewer repetitions")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results", help="results directory")
    args = parser.parse_args(argv)
    names = sorted(WORKLOADS) if args.workload == "all" else [args.workload]
    modes = MODES if args.mode == "all" else (args.mode,)
    settings = QUICK if args.quick else FULL
    for name in names:
        try:
            records = run_workload(name, modes, settings, args.out, log=lambda m: print(m, file=sys.stderr))
        except FileNotFoundError as missing:
            print(f"error: {missing}", file=sys.stderr)
            return 2
        print(f"\n== {name}\n{table(records)}")
    print(f"\nresults written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
