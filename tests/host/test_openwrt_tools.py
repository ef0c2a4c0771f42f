"""OpenWrt's host image tools built from the upstream sources (openwrt_wolf.host.openwrt_tools).

Oracles: Debian's own squashfs-tools (its unsquashfs reads what mksquashfs4 wrote; its
mksquashfs 4.5 rejects the xz options mksquashfs4 takes), firmware-utils' CMakeLists.txt for
the list of tools, and the facts of openwrt-facts.md for padjffs2's padding and marker and for
tplink-safeloader's overflow message."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from openwrt_wolf import proc
from openwrt_wolf.host import openwrt_tools as ot
from openwrt_wolf.host import upstream
from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parents[2]
XZ_OPTIONS = ["-comp", "xz", "-Xpreset", "9", "-Xe", "-Xlc", "0", "-Xlp", "2", "-Xpb", "2"]


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "usr/lib").mkdir(parents=True)
    (root / "usr/lib/libx.so").write_bytes(bytes(range(256)) * 2000)
    (root / "etc").mkdir()
    (root / "etc/banner").write_text("OpenWrt\n" * 100)
    return root


def test_mksquashfs4_takes_openwrts_xz_options(openwrt_tools: OpenWrtTools, tmp_path: Path) -> None:
    need_tools("mksquashfs", "unsquashfs")
    root = _root(tmp_path)
    # Debian's mksquashfs 4.5 refuses OpenWrt's xz tuning: XZ_EXTENDED_OPTIONS is what adds it
    deb = subprocess.run(["mksquashfs", root, tmp_path / "deb.sqfs", "-noappend", *XZ_OPTIONS],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert deb.returncode != 0
    version = subprocess.run([openwrt_tools.mksquashfs4, "-version"], capture_output=True,
                             text=True, timeout=60).stdout  # fmt: skip
    assert version.startswith("mksquashfs version 4.7.4")
    out = tmp_path / "root.squashfs"
    subprocess.run(
        [openwrt_tools.mksquashfs4, root, out, "-nopad", "-noappend", "-root-owned", *XZ_OPTIONS,
         "-b", "256k", "-p", "/dev d 755 0 0", "-p", "/dev/console c 600 0 0 5 1", "-no-xattrs",
         "-block-readers", "4", "-small-readers", "4", "-quiet", "-no-progress"],
        check=True, timeout=120,
    )  # fmt: skip
    info = subprocess.run(["unsquashfs", "-s", out], capture_output=True, text=True,
                          check=True, timeout=60).stdout  # fmt: skip
    assert "Compression xz" in info and "Block size 262144" in info
    subprocess.run(["unsquashfs", "-d", tmp_path / "x", out], capture_output=True, check=True,
                   timeout=60)  # fmt: skip
    for rel in ("usr/lib/libx.so", "etc/banner"):
        assert (tmp_path / "x" / rel).read_bytes() == (root / rel).read_bytes()
    assert (tmp_path / "x/dev/console").is_char_device() or (tmp_path / "x/dev").is_dir()


def test_unsquashfs4_reads_debians_squashfs(openwrt_tools: OpenWrtTools, tmp_path: Path) -> None:
    need_tools("mksquashfs")
    root = _root(tmp_path)
    img = tmp_path / "deb.sqfs"
    subprocess.run(["mksquashfs", root, img, "-noappend", "-comp", "xz", "-quiet"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    listing = subprocess.run([openwrt_tools.unsquashfs4, "-l", img], capture_output=True,
                             text=True, check=True, timeout=60).stdout  # fmt: skip
    assert "squashfs-root/usr/lib/libx.so" in listing


def test_padjffs2_pads_to_the_erase_block_and_marks_the_end(
    openwrt_tools: OpenWrtTools, tmp_path: Path
) -> None:
    img = tmp_path / "image"
    img.write_bytes(b"\x01" * 100_000)
    subprocess.run([openwrt_tools.padjffs2, img, "64"], check=True, capture_output=True,
                   timeout=60)  # fmt: skip
    data = img.read_bytes()
    # openwrt-facts.md: 0xff to the next multiple of BLOCKSIZE, then de ad c0 de
    assert len(data) == 2 * 65536 + 4
    assert data[100_000 : 2 * 65536] == b"\xff" * (2 * 65536 - 100_000)
    assert data[-4:] == bytes.fromhex("deadc0de")


def test_tplink_safeloader_refuses_a_too_big_rootfs(
    openwrt_tools: OpenWrtTools, tmp_path: Path
) -> None:
    kernel, rootfs = tmp_path / "kernel", tmp_path / "rootfs"
    kernel.write_bytes(b"\x5d" * 1_500_000)
    rootfs.write_bytes(b"hsqs" + b"\x00" * 6_000_000)
    p = subprocess.run(
        [openwrt_tools.tplink_safeloader, "-B", "TL-WR902AC-V1", "-V", "r1", "-k", kernel,
         "-r", rootfs, "-o", tmp_path / "out", "-j", "-S"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode != 0
    assert re.search(r"file-system partition too big \(more than \d+ bytes\)", p.stderr)
    assert not (tmp_path / "out").exists() or (tmp_path / "out").stat().st_size == 0


def test_every_firmware_utils_tool_is_built(openwrt_tools: OpenWrtTools) -> None:
    # the list comes from firmware-utils' own CMakeLists.txt, not from our build
    text = (upstream.source_dir("firmware-utils") / "CMakeLists.txt").read_text()
    listed = set(re.findall(r"^\s*FW_UTIL\((\S+)", text, re.M))
    assert {"tplink-safeloader", "mktplinkfw", "mktplinkfw2", "ptgen", "otrx"} <= listed
    have = set(openwrt_tools.names())
    assert listed <= have, sorted(listed - have)
    assert {"mksquashfs4", "unsquashfs4", "padjffs2", "fwtool"} <= have


def test_second_use_is_served_from_the_cache(openwrt_tools: OpenWrtTools) -> None:
    with proc.recording() as commands:
        again = ot.ensure()
    assert commands == []  # nothing built or run
    assert again.bin_dir == openwrt_tools.bin_dir


def test_openwrt_tools_task_lists_the_tools(openwrt_tools: OpenWrtTools) -> None:
    p = subprocess.run([sys.executable, "-m", "invoke", "openwrt-tools"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert str(openwrt_tools.mksquashfs4) in p.stdout
    assert str(openwrt_tools.tplink_safeloader) in p.stdout
