"""append-metadata's trailer, as fwtool writes it (openwrt/fwtool fwtool.c, fwimage.h).

Each chunk appended to the image is: data, then a 16-byte big-endian trailer
``magic "FWx0" | crc32 | type (0 signature, 1 metadata) | 3 pad | size``. ``size`` counts the
data and the trailer; the metadata chunk's data is an 8-byte header (version 0, flags) then
the JSON. ``crc32`` is the CRC of every byte of the file before the trailer, started at
0xffffffff and not inverted at the end. Chunks are read from the end backwards.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import WolfError
from ...trust import untrusted

MAGIC = b"FWx0"
TRAILER = 16
HEADER = 8
SIGNATURE, METADATA = 0, 1
_FMT = struct.Struct(">4sIB3xI")
# fwtool.c keeps two buffers of BUFLEN (30 KiB metadata + 1 KiB signature + 1 KiB) of the
# file's end and finds its chunks there: what lies beyond is no image it reads.
MAX_TAIL = 2 * (30 + 1 + 1) * 1024


@dataclass(frozen=True)
class Trailer:
    start: int  # where the appended chunks begin: the end of the image proper
    size: int  # bytes of all chunks
    metadata: dict[str, Any] = field(default_factory=dict)
    signed: bool = False


def fwtool_crc(data: bytes | memoryview) -> int:
    """fwtool's running CRC: zlib's CRC32 without its final inversion."""
    return zlib.crc32(data) ^ 0xFFFFFFFF


def find(data: bytes, *, where: str = "image") -> Trailer | None:
    """The fwtool chunks at the end of ``data``, or None when there are none. Walked once
    from the end (at most MAX_TAIL bytes of chunks), their CRCs checked in one pass forward:
    each covers every byte before its trailer, so each is the one before it continued."""
    end = len(data)
    chunks: list[tuple[int, int, int, int]] = []  # (start, end, crc, type), last first
    while end >= TRAILER and data[end - TRAILER : end - TRAILER + 4] == MAGIC:
        _, crc, kind, size = _FMT.unpack_from(data, end - TRAILER)
        if size < TRAILER or size > end:
            raise WolfError(f"{where}: corrupt metadata trailer (chunk size {size})")
        if len(data) - (end - size) > MAX_TAIL:
            raise WolfError(
                f"{where}: fwtool chunks at its end take more than {MAX_TAIL:,} bytes "
                "(fwtool itself reads no more: one metadata chunk of at most 30 KiB and a "
                "signature)",
                hint="the image is corrupt or crafted",
            )
        chunks.append((end - size, end, crc, kind))
        end -= size
    if not chunks:
        return None
    view = memoryview(data)
    running = zlib.crc32(view[:end])
    for _start, stop, crc, _kind in reversed(chunks):
        running = zlib.crc32(view[end : stop - TRAILER], running)
        if running ^ 0xFFFFFFFF != crc:
            raise WolfError(
                f"{where}: metadata trailer CRC mismatch (the image was changed or truncated)"
            )
        running = zlib.crc32(view[stop - TRAILER : stop], running)
        end = stop
    metadata: dict[str, Any] = {}
    signed = False
    for start, stop, _crc, kind in chunks:  # from the end, as fwtool reads them
        if kind == METADATA:
            if stop - start < TRAILER + HEADER:
                raise WolfError(f"{where}: corrupt metadata chunk (size {stop - start})")
            raw = bytes(view[start + HEADER : stop - TRAILER])
            metadata = untrusted.loads_json(raw, f"{where}: metadata chunk")
        elif kind == SIGNATURE:
            signed = True
    start = chunks[-1][0]
    return Trailer(start=start, size=len(data) - start, metadata=metadata, signed=signed)


def read_metadata(image: Path) -> dict[str, Any] | None:
    """The metadata JSON of an image file, or None when it has no valid fwtool metadata (no
    trailer, a CRC mismatch, not JSON) — as sysupgrade treats such an image."""
    from .bounded import read_file

    data = read_file(image, "image")
    try:
        trailer = find(data, where=str(image))
    except WolfError:
        return None
    if trailer is None or not isinstance(trailer.metadata, dict) or not trailer.metadata:
        return None
    return trailer.metadata
