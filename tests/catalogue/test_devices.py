"""Device catalogue: facts checked against OpenWrt's own numbers (openwrt-facts.md)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from pathlib import Path

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


def _device_var(image_dir: Path, device: str, var: str) -> str:
    """A Device/<name>'s ``VAR := value`` in target/linux/<target>/image/ (Makefile, *.mk),
    through the templates it expands first ($(Device/<template>) lines), as image.mk does."""
    for mk in [image_dir / "Makefile", *sorted(image_dir.glob("*.mk"))]:
        m = re.search(rf"^define Device/{re.escape(device)}\n(.*?)^endef", mk.read_text(),
                      re.M | re.S)  # fmt: skip
        if m is None:
            continue
        own = re.search(rf"^\s*{var}\s*:=\s*(\S+)\s*$", m.group(1), re.M)
        if own:
            return own.group(1)
        for template in re.findall(r"^\s*\$\(Device/([\w.-]+)\)\s*$", m.group(1), re.M):
            with contextlib.suppress(LookupError):
                return _device_var(image_dir, template, var)
    raise LookupError(f"{var} of Device/{device}")


def _squashfs_block(tree: Path, target: str, subtarget: str) -> int:
    """config/Config-images.in's TARGET_SQUASHFS_BLOCK_SIZE default (KiB) for the subtarget's
    FEATURES: 1024 with small_flash, else 256 (64 with low_mem)."""
    base = tree / "target" / "linux" / target
    features = " ".join(
        m.group(1)
        for f in (base / "Makefile", base / subtarget / "target.mk") if f.is_file()
        for m in re.finditer(r"^FEATURES\s*\+?:?=(.*)$", f.read_text(), re.M)
    ).split()  # fmt: skip
    kib = 64 if "low_mem" in features else 1024 if "small_flash" in features else 256
    return kib * 1024


@pytest.mark.parametrize(
    ("profile", "recipe"),
    [
        ("glinet_gl-ar300m16", "ath79-default"),
        ("tplink_tl-wr902ac-v1", "tplink-safeloader"),
        ("tplink_tl-wr902ac-v3", "tplink-v2"),
    ],
)
def test_catalogue_facts(profile: str, recipe: str, openwrt_tree_25125: Path) -> None:
    """IMAGE_SIZE, BLOCKSIZE and the squashfs block size as the v25.12.5 tree defines them."""
    d = devices.resolve(profile, "25.12.5")
    image_dir = openwrt_tree_25125 / "target" / "linux" / d.target / "image"
    assert d.image_size == parse_size(_device_var(image_dir, profile, "IMAGE_SIZE"))
    assert d.blocksize == parse_size(_device_var(image_dir, "Default", "BLOCKSIZE"))
    assert d.squashfs_block == _squashfs_block(openwrt_tree_25125, d.target, d.subtarget)
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


def test_disk_image_entries_are_checked_whole() -> None:
    """A partitioned recipe needs its root partition's size in MiB; a size that is no whole
    number of MiB, and a buildroot_config that is no table of strings, are one clear error."""
    from openwrt_wolf.catalogue.devices import device_from_dict
    from openwrt_wolf.errors import WolfError

    base = {"profile": "rpi-5", "release": "25.12.5", "target": "bcm27xx",
            "subtarget": "bcm2712", "arch_packages": "aarch64_cortex-a76",
            "recipe": "rpi-sdcard", "squashfs_block": "256k"}  # fmt: skip
    assert device_from_dict({**base, "rootfs_partsize": 104}).partitioned
    bad = [
        ({}, "needs rootfs_partsize"),
        ({"rootfs_partsize": "104M"}, "rootfs_partsize is not a size in MiB"),
        ({"rootfs_partsize": 0}, "rootfs_partsize is not a size in MiB"),
        ({"rootfs_partsize": True}, "rootfs_partsize is not a size in MiB"),
        ({"rootfs_partsize": 104, "kernel_partsize": -1}, "kernel_partsize is not a size"),
        ({"rootfs_partsize": 104, "buildroot_config": ["X"]}, "buildroot_config is not a table"),
        ({"rootfs_partsize": 104, "buildroot_config": {"X": 1}}, "buildroot_config is not a"),
    ]
    for extra, want in bad:
        with pytest.raises(WolfError, match=want):
            device_from_dict({**base, **extra})
    # the flash recipes ignore the partition fields' absence
    flash = {**base, "recipe": "ath79-default", "image_size": "16000k", "blocksize": "64k"}
    assert not device_from_dict(flash).partitioned


def test_armsr_and_pi5_resolve_by_their_names() -> None:
    assert devices.resolve("armsr-armv8").target_path == "armsr/armv8"
    assert devices.resolve("generic").target_path == "armsr/armv8"
    assert devices.resolve("pi5").profile == "rpi-5"
    assert devices.resolve("rpi-5").buildroot_config == ()
    assert devices.resolve("armsr").buildroot_config == (
        ("PACKAGE_u-boot-qemu_armv8", "n"),
        ("TARGET_ROOTFS_INITRAMFS", "y"),
    )
