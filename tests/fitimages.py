"""Test-side image assembly, independent of openwrt_wolf: real tools (mksquashfs, mkimage, dd)
where Debian has them, and each OpenWrt step written here from its documented behaviour
(padjffs2, tplink-safeloader, mktplinkfw/mktplinkfw2, fwtool). Nothing here imports the
code under test."""

from __future__ import annotations

import binascii
import hashlib
import json
import os
import re
import struct
import subprocess
from pathlib import Path

BLOCK = 64 * 1024
EOF_MARK = bytes.fromhex("deadc0de")


def run(*argv: str | Path) -> str:
    return subprocess.run(
        [str(a) for a in argv], check=True, capture_output=True, text=True, timeout=120
    ).stdout


def squashfs(tmp: Path, name: str, payload: int, block_k: int = 256) -> Path:
    """A real xz squashfs, as OpenWrt makes it minus OpenWrt's -Xpreset/-Xe/-Xlc/-Xlp/-Xpb
    options (its own mksquashfs patches; Debian's mksquashfs rejects them). -nopad as OpenWrt."""
    src = tmp / f"{name}-root"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / "blob.bin").write_bytes(os.urandom(payload))  # incompressible: size ≈ payload
    (src / "etc").mkdir()
    (src / "etc" / "banner").write_text("OpenWrt test rootfs\n")
    out = tmp / f"{name}.squashfs"
    run("mksquashfs", src, out, "-comp", "xz", "-b", f"{block_k}k", "-nopad", "-noappend",
        "-root-owned", "-no-xattrs", "-no-progress", "-quiet")  # fmt: skip
    return out


def unsquashfs_bytes(path: Path) -> int:
    m = re.search(r"Filesystem size (\d+) bytes", run("unsquashfs", "-s", path))
    assert m, "unsquashfs -s gave no size"
    return int(m.group(1))


def lzma_blob(tmp: Path, size: int) -> Path:
    """``size`` bytes that start as a real lzma stream (xz --format=lzma), then random bytes:
    nothing decompresses the kernel here, only its length matters."""
    raw = tmp / "vmlinux.raw"
    raw.write_bytes(os.urandom(min(size, 65536)))
    head = subprocess.run(
        ["xz", "--format=lzma", "-0", "-c", str(raw)], check=True, capture_output=True, timeout=120
    ).stdout
    blob = (head + os.urandom(max(0, size - len(head))))[:size]
    out = tmp / f"kernel-{size}.lzma"
    out.write_bytes(blob)
    return out


def uimage(tmp: Path, total: int) -> Path:
    """A uImage of ``total`` bytes (64-byte header + lzma data) made by mkimage."""
    blob = lzma_blob(tmp, total - 64)
    out = tmp / f"kernel-{total}.uImage"
    run("mkimage", "-A", "mips", "-O", "linux", "-T", "kernel", "-C", "lzma",
        "-a", "0x80060000", "-e", "0x80060000", "-n", "MIPS OpenWrt Linux-6.12.94",
        "-d", blob, out)  # fmt: skip
    return out


def mkimage_data_size(path: Path) -> int:
    m = re.search(r"Data Size:\s+(\d+) Bytes", run("mkimage", "-l", path))
    assert m
    return int(m.group(1))


def pad_to(path: Path, bs: int) -> None:
    """include/image.mk Image/pad-to: dd bs=N conv=sync (zero fill)."""
    new = path.with_suffix(".new")
    run("dd", f"if={path}", f"of={new}", f"bs={bs}", "conv=sync", "status=none")
    new.replace(path)


def padjffs2(path: Path, bs: int) -> None:
    """padjffs2 with one pad size: 0xff up to the next multiple of bs, then de ad c0 de."""
    n = path.stat().st_size
    fill = -n % bs
    with path.open("ab") as f:
        f.write(b"\xff" * fill + EOF_MARK)


def fwtool_chunk(image: bytes, payload: bytes, kind: int) -> bytes:
    """fwtool's appended chunk: payload + 16-byte BE trailer (magic FWx0, crc, type, size).
    The CRC runs over every earlier byte, seeded 0xffffffff, without the final inversion."""
    crc = binascii.crc32(image + payload) ^ 0xFFFFFFFF
    return payload + b"FWx0" + struct.pack(">IB3xI", crc, kind, len(payload) + 16)


def append_metadata(path: Path, meta: dict[str, object] | bytes) -> int:
    """`fwtool -I -` with `echo <json>`: 8-byte header (version 0, flags 0) + JSON + newline."""
    body = meta if isinstance(meta, bytes) else (json.dumps(meta) + "\n").encode()
    image = path.read_bytes()
    chunk = fwtool_chunk(image, b"\0" * 8 + body, 1)
    path.write_bytes(image + chunk)
    return len(chunk)


def append_signature(path: Path, sig: bytes) -> int:
    image = path.read_bytes()
    chunk = fwtool_chunk(image, sig, 0)
    path.write_bytes(image + chunk)
    return len(chunk)


def metadata_of_length(n: int) -> bytes:
    """JSON text (newline included) of exactly n bytes, as append-metadata writes it."""
    base = {"supported_devices": ["tplink,tl-wr902ac-v1"], "version": {"dist": "OpenWrt"}}
    head = json.dumps({**base, "x": ""})
    pad = n - len(head) - 1
    assert pad >= 0
    text = json.dumps({**base, "x": "y" * pad}) + "\n"
    assert len(text) == n
    return text.encode()


def check_size_passes(path: Path, limit_expr: str) -> bool:
    """include/image-commands.mk Build/check-size, run by bash as OpenWrt runs it."""
    script = (
        f'imagesize="$(stat -c%s {path})"; limitsize="$(({limit_expr}))"; '
        "[ $limitsize -ge $imagesize ]"
    )
    return subprocess.run(["bash", "-c", script], timeout=30).returncode == 0


def ath79_image(tmp: Path, kernel: Path, rootfs: Path, name: str = "ath79") -> Path:
    """append-kernel | pad-to 64k | append-rootfs | pad-rootfs (no metadata yet)."""
    out = tmp / f"{name}-sysupgrade.bin"
    out.write_bytes(kernel.read_bytes())
    pad_to(out, BLOCK)
    with out.open("ab") as f:
        f.write(rootfs.read_bytes())
    padjffs2(out, BLOCK)
    return out


def tplink_v1_kernel(tmp: Path, total: int) -> Path:
    """mktplinkfw -c -O (tplink-v1-header -O): 512-byte v1 header + lzma kernel, no MD5."""
    blob = lzma_blob(tmp, total - 512).read_bytes()
    hdr = bytearray(512)
    struct.pack_into(">I", hdr, 0, 0x01000000)
    hdr[4 : 4 + 7] = b"OpenWrt"  # vendor (-N VERSION_DIST)
    hdr[28 : 28 + 17] = b"r29087-d9c5716d1d"  # fw_version (-V REVISION)
    struct.pack_into(">II", hdr, 64, 0x0, 0x0)  # hw_id, hw_rev (TPLINK_HWREV 0x0)
    # kernel_la, kernel_ep, fw_length, kernel_ofs, kernel_len, rootfs_ofs, rootfs_len
    struct.pack_into(">7I", hdr, 0x74, 0x80060000, 0x80060000, 0, 512, len(blob),
                     512 + len(blob), 0)  # fmt: skip
    out = tmp / f"kernel-{total}-v1.bin"
    out.write_bytes(bytes(hdr) + blob)
    return out


def safeloader_sysupgrade(
    tmp: Path, kernel: Path, rootfs: Path, fw_base: int = 0x20000, fw_size: int = 0x730000
) -> tuple[Path | None, int]:
    """tplink-safeloader -S -j, as its source does it: file-system right behind the kernel,
    padded so its absolute end is 64 KiB aligned, then the marker. Returns (image or None
    when the tool refuses, the file-system limit it compares with)."""
    k, r = kernel.stat().st_size, rootfs.stat().st_size
    fs_base = fw_base + k
    fs_len = -(-(r + fs_base) // 0x10000) * 0x10000 + 4 - fs_base
    fs_max = fw_size - fs_base
    out = tmp / f"safeloader-{k}-{r}.bin"
    data = kernel.read_bytes() + rootfs.read_bytes() + b"\xff" * (fs_len - r - 4) + EOF_MARK
    out.write_bytes(data)
    return (None if fs_len > fs_max else out), fs_max


def pad_jffs2_tplink(buf: bytearray, n: int, fw_max: int) -> int:
    """mktplinkfw-lib.c pad_jffs2: while below fw_max, go to the next 4 KiB boundary and write
    the marker, then to the next 64 KiB boundary and write it again; a boundary that is
    already 64 KiB aligned satisfies both. The buffer beyond is 0xff."""
    pending = [4096, 65536]
    while n < fw_max and pending:
        n = -(-n // pending[0]) * pending[0]
        pending = [p for p in pending if n % p]
        buf[n : n + 4] = EOF_MARK
        n += 4
    return n


V2_SALT = bytes.fromhex("dcd73aa5c39598fbdcf9e7f40eae4737")


def tplink_v2_image(
    tmp: Path, kernel: bytes, rootfs: bytes, fw_max: int = 0x7A0000, name: str = "v2"
) -> Path:
    """mktplinkfw2 -H 0x000dc88f -W 0x89 -w 0x1 -F 8Mmtk -T 3 -V "ver. 2.0" -a 0x4 -j -s -e."""
    k, r = len(kernel), len(rootfs)
    rootfs_ofs = -(-(512 + k) // 4) * 4
    buf = bytearray(b"\xff" * (fw_max + 4))
    buf[512 : 512 + k] = kernel
    buf[rootfs_ofs : rootfs_ofs + r] = rootfs
    n = pad_jffs2_tplink(buf, rootfs_ofs + r, fw_max)
    hdr = bytearray(b"\xff" * 512)
    hdr[0:4] = bytes([3, 0, 0, 0])
    hdr[4:52] = b"ver. 2.0".ljust(48, b"\0")
    struct.pack_into(">III", hdr, 0x34, 0x000DC88F, 0x89, 0x1)
    hdr[0x40:0x50] = V2_SALT
    struct.pack_into(">I", hdr, 0x50, 0)
    struct.pack_into(">I", hdr, 0x64, 0xFFFFFFFF)
    # -e: load address and entry point byte-swapped
    struct.pack_into("<II", hdr, 0x68, 0x80000000, 0x80000000)
    struct.pack_into(">7I", hdr, 0x70, fw_max, 512, k, rootfs_ofs, r, 0, 0)
    hdr[0x8C:0x94] = bytes([0x55, 0xAA, 1, 0, 0xA5, 0, 0, 0])
    buf[:512] = hdr
    image = bytes(buf[:n])
    md5 = hashlib.md5(image).digest()
    image = image[:0x40] + md5 + image[0x50:]
    out = tmp / f"{name}-sysupgrade.bin"
    out.write_bytes(image)
    return out


SAFELOADER_SALT = bytes.fromhex("7a2b15ed9b98596de504ab44ac2a9f4e")


def safeloader_factory(tmp: Path, kernel: bytes, rootfs: bytes) -> Path:
    """tplink-safeloader factory layout: size, salted MD5, vendor block, fwup-ptn table."""
    parts = [
        ("partition-table", b"\x00\x04\x00\x00partition fs-uboot base 0x00000 size 0x20000\n\0"),
        ("soft-version", b"\0\0\0\x0c\0\0\0\0" + bytes(12) + b"\0"),
        ("support-list", b"SupportList:\n{product_name:TL-WR902AC}\n"),
        ("os-image", kernel),
        ("file-system", rootfs),
    ]
    table = b""
    payload = b""
    base = 0x800
    for name, data in parts:
        table += b"fwup-ptn %s base 0x%05x size 0x%05x\t\r\n" % (name.encode(), base, len(data))
        payload += data
        base += len(data)
    table = (table + b"\0").ljust(0x800, b"\xff")
    vendor = struct.pack(">I", 0).ljust(0x1000, b"\xff")
    rest = vendor + table + payload
    md5 = hashlib.md5(SAFELOADER_SALT + rest).digest()
    image = struct.pack(">I", 0x14 + len(rest)) + md5 + rest
    out = tmp / "safeloader-factory.bin"
    out.write_bytes(image)
    return out


V1_SALT = bytes.fromhex("dcd73aa5c39598fbddf9e7f40eae4738")


def tplink_v1_image(tmp: Path, kernel: bytes, rootfs: bytes, fw_max: int = 0x7C0000) -> Path:
    """mktplinkfw -F 8M ... -j -a 0x10000 -s: header + kernel, rootfs at the alignment,
    0xff and markers (4 KiB then 64 KiB), MD5 with the v1 salt."""
    k, r = len(kernel), len(rootfs)
    rootfs_ofs = -(-(512 + k) // 0x10000) * 0x10000
    buf = bytearray(b"\xff" * (fw_max + 4))
    buf[512 : 512 + k] = kernel
    buf[rootfs_ofs : rootfs_ofs + r] = rootfs
    n = pad_jffs2_tplink(buf, rootfs_ofs + r, fw_max)
    hdr = bytearray(512)
    struct.pack_into(">I", hdr, 0, 0x01000000)
    hdr[4:11] = b"OpenWrt"
    struct.pack_into(">II", hdr, 64, 0x09020001, 1)
    hdr[0x4C:0x5C] = V1_SALT
    struct.pack_into(">7I", hdr, 0x74, 0x80060000, 0x80060000, fw_max, 512, k, rootfs_ofs, r)
    buf[:512] = hdr
    image = bytes(buf[:n])
    image = image[:0x4C] + hashlib.md5(image).digest() + image[0x5C:]
    out = tmp / "tplink-v1-sysupgrade.bin"
    out.write_bytes(image)
    return out
