"""Shared by the fake router's stand-ins and the tests: the fake router's state (a directory
named by $FAKEROOT) and OpenWrt's fwtool metadata trailer, written and read the way
fwtool.c does it (FWx0 magic, CRC-32 without final inversion, big-endian sizes).

Stand-in firmware images start with FAKE_MAGIC and a JSON line listing the packages the
"firmware" installs, so a flashed router comes back with that package list."""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

FWIMAGE_MAGIC = 0x46577830  # "FWx0"
FWIMAGE_INFO = 1
FAKE_MAGIC = b"FAKEFW1\n"


def root() -> Path:
    return Path(os.environ["FAKEROOT"])


def load_state() -> dict[str, Any]:
    return json.loads((root() / "state.json").read_text())


def save_state(state: dict[str, Any]) -> None:
    tmp = root() / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, root() / "state.json")


def fwtool_crc(data: bytes, crc: int = 0xFFFFFFFF) -> int:
    # fwtool starts at ~0 and never inverts at the end; zlib inverts both ways
    return zlib.crc32(data, crc ^ 0xFFFFFFFF) ^ 0xFFFFFFFF


def append_metadata(body: bytes, meta: dict[str, Any]) -> bytes:
    """What `echo JSON | fwtool -I - image` appends."""
    data = b"\0" * 8 + (json.dumps(meta) + "\n").encode()  # header: version 0, flags 0
    crc = fwtool_crc(body + data)
    trailer = struct.pack(">II", FWIMAGE_MAGIC, crc) + bytes([FWIMAGE_INFO, 0, 0, 0])
    trailer += struct.pack(">I", len(data) + 16)
    return body + data + trailer


def read_metadata(image: bytes) -> dict[str, Any] | None:
    """What `fwtool -q -i - image` extracts, or None ("Image metadata not present")."""
    if len(image) < 16:
        return None
    magic, crc = struct.unpack(">II", image[-16:-8])
    kind = image[-8]
    (size,) = struct.unpack(">I", image[-4:])
    if magic != FWIMAGE_MAGIC or kind != FWIMAGE_INFO or size > len(image) or size < 24:
        return None
    if fwtool_crc(image[:-16]) != crc:
        return None
    data = image[len(image) - size : -16]
    return json.loads(data[8:])


def fake_payload(image: bytes) -> dict[str, Any] | None:
    if not image.startswith(FAKE_MAGIC):
        return None
    line = image[len(FAKE_MAGIC) :].split(b"\n", 1)[0]
    return json.loads(line)


def write_release(version: str, revision: str, target: str, arch: str) -> None:
    """/etc/openwrt_release as package/base-files writes it."""
    text = (
        "DISTRIB_ID='OpenWrt'\n"
        f"DISTRIB_RELEASE='{version}'\n"
        f"DISTRIB_REVISION='{revision}'\n"
        f"DISTRIB_TARGET='{target}'\n"
        f"DISTRIB_ARCH='{arch}'\n"
        f"DISTRIB_DESCRIPTION='OpenWrt {version} {revision}'\n"
        "DISTRIB_TAINTS=''\n"
    )
    (root() / "etc").mkdir(parents=True, exist_ok=True)
    (root() / "etc" / "openwrt_release").write_text(text)


def read_release() -> dict[str, str]:
    out = {}
    for line in (root() / "etc" / "openwrt_release").read_text().splitlines():
        k, _, v = line.partition("=")
        out[k] = v.strip("'")
    return out


def request(what: dict[str, Any]) -> None:
    """Ask the test fixture to drop connections / reboot (it watches this file)."""
    ctl = root() / "control"
    ctl.mkdir(exist_ok=True)
    tmp = ctl / "request.json.tmp"
    tmp.write_text(json.dumps(what))
    os.replace(tmp, ctl / "request.json")
