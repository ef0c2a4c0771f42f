"""Benchmark of the VM and measure-memory on Debian's real malta kernel (the test stand-in guest).

1. measure-memory's boot-to-measurement wall time (QEMU start → /proc/meminfo read, --idle 0)
   vs a bare QEMU boot-to-prompt of the same kernel and command line, driven by a minimal
   socket loop, interleaved in the same run (target: ≤ 1.3×).
2. Two boots in parallel vs one after the other (each in its own process).
3. MemFree spread over 5 boots.

Run: .venv/bin/python bench/memory.py [--pairs 3] [--spread-boots 5]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openwrt_wolf import memory
from openwrt_wolf.vm import qemu, reaper, standin
from openwrt_wolf.vm.image import inspect_kernel

CONSOLE = b"Please press Enter to activate this console."
PROMPT = b"root@OpenWrt:/# "


def spec() -> qemu.VmSpec:
    g = standin.build()
    return qemu.VmSpec(
        kernel=inspect_kernel(g.kernel.vmlinuz), initrd=g.initramfs, append=g.cmdline
    )


def bare_boot_to_prompt(s: qemu.VmSpec) -> float:
    """QEMU started by hand with the same argv: seconds until the first shell prompt."""
    with tempfile.TemporaryDirectory(prefix="wolf-bench-") as d:
        sock_path = Path(d) / "console.sock"
        argv = qemu.command(qemu.VmSpec(**{**s.__dict__, "ssh_port": qemu.free_port()}), sock_path)
        start = time.monotonic()
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            while not sock_path.exists():
                time.sleep(0.01)
            c = socket.socket(socket.AF_UNIX)
            while True:
                try:
                    c.connect(str(sock_path))
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    time.sleep(0.01)
            buf = b""
            pressed = False
            while True:
                data = c.recv(65536)
                if not data:
                    raise RuntimeError("QEMU closed the console")
                buf += data
                if not pressed and CONSOLE in buf:
                    c.sendall(b"\n")
                    pressed = True
                    buf = b""
                if pressed and PROMPT in buf:
                    return time.monotonic() - start
        finally:
            reaper.kill(p)


def measured(s: qemu.VmSpec) -> tuple[float, float]:
    """One measure-memory boot with --idle 0: (QEMU start → meminfo read, whole call)."""
    t0 = time.monotonic()
    r = memory.measure(s, boots=1, idle=0)
    return r.per_boot[0].seconds_to_measurement, time.monotonic() - t0


def one_boot(_: int) -> float:
    t0 = time.monotonic()
    memory.measure(spec(), boots=1, idle=0)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--spread-boots", type=int, default=5)
    ap.add_argument("--spread-idle", type=float, default=2.0)
    args = ap.parse_args()
    s = spec()
    print(f"kernel {s.kernel.path.name}, -m {s.memory()} MB, {args.pairs} interleaved pairs")

    bare, to_read, whole = [], [], []
    for i in range(args.pairs):
        bare.append(bare_boot_to_prompt(s))
        a, b = measured(s)
        to_read.append(a)
        whole.append(b)
        print(
            f"  pair {i + 1}: bare boot-to-prompt {bare[-1]:.2f} s, measure-memory "
            f"boot-to-measurement {a:.2f} s (whole call incl. power-off {b:.2f} s)"
        )
    mb, mr, mw = (statistics.median(x) for x in (bare, to_read, whole))
    print(
        f"1. median bare {mb:.2f} s, boot-to-measurement {mr:.2f} s → ratio {mr / mb:.2f}× "
        f"(target ≤ 1.3×); whole call {mw:.2f} s → {mw / mb:.2f}×"
    )

    t0 = time.monotonic()
    for i in range(2):
        one_boot(i)
    serial = time.monotonic() - t0
    t0 = time.monotonic()
    with ProcessPoolExecutor(max_workers=2) as ex:  # a process each: QEMU dies with its thread
        list(ex.map(one_boot, range(2)))
    parallel = time.monotonic() - t0
    print(
        f"2. two boots one after the other {serial:.2f} s, in parallel {parallel:.2f} s "
        f"→ parallel/serial {parallel / serial:.2f}"
    )

    r = memory.measure(s, boots=args.spread_boots, idle=args.spread_idle)
    free = [b.memfree_kb for b in r.per_boot]
    print(
        f"3. MemFree over {len(free)} boots (idle {args.spread_idle:g} s): {free} kB; "
        f"median {statistics.median(free):,.0f}, min {min(free):,}, max {max(free):,}, "
        f"spread {max(free) - min(free):,} kB ({(max(free) - min(free)) / r.memtotal_kb:.3%} "
        f"of MemTotal {r.memtotal_kb:,} kB)"
    )


if __name__ == "__main__":
    main()
