"""Generate stand-in ImageBuilder trees and a download-server layout for the tests and bench.

    server/releases/25.12.5/targets/ath79/generic/
        openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst
        sha256sums                      ("<sha256> *<name>", as OpenWrt's rules.mk writes it)

Each tree holds tests/standin/imagebuilder/ (Makefile, scripts/ib.py), .standin.json (what
.targetinfo/.profiles.mk give the real one), packages/*.apk (tar archives of real bytes) with
an index, and the prebuilt kernel pieces in build_dir/target-<arch>_musl/linux-<t>_<s>/,
where the real ImageBuilder ships them (target/imagebuilder/Makefile copies KERNEL_BUILD_DIR).
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import zstandard

HERE = Path(__file__).resolve().parent
RELEASE = "25.12.5"


def _pool() -> bytes:
    """Real bytes to slice package payloads from: host executables and libraries."""
    parts = [Path(os.path.realpath(sys.executable)).read_bytes()]
    for lib in ("/usr/lib/x86_64-linux-gnu/libcrypto.so.3", "/usr/bin/bash"):
        if os.path.exists(lib):
            parts.append(Path(lib).read_bytes())
    return b"".join(parts)


def _slice(pool: bytes, name: str, size: int) -> bytes:
    # different offsets per package, so squashfs cannot deduplicate payloads
    start = int(hashlib.sha256(name.encode()).hexdigest(), 16) % max(1, len(pool) - size)
    out = pool[start : start + size]
    while len(out) < size:
        out += pool[: size - len(out)]
    return out


def _incompressible(name: str, size: int) -> bytes:
    # firmware blobs barely compress; model them with hash-chained bytes
    out = bytearray()
    seed = name.encode()
    while len(out) < size:
        seed = hashlib.sha256(seed).digest()
        out += hashlib.shake_256(seed).digest(65536)
    return bytes(out[:size])


def _apk(path: Path, files: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name.lstrip("/"))
            info.size = len(data)
            info.mode = 0o755
            info.mtime = 1781000000
            tar.addfile(info, io.BytesIO(data))


def _tplink_v1_header(kernel: bytes) -> bytes:
    # mktplinkfw's 512-byte header as `tplink-v1-header -O` writes it in front of the LZMA
    # kernel (combined mode): version 0x01000000, vendor, fw version, hw id/rev, then
    # kernel_la, kernel_ep, fw_length (0), kernel_ofs, kernel_len, rootfs_ofs, rootfs_len
    h = bytearray(0x200)
    struct.pack_into(">I", h, 0, 0x01000000)
    h[4:11] = b"OpenWrt"
    h[28:38] = b"ver. 1.0.0"
    struct.pack_into(">II", h, 64, 0x09020001, 1)
    struct.pack_into(">7I", h, 0x74, 0x80060000, 0x80060000, 0, 0x200, len(kernel), 0, 0)
    return bytes(h)


def _kernel(kind: str, raw: bytes, out: Path) -> None:
    comp = lzma.compress(
        raw,
        format=lzma.FORMAT_ALONE,
        filters=[{"id": lzma.FILTER_LZMA1, "preset": 1, "lc": 1, "lp": 2, "pb": 2}],
    )
    if kind == "uimage-lzma":
        blob = out.with_suffix(".lzma")
        blob.write_bytes(comp)
        subprocess.run(
            [
                "mkimage",
                "-A",
                "mips",
                "-O",
                "linux",
                "-T",
                "kernel",
                "-C",
                "lzma",
                "-a",
                "0x80060000",
                "-e",
                "0x80060000",
                "-n",
                "MIPS OpenWrt Linux-6.12.94",
                "-d",
                str(blob),
                str(out),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        blob.unlink()
    elif kind == "lzma-tplink-v1":
        out.write_bytes(_tplink_v1_header(comp) + comp)
    else:
        out.write_bytes(comp)


def make_tree(dest: Path, target: str, release: str = RELEASE) -> Path:
    """Write one stand-in ImageBuilder tree for target "ath79/generic"; return its path."""
    spec = tomllib.loads((HERE / "targets.toml").read_text())
    rel, tgt = spec["release"][release], spec["target"][target]
    t, s = target.split("/")
    name = f"openwrt-imagebuilder-{release}-{t}-{s}.Linux-x86_64"
    top = dest / name
    if top.exists():
        shutil.rmtree(top)
    shutil.copytree(HERE / "imagebuilder", top)
    pool = _pool()
    pkgdir = top / "packages"
    pkgdir.mkdir()
    index = []
    for pname, (version, size, depends, conflicts, path) in spec["packages"].items():
        data = _incompressible(pname, size) if "/firmware/" in path else _slice(pool, pname, size)
        files = {path: data} if path else {}
        if pname == "base-files":
            files["/etc/init.d/dropbear"] = b"#!/bin/sh /etc/rc.common\nSTART=19\n"
            files["/etc/openwrt_release"] = f"DISTRIB_RELEASE='{release}'\n".encode()
        fname = f"{pname}-{version}.apk"
        _apk(pkgdir / fname, files)
        index.append(
            {
                "name": pname,
                "version": version,
                "depends": depends,
                "conflicts": conflicts,
                "provides": [],
                "file": fname,
            }
        )
    (pkgdir / "index.json").write_text(json.dumps(index, indent=1))
    kdir = top / "build_dir" / f"target-{tgt['arch_packages']}_musl" / f"linux-{t}_{s}"
    kdir.mkdir(parents=True)
    profiles = {}
    for pid, p in tgt["profile"].items():
        _kernel(
            p["kernel"],
            _slice(pool, f"kernel-{pid}", p["kernel_input"]),
            kdir / f"{pid}-kernel.bin",
        )
        profiles[pid] = {k: v for k, v in p.items() if k not in ("kernel", "kernel_input")}
    info = {
        "version": release,
        "version_code": rel["version_code"],
        "source_date_epoch": rel["source_date_epoch"],
        "linux_kernel": rel["linux_kernel"],
        "target": t,
        "subtarget": s,
        "arch": tgt["arch"],
        "arch_packages": tgt["arch_packages"],
        "default_packages": rel["default_packages"] + tgt["default_packages"],
        "profiles": profiles,
    }
    (top / ".standin.json").write_text(json.dumps(info, indent=1))
    return top


def make_sdk(dest: Path, target: str, release: str = RELEASE) -> Path:
    """A stand-in SDK tree for the target (tests/standin/sdk/), named as OpenWrt names it."""
    spec = tomllib.loads((HERE / "targets.toml").read_text())
    tgt = spec["target"][target]
    t, s = target.split("/")
    top = dest / f"openwrt-sdk-{release}-{t}-{s}_gcc-14.3.0_musl.Linux-x86_64"
    if top.exists():
        shutil.rmtree(top)
    shutil.copytree(HERE / "sdk", top)
    info = {"version": release, "target": t, "subtarget": s, "arch_packages": tgt["arch_packages"]}
    (top / ".standin.json").write_text(json.dumps(info, indent=1))
    (top / "feeds.conf.default").write_text(
        "src-git packages https://git.openwrt.org/feed/packages.git\n"
        "src-git luci https://git.openwrt.org/project/luci.git\n"
    )
    return top


def make_buildroot(dest: Path, target: str, release: str = RELEASE) -> Path:
    """A stand-in OpenWrt source tree for the target (tests/standin/buildroot/): the stand-in
    ImageBuilder's scripts/ib.py, packages and .standin.json reused, its kernels moved out of
    $(KDIR) (make puts them there) and a `version` file as in a release source tarball."""
    spec = tomllib.loads((HERE / "targets.toml").read_text())
    top = dest / f"openwrt-{release}-{target.replace('/', '-')}"
    if top.exists():
        shutil.rmtree(top)
    ib = make_tree(dest / ".ib", target, release)
    shutil.copytree(HERE / "buildroot", top)
    shutil.copyfile(HERE / "imagebuilder" / "scripts" / "ib.py", top / "scripts" / "ib.py")
    shutil.move(ib / "packages", top / "packages")
    t, _ = target.split("/")
    kernels = top / "target" / "linux" / t / "standin-kernels"
    kernels.mkdir(parents=True)
    for k in sorted(ib.glob("build_dir/target-*/linux-*/*-kernel.bin")):
        shutil.move(k, kernels / k.name)
    info = json.loads((ib / ".standin.json").read_text())
    info["version_filenames"] = False  # a tree without CONFIG_VERSION_FILENAMES
    (top / ".standin.json").write_text(json.dumps(info, indent=1))
    (top / "version").write_text(spec["release"][release]["version_code"] + "\n")
    shutil.rmtree(dest / ".ib")
    return top


def pack(tree: Path, out: Path) -> Path:
    """tar.zst of the tree with its top directory, like OpenWrt's ImageBuilder archives."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        tar.add(tree, arcname=tree.name)
    out.write_bytes(zstandard.ZstdCompressor(level=3).compress(raw.getvalue()))
    return out


def make_server(
    root: Path, targets: tuple[str, ...] = ("ath79/generic",), release: str = RELEASE
) -> Path:
    """A download-server directory: releases/<rel>/targets/<t>/<s>/{archive,sha256sums}."""
    work = root / ".trees"
    work.mkdir(parents=True, exist_ok=True)
    for target in targets:
        d = root / "releases" / release / "targets" / target
        d.mkdir(parents=True, exist_ok=True)
        lines = []
        for tree in (make_tree(work, target, release), make_sdk(work, target, release)):
            archive = pack(tree, d / f"{tree.name}.tar.zst")
            lines.append(f"{hashlib.sha256(archive.read_bytes()).hexdigest()} *{archive.name}\n")
        (d / "sha256sums").write_text("".join(sorted(lines, key=lambda x: x.split("*")[1])))
    return root


if __name__ == "__main__":
    print(make_server(Path(sys.argv[1]), tuple(sys.argv[2:]) or ("ath79/generic",)))
