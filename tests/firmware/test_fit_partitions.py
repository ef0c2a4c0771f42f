"""The partition fit (SD card and EFI disk images: the Raspberry Pi 5, armsr/armv8) against the
v25.12.5 tree's own image scripts, run with OpenWrt's ptgen built from the pinned
firmware-utils: gen_rpi_sdcard_img.sh and gen_image_generic.sh write the disk image, and the
partition table they wrote (read here from the MBR or the GPT, not by the code under test) and
the file's size are the oracle; the model only predicts them. Neither script compares the rootfs
with its partition, which is why the model must."""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.catalogue import devices
from openwrt_wolf.firmware import fit
from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from tests.conftest import need_tools

SECTOR = 512
MIB = 1 << 20
SIGNATURE = "5452574f"  # any IMG_PART_SIGNATURE


def _mbr_partitions(disk: Path) -> list[tuple[int, int, int]]:
    """(type, start byte, length in bytes) of each used MBR entry."""
    with disk.open("rb") as f:
        mbr = f.read(SECTOR)
    assert mbr[510:512] == b"\x55\xaa", "no MBR signature"
    out = []
    for i in range(4):
        e = mbr[446 + 16 * i : 462 + 16 * i]
        lba, n = struct.unpack("<II", e[8:16])
        if e[4]:
            out.append((e[4], lba * SECTOR, n * SECTOR))
    return out


def _gpt_partitions(disk: Path) -> list[tuple[int, int]]:
    """(start byte, length in bytes) of each used GPT entry (UEFI spec: header at LBA 1)."""
    with disk.open("rb") as f:
        f.seek(SECTOR)
        hdr = f.read(92)
        assert hdr[:8] == b"EFI PART", "no GPT header"
        entries_lba, count, size = struct.unpack("<QII", hdr[72:88])
        f.seek(entries_lba * SECTOR)
        table = f.read(count * size)
    out = []
    for i in range(count):
        e = table[i * size : (i + 1) * size]
        if e[:16] != bytes(16):
            first, last = struct.unpack("<QQ", e[32:48])
            out.append((first * SECTOR, (last - first + 1) * SECTOR))
    return out


def _sparse(path: Path, size: int) -> Path:
    """A rootfs of ``size`` bytes: a marker at each end (so a cut is visible), holes between."""
    with path.open("wb") as f:
        f.write(b"hsqs")
        f.truncate(size)
        f.seek(size - 4)
        f.write(b"END!")
    return path


def _script_env(tools: OpenWrtTools) -> dict[str, str]:
    return {**os.environ, "PATH": f"{tools.tool('ptgen').parent}:{os.environ['PATH']}",
            "SIGNATURE": SIGNATURE}  # fmt: skip


@pytest.mark.parametrize("over", [-MIB, -SECTOR, 0, 1, SECTOR + 1, 3 * MIB])
def test_rpi5_root_partition_against_gen_rpi_sdcard_img(
    openwrt_tree_25125: Path, openwrt_tools: OpenWrtTools, tmp_path: Path, over: int
) -> None:
    need_tools("dd", "wc")
    dev = devices.resolve("rpi-5")
    assert dev.kernel_partsize and dev.rootfs_partsize
    rootfs_size = dev.rootfs_partsize * MIB + over
    boot = tmp_path / "boot.vfat"
    boot.write_bytes(
        b"\xeb\x3c\x90" + bytes(8189)
    )  # the FAT image's place; its content is not read
    rootfs = _sparse(tmp_path / "root.squashfs", rootfs_size)
    disk = tmp_path / "sdcard.img"
    script = openwrt_tree_25125 / fit.PARTITION_SCRIPTS["rpi-sdcard"]
    # as Build/sdcard-img runs it: <file> <bootfs> <rootfs> KERNEL_PARTSIZE ROOTFS_PARTSIZE
    run = subprocess.run(
        ["sh", str(script), str(disk), str(boot), str(rootfs), str(dev.kernel_partsize),
         str(dev.rootfs_partsize)],
        env=_script_env(openwrt_tools), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    # OpenWrt checks nothing: the image is written whatever the rootfs's size
    assert run.returncode == 0, run.stderr[-2000:]
    parts = _mbr_partitions(disk)
    assert [p[0] for p in parts] == [0x0C, 0x83]  # FAT32 LBA boot, Linux root
    (_, boot_at, boot_len), (_, root_at, root_len) = parts
    assert boot_len == dev.kernel_partsize * MIB and boot_at + boot_len <= root_at
    with disk.open("rb") as f:
        f.seek(root_at)
        assert f.read(4) == b"hsqs"
        f.seek(root_at + rootfs_size - 4)
        assert f.read(4) == b"END!"  # the rootfs whole in the file, wherever it ends
    past_end = (root_at + rootfs_size) - (root_at + root_len)
    assert (disk.stat().st_size > root_at + root_len) == (past_end > 0)

    rep = fit.evaluate(dev, kernel_size=4_000_000, rootfs_size=rootfs_size)
    assert rep.limit == root_len
    assert rep.margin == rep.rootfs_room == root_len - rootfs_size
    assert rep.verdict == ("TOO_BIG" if past_end > 0 else "FITS")
    if past_end > 0:
        assert any(f"{past_end:,} bytes past the end" in n for n in rep.notes), rep.notes
    else:
        assert rep.notes == ()


@pytest.mark.parametrize("over", [-SECTOR, 0, 1, SECTOR + 1])
def test_armsr_root_partition_against_gen_image_generic(
    openwrt_tree_25125: Path, openwrt_tools: OpenWrtTools, tmp_path: Path, over: int
) -> None:
    """Build/combined efi as armsr runs it: GPT (GUID), FAT boot partition, PADDING=1, 256 KiB
    alignment."""
    need_tools("dd", "mkfs.fat", "mcopy", "mmd")
    dev = devices.resolve("armsr-armv8")
    assert dev.kernel_partsize and dev.rootfs_partsize
    rootfs_size = dev.rootfs_partsize * MIB + over
    kdir = tmp_path / "boot"
    (kdir / "efi" / "openwrt").mkdir(parents=True)
    (kdir / "efi" / "openwrt" / "Image").write_bytes(b"ARMd" * 4096)
    rootfs = _sparse(tmp_path / "root.squashfs", rootfs_size)
    disk = tmp_path / "combined-efi.img"
    script = openwrt_tree_25125 / fit.PARTITION_SCRIPTS["efi-combined"]
    env = {**_script_env(openwrt_tools), "KERNELPARTTYPE": "ef", "FAT_TYPE": "32", "PADDING": "1",
           "GUID": "a1b2c3d4-0000-4000-8000-5452574f0000"}  # fmt: skip
    run = subprocess.run(
        ["sh", str(script), str(disk), str(dev.kernel_partsize), str(kdir),
         str(dev.rootfs_partsize), str(rootfs), "256"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    # entries 1 and 2 (the kernel's root=PARTUUID=...02); ptgen adds a BIOS boot one after them
    (boot_at, boot_len), (root_at, root_len) = _gpt_partitions(disk)[:2]
    assert boot_len == dev.kernel_partsize * MIB and boot_at + boot_len <= root_at
    with disk.open("rb") as f:
        f.seek(root_at + rootfs_size - 4)
        kept = f.read(4) == b"END!"
    # the script writes the whole rootfs, then (GUID, PADDING) zeroes the 63 sectors after the
    # root partition: a rootfs longer than its partition loses its end in the image
    rep = fit.evaluate(dev, kernel_size=16384, rootfs_size=rootfs_size)
    assert rep.limit == root_len
    assert rep.margin == rep.rootfs_room == root_len - rootfs_size
    assert rep.verdict == ("FITS" if kept else "TOO_BIG")
    if not kept:
        assert any("zeroes" in n and f"{rootfs_size - root_len:,} bytes past" in n
                   for n in rep.notes), rep.notes  # fmt: skip
