#!/usr/bin/env python3
"""Benchmark: size analysis of a real 4 MB+ xz squashfs holding TLS libraries.

Side by side in one run:
  tools  unsquashfs -s (rootfs size) + unsquashfs -d (extract) + xz -9e -c per TLS library
  ours   openwrt_wolf.firmware.rootfs.measure_rootfs (pure-Python squashfs reader + liblzma 9e),
         with a cold cache, then the whole `size-report --from DIR` twice: cold and repeated
Prints the times and the ratios (targets: ours/tools ≤ 1.5, repeated/first ≤ 0.1).
The libraries: the host's real libcrypto/libssl (OpenSSL) and other real shared objects
under the mbedtls and wolfssl names, at the sizes OpenWrt ships them.

    ./wolf bench-size          or    .venv/bin/python bench/size_report.py
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openwrt_wolf import proc
from openwrt_wolf.firmware import rootfs
from openwrt_wolf.host import hosttools
from openwrt_wolf.report import sizereport
from openwrt_wolf.report.render import render

T = TypeVar("T")
PROFILE = "tplink_tl-wr902ac-v1"
# name in the rootfs -> approximate stripped size (openwrt-facts / testbed figures)
NAMES = {
    "usr/lib/libmbedtls.so.3.6.6": 150_000,
    "usr/lib/libmbedx509.so.3.6.6": 75_000,
    "usr/lib/libmbedcrypto.so.3.6.6": 400_000,
    "usr/lib/libwolfssl.so.5.9.1.ee39414e": 1_400_000,
    "lib/libustream-ssl.so": 30_000,
}
REAL_OPENSSL = ("libcrypto.so.3", "libssl.so.3")


def host_libs() -> list[Path]:
    out = []
    for p in sorted(Path("/usr/lib").glob("*-linux-gnu*/lib*.so.*")):
        if p.is_file() and not p.is_symlink() and "icu" not in p.name:
            out.append(p)
    return out


def make_rootfs(root: Path, min_image: int, work: Path) -> Path:
    libs = host_libs()
    by_name = {p.name: p for p in libs}
    for name in REAL_OPENSSL:
        if name not in by_name:
            sys.exit(f"bench needs the host's {name} (Debian package libssl3)")
        dst = root / "usr/lib" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(by_name[name], dst)
    pool = [p for p in libs if p.name not in REAL_OPENSSL]
    for name, size in NAMES.items():
        # the real shared object closest in size, cut to the size OpenWrt ships
        src = min(pool, key=lambda p: abs(p.stat().st_size - size))
        pool.remove(src)
        dst = root / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(src.read_bytes()[:size])
    # other programs until the image is big enough
    image = work / "root.squashfs"
    extra = iter(p for p in pool if 100_000 < p.stat().st_size < 3_000_000)
    while True:
        proc.run(
            ["mksquashfs", root, image, "-comp", "xz", "-b", "256k", "-nopad", "-noappend",
             "-no-xattrs", "-all-root", "-quiet"],
            timeout=600,
        )  # fmt: skip
        if image.stat().st_size >= min_image:
            return image
        for _ in range(4):
            src = next(extra)
            shutil.copyfile(src, root / "usr/lib" / f"other-{src.name}")


def tools_way(image: Path, work: Path) -> tuple[int, int]:
    """What a person would run: the size, an extraction, xz -9e of each TLS library."""
    out = proc.run(["unsquashfs", "-s", image], timeout=60).output
    size = int(out.split("Filesystem size ")[1].split()[0])
    dest = work / "extract"
    shutil.rmtree(dest, ignore_errors=True)
    proc.run(["unsquashfs", "-no-xattrs", "-d", dest, image], timeout=600)
    total = 0
    for f in sorted(dest.rglob("*")):
        if f.is_file() and not f.is_symlink() and rootfs._group(f.name):
            line = f"xz -9e -c {shlex.quote(str(f))} | wc -c"
            total += int(proc.run(["sh", "-c", line], timeout=600).output)
    return size, total


def timed(fn: Callable[..., T], *a: Any, **k: Any) -> tuple[float, T]:
    t = time.perf_counter()
    r = fn(*a, **k)
    return time.perf_counter() - t, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=float, default=4.5, help="minimum squashfs size, MiB")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs of each side (best of)")
    args = ap.parse_args()
    hosttools.ensure(["mksquashfs", "unsquashfs", "xz"])
    work = Path(tempfile.mkdtemp(prefix="bench-size-"))
    try:
        os.environ["OPENWRT_WOLF_CACHE"] = str(work / "cache")
        root = work / "root"
        image = make_rootfs(root, int(args.size_mb * 1024 * 1024), work)
        n_libs = sum(1 for p in root.rglob("*") if p.is_file() and rootfs._group(p.name))
        lib_bytes = sum(p.stat().st_size for p in root.rglob("*") if rootfs._group(p.name))
        print(f"squashfs: {image.stat().st_size:,} B xz, 256 KiB blocks; "
              f"{n_libs} TLS libraries, {lib_bytes:,} B")  # fmt: skip

        best_tools = best_ours = best_ours1 = float("inf")
        for _ in range(args.repeat):
            t_tools, (size_t, xz_t) = timed(tools_way, image, work)
            shutil.rmtree(work / "cache", ignore_errors=True)
            t_ours1, info1 = timed(rootfs.measure_rootfs, image, jobs=1)
            shutil.rmtree(work / "cache", ignore_errors=True)
            t_ours, info = timed(rootfs.measure_rootfs, image)
            assert info.size == size_t and info.tls_xz == xz_t == info1.tls_xz, "results differ"
            best_tools, best_ours = min(best_tools, t_tools), min(best_ours, t_ours)
            best_ours1 = min(best_ours1, t_ours1)
        print(f"tools  unsquashfs -s + unsquashfs -d + xz -9e each: {best_tools:7.2f} s  "
              f"(rootfs {size_t:,} B, TLS xz {xz_t:,} B)")  # fmt: skip
        print(f"ours   measure_rootfs, 1 thread:                    {best_ours1:7.2f} s  "
              f"ratio {best_ours1 / best_tools:.2f}x")  # fmt: skip
        print(
            f"ours   measure_rootfs, {os.cpu_count()} threads:                   "
            f"{best_ours:7.2f} s  ratio {best_ours / best_tools:.2f}x (target <= 1.5x)"
        )

        # the whole report over an output directory: cold cache, then repeated
        out = work / "bin/targets/ath79/generic"
        out.mkdir(parents=True)
        shutil.copyfile(image, out / "root.squashfs")
        (out / f"{PROFILE}-kernel.bin").write_bytes(os.urandom(1_900_000))
        shutil.rmtree(work / "cache", ignore_errors=True)

        def report() -> str:
            rep = sizereport.build(from_dirs=[str(out)], device="tl-wr902ac")
            return render(rep, "json")

        t_first, _ = timed(report)
        t_again = min(timed(report)[0] for _ in range(3))
        print(f"report first (cold cache): {t_first:7.3f} s")
        print(f"report repeated:           {t_again:7.3f} s  ratio {t_again / t_first:.3f}x "
              f"(target <= 0.1x)")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
