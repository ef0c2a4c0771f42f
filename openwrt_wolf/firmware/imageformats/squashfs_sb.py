"""The squashfs 4.0 superblock: where a root filesystem ends and how it was made. The one
superblock parser: imageformats reads it from image bytes, squashfs.SquashFS from a file."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ...errors import WolfError

MAGIC = b"hsqs"  # little-endian squashfs; OpenWrt writes it on big-endian targets too
SIZE = 96
COMPRESSORS = {1: "gzip", 2: "lzma", 3: "lzo", 4: "xz", 5: "lz4", 6: "zstd"}
_FMT = struct.Struct("<4sIIIIHHHHHHQQQQQQQQ")
_ABSENT = 0xFFFFFFFFFFFFFFFF  # a table the filesystem does not have


@dataclass(frozen=True)
class Superblock:
    inode_count: int
    mkfs_time: int
    block_size: int
    fragment_count: int
    compressor: str
    flags: int
    id_count: int
    version: tuple[int, int]
    root_inode: int
    bytes_used: int  # the filesystem's length; with -nopad (OpenWrt) the file's size
    id_table: int
    xattr_table: int
    inode_table: int
    directory_table: int
    fragment_table: int
    export_table: int


def looks_like(data: bytes, offset: int = 0) -> bool:
    return data[offset : offset + 4] == MAGIC


def parse_header(
    raw: bytes, *, available: int, where: str = "rootfs", offset: int = 0
) -> Superblock:
    """The superblock in ``raw`` (its first 96 bytes); ``available`` is how many bytes the
    file has from the superblock on, to tell a truncated filesystem. WolfError when absent,
    corrupt or truncated."""
    if raw[:4] != MAGIC:
        found = raw[:4].hex() or "end of file"
        raise WolfError(
            f"{where}: no squashfs at offset {offset:#x} (found {found}, want 68737173 'hsqs')",
            hint="give a squashfs root filesystem (OpenWrt's root.squashfs)",
        )
    if len(raw) < SIZE:
        raise WolfError(f"{where}: squashfs superblock at {offset:#x} is truncated")
    f = _FMT.unpack(raw[:SIZE])
    sb = Superblock(
        inode_count=f[1], mkfs_time=f[2], block_size=f[3], fragment_count=f[4],
        compressor=COMPRESSORS.get(f[5], f"unknown({f[5]})"), flags=f[7], id_count=f[8],
        version=(f[9], f[10]), root_inode=f[11], bytes_used=f[12], id_table=f[13],
        xattr_table=f[14], inode_table=f[15], directory_table=f[16], fragment_table=f[17],
        export_table=f[18],
    )  # fmt: skip
    if sb.version != (4, 0):
        raise WolfError(
            f"{where}: squashfs version {sb.version[0]}.{sb.version[1]} (only 4.0 is supported)",
            hint="OpenWrt has written squashfs 4.0 since 2009",
        )
    block_log = f[6]
    if block_log > 20 or sb.block_size != 1 << block_log or sb.block_size < 4096:
        raise WolfError(
            f"{where}: corrupt squashfs superblock (block size {sb.block_size}, log {block_log})"
        )
    # Every table lies inside the filesystem, the inode table before the directory table.
    tables = (sb.id_table, sb.xattr_table, sb.inode_table, sb.directory_table,
              sb.fragment_table, sb.export_table)  # fmt: skip
    present = [t for t in tables if t != _ABSENT]
    if (
        sb.bytes_used < SIZE
        or any(t > sb.bytes_used for t in present)
        or not SIZE <= sb.inode_table <= sb.directory_table < sb.bytes_used
    ):
        raise WolfError(f"{where}: corrupt squashfs superblock (bytes_used {sb.bytes_used})")
    if sb.bytes_used > available:
        raise WolfError(
            f"{where}: squashfs is truncated: it needs {sb.bytes_used} bytes from {offset:#x}, "
            f"the file has {available}",
            hint="the image or rootfs was cut short; copy it again",
        )
    return sb


def parse(data: bytes, offset: int = 0, *, where: str = "rootfs") -> Superblock:
    """The superblock at ``offset`` of ``data`` (which must hold the whole filesystem)."""
    return parse_header(
        data[offset : offset + SIZE], available=len(data) - offset, where=where, offset=offset
    )
