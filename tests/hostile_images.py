"""Crafted firmware inputs for the bounded readers (issue 32): squashfs images made by Debian's
mksquashfs and then edited byte by byte (a root directory that lists itself, counts the image
cannot hold, libraries of sparse or zero blocks), chains of fwtool trailers, gzip bombs of a
rootfs; and the run the tests watch them through (``bounded_run``: the kernel's peak RSS of
the child, a deadline). tests/firmware/test_hostile_images.py, tests/catalogue/
test_tree_hostile.py and bench/hostile_readers.py use them. Nothing here imports the code
under test; the squashfs layout is squashfs-tools' (squashfs_fs.h)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

from tests import peak

ROOT = Path(__file__).resolve().parent.parent

SB = struct.Struct("<4sIIIIHHHHHHQQQQQQQQ")  # the 96-byte superblock
INODE_COUNT, BYTES_USED = 4, 40  # byte offsets of those fields
LIB = "usr/lib/libmbedcrypto.so.3.6.6"  # a name size-report reads whole (a TLS library)
FWTOOL_TRAILER = struct.Struct(">4sIB3xI")


def _tree(root: Path, files: dict[str, bytes | int]) -> Path:
    """Files (bytes, or an int: a sparse file of that many bytes) and empty directories
    (names ending in /)."""
    for name, content in files.items():
        p = root / name
        if name.endswith("/"):
            p.mkdir(parents=True, exist_ok=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, int):
            with p.open("wb") as fh:
                fh.truncate(content)
        else:
            p.write_bytes(content)
    return root


def mksquashfs(root: Path, out: Path, *options: str, block: str = "256k") -> Path:
    subprocess.run(
        ["mksquashfs", str(root), str(out), "-b", block, "-noappend", "-nopad", "-no-xattrs",
         "-all-root", "-quiet", "-no-progress", *options],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return out


def superblock(data: bytes | bytearray) -> dict[str, int]:
    f = SB.unpack_from(data, 0)
    names = ("inode_count", "block_size", "root_inode", "bytes_used", "inode_table",
             "directory_table")  # fmt: skip
    return dict(zip(names, (f[1], f[3], f[11], f[12], f[15], f[16]), strict=True))


def _meta(table: int, ref_block: int, offset: int) -> int:
    """File position of (block, offset) in an uncompressed metadata table (-noI): each block
    is a 2-byte header, then its bytes."""
    return table + ref_block + 2 + offset


def _root_dir(tmp: Path, name: str) -> tuple[Path, bytearray, dict[str, int], int]:
    """A squashfs of one empty directory "a" with uncompressed inode and directory tables
    (-noI), its bytes, its superblock fields and the position of its root inode."""
    root = _tree(tmp / f"{name}-root", {"a/": b""})
    out = mksquashfs(root, tmp / f"{name}.squashfs", "-noI", "-noF")
    data = bytearray(out.read_bytes())
    sb = superblock(data)
    ref = sb["root_inode"]
    at = _meta(sb["inode_table"], ref >> 16, ref & 0xFFFF)
    assert struct.unpack_from("<H", data, at)[0] == 1  # a basic directory inode
    return out, data, sb, at


def looping(tmp: Path, name: str = "loop", *, inode_count: int | None = None) -> Path:
    """A squashfs whose root directory lists itself: its one entry, directory "a", is made to
    refer to the root inode. ``inode_count`` replaces the superblock's count."""
    out, data, sb, at = _root_dir(tmp, name)
    ref = sb["root_inode"]
    start, _links, size, offset = struct.unpack_from("<IIHH", data, at + 16)
    listing = _meta(sb["directory_table"], start, offset)
    count, _iblock, _inumber = struct.unpack_from("<III", data, listing)
    assert count == 0 and size == 3 + 12 + 8 + 1  # one entry, "a"
    struct.pack_into("<I", data, listing + 4, ref >> 16)  # the entry's inode block: root's
    struct.pack_into("<H", data, listing + 12, ref & 0xFFFF)  # its offset: root's
    struct.pack_into("<H", data, listing + 16, 1)  # a directory
    if inode_count is not None:
        struct.pack_into("<I", data, INODE_COUNT, inode_count)
    out.write_bytes(bytes(data))
    return out


def listing_size(tmp: Path, size: int, name: str = "listing") -> Path:
    """A squashfs whose root directory inode says its listing has ``size`` bytes (its table
    holds 24)."""
    out, data, _sb, at = _root_dir(tmp, name)
    struct.pack_into("<H", data, at + 16 + 8, size)  # basic directory inode: file_size
    out.write_bytes(bytes(data))
    return out


def superblock_field(tmp: Path, offset: int, value: int, name: str = "field") -> Path:
    """A good squashfs with the 32-bit superblock field at ``offset`` replaced (4 inode
    count, 16 fragment count, 26 id count: 16 bits)."""
    data = bytearray(good(tmp, name).read_bytes())
    struct.pack_into("<H" if offset == 26 else "<I", data, offset, value)
    out = tmp / f"{name}-edited.squashfs"
    out.write_bytes(bytes(data))
    return out


def inode_count(tmp: Path, count: int, name: str = "count") -> Path:
    """A good squashfs (a library, a banner) whose superblock claims ``count`` inodes."""
    root = _tree(tmp / f"{name}-root", {LIB: os.urandom(3000), "etc/banner": b"OpenWrt\n"})
    out = mksquashfs(root, tmp / f"{name}.squashfs", "-comp", "xz")
    data = bytearray(out.read_bytes())
    struct.pack_into("<I", data, INODE_COUNT, count)
    out.write_bytes(bytes(data))
    return out


def sparse_library(
    tmp: Path, claim: int, name: str = "sparse", *, zeros: bool = False, comp: str = "zstd"
) -> Path:
    """A squashfs (1 MiB blocks) holding a TLS library of ``claim`` bytes that are all sparse
    blocks (4 bytes of the inode table each), or with ``zeros`` blocks of compressed zeros
    (-no-sparse, zstd: a few dozen bytes each), beside 3 KB of random bytes."""
    root = _tree(tmp / f"{name}-root", {LIB: claim, "etc/random": os.urandom(3000)})
    opts = ["-no-sparse", "-comp", comp] if zeros else ["-comp", "xz"]
    return mksquashfs(root, tmp / f"{name}.squashfs", *opts, block="1M")


def good(tmp: Path, name: str = "good") -> Path:
    """A plain squashfs with a library and a package list: what the crafted ones start from."""
    files: dict[str, bytes | int] = {
        LIB: os.urandom(20_000),
        "lib/apk/packages/libmbedtls21.list": f"/{LIB}\n".encode(),
        "etc/banner": b"OpenWrt\n",
    }
    return mksquashfs(_tree(tmp / f"{name}-root", files), tmp / f"{name}.squashfs", "-comp", "xz")


def fwtool_chain(image: bytes, count: int, kind: int = 0) -> bytes:
    """``image`` with ``count`` empty fwtool chunks appended (16-byte trailers of type
    ``kind``), each CRC over every byte before it as fwtool.c computes it (its running CRC
    seeded 0xffffffff and not inverted, i.e. zlib's CRC32 xor 0xffffffff). Linear."""
    parts = [image]
    crc = zlib.crc32(image)
    for _ in range(count):
        trailer = FWTOOL_TRAILER.pack(b"FWx0", crc ^ 0xFFFFFFFF, kind, FWTOOL_TRAILER.size)
        parts.append(trailer)
        crc = zlib.crc32(trailer, crc)
    return b"".join(parts)


def gzip_bomb(squashfs: Path, out: Path, claim: int, *, piece: int = 16 << 20) -> Path:
    """A malta-style rootfs.img.gz whose squashfs superblock says it is ``claim`` bytes long
    and whose gzip stream holds that many (the filesystem, then zeros): one gzip member of
    the image made by the gzip tool, then members of ``piece`` zeros repeated (gunzip reads
    concatenated members as one stream, RFC 1952), so it is quick to make."""
    data = bytearray(squashfs.read_bytes())
    struct.pack_into("<Q", data, BYTES_USED, claim)
    gz = subprocess.run(["gzip", "-9", "-c"], input=bytes(data), capture_output=True,
                        check=True, timeout=60).stdout  # fmt: skip
    zeros = subprocess.run(["gzip", "-9", "-c"], input=bytes(piece), capture_output=True,
                           check=True, timeout=60).stdout  # fmt: skip
    with out.open("wb") as fh:
        fh.write(gz)
        for _ in range(-(-(claim - len(data)) // piece)):
            fh.write(zeros)
    return out


Hung = peak.Hung


def bounded_run(
    tmp: Path, args: Sequence[str], deadline: float, env: dict[str, str] | None = None
) -> tuple[int, str, str, int]:
    """Exit status, stdout, stderr and peak RSS (KiB, tests/peak.py) of `invoke ARGS` with its
    own cache and store under tmp; past ``deadline`` seconds its group is killed and Hung
    raised (which the tests report as a hang)."""
    env = {**os.environ, "OPENWRT_WOLF_CACHE": str(tmp / "cache"),
           "OPENWRT_WOLF_STORE": str(tmp / "store"), **(env or {})}  # fmt: skip
    return peak.run([sys.executable, "-m", "invoke", *args], tmp, deadline, cwd=ROOT, env=env)
