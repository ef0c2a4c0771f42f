"""Benchmark: the performance lab's own overhead. The same library benchmark run by the lab
(`perf --target qemu --test crypto`, warm cache: building is not timed) against the commands
the lab recorded for it, run directly under qemu-user; side by side, alternating, so load from
elsewhere hits both alike.

    .venv/bin/python bench/perf.py [--flavour wolfssl] [--rounds 2] [--full]

Prints wall time and CPU time (this process plus its children, getrusage) per side and the
ratios lab / direct. Target: <= 1.1.
"""

from __future__ import annotations

import argparse
import resource
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from openwrt_wolf.perf import lab
from openwrt_wolf.results.perf import CryptoSpeed


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flavour", default="wolfssl", choices=lab.FLAVOURS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--full", action="store_true", help="the full runs (default: --quick)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="perf-bench-") as tmp:
        req = lab.Request(
            flavours=(args.flavour,), tests=("crypto",), quick=not args.full, store=str(Path(tmp))
        )
        (warm,) = lab.run(req, say=lambda _: None)  # builds (not timed), and the command lines
        assert isinstance(warm, CryptoSpeed)
        commands = warm.commands
        sides = {"lab": [0.0, 0.0], "direct": [0.0, 0.0]}
        for n in range(args.rounds):
            t0, c0 = time.monotonic(), _cpu()
            lab.run(req, say=lambda _: None)
            sides["lab"][0] += time.monotonic() - t0
            sides["lab"][1] += _cpu() - c0
            t0, c0 = time.monotonic(), _cpu()
            for line in commands:
                subprocess.run(shlex.split(line), check=True, capture_output=True, timeout=3600)
            sides["direct"][0] += time.monotonic() - t0
            sides["direct"][1] += _cpu() - c0
            print(f"round {n + 1}: lab {sides['lab'][0]:.1f} s, direct {sides['direct'][0]:.1f} s"
                  " (cumulative wall)", flush=True)  # fmt: skip
    (lw, lc), (dw, dc) = sides["lab"], sides["direct"]
    print(f"{args.flavour} {'full' if args.full else 'quick'}, {len(commands)} tool runs x "
          f"{args.rounds} rounds")  # fmt: skip
    print(f"wall: lab {lw:.1f} s, direct {dw:.1f} s, ratio {lw / dw:.3f} (target <= 1.1)")
    print(f"cpu:  lab {lc:.1f} s, direct {dc:.1f} s, ratio {lc / dc:.3f} (target <= 1.1)")


if __name__ == "__main__":
    main()
