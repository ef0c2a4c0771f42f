"""Source archives that are small on disk and endless to read (issue 53): a member declaring a
TiB it never stores (GNU sparse in each of its forms, a pax `size`), and millions of empty
members. Built in a blink with the standard library, for tests/host/test_treedigest.py and
bench/hostile_bombs.py. Each holds one top folder, as a pinned source does."""

from __future__ import annotations

import gzip
import tarfile
import zlib
from pathlib import Path

TIB = 1 << 40
SPARSE = ("gnu-sparse", "pax-sparse-1.0", "pax-sparse-0.1")
STYLES = (*SPARSE, "pax-size")
TOP = "openwrt-25.12.5"


def _gnu_sparse(name: str, size: int) -> bytes:
    """An old GNU sparse header ('S'): no data stored, ``size`` bytes of holes to read."""
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode = tarfile.GNUTYPE_SPARSE, 0, 0o644
    buf = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    buf[483:495] = tarfile.itn(size, 12, tarfile.GNU_FORMAT)  # type: ignore[attr-defined]
    buf[148:156] = b"%06o\0 " % tarfile.calc_chksums(bytes(buf))[0]  # type: ignore[attr-defined]
    return bytes(buf)


def _member(style: str, name: str, size: int) -> bytes:
    if style == "gnu-sparse":
        return _gnu_sparse(name, size)
    info = tarfile.TarInfo(name)
    info.mode = 0o644
    data = b""
    if style == "pax-sparse-1.0":  # the map (no extents: all holes) is the member's data
        data = b"0\n".ljust(512, b"\0")
        info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                            "GNU.sparse.name": name, "GNU.sparse.realsize": str(size)}  # fmt: skip
    elif style == "pax-sparse-0.1":
        info.pax_headers = {"GNU.sparse.map": f"{size - 1},1", "GNU.sparse.size": str(size)}
        data = b"\0" * 512
    else:  # a plain file whose pax header claims the TiB its data blocks never hold
        info.pax_headers = {"size": str(size)}
    info.size = len(data)
    raw = info.tobuf(tarfile.PAX_FORMAT) + data
    return raw + bytes(-len(raw) % 512)


def sparse_bomb(path: Path, style: str = "gnu-sparse", size: int = TIB) -> Path:
    """A .tar.gz of a few hundred bytes whose one file declares ``size`` bytes."""
    small = tarfile.TarInfo(f"{TOP}/Makefile")
    small.size, small.mode = 3, 0o644
    tar = small.tobuf(tarfile.GNU_FORMAT) + b"all".ljust(512, b"\0")
    tar += _member(style, f"{TOP}/big", size) + bytes(1024)
    path.write_bytes(gzip.compress(tar, 9, mtime=0))
    return path


def many_members(path: Path, count: int) -> Path:
    """A .tar.gz of ``count`` empty files (2,500,000 take 18 MB and a few seconds: the
    headers differ only in the name's hex digits, so the checksum is patched, not recomputed)."""
    info = tarfile.TarInfo(f"{TOP}/00000000")
    info.mode, info.mtime = 0o644, 0
    head = info.tobuf(tarfile.GNU_FORMAT)
    at = len(TOP) + 1
    base = tarfile.calc_chksums(head)[0] - sum(b"00000000")  # type: ignore[attr-defined]
    pre, mid, post = head[:at], head[at + 8 : 148], head[156:]
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    with path.open("wb") as fh:
        for start in range(0, count, 4096):
            out = []
            for i in range(start, min(count, start + 4096)):
                d = b"%08x" % i
                out.append(b"".join((pre, d, mid, b"%06o\0 " % (base + sum(d)), post)))
            fh.write(c.compress(b"".join(out)))
        fh.write(c.compress(bytes(1024)) + c.flush())
    return path
