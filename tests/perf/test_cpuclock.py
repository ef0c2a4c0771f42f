"""cpuclock (data/perf/cpuclock.c): with the shim, a program's monotonic clock and
gettimeofday advance with its CPU time, and alarm(1) fires after one CPU second. The oracle
is the kernel's own CPU accounting of the process (getrusage), read by tests/perf/clock_probe.c,
under qemu-user as the lab runs the benchmark tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

from openwrt_wolf.footprint import spec, toolchain
from openwrt_wolf.perf import programs
from tests.conftest import need_tools

HERE = Path(__file__).resolve().parent


def test_clocks_follow_cpu_time_under_qemu(tmp_path: Path) -> None:
    need_tools("mips-linux-gnu-gcc", "qemu-mips-static", "/usr/mips-linux-gnu/include/stdio.h")
    tc = toolchain.find(spec.get_arch("mips_24kc"))
    so = programs.shim("cpuclock", spec.resolve("mbedtls", None, "openwrt"), tc)
    exe = tmp_path / "clock_probe"
    subprocess.run([tc.tool("gcc"), "-O1", "-mips32r2", "-o", str(exe),
                    str(HERE / "clock_probe.c")], check=True, timeout=300)  # fmt: skip
    r = subprocess.run(["qemu-mips-static", "-cpu", "24Kf", "-L", tc.sysroot, "-E",
                        f"LD_PRELOAD={so}", str(exe)], capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    mono, tod, cpu = (int(v) for v in r.stdout.split())
    # alarm(1) on the CPU clock: the loop ran one CPU second as the kernel counts it
    assert 900_000 <= cpu <= 1_500_000, r.stdout
    # both clocks read CPU time: equal to the kernel's count within its tick accounting
    for seen in (mono, tod):
        assert abs(seen - cpu) <= 0.1 * cpu + 20_000, r.stdout
