"""Measuring a squashfs root filesystem: its size, the TLS libraries inside it with their xz
sizes, and what each installed package contributes. Results are cached by the file's
identity (path, size, mtime, inode), xz sizes by the library's sha256, so a repeated report
over unchanged artifacts costs a small fraction of the first.

xz settings: every library is compressed alone as ``xz -9e`` does it: liblzma preset
9 | PRESET_EXTREME, .xz container, CRC64 check, one thread (byte-identical to xz-utils 5.4's
output, which the tests check against the command itself).
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import json
import lzma
import os
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from .. import paths
from ..catalogue import flavours
from ..errors import WolfError
from ..files import archive
from ..results.rootfs import Library, PackageUsage, RootfsInfo
from ..trust import untrusted
from .imageformats.bounded import MAX_IMAGE
from .squashfs import Entry, SquashFS

CACHE_VERSION = "rootfs-2"

# Where package managers keep the file list of each installed package inside the rootfs:
# OpenWrt's apk packages ship /lib/apk/packages/<pkg>.list (25.12+), opkg keeps
# /usr/lib/opkg/info/<pkg>.list (24.10 and older). Both: one "/path" per line.
_PKG_LIST_DIRS = ("/lib/apk/packages", "/usr/lib/opkg/info")


def tls_patterns() -> list[tuple[str, str]]:
    """(glob, group) for every TLS library file name of data/flavours.toml."""
    out = [(g, f.name) for f in flavours.flavours().values() for g in f.lib_globs]
    return out + [(g, "glue") for g in flavours.glue_globs()]


def _group(name: str) -> str | None:
    for pattern, group in tls_patterns():
        if fnmatch.fnmatchcase(name, pattern):
            return group
    return None


def is_stripped(data: bytes) -> bool | None:
    """Whether an ELF file has lost its symbol table (.symtab), as OpenWrt's build strips
    every library it installs; None when the bytes are not ELF."""
    if data[:4] != b"\x7fELF":
        return None
    from elftools.common.exceptions import ELFError  # here: only a measurement reads ELF
    from elftools.elf.elffile import ELFFile

    try:
        return ELFFile(io.BytesIO(data)).get_section_by_name(".symtab") is None
    except ELFError:
        return None


def _cache(*parts: str) -> Path:
    return paths.cache_dir().joinpath("size-report", *parts)


def xz_size(data: bytes) -> int:
    """Bytes of data through xz -9e; cached by content so each library is compressed once."""
    digest = hashlib.sha256(data).hexdigest()
    hit = _cache("xz9e", digest[:2], digest)
    try:
        return int(hit.read_text())
    except (FileNotFoundError, ValueError):
        pass
    n = len(
        lzma.compress(
            data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9 | lzma.PRESET_EXTREME
        )
    )
    paths.cache_write_text(hit, str(n))  # a link at its name replaced, none followed
    return n


def _identity(path: Path, offset: int) -> str:
    st = path.stat()
    ident = f"{CACHE_VERSION}|{path.resolve()}|{offset}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"
    ident += "|" + json.dumps(tls_patterns())  # a changed flavours.toml invalidates it
    return hashlib.sha256(ident.encode()).hexdigest()


# malta's *-rootfs-squashfs.img.gz: a squashfs no bigger than a flash (bounded.MAX_IMAGE),
# and the gzip stream, as archive.py reads any, past 64 MiB at most 100 times its size
_GZ_ROOTFS = archive.Limits(total=MAX_IMAGE, members=1, ratio=100)


def _gunzip(path: Path, into: Path) -> Path:
    """An .img.gz rootfs as a temporary squashfs file in ``into`` (the caller removes it):
    only the filesystem's own bytes (bytes_used), not the zero padding to the partition."""
    hint = "re-download or rebuild it"
    with archive.decompressed(path, _GZ_ROOTFS, what="rootfs", hint=hint) as src:
        head = src.read(96)
        if len(head) < 96 or head[:4] != b"hsqs":
            raise WolfError(f"not a squashfs filesystem: {path} (gunzipped, no 'hsqs' magic)")
        used = int.from_bytes(head[40:48], "little")
        if used > MAX_IMAGE:  # said before a byte is written: nothing to clean up
            raise WolfError(
                f"rootfs {path}: its squashfs says it has {used:,} bytes, more than any flash "
                f"holds ({MAX_IMAGE:,} B)",
                hint="the image is corrupt or crafted",
            )
        into.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=into, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as dst:
                dst.write(head)
                left = used - len(head)
                while left > 0 and (chunk := src.read(min(left, 1 << 20))):
                    dst.write(chunk)
                    left -= len(chunk)
        except OSError as e:  # the cache's disk: full, read-only
            os.unlink(tmp)
            raise WolfError(f"cannot unpack rootfs {path} into {into}: {e.strerror}") from None
        except BaseException:  # a bomb, a damaged stream, Ctrl-C: no partial file stays
            os.unlink(tmp)
            raise
    return Path(tmp)


def measure_rootfs(path: Path, offset: int = 0, *, jobs: int | None = None) -> RootfsInfo:
    """Measure the squashfs at ``offset`` in ``path`` (cached by the file's identity); an
    .img.gz is unpacked into a temporary file for the measurement and removed after it."""
    path = Path(path)
    if not path.is_file():
        raise WolfError(f"rootfs not found: {path}", hint="check the path")
    hit = _cache("rootfs", _identity(path, offset) + ".json")
    cached = untrusted.load_cached(hit, "cached rootfs measurement", RootfsInfo.from_dict)
    if cached is not None:
        return cached  # else absent or not one of ours: measured again
    if path.name.endswith(".gz"):
        unpacked = _gunzip(path, _cache("unpacked"))
        try:
            info = replace(_measure(unpacked, 0, jobs), source=str(path))
        finally:
            unpacked.unlink()
    else:
        info = _measure(path, offset, jobs)
    paths.cache_write_text(hit, json.dumps(asdict(info)))
    return info


def _measure(path: Path, offset: int, jobs: int | None) -> RootfsInfo:
    with SquashFS(path, offset) as fs:
        sb = fs.superblock
        entries = fs.entries()
        files = [e for e in entries if e.is_file]
        owners, pkg_source, pkg_lists = _package_owners(fs, entries)
        libs = [(e, g) for e in files if (g := _group(e.name))]
        # Read in this thread (one file handle), compress in parallel: liblzma drops the GIL.
        # biggest first, so the longest compression starts at once (shortest wall time)
        contents = sorted(((e, g, fs.read(e)) for e, g in libs), key=lambda c: -c[0].size)
        with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
            sizes = list(pool.map(lambda item: xz_size(item[2]), contents))
        tls = [
            Library(e.path, g, e.size, xz, fs.stored_size(e), owners.get(e.path), is_stripped(d))
            for (e, g, d), xz in sorted(
                zip(contents, sizes, strict=True), key=lambda c: c[0][0].path
            )
        ]
        packages = _package_usage(fs, files, pkg_lists)
        return RootfsInfo(
            source=str(path),
            offset=offset,
            size=sb.bytes_used,
            compressor=sb.compressor,
            block_size=sb.block_size,
            inodes=sb.inode_count,
            files=len(files),
            files_size=sum(e.size for e in files),
            tls_libraries=tls,
            packages=packages,
            package_source=pkg_source,
        )


def _package_owners(
    fs: SquashFS, entries: Iterable[Entry]
) -> tuple[dict[str, str], str | None, dict[str, list[str]]]:
    """path -> package, from the package lists inside the rootfs."""
    lists: dict[str, list[str]] = {}
    source = None
    for e in entries:
        parent, _, name = e.path.rpartition("/")
        if e.is_file and parent in _PKG_LIST_DIRS and name.endswith(".list"):
            text = fs.read(e).decode("utf-8", "replace")
            lists[name[: -len(".list")]] = [
                line.split("\t")[0].strip() for line in text.splitlines() if line.strip()
            ]
            source = f"{parent}/*.list"
    owners = {p: pkg for pkg, ps in lists.items() for p in ps}
    return owners, source, lists


def _package_usage(
    fs: SquashFS, files: list[Entry], lists: dict[str, list[str]]
) -> list[PackageUsage]:
    by_path = {e.path: e for e in files}
    out = []
    for pkg, ps in lists.items():
        owned = [by_path[p] for p in ps if p in by_path]
        out.append(
            PackageUsage(
                pkg, len(owned), sum(e.size for e in owned), sum(fs.stored_size(e) for e in owned)
            )
        )
    return sorted(out, key=lambda p: (-p.stored_size, p.name))
