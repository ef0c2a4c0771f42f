"""heaptrack (data/perf/heaptrack.c): cross-built for MIPS by the lab and loaded into a program
with known allocations (tests/perf/known_allocs.c) under qemu-user, and natively on the host.
The oracle is the program's own arithmetic (its comments): what it asked for, freed and when."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.footprint import spec, toolchain
from openwrt_wolf.perf import heap, programs
from tests.conftest import need_tools

HERE = Path(__file__).resolve().parent
# (event, live, peak, allocs, frees) after each report of known_allocs.c:
#   malloc 1000, calloc 10x100, realloc to 3000 (a new block, the copy, then the old freed:
#   peak 5000), posix_memalign 64/500, free the calloc -> mark; malloc 200, free it, free the
#   realloc'd block -> mark (window peak 3700); free the aligned block -> exit (window peak 500)
EXPECTED = [
    ("start", 0, 0, 0, 0),
    ("mark", 3500, 5000, 4, 2),
    ("mark", 500, 3700, 5, 4),
    ("exit", 0, 500, 5, 5),
]


def _check(reports: list[heap.HeapReport]) -> None:
    assert [(r.event, r.live, r.peak, r.allocs, r.frees) for r in reports] == EXPECTED
    assert len({r.pid for r in reports}) == 1


def test_heaptrack_mips_under_qemu(tmp_path: Path) -> None:
    need_tools("mips-linux-gnu-gcc", "qemu-mips-static", "/usr/mips-linux-gnu/include/stdio.h")
    arch = spec.get_arch("mips_24kc")
    tc = toolchain.find(arch)
    bs = spec.resolve("mbedtls", None, "openwrt")  # any spec: the shim needs its arch flags
    so = programs.shim("heaptrack", bs, tc)
    exe = tmp_path / "known_allocs"
    subprocess.run([tc.tool("gcc"), "-O0", "-fno-builtin", "-mips32r2", "-o", str(exe),
                    str(HERE / "known_allocs.c")], check=True, timeout=300)  # fmt: skip
    out = tmp_path / "heap.txt"
    r = subprocess.run(
        ["qemu-mips-static", "-cpu", "24Kf", "-L", tc.sysroot, "-E", f"LD_PRELOAD={so}",
         "-E", f"{heap.ENV_OUT}={out}", str(exe)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    _check(heap.parse(out.read_text()))


def test_heaptrack_native(tmp_path: Path) -> None:
    """The same source on the host: the counts do not depend on the C library's allocator."""
    need_tools("gcc")
    so, exe, out = tmp_path / "heaptrack.so", tmp_path / "known_allocs", tmp_path / "heap.txt"
    subprocess.run(["gcc", "-O2", "-fpic", "-shared", "-Wall", "-Wextra", "-Werror", "-o",
                    str(so), str(programs.data_file("heaptrack.c")), "-ldl"],
                   check=True, timeout=120)  # fmt: skip
    subprocess.run(["gcc", "-O0", "-fno-builtin", "-o", str(exe), str(HERE / "known_allocs.c")],
                   check=True, timeout=120)  # fmt: skip
    env = {"LD_PRELOAD": str(so), heap.ENV_OUT: str(out), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([str(exe)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
    _check(heap.parse(out.read_text()))


def test_no_output_file_means_silent(tmp_path: Path) -> None:
    need_tools("gcc")
    so, exe = tmp_path / "heaptrack.so", tmp_path / "known_allocs"
    src = programs.data_file("heaptrack.c")
    subprocess.run(["gcc", "-fpic", "-shared", "-o", str(so), str(src), "-ldl"], check=True,
                   timeout=120)  # fmt: skip
    subprocess.run(["gcc", "-O0", "-o", str(exe), str(HERE / "known_allocs.c")], check=True,
                   timeout=120)  # fmt: skip
    r = subprocess.run([str(exe)], env={"LD_PRELOAD": str(so)}, capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert r.returncode == 0 and r.stdout == "ok\n" and r.stderr == ""


@pytest.mark.parametrize(
    "line",
    ["heaptrack pid=1 event=mark live=x peak=0 allocs=0 frees=0", "garbage", ""],
)
def test_parse_ignores_other_lines(line: str) -> None:
    assert heap.parse(line) == []
