"""What we boot: a malta kernel (ELF, e.g. openwrt-malta-be-vmlinux-initramfs.elf or main's
...-generic-initramfs-kernel.bin) and optionally a rootfs image. The ELF header is read before
QEMU starts: a file that is not a 32-bit MIPS ELF is a clear error, and its byte order picks
qemu-system-mips or qemu-system-mipsel. The Wi-Fi guest boots an x86 bzImage on QEMU's pc
machine instead (``inspect_bzimage``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ... import paths
from ...errors import WolfError
from ...files import archive
from ...trust.untrusted import os_reason

_EM_MIPS = 8
_ET_EXEC = 2


@dataclass(frozen=True)
class Kernel:
    path: Path
    endian: str  # "big" or "little"
    entry: int
    machine: str = "malta"  # QEMU's machine: malta (MIPS ELF), pc (x86 bzImage), virt (arm64)

    @property
    def arch(self) -> str:
        if self.machine == "pc":
            return "x86_64"
        if self.machine == "virt":
            return "aarch64"
        return "mips" if self.endian == "big" else "mipsel"


# Documentation/arch/arm64/booting.rst: the Image header's magic at offset 0x38, "ARM\x64"
_ARM64_MAGIC_AT, _ARM64_MAGIC = 0x38, b"ARMd"


def inspect_kernel(path: Path) -> Kernel:
    """Read the ELF header (malta) or the arm64 Image header (virt); one line naming the file
    and what is wrong otherwise."""
    if not path.is_file():
        raise WolfError(f"kernel image {path} does not exist", hint="pass --image PATH to a file")
    with path.open("rb") as fh:
        head = fh.read(64)
    if head[_ARM64_MAGIC_AT : _ARM64_MAGIC_AT + 4] == _ARM64_MAGIC:
        return Kernel(path=path, endian="little", entry=0, machine="virt")
    head = head[:52]
    hint = ("pass an OpenWrt malta initramfs ELF such as openwrt-malta-be-vmlinux-initramfs.elf, "
            "or armsr/armv8's ...-generic-initramfs-kernel.bin")  # fmt: skip
    if head[:4] != b"\x7fELF":
        what = "a gzip file" if head[:2] == b"\x1f\x8b" else "not an ELF file"
        if head[:4] == b"\x27\x05\x19\x56":
            what = "a U-Boot uImage, not an ELF file"
        raise WolfError(f"{path} is {what}: QEMU's malta -kernel boots an ELF kernel", hint=hint)
    if len(head) < 52 or head[4] != 1:
        raise WolfError(f"{path} is not a 32-bit ELF (malta be/le are 32-bit)", hint=hint)
    if head[5] not in (1, 2):
        raise WolfError(f"{path}: unknown ELF byte order {head[5]}", hint=hint)
    endian = "little" if head[5] == 1 else "big"
    fmt = "<" if endian == "little" else ">"
    e_type, e_machine, _version, entry = struct.unpack(fmt + "HHII", head[16:28])
    if e_machine != _EM_MIPS:
        raise WolfError(f"{path} is an ELF for machine {e_machine}, not MIPS (8)", hint=hint)
    if e_type != _ET_EXEC:
        raise WolfError(
            f"{path} is a MIPS ELF of type {e_type}, not an executable kernel", hint=hint
        )
    return Kernel(path=path, endian=endian, entry=entry)


def inspect_bzimage(path: Path) -> Kernel:
    """An x86 Linux kernel as QEMU's pc machine boots it with -kernel: the boot sector's
    0xAA55 and the setup header's "HdrS" magic (Linux boot protocol, Documentation/x86/boot)."""
    if not path.is_file():
        raise WolfError(f"kernel image {path} does not exist")
    with path.open("rb") as fh:
        head = fh.read(0x206)
    if len(head) < 0x206 or head[0x1FE:0x200] != b"\x55\xaa" or head[0x202:0x206] != b"HdrS":
        raise WolfError(f"{path} is not an x86 Linux kernel (bzImage): no boot-protocol header",
                        hint="pass a vmlinuz from a Debian amd64 linux-image package")  # fmt: skip
    return Kernel(path=path, endian="little", entry=0, machine="pc")


# A guest's disk: the rootfs partition OpenWrt pads the image to (malta:
# CONFIG_TARGET_ROOTFS_PARTSIZE, 104 MiB by default). Zero padding compresses about 1000:1.
DISK = archive.Limits(total=1 << 30, members=1, ratio=5000)


@contextlib.contextmanager
def private_disk(path: Path) -> Iterator[Path]:
    """The rootfs image (raw, .gz, .xz …) as a disk of this task's own, removed when the task
    ends: the guest writes to its disk (fstools formats the overlay after the squashfs), so
    neither the published file nor a later run sees another run's writes. At most DISK.total
    bytes; runs of zeros stay holes (a sparse file)."""
    hint = "pass --rootfs PATH to an OpenWrt rootfs image (…-rootfs-squashfs.img.gz)"
    top = paths.cache_dir() / "disks"
    top.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=top))
    disk = work / path.name.removesuffix(".gz").removesuffix(".xz")
    try:
        try:
            with (
                archive.decompressed(path, DISK, what="rootfs image", hint=hint) as src,
                disk.open("wb") as dst,
            ):
                size = 0
                while chunk := src.read(1 << 20):
                    if chunk.count(0) == len(chunk):
                        dst.seek(len(chunk), os.SEEK_CUR)
                    else:
                        dst.write(chunk)
                    size += len(chunk)
                dst.truncate(size)
        except OSError as e:
            raise WolfError(f"cannot make a disk of {path} in {work}: {os_reason(e)}") from None
        if size == 0:
            raise WolfError(f"rootfs image {path} is empty", hint=hint)
        yield disk
    finally:
        shutil.rmtree(work, ignore_errors=True)
