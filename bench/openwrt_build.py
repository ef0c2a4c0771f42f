"""The whole real OpenWrt pipeline on one machine (issue 22): sources, the buildroot build of
the three TLS flavours for malta/be, and MemFree of each flavour's initramfs kernel. Hours on
two cores; CI cannot run it (tests/build/test_sources.py and the stand-in tests cover the
code), so its times are written down in docs/build.md and docs/results.md.

Every step is the product's own task (`./wolf sources`, `./wolf build`, `./wolf
measure-memory`) run as a subprocess and timed; the per-stage make times come from the build
records (`phases`, make:<stage>). Rerunning resumes: OpenWrt's stamps skip what is built, the
store returns finished builds.

Run (an extracted OpenWrt v25.12.5 tree, a directory of git snapshots and tarballs):
  .venv/bin/python bench/openwrt_build.py --tree /var/tmp/owb/openwrt-25.12.5 \\
      --sources /work/shared/openwrt/offline/dl,/work/.mirror [--boots 3] [-j 3] [--sdk-ib]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openwrt_wolf import paths  # noqa: E402
from openwrt_wolf.results.store import FileStore  # noqa: E402

FLAVOURS = ("wolfssl", "mbedtls", "openssl")
# No Wi-Fi (no backports source here) and no firewall4 (no nftables/libnftnl source here);
# a TLS server (uhttpd with the flavour's certificate tool) runs at boot in every flavour.
PACKAGES = "@https-server,-kmod-mac80211-hwsim,-wifi-scripts,-wpad-basic-mbedtls,-firewall4"


def wolf(*args: str) -> float:
    """Run one ./wolf task; its seconds. Output goes to this terminal."""
    t = time.monotonic()
    print(f"$ ./wolf {' '.join(args)}", flush=True)
    subprocess.run([str(ROOT / "wolf"), *args], check=True)
    return time.monotonic() - t


def newest(store: FileStore, kind: str, flavour: str, device: str) -> dict[str, object]:
    recs = [r for r in store.query(kind) if r.flavour == flavour and r.device == device]
    if not recs:
        raise SystemExit(f"no {kind} record of {device} {flavour} in {store.root}")
    return recs[-1].data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", required=True)
    ap.add_argument("--sources", default="")
    ap.add_argument("--device", default="malta-be")
    ap.add_argument("--flavours", default=",".join(FLAVOURS))
    ap.add_argument("--packages", default=PACKAGES)
    ap.add_argument("--boots", type=int, default=3)
    ap.add_argument("-j", type=int, default=3)
    ap.add_argument("--sdk-ib", action="store_true")
    a = ap.parse_args()
    flavours = [f for f in a.flavours.split(",") if f]
    seconds: dict[str, float] = {}
    src = ["sources", "--tree", a.tree, "--allow", "same-version,substitute"]
    seconds["sources"] = wolf(*src, *(["--sources", a.sources] if a.sources else []))
    for fl in flavours:
        argv = ["build", "--tree", a.tree, "--device", a.device, "--flavour", fl,
                "--packages", a.packages, "-j", str(a.j), "--no-report"]  # fmt: skip
        seconds[f"build {fl}"] = wolf(*argv, *(["--sdk-ib"] if a.sdk_ib else []))
    for fl in flavours:
        seconds[f"memory {fl}"] = wolf("measure-memory", "--device", a.device, "--flavour", fl,
                                       "--boots", str(a.boots))  # fmt: skip
    store = FileStore(paths.store_dir(None))
    print("\nstep                          wall s")
    for k, v in seconds.items():
        print(f"{k:28} {v:9.0f}")
    print("\nflavour   stage          make s")
    for fl in flavours:
        rec = newest(store, "build", fl, a.device)
        phases = rec.get("phases", {})
        assert isinstance(phases, dict)
        for k, v in phases.items():
            print(f"{fl:9} {k:14} {float(v):8.0f}")
    print("\nflavour   MemFree median kB   boots   ratio to mbedtls")
    med = {}
    for fl in flavours:
        rec = newest(store, "memory", fl, a.device)
        boots = rec.get("boots", [])
        assert isinstance(boots, list)
        med[fl] = statistics.median(int(b["meminfo_kb"]["MemFree"]) for b in boots)
    for fl in flavours:
        ratio = med[fl] / med["mbedtls"] if "mbedtls" in med else float("nan")
        print(f"{fl:9} {med[fl]:17.0f} {len(boots):7} {ratio:18.3f}")
    print(json.dumps({"seconds": seconds, "memfree_kb": med}, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
