"""The footprint records: kind "footprint", a TLS library cross-built at OpenWrt's settings,
its files as installed, xz and squashfs cost (footprint/lab.py writes it; the size report
reads it); kind "tls-stack", the whole TLS stack of a flavour (footprint/stack.py). Stored as
store.Record(kind=..., data=asdict(...))."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..trust import untrusted

KIND = "footprint"
STACK_KIND = "tls-stack"
XZ_SETTINGS = "xz -9e (LZMA2 preset 9 extreme, CRC64), each file compressed on its own, summed"


@dataclass(frozen=True)
class LibraryFile:
    name: str  # the installed file, e.g. libmbedtls.so.3.6.6
    unstripped: int
    stripped: int  # strip --strip-all
    installed: int  # strip --strip-all + sstrip -z: what OpenWrt's rstrip puts in the image
    xz: int  # len(xz -9e of the installed file)
    text: int  # Berkeley sizes, as `size` prints them
    data: int
    bss: int


@dataclass(frozen=True)
class Smoke:
    ok: bool
    seconds: float
    checks: dict[str, str]  # check -> "ok" or what went wrong
    output: str


class _Files:
    """Bytes summed over a package's files, as installed and as xz -9e each."""

    files: list[LibraryFile]

    @property
    def installed(self) -> int:
        return sum(f.installed for f in self.files)

    @property
    def xz(self) -> int:
        return sum(f.xz for f in self.files)


@dataclass(frozen=True)
class Component(_Files):
    """A package built against the library that a flavour ships with it (apk, libustream, ...),
    measured like the library: its files as installed."""

    name: str  # the lab's component name, e.g. "apk"
    package: str  # the OpenWrt package, e.g. apk-wolfssl
    files: list[LibraryFile]
    cache_key: str
    installed_path: str = ""  # where the package installs the (first) file, e.g. usr/bin/apk

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any, where: str = "component") -> Component:
        return untrusted.typed(cls, d, where)


@dataclass(frozen=True)
class Footprint:
    library: str
    title: str
    version: str
    release: str
    arch: str
    config: str
    config_title: str
    ecc: str | None
    toolchain: str  # gcc -dumpmachine + version
    float_abi: str
    source_file: str
    source_sha256: str
    options: list[str]
    cflags: list[str]
    ldflags: list[str]
    files: list[LibraryFile]
    installed: int  # sum of files' installed sizes
    xz: int  # sum of files' xz sizes
    xz_settings: str
    squashfs_cost: int  # growth of an xz squashfs (block squashfs_block) when the files are added
    squashfs_block: int
    text: int
    data: int
    bss: int
    build_seconds: float
    cache_key: str
    commands: list[str]
    log: str
    smoke: Smoke | None = None
    notes: list[str] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)  # exported-symbol patterns; [] = all
    components: list[Component] = field(default_factory=list)  # built against this library

    @property
    def stripped(self) -> int:
        return sum(f.stripped for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any, where: str = "footprint record", path: str = "") -> Footprint:
        """Read back from the store or the lab's cache: every field checked; ``path`` names
        where ``d`` sits in the file (a record's "data")."""
        return untrusted.typed(cls, d, where, path)


@dataclass(frozen=True)
class StackPart(_Files):
    component: str  # "TLS library", "libustream-ssl", "px5g", "uencrypt", "apk"
    package: str  # the OpenWrt package name of this flavour
    files: list[LibraryFile]
    note: str = ""


@dataclass(frozen=True)
class Stack:
    flavour: str
    arch: str
    library: str  # "wolfSSL 5.9.2 minimal"
    parts: list[StackPart]
    squashfs_cost: int  # an xz squashfs grows by this when the whole stack is added
    squashfs_block: int
    notes: list[str] = field(default_factory=list)

    @property
    def installed(self) -> int:
        return sum(p.installed for p in self.parts)

    @property
    def xz(self) -> int:
        return sum(p.xz for p in self.parts)

    def part(self, component: str) -> StackPart | None:
        return next((p for p in self.parts if p.component == component), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any, where: str = "tls-stack record") -> Stack:
        """Read back from the store or the lab's cache: every field checked."""
        return untrusted.typed(cls, d, where)
