"""A directory of packages a what-if swap takes files from: ``index.json`` (name, version,
depends, conflicts, provides, file, as the stand-in ImageBuilder's packages/ has it) beside the
archives, each a gzip'd tar of the files the package installs (the ``.apk`` files of that
index). OpenWrt 25.12's own APK v3 (ADB) packages are not read: a file that is not a tar
archive is one error line saying so."""

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
    _files: list[PackageFile] = field(default_factory=list, compare=False, repr=False)

    def files(self) -> list[PackageFile]:
        """The regular files it installs (read from the archive once)."""
        if not self._files:
            self._files.extend(_members(self.file))
        return self._files


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


def _strings(v: object, where: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise WolfError(f"{where}: expected a list of package names")
    return tuple(v)


def load(directory: Path) -> Index:
    """The index of a packages directory; one error line when it is not one."""
    directory = Path(directory)
    idx = directory / "index.json"
    if not directory.is_dir():
        raise WolfError(
            f"packages directory not found: {directory}", hint="give the ImageBuilder's packages/"
        )
    if not idx.is_file():
        raise WolfError(
            f"no index.json in {directory}",
            hint="give a packages directory with index.json (the stand-in ImageBuilder's)",
        )
    from .imageformats import bounded

    try:
        raw = json.loads(bounded.read_file(idx, "package index", MAX_INDEX))
    except (ValueError, UnicodeDecodeError) as e:
        raise WolfError(f"cannot read {idx}: {e}") from None
    if not isinstance(raw, list):
        raise WolfError(f"{idx}: expected a list of packages")
    out: dict[str, Package] = {}
    for i, p in enumerate(raw):
        where = f"{idx} entry {i}"
        if not isinstance(p, dict) or not all(isinstance(p.get(k), str) for k in ("name", "file")):
            raise WolfError(f"{where}: needs name and file")
        f = directory / p["file"]
        if Path(p["file"]).name != p["file"]:
            raise WolfError(f"{where}: file {p['file']!r} is not a name in {directory}")
        out[p["name"]] = Package(
            name=p["name"],
            version=str(p.get("version", "")),
            file=f,
            depends=_strings(p.get("depends", []), where),
            conflicts=_strings(p.get("conflicts", []), where),
            provides=_strings(p.get("provides", []), where),
        )
    return Index(directory, out)
