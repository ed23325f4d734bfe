"""The ``gpu-lessons`` command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu-lessons", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env", help="print the environment report (Python, packages, CPU, GPU)")
    sub.add_parser("gpus", help="list the GPU catalog")
    from .grade import add_arguments

    add_arguments(sub.add_parser("grade", help="grade a folder of submitted exercise notebooks "
                                 "(CSV + JSON)"))
    args = parser.parse_args(argv)
    if args.command == "env":
        from .env import report

        print(report())
    elif args.command == "gpus":
        from .hardware import catalog

        for g in catalog().values():
            print(f"{g.name:<16} CC {g.cc:<5} {g.sms:>4} SMs  {g.bandwidth_gbs:>6,.0f} GB/s  "
                  f"FP32 {g.peak_tflops['fp32']:>5.1f} TFLOP/s  "
                  f"FP16 tensor {g.peak_tflops.get('fp16', float('nan')):>7.1f} TFLOP/s (dense)")
    elif args.command == "grade":
        from .grade import run

        return run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
