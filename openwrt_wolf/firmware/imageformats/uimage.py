"""The legacy U-Boot image header (uImage) that ath79 kernels carry: 64 bytes, big-endian,
CRC32 over the header and over the data (u-boot include/image.h; `mkimage -l` shows it)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from ...errors import WolfError

MAGIC = 0x27051956
SIZE = 64
_FMT = struct.Struct(">IIIIIIIBBBB32s")
COMPRESSION = {0: "none", 1: "gzip", 2: "bzip2", 3: "lzma", 4: "lzo", 5: "lz4", 6: "zstd"}


@dataclass(frozen=True)
class UImage:
    name: str
    data_size: int
    load: int
    entry: int
    compression: str
    magic: int

    @property
    def total_size(self) -> int:
        return SIZE + self.data_size


def looks_like(data: bytes, offset: int = 0) -> bool:
    # OpenWrt devices may set UIMAGE_MAGIC; any magic with a valid header CRC is accepted.
    raw = data[offset : offset + SIZE]
    return len(raw) == SIZE and _header_crc_ok(raw)


def _header_crc_ok(raw: bytes) -> bool:
    stored: int = struct.unpack_from(">I", raw, 4)[0]
    return zlib.crc32(raw[:4] + b"\0\0\0\0" + raw[8:SIZE]) == stored


def parse(data: bytes, offset: int = 0, *, where: str = "image") -> UImage:
    raw = data[offset : offset + SIZE]
    if len(raw) < SIZE:
        raise WolfError(f"{where}: uImage header at {offset:#x} is truncated")
    magic, _hcrc, _time, size, load, entry, dcrc, _os, _arch, _type, comp, name = _FMT.unpack(raw)
    if not _header_crc_ok(raw):
        raise WolfError(f"{where}: uImage header CRC mismatch at {offset:#x} (corrupt kernel)")
    start = offset + SIZE
    if start + size > len(data):
        raise WolfError(
            f"{where}: uImage kernel is truncated: header says {size} bytes, "
            f"{len(data) - start} present"
        )
    if zlib.crc32(data[start : start + size]) != dcrc:
        raise WolfError(f"{where}: uImage data CRC mismatch (corrupt kernel)")
    return UImage(
        name=name.rstrip(b"\0").decode("latin-1"),
        data_size=size,
        load=load,
        entry=entry,
        compression=COMPRESSION.get(comp, str(comp)),
        magic=magic,
    )
