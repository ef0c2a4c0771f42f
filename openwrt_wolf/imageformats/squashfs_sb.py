"""The squashfs 4.0 superblock: enough to know where a root filesystem ends and how it was
made. (openwrt_wolf/squashfs.py reads whole filesystems; this reads 96 bytes.)"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import WolfError

MAGIC = b"hsqs"  # little-endian squashfs; OpenWrt writes it on big-endian targets too
SIZE = 96
COMPRESSORS = {1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}
_FMT = struct.Struct("<4sIIIIHHHHHHQQQQQQQQ")


@dataclass(frozen=True)
class Superblock:
    inodes: int
    mkfs_time: int
    block_size: int
    fragments: int
    compression: str
    flags: int
    version: str
    bytes_used: int  # the filesystem's length; with -nopad (OpenWrt) the file's size


def looks_like(data: bytes, offset: int = 0) -> bool:
    return data[offset : offset + 4] == MAGIC


def parse(data: bytes, offset: int = 0, *, where: str = "rootfs") -> Superblock:
    """The superblock at ``offset``; WolfError when it is absent, corrupt or truncated."""
    raw = data[offset : offset + SIZE]
    if raw[:4] != MAGIC:
        found = raw[:4].hex() or "end of file"
        raise WolfError(
            f"{where}: no squashfs at offset {offset:#x} (found {found}, want 68737173 'hsqs')",
            hint="give a squashfs root filesystem (OpenWrt's root.squashfs)",
        )
    if len(raw) < SIZE:
        raise WolfError(f"{where}: squashfs superblock at {offset:#x} is truncated")
    (_, inodes, mtime, block_size, frags, comp, block_log, flags, _ids, major, minor,
     _root, bytes_used, *tables) = _FMT.unpack(raw)  # fmt: skip
    if (major, minor) != (4, 0):
        raise WolfError(f"{where}: squashfs version {major}.{minor} (only 4.0 is supported)")
    if block_log > 20 or block_size != 1 << block_log or block_size < 4096:
        raise WolfError(
            f"{where}: corrupt squashfs superblock (block size {block_size}, log {block_log})"
        )
    # Every table lies inside the filesystem (0xffff... means "absent").
    present = [t for t in tables if t != 0xFFFFFFFFFFFFFFFF]
    if bytes_used < SIZE or any(t > bytes_used for t in present):
        raise WolfError(f"{where}: corrupt squashfs superblock (bytes_used {bytes_used})")
    if offset + bytes_used > len(data):
        raise WolfError(
            f"{where}: squashfs is truncated: it needs {bytes_used} bytes from {offset:#x}, "
            f"the file has {len(data) - offset}",
            hint="the image or rootfs was cut short; copy it again",
        )
    return Superblock(
        inodes=inodes,
        mkfs_time=mtime,
        block_size=block_size,
        fragments=frags,
        compression=COMPRESSORS.get(comp, f"unknown({comp})"),
        flags=flags,
        version=f"{major}.{minor}",
        bytes_used=bytes_used,
    )
