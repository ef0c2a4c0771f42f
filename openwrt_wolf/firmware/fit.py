"""The firmware fit model: does a sysupgrade image fit the device's flash, to the byte.

Each recipe kind of data/devices.toml is modelled from the OpenWrt and firmware-utils sources
that build it (docs/fit.md has the arithmetic and where each rule comes from). The model works
from the kernel and rootfs sizes alone, so it still answers when OpenWrt deleted a too-big
image; ``evaluate_image`` splits a finished sysupgrade file and checks the model against it.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..catalogue.devices import Device
from ..errors import WolfError
from ..paths import DATA_DIR
from ..results.fit_report import FactoryFit, FitReport

# padjffs2, tplink-safeloader -j and mktplinkfw2 -j all end the image with the JFFS2
# end-of-filesystem marker de ad c0 de; it begins the first block of the rootfs_data overlay.
JFFS2_EOF = b"\xde\xad\xc0\xde"
MARKER = len(JFFS2_EOF)
TPLINK_HEADER = 512  # sizeof(struct fw_header), mktplinkfw.c and mktplinkfw2.c alike
SAFELOADER_ALIGN = 0x10000  # tplink-safeloader read_file() aligns with a fixed 64 KiB
# What tplink-safeloader's file-system check bounds: firmware.size - firmware.base covers the
# kernel, the rootfs padded to 64 KiB (absolute) and the marker, so kernel + rootfs itself may
# not exceed 64 KiB less (0x700000 for the TL-WR902AC v1's 0x710000).
SAFELOADER_LIMIT = "safeloader firmware (kernel + padded rootfs + marker)"
ROOM_SEARCH_MAX = 1 << 30  # no flash we model holds a 1 GiB rootfs
MIB = 1 << 20  # CONFIG_TARGET_*_PARTSIZE unit; ptgen's -p <n>M / <n>m
# The script that writes each partitioned recipe's disk image (in the OpenWrt tree).
PARTITION_SCRIPTS = {
    "rpi-sdcard": "target/linux/bcm27xx/image/gen_rpi_sdcard_img.sh",
    "efi-combined": "scripts/gen_image_generic.sh",
}


@dataclass(frozen=True)
class _Check:
    """One size limit a build step enforces, and what OpenWrt prints when it is exceeded."""

    name: str
    limit: int
    measured: int  # what that step compares with its limit
    fails: bool
    message: str  # OpenWrt's words on failure

    @property
    def headroom(self) -> int:
        return self.limit - self.measured


@dataclass(frozen=True)
class _Layout:
    checked: int  # file size when check-size runs
    padding: int  # fill bytes (zero or 0xff), not headers, not markers
    end_marker: bool  # the file ends with the 4-byte JFFS2 end marker
    checks: tuple[_Check, ...]
    notes: tuple[str, ...] = ()


def align(n: int, to: int) -> int:
    """Round n up to a multiple of ``to`` (C's ALIGN for powers of two, and dd conv=sync)."""
    return -(-n // to) * to


def _check_size(device: Device, size: int) -> _Check:
    # include/image-commands.mk Build/check-size: [ limit -ge size ] or warn and rm the image.
    assert device.image_size is not None
    return _Check(
        "IMAGE_SIZE",
        device.image_size,
        size,
        size > device.image_size,
        f"WARNING: Image file ... is too big: {size} > {device.image_size}",  # check-size's line
    )


def _ath79_default(device: Device, kernel: int, rootfs: int) -> _Layout:
    """append-kernel | pad-to BLOCKSIZE | append-rootfs | pad-rootfs | check-size."""
    bs = _blocksize(device)
    kernel_padded = align(kernel, bs)  # Image/pad-to: dd bs=BLOCKSIZE conv=sync (zeros)
    data = kernel_padded + rootfs
    # padjffs2 <file> 64: 0xff up to the next multiple of the block, then the marker. An
    # already aligned file still gets the marker (padjffs2.c pad_image).
    checked = align(data, bs) + MARKER
    padding = (kernel_padded - kernel) + (align(data, bs) - data)
    return _Layout(checked, padding, True, (_check_size(device, checked),))


def _safeloader(device: Device, kernel: int, rootfs: int) -> _Layout:
    """append-rootfs | tplink-safeloader sysupgrade (-j -S) | check-size.

    tplink-safeloader moves the file-system partition to right after the kernel inside the
    firmware partition (base = firmware.base + kernel) but sizes it as firmware.size minus
    that absolute base, so kernel + padded rootfs may not exceed firmware.size - firmware.base.
    """
    fw = device.firmware_partition
    if fw is None:
        raise WolfError(
            f"{device.profile}: the tplink-safeloader model needs firmware_partition",
            hint="add it to data/devices.toml from tplink-safeloader.c's partition table",
        )
    fs_base = fw.offset + kernel
    # read_file(..., add_jffs2_eof, file_system_partition): aligned at the absolute address.
    fs_len = align(rootfs + fs_base, SAFELOADER_ALIGN) + MARKER - fs_base
    image = kernel + fs_len  # generate_sysupgrade_image: os-image then file-system, no header
    padding = fs_len - rootfs - MARKER
    checks: list[_Check] = []
    notes: list[str] = []
    if kernel > fw.size:
        checks.append(
            _Check(
                "safeloader kernel",
                fw.size,
                kernel,
                True,
                "kernel overflowed firmware partition",
            )
        )
    elif fs_base > fw.size:
        # file_system_partition->size is a uint32_t: it wraps and the tool checks nothing.
        notes.append("tplink-safeloader's file-system size wraps (uint32); only IMAGE_SIZE applies")
    else:
        limit = fw.size - fw.offset
        declared = device.extra.get("safeloader_max_kernel_rootfs")
        if declared is not None and int(declared) != limit:
            raise WolfError(
                f"{device.profile}: safeloader_max_kernel_rootfs {int(declared):#x} disagrees "
                f"with firmware_partition ({limit:#x})",
                hint="fix data/devices.toml",
            )
        fs_max = fw.size - fs_base
        checks.append(
            _Check(
                SAFELOADER_LIMIT,
                limit,
                image,
                fs_len > fs_max,  # the same as image > limit
                f"file-system partition too big (more than {fs_max} bytes): Success",
            )
        )
    checks.append(_check_size(device, image))
    return _Layout(image, padding, True, tuple(checks), tuple(notes))


@cache
def _mktplinkfw2_layouts() -> dict[str, int]:
    raw = tomllib.loads((DATA_DIR / "tplink_layouts.toml").read_text())
    return {k: int(v) for k, v in raw["mktplinkfw2"].items()}


def _tplink_v2(device: Device, kernel: int, rootfs: int) -> _Layout:
    """tplink-v2-image -s -e (mktplinkfw2 -a 0x4 -j) | check-size."""
    layout_id = str(device.extra.get("tplink_flashlayout", ""))
    fw_max = _mktplinkfw2_layouts().get(layout_id)
    if fw_max is None:
        raise WolfError(
            f"{device.profile}: unknown TPLINK_FLASHLAYOUT {layout_id!r}",
            hint="add it to data/tplink_layouts.toml from mktplinkfw2.c",
        )
    rootfs_ofs = align(TPLINK_HEADER + kernel, 4)  # -a 0x4
    end = rootfs_ofs + rootfs
    # pad_jffs2 (mktplinkfw-lib.c): markers at the 4 KiB and then the 64 KiB boundary, only
    # while the length is below fw_max_len; -s keeps the file at that length.
    pad_mask = {4096, 65536}
    markers = 0
    while end < fw_max and pad_mask:
        end = align(end, min(pad_mask))
        pad_mask = {m for m in pad_mask if end % m}
        end += MARKER
        markers += 1
    padding = end - TPLINK_HEADER - kernel - rootfs - markers * MARKER
    exceed = kernel + rootfs - (fw_max - TPLINK_HEADER)
    checks = (
        _Check(
            f"{layout_id} firmware",
            fw_max,
            TPLINK_HEADER + kernel + rootfs,
            exceed > 0,
            f"[mktplinkfw2] *** error: images are too big by {exceed} bytes",
        ),
        _check_size(device, end),
    )
    return _Layout(end, padding, markers > 0, checks)


def _factory_safeloader(device: Device, kernel: int, rootfs: int) -> _Check | None:
    """append-rootfs | tplink-safeloader factory: no -S, so the file-system partition starts
    at the next 64 KiB boundary after the kernel (build_image: "Align partition start to erase
    blocks for factory images only"), and put_partitions checks it against the same wrapped size;
    no check-size follows."""
    fw = device.firmware_partition
    if fw is None:
        return None
    if kernel > fw.size:
        return _Check(
            "safeloader kernel", fw.size, kernel, True,
            "kernel overflowed firmware partition",
        )  # fmt: skip
    fs_base = align(fw.offset + kernel, SAFELOADER_ALIGN)
    fs_len = align(rootfs + fs_base, SAFELOADER_ALIGN) + MARKER - fs_base
    fs_max = fw.size - fs_base
    measured = fs_base - fw.offset + fs_len
    return _Check(
        "safeloader factory firmware (kernel aligned to 64 KiB + padded rootfs + marker)",
        fw.size - fw.offset,
        measured,
        fs_base <= fw.size and fs_len > fs_max,
        f"file-system partition too big (more than {fs_max} bytes): Success",
    )


def _factory_tplink_v2(device: Device, kernel: int, rootfs: int) -> _Check | None:
    """tplink-v2-image -e (mktplinkfw2 -a 0x4 -j, no -s): the same check as the sysupgrade
    image, and the file is always padded to the layout's fw_max_len; no check-size follows."""
    return _tplink_v2(device, kernel, rootfs).checks[0]


_FACTORY = {
    "tplink-safeloader": _factory_safeloader,
    "tplink-v2": _factory_tplink_v2,
}


_RECIPES = {
    "ath79-default": _ath79_default,
    "tplink-safeloader": _safeloader,
    "tplink-v2": _tplink_v2,
}


def _blocksize(device: Device) -> int:
    if not device.blocksize:
        raise WolfError(f"{device.profile}: BLOCKSIZE is not set in data/devices.toml")
    return device.blocksize


def _unknown(
    device: Device,
    kernel_size: int | None,
    rootfs_size: int | None,
    metadata_size: int | None,
    why: str,
) -> FitReport:
    return FitReport(
        profile=device.profile,
        recipe=device.recipe,
        kernel_size=kernel_size,
        rootfs_size=rootfs_size,
        checked_size=None,
        limit=device.image_size,
        limit_name="IMAGE_SIZE" if device.image_size else "",
        blocksize=device.blocksize,
        erase_blocks=None,
        padding=None,
        margin=None,
        headroom_blocks=None,
        verdict="UNKNOWN",
        metadata_size=metadata_size,
        final_size=None,
        notes=(why,),
    )


def evaluate(
    device: Device,
    *,
    kernel_size: int | None,
    rootfs_size: int | None,
    metadata_size: int | None = None,
) -> FitReport:
    """The fit of a kernel and a rootfs of these sizes, as the device's recipe assembles them.

    Works from the pieces alone, so it answers for images OpenWrt deleted as too big.
    ``metadata_size`` is append-metadata's fwtool trailer (known only from a finished file).
    """
    for what, v in (("kernel", kernel_size), ("rootfs", rootfs_size), ("metadata", metadata_size)):
        if v is not None and v < 0:
            raise WolfError(f"{device.profile}: {what} size {v} is negative")
    if device.partitioned:
        return _partitions(device, kernel_size, rootfs_size, metadata_size)
    recipe = _RECIPES.get(device.recipe)
    if recipe is None or not device.has_flash:
        return _unknown(
            device, kernel_size, rootfs_size, metadata_size,
            f"recipe {device.recipe} writes no flash image; nothing to fit"
            if not device.has_flash
            else f"recipe {device.recipe} is not modelled by openwrt-wolf; no verdict",
        )  # fmt: skip
    if kernel_size is None or rootfs_size is None:
        missing = "kernel" if kernel_size is None else "rootfs"
        return _unknown(
            device, kernel_size, rootfs_size, metadata_size, f"the {missing} size is not known"
        )
    lay = recipe(device, kernel_size, rootfs_size)
    binding = min(lay.checks, key=lambda c: c.headroom)
    bs = device.blocksize
    notes = list(lay.notes)
    failed = [c for c in lay.checks if c.fails]
    if failed:
        notes += [f"OpenWrt would print: {line}" for line in _printed(lay.checks)]
        notes.append("OpenWrt deletes this image: it never reaches bin/ or profiles.json")
    erase_blocks = headroom_blocks = None
    if bs:
        data = lay.checked - (MARKER if lay.end_marker else 0)
        erase_blocks = -(-data // bs)
        headroom_blocks = binding.headroom // bs
    final = None if metadata_size is None else lay.checked + metadata_size
    room = _room(lambda r: not any(c.fails for c in recipe(device, kernel_size, r).checks),
                 rootfs_size)  # fmt: skip
    return FitReport(
        profile=device.profile,
        recipe=device.recipe,
        kernel_size=kernel_size,
        rootfs_size=rootfs_size,
        checked_size=lay.checked,
        limit=binding.limit,
        limit_name=binding.name,
        blocksize=bs,
        erase_blocks=erase_blocks,
        padding=lay.padding,
        margin=binding.headroom,
        headroom_blocks=headroom_blocks,
        verdict="TOO_BIG" if failed else "FITS",
        metadata_size=metadata_size,
        final_size=final,
        notes=tuple(notes),
        rootfs_room=room,
        factory=_factory(device, kernel_size, rootfs_size),
    )


def _partitions(
    device: Device, kernel_size: int | None, rootfs_size: int | None, metadata_size: int | None
) -> FitReport:
    """A disk image of a boot and a root partition (SD card, EFI disk): ptgen sizes the root
    partition at ROOTFS_PARTSIZE MiB and dd writes the rootfs into it. Neither script compares
    the two: a bigger rootfs runs past the partition's end, OpenWrt prints nothing and keeps
    the image, and the root partition cuts the filesystem short. What is left of the partition
    is the overlay (rootfs_data) the first boot creates there."""
    assert device.rootfs_partsize is not None
    limit = device.rootfs_partsize * MIB
    script = PARTITION_SCRIPTS[device.recipe].rsplit("/", 1)[-1]
    boot = f"; the boot partition is {device.kernel_partsize} MiB" if device.kernel_partsize else ""
    name = f"root partition (ROOTFS_PARTSIZE {device.rootfs_partsize} MiB{boot})"
    if rootfs_size is None:
        rep = _unknown(
            device, kernel_size, rootfs_size, metadata_size, "the rootfs size is not known"
        )
        return dataclasses.replace(rep, limit=limit, limit_name=name)
    margin = limit - rootfs_size
    notes: tuple[str, ...] = ()
    if margin < 0:
        # gen_image_generic.sh with a GPT (the EFI image) and PADDING then zeroes 63 sectors
        # after the root partition, over the rootfs's end
        zeroes = ", then zeroes the 63 sectors after the partition over it," if (
            device.recipe == "efi-combined") else ""  # fmt: skip
        notes = (
            f"OpenWrt checks nothing here: {script} writes the rootfs {-margin:,} bytes past the "
            f"end of its partition{zeroes} and keeps the image; the root partition cuts the "
            "filesystem short, so it does not boot as built",
        )
    return FitReport(
        profile=device.profile,
        recipe=device.recipe,
        kernel_size=kernel_size,
        rootfs_size=rootfs_size,
        checked_size=rootfs_size,
        limit=limit,
        limit_name=name,
        blocksize=None,
        erase_blocks=None,
        padding=None,
        margin=margin,
        headroom_blocks=None,
        verdict="TOO_BIG" if margin < 0 else "FITS",
        metadata_size=metadata_size,
        final_size=None,
        notes=notes,
        rootfs_room=margin,
    )


def _printed(checks: tuple[_Check, ...]) -> list[str]:
    """OpenWrt's own lines, in recipe order. A tool that fails makes the recipe delete the
    image (`|| rm -f $@`); check-size then stats a missing file and prints an empty size."""
    out: list[str] = []
    gone = False
    for c in checks:
        if gone and c.name == "IMAGE_SIZE":
            out.append(f"WARNING: Image file ... is too big:  > {c.limit}")
        elif c.fails and not gone:
            out.append(c.message)
            gone = True
    return out


def _room(fits: Callable[[int], bool], rootfs: int) -> int | None:
    """Bytes the rootfs may grow (negative: must shrink) with the image still kept: the largest
    rootfs that fits, by bisection (every check grows with the rootfs), minus this one."""
    if not fits(0):
        return None
    lo, hi = 0, ROOM_SEARCH_MAX
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo - rootfs


def _factory(device: Device, kernel: int, rootfs: int) -> FactoryFit | None:
    model = _FACTORY.get(device.recipe)
    name = str(device.extra.get("factory_image", "factory.bin"))
    if model is None or not name:
        return None
    check = model(device, kernel, rootfs)
    if check is None:
        return None

    def fits(r: int) -> bool:
        c = model(device, kernel, r)
        return c is not None and not c.fails

    notes: tuple[str, ...] = ()
    if check.fails:
        notes = (
            f"OpenWrt would print: {check.message}",
            f"OpenWrt deletes {name}; users installing from the vendor firmware have no image",
        )
    return FactoryFit(
        name=name,
        verdict="TOO_BIG" if check.fails else "FITS",
        limit=check.limit,
        limit_name=check.name,
        measured=check.measured,
        margin=check.headroom,
        rootfs_room=_room(fits, rootfs),
        notes=notes,
    )


# What split() calls each recipe's sysupgrade image.
RECIPE_FORMATS = {
    "ath79-default": "uimage+squashfs",
    "tplink-safeloader": "tplink-safeloader",
    "tplink-v2": "tplink-v2",
}


def evaluate_image(device: Device, image: Path) -> FitReport:
    """The fit of a finished sysupgrade file: split it, evaluate, and compare with the file."""
    from . import imageformats

    sp = imageformats.split(image)
    want = RECIPE_FORMATS.get(device.recipe)
    if want is None:
        raise WolfError(
            f"{image}: {device.profile} ({device.recipe}) has no sysupgrade image to check",
            hint="pick a device with flash",
        )
    if sp.format != want:
        raise WolfError(
            f"{image} is a {sp.format} image, but {device.profile} ({device.recipe} recipe) "
            f"takes {want} images",
            hint="check --device",
        )
    rep = evaluate(
        device,
        kernel_size=sp.kernel_size,
        rootfs_size=sp.rootfs_size,
        metadata_size=sp.metadata_size if sp.metadata_size is not None else 0,
    )
    size = image.stat().st_size
    body = size - (sp.metadata_size or 0)
    notes = list(rep.notes)
    if sp.metadata_size is None:
        notes.append("no append-metadata trailer in the file")
    if rep.checked_size != body:
        notes.append(
            f"the file has {body} bytes before its metadata but the {device.recipe} model "
            f"gives {rep.checked_size}: it was not assembled the way this recipe does"
        )
    return dataclasses.replace(rep, final_size=size, notes=tuple(notes))


# The props byte OpenWrt's `lzma e -lc1 -lp2 -pb2` writes: (pb * 5 + lp) * 9 + lc.
_OPENWRT_LZMA_PROPS = 0x6D


def _read(path: Path, what: str) -> bytes:
    from .imageformats import bounded

    return bounded.read_file(path, what)


def _check_kernel(device: Device, kernel: bytes, path: Path) -> list[str]:
    """The kernel piece must be what the recipe appends; say so clearly when it is not."""
    from .imageformats import tplink, uimage

    if device.recipe == "ath79-default":
        if not uimage.looks_like(kernel):
            raise WolfError(
                f"kernel {path} is not a uImage, but {device.profile} appends a uImage kernel",
                hint="use the *-kernel.bin OpenWrt wrote for this device",
            )
        uimage.parse(kernel, where=f"kernel {path}")
    elif device.recipe == "tplink-safeloader":
        if not tplink.looks_like_v1(kernel):
            raise WolfError(
                f"kernel {path} has no TP-Link v1 header, but {device.profile}'s kernel has one",
                hint="use the *-kernel.bin OpenWrt wrote for this device",
            )
    elif device.recipe == "tplink-v2":
        headers = (uimage.looks_like, tplink.looks_like_v1, tplink.looks_like_v2)
        if any(h(kernel) for h in headers):
            raise WolfError(
                f"kernel {path} has a header, but {device.profile} appends the bare lzma kernel",
                hint="use the lzma kernel (KERNEL := kernel-bin | append-dtb | lzma)",
            )
        if kernel[:1] != bytes([_OPENWRT_LZMA_PROPS]):
            return [f"kernel {path} does not start like OpenWrt's lzma (-lc1 -lp2 -pb2)"]
    return []


def evaluate_files(device: Device, kernel: Path, rootfs: Path) -> FitReport:
    """The fit from the kernel and rootfs files (what is left when OpenWrt deleted the image)."""
    from .imageformats import squashfs_sb

    kdata = _read(kernel, "kernel")
    rdata = _read(rootfs, "rootfs")
    notes = _check_kernel(device, kdata, kernel)
    sb = squashfs_sb.parse(rdata, where=f"rootfs {rootfs}")
    if sb.bytes_used != len(rdata):
        # append-rootfs (dd) appends the whole file, padding included.
        notes.append(f"rootfs file is {len(rdata) - sb.bytes_used} bytes longer than its squashfs")
    rep = evaluate(device, kernel_size=len(kdata), rootfs_size=len(rdata))
    return dataclasses.replace(rep, notes=(*rep.notes, *notes))
