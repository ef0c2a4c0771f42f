"""A directory of packages a what-if swap takes files from: ``index.json`` (name, version,
depends, conflicts, provides, file, as the stand-in ImageBuilder's packages/ has it) beside the
archives, each a gzip'd tar of the files the package installs (the ``.apk`` files of that
index). OpenWrt 25.12's own APK v3 (ADB) packages are not read: a file that is not a tar
archive is one error line saying so. Archives are read and unpacked only by openwrt_wolf.archive
(its rules: nothing outside the root, no devices, bounded size and ratio)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .. import archive
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


# what the error line says when a package cannot be read
NOT_READ = (
    "what-if reads tar.gz packages with an index.json; OpenWrt's APK v3 packages are not read"
)


def _members(path: Path) -> list[PackageFile]:
    """Regular files (and hard links to them) with their size and sha256, streamed."""
    out: dict[str, PackageFile] = {}
    for m, data in archive.members(path, archive.PACKAGE, what="package", hint=NOT_READ):
        if m.kind == "file" and m.name != ".PKGINFO":
            h = hashlib.sha256()
            for chunk in data:
                h.update(chunk)
            out[m.name] = PackageFile("/" + m.name, m.size, h.hexdigest())
        elif m.kind == "hardlink" and m.link in out:
            out[m.name] = PackageFile("/" + m.name, out[m.link].size, out[m.link].sha256)
        else:
            out.pop(m.name, None)  # a later member of that name replaces the file
    return list(out.values())


def extract(pkg: Package, root: Path) -> None:
    """Install the package's files under root, as the ImageBuilder's install step does, by
    archive.extract's rules (nothing outside root, no devices, bounded)."""
    archive.extract(
        pkg.file, root, archive.PACKAGE, what="package", hint=NOT_READ, exclude={".PKGINFO"}
    )


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
