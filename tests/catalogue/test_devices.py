"""Device catalogue: facts checked against OpenWrt's own numbers (openwrt-facts.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from openwrt_wolf.catalogue import devices
from openwrt_wolf.errors import WolfError
from openwrt_wolf.units import parse_size


def test_units_follow_openwrt_exp_units() -> None:
    assert parse_size("7360k") == 7360 * 1024 == 0x730000
    assert parse_size("16000k") == 0xFA0000
    assert parse_size("64k") == 65536
    assert parse_size("0x710000") == 7405568
    with pytest.raises(WolfError):
        parse_size("seven megs")


def test_short_name_resolves_to_the_ath79_wr902ac() -> None:
    d = devices.resolve("tl-wr902ac")
    assert d.profile == "tplink_tl-wr902ac-v1"
    assert (d.target, d.subtarget, d.arch_packages) == ("ath79", "generic", "mips_24kc")
    # The DTS firmware partition (0x730000) is exactly IMAGE_SIZE 7360k.
    assert d.firmware_partition is not None
    assert d.firmware_partition.size == d.image_size == 7_536_640


@pytest.mark.parametrize(
    ("profile", "image_size", "squashfs_block", "recipe"),
    [
        ("glinet_gl-ar300m16", 16_384_000, 262_144, "ath79-default"),
        ("tplink_tl-wr902ac-v1", 7_536_640, 262_144, "tplink-safeloader"),
        ("tplink_tl-wr902ac-v3", 7_995_392, 1_048_576, "tplink-v2"),
    ],
)
def test_catalogue_facts(profile: str, image_size: int, squashfs_block: int, recipe: str) -> None:
    d = devices.resolve(profile, "25.12.5")
    assert d.image_size == image_size
    assert d.blocksize == 65536
    assert d.squashfs_block == squashfs_block
    assert d.recipe == recipe


def test_malta_both_endians_present() -> None:
    arches = {devices.resolve(n).arch_packages for n in ("malta-be", "malta-le")}
    assert arches == {"mips_24kc", "mipsel_24kc"}


def test_unknown_device_lists_close_matches() -> None:
    with pytest.raises(WolfError) as e:
        devices.resolve("tl-wr902")
    assert "unknown device 'tl-wr902'" in str(e.value)
    assert "tl-wr902ac" in str(e.value)


def test_cli_unknown_device_is_one_line_and_nonzero() -> None:
    # Through the real CLI entry: one line on stderr, exit status 2, no traceback.
    p = subprocess.run(
        [sys.executable, "-m", "invoke", "devices", "--release", "99.1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "error: unknown release '99.1' (known releases: 25.12.5, 24.10.8, snapshot)"
    ]
