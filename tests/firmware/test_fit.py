"""The fit model against images assembled here with real tools (mksquashfs, mkimage, dd,
bash running check-size) and OpenWrt's steps written from their sources (tests/fitimages.py);
sizes are read back with stat, `unsquashfs -s` and `mkimage -l`."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from openwrt_wolf.catalogue import devices
from openwrt_wolf.errors import WolfError
from openwrt_wolf.firmware import fit
from openwrt_wolf.results.fit_report import FitReport
from tests import fitimages as fi
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parents[2]
BLOCK = 65536


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need_tools("mksquashfs", "unsquashfs", "mkimage", "xz", "dd", "bash")
    return tmp_path_factory.mktemp("fit")


@pytest.fixture(scope="module")
def rootfs(work: Path) -> Path:
    return fi.squashfs(work, "rootfs", 300_000)


def test_ath79_112_erase_blocks_plus_290_byte_trailer_is_7340322(work: Path, rootfs: Path) -> None:
    dev = devices.resolve("glinet_gl-ar300m16")
    r = fi.unsquashfs_bytes(rootfs)
    assert r == rootfs.stat().st_size  # -nopad: the file is exactly the filesystem
    # A kernel whose padded size plus the rootfs ends inside erase block 112.
    kernel_blocks = 112 - -(-r // BLOCK)
    kernel = fi.uimage(work, kernel_blocks * BLOCK - 100)
    image = fi.ath79_image(work, kernel, rootfs, "ath79-112")
    checked = image.stat().st_size
    meta = fi.append_metadata(image, fi.metadata_of_length(262))  # 8 + 262 + 16 = 286
    assert image.stat().st_size == 7_340_322  # stat: 112 × 64 KiB + 4 (marker) + 286

    rep = fit.evaluate_image(dev, image)
    assert rep.kernel_size == fi.mkimage_data_size(kernel) + 64 == kernel.stat().st_size
    assert rep.rootfs_size == r
    assert rep.checked_size == checked == 112 * BLOCK + 4
    assert rep.erase_blocks == 112
    assert rep.metadata_size == meta == 286
    assert rep.final_size == 7_340_322
    assert rep.padding == checked - 4 - kernel.stat().st_size - r
    assert rep.limit == 16000 * 1024 and rep.limit_name == "IMAGE_SIZE"
    assert rep.margin == 16000 * 1024 - checked
    assert rep.headroom_blocks == (16000 * 1024 - checked) // BLOCK == 137
    assert rep.verdict == "FITS"
    assert fi.check_size_passes(image, "16000 * 1024")
    # The pieces alone give the same answer (the case of a deleted image).
    pieces = fit.evaluate(dev, kernel_size=kernel.stat().st_size, rootfs_size=r, metadata_size=286)
    assert dataclasses.replace(pieces, notes=()) == dataclasses.replace(rep, notes=())


@pytest.mark.parametrize("over", [0, 1])
def test_ath79_check_size_boundary(work: Path, rootfs: Path, over: int) -> None:
    kernel = fi.uimage(work, 1_000_000)
    image = fi.ath79_image(work, kernel, rootfs, f"ath79-edge{over}")
    size = image.stat().st_size
    limit = size - over  # IMAGE_SIZE exactly the image, then one byte less
    dev = dataclasses.replace(devices.resolve("glinet_gl-ar300m16"), image_size=limit)
    rep = fit.evaluate_files(dev, kernel, rootfs)
    fits = fi.check_size_passes(image, str(limit))  # OpenWrt's own shell test
    assert fits is (over == 0)
    assert rep.verdict == ("FITS" if fits else "TOO_BIG")
    assert rep.checked_size == size
    assert rep.margin == -over
    assert rep.headroom_blocks == (0 if over == 0 else -1)
    if over:
        assert f"OpenWrt would print: WARNING: Image file ... is too big: {size} > {limit}" in (
            rep.notes
        )


@pytest.mark.parametrize("over", [0, 1])
def test_safeloader_limit_binds_before_image_size(work: Path, rootfs: Path, over: int) -> None:
    dev = devices.resolve("tl-wr902ac")
    r = rootfs.stat().st_size
    # kernel + rootfs = 0x700000 is the most tplink-safeloader accepts for this device: its
    # file-system partition is padded to the next 64 KiB plus the 4-byte marker.
    kernel = fi.tplink_v1_kernel(work, 0x700000 - r + over)
    image, fs_max = fi.safeloader_sysupgrade(work, kernel, rootfs)
    assembled = work / f"safeloader-{kernel.stat().st_size}-{r}.bin"
    size = assembled.stat().st_size
    assert size == (0x700004 if not over else 0x710004)
    assert fi.check_size_passes(assembled, "7360 * 1024")  # IMAGE_SIZE alone would pass
    rep = fit.evaluate_files(dev, kernel, rootfs)
    assert rep.checked_size == size
    assert rep.limit == 0x710000 and rep.limit_name == fit.SAFELOADER_LIMIT
    assert rep.margin == 0x710000 - size
    if over:
        assert image is None  # tplink-safeloader refuses it and the recipe deletes the image
        assert rep.verdict == "TOO_BIG"
        msg = f"file-system partition too big (more than {fs_max} bytes)"
        assert any(msg in n for n in rep.notes)
        assert rep.headroom_blocks == -1
    else:
        assert image is not None and rep.verdict == "FITS"
        assert rep.erase_blocks == 112 and rep.headroom_blocks == 0
        fi.append_metadata(image, fi.metadata_of_length(262))
        assert image.stat().st_size == 7_340_322
        whole = fit.evaluate_image(dev, image)
        assert whole.final_size == 7_340_322 and whole.verdict == "FITS"
        assert whole.kernel_size == kernel.stat().st_size


@pytest.mark.parametrize("over", [0, 1])
def test_tplink_v2_layout_and_image_size_boundary(work: Path, over: int) -> None:
    dev = devices.resolve("tplink_tl-wr902ac-v3")
    rootfs = fi.squashfs(work, f"v2root{over}", 200_000, block_k=1024)
    r = rootfs.stat().st_size
    # Make header + kernel (+ 4-byte alignment) + rootfs end exactly at erase block 121, or
    # one byte later: then mktplinkfw2's 4 KiB and 64 KiB markers push it to 122 blocks + 4.
    end = 121 * BLOCK + over
    k = end - r - 512
    k -= (512 + k) % 4 if over == 0 else 0
    kernel = fi.lzma_blob(work, k)
    image = fi.tplink_v2_image(work, kernel.read_bytes(), rootfs.read_bytes(), name=f"v2-{over}")
    size = image.stat().st_size
    fits = fi.check_size_passes(image, "7808 * 1024")
    assert fits is (over == 0)
    rep = fit.evaluate_files(dev, kernel, rootfs)
    assert rep.checked_size == size
    assert rep.verdict == ("FITS" if fits else "TOO_BIG")
    assert rep.limit == 7808 * 1024 and rep.limit_name == "IMAGE_SIZE"
    assert rep.erase_blocks == (size - 4) // BLOCK
    fi.append_metadata(image, {"supported_devices": ["tplink,tl-wr902ac-v3"]})
    if fits:
        whole = fit.evaluate_image(dev, image)
        assert whole.final_size == image.stat().st_size
        assert whole.checked_size == size and whole.kernel_size == k


def test_deleted_image_from_pieces_through_the_task(work: Path, rootfs: Path) -> None:
    """OpenWrt deleted the sysupgrade image; the kernel and rootfs still tell the story."""
    r = rootfs.stat().st_size
    kernel = fi.tplink_v1_kernel(work, 0x700001 - r)
    fs_max = 0x730000 - 0x20000 - kernel.stat().st_size
    cmd = [sys.executable, "-m", "invoke", "fit", "--device", "tl-wr902ac",
           "--kernel", str(kernel), "--rootfs", str(rootfs)]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "tplink_tl-wr902ac-v1" in out.stdout  # it says which profile it chose
    assert "TOO BIG" in out.stdout
    assert f"more than {fs_max} bytes" in out.stdout
    strict = subprocess.run([*cmd, "--check"], cwd=ROOT, capture_output=True, timeout=60)
    assert strict.returncode == 1
    as_json = subprocess.run([*cmd, "--json"], cwd=ROOT, capture_output=True, timeout=60)
    data = json.loads(as_json.stdout)["fit"]
    assert data["verdict"] == "TOO_BIG" and data["rootfs_size"] == r
    assert data["kernel_size"] == kernel.stat().st_size


def test_task_bad_input_is_one_line(work: Path) -> None:
    junk = work / "junk.bin"
    junk.write_bytes(b"\x00\x01" * 5000)
    cmd = [sys.executable, "-m", "invoke", "fit", "--device", "gl-ar300m16", "--image", str(junk)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    err = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "unknown image format" in err[0]
    assert "Traceback" not in out.stderr


def test_image_of_another_recipe_is_refused(work: Path, rootfs: Path) -> None:
    kernel = fi.uimage(work, 500_000)
    image = fi.ath79_image(work, kernel, rootfs, "ath79-other")
    with pytest.raises(WolfError, match="takes tplink-safeloader images"):
        fit.evaluate_image(devices.resolve("tl-wr902ac"), image)


def test_wrong_kernel_kind_and_non_squashfs_rootfs(work: Path, rootfs: Path) -> None:
    dev = devices.resolve("glinet_gl-ar300m16")
    blob = fi.lzma_blob(work, 4000)
    with pytest.raises(WolfError, match="is not a uImage") as e:
        fit.evaluate_files(dev, blob, rootfs)
    assert "\n" not in str(e.value)
    gz = work / "rootfs.tar.gz"
    subprocess.run(["bash", "-c", f"echo hello | gzip > {gz}"], check=True, timeout=30)
    kernel = fi.uimage(work, 20_000)
    with pytest.raises(WolfError, match="no squashfs"):
        fit.evaluate_files(dev, kernel, gz)
    with pytest.raises(WolfError, match="does not exist"):
        fit.evaluate_files(dev, kernel, work / "missing.squashfs")


def test_truncated_rootfs_piece(work: Path, rootfs: Path) -> None:
    cut = work / "cut.squashfs"
    cut.write_bytes(rootfs.read_bytes()[: rootfs.stat().st_size // 2])
    kernel = fi.uimage(work, 20_000)
    with pytest.raises(WolfError, match="truncated"):
        fit.evaluate_files(devices.resolve("glinet_gl-ar300m16"), kernel, cut)


def test_malta_has_no_flash_so_unknown() -> None:
    rep = fit.evaluate(devices.resolve("malta-be"), kernel_size=5_000_000, rootfs_size=None)
    assert rep.verdict == "UNKNOWN" and rep.limit is None and rep.checked_size is None


def test_report_round_trips_through_json() -> None:
    rep = fit.evaluate(devices.resolve("tl-wr902ac"), kernel_size=1_800_000, rootfs_size=5_700_000)
    back = FitReport.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert back == rep
    with pytest.raises(WolfError, match="unknown fields"):
        FitReport.from_dict({**rep.to_dict(), "bogus": 1})


def test_safeloader_kernel_beyond_the_split_limit_wraps() -> None:
    """A kernel past 0x710000 makes tplink-safeloader's uint32 file-system size wrap: the tool
    then checks nothing, and only check-size (IMAGE_SIZE 0x730000) stands."""
    dev = devices.resolve("tl-wr902ac")
    k, r = 0x715000, 0x8000
    fs_base = 0x20000 + k
    assert (0x730000 - fs_base) & 0xFFFFFFFF > 2**31  # the C arithmetic wraps
    rep = fit.evaluate(dev, kernel_size=k, rootfs_size=r)
    assert rep.limit_name == "IMAGE_SIZE" and rep.limit == 0x730000
    assert rep.checked_size == -(-(fs_base + r) // 0x10000) * 0x10000 + 4 - 0x20000
    assert rep.verdict == "FITS" and any("wraps" in n for n in rep.notes)
    over = fit.evaluate(dev, kernel_size=0x731000, rootfs_size=r)
    assert over.verdict == "TOO_BIG"
    assert any("kernel overflowed firmware partition" in n for n in over.notes)


@pytest.mark.parametrize("over", [0, 1])
def test_ath79_at_the_real_image_size(work: Path, rootfs: Path, over: int) -> None:
    """GL-AR300M16, IMAGE_SIZE 16000k = 250 blocks: kernel + rootfs may fill 249 blocks (the
    marker needs 4 bytes of the 250th). The rootfs file is padded to a block multiple (+1
    byte): append-rootfs appends the whole file, whatever squashfs says."""
    dev = devices.resolve("glinet_gl-ar300m16")
    padded = work / f"rootfs-padded{over}.squashfs"
    padded.write_bytes(rootfs.read_bytes())
    fi.pad_to(padded, BLOCK)
    with padded.open("ab") as f:
        f.write(b"\0" * over)
    assert fi.unsquashfs_bytes(padded) == rootfs.stat().st_size  # still the same filesystem
    kernel = fi.uimage(work, 249 * BLOCK - padded.stat().st_size + over - 1000)
    image = fi.ath79_image(work, kernel, padded, f"ath79-real{over}")
    fits = fi.check_size_passes(image, "16000 * 1024")
    assert fits is (over == 0)
    assert image.stat().st_size == (249 if fits else 250) * BLOCK + 4
    rep = fit.evaluate_files(dev, kernel, padded)
    assert rep.checked_size == image.stat().st_size
    assert rep.verdict == ("FITS" if fits else "TOO_BIG")
    assert rep.erase_blocks == (249 if fits else 250)
    assert rep.margin == 16000 * 1024 - image.stat().st_size
    assert any("longer than its squashfs" in n for n in rep.notes)
