"""TP-Link firmware headers, 512 bytes, big-endian (firmware-utils mktplinkfw.c: v1,
mktplinkfw2.c: v2/v3).

v1 (``version`` 0x01000000 or 0x02000000): OpenWrt's ``tplink-v1-header -O`` puts one in
front of the lzma kernel in "combined" mode: no MD5, fw_length 0, rootfs_ofs = header + kernel.
v2 (first byte = the -T header version, 2 or 3; 0x55aa at 0x8c, 0xa5 at 0x90): the ramips
``tplink-v2-image`` sysupgrade: header, kernel, rootfs at a 4-byte boundary, MD5 over the
whole image with a salt in the MD5 field.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from ...errors import WolfError

HEADER = 512
V1_VERSIONS = (0x01000000, 0x02000000)
# md5salt_normal of each tool: the MD5 field holds this while the checksum is computed.
V1_SALT = bytes.fromhex("dcd73aa5c39598fbddf9e7f40eae4738")
V2_SALT = bytes.fromhex("dcd73aa5c39598fbdcf9e7f40eae4737")
MD5_AT = {1: 0x4C, 2: 0x40}  # offset of md5sum1 in each header


@dataclass(frozen=True)
class Header:
    kind: int  # 1 (mktplinkfw) or 2 (mktplinkfw2)
    version: int  # header version field (v1) / -T value (v2)
    fw_version: str
    hw_id: int
    hw_rev: int
    hw_ver_add: int | None
    kernel_la: int
    kernel_ep: int
    fw_length: int
    kernel_ofs: int
    kernel_len: int
    rootfs_ofs: int
    rootfs_len: int
    vendor: str = ""


def _text(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode("latin-1")


def looks_like_v1(data: bytes) -> bool:
    return (
        len(data) >= HEADER
        and struct.unpack_from(">I", data, 0)[0] in V1_VERSIONS
        and struct.unpack_from(">I", data, 0x80)[0] == HEADER  # kernel_ofs
    )


def looks_like_v2(data: bytes) -> bool:
    return (
        len(data) >= HEADER
        and data[0] in (2, 3)
        and data[1:4] == b"\0\0\0"
        and data[0x8C:0x8E] == b"\x55\xaa"
        and data[0x90] == 0xA5
    )


def parse_v1(data: bytes, *, where: str = "image") -> Header:
    if len(data) < HEADER:
        raise WolfError(f"{where}: TP-Link v1 header is truncated")
    (version,) = struct.unpack_from(">I", data, 0)
    vendor = _text(data[4:28])
    fw_version = _text(data[28:64])
    hw_id, hw_rev = struct.unpack_from(">II", data, 64)
    la, ep, fw_len, k_ofs, k_len, r_ofs, r_len = struct.unpack_from(">7I", data, 0x74)
    return Header(1, version, fw_version, hw_id, hw_rev, None, la, ep, fw_len, k_ofs, k_len,
                  r_ofs, r_len, vendor)  # fmt: skip


def parse_v2(data: bytes, *, where: str = "image") -> Header:
    if len(data) < HEADER:
        raise WolfError(f"{where}: TP-Link v2 header is truncated")
    fw_version = _text(data[4:52])
    hw_id, hw_rev, hw_add = struct.unpack_from(">III", data, 0x34)
    la, ep, fw_len, k_ofs, k_len, r_ofs, r_len = struct.unpack_from(">7I", data, 0x68)
    return Header(2, data[0], fw_version, hw_id, hw_rev, hw_add, la, ep, fw_len, k_ofs, k_len,
                  r_ofs, r_len)  # fmt: skip


def md5_ok(data: bytes, kind: int) -> bool:
    """The header's MD5: over the image with the salt in the MD5 field (get_md5 in both tools)."""
    at = MD5_AT[kind]
    salt = V1_SALT if kind == 1 else V2_SALT
    stored = data[at : at + 16]
    return hashlib.md5(data[:at] + salt + data[at + 16 :]).digest() == stored
