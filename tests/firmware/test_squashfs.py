"""The squashfs reader against squashfs-tools: listings vs unsquashfs -lls, sizes vs
unsquashfs -s, file bytes vs the files the image was made from."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from openwrt_wolf.errors import WolfError
from openwrt_wolf.firmware.squashfs import SquashFS, superblock
from tests.conftest import need_tools
from tests.sqfs_kit import OPENWRT_PSEUDO, make_tree, mksquashfs, unsquashfs_lls, unsquashfs_size


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_tree(tmp_path_factory.mktemp("sq") / "root", "openssl", seed=3)
    # a sparse file, an empty file, an empty dir and a file bigger than one 256k block
    (root / "sparse").write_bytes(bytes(600_000) + b"tail")
    (root / "empty").write_bytes(b"")
    (root / "emptydir").mkdir()
    # a directory whose listing spans metadata blocks (extended inode with an index)
    many = root / "usr/share/many"
    many.mkdir(parents=True)
    for i in range(400):
        (many / f"a-rather-long-file-name-for-the-listing-{i:04d}.conf").write_text(f"{i}\n" * i)
    os.link(root / "usr/lib/libssl.so.3", root / "usr/lib/libssl-hardlink.so.3")
    return root


@pytest.mark.parametrize("comp", ["xz", "gzip", "zstd"])
def test_listing_sizes_and_bytes_match_squashfs_tools(
    tree: Path, tmp_path: Path, comp: str
) -> None:
    need_tools("mksquashfs", "unsquashfs")
    image = mksquashfs(tree, tmp_path / f"root.{comp}", comp=comp, extra=OPENWRT_PSEUDO)
    oracle = unsquashfs_lls(image)
    with SquashFS(image) as fs:
        assert fs.superblock.bytes_used == unsquashfs_size(image)
        assert fs.superblock.compressor == comp
        ours = {e.path: e for e in fs.entries()}
        assert set(ours) == set(oracle)
        for path, (kind, size, target) in oracle.items():
            e = ours[path]
            if kind == "-":
                assert e.is_file and e.size == size
                assert fs.read(e) == (tree / path.lstrip("/")).read_bytes(), path
            elif kind == "l":
                assert stat.S_ISLNK(e.mode) and e.link_target == target
            elif kind == "d":
                assert e.is_dir
            elif kind == "c":
                assert stat.S_ISCHR(e.mode) and e.path == "/dev/console"


def test_rootfs_inside_a_bigger_file_is_read_at_its_offset(tree: Path, tmp_path: Path) -> None:
    need_tools("mksquashfs", "unsquashfs")
    image = mksquashfs(tree, tmp_path / "root.sqfs")
    firmware = tmp_path / "firmware.bin"
    firmware.write_bytes(b"\x27\x05\x19\x56" + bytes(65532) + image.read_bytes() + b"\xff" * 999)
    with SquashFS(firmware, offset=65536) as fs:
        assert fs.superblock.bytes_used == unsquashfs_size(image)
        assert fs.read("/usr/lib/libssl.so.3") == (tree / "usr/lib/libssl.so.3").read_bytes()


def test_truncated_squashfs_is_one_clear_error(tree: Path, tmp_path: Path) -> None:
    need_tools("mksquashfs")
    image = mksquashfs(tree, tmp_path / "root.sqfs")
    cut = tmp_path / "cut.sqfs"
    cut.write_bytes(image.read_bytes()[: image.stat().st_size // 2])
    with pytest.raises(WolfError, match=r"cut\.sqfs: squashfs is truncated: it needs \d+ bytes"):
        superblock(cut)


def test_corrupt_inode_table_is_one_clear_error(tree: Path, tmp_path: Path) -> None:
    need_tools("mksquashfs")
    image = mksquashfs(tree, tmp_path / "root.sqfs")
    data = bytearray(image.read_bytes())
    start = superblock(image).inode_table
    data[start + 2 : start + 66] = bytes(range(64))  # garbage where xz data should be
    bad = tmp_path / "bad.sqfs"
    bad.write_bytes(bytes(data))
    with SquashFS(bad) as fs, pytest.raises(WolfError, match="corrupt or truncated squashfs"):
        fs.entries()


def test_non_squashfs_rootfs_is_one_clear_error(tmp_path: Path) -> None:
    f = tmp_path / "root.squashfs"
    f.write_bytes(b"UBI#" + bytes(200))
    with pytest.raises(WolfError, match=r"root\.squashfs: no squashfs at offset 0x0"):
        superblock(f)


def test_unsupported_compressor_is_one_clear_error(tmp_path: Path) -> None:
    need_tools("mksquashfs")
    (tmp_path / "root").mkdir()
    (tmp_path / "root/a").write_text("a")
    image = mksquashfs(tmp_path / "root", tmp_path / "lz4.sqfs", comp="lz4")
    with pytest.raises(WolfError, match="squashfs compressor lz4 is not supported"):
        superblock(image)


def test_each_fragment_block_is_decompressed_once(tree: Path, tmp_path: Path) -> None:
    """Reading every file decompresses each fragment block once, not once per file whose
    tail it holds (the size report read a rootfs's package lists so: 20 s of xz for 9
    images). Oracles: unsquashfs -s's fragment count, the files' own bytes."""
    import re
    import subprocess

    need_tools("mksquashfs", "unsquashfs")
    image = mksquashfs(tree, tmp_path / "root.xz", extra=OPENWRT_PSEUDO)
    out = subprocess.run(["unsquashfs", "-s", str(image)], capture_output=True, text=True,
                         check=True, timeout=60).stdout  # fmt: skip
    m = re.search(r"Number of fragments (\d+)", out)
    assert m, out
    with SquashFS(image) as fs:
        files = [e for e in fs.files() if e.size]
        blocks = sum(1 for e in files for w in e.block_sizes if w & ~(1 << 24))
        calls = []
        real = fs._decompress
        fs._decompress = lambda raw, size: calls.append(1) or real(raw, size)  # type: ignore[method-assign]
        for e in files:
            assert fs.read(e) == (tree / e.path.lstrip("/")).read_bytes(), e.path
    assert len(files) > 400 and len(calls) <= blocks + int(m.group(1))
