"""The fit model against OpenWrt's own image tools, built from the pinned sources in
../shared/openwrt (firmware-utils 6a87eaf, the v25.12.5 tree's padjffs2): at each limit, one
byte and one erase block either side, for the sysupgrade and the factory image of every recipe
kind in the catalogue. The tools' exit status, their own error lines and the files' sizes
(stat) are the oracle; the model only predicts them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from openwrt_wolf.build.imagebuilder import SIZE_LINES
from openwrt_wolf.catalogue import devices
from openwrt_wolf.firmware import fit
from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from tests import fitimages as fi
from tests.conftest import need_tools

ROOT = Path(__file__).resolve().parents[2]
BLOCK = 0x10000
WR902_V1_KERNEL = 1_987_123  # the kernel of the TL-WR902AC v1 example


@dataclass(frozen=True)
class Tools:
    safeloader: Path
    mktplinkfw2: Path
    padjffs2: Path


@pytest.fixture(scope="module")
def tools(openwrt_tools: OpenWrtTools) -> Tools:
    """OpenWrt's own tools, built once from the pinned sources (`invoke openwrt-tools`)."""
    return Tools(
        safeloader=openwrt_tools.tplink_safeloader,
        mktplinkfw2=openwrt_tools.mktplinkfw2,
        padjffs2=openwrt_tools.padjffs2,
    )


def _blob(path: Path, size: int) -> Path:
    path.write_bytes(os.urandom(size))
    return path


def _run(argv: list[str | Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120)


# --- tplink-safeloader (TL-WR902AC v1): sysupgrade and factory.bin ---------------------------

# The measurement with OpenWrt's tools: for a 1,987,123-byte kernel, factory.bin is
# deleted for every rootfs from 5,308,417 to 5,352,909 bytes while sysupgrade.bin is kept.
SAFELOADER_CASES = [
    5_308_416 - BLOCK, 5_308_415, 5_308_416, 5_308_417, 5_308_417 + BLOCK,
    5_352_909 - BLOCK, 5_352_908, 5_352_909, 5_352_910, 5_352_910 + BLOCK,
]  # fmt: skip


@pytest.mark.parametrize("rootfs_size", SAFELOADER_CASES)
def test_safeloader_sysupgrade_and_factory_at_each_limit(
    tools: Tools, tmp_path: Path, rootfs_size: int
) -> None:
    dev = devices.resolve("tplink_tl-wr902ac-v1")
    kernel = _blob(tmp_path / "kernel.bin", WR902_V1_KERNEL)
    rootfs = _blob(tmp_path / "root.squashfs", rootfs_size)
    base = [tools.safeloader, "-B", "TL-WR902AC-V1", "-V", "r1", "-k", kernel, "-r", rootfs, "-j"]
    sys_run = _run([*base, "-S", "-o", tmp_path / "sysupgrade.bin"])
    fac_run = _run([*base, "-o", tmp_path / "factory.bin"])
    rep = fit.evaluate(dev, kernel_size=WR902_V1_KERNEL, rootfs_size=rootfs_size)
    assert rep.factory is not None and rep.factory.name == "factory.bin"

    tool_sys_ok = sys_run.returncode == 0
    # check-size follows tplink-safeloader sysupgrade, run by bash as OpenWrt runs it
    image = tmp_path / "sysupgrade.bin"
    size_ok = tool_sys_ok and fi.check_size_passes(image, "7360 * 1024")
    assert (rep.verdict == "FITS") is (tool_sys_ok and size_ok)
    assert (rep.factory.verdict == "FITS") is (fac_run.returncode == 0)
    if tool_sys_ok:
        assert rep.checked_size == image.stat().st_size
    for run, notes in ((sys_run, rep.notes), (fac_run, rep.factory.notes)):
        if run.returncode:
            line = run.stderr.strip().splitlines()[0]
            assert f"OpenWrt would print: {line}" in notes
    # the window: factory deleted, sysupgrade kept
    assert (fac_run.returncode != 0 and tool_sys_ok) is (5_308_417 <= rootfs_size <= 5_352_909)


def test_safeloader_deleted_image_then_check_size_prints_an_empty_size(
    tools: Tools, tmp_path: Path
) -> None:
    """After tplink-safeloader fails, the recipe removes the image; check-size then stats a
    missing file: OpenWrt prints '... is too big:  > 7536640' with no size."""
    dev = devices.resolve("tplink_tl-wr902ac-v1")
    gone = tmp_path / "gone.bin"
    script = (
        f'imagesize="$(stat -c%s {gone} 2>/dev/null)"; limitsize="$((7360 * 1024))"; '
        f'[ $limitsize -ge $imagesize ] 2>/dev/null || echo "    WARNING: Image file {gone} '
        'is too big: $imagesize > $limitsize"'
    )
    printed = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    rep = fit.evaluate(dev, kernel_size=WR902_V1_KERNEL, rootfs_size=5_352_910)
    want = printed.stdout.strip().replace(str(gone), "...")
    assert want.endswith("is too big:  > 7536640")
    assert f"OpenWrt would print: {want.strip()}" in rep.notes
    # and a build keeps the line in its record (openwrt_warnings): the real ath79 too-big
    # build's log had it, its record did not
    assert [ln.strip() for ln in printed.stdout.splitlines() if SIZE_LINES.search(ln)] == [
        printed.stdout.strip()
    ]


@pytest.mark.parametrize("rootfs_size", [5_000_000, 5_308_416, 5_352_909, 5_352_910, 5_500_000])
def test_safeloader_rootfs_room_is_what_the_tool_still_accepts(
    tools: Tools, tmp_path: Path, rootfs_size: int
) -> None:
    """Headroom as 'how many more rootfs bytes': the tool accepts rootfs + room and refuses
    rootfs + room + 1, for the sysupgrade image and for factory.bin."""
    dev = devices.resolve("tplink_tl-wr902ac-v1")
    kernel = _blob(tmp_path / "kernel.bin", WR902_V1_KERNEL)
    rep = fit.evaluate(dev, kernel_size=WR902_V1_KERNEL, rootfs_size=rootfs_size)
    assert rep.factory is not None
    for room, extra in ((rep.rootfs_room, ["-S"]), (rep.factory.rootfs_room, [])):
        assert room is not None
        for size, ok in ((rootfs_size + room, True), (rootfs_size + room + 1, False)):
            rootfs = _blob(tmp_path / "r.bin", size)
            out = tmp_path / "o.bin"
            run = _run([tools.safeloader, "-B", "TL-WR902AC-V1", "-V", "r1", "-k", kernel,
                        "-r", rootfs, "-j", *extra, "-o", out])  # fmt: skip
            kept = run.returncode == 0 and (not extra or fi.check_size_passes(out, "7360 * 1024"))
            assert kept is ok, (size, extra, run.stderr)
    if rootfs_size == 5_352_909:
        assert rep.rootfs_room == 0 and rep.margin == 65_532 and rep.headroom_blocks == 0


# --- mktplinkfw2 (TL-WR902AC v3, 8Mmtk): sysupgrade and tftp-recovery.bin --------------------

V2_ARGS = ["-H", "0x000dc88f", "-W", "0x89", "-w", "0x1", "-F", "8Mmtk", "-T", "3",
           "-V", "ver. 2.0", "-a", "0x4", "-j"]  # fmt: skip
FW_MAX = 0x7A0000


@pytest.mark.parametrize("over", [-BLOCK, -1, 0, 1, BLOCK])
def test_mktplinkfw2_sysupgrade_and_recovery_at_the_limit(
    tools: Tools, tmp_path: Path, over: int
) -> None:
    dev = devices.resolve("tplink_tl-wr902ac-v3")
    k = 2_000_000
    r = FW_MAX - 512 - k + over  # exceed_bytes = over
    kernel = _blob(tmp_path / "kernel.bin", k)
    rootfs = _blob(tmp_path / "root.bin", r)
    sys_out, rec_out = tmp_path / "sysupgrade.bin", tmp_path / "factory.bin"
    sys_run = _run([tools.mktplinkfw2, *V2_ARGS, "-k", kernel, "-r", rootfs, "-o", sys_out, "-s"])
    rec_run = _run([tools.mktplinkfw2, *V2_ARGS, "-k", kernel, "-r", rootfs, "-o", rec_out])
    rep = fit.evaluate(dev, kernel_size=k, rootfs_size=r)
    assert rep.factory is not None and rep.factory.name == "tftp-recovery.bin"
    sys_ok = sys_run.returncode == 0 and fi.check_size_passes(sys_out, "7808 * 1024")
    assert (rep.verdict == "FITS") is sys_ok
    assert (rep.factory.verdict == "FITS") is (rec_run.returncode == 0)
    if sys_ok:
        assert rep.checked_size == sys_out.stat().st_size
        assert rec_out.stat().st_size == FW_MAX  # no -s: padded to fw_max_len
    elif sys_run.returncode:
        line = next(x for x in sys_run.stderr.splitlines() if "error" in x)
        assert f"OpenWrt would print: {line}" in rep.notes
        assert re.search(rf"too big by {over} bytes", line)
    else:  # the tool kept it, but its markers took the file past IMAGE_SIZE
        size = sys_out.stat().st_size
        assert f"OpenWrt would print: WARNING: Image file ... is too big: {size} > {FW_MAX}" in (
            rep.notes
        )


@pytest.mark.parametrize("r", [5_000_000, FW_MAX - 512 - 2_000_000 - 1, FW_MAX - 512 - 2_000_000])
def test_mktplinkfw2_rootfs_room_is_what_is_still_kept(
    tools: Tools, tmp_path: Path, r: int
) -> None:
    """rootfs + room is kept (mktplinkfw2 -s, then check-size) and one byte more is not; just
    under fw_max_len the markers push the file past IMAGE_SIZE, so room is not limit - size."""
    dev = devices.resolve("tplink_tl-wr902ac-v3")
    k = 2_000_000
    kernel = _blob(tmp_path / "kernel.bin", k)
    rep = fit.evaluate(dev, kernel_size=k, rootfs_size=r)
    assert rep.rootfs_room is not None
    for size, ok in ((r + rep.rootfs_room, True), (r + rep.rootfs_room + 1, False)):
        rootfs = _blob(tmp_path / "root.bin", size)
        out = tmp_path / "o.bin"
        run = _run([tools.mktplinkfw2, *V2_ARGS, "-k", kernel, "-r", rootfs, "-o", out, "-s"])
        kept = run.returncode == 0 and fi.check_size_passes(out, "7808 * 1024")
        assert kept is ok, (size, run.stderr)


def _exact_squashfs(tmp: Path, want_mod4: int = 0) -> Path:
    """A real squashfs (Debian's mksquashfs, -nopad) whose size is a multiple of 4."""
    for payload in range(300_000, 300_040):
        sq = fi.squashfs(tmp, f"exact{payload}", payload, block_k=1024)
        if sq.stat().st_size % 4 == want_mod4:
            return sq
    raise AssertionError("no squashfs of a size divisible by 4 in 40 tries")


def test_tplink_v2_image_filling_the_firmware_area_fits(tools: Tools, tmp_path: Path) -> None:
    """mktplinkfw2 writes no JFFS2 marker when the image fills fw_max_len exactly; OpenWrt
    keeps that image, and `fit --image` must say FITS (it used to call it truncated)."""
    need_tools("mksquashfs", "xz")
    rootfs = _exact_squashfs(tmp_path)
    r = rootfs.stat().st_size
    k = FW_MAX - 512 - r  # header + kernel is then a multiple of 4: rootfs_ofs = 512 + k
    kernel = fi.lzma_blob(tmp_path, k)
    out = tmp_path / "v3-sysupgrade.bin"
    run = _run([tools.mktplinkfw2, *V2_ARGS, "-k", kernel, "-r", rootfs, "-o", out, "-s"])
    assert run.returncode == 0, run.stderr
    assert out.stat().st_size == FW_MAX and fi.EOF_MARK not in out.read_bytes()[-8:]
    assert fi.check_size_passes(out, "7808 * 1024")
    fi.append_metadata(out, {"supported_devices": ["tplink,tl-wr902ac-v3"]})
    task = subprocess.run(
        [sys.executable, "-m", "invoke", "--search-root", str(ROOT), "fit", "--device",
         "tl-wr902ac-v3", "--image", str(out), "--json"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert task.returncode == 0, task.stderr
    assert '"verdict": "FITS"' in task.stdout and '"rootfs_room": 0' in task.stdout


# --- padjffs2 (ath79-default, GL-AR300M16): no factory image ------------------------------


@pytest.mark.parametrize("over", [-BLOCK, -1, 0, 1, BLOCK])
def test_padjffs2_and_check_size_at_image_size(tools: Tools, tmp_path: Path, over: int) -> None:
    """append-kernel | pad-to 64k | append-rootfs | pad-rootfs (the tree's padjffs2, as
    Build/pad-rootfs calls it) | check-size 16000k, around the last rootfs byte that fits."""
    dev = devices.resolve("glinet_gl-ar300m16")
    limit = 16000 * 1024
    k = 2 * 1024 * 1024 + 123
    # the largest rootfs kept: padded kernel + rootfs fill 249 blocks, then the 4-byte marker
    last = (limit - 4) // BLOCK * BLOCK - (k + -k % BLOCK)
    r = last + over
    image = tmp_path / "img.bin"
    image.write_bytes(os.urandom(k) + b"\0" * (-k % BLOCK) + os.urandom(r))
    run = _run([tools.padjffs2, image, "64"])
    assert run.returncode == 0, run.stderr
    ok = fi.check_size_passes(image, "16000 * 1024")
    rep = fit.evaluate(dev, kernel_size=k, rootfs_size=r)
    assert rep.checked_size == image.stat().st_size
    assert (rep.verdict == "FITS") is ok
    assert rep.factory is None  # ath79's Device/Default builds no factory image
    assert rep.rootfs_room == last - r
