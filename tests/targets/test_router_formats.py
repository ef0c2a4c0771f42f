"""Pure parsing of what routers and images carry: fwtool metadata, apk/opkg lists, df and
/etc/openwrt_release. The images come from tests/fake_router/fakefw.py, which writes the trailer
the way fwtool.c does; the reader under test is openwrt_wolf/imageformats/fwtool.py."""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path

import pytest

from openwrt_wolf.catalogue.releases import parse_openwrt_release as parse_release
from openwrt_wolf.errors import WolfError
from openwrt_wolf.firmware.imageformats import fwtool
from openwrt_wolf.targets.router import installed as packages
from openwrt_wolf.targets.router.flash import parse_df_available
from tests.sshd_router import STANDINS, make_image

sys.path.insert(0, str(STANDINS))
import fakefw


def test_metadata_round_trip(tmp_path: Path) -> None:
    img = make_image(tmp_path / "a.bin", supported=["glinet,gl-ar300m16", "gl-ar300m"])
    meta = fwtool.read_metadata(img)
    assert meta is not None
    assert meta["supported_devices"] == ["glinet,gl-ar300m16", "gl-ar300m"]
    assert meta["version"]["version"] == "25.12.5"
    # the trailer is at the very end: magic FWx0, type 1 (metadata), big-endian size
    raw = img.read_bytes()
    assert raw[-16:-12] == b"FWx0"
    assert raw[-8] == 1
    (size,) = struct.unpack(">I", raw[-4:])
    assert raw[-size : -size + 8] == b"\0" * 8  # fwimage_header: version 0, flags 0
    # the metadata is "a few hundred bytes" (openwrt-facts: 290 and 295 in seed images)
    assert 100 < size < 1000


def test_metadata_rejects_bad_crc_and_missing_trailer(tmp_path: Path) -> None:
    img = make_image(tmp_path / "a.bin")
    raw = bytearray(img.read_bytes())
    raw[10] ^= 0xFF  # a flipped bit anywhere before the trailer breaks fwtool's CRC
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes(raw))
    assert fwtool.read_metadata(bad) is None
    plain = make_image(tmp_path / "plain.bin", metadata=False)
    assert fwtool.read_metadata(plain) is None


def test_metadata_of_a_signed_image(tmp_path: Path) -> None:
    """`fwtool -S` appends a signature block after the metadata block; the reader steps over it."""
    img = make_image(tmp_path / "a.bin", supported=["x,y"])
    raw = img.read_bytes()
    sig = b"untrusted comment: fake signature\n" + b"S" * 64
    crc = zlib.crc32(raw + sig) ^ 0xFFFFFFFF
    trailer = struct.pack(">IIB3xI", 0x46577830, crc, 0, len(sig) + 16)
    signed = tmp_path / "signed.bin"
    signed.write_bytes(raw + sig + trailer)
    meta = fwtool.read_metadata(signed)
    assert meta is not None and meta["supported_devices"] == ["x,y"]


def test_apk_and_opkg_lists() -> None:
    apk = (
        "libustream-mbedtls-2025.10.03~5a5d9a5b-r1 mips_24kc {ustream-ssl} (ISC) [installed]\n"
        "kmod-8021q-6.12.94-r1 mips_24kc {linux} (GPL-2.0-only) [installed]\n"
        "libmbedtls21-3.6.6-r1 mips_24kc {mbedtls} (GPL-2.0-or-later) [installed]\n"
        "WARNING: opening /etc/apk/repositories.d: No such file\n"
        # 25.12's own names and versions: px5g has no -rN, udebug a ~hash only, wolfSSL's
        # ABI suffix looks like a version
        "px5g-mbedtls-11 mips_24kc {px5g-mbedtls} (LGPL-2.1) [installed]\n"
        "libudebug-2026.01.16~875e1a7a mips_24kc {udebug} (GPL-2.0) [installed]\n"
        "libwolfssl5.9.1.e624513f-5.9.1-r1 mips_24kc {wolfssl} (GPL-3.0) [installed]\n"
        "libustream-wolfssl20201210-2026.03.01~99f1c0db-r1 mips_24kc {x} (ISC) [installed]\n"
    )
    assert packages.parse_apk(apk) == {
        "libustream-mbedtls": "2025.10.03~5a5d9a5b-r1",
        "kmod-8021q": "6.12.94-r1",
        "libmbedtls21": "3.6.6-r1",
        "px5g-mbedtls": "11",
        "libudebug": "2026.01.16~875e1a7a",
        "libwolfssl5.9.1.e624513f": "5.9.1-r1",
        "libustream-wolfssl20201210": "2026.03.01~99f1c0db-r1",
    }
    opkg = "libustream-mbedtls20201210 - 2024.07.28~99bd3d2b-r1\nlibmbedtls21 - 3.6.6-r1\n"
    assert packages.parse_opkg(opkg) == {
        "libustream-mbedtls20201210": "2024.07.28~99bd3d2b-r1",
        "libmbedtls21": "3.6.6-r1",
    }


def test_flavour_rules() -> None:
    default = {"libustream-mbedtls": "1", "libmbedtls21": "1", "apk-mbedtls": "1"}
    assert packages.check("apk", default, "mbedtls").ok
    wolf = packages.check("apk", default, "wolfssl")
    assert not wolf.ok
    assert "libustream-wolfssl*" in wolf.missing
    # apk has no wolfSSL backend: apk-mbedtls and its libmbedtls may stay on apk releases
    assert set(wolf.unwanted) == {"libustream-mbedtls"}
    good = {"libustream-wolfssl": "1", "libwolfssl5.9.1.e624513f": "1", "apk-openssl": "1"}
    assert packages.check("apk", good, "wolfssl").ok
    kept = {**good, "apk-mbedtls": "1", "libmbedtls21": "1"}
    assert packages.check("apk", kept, "wolfssl").ok
    # opkg (24.10) needs no Mbed TLS at all: there any is a leftover
    opkg_kept = {
        "libustream-wolfssl20201210": "1",
        "libwolfssl5.9.1.e624513f": "1",
        "libmbedtls21": "1",
    }
    assert packages.check("opkg", opkg_kept, "wolfssl").unwanted == ("libmbedtls21",)
    with pytest.raises(WolfError, match="unknown flavour"):
        packages.check("apk", good, "gnutls")


def test_df_and_release() -> None:
    busybox = (
        "Filesystem           1K-blocks      Used Available Use% Mounted on\n"
        "tmpfs                    28724       256     28468   1% /tmp\n"
    )
    assert parse_df_available(busybox) == 28468 * 1024
    wrapped = (
        "Filesystem           1K-blocks      Used Available Use% Mounted on\n"
        "/dev/a-very-long-device-name-here\n"
        "                         28724       256     28468   1% /tmp\n"
    )
    assert parse_df_available(wrapped) == 28468 * 1024
    with pytest.raises(WolfError, match="df output"):
        parse_df_available("sh: df: not found\n")
    rel = parse_release("DISTRIB_ID='OpenWrt'\nDISTRIB_RELEASE='25.12.5'\nDISTRIB_TAINTS=''\n")
    assert rel == {"DISTRIB_ID": "OpenWrt", "DISTRIB_RELEASE": "25.12.5", "DISTRIB_TAINTS": ""}


def test_fakefw_crc_matches_fwtool_definition() -> None:
    # fwtool's crc32_block from ~0 without final inversion, computed bit by bit
    def slow(data: bytes) -> int:
        c = 0xFFFFFFFF
        for b in data:
            c ^= b
            for _ in range(8):
                c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        return c

    assert fakefw.fwtool_crc(b"OpenWrt metadata") == slow(b"OpenWrt metadata")
