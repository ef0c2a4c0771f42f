"""Reading the metadata OpenWrt's `append-metadata` puts at the end of a sysupgrade image
(fwtool -I), the way fwtool extracts it: a 16-byte trailer at the very end — magic "FWx0",
CRC-32, type (0 signature, 1 metadata), 3 pad bytes, size — all big-endian. ``size`` counts
the 8-byte header (version 0, flags), the data and the trailer. The CRC runs over every byte
before the trailer, starting from ~0 and without the final inversion. A signed image has a
signature block after the metadata block; we step over it."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

from ..errors import WolfError

MAGIC = 0x46577830  # "FWx0"
TYPE_SIGNATURE = 0
TYPE_INFO = 1
TRAILER = 16
HEADER = 8
MAX_BLOCK = 31 * 1024 + 1024  # fwtool's buffer: 30 KiB metadata + 1 KiB signature + slack


def read_metadata(image: Path) -> dict[str, Any] | None:
    """The image's metadata JSON, or None when it has no (valid) fwtool metadata block."""
    try:
        size = image.stat().st_size
        with image.open("rb") as fh:
            base = max(0, size - 2 * MAX_BLOCK)
            fh.seek(base)
            tail = fh.read()
            end = size  # absolute end of the block being looked at
            while end - base >= TRAILER:
                t = end - base
                magic, crc, kind, block = struct.unpack(">IIB3xI", tail[t - TRAILER : t])
                if magic != MAGIC or block < TRAILER or block > t:
                    return None
                if kind == TYPE_INFO and block >= TRAILER + HEADER:
                    fh.seek(0)
                    if _crc_of_file(fh, end - TRAILER) != crc:
                        return None
                    data = tail[t - block : t - TRAILER]
                    if struct.unpack(">I", data[:4])[0] != 0:  # header version must be 0
                        return None
                    meta = json.loads(data[HEADER:].decode("utf-8"))
                    return meta if isinstance(meta, dict) else None
                if kind != TYPE_SIGNATURE:
                    return None
                end -= block
    except OSError as e:
        raise WolfError(f"cannot read image {image}: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, struct.error):
        return None
    return None


def _crc_of_file(fh: Any, length: int) -> int:
    crc = 0
    left = length
    while left > 0:
        chunk = fh.read(min(left, 1 << 20))
        if not chunk:
            break
        crc = zlib.crc32(chunk, crc)
        left -= len(chunk)
    return crc ^ 0xFFFFFFFF
