"""A directory of packages a what-if swap takes files from, as an ImageBuilder's packages/
holds them: OpenWrt 25.12's ``packages.adb`` with APK v3 (ADB) packages, 24.10's opkg
``Packages`` with ``.ipk`` files (both read in whatif/pkgformats.py), or an ``index.json``
list (name, version, depends, conflicts, provides, file) beside gzip'd tars of the files each
package installs. A package is found by its name or by what it provides: OpenWrt names a
package with its ABI version (libmbedtls21) and has it provide the plain name (libmbedtls).
Tar and .ipk packages are read and unpacked only by openwrt_wolf.files.archive; what apk extracts
from an ADB package goes into the image through it too (archive.place_tree): nothing outside
the root, no devices, bounded size and ratio."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import WolfError
from ..files import archive
from ..trust import untrusted

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

    @property
    def base(self) -> str:
        """The name without its ABI suffix, as index.json (format 2) and flavours name it."""
        plain = self.name.removesuffix(self.abi) if self.abi else self.name
        return plain[:-1] if self.abi and plain.endswith("-") and plain[-2:-1].isdigit() else plain

    def files(self) -> list[PackageFile]:
        """The regular files it installs (read from the archive once)."""
        return self._regular

    def links(self) -> list[str]:
        """The paths of the symbolic links it installs: removing the package removes them too
        (libmbedtls.so.21, the ABI name of libmbedtls.so.3.6.6)."""
        return [p for kind, p in self._other if kind == "symlink"]

    def dirs(self) -> list[str]:
        """The directories it owns (removed with it when nothing is left in them)."""
        return [p for kind, p in self._other if kind == "dir"]

    # read once each, an empty result too (a package may install no file, link or folder)
    @cached_property
    def _regular(self) -> list[PackageFile]:
        if self.format == "tar":
            return _members(self.file)
        return [PackageFile(*f) for f in _format_files(self)]

    @cached_property
    def _other(self) -> list[tuple[str, str]]:
        if self.format == "adb":
            from . import pkgformats

            assert self.apk is not None
            return pkgformats.adb_entries(self.apk, self.file)
        inner = "data.tar.gz" if self.format == "ipk" else None
        hint = NOT_IPK if inner else NOT_TAR
        found = archive.members(self.file, archive.PACKAGE, what="package", hint=hint,
                                inner=inner)  # fmt: skip
        return [(m.kind, "/" + m.name.rstrip("/")) for m, _ in found
                if m.kind in ("symlink", "dir")]  # fmt: skip


# what the error line says when a package cannot be read
NOT_TAR = "an index.json package is a tar.gz of the files it installs"
NOT_IPK = "an .ipk is a tar.gz holding data.tar.gz"


def _format_files(pkg: Package) -> list[tuple[str, int, str]]:
    from . import pkgformats

    if pkg.format == "adb":
        assert pkg.apk is not None
        return pkgformats.adb_files(pkg.apk, pkg.file)
    return [(f.path, f.size, f.sha256) for f in _members(pkg.file, inner="data.tar.gz")]


def _members(path: Path, inner: str | None = None) -> list[PackageFile]:
    """Regular files (and hard links to them) with their size and sha256, streamed."""
    out: dict[str, PackageFile] = {}
    hint = NOT_IPK if inner else NOT_TAR
    for m, data in archive.members(path, archive.PACKAGE, what="package", hint=hint, inner=inner):
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
    archive's rules (nothing outside root, no devices, bounded). An ADB package is unpacked
    by apk into an empty directory first (apk extract), and put into root from there."""
    if pkg.format == "adb":
        from . import pkgformats

        assert pkg.apk is not None
        size = sum(f.size for f in pkg.files())
        if size > archive.PACKAGE.total:  # apk checks each file against these sizes
            raise WolfError(f"package {pkg.file} installs {size:,} bytes, more than "
                            f"{archive.PACKAGE.total:,}")  # fmt: skip
        scratch = Path(tempfile.mkdtemp(prefix=".apk-extract-", dir=root.parent))
        try:
            pkgformats.adb_extract(pkg.apk, pkg.file, scratch)
            archive.place_tree(scratch, root, archive.PACKAGE, what=f"package {pkg.file}")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return
    inner, hint = ("data.tar.gz", NOT_IPK) if pkg.format == "ipk" else (None, NOT_TAR)
    archive.extract(pkg.file, root, archive.PACKAGE, what="package", hint=hint, inner=inner,
                    exclude={".PKGINFO"})  # fmt: skip


@dataclass(frozen=True)
class Index:
    source: Path  # the (first) directory
    packages: dict[str, Package]
    more: tuple[Path, ...] = ()  # further directories, after source (load_many)

    @property
    def sources(self) -> tuple[Path, ...]:
        return (self.source, *self.more)

    def where(self) -> str:
        return " + ".join(str(s) for s in self.sources)

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
    from ..firmware.imageformats import bounded
    from . import pkgformats

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
        raw = untrusted.loads_json(bounded.read_file(idx, "package index", MAX_INDEX), str(idx))
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


def load_many(directories: list[Path]) -> Index:
    """Several packages directories as one, as apk reads several repositories: an
    ImageBuilder's packages/ and a mirror's feeds (a release ImageBuilder holds few packages
    itself: the rest is in the release's feeds). A name in more than one takes the first
    directory's package. The directories must hold one format."""
    if not directories:
        raise WolfError("no packages directory given")
    indexes = [load(d) for d in directories]
    formats = {i.format() for i in indexes if i.packages}
    if len(formats) > 1:
        raise WolfError(
            f"packages directories of different formats ({', '.join(sorted(formats))}): "
            + ", ".join(str(d) for d in directories),
            hint="give the directories of one release",
        )
    merged: dict[str, Package] = {}
    for i in indexes:
        for name, pkg in i.packages.items():
            merged.setdefault(name, pkg)
    return Index(indexes[0].source, merged, tuple(i.source for i in indexes[1:]))
