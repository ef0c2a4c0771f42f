"""Benchmark: `invoke footprint` for the three libraries against the same configure/make
commands run directly, side by side in one run, plus the cached re-run.

    .venv/bin/python bench/footprint.py [--parallel 2]

A: the lab in a fresh cache (unpack, configure, compile, strip, xz, squashfs, store).
B: the build commands A recorded, replayed with bash from a fresh `tar -xf` of the same
   tarballs, with the same number of builds at a time. Target: A/B <= 1.1.
C: the lab again on A's cache (nothing to build).
Downloads are not timed: the tarballs come from the shared cache (fetched first if missing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from openwrt_wolf import proc
from openwrt_wolf.footprint import lab, sources, spec
from openwrt_wolf.footprint.model import Footprint

VERSIONS = (("wolfssl", "5.9.2"),)  # 25.12.5's 5.9.1 is not in Debian


def request(dl: Path, parallel: int) -> lab.Request:
    # Mbed TLS, OpenSSL: openwrt; wolfSSL: openwrt + minimal
    return lab.Request(configs=("openwrt", "minimal"), versions=VERSIONS, sources=(str(dl),),
                       parallel=parallel)  # fmt: skip


def replay(fp: Footprint, tarball: Path) -> None:
    """Unpack with tar where the lab unpacked, then run the recorded command lines."""
    root = lab.build_root() / fp.cache_key / "src"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    proc.run(["tar", "-xf", tarball, "-C", root], timeout=600)
    for line in fp.commands:
        proc.run(["bash", "-c", line], timeout=3600)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--parallel", type=int, default=2)
    args = ap.parse_args()
    shared_dl = sources.download_dir()
    for name in spec.LIBRARIES:  # make sure the tarballs are there, outside the timing
        ver = dict(VERSIONS).get(name) or spec.resolve(name, None, "openwrt").version
        sources.fetch(spec.source(name, ver))
    with tempfile.TemporaryDirectory(prefix="footprint-bench-") as tmp:
        os.environ["OPENWRT_WOLF_CACHE"] = str(Path(tmp) / "cache")
        os.environ["OPENWRT_WOLF_STORE"] = str(Path(tmp) / "results")
        t0 = time.monotonic()
        outcome = lab.run(request(shared_dl, args.parallel))
        a = time.monotonic() - t0
        if outcome.errors:
            raise SystemExit(f"bench: a build failed: {outcome.errors[0]}")
        fps = outcome.footprints

        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.parallel) as pool:
            list(pool.map(lambda fp: replay(fp, shared_dl / fp.source_file), fps))
        b = time.monotonic() - t0

        t0 = time.monotonic()
        again = lab.run(request(shared_dl, args.parallel))
        c = time.monotonic() - t0
        assert [f.cache_key for f in again.footprints] == [f.cache_key for f in fps]

    builds = ", ".join(f"{fp.library}/{fp.config} {fp.build_seconds:.0f} s" for fp in fps)
    print(f"builds ({args.parallel} at a time, make -j{os.cpu_count()}): {builds}")
    print(f"A  invoke footprint, fresh cache      {a:8.1f} s")
    print(f"B  same commands run directly         {b:8.1f} s")
    print(f"C  invoke footprint, cached re-run    {c:8.1f} s")
    print(f"A/B = {a / b:.3f}  (target <= 1.1)   C/A = {c / a:.4f}")


if __name__ == "__main__":
    main()
