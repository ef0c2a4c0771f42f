"""Sizes of a built library as it would sit in an OpenWrt image: strip --strip-all, then
sstrip -z (OpenWrt's default stripper on musl targets: drops section headers and trailing
zeros), xz -9e, the growth of an xz squashfs, and Berkeley .text/.data/.bss."""

from __future__ import annotations

import functools
import lzma
import shutil
import struct
import tempfile
from pathlib import Path

from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from .. import proc
from ..errors import WolfError
from ..results.footprint import LibraryFile
from .toolchain import Toolchain


def xz_size(data: bytes) -> int:
    """What `xz -9e -c | wc -c` prints (same filter, same container, CRC64 check)."""
    return len(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME, check=lzma.CHECK_CRC64))


def berkeley(path: Path) -> tuple[int, int, int]:
    """(text, data, bss) as binutils' `size` (Berkeley format) sums allocated sections."""
    text = data = bss = 0
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        for sec in elf.iter_sections():
            flags = sec["sh_flags"]
            if not flags & SH_FLAGS.SHF_ALLOC:
                continue
            if not flags & SH_FLAGS.SHF_WRITE or flags & SH_FLAGS.SHF_EXECINSTR:
                text += sec["sh_size"]
            elif sec["sh_type"] != "SHT_NOBITS":
                data += sec["sh_size"]
            else:
                bss += sec["sh_size"]
    return text, data, bss


def sstrip(data: bytes, *, zeroes: bool = True) -> bytes:
    """What OpenWrt's sstrip -z leaves of an ELF32/64 file: everything up to the end of the
    last loaded segment, no section header table, optionally no trailing zero bytes (the
    loader zero-fills a segment's memsz beyond its filesz)."""
    if data[:4] != b"\x7fELF":
        raise WolfError("sstrip: not an ELF file")
    is64 = data[4] == 2
    end = ">" if data[5] == 2 else "<"
    if is64:
        (phoff,) = struct.unpack_from(end + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x36)
        off_fmt, off_at, fsz_at = "Q", 8, 32
    else:
        (phoff,) = struct.unpack_from(end + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x2A)
        off_fmt, off_at, fsz_at = "I", 4, 16
    out = bytearray(data)
    size = max(phoff + phentsize * phnum, 64 if is64 else 52)  # at least the ELF header
    phdrs = []
    for i in range(phnum):
        at = phoff + i * phentsize
        p_offset = struct.unpack_from(end + off_fmt, out, at + off_at)[0]
        p_filesz = struct.unpack_from(end + off_fmt, out, at + fsz_at)[0]
        phdrs.append((at, p_offset, p_filesz))
        size = max(size, p_offset + p_filesz)
    del out[size:]
    if zeroes:
        while size > 0 and out[size - 1] == 0:
            size -= 1
        del out[size:]
        for at, p_offset, p_filesz in phdrs:
            if p_offset + p_filesz > size:
                struct.pack_into(end + off_fmt, out, at + fsz_at, max(0, size - p_offset))
    # no section headers any more: e_shoff, e_shnum, e_shstrndx = 0
    if is64:
        struct.pack_into(end + "Q", out, 0x28, 0)
        struct.pack_into(end + "HH", out, 0x3C, 0, 0)
    else:
        struct.pack_into(end + "I", out, 0x20, 0)
        struct.pack_into(end + "HH", out, 0x30, 0, 0)
    return bytes(out)


def sstrip_files(argv: list[str]) -> None:
    """The sstrip command line OpenWrt's rstrip.sh runs (`sstrip [-z] FILE...`), in place;
    the stand-in SDK's staging_dir/host/bin/sstrip (tests/standin/sdk_assemble.py)."""
    zeroes = "-z" in argv
    for name in (a for a in argv if not a.startswith("-")):
        f = Path(name)
        f.write_bytes(sstrip(f.read_bytes(), zeroes=zeroes))


def strip_and_measure(tc: Toolchain, libs: list[Path], out: Path) -> list[LibraryFile]:
    """Strip each library into out/stripped/ (for nm/readelf) and out/installed/ (sstripped,
    what an image holds), and measure both."""
    (out / "stripped").mkdir(parents=True, exist_ok=True)
    (out / "installed").mkdir(parents=True, exist_ok=True)
    files = []
    for lib in libs:
        stripped = out / "stripped" / lib.name
        proc.run([tc.tool("strip"), "--strip-all", "-o", stripped, lib], timeout=120)
        installed = out / "installed" / lib.name
        blob = sstrip(stripped.read_bytes())
        installed.write_bytes(blob)
        text, data, bss = berkeley(stripped)
        files.append(
            LibraryFile(
                name=lib.name,
                unstripped=lib.stat().st_size,
                stripped=stripped.stat().st_size,
                installed=len(blob),
                xz=xz_size(blob),
                text=text,
                data=data,
                bss=bss,
            )
        )
    return files


def _squashfs(root: Path, image: Path, block: int) -> int:
    proc.run(
        ["mksquashfs", root, image, "-comp", "xz", "-b", str(block), "-noappend", "-no-xattrs",
         "-all-root", "-nopad", "-mkfs-time", "0", "-all-time", "0", "-quiet", "-no-progress"],
        timeout=600,
    )  # fmt: skip
    return image.stat().st_size


def squashfs_cost(files: list[Path], block: int) -> int:
    """Bytes an xz squashfs of the target's block size grows by when the files are added to
    usr/lib (Debian's mksquashfs: OpenWrt's -Xpreset 9 -Xe -Xlc 0 -Xlp 2 -Xpb 2 tuning needs
    OpenWrt's own mksquashfs patches)."""
    with tempfile.TemporaryDirectory(prefix="footprint-sqfs-") as tmp:
        t = Path(tmp)
        (t / "with" / "usr" / "lib").mkdir(parents=True)
        for f in files:
            shutil.copyfile(f, t / "with" / "usr" / "lib" / f.name)
        return _squashfs(t / "with", t / "with.sqfs", block) - _empty_squashfs(block)


@functools.cache
def _empty_squashfs(block: int) -> int:
    """The image without the library (an empty usr/lib): made once per block size."""
    with tempfile.TemporaryDirectory(prefix="footprint-sqfs-") as tmp:
        (Path(tmp) / "root" / "usr" / "lib").mkdir(parents=True)
        return _squashfs(Path(tmp) / "root", Path(tmp) / "empty.sqfs", block)
