"""Packages as OpenWrt 25.12's include/package-pack.mk makes them, for the stand-ins.

- The values package-pack.mk hands to `apk mkpkg` (name with FormatABISuffix's ABI suffix,
  version, depends with their dependencies' ABI suffixes, provides with the ABI-less name,
  provider priority, arch, license, url) are evaluated by GNU make from the OpenWrt tree's own
  package Makefile (tests/standin/pkginfo.mk read after it), with the tree's rules.mk and
  include/ and a .config expanded by the tree's conf; staging_dir/target-*/pkginfo/<dep>.version
  carries each dependency's ABI version, as a build's package step leaves it.
- Each package is `apk mkpkg` of apk-tools 3.0.5 (built from the shared snapshot) over an
  install directory holding the payload and lib/apk/packages/<name>.list, with the
  post-install, post-upgrade and pre-deinstall scripts package-pack.mk writes.
- The index is `apk mkndx --sign` (the test's own key) and index.json is
  `apk adbdump --format json packages.adb | scripts/make-index-json.py -f apk`, run from the
  tree, as package/Makefile's index step does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMEOUT = 300


@dataclass
class PkgInfo:
    """What `apk mkpkg --info` gets for one package (package-pack.mk's BuildTarget/ipkg)."""

    package: str  # the Makefile's name, without ABI suffix
    name: str  # package + ABI suffix
    version: str
    abi: str = ""
    depends: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    priority: str = ""
    arch: str = ""
    license: str = ""
    url: str = ""
    description: str = ""
    conffiles: list[str] = field(default_factory=list)


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, **kw)  # type: ignore[call-overload]
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p  # type: ignore[no-any-return]


def _depends(text: str) -> list[str]:
    # package-pack.mk strips spaces and parentheses: "hostapd-common (=1.0-r1)" becomes
    # "hostapd-common=1.0-r1"
    return [
        d.replace(" ", "").replace("(", "").replace(")", "") for d in text.split(",") if d.strip()
    ]


def evaluate(
    top: Path, tree: Path, makefile_dir: str, variant: str, packages: list[str], arch: str
) -> list[PkgInfo]:
    """package-pack.mk's values for `packages` of one Makefile (BUILD_VARIANT variant), with
    TOPDIR=top (an assembled ImageBuilder tree with a .config)."""
    argv = ["make", "-r", "-s", "--no-print-directory", "-C", str(tree / makefile_dir),
            "-f", "Makefile", "-f", str(HERE / "pkginfo.mk"), f"TOPDIR={top}",
            f"WOLF_PKGS={' '.join(packages)}", *(f"CONFIG_PACKAGE_{p}=y" for p in packages),
            "wolf-pkginfo"]  # fmt: skip
    if variant:
        argv.insert(-1, f"BUILD_VARIANT={variant}")
    out = _run(argv, env={**os.environ, "TOPDIR": str(top), "MAKEFLAGS": ""}).stdout
    infos: list[PkgInfo] = []
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue  # a Makefile's own $(info ...) lines
        if key == "package":
            infos.append(PkgInfo(package=value, name=value, version=""))
            continue
        if not infos:
            continue
        cur = infos[-1]
        if key in ("depends",):
            cur.depends = _depends(value)
        elif key == "provides":
            cur.provides = value.split()
        elif key in ("name", "version", "abi", "priority", "license", "url"):
            setattr(cur, key, value)
        elif key == "arch":
            cur.arch = "noarch" if value == "all" else value
    if [i.package for i in infos] != packages:
        raise RuntimeError(
            f"{makefile_dir}: evaluated {[i.package for i in infos]}, not {packages}"
        )
    return infos


def post_install(name: str) -> str:
    """package-pack.mk's post-install script (no postinst-pkg of its own)."""
    return (
        "#!/bin/sh\n"
        '[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0\n'
        "[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0\n"
        ". ${IPKG_INSTROOT}/lib/functions.sh\n"
        'export root="${IPKG_INSTROOT}"\n'
        f'export pkgname="{name}"\n'
        "add_group_and_user\n"
        "default_postinst\n"
    )


def pre_deinstall(name: str) -> str:
    return (
        "#!/bin/sh\n"
        "[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0\n"
        ". ${IPKG_INSTROOT}/lib/functions.sh\n"
        'export root="${IPKG_INSTROOT}"\n'
        f'export pkgname="{name}"\n'
        "default_prerm\n"
    )


def mkpkg(
    apk: Path,
    info: PkgInfo,
    files: dict[str, bytes | Path],
    out_dir: Path,
    work: Path,
    epoch: int,
) -> Path:
    """One .apk as package-pack.mk's `apk mkpkg` call makes it; returns its path."""
    idir, adir = work / "ipkg" / info.name, work / "apk" / info.name
    for d in (idir, adir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    for path, data in files.items():
        dest = idir / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, Path):
            shutil.copyfile(data, dest)
        else:
            dest.write_bytes(data)
        dest.chmod(0o755 if "/bin/" in path or "/sbin/" in path or ".so" in path else 0o644)
    meta = idir / "lib" / "apk" / "packages"
    meta.mkdir(parents=True, exist_ok=True)
    if info.conffiles:
        (meta / f"{info.name}.conffiles").write_text("".join(f"{c}\n" for c in info.conffiles))
    listed = sorted("/" + str(p.relative_to(idir)) for p in idir.rglob("*")
                    if p.is_file() or p.is_symlink())  # fmt: skip
    (meta / f"{info.name}.list").write_text("".join(f"{p}\n" for p in listed))
    for p in idir.rglob("*"):
        os.utime(p, (epoch, epoch), follow_symlinks=False)
    (adir / "post-install").write_text(post_install(info.name))
    (adir / "post-upgrade").write_text(
        "#!/bin/sh\nexport PKG_UPGRADE=1\n" + post_install(info.name).split("\n", 1)[1]
    )
    (adir / "pre-deinstall").write_text(pre_deinstall(info.name))
    out = out_dir / f"{info.name}-{info.version}.apk"
    argv = [str(apk), "mkpkg", "--info", f"name:{info.name}", "--info", f"version:{info.version}"]
    if info.abi:
        argv += ["--info", f"tags:openwrt:abiversion={info.abi}"]
    argv += ["--info", f"description:{info.description or info.package}",
             "--info", f"arch:{info.arch}", "--info", f"license:{info.license}",
             "--info", f"origin:{info.package}", "--info", f"url:{info.url}",
             "--info", "maintainer:"]  # fmt: skip
    if info.provides:
        argv += ["--info", f"provides:{' '.join(info.provides)}"]
    if info.priority:
        argv += ["--info", f"provider-priority:{info.priority}"]
    for script in ("post-install", "post-upgrade", "pre-deinstall"):
        argv += ["--script", f"{script}:{adir / script}"]
    argv += ["--info", f"depends:{' '.join(info.depends)}", "--files", str(idir),
             "--output", str(out)]  # fmt: skip
    _run(argv, env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch)})
    shutil.rmtree(idir)
    shutil.rmtree(adir)
    return out


def index(apk: Path, pkgdir: Path, key: Path, tree: Path, arch: str) -> None:
    """package/Makefile's index step: packages.adb by `apk mkndx --sign`, index.json (format 2)
    by the tree's make-index-json.py over `apk adbdump --format json packages.adb`."""
    names = sorted(p.name for p in pkgdir.glob("*.apk"))
    _run([str(apk), "mkndx", "--allow-untrusted", "--sign", str(key),
          "--output", "packages.adb", *names], cwd=pkgdir)  # fmt: skip
    dump = _run([str(apk), "adbdump", "--format", "json", "packages.adb"], cwd=pkgdir).stdout
    made = _run(["python3", str(tree / "scripts" / "make-index-json.py"), "-f", "apk",
                 "-a", arch, "-"], input=dump)  # fmt: skip
    json.loads(made.stdout)  # the tree's script wrote JSON
    (pkgdir / "index.json").write_text(made.stdout)
