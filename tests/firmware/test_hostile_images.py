"""Crafted images through `size-report --from` and `fit --image` as a user runs them (issue
32): a squashfs whose root lists itself, counts its tables cannot hold, libraries of sparse
or zero blocks, 150,000 chained fwtool trailers, gzip bombs as a malta rootfs. Each ends with
one `error:` line and exit 2; the oracles are the kernel's (the child's peak RSS by getrusage
under 512 MiB, its end within 10 s, which is the failure mode of a hang), the cache directory's
files before and after, and squashfs-tools' own view (unsquashfs refuses the loop, lists the
good image)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests import hostile_images as craft
from tests.conftest import need_tools
from tests.sqfs_kit import ath79_sysupgrade, uimage_kernel

AR300 = "glinet_gl-ar300m16"
SYSUPGRADE = f"openwrt-25.12.5-ath79-generic-{AR300}-squashfs-sysupgrade.bin"
LIMIT_KIB = 512 << 10  # peak RSS of a run
DEADLINE = 10.0  # seconds: a run still going then has hung


def files(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if not p.is_dir()} if d.exists() else set()


def invoke(tmp: Path, *args: str) -> tuple[int, str, int]:
    """Exit status, stderr and peak RSS (KiB) of one run with its own cache and store; one
    that outlives DEADLINE is killed and fails the test (craft.Hung)."""
    rc, _out, err, rss = craft.bounded_run(tmp, args, DEADLINE)
    return rc, err, rss


def refused(tmp: Path, *args: str) -> str:
    """The one error line of a run that must refuse its input, with the oracles checked."""
    before = files(tmp / "cache")
    rc, err, rss = invoke(tmp, *args)
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert rc == 2 and "Traceback" not in err and len(lines) == 1, err[-3000:]
    assert rss < LIMIT_KIB, f"peak RSS {rss} KiB"
    assert files(tmp / "cache") == before, "the run left files in the cache"
    return lines[0]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_tools("mkimage")
    return uimage_kernel(tmp_path_factory.mktemp("kernel") / "kernel.bin", 100_000)


def placed(tmp: Path, rootfs: Path, where: str, kernel: Path) -> Path:
    """The rootfs as size-report --from takes it: the file itself, inside a uImage
    sysupgrade image, as a directory's root.squashfs or its sysupgrade image."""
    if where == "squashfs":
        return rootfs
    if where == "sysupgrade":
        return ath79_sysupgrade(kernel, rootfs, tmp / SYSUPGRADE)
    d = tmp / "bin"
    d.mkdir()
    if where == "dir root.squashfs":
        shutil.copy(rootfs, d / "root.squashfs")
    else:
        ath79_sysupgrade(kernel, rootfs, d / SYSUPGRADE)
    return d


WHERE = ["squashfs", "sysupgrade", "dir root.squashfs", "dir sysupgrade"]


def test_the_crafted_loop_is_one_squashfs_tools_refuses(tmp_path: Path) -> None:
    need_tools("mksquashfs", "unsquashfs")
    good = craft.good(tmp_path)
    listed = subprocess.run(["unsquashfs", "-lls", str(good)], capture_output=True, text=True)
    assert f"squashfs-root/{craft.LIB}" in listed.stdout
    loop = craft.looping(tmp_path)
    theirs = subprocess.run(["unsquashfs", "-d", str(tmp_path / "out"), str(loop)],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "directory loop detected" in theirs.stderr


@pytest.mark.parametrize("count", [None, 2**32 - 1], ids=["own count", "2^32-1 inodes"])
@pytest.mark.parametrize("where", WHERE)
def test_a_root_that_lists_itself_is_refused(
    where: str, count: int | None, tmp_path: Path, kernel: Path
) -> None:
    need_tools("mksquashfs")
    src = placed(tmp_path, craft.looping(tmp_path, inode_count=count), where, kernel)
    line = refused(tmp_path, "size-report", "--from", str(src))
    assert ("the directory tree loops" if count is None else "claims 4,294,967,295 inodes") in line


def test_an_inode_count_the_table_cannot_hold_is_refused(tmp_path: Path, kernel: Path) -> None:
    need_tools("mksquashfs")
    src = placed(tmp_path, craft.inode_count(tmp_path, 2**32 - 1), "sysupgrade", kernel)
    assert "claims 4,294,967,295 inodes" in refused(tmp_path, "size-report", "--from", str(src))


@pytest.mark.parametrize("task", ["fit", "size-report"])
def test_150000_chained_fwtool_trailers_are_refused(
    task: str, tmp_path: Path, kernel: Path
) -> None:
    need_tools("mksquashfs")
    image = ath79_sysupgrade(kernel, craft.good(tmp_path), tmp_path / SYSUPGRADE)
    image.write_bytes(craft.fwtool_chain(image.read_bytes(), 150_000))
    assert image.stat().st_size > 2_400_000
    args = (
        ["fit", "--device", "gl-ar300m16", "--image"]
        if task == "fit"
        else ["size-report", "--from"]
    )
    line = refused(tmp_path, *args, str(image))
    assert "fwtool chunks at its end take more than 65,536 bytes" in line


def test_a_short_fwtool_chain_is_still_read(tmp_path: Path, kernel: Path) -> None:
    """Three chunks (what a re-signed image could carry): each CRC checked, none refused."""
    need_tools("mksquashfs")
    image = ath79_sysupgrade(kernel, craft.good(tmp_path), tmp_path / SYSUPGRADE)
    image.write_bytes(craft.fwtool_chain(image.read_bytes(), 3))
    rc, err, _rss = invoke(tmp_path, "fit", "--device", "gl-ar300m16", "--image", str(image))
    assert rc == 0 and "error:" not in err, err


@pytest.mark.parametrize("zeros", [False, True], ids=["sparse blocks", "zero blocks"])
@pytest.mark.parametrize("where", ["squashfs", "sysupgrade"])
def test_a_library_of_sparse_or_zero_blocks_is_refused(
    where: str, zeros: bool, tmp_path: Path, kernel: Path
) -> None:
    """384 MiB of sparse blocks (1,536 bytes of the inode table) or 64 MiB of zstd zero
    blocks, in an image of a few KB: read whole, then xz -9e, it took GBs and a minute."""
    need_tools("mksquashfs", "unsquashfs")
    claim = (64 if zeros else 384) << 20
    rootfs = craft.sparse_library(tmp_path, claim, zeros=zeros)
    assert rootfs.stat().st_size < 16_000
    listed = subprocess.run(["unsquashfs", "-lls", str(rootfs)], capture_output=True, text=True)
    assert f"{claim} " in listed.stdout  # squashfs-tools sees a library of that size
    line = refused(tmp_path, "size-report", "--from", str(placed(tmp_path, rootfs, where,
                                                                    kernel)))  # fmt: skip
    assert f"{craft.LIB} in" in line and f"claims {claim:,} bytes" in line


@pytest.mark.parametrize("claim", [300 << 20, 200 << 20], ids=["beyond a flash", "a bomb"])
@pytest.mark.parametrize("where", ["file", "malta dir"])
def test_a_gzip_bomb_rootfs_is_refused_and_leaves_nothing(
    where: str, claim: int, tmp_path: Path
) -> None:
    """A malta .img.gz whose squashfs claims 300 MiB (more than any flash) or 200 MiB (below
    it, but a gzip stream 1,000 times smaller): refused before anything, or once the stream
    passes 100 times its size; before, the whole claim was written into the cache and left."""
    need_tools("mksquashfs", "gzip")
    gz = tmp_path / "openwrt-malta-be-rootfs-squashfs.img.gz"
    if where == "malta dir":
        gz = tmp_path / "malta" / gz.name
        gz.parent.mkdir()
        (gz.parent / "openwrt-malta-be-vmlinux-initramfs.elf").write_bytes(b"\x7fELF" + bytes(64))
    craft.gzip_bomb(craft.good(tmp_path), gz, claim)
    assert gz.stat().st_size < claim // 500
    line = refused(tmp_path, "size-report", "--from", str(gz if where == "file" else gz.parent))
    assert ("more than any flash holds" if claim > 256 << 20 else "100 times its size") in line


def test_a_good_img_gz_leaves_only_its_measurement(tmp_path: Path) -> None:
    need_tools("mksquashfs", "gzip")
    gz = tmp_path / "openwrt-malta-be-rootfs-squashfs.img.gz"
    good = craft.good(tmp_path)
    gz.write_bytes(subprocess.run(["gzip", "-c", str(good)], capture_output=True,
                                  check=True).stdout)  # fmt: skip
    rc, err, _rss = invoke(tmp_path, "size-report", "--from", str(gz), "--format", "json")
    assert rc == 0, err
    left = files(tmp_path / "cache")
    assert all(p.startswith(("size-report/rootfs/", "size-report/xz9e/")) for p in left), left
