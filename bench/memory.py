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
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openwrt_wolf import proc
from openwrt_wolf.measure import free_memory
from openwrt_wolf.targets.vm import qemu
from openwrt_wolf.targets.vm.kernel import inspect_kernel
from tests.standin import malta_guest

CONSOLE = b"Please press Enter to activate this console."
PROMPT = b"root@OpenWrt:/# "


def spec() -> qemu.VmSpec:
    g = malta_guest.build()
    return qemu.VmSpec(
        kernel=inspect_kernel(g.kernel.vmlinuz), initrd=g.initramfs, append=g.cmdline
    )


def bare_boot_to_prompt(s: qemu.VmSpec) -> dict[str, float]:
    """QEMU started by hand with the same argv: seconds to the first byte, the console line and
    the first shell prompt."""
    with tempfile.TemporaryDirectory(prefix="wolf-bench-") as d:
        sock_path = Path(d) / "console.sock"
        argv = qemu.command(qemu.VmSpec(**{**s.__dict__, "ssh_port": qemu.free_port()}), sock_path)
        start = time.monotonic()
        p = proc.spawn(argv)
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
            t: dict[str, float] = {}
            while True:
                data = c.recv(65536)
                if not data:
                    raise RuntimeError("QEMU closed the console")
                t.setdefault("booting", time.monotonic() - start)
                buf += data
                if "console" not in t and CONSOLE in buf:
                    t["console"] = time.monotonic() - start
                    c.sendall(b"\n")
                    buf = b""
                if "console" in t and PROMPT in buf:
                    t["shell"] = time.monotonic() - start
                    return t
        finally:
            p.stop()


def measured(s: qemu.VmSpec) -> tuple[dict[str, float], float]:
    """One measure-memory boot with --idle 0: (state times and the reading, whole call)."""
    t0 = time.monotonic()
    r = free_memory.measure(s, boots=1, idle=0)
    b = r.per_boot[0]
    t = {x["state"]: float(x["at"]) for x in b.transitions}
    t["read"] = b.seconds_to_measurement
    return t, time.monotonic() - t0


def one_boot(_: int) -> float:
    t0 = time.monotonic()
    free_memory.measure(spec(), boots=1, idle=0)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--spread-boots", type=int, default=5)
    ap.add_argument("--spread-idle", type=float, default=2.0)
    args = ap.parse_args()
    s = spec()
    print(f"kernel {s.kernel.path.name}, -m {s.memory()} MB, {args.pairs} interleaved pairs")

    bare: list[float] = []
    to_read: list[float] = []
    whole: list[float] = []
    to_shell: list[float] = []
    for i in range(args.pairs):
        # alternate which goes first, so a change in the host's load hits both alike
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for which in order:
            if which == 0:
                tb = bare_boot_to_prompt(s)
                bare.append(tb["shell"])
            else:
                tm, call = measured(s)
                to_read.append(tm["read"])
                to_shell.append(tm["shell"])
                whole.append(call)
        print(
            f"  pair {i + 1}: bare: first byte {tb['booting']:.2f}, console {tb['console']:.2f},"
            f" prompt {tb['shell']:.2f} s | measure-memory: first byte {tm['booting']:.2f}, "
            f"console {tm['console']:.2f}, shell {tm['shell']:.2f}, network {tm['network']:.2f},"
            f" meminfo read {tm['read']:.2f} s, whole call {call:.2f} s"
        )
    mb, mr, mw, ms = (statistics.median(x) for x in (bare, to_read, whole, to_shell))
    print(
        f"1. median bare boot-to-prompt {mb:.2f} s; measure-memory boot-to-measurement "
        f"{mr:.2f} s → {mr / mb:.2f}× (target ≤ 1.3×); its own boot-to-prompt {ms:.2f} s → "
        f"{ms / mb:.2f}×; whole call with power-off {mw:.2f} s → {mw / mb:.2f}×"
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

    r = free_memory.measure(s, boots=args.spread_boots, idle=args.spread_idle)
    free = [b.memfree_kb for b in r.per_boot]
    print(
        f"3. MemFree over {len(free)} boots (idle {args.spread_idle:g} s): {free} kB; "
        f"median {statistics.median(free):,.0f}, min {min(free):,}, max {max(free):,}, "
        f"spread {max(free) - min(free):,} kB ({(max(free) - min(free)) / r.memtotal_kb:.3%} "
        f"of MemTotal {r.memtotal_kb:,} kB)"
    )


if __name__ == "__main__":
    main()
