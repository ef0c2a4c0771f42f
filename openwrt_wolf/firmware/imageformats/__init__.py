"""Splitting a sysupgrade (or factory) image back into kernel and rootfs by its format, so
an image file alone is enough to measure: uImage + squashfs (ath79 default recipe), the
tplink-safeloader sysupgrade (v1-headered kernel + rootfs), TP-Link v1 and v2 images, and
safeloader factory images; the fwtool metadata trailer and JFFS2 end markers are recognised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import WolfError
from . import bounded, fwtool, safeloader, squashfs_sb, tplink, uimage

JFFS2_EOF = b"\xde\xad\xc0\xde"
# pad-to BLOCKSIZE between kernel and rootfs: the erase block sizes OpenWrt uses.
# Sysupgrade formats whose recipe always pads the rootfs and writes the end marker.
_MARKED = ("uimage+squashfs", "tplink-safeloader", "tplink-v2")
_PAD_TO = tuple(1 << n for n in range(12, 19))  # 4k .. 256k


@dataclass(frozen=True)
class SplitImage:
    format: str  # "uimage+squashfs", "tplink-safeloader", "tplink-v1", "tplink-v2", ...
    kernel_offset: int
    kernel_size: int  # the kernel file the recipe appended (uImage, v1-headered, raw lzma)
    rootfs_offset: int
    rootfs_size: int  # bytes of the squashfs (from its superblock bytes_used)
    metadata_size: int | None  # fwtool chunks at the end (metadata, signature)
    fields: dict[str, Any] = field(default_factory=dict)  # header fields worth showing


def split(path: Path) -> SplitImage:
    """Parse ``path``; WolfError (one line) on unknown, truncated or corrupt images."""
    return split_bytes(bounded.read_file(path, "image"), where=str(path))


def split_bytes(data: bytes, *, where: str = "image") -> SplitImage:
    if len(data) < 64:
        raise WolfError(f"{where}: {len(data)} bytes is too short for a firmware image")
    trailer = fwtool.find(data, where=where)
    body = data if trailer is None else data[: trailer.start]
    fields: dict[str, Any] = {"file_size": len(data)}
    if trailer is not None:
        fields["metadata"] = trailer.metadata
        fields["signed"] = trailer.signed

    if uimage.looks_like(body):
        fmt, k_off, k_size, r_off = _uimage(body, where, fields)
    elif tplink.looks_like_v1(body):
        fmt, k_off, k_size, r_off = _tplink_v1(body, where, fields)
    elif tplink.looks_like_v2(body):
        fmt, k_off, k_size, r_off = _tplink_v2(body, where, fields)
    elif safeloader.looks_like_factory(body):
        fmt = "tplink-safeloader-factory"
        parts = safeloader.partitions(body, where=where)
        k_off, k_size = parts["os-image"]
        r_off = parts["file-system"][0]
        fields["partitions"] = {n: {"offset": o, "size": s} for n, (o, s) in parts.items()}
    elif squashfs_sb.looks_like(body):
        raise WolfError(
            f"{where} is a bare squashfs, not a sysupgrade image",
            hint="pass it as --rootfs together with --kernel",
        )
    else:
        raise WolfError(
            f"{where}: unknown image format (no uImage, TP-Link or safeloader header)",
            hint="expected an OpenWrt sysupgrade image: uImage, TP-Link v1/v2 or safeloader",
        )
    sb = squashfs_sb.parse(body, r_off, where=where)
    fields["squashfs"] = {
        "compression": sb.compressor,
        "block_size": sb.block_size,
        "inodes": sb.inode_count,
    }
    _markers(body, r_off + sb.bytes_used, fields)
    # mktplinkfw2 writes markers only while the image is shorter than the layout's firmware
    # area: a rootfs that ends exactly at the end of the file filled it, and OpenWrt keeps it.
    filled = fmt == "tplink-v2" and r_off + sb.bytes_used == len(body)
    if filled:
        fields["fills_firmware_area"] = True
    if not fields["jffs2_markers"] and fmt in _MARKED and not filled:
        raise WolfError(
            f"{where}: no JFFS2 end marker after the rootfs: the image is truncated",
            hint=f"every {fmt} sysupgrade image ends its rootfs padding with de ad c0 de",
        )
    return SplitImage(
        format=fmt,
        kernel_offset=k_off,
        kernel_size=k_size,
        rootfs_offset=r_off,
        rootfs_size=sb.bytes_used,
        metadata_size=None if trailer is None else trailer.size,
        fields=fields,
    )


def _uimage(body: bytes, where: str, fields: dict[str, Any]) -> tuple[str, int, int, int]:
    u = uimage.parse(body, 0, where=where)
    fields["uimage"] = {
        "name": u.name,
        "load": f"{u.load:#x}",
        "entry": f"{u.entry:#x}",
        "compression": u.compression,
    }
    end = u.total_size
    if squashfs_sb.looks_like(body, end):
        return "uimage+squashfs", 0, end, end
    # pad-to BLOCKSIZE wrote zeros (dd conv=sync) up to the rootfs.
    for step in _PAD_TO:
        at = -(-end // step) * step
        if squashfs_sb.looks_like(body, at) and not body[end:at].strip(b"\0"):
            # The zero fill is certain; the BLOCKSIZE behind it is at least this alignment.
            fields["pad_to_fill"] = at - end
            fields["rootfs_alignment"] = min(at & -at, _PAD_TO[-1])
            return "uimage+squashfs", 0, end, at
    raise WolfError(
        f"{where}: no squashfs rootfs after the uImage kernel ({end} bytes)",
        hint="the image is truncated, corrupt, or has a non-squashfs rootfs",
    )


def _tplink_v1(body: bytes, where: str, fields: dict[str, Any]) -> tuple[str, int, int, int]:
    h = tplink.parse_v1(body, where=where)
    fields["tplink"] = _header_fields(h)
    if h.fw_length == 0:
        # tplink-v1-header -c -O: a combined kernel, then tplink-safeloader's sysupgrade puts
        # the file-system partition right behind it.
        k_size = tplink.HEADER + h.kernel_len
        r_off = h.rootfs_ofs or k_size
        if r_off != k_size:
            raise WolfError(f"{where}: TP-Link v1 rootfs offset {r_off:#x} != end of kernel")
        return "tplink-safeloader", 0, k_size, r_off
    # get_md5 runs over the bytes written: all of them, or up to the end with -s.
    if not tplink.md5_ok(body, 1):
        raise WolfError(f"{where}: TP-Link v1 header MD5 mismatch (corrupt image)")
    return "tplink-v1", h.kernel_ofs, h.kernel_len, h.rootfs_ofs


def _tplink_v2(body: bytes, where: str, fields: dict[str, Any]) -> tuple[str, int, int, int]:
    h = tplink.parse_v2(body, where=where)
    fields["tplink"] = _header_fields(h)
    if h.kernel_ofs + h.kernel_len > len(body) or h.rootfs_ofs > len(body):
        raise WolfError(f"{where}: TP-Link v2 image is truncated")
    if not tplink.md5_ok(body, 2):
        raise WolfError(f"{where}: TP-Link v2 header MD5 mismatch (corrupt or truncated image)")
    return "tplink-v2", h.kernel_ofs, h.kernel_len, h.rootfs_ofs


def _header_fields(h: tplink.Header) -> dict[str, Any]:
    return {
        "header": f"v{h.kind}",
        "version": h.version,
        "fw_version": h.fw_version,
        "hw_id": f"{h.hw_id:#010x}",
        "hw_rev": f"{h.hw_rev:#x}",
        **({"hw_ver_add": f"{h.hw_ver_add:#x}"} if h.hw_ver_add is not None else {}),
        "kernel_len": h.kernel_len,
        "rootfs_ofs": h.rootfs_ofs,
        "rootfs_len": h.rootfs_len,
        "fw_length": h.fw_length,
    }


def _markers(body: bytes, pos: int, fields: dict[str, Any]) -> None:
    """After the rootfs: 0xff fill and JFFS2 end markers (padjffs2, -j of the TP-Link tools)."""
    marks: list[int] = []
    while True:
        nxt = body.find(JFFS2_EOF, pos)
        if nxt < 0 or body[pos:nxt].strip(b"\xff"):
            break
        marks.append(nxt)
        pos = nxt + len(JFFS2_EOF)
    fields["jffs2_markers"] = marks
    fields["data_end"] = marks[0] if marks else pos
    fields["unparsed_tail"] = len(body) - pos
