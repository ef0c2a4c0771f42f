"""A directory of packages a what-if swap takes files from, as an ImageBuilder's packages/
holds them: OpenWrt 25.12's ``packages.adb`` with APK v3 (ADB) packages, 24.10's opkg
``Packages`` with ``.ipk`` files (both read in firmware/pkgformats.py), or an ``index.json``
list (name, version, depends, conflicts, provides, file) beside gzip'd tars of the files each
package installs. A package is found by its name or by what it provides: OpenWrt names a
package with its ABI version (libmbedtls21) and has it provide the plain name (libmbedtls)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tarfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ..errors import WolfError

MAX_INDEX = 64 << 20  # bytes of index.json we read


@dataclass(frozen=True)
class PackageFile:
    path: str  # "/usr/lib/libwolfssl.so.5.9.1.ee39414e"
    size: int
    sha256: str


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    file: Path  # the archive
    depends: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    provides: tuple[str, ...] = ()
    abi: str = ""  # ABI_VERSION, the suffix of name (libmbedtls21: "21")
    format: str = "tar"  # "tar" (index.json), "adb" (packages.adb), "ipk" (Packages)
    apk: Path | None = None  # apk-tools that reads an "adb" package
    _files: list[PackageFile] = field(default_factory=list, compare=False, repr=False)

    @property
    def base(self) -> str:
        """The name without its ABI suffix, as index.json (format 2) and flavours name it."""
        plain = self.name.removesuffix(self.abi) if self.abi else self.name
        return plain[:-1] if self.abi and plain.endswith("-") and plain[-2:-1].isdigit() else plain

    def files(self) -> list[PackageFile]:
        """The regular files it installs (read from the archive once)."""
        if not self._files:
            if self.format == "tar":
                self._files.extend(_members(self.file))
            else:
                self._files.extend(PackageFile(*f) for f in _format_files(self))
        return self._files


def _format_files(pkg: Package) -> list[tuple[str, int, str]]:
    from . import pkgformats

    if pkg.format == "adb":
        assert pkg.apk is not None
        return pkgformats.adb_files(pkg.apk, pkg.file)
    try:
        return pkgformats.ipk_files(pkg.file)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise WolfError(f"package {pkg.file} is not an .ipk ({e})") from None


def _not_a_package(archive: Path, e: Exception) -> WolfError:
    return WolfError(
        f"package {archive} is not a tar archive ({e})",
        hint="what-if reads tar.gz packages with an index.json; OpenWrt's APK v3 "
        "packages are not read",
    )


def _members(archive: Path) -> list[PackageFile]:
    try:
        with tarfile.open(archive, "r:*") as tar:
            out = []
            for m in tar:
                if m.isfile() and m.name != ".PKGINFO":
                    fh = tar.extractfile(m)
                    assert fh is not None
                    digest = hashlib.sha256(fh.read()).hexdigest()
                    out.append(PackageFile("/" + m.name.lstrip("./"), m.size, digest))
            return out
    except (tarfile.TarError, OSError, EOFError) as e:
        raise _not_a_package(archive, e) from None


def _extract_within(tar: tarfile.TarFile, members: list[tarfile.TarInfo], root: Path) -> None:
    """Extract with the "tar" filter: no absolute paths, nothing outside root (also through a
    link extracted before). Debian 12's Python 3.11.2 predates extraction filters (3.11.4):
    there each member's destination is checked the same way before it is written."""
    if hasattr(tarfile, "tar_filter"):
        tar.extractall(root, members, filter="tar")
        return
    top = os.path.realpath(root)
    for m in members:
        m.name = m.name.lstrip("/")
        dest = os.path.realpath(os.path.join(top, m.name))
        if dest != top and not dest.startswith(top + os.sep):
            raise tarfile.TarError(f"{m.name!r} would be written outside {root}")
        m.mode &= ~(stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWGRP | stat.S_IWOTH)
        tar.extract(m, root)


def extract(pkg: Package, root: Path) -> None:
    """Install the package's files under root, as the ImageBuilder's install step does."""
    if pkg.format == "adb":
        from . import pkgformats

        assert pkg.apk is not None
        pkgformats.adb_extract(pkg.apk, pkg.file, root)
        return
    if pkg.format == "ipk":
        from . import pkgformats

        try:
            with pkgformats.ipk_data(pkg.file) as tar:
                _extract_within(tar, [m for m in tar.getmembers() if m.name not in (".", "./")],
                                root)  # fmt: skip
        except (tarfile.TarError, OSError, EOFError) as e:
            raise WolfError(f"package {pkg.file} is not an .ipk ({e})") from None
        return
    try:
        with tarfile.open(pkg.file, "r:*") as tar:
            members = [m for m in tar.getmembers() if m.name != ".PKGINFO"]
            _extract_within(tar, members, root)
    except (tarfile.TarError, OSError, EOFError) as e:
        raise _not_a_package(pkg.file, e) from None


@dataclass(frozen=True)
class Index:
    source: Path  # the directory
    packages: dict[str, Package]

    @cached_property
    def providers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for p in self.packages.values():
            for v in p.provides:
                out.setdefault(v, p.name)
        return out

    def get(self, name: str) -> Package | None:
        """A package by name, or by what it provides."""
        hit = self.packages.get(name)
        if hit is None and name in self.providers:
            hit = self.packages[self.providers[name]]
        return hit

    def format(self) -> str:
        """How its packages are stored: "adb", "ipk" or "tar"."""
        return next((p.format for p in self.packages.values()), "tar")

    def base(self, name: str) -> str:
        """A package name as flavours name it: without the ABI suffix (libustream-mbedtls20201210
        -> libustream-mbedtls); a name the index does not know stays as it is."""
        pkg = self.packages.get(name)
        return pkg.base if pkg else name


def _strings(v: object, where: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise WolfError(f"{where}: expected a list of package names")
    return tuple(v)


def load(directory: Path) -> Index:
    """The index of a packages directory; one error line when it is not one."""
    from . import pkgformats
    from .imageformats import bounded

    directory = Path(directory)
    idx = directory / "index.json"
    if not directory.is_dir():
        raise WolfError(
            f"packages directory not found: {directory}", hint="give the ImageBuilder's packages/"
        )
    fmt, apk, where = "tar", None, str(idx)
    if (directory / "packages.adb").is_file():
        bounded.read_file(directory / "packages.adb", "package index", MAX_INDEX)
        fmt, apk, where = "adb", pkgformats.find_apk(directory), str(directory / "packages.adb")
        raw: object = pkgformats.adb_index(apk, directory)
    elif (directory / "Packages").is_file():
        text = bounded.read_file(directory / "Packages", "package index", MAX_INDEX)
        fmt, where = "ipk", str(directory / "Packages")
        raw = pkgformats.opkg_index(text.decode(errors="replace"))
    elif not idx.is_file():
        raise WolfError(
            f"no packages.adb, Packages or index.json in {directory}",
            hint="give the ImageBuilder's packages/ directory",
        )
    else:
        try:
            raw = json.loads(bounded.read_file(idx, "package index", MAX_INDEX))
        except (ValueError, UnicodeDecodeError) as e:
            raise WolfError(f"cannot read {idx}: {e}") from None
        if isinstance(raw, dict) and raw.get("version") == 2:
            raise WolfError(
                f"{idx} is OpenWrt's index.json format 2 (names and versions only) and there "
                "is no packages.adb beside it",
                hint="give the packages/ directory that holds packages.adb and the .apk files",
            )
    if not isinstance(raw, list):
        raise WolfError(f"{where}: expected a list of packages")
    out: dict[str, Package] = {}
    for i, p in enumerate(raw):
        entry = f"{where} entry {i}"
        if not isinstance(p, dict) or not all(isinstance(p.get(k), str) for k in ("name", "file")):
            raise WolfError(f"{entry}: needs name and file")
        f = directory / p["file"]
        if Path(p["file"]).name != p["file"] or not p["file"]:
            raise WolfError(f"{entry}: file {p['file']!r} is not a name in {directory}")
        out[p["name"]] = Package(
            name=p["name"],
            version=str(p.get("version", "")),
            file=f,
            depends=_strings(p.get("depends", []), entry),
            conflicts=_strings(p.get("conflicts", []), entry),
            provides=_strings(p.get("provides", []), entry),
            abi=str(p.get("abi", "")),
            format=fmt,
            apk=apk,
        )
    return Index(directory, out)
