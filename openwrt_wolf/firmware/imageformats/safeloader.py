"""TP-Link safeloader factory images (firmware-utils tplink-safeloader.c).

Layout: 0x00 image size (u32 BE, whole file) | 0x04 MD5 of a fixed salt + bytes from 0x14 |
0x14 vendor block (0x1000) | 0x1014 partition table (0x800 bytes of
``fwup-ptn <name> base 0x<hex> size 0x<hex>\\t\\r\\n`` lines, bases relative to 0x1014) |
the partitions. The sysupgrade form has no header: it is the os-image (the v1-headered
kernel) followed by the file-system partition, see tplink.py and fit.py.
"""

from __future__ import annotations

import hashlib
import re
import struct

from ...errors import WolfError

PAYLOAD = 0x1014
TABLE_SIZE = 0x800
SALT = bytes.fromhex("7a2b15ed9b98596de504ab44ac2a9f4e")
_LINE = re.compile(rb"fwup-ptn (\S+) base 0x([0-9a-fA-F]+) size 0x([0-9a-fA-F]+)\t\r\n")


def looks_like_factory(data: bytes) -> bool:
    return (
        len(data) >= PAYLOAD + TABLE_SIZE
        and data[PAYLOAD : PAYLOAD + 9] == b"fwup-ptn "
        and struct.unpack_from(">I", data, 0)[0] == len(data)
    )


def partitions(data: bytes, *, where: str = "image") -> dict[str, tuple[int, int]]:
    """name -> (file offset, size) from the image partition table; checks the MD5."""
    if hashlib.md5(SALT + data[0x14:]).digest() != data[4:20]:
        raise WolfError(f"{where}: safeloader MD5 mismatch (corrupt factory image)")
    table = data[PAYLOAD : PAYLOAD + TABLE_SIZE].split(b"\0", 1)[0]
    parts: dict[str, tuple[int, int]] = {}
    for m in _LINE.finditer(table):
        off, size = PAYLOAD + int(m.group(2), 16), int(m.group(3), 16)
        if off + size > len(data):
            raise WolfError(f"{where}: safeloader partition {m.group(1)!r} runs past the end")
        parts[m.group(1).decode("latin-1")] = (off, size)
    for need in ("os-image", "file-system"):
        if need not in parts:
            raise WolfError(f"{where}: safeloader image has no {need} partition")
    return parts
