"""Benchmark: the HTML size report (tables + matplotlib SVG plots) against the terminal report,
for 100 devices × 3 flavours, in one run. Target: HTML ≤ 3× the terminal report.

Build records are crafted in the build job's shape (image size + fit report; the rootfs
pieces are absent, so no TLS measurement is timed — both renderers get the same model).
Both sides are warmed once (imports, fonts), then the best of --repeat runs is taken.
    .venv/bin/python bench/report_html.py [--devices 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openwrt_wolf.report import sizereport
from openwrt_wolf.report.render import render
from openwrt_wolf.results.fit_report import FitReport
from openwrt_wolf.results.store import FileStore, Record
from tests.records import build_data

PROFILES = ("glinet_gl-ar300m16", "tplink_tl-wr902ac-v1", "tplink_tl-wr902ac-v3")
LIMIT = 7_405_568


def make_store(root: Path, devices: int) -> None:
    rnd = random.Random(1)
    st = FileStore(root)
    for d in range(devices):
        # profile ids outside the catalogue are reported under their own name
        profile = PROFILES[d] if d < len(PROFILES) else f"bench_device-{d:03}"
        for flav in ("mbedtls", "wolfssl", "openssl"):
            image = rnd.randint(4_500_000, 7_600_000)
            room = LIMIT - image
            fit = FitReport(
                profile=profile, recipe="tplink-v1", kernel_size=None, rootfs_size=None,
                checked_size=image, limit=LIMIT, limit_name="IMAGE_SIZE", blocksize=65536,
                erase_blocks=-(-image // 65536), padding=1000, margin=room,
                headroom_blocks=room // 65536, verdict="FITS" if room >= 0 else "TOO_BIG",
                metadata_size=None, final_size=None, rootfs_room=room,
            )  # fmt: skip
            files = [{"name": "x-sysupgrade.bin", "path": "/nonexistent", "sha256": "0" * 64,
                      "size": image, "type": "sysupgrade"}]  # fmt: skip
            # a version 1 build record (the file list and the fit), as older stores hold
            data = build_data(files, fit.to_dict(), device=profile, flavour=flav)
            st.put(Record("build", f"b{d}-{flav}", "25.12.5", profile, flav, data))


def best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["OPENWRT_WOLF_CACHE"] = str(Path(tmp) / "cache")
        make_store(Path(tmp) / "store", args.devices)
        t = time.perf_counter()
        rep = sizereport.build(store=Path(tmp) / "store")
        model = time.perf_counter() - t
        n = sum(len(d.cells) for d in rep.devices)
        render(rep, "terminal", width=200), render(rep, "html")  # warm: imports, fonts
        term = best(lambda: render(rep, "terminal", width=200), args.repeat)
        html = best(lambda: render(rep, "html"), args.repeat)
        size = len(render(rep, "html").encode())
    print(f"{len(rep.devices)} devices, {n} cells; model built in {model:.2f} s")
    print(f"terminal report: {term:.3f} s")
    print(
        f"html report:     {html:.3f} s ({size / 1e6:.2f} MB, {html / term:.2f}× terminal; "
        f"target ≤ 3×)"
    )


if __name__ == "__main__":
    main()
