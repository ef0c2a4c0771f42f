"""A root filesystem as measured (firmware/rootfs.py measures it): its size, the TLS libraries
inside it with their xz sizes, and what each installed package occupies. The one model of
it, part of a build's output (results/artifacts.py) and of the rootfs cache."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..catalogue import flavours
from ..trust import untrusted

XZ_SETTINGS = "xz -9e: liblzma preset 9|PRESET_EXTREME, .xz container, CRC64, each file alone"


@dataclass(frozen=True)
class Library:
    path: str  # inside the rootfs, e.g. /usr/lib/libmbedtls.so.3.6.6
    group: str  # the flavour whose lib_globs match ("mbedtls", ...) or "glue" (libustream-ssl)
    size: int  # bytes in the rootfs (OpenWrt installs libraries stripped)
    xz_size: int  # the file alone through xz -9e (XZ_SETTINGS)
    stored_size: int  # bytes it occupies inside the squashfs (its blocks + fragment share)
    package: str | None = None  # the installed package that owns it, when the rootfs says
    stripped: bool | None = None  # False: it still has a .symtab (sizes overstate); None: not ELF


@dataclass(frozen=True)
class PackageUsage:
    name: str
    files: int  # regular files it owns
    size: int  # their bytes, uncompressed
    stored_size: int  # their bytes inside the squashfs (compressed, as flashed)


@dataclass(frozen=True)
class RootfsInfo:
    source: str  # file the squashfs was read from
    offset: int  # where it starts in that file (non-zero inside a sysupgrade image)
    size: int  # superblock bytes_used: what the image recipe appends
    compressor: str
    block_size: int
    inodes: int
    files: int
    files_size: int  # sum of regular files' bytes
    tls_libraries: list[Library] = field(default_factory=list)
    packages: list[PackageUsage] = field(default_factory=list)
    package_source: str | None = None  # which package database the per-package sizes use
    xz_settings: str = XZ_SETTINGS

    @property
    def tls_xz(self) -> int:
        return sum(lib.xz_size for lib in self.tls_libraries)

    @property
    def tls_size(self) -> int:
        return sum(lib.size for lib in self.tls_libraries)

    def flavour_guess(self) -> str | None:
        """The TLS flavour this rootfs was built with: the ustream-ssl variant installed
        (libustream-<flavour>), else the one flavour whose libraries are present."""
        for p in self.packages:
            for name in flavours.names():
                if p.name.startswith(f"libustream-{name}"):
                    return name
        groups = {lib.group for lib in self.tls_libraries} - {"glue"}
        return groups.pop() if len(groups) == 1 else None

    @classmethod
    def from_dict(cls, d: Any, where: str = "rootfs data") -> RootfsInfo:
        """Read back from a record or the cache: every field checked (untrusted.typed)."""
        return untrusted.typed(cls, d, where)

