"""Benchmark: `invoke footprint` for the three libraries against the same configure/make
commands run directly, side by side in one run, plus the cached re-run.

    .venv/bin/python bench/footprint.py [--parallel 2]

Per build, one at a time and side by side (so load from elsewhere hits both alike):
  lab    = the lab in a fresh cache (unpack, configure, compile, strip, xz, squashfs, store);
  direct = the build commands the lab recorded, replayed with bash from a fresh `tar -xf`.
  Target: sum(lab) / sum(direct) <= 1.1.
Then all builds as a user runs them (--parallel at a time) and the cached re-run.
Downloads are not timed: the tarballs come from the shared cache (fetched first if missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path

from openwrt_wolf import proc
from openwrt_wolf.footprint import lab, sources, spec
from openwrt_wolf.results.footprint import Footprint

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
    ap.add_argument("--parallel", type=int, default=2, help="builds at a time in the total run")
    args = ap.parse_args()
    shared_dl = sources.download_dir()
    for name in spec.LIBRARIES:  # make sure the tarballs are there, outside the timing
        ver = dict(VERSIONS).get(name) or spec.resolve(name, None, "openwrt").version
        sources.fetch(spec.source(name, ver))
    rows = []
    with tempfile.TemporaryDirectory(prefix="footprint-bench-") as tmp:
        os.environ["OPENWRT_WOLF_STORE"] = str(Path(tmp) / "results")
        # 1. per build, side by side (one build at a time, so other load hits both alike):
        #    the lab in a fresh cache, then the same commands replayed directly
        os.environ["OPENWRT_WOLF_CACHE"] = str(Path(tmp) / "pairs")
        for name in spec.LIBRARIES:
            for config in ("openwrt", "minimal"):
                if config not in spec.get_library(name).configs():
                    continue
                req = dataclasses.replace(request(shared_dl, 1), libraries=(name,),
                                          configs=(config,))  # fmt: skip
                t0 = time.monotonic()
                outcome = lab.run(req)
                a = time.monotonic() - t0
                if outcome.errors:
                    raise SystemExit(f"bench: a build failed: {outcome.errors[0]}")
                (fp,) = outcome.footprints
                t0 = time.monotonic()
                replay(fp, shared_dl / fp.source_file)
                b = time.monotonic() - t0
                rows.append((f"{name}/{config}", a, b))
                print(f"{name}/{config}: lab {a:.1f} s, direct {b:.1f} s, ratio {a / b:.3f}",
                      flush=True)  # fmt: skip
        # 2. all of them the way a user runs it (--parallel at a time), then the cached re-run
        os.environ["OPENWRT_WOLF_CACHE"] = str(Path(tmp) / "total")
        t0 = time.monotonic()
        total = lab.run(request(shared_dl, args.parallel))
        t_total = time.monotonic() - t0
        t0 = time.monotonic()
        again = lab.run(request(shared_dl, args.parallel))
        t_cached = time.monotonic() - t0
        assert [f.cache_key for f in again.footprints] == [f.cache_key for f in total.footprints]

    a_sum = sum(a for _, a, _ in rows)
    b_sum = sum(b for _, _, b in rows)
    print()
    print(f"{'build':22} {'lab (s)':>9} {'direct (s)':>11} {'ratio':>7}")
    for label, a, b in rows:
        print(f"{label:22} {a:9.1f} {b:11.1f} {a / b:7.3f}")
    print(f"{'sum':22} {a_sum:9.1f} {b_sum:11.1f} {a_sum / b_sum:7.3f}   (target <= 1.1)")
    print(f"all four, {args.parallel} at a time, fresh cache: {t_total:.1f} s; "
          f"cached re-run: {t_cached:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
