"""Benchmark: 3 flavours x 3 devices through `invoke build` on the stand-in ImageBuilder
(`--stock`: OpenWrt's own wolfSSL packages, so every build is the ImageBuilder's alone; the
patch set's wolfSSL image and its SDK compile: bench/sdk_patchset.py).

Prints, from one run: our wall time against the sum of the stand-in's own make times
(make info + make manifest + make image, as each build record measured them), for -j1 and
-jN (parallel profiles); and the wall and CPU time of two re-runs (fresh `invoke build`
processes that find every record in the store): the first one's size report measures the
images (cached after, as a user's first `invoke build` leaves it), the second is the cached
re-run, a store hit (target <= 1 s: docs/testing.md). Target: wall <= 1.2 x sum(make) with -jN.

    .venv/bin/python bench/build_matrix.py [-j N]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openwrt_wolf.build.driver import build  # noqa: E402
from openwrt_wolf.build.jobs import Options  # noqa: E402
from openwrt_wolf.host import openwrt_tools, upstream  # noqa: E402
from tests.standin import kit, make_standin  # noqa: E402
from tests.standin.server import serve  # noqa: E402

DEVICES = "tplink_tl-wr902ac-v1,glinet_gl-ar300m16,tplink_tl-wr902ac-v3"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(url: str, work: Path, jobs: int) -> tuple[float, float, int]:
    os.environ["OPENWRT_WOLF_CACHE"] = str(work / "cache")
    os.environ["OPENWRT_WOLF_STORE"] = str(work / "store")
    t = time.monotonic()
    outs = build(Options(flavour="all", device=DEVICES, mirror=url, jobs=jobs, stock=True))
    wall = time.monotonic() - t
    info = {o.record.request.target: o.record.phases["info"] for o in outs}
    make = sum(o.record.make_seconds for o in outs) + sum(info.values())
    return wall, make, len(outs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wolf-bench-") as tmp:
        base = Path(tmp)
        mirror = make_standin.make_server(
            base / "mirror",
            ("ath79/generic", "ramips/mt76x8"),
            tree=upstream.openwrt_tree("25.12.5"),
            tools=openwrt_tools.ensure(),
            kit=kit.make_kit(base / "kit"),
        )
        with serve(mirror) as (url, _):
            rows = []
            for jobs in (1, args.j):
                wall, make, n = run(url, base / f"j{jobs}", jobs)
                rows.append((jobs, n, wall, make))
            env = {**os.environ, "OPENWRT_WOLF_CACHE": str(base / f"j{args.j}" / "cache"),
                   "OPENWRT_WOLF_STORE": str(base / f"j{args.j}" / "store")}  # fmt: skip
            argv = [sys.executable, "-m", "invoke", "build", "--flavour", "all", "--device",
                    DEVICES, "--mirror", url, "--stock"]  # fmt: skip
            # the first re-run's size report measures the images (rootfs, xz -9e of the TLS
            # libraries: cached after), as the first `invoke build` of a user does; the second
            # is the store hit with everything cached
            reruns = []
            for _ in range(2):
                t, cpu = time.monotonic(), _children_cpu()
                subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True,
                               timeout=300)  # fmt: skip
                reruns.append((time.monotonic() - t, _children_cpu() - cpu))
    print(f"{'jobs':>4} {'builds':>6} {'wall s':>8} {'sum(make) s':>12} {'wall/make':>10}")
    for jobs, n, wall, make in rows:
        print(f"{jobs:>4} {n:>6} {wall:>8.1f} {make:>12.1f} {wall / make:>10.2f}")
    (w1, c1), (w2, c2) = reruns
    print(f"first re-run (new process, 9 records from the store; the size report measures the "
          f"images): {w1:.2f} s wall, {c1:.2f} s CPU")  # fmt: skip
    print(f"cached re-run (new process, 9 records from the store, report cached): {w2:.2f} s "
          f"wall, {c2:.2f} s CPU")  # fmt: skip
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
