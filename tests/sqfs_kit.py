"""Test kit: real squashfs root filesystems made with mksquashfs (xz, 256 KiB blocks, as
OpenWrt's ath79 images), holding files named like OpenWrt's TLS libraries and packages,
plus the independent oracles (unsquashfs, xz -9e, stat) the tests compare against."""

from __future__ import annotations

import functools
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

# name -> bytes of each TLS library: the stripped MIPS sizes of the testbed notes, scaled down
# for openssl/wolfssl so the xz -9e oracle stays quick
TLS_MBEDTLS = {
    "/usr/lib/libmbedtls.so.3.6.6": 150_000,
    "/usr/lib/libmbedx509.so.3.6.6": 60_000,
    "/usr/lib/libmbedcrypto.so.3.6.6": 400_000,
}
TLS_WOLFSSL = {"/usr/lib/libwolfssl.so.5.9.1.ee39414e": 700_000}
TLS_OPENSSL = {"/usr/lib/libcrypto.so.3": 1_000_000, "/usr/lib/libssl.so.3": 250_000}
GLUE = {"/lib/libustream-ssl.so": 30_000}
FLAVOUR_LIBS = {"mbedtls": TLS_MBEDTLS, "wolfssl": TLS_WOLFSSL, "openssl": TLS_OPENSSL}


@functools.cache
def _pool() -> bytes:
    """Real machine code: the host's shared libraries of 50 KB - 2 MB each (they compress
    like TLS libraries do; data-only libraries such as ICU's are left out)."""
    chunks, total = [], 0
    for p in sorted(Path("/usr/lib").glob("*-linux-gnu*/lib*.so.*")):
        if p.is_symlink() or not p.is_file() or "icu" in p.name:
            continue
        if 50_000 <= p.stat().st_size <= 2_000_000:
            chunks.append(p.read_bytes())
            total += len(chunks[-1])
            if total > 24 << 20:
                break
    if total < 4 << 20:
        chunks.append(Path(sys.executable).resolve().read_bytes() * 8)
    return b"".join(chunks)


def blob(size: int, seed: int) -> bytes:
    pool = _pool()
    start = (seed * 1_000_003) % (len(pool) - size - 1)
    return b"\x7fELF" + pool[start + 4 : start + size]


def make_tree(root: Path, flavour: str, *, seed: int = 1, packages: str = "apk") -> Path:
    """An OpenWrt-like rootfs tree: the flavour's TLS libraries, the ustream-ssl glue, a few
    other files and symlinks, and the package manager's per-package file lists."""
    files: dict[str, tuple[str, int]] = {}  # path -> (package, size)
    pkg_of = {"mbedtls": "libmbedtls21", "wolfssl": "libwolfssl5.9.1.ee39414e",
              "openssl": "libopenssl3"}  # fmt: skip
    for path, size in FLAVOUR_LIBS[flavour].items():
        files[path] = (pkg_of[flavour], size)
    files["/lib/libustream-ssl.so"] = (f"libustream-{flavour}", GLUE["/lib/libustream-ssl.so"])
    files["/bin/busybox"] = ("busybox", 380_000)
    files["/lib/libc.so"] = ("libc", 600_000)
    files["/usr/bin/uclient-fetch"] = ("uclient-fetch", 25_000)
    files["/etc/config/network"] = ("base-files", 700)
    for i, (path, (_pkg, size)) in enumerate(sorted(files.items())):
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(blob(size, seed * 100 + i))
    # symlinks as OpenWrt installs them (not counted twice)
    for path in FLAVOUR_LIBS[flavour]:
        short = re.sub(r"\.so\..*", ".so", path)
        (root / short.lstrip("/")).symlink_to(Path(path).name)
    (root / "bin/sh").symlink_to("busybox")
    lists = root / ("lib/apk/packages" if packages == "apk" else "usr/lib/opkg/info")
    lists.mkdir(parents=True, exist_ok=True)
    by_pkg: dict[str, list[str]] = {}
    for path, (pkg, _size) in files.items():
        by_pkg.setdefault(pkg, []).append(path)
    for pkg, paths in by_pkg.items():
        (lists / f"{pkg}.list").write_text("\n".join(sorted(paths)) + "\n")
    return root


# the pseudo files OpenWrt's image.mk adds to every squashfs
OPENWRT_PSEUDO = ("-p", "/dev d 755 0 0", "-p", "/dev/console c 600 0 0 5 1")


def mksquashfs(
    root: Path, out: Path, comp: str = "xz", block: str = "256k", extra: tuple[str, ...] = ()
) -> Path:
    subprocess.run(
        ["mksquashfs", str(root), str(out), "-comp", comp, "-b", block, "-noappend", "-nopad",
         "-no-xattrs", "-all-root", "-quiet", *extra],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


# --- oracles ---------------------------------------------------------------------------


def unsquashfs_size(image: Path) -> int:
    """'Filesystem size N bytes' from unsquashfs -s."""
    out = subprocess.run(["unsquashfs", "-s", str(image)], capture_output=True, text=True).stdout
    m = re.search(r"Filesystem size (\d+) bytes", out)
    assert m, out
    return int(m.group(1))


def unsquashfs_lls(image: Path) -> dict[str, tuple[str, int, str | None]]:
    """path -> (type char, size, symlink target) from unsquashfs -lls."""
    out = subprocess.run(
        ["unsquashfs", "-lls", "-d", "", str(image)], capture_output=True, text=True, check=True
    ).stdout
    entries = {}
    for line in out.splitlines():
        m = re.match(r"^([-dlcbps])\S+\s+\S+\s+(\d+|\d+,\s*\d+)\s+\S+\s+\S+\s+(.*)$", line)
        if not m:
            continue
        kind, rest = m.group(1), m.group(3)
        size = int(m.group(2)) if m.group(2).isdigit() else 0  # devices: "major, minor"
        target = None
        if kind == "l":
            rest, target = rest.split(" -> ", 1)
        entries[rest or "/"] = (kind, size, target)
    return entries


def xz9e_size(data: bytes) -> int:
    """The xz command line tool itself: xz -9e -c | wc -c."""
    return len(
        subprocess.run(["xz", "-9e", "-c"], input=data, capture_output=True, check=True).stdout
    )


def profiles_json(
    path: Path, version: str, target: str, profiles: dict[str, dict[str, object]]
) -> None:
    path.write_text(json.dumps({
        "metadata_version": 1, "target": target, "version_code": "r0-test",
        "version_number": version, "source_date_epoch": 1, "profiles": profiles,
    }))  # fmt: skip


def gzip_padded(src: Path, out: Path, pad_to: int) -> Path:
    """Like malta's *-rootfs-squashfs.img.gz: the image zero-padded to a size, gzipped."""
    data = src.read_bytes()
    out.write_bytes(gzip.compress(data + bytes(pad_to - len(data)), compresslevel=1))
    return out


def uimage_kernel(out: Path, size: int, seed: int = 7) -> Path:
    """A uImage (mkimage, lzma) around incompressible bytes: an lzma kernel's stand-in."""
    import random

    payload = out.with_suffix(".lzma")
    payload.write_bytes(random.Random(seed).randbytes(size))
    subprocess.run(
        ["mkimage", "-A", "mips", "-O", "linux", "-T", "kernel", "-C", "lzma", "-a", "0x80060000",
         "-e", "0x80060000", "-n", "MIPS OpenWrt Linux-6.12.94", "-d", str(payload), str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


def ath79_sysupgrade(kernel: Path, rootfs: Path, out: Path, block: int = 65536) -> Path:
    """append-kernel | pad-to BLOCKSIZE | append-rootfs | pad-rootfs (padjffs2: 0xff to the
    block, then de ad c0 de), as include/image-commands.mk documents them."""
    k = kernel.read_bytes()
    data = k + bytes(-len(k) % block) + rootfs.read_bytes()
    data += b"\xff" * (-len(data) % block) + b"\xde\xad\xc0\xde"
    out.write_bytes(data)
    return out
