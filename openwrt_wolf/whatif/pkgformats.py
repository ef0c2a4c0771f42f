"""The package directories OpenWrt's own ImageBuilders ship, for what-if (whatif/pkgsource.py):

- 25.12+ (apk): ``packages.adb`` (apk mkndx) beside APK v3 (ADB) packages. Both are read by
  apk-tools itself (``apk adbdump --format json``), the index for names, versions, depends,
  provides and the ``openwrt:abiversion`` tag, a package for its files (path, size, sha256);
  a package is installed with ``apk extract``. The apk is the ImageBuilder's own
  (staging_dir/host/bin/apk), else the one the footprint lab builds from ../shared.
- 24.10 (opkg): the ``Packages`` index (control paragraphs: Package, Version, Depends,
  Provides, ABIVersion, Filename) beside ``.ipk`` files (a gzip'd tar holding data.tar.gz,
  read and unpacked by openwrt_wolf.files.archive, ``inner="data.tar.gz"``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import proc
from ..errors import CommandError, WolfError
from ..trust import untrusted

APK_TIMEOUT = 300.0
MAX_DUMP = 256 << 20  # characters of adbdump JSON we parse
ABI_TAG = "openwrt:abiversion="


def ib_tool(packages_dirs: Sequence[Path], name: str) -> Path | None:
    """<ImageBuilder>/staging_dir/host/bin/<name> for the first of these directories that is
    an ImageBuilder's packages/ (a build's own packages directory comes first, and is not)."""
    for d in packages_dirs:
        path = Path(d).resolve().parent / "staging_dir" / "host" / "bin" / name
        if path.is_file():
            return path
    return None


def find_apk(packages_dir: Path) -> Path:
    """apk-tools for reading packages.adb: the ImageBuilder's own, else the footprint lab's
    native build (needs ../shared's apk-tools snapshot)."""
    found = ib_tool([packages_dir], "apk")
    if found:
        return found
    from ..footprint import apk as apk_build

    try:
        return apk_build.native_build("openssl").binary
    except WolfError as e:
        raise WolfError(
            f"reading {packages_dir}/packages.adb needs apk-tools 3: no "
            f"staging_dir/host/bin/apk beside it, and building one failed ({e.message})",
            hint="give --packages the packages/ directory of the ImageBuilder",
        ) from None


def _regular(path: Path) -> None:
    """apk is handed regular files only: a FIFO would block it, /dev/zero never end."""
    untrusted.open_file(path, "package", hint="give the ImageBuilder's packages/").close()


def _dump(apk: Path, path: Path) -> dict[str, Any]:
    _regular(path)
    try:
        out = proc.run([apk, "adbdump", "--format", "json", path], timeout=APK_TIMEOUT).output
    except CommandError as e:
        tail = " ".join(e.tail[-2:]) or e.message
        raise WolfError(
            f"apk cannot read {path}: {tail}",
            hint="is it an APK v3 package or index (apk mkpkg/mkndx)?",
        ) from None
    if len(out) > MAX_DUMP:
        raise WolfError(f"{path}: apk adbdump printed {len(out):,} characters, more than an index")
    data = untrusted.loads_json(
        out[out.index("{") :] if "{" in out else out, f"{path}: apk adbdump's output"
    )
    if not isinstance(data, dict):
        raise WolfError(f"{path}: apk adbdump gave no object")
    return data


def _names(values: object, where: str) -> tuple[str, ...]:
    """apk dependency strings (name, name=version, name>=v, !name) to names."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise WolfError(f"{where}: expected a list of package names")
    return tuple(re.split(r"[<>=~]", v, maxsplit=1)[0] for v in values if v)


def adb_index(apk: Path, directory: Path) -> list[dict[str, Any]]:
    """packages.adb's packages: name, version, depends, provides, abi, file."""
    data = _dump(apk, directory / "packages.adb")
    out = []
    for i, p in enumerate(data.get("packages") or []):
        where = f"{directory}/packages.adb package {i}"
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise WolfError(f"{where}: has no name")
        name, version = p["name"], str(p.get("version", ""))
        tags = p.get("tags") or []
        abi = next((t[len(ABI_TAG) :] for t in tags if isinstance(t, str) and
                    t.startswith(ABI_TAG)), "")  # fmt: skip
        conflicts = tuple(d[1:] for d in _names(p.get("depends") or [], where) if d[:1] == "!")
        out.append({
            "name": name, "version": version, "abi": abi,
            "depends": [d for d in _names(p.get("depends") or [], where) if d[:1] != "!"],
            "conflicts": list(conflicts),
            "provides": list(_names(p.get("provides") or [], where)),
            # package/Makefile and the ImageBuilder name the files <name>-<version>.apk
            "file": f"{name}-{version}.apk",
        })  # fmt: skip
    return out


def adb_files(apk: Path, package: Path) -> list[tuple[str, int, str]]:
    """(path, size, sha256) of the regular files an ADB package installs."""
    data = _dump(apk, package)
    out = []
    for d in data.get("paths") or []:
        base = d.get("name", "") if isinstance(d, dict) else ""
        for f in (d.get("files") or []) if isinstance(d, dict) else []:
            if not isinstance(f, dict) or "name" not in f:
                continue
            if f.get("target") is not None:  # a symlink
                continue
            path = f"/{base}/{f['name']}" if base else f"/{f['name']}"
            out.append((path, int(f.get("size", 0)), str(f.get("hash", ""))))
    return out


def adb_entries(apk: Path, package: Path) -> list[tuple[str, str]]:
    """("symlink" | "dir", path) of what an ADB package installs besides regular files: its
    links (libmbedtls.so.21 -> ...) and the directories it owns."""
    data = _dump(apk, package)
    out = []
    for d in data.get("paths") or []:
        if not isinstance(d, dict):
            continue
        base = d.get("name", "")
        if base:
            out.append(("dir", f"/{base}"))
        for f in d.get("files") or []:
            if isinstance(f, dict) and "name" in f and f.get("target") is not None:
                out.append(("symlink", f"/{base}/{f['name']}" if base else f"/{f['name']}"))
    return out


def adb_extract(apk: Path, package: Path, root: Path) -> None:
    """apk's own extraction of one package into root (as `apk add --root` lays files out);
    root is an empty directory (pkgsource.extract), what apk wrote is checked from there."""
    _regular(package)
    try:
        proc.run([apk, "extract", "--allow-untrusted", "--destination", root, package],
                 timeout=APK_TIMEOUT)  # fmt: skip
    except CommandError as e:
        raise WolfError(f"apk could not extract {package}: {' '.join(e.tail[-2:])}") from None


# --- opkg (24.10) ------------------------------------------------------------------------


def _paragraphs(text: str) -> list[dict[str, str]]:
    out = []
    for para in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in para.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
        if "Package" in fields:
            out.append(fields)
    return out


def _list(field: str) -> list[str]:
    # "libc, libmbedtls21 (>= 3.6)" -> ["libc", "libmbedtls21"]
    return [d.split()[0] for d in field.split(",") if d.strip()]


def opkg_index(text: str) -> list[dict[str, Any]]:
    """The Packages index: name, version, depends, conflicts, provides, abi, file."""
    return [
        {
            "name": p["Package"], "version": p.get("Version", ""), "abi": p.get("ABIVersion", ""),
            "depends": _list(p.get("Depends", "")), "conflicts": _list(p.get("Conflicts", "")),
            "provides": _list(p.get("Provides", "")),
            "file": p.get("Filename", "").removeprefix("./"),
        }
        for p in _paragraphs(text)
    ]  # fmt: skip


# --- the swap by apk itself (25.12+) ------------------------------------------------------


def _host(packages_dirs: Sequence[Path], name: str) -> str:
    """A command of the ImageBuilder's staging_dir/host/bin (its gzip and tar wrote the
    rootfs's package database: Debian's GNU tar deletes other members), else the host's."""
    found = ib_tool(packages_dirs, name)
    return str(found) if found else name


def apk_database(
    apk: Path,
    packages_dir: Path,
    arch: str,
    world: list[str],
    scratch: Path,
    epoch: int,
    more: tuple[Path, ...] = (),
) -> Path:
    """The package database a build with this world writes: `apk add --initdb --no-scripts`
    into a scratch root, as the ImageBuilder's package_install runs it, then include/rootfs.mk's
    prepare_rootfs steps on lib/apk/db/scripts.tar (each *.post-install taken out with the same
    tar, in glob order, then gzip -9n). The scripts are not run (a package is untrusted input;
    docs/whatif.md). Returns the scratch root."""
    gzip, tar = _host((packages_dir, *more), "gzip"), _host((packages_dir, *more), "tar")
    argv: list[str | Path] = [
        apk, "--root", scratch, "--keys-dir", packages_dir.resolve().parent / "keys",
        "--no-logfile", "--no-network", "--no-cache", "--allow-untrusted",
        "--repositories-file", "/dev/null",
        *(a for d in (packages_dir, *more) for a in ("--repository", d / "packages.adb")),
        "add", "--initdb", "--no-scripts", "--arch", arch, *world,
    ]  # fmt: skip
    scratch.mkdir(parents=True)
    try:
        proc.run(argv, timeout=APK_TIMEOUT, env={"SOURCE_DATE_EPOCH": str(epoch)})
    except CommandError as e:
        raise WolfError(
            f"apk could not install the new package set: {' '.join(e.tail[-3:])}",
            hint="give --packages the packages the image was built from",
        ) from None
    db = scratch / "lib" / "apk" / "db"
    if (db / "scripts.tar.gz").is_file():  # apk writes it gzip'd; prepare_rootfs: gzip -d
        proc.run([gzip, "-d", db / "scripts.tar"], timeout=APK_TIMEOUT)
        proc.run([tar, "-C", db, "-xf", db / "scripts.tar", "--wildcards", "*.post-install"],
                 timeout=APK_TIMEOUT)  # fmt: skip
        for script in sorted(db.glob("*.post-install")):  # the shell's glob order (LC_ALL=C)
            # prepare_rootfs does not check this: GNU tar's --delete loses its way in apk's
            # archive for some members (and drops others), and the image keeps what is left
            proc.run([tar, "--delete", "-f", db / "scripts.tar", script.name],
                     timeout=APK_TIMEOUT, check=False)  # fmt: skip
            script.unlink()
        proc.run([gzip, "-f", "-9n", "-S", ".gz", db / "scripts.tar"], timeout=APK_TIMEOUT)
    return scratch


def apk_installed(root: Path) -> list[str]:
    """The packages of a rootfs's apk database (the "P:" lines of lib/apk/db/installed)."""
    path = root / "lib" / "apk" / "db" / "installed"
    text = path.read_text(errors="replace") if path.is_file() else ""
    return [ln[2:] for ln in text.splitlines() if ln.startswith("P:")]
