"""The whole real OpenWrt pipeline on one machine (issue 22): sources, the buildroot build of
the three TLS flavours for malta/be, and MemFree of each flavour's initramfs kernel. Hours on
two cores; CI cannot run it (tests/build/test_sources.py and the stand-in tests cover the
code), so its times are written down in docs/build.md and docs/results.md.

Every step is the product's own task (`./wolf sources`, `./wolf build`, `./wolf
measure-memory`, `./wolf what-if`) run as a subprocess and timed; the per-stage make times come
from the build records (`phases`, make:<stage>). Rerunning resumes: OpenWrt's stamps skip what
is built, the store returns finished builds. With --sdk-ib (the first flavour makes OpenWrt's
ImageBuilder) and --work DIR it goes on as issue 22 asks: each flavour's bin/ kept in DIR (the
next build overwrites the tree's), the real ImageBuilder builds the three flavours (its
packages beside it from DIR as a mirror, a store of its own), its rootfs compared with the
buildroot's file by file, what-if from each ImageBuilder image to each other flavour compared
with the ImageBuilder's own byte for byte, bench/openwrt_vm.py in each image (its perf-image
records in the store), and the real SDK driving the sdk backend (`--tree` as its base feed):
the wolfSSL packages it compiles against the buildroot's, payload by payload.

Run (an extracted OpenWrt v25.12.5 tree, a directory of git snapshots and tarballs):
  .venv/bin/python bench/openwrt_build.py --tree /var/tmp/owb/openwrt-25.12.5 \\
      --sources /work/shared/openwrt/offline/dl,/work/.mirror [--boots 3] [-j 3] \\
      [--sdk-ib --work /var/tmp/owb/bench]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openwrt_wolf import paths  # noqa: E402
from openwrt_wolf.catalogue import devices  # noqa: E402
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


def real_imagebuilder(a: argparse.Namespace, flavours: list[str]) -> dict[str, float]:
    """The ImageBuilder the first build made: the three flavours with it, compared with the
    buildroot's images; what-if between its images; the in-VM checks of bench/openwrt_vm.py."""
    work: Path = a.work
    t, s = devices.resolve(a.device).target_path.split("/")
    first = work / f"bin-{flavours[0]}"
    archive = next(first.glob(f"targets/{t}/{s}/openwrt-imagebuilder-*.tar.zst"))
    ib_top = work / "ib"
    shutil.rmtree(ib_top, ignore_errors=True)
    ib_top.mkdir(parents=True)
    subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(ib_top)], check=True)
    ib = next(ib_top.iterdir())
    seconds: dict[str, float] = {}
    env = {**os.environ, "OPENWRT_WOLF_STORE": str(work / "store-ib")}
    outs: dict[str, Path] = {}
    for fl in flavours:
        mirror = work / f"mirror-{fl}" / "releases"
        mirror.mkdir(parents=True, exist_ok=True)
        link = mirror / "25.12.5"
        if not link.is_symlink():
            link.symlink_to(work / f"bin-{fl}")
        t0 = time.monotonic()
        argv = ["build", "--backend", "imagebuilder", "--imagebuilder", str(ib), "--mirror",
                str(mirror.parent), "--device", a.device, "--flavour", fl, "--packages",
                a.packages + ",-nftables", "--no-report", "--force"]  # fmt: skip
        print(f"$ ./wolf {' '.join(argv)}", flush=True)
        subprocess.run([str(ROOT / "wolf"), *argv], check=True, env=env)
        seconds[f"imagebuilder {fl}"] = time.monotonic() - t0
        rec = newest(FileStore(work / "store-ib"), "build", fl, a.device)
        arts = rec["artifacts"]
        assert isinstance(arts, list)
        outs[fl] = Path(next(x["path"] for x in arts if x["name"] == "root.squashfs")).parent
        print(f"{fl}: ImageBuilder vs buildroot, files that differ: "
              f"{rootfs_diff(work / f'bin-{fl}' / 'targets' / t / s, outs[fl])}")  # fmt: skip
    last = work / f"bin-{flavours[-1]}"  # bin/packages accumulates every flavour's packages
    pkgs = f"{ib}/packages,{last}/packages/mips_24kc/base,{last}/targets/{t}/{s}/packages"
    for frm in flavours:
        for to in flavours:
            if frm == to:
                continue
            out = work / f"what-if-{frm}-{to}.squashfs"
            wi = work / "store-wi"
            wolf("what-if", "--from", str(outs[frm]), "--device", a.device, "--flavour", to,
                 "--packages", pkgs, "--output", str(out), "--store", str(wi))  # fmt: skip
            real = (outs[to] / "root.squashfs").read_bytes()[: out.stat().st_size]
            same = "byte-identical" if real == out.read_bytes() else "DIFFERENT"
            print(f"what-if {frm} -> {to}: {same} to the ImageBuilder's")
    for fl in flavours:
        bin_dir = work / f"bin-{fl}"
        image = bin_dir / "targets" / t / s / f"openwrt-{t}-{s}-vmlinux-initramfs.elf"
        subprocess.run([sys.executable, str(ROOT / "bench" / "openwrt_vm.py"), "--image",
                        str(image), "--packages", str(bin_dir / "packages" / "mips_24kc"),
                        "--flavour", fl, "--apk", f"{a.tree}/staging_dir/host/bin/apk",
                        "--json", str(work / f"vm-{fl}.json"), "--store",
                        str(paths.store_dir(None))], check=False)  # fmt: skip
    return seconds


def real_sdk(a: argparse.Namespace, flavour: str = "wolfssl") -> dict[str, float]:
    """The SDK the first build made drives the sdk backend with the tree as its base feed:
    it compiles the patch set's packages and the real ImageBuilder (Mbed TLS's packages as the
    mirror, as a downloaded release's would be) assembles the wolfSSL image. Each package's
    payload (`apk extract`) is compared with the buildroot's, and the rootfs file by file."""
    import tempfile

    work: Path = a.work
    t, s = devices.resolve(a.device).target_path.split("/")
    archive = next((work / "bin-wolfssl").glob(f"targets/{t}/{s}/openwrt-sdk-*.tar.zst"))
    sdk_top = work / "sdk"
    if not sdk_top.is_dir():  # unpacked once: its build_dir keeps what it compiled
        sdk_top.mkdir(parents=True)
        subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(sdk_top)], check=True)
    sdk = next(sdk_top.iterdir())
    ib = next((work / "ib").iterdir())
    store = work / "store-sdk"
    env = {**os.environ, "OPENWRT_WOLF_STORE": str(store)}
    argv = ["build", "--backend", "sdk", "--sdk", str(sdk), "--imagebuilder", str(ib),
            "--mirror", str(work / "mirror-mbedtls"), "--tree", a.tree, "--device", a.device,
            "--flavour", flavour, "--packages", a.packages + ",-nftables", "-j", str(a.j),
            "--no-report", "--force"]  # fmt: skip
    print(f"$ ./wolf {' '.join(argv)}", flush=True)
    t0 = time.monotonic()
    subprocess.run([str(ROOT / "wolf"), *argv], check=True, env=env)
    seconds = {f"sdk {flavour}": time.monotonic() - t0}
    rec = newest(FileStore(store), "build", flavour, a.device)
    arts = rec["artifacts"]
    assert isinstance(arts, list)
    apk = f"{a.tree}/staging_dir/host/bin/apk"
    theirs = work / f"bin-{flavour}" / "packages" / "mips_24kc" / "base"
    for art in (x for x in arts if x["type"] == "package"):
        ours = Path(art["path"])
        with tempfile.TemporaryDirectory() as tmp:
            for name, f in (("sdk", ours), ("buildroot", theirs / ours.name)):
                Path(tmp, name).mkdir()  # apk extract wants its destination to exist
                subprocess.run([apk, "extract", "--allow-untrusted", "--destination",
                                f"{tmp}/{name}", str(f)], check=True,
                               stdout=subprocess.DEVNULL)  # fmt: skip
            deep = not tree_diff(Path(tmp) / "sdk", Path(tmp) / "buildroot")
            apk_same = ours.read_bytes() == (theirs / ours.name).read_bytes()
            print(
                f"sdk {ours.name}: payload {'identical' if deep else 'DIFFERENT'} to the "
                f"buildroot's; .apk {'identical' if apk_same else 'differs (metadata)'}"
            )
    out = Path(next(x["path"] for x in arts if x["name"] == "root.squashfs")).parent
    print(f"sdk {flavour}: rootfs vs buildroot, files that differ: "
          f"{rootfs_diff(work / f'bin-{flavour}' / 'targets' / t / s, out)}")  # fmt: skip
    return seconds


def tree_diff(a: Path, b: Path) -> list[str]:
    """The paths under a and b that differ: present in one only, another kind, another link
    target, other bytes (every file read: filecmp's shallow compare trusts equal size and
    mtime, which every file of a SOURCE_DATE_EPOCH rootfs shares)."""

    def entries(top: Path) -> dict[str, Path]:
        return {str(p.relative_to(top)): p for p in top.rglob("*")}

    ea, eb = entries(a), entries(b)
    out = set(ea) ^ set(eb)
    for rel in set(ea) & set(eb):
        pa, pb = ea[rel], eb[rel]
        sa, sb = pa.lstat(), pb.lstat()
        if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
            same = False
        elif stat.S_ISREG(sa.st_mode):
            same = pa.read_bytes() == pb.read_bytes()
        elif stat.S_ISLNK(sa.st_mode):
            same = pa.readlink() == pb.readlink()
        else:  # a directory (its entries are compared on their own), a device node, a FIFO
            same = sa.st_rdev == sb.st_rdev
        if not same:
            out.add(rel)
    return sorted(out)


def rootfs_diff(buildroot_dir: Path, ib_dir: Path) -> list[str]:
    """unsquashfs both root filesystems and list the paths whose content, kind or presence
    differs (expected: etc/apk/world, init, lib/apk/db/lock)."""
    import gzip
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        br = Path(tmp) / "br.squashfs"
        gz = next(buildroot_dir.glob("*-rootfs-squashfs.img.gz"))
        br.write_bytes(gzip.decompress(gz.read_bytes()))
        trees = []
        for name, img in (("br", br), ("ib", ib_dir / "root.squashfs")):
            subprocess.run(["unsquashfs", "-q", "-d", f"{tmp}/{name}", str(img)], check=True,
                           stdout=subprocess.DEVNULL)  # fmt: skip
            trees.append(Path(tmp) / name)
        return tree_diff(trees[0], trees[1])


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
    ap.add_argument("--work", type=Path, help="keep each flavour's bin/ here; with --sdk-ib: "
                    "ImageBuilder, what-if and in-VM checks")  # fmt: skip
    a = ap.parse_args()
    flavours = [f for f in a.flavours.split(",") if f]
    seconds: dict[str, float] = {}
    src = ["sources", "--tree", a.tree, "--allow", "same-version,substitute"]
    seconds["sources"] = wolf(*src, *(["--sources", a.sources] if a.sources else []))
    for fl in flavours:
        argv = ["build", "--tree", a.tree, "--device", a.device, "--flavour", fl,
                "--packages", a.packages, "-j", str(a.j), "--no-report"]  # fmt: skip
        first = fl == flavours[0]
        seconds[f"build {fl}"] = wolf(*argv, *(["--sdk-ib"] if a.sdk_ib and first else []))
        if a.work:  # the next flavour's build overwrites bin/
            shutil.rmtree(a.work / f"bin-{fl}", ignore_errors=True)
            shutil.copytree(Path(a.tree) / "bin", a.work / f"bin-{fl}", symlinks=True)
    for fl in flavours:
        seconds[f"memory {fl}"] = wolf("measure-memory", "--device", a.device, "--flavour", fl,
                                       "--boots", str(a.boots))  # fmt: skip
    if a.work and a.sdk_ib:
        seconds |= real_imagebuilder(a, flavours)
        if "wolfssl" in flavours and "mbedtls" in flavours:
            seconds |= real_sdk(a)
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
    med: dict[str, float] = {}
    n: dict[str, int] = {}
    for fl in flavours:
        rec = newest(store, "memory", fl, a.device)
        boots = rec.get("boots", [])
        assert isinstance(boots, list)
        med[fl] = statistics.median(int(b["meminfo_kb"]["MemFree"]) for b in boots)
        n[fl] = len(boots)
    for fl in flavours:
        ratio = med[fl] / med["mbedtls"] if "mbedtls" in med else float("nan")
        print(f"{fl:9} {med[fl]:17.0f} {n[fl]:7} {ratio:18.3f}")
    print(json.dumps({"seconds": seconds, "memfree_kb": med}, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
