"""Splitting images back into kernel and rootfs: the bytes found must be the very pieces the
test assembled (tests/fitimages.py), and bad input gives one clear error line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.firmware.imageformats import split, squashfs_sb
from tests import fitimages as fi
from tests.conftest import need_tools


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_tools("mksquashfs", "unsquashfs", "mkimage", "xz", "dd")
    return tmp_path_factory.mktemp("imgfmt")


@pytest.fixture(scope="module")
def rootfs(work: Path) -> Path:
    return fi.squashfs(work, "rootfs", 150_000)


@pytest.fixture(scope="module")
def ath79(work: Path, rootfs: Path) -> tuple[Path, Path, int]:
    kernel = fi.uimage(work, 700_000)
    image = fi.ath79_image(work, kernel, rootfs)
    meta = fi.append_metadata(image, {"supported_devices": ["glinet,gl-ar300m16"]})
    return image, kernel, meta


def _piece(image: Path, offset: int, size: int) -> bytes:
    return image.read_bytes()[offset : offset + size]


def test_ath79_sysupgrade(ath79: tuple[Path, Path, int], rootfs: Path) -> None:
    image, kernel, meta = ath79
    sp = split(image)
    assert sp.format == "uimage+squashfs"
    assert _piece(image, sp.kernel_offset, sp.kernel_size) == kernel.read_bytes()
    assert sp.rootfs_offset == -(-kernel.stat().st_size // 65536) * 65536  # after pad-to 64k
    assert sp.rootfs_size == fi.unsquashfs_bytes(rootfs)
    assert _piece(image, sp.rootfs_offset, sp.rootfs_size) == rootfs.read_bytes()
    assert sp.metadata_size == meta
    assert sp.fields["metadata"] == {"supported_devices": ["glinet,gl-ar300m16"]}
    assert sp.fields["uimage"]["name"] == "MIPS OpenWrt Linux-6.12.94"
    assert sp.fields["uimage"]["compression"] == "lzma"
    assert sp.fields["rootfs_alignment"] % 65536 == 0
    assert sp.fields["pad_to_fill"] == sp.rootfs_offset - kernel.stat().st_size
    end = image.stat().st_size - meta
    assert sp.fields["jffs2_markers"] == [end - 4]
    assert sp.fields["unparsed_tail"] == 0


def test_signed_image_has_both_chunks(work: Path, rootfs: Path) -> None:
    kernel = fi.uimage(work, 100_000)
    image = fi.ath79_image(work, kernel, rootfs, "signed")
    meta = fi.append_metadata(image, {"version": {"dist": "OpenWrt"}})
    sig = fi.append_signature(image, os.urandom(200))
    sp = split(image)
    assert sp.metadata_size == meta + sig
    assert sp.fields["signed"] is True
    assert sp.fields["metadata"] == {"version": {"dist": "OpenWrt"}}


def test_image_without_metadata(work: Path, rootfs: Path) -> None:
    kernel = fi.uimage(work, 100_000)
    image = fi.ath79_image(work, kernel, rootfs, "nometa")
    sp = split(image)
    assert sp.metadata_size is None
    assert sp.rootfs_size == rootfs.stat().st_size


def test_safeloader_sysupgrade(work: Path, rootfs: Path) -> None:
    kernel = fi.tplink_v1_kernel(work, 1_234_567)
    image, _ = fi.safeloader_sysupgrade(work, kernel, rootfs)
    assert image is not None
    fi.append_metadata(image, {"supported_devices": ["tplink,tl-wr902ac-v1"]})
    sp = split(image)
    assert sp.format == "tplink-safeloader"
    assert (sp.kernel_offset, sp.kernel_size) == (0, 1_234_567)
    assert _piece(image, 0, sp.kernel_size) == kernel.read_bytes()
    assert _piece(image, sp.rootfs_offset, sp.rootfs_size) == rootfs.read_bytes()
    assert sp.fields["tplink"]["header"] == "v1"
    assert sp.fields["tplink"]["kernel_len"] == 1_234_567 - 512
    # the marker sits where the absolute flash address (0x20000 + offset) is 64 KiB aligned
    (mark,) = sp.fields["jffs2_markers"]
    assert (0x20000 + mark) % 0x10000 == 0


def test_tplink_v2_sysupgrade(work: Path) -> None:
    rootfs = fi.squashfs(work, "v2root", 90_000, block_k=1024)
    kernel = os.urandom(333_333)
    image = fi.tplink_v2_image(work, kernel, rootfs.read_bytes())
    sp = split(image)
    assert sp.format == "tplink-v2"
    assert (sp.kernel_offset, sp.kernel_size) == (512, len(kernel))
    assert sp.rootfs_offset == -(-(512 + len(kernel)) // 4) * 4
    assert _piece(image, sp.rootfs_offset, sp.rootfs_size) == rootfs.read_bytes()
    assert sp.fields["tplink"]["hw_id"] == "0x000dc88f"
    assert sp.fields["tplink"]["fw_version"] == "ver. 2.0"
    assert sp.fields["squashfs"]["block_size"] == 1024 * 1024
    marks = sp.fields["jffs2_markers"]
    assert [m % 4096 for m in marks][:1] == [0] and marks[-1] % 65536 == 0


def test_safeloader_factory(work: Path, rootfs: Path) -> None:
    kernel = fi.tplink_v1_kernel(work, 600_000).read_bytes()
    image = fi.safeloader_factory(work, kernel, rootfs.read_bytes())
    sp = split(image)
    assert sp.format == "tplink-safeloader-factory"
    assert _piece(image, sp.kernel_offset, sp.kernel_size) == kernel
    assert _piece(image, sp.rootfs_offset, sp.rootfs_size) == rootfs.read_bytes()
    assert set(sp.fields["partitions"]) >= {"partition-table", "os-image", "file-system"}


def test_superblock_matches_unsquashfs(rootfs: Path) -> None:
    sb = squashfs_sb.parse(rootfs.read_bytes())
    assert sb.bytes_used == fi.unsquashfs_bytes(rootfs)
    assert (sb.compressor, sb.block_size, sb.version) == ("xz", 256 * 1024, (4, 0))


# --- bad input: one line each --------------------------------------------------------------


def _one_line_error(path: Path, match: str) -> None:
    with pytest.raises(WolfError, match=match) as e:
        split(path)
    assert "\n" not in str(e.value)


def test_truncated_image(work: Path, ath79: tuple[Path, Path, int]) -> None:
    image, kernel, _ = ath79
    data = image.read_bytes()
    cut = work / "cut-rootfs.bin"
    sp = split(image)
    cut.write_bytes(data[: sp.rootfs_offset + sp.rootfs_size - 1000])  # inside the rootfs
    _one_line_error(cut, "squashfs is truncated")
    cut.write_bytes(data[: sp.rootfs_offset + sp.rootfs_size + 10])  # inside the padding
    _one_line_error(cut, "no JFFS2 end marker")
    cut.write_bytes(data[: kernel.stat().st_size // 2])
    _one_line_error(cut, "uImage kernel is truncated")


def test_corrupt_image(work: Path, ath79: tuple[Path, Path, int]) -> None:
    image, _, meta = ath79
    data = bytearray(image.read_bytes())
    bad = work / "corrupt.bin"
    kflip = bytearray(data)
    kflip[1000] ^= 0xFF  # inside the kernel (the metadata CRC is then wrong too)
    bad.write_bytes(bytes(kflip))
    _one_line_error(bad, "CRC mismatch")
    mflip = bytearray(data)
    mflip[len(data) - meta + 12] ^= 0x01  # inside the metadata JSON
    bad.write_bytes(bytes(mflip))
    _one_line_error(bad, "metadata trailer CRC mismatch")


def test_corrupt_squashfs_superblock(work: Path, rootfs: Path) -> None:
    kernel = fi.uimage(work, 50_000)
    sq = bytearray(rootfs.read_bytes())
    sq[12:16] = (12345).to_bytes(4, "little")  # block_size no longer 1 << block_log
    broken = work / "broken.squashfs"
    broken.write_bytes(bytes(sq))
    image = fi.ath79_image(work, kernel, broken, "broken-sb")
    _one_line_error(image, "corrupt squashfs superblock")


def test_unknown_format_and_bare_squashfs(work: Path, rootfs: Path) -> None:
    junk = work / "random.bin"
    junk.write_bytes(os.urandom(100_000))
    _one_line_error(junk, "unknown image format")
    _one_line_error(rootfs, "bare squashfs")
    tiny = work / "tiny.bin"
    tiny.write_bytes(b"x" * 10)
    _one_line_error(tiny, "too short")
    _one_line_error(work / "absent.bin", "does not exist")


def test_non_squashfs_rootfs_in_image(work: Path) -> None:
    kernel = fi.uimage(work, 80_000)
    ext = work / "rootfs.ext4"
    ext.write_bytes(os.urandom(70_000))
    image = fi.ath79_image(work, kernel, ext, "ext4")
    _one_line_error(image, "no squashfs rootfs after the uImage kernel")


def test_tplink_v1_full_image(work: Path, rootfs: Path) -> None:
    kernel = os.urandom(222_222)
    image = fi.tplink_v1_image(work, kernel, rootfs.read_bytes())
    sp = split(image)
    assert sp.format == "tplink-v1"
    assert (sp.kernel_offset, sp.kernel_size) == (512, len(kernel))
    assert sp.rootfs_offset == 0x40000  # 512 + 222,222 aligned to 64 KiB
    assert _piece(image, sp.rootfs_offset, sp.rootfs_size) == rootfs.read_bytes()
    assert sp.fields["tplink"]["hw_id"] == "0x09020001"
    broken = bytearray(image.read_bytes())
    broken[600] ^= 0xFF
    bad = work / "v1-bad.bin"
    bad.write_bytes(bytes(broken))
    _one_line_error(bad, "MD5 mismatch")
