"""Benchmark: the patch set's wolfSSL image on the stand-in mirror, as the main job makes it
(`invoke build --flavour all --device tl-wr902ac,gl-ar300m16 --mirror M`), cold and warm.

The stand-in SDK (tests/standin/sdk_assemble.py) runs OpenWrt's own package Makefiles with
Debian's cross compiler; their sources come from ../shared/openwrt/offline/dl, git
repositories made of the shared snapshots and Debian's source archive (`--sources`, `--allow
same-version,substitute`). Every image of the run is built without Wi-Fi and apk
(`--packages -apk-mbedtls,-wpad-basic-mbedtls`: hostapd and ucode, which apk's wget-any brings
in, build with libnl-tiny and ubus, which have no source here at their pins), so the three
flavours compare like for like. With `--git DIR` (git repositories named by OpenWrt's project,
e.g. `ubus` and `libnl-tiny` cloned from public snapshots: substitutes, each in the record) the
images keep Wi-Fi and apk, and the SDK compiles wpad-basic-wolfssl and apk-wolfssl as well.

Prints the SDK phase (compile) of the cold run, the warm run in a new process (the kept
packages and the store: no compile), then the size report of the builds: TLS libraries (xz),
rootfs, image, erase blocks and the fit per device and flavour, wolfSSL against Mbed TLS.

    .venv/bin/python bench/sdk_patchset.py [--keep DIR] [--git DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openwrt_wolf.host import openwrt_tools, upstream  # noqa: E402
from tests.standin import kit, make_standin  # noqa: E402
from tests.standin.server import serve  # noqa: E402
from tests.standin.sources_kit import SOURCES_ALLOW, source_dirs  # noqa: E402

DEVICES = "tplink_tl-wr902ac-v1,glinet_gl-ar300m16"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="work here and keep it (mirror, cache, store)")
    ap.add_argument("--git", type=Path, help="more source repositories: build Wi-Fi and apk")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="wolf-sdk-bench-") as tmp:
        base = (args.keep or Path(tmp)).resolve()
        base.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        mirror = base / "mirror"
        if not (mirror / "releases").is_dir():
            tree = upstream.openwrt_tree("25.12.5")
            make_standin.make_server(
                mirror,
                ("ath79/generic",),
                tree=tree,
                tools=openwrt_tools.ensure(),
                kit=kit.make_kit(base / "kit"),
            )
        dirs = source_dirs(base / "sources") + ([args.git.resolve()] if args.git else [])
        srcs = ",".join(str(d) for d in dirs)
        change = [] if args.git else ["--packages=-apk-mbedtls,-wpad-basic-mbedtls"]
        print(f"stand-in mirror and sources: {time.monotonic() - t:.0f} s", flush=True)
        env = {**os.environ, "OPENWRT_WOLF_CACHE": str(base / "cache"),
               "OPENWRT_WOLF_STORE": str(base / "store")}  # fmt: skip
        with serve(mirror) as (url, _):
            argv = [sys.executable, "-m", "invoke", "build", "--flavour", "all", "--device",
                    DEVICES, "--mirror", url, *change, "--sources", srcs,
                    f"--allow={','.join(SOURCES_ALLOW)}", "--no-report"]  # fmt: skip
            walls = []
            for what in ("cold", "warm"):
                t = time.monotonic()
                p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                                   timeout=7200)  # fmt: skip
                walls.append(time.monotonic() - t)
                if p.returncode != 0:
                    sys.exit(f"{what} run failed:\n{p.stderr[-4000:]}")
                print(f"{what} run: {walls[-1]:.0f} s wall", flush=True)
        rep = subprocess.run([sys.executable, "-m", "invoke", "size-report", "--store",
                              str(base / "store"), "--format", "markdown"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
        sdk = sorted((base / "cache" / "builds").glob("sdk-*.log"))
        print(
            f"cold: {walls[0]:.0f} s (SDK log {', '.join(str(s) for s in sdk)}); warm: "
            f"{walls[1]:.1f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        print(rep.stdout)


if __name__ == "__main__":
    main()
