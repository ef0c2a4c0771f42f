"""Generate stand-in ImageBuilder trees and a download-server layout for the tests and bench.

    server/releases/25.12.5/targets/ath79/generic/
        openwrt-imagebuilder-25.12.5-ath79-generic.Linux-x86_64.tar.zst
        sha256sums                      ("<sha256> *<name>", as OpenWrt's rules.mk writes it)

Each tree holds tests/standin/imagebuilder/ (Makefile, scripts/ib.py, include/standin-image.mk),
.standin.json (what .targetinfo/.profiles.mk give the real one), the packages with an index
(25.12: packages/*.apk and index.json; 24.10: opkg's packages/*.ipk made by the tree's own
scripts/ipkg-build and the Packages index by its scripts/ipkg-make-index.sh, with mkhash built
from its scripts/mkhash.c), and, as OpenWrt's ImageBuilder ships them, OpenWrt's own image
machinery:
- include/image-commands.mk copied from the OpenWrt tree, and include/standin-helpers.mk with
  the few definitions of the tree's include/image.mk, rules.mk and verbose.mk it needs;
- include/standin-device-<profile>.mk: the device's variables (KERNEL, IMAGE/*, BLOCKSIZE,
  IMAGE_SIZE, TPLINK_*, ...) evaluated from the tree's target/linux/<t>/image/*.mk;
- staging_dir/host/bin: OpenWrt's host tools (openwrt_wolf.host.openwrt_tools);
- the kernel pieces in build_dir/target-<arch>_musl/linux-<t>_<s>/<profile>-kernel.bin, made by
  running the device's KERNEL recipe over a generated vmlinux and DTB.
Package payloads and kernels are generated from a fixed seed: the same bytes on every machine.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import zstandard

from openwrt_wolf.catalogue import devtree
from openwrt_wolf.host.openwrt_tools import OpenWrtTools
from tests.standin import ib_assemble, package_pack, sdk_assemble
from tests.standin.kit import Kit
from tests.standin.package_pack import PkgInfo

HERE = Path(__file__).resolve().parent
RELEASE = "25.12.5"
# OpenWrt's host tools the ImageBuilder's image recipes call ($(STAGING_DIR_HOST)/bin)
IB_TOOLS = ("mksquashfs4", "padjffs2", "fwtool", "tplink-safeloader", "mktplinkfw", "mktplinkfw2")
# the device variables the image recipes read
DEVICE_VARS = (
    "KERNEL", "KERNEL_NAME", "KERNEL_SIZE", "KERNEL_LOADADDR", "KERNEL_ENTRY", "IMAGES",
    "IMAGE/sysupgrade.bin", "IMAGE/factory.bin", "IMAGE/tftp-recovery.bin", "IMAGE_SIZE",
    "BLOCKSIZE", "DEVICE_DTS",
    "SUPPORTED_DEVICES", "DEVICE_COMPAT_VERSION", "DEVICE_COMPAT_MESSAGE", "IMAGE_METADATA",
    "UIMAGE_NAME", "UIMAGE_MAGIC", "UIMAGE_TIME", "FILESYSTEMS",
)  # fmt: skip
# definitions the tree's include/image-commands.mk calls, and the files that hold them
HELPERS = {
    "include/image.mk": ("exp_units", "param_get", "param_get_default", "split_args",
                         "build_cmd", "concat_cmd", "Image/pad-to"),
    "rules.mk": ("empty", "space", "comma"),
    "include/verbose.mk": ("ERROR_MESSAGE",),
}  # fmt: skip

# Machine code is skewed towards a few byte values; a random stream mapped through this table
# compresses like it (xz ~0.39), and random.Random(str) gives the same bytes on every machine.
_WEIGHTS = {0x00: 120, 0xFF: 40, 0x24: 20, 0x8F: 12, 0x10: 10, 0x27: 8, 0x3C: 8, 0xAF: 6,
            0x02: 6, 0x03: 6, 0x01: 4, 0x04: 4, 0x08: 4, 0x20: 4, 0x40: 2, 0x80: 2}  # fmt: skip
_CODE_TABLE = bytes(v for v, n in _WEIGHTS.items() for _ in range(n))


def _code(name: str, size: int) -> bytes:
    """Deterministic bytes that compress like program code (seeded by the package name)."""
    return random.Random(f"standin:{name}").randbytes(size).translate(_CODE_TABLE)


def _incompressible(name: str, size: int) -> bytes:
    # firmware blobs barely compress; model them with hash-chained bytes
    out = bytearray()
    seed = name.encode()
    while len(out) < size:
        seed = hashlib.sha256(seed).digest()
        out += hashlib.shake_256(seed).digest(65536)
    return bytes(out[:size])


def _control(
    name: str, version: str, depends: list[str], conflicts: list[str], abi: str, arch: str
) -> str:
    """CONTROL/control as include/package-pack.mk writes it (Package/<name>/CONTROL)."""
    base = name.removesuffix(abi) if abi else name
    lines = [f"Package: {name}", f"Version: {version}"]
    if depends:
        lines.append(f"Depends: {', '.join(depends)}")
    if conflicts:
        lines.append(f"Conflicts: {', '.join(conflicts)}")
    if abi:
        lines.append(f"Provides: {base}")
    lines += [f"SourceName: {base}", "Section: libs" if base.startswith("lib") else "Section: base"]
    if abi:
        lines.append(f"ABIVersion: {abi}")
    lines += [f"Architecture: {arch}", "Installed-Size: 0", f"Description:  {base} (stand-in)"]
    return "\n".join(lines) + "\n"


def _ipk(
    top: Path, tree: Path, name: str, control: str, files: dict[str, bytes], epoch: int
) -> None:
    """One .ipk made by the tree's scripts/ipkg-build (gzip'd tar of debian-binary,
    data.tar.gz, control.tar.gz) from a package directory with CONTROL/control."""
    pkg = top / "tmp" / "ipkg" / name
    (pkg / "CONTROL").mkdir(parents=True)
    (pkg / "CONTROL" / "control").write_text(control)
    for path, data in files.items():
        dest = pkg / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        dest.chmod(0o755)
    p = subprocess.run(
        ["bash", str(tree / "scripts" / "ipkg-build"), str(pkg), str(top / "packages")],
        capture_output=True, text=True, timeout=300,
        # root-owned members on any machine (OpenWrt runs it under fakeroot)
        env={"PATH": "/usr/bin:/bin", "TAR": "tar --owner=0 --group=0",
             "SOURCE_DATE_EPOCH": str(epoch), "LC_ALL": "C"},
    )  # fmt: skip
    if p.returncode != 0:
        raise RuntimeError(f"ipkg-build {name} failed:\n{p.stdout}\n{p.stderr}")
    shutil.rmtree(pkg)


def _opkg_machinery(top: Path, tree: Path) -> None:
    """The tree's scripts the 24.10 ImageBuilder runs for opkg (ipkg-build, ipkg-make-index.sh,
    json_add_image_info.py) and mkhash built from scripts/mkhash.c, as staging_dir/host has it."""
    for name in ("ipkg-build", "ipkg-make-index.sh", "json_add_image_info.py"):
        shutil.copy2(tree / "scripts" / name, top / "scripts" / name)
    mkhash = top / "staging_dir" / "host" / "bin" / "mkhash"
    p = subprocess.run(
        ["gcc", "-O2", "-o", str(mkhash), str(tree / "scripts" / "mkhash.c")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if p.returncode != 0:
        raise RuntimeError(f"building mkhash failed:\n{p.stderr}")


def package_index(top: Path) -> None:
    """target/imagebuilder/files/Makefile's package_index for opkg: Packages by the tree's
    scripts/ipkg-make-index.sh, Packages.gz by gzip -9n."""
    pkgdir = top / "packages"
    env = {"PATH": f"{top / 'staging_dir/host/bin'}:/usr/bin:/bin", "LC_ALL": "C",
           "MKHASH": str(top / "staging_dir/host/bin/mkhash")}  # fmt: skip
    p = subprocess.run(
        ["bash", str(top / "scripts" / "ipkg-make-index.sh"), "."],
        cwd=pkgdir, capture_output=True, timeout=300, env=env,
    )  # fmt: skip
    if p.returncode != 0:
        raise RuntimeError(f"ipkg-make-index.sh failed:\n{p.stderr.decode(errors='replace')}")
    (pkgdir / "Packages").write_bytes(p.stdout)
    z = subprocess.run(["gzip", "-9nc", "Packages"], cwd=pkgdir, capture_output=True, check=True)
    (pkgdir / "Packages.gz").write_bytes(z.stdout)


def release_packages(spec: dict[str, Any], release: str) -> dict[str, list[Any]]:
    """[packages] (25.12.5's set) with the release's own drops and entries."""
    rel = spec["release"][release]
    pkgs = {n: v for n, v in spec["packages"].items() if n not in rel.get("drop_packages", ())}
    pkgs.update(rel.get("packages", {}))
    return pkgs


def _definitions(text: str, names: tuple[str, ...]) -> str:
    """The named `define NAME ... endef` blocks and one-line assignments of a Makefile, verbatim."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if m := re.match(r"define\s+(\S+)\s*$", lines[i]):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "endef")
            if m.group(1) in names:
                out += lines[i : end + 1]
            i = end + 1
            continue
        if (m := re.match(r"([\w/.-]+)\s*:?=", lines[i])) and m.group(1) in names:
            out.append(lines[i])
        i += 1
    found = {n for n in names if any(re.match(rf"(define\s+)?{re.escape(n)}\b", ln) for ln in out)}
    if found != set(names):
        raise RuntimeError(f"not in the OpenWrt tree: {sorted(set(names) - found)}")
    return "\n".join(out) + "\n"


def _kernel_machinery(top: Path, tree: Path) -> None:
    """include/standin-image.mk and the helpers of the tree's image-commands.mk it calls."""
    inc = top / "include"
    shutil.copyfile(tree / "include/image-commands.mk", inc / "image-commands.mk")
    shutil.copyfile(HERE / "imagebuilder/include/standin-image.mk", inc / "standin-image.mk")
    helpers = "".join(
        f"# from {rel}\n" + _definitions((tree / rel).read_text(), names)
        for rel, names in HELPERS.items()
    )
    (inc / "standin-helpers.mk").write_text(helpers)


def _image_machinery(top: Path, tree: Path, tools: OpenWrtTools) -> None:
    """include/image-commands.mk, the helpers it calls, and OpenWrt's host tools."""
    _kernel_machinery(top, tree)
    bin_dir = top / "staging_dir" / "host" / "bin"
    bin_dir.mkdir(parents=True)
    for name in IB_TOOLS:
        shutil.copy2(tools.tool(name), bin_dir / name)
    # OpenWrt's lzma (LZMA SDK 4.65) is not at hand: see tests/standin/tools/lzma
    shutil.copy2(HERE / "tools" / "lzma", bin_dir / "lzma")


def _mk_value(value: str) -> str:
    return value.replace("$", "$$")


def _device_mk(
    top: Path, tree: Path, target: str, profile: str, facts: dict[str, int]
) -> dict[str, str]:
    """Write include/standin-device-<profile>.mk from the tree; check it against targets.toml."""
    t, s = target.split("/")
    want = devtree.device_variables(tree, t, s, profile, DEVICE_VARS)
    # targets.toml states the facts independently: a tree that disagrees is the wrong tree
    for key, var in (("image_size", "IMAGE_SIZE"), ("blocksize", "BLOCKSIZE")):
        text = want[var].strip()
        got = int(text[:-1]) * 1024 if text.endswith("k") else int(text or 0)
        if got != facts[key]:
            raise RuntimeError(f"{profile}: the tree's {var} {text} != targets.toml {facts[key]}")
    lines = [f"{k} := {_mk_value(v)}" for k, v in sorted(want.items())]
    (top / "include" / f"standin-device-{profile}.mk").write_text("\n".join(lines) + "\n")
    return want


def _kernel(top: Path, kdir: Path, profile: str, dev: dict[str, str], size: int) -> None:
    """The device's KERNEL recipe run by make over a generated vmlinux and DTB, as OpenWrt's
    buildroot makes $(KDIR)/<profile>-kernel.bin before the ImageBuilder ships it."""
    vmlinux = kdir / (dev["KERNEL_NAME"] or "vmlinux")
    vmlinux.write_bytes(_code(f"kernel-{profile}", size))
    dts = dev["DEVICE_DTS"].split()
    if dts:
        (kdir / f"image-{dts[0]}.dtb").write_bytes(_code(f"dtb-{profile}", 12000))
    p = subprocess.run(
        ["make", "--no-print-directory", "-f", str(top / "include/standin-image.mk"),
         f"TOPDIR={top}", f"DEVICE={profile}", "kernel"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if p.returncode != 0:
        raise RuntimeError(f"KERNEL recipe of {profile} failed:\n{p.stdout}\n{p.stderr}")
    vmlinux.unlink()
    for dtb in kdir.glob("image-*.dtb"):
        dtb.unlink()


def _release_mk(top: Path, info: dict[str, object], kdir: Path) -> None:
    # what rules.mk, include/version.mk and the target Makefile set for the image recipes
    lk = info["linux_kernel"]
    assert isinstance(lk, dict)
    values = {
        "VERSION_DIST": "OpenWrt",
        "VERSION_NUMBER": str(info["version"]),
        "REVISION": str(info["version_code"]),
        "TARGETID": f"{info['target']}/{info['subtarget']}",
        "BOARD": str(info["target"]),
        "SUBTARGET": str(info["subtarget"]),
        "LINUX_KARCH": str(info["arch"]).removesuffix("el"),
        "LINUX_VERSION": str(lk["version"]),
    }
    text = f"KDIR := $(TOPDIR)/{kdir.relative_to(top)}\n"
    text += "".join(f"{k} := {_mk_value(v)}\n" for k, v in values.items())
    (top / "include" / "standin-release.mk").write_text(text)


# base-files' own scripts the install steps run (package post-install, rc.common enable)
BASE_FILES = ("lib/functions.sh", "lib/functions/*.sh", "etc/rc.common")


def _kdir(top: Path, target: str) -> Path:
    found = sorted(top.glob(f"build_dir/target-*_musl/linux-{target.replace('/', '_')}"))
    if not found:
        raise RuntimeError(f"{top}: no KDIR for {target}")
    return found[0]


def _payload(
    pname: str, size: int, path: str, release: str, tree: Path | None = None
) -> dict[str, bytes | Path]:
    data = _incompressible(pname, size) if "/firmware/" in path else _code(pname, size)
    files: dict[str, bytes | Path] = {path: data} if path else {}
    if pname == "base-files":
        files["/etc/init.d/dropbear"] = b"#!/bin/sh /etc/rc.common\nSTART=19\n"
        files["/etc/openwrt_release"] = f"DISTRIB_RELEASE='{release}'\n".encode()
        base = tree / "package/base-files/files" if tree else None
        for pattern in BASE_FILES if base else ():
            assert base is not None
            for f in sorted(base.glob(pattern)):
                files[f"/{f.relative_to(base)}"] = f
    return files


def _info(spec: dict[str, Any], release: str, target: str) -> dict[str, Any]:
    rel, tgt = spec["release"][release], spec["target"][target]
    t, s = target.split("/")
    return {
        "version": release,
        "version_code": rel["version_code"],
        "source_date_epoch": rel["source_date_epoch"],
        "linux_kernel": rel["linux_kernel"],
        "target": t,
        "subtarget": s,
        "arch": tgt["arch"],
        "arch_packages": tgt["arch_packages"],
        "default_packages": rel["default_packages"] + tgt["default_packages"],
        "package_manager": rel.get("package_manager", "apk"),
        "mksquashfs_extra": rel.get("mksquashfs_extra", []),
    }


def _kernels(
    top: Path, tree: Path, target: str, kdir: Path, spec: dict[str, Any]
) -> dict[str, Any]:
    """Each profile's kernel piece by its KERNEL recipe; returns the profiles' facts."""
    profiles = {}
    for pid, p in spec["target"][target]["profile"].items():
        dev = _device_mk(top, tree, target, pid, p)
        _kernel(top, kdir, pid, dev, p["kernel_input"])
        profiles[pid] = {k: v for k, v in p.items() if k != "kernel_input"}
        profiles[pid]["images"] = [i for i in dev["IMAGES"].split() if i.endswith(".bin")]
    return profiles


def make_tree(
    dest: Path,
    target: str,
    release: str = RELEASE,
    *,
    tree: Path,
    tools: OpenWrtTools,
    kit: Kit | None = None,
) -> Path:
    """Write one stand-in ImageBuilder tree for target "ath79/generic"; return its path.
    `tree` is the OpenWrt source tree of the release, `tools` OpenWrt's host tools, `kit`
    (apk releases) the host apk, the signing key and the TLS packages' real files."""
    spec = tomllib.loads((HERE / "targets.toml").read_text())
    rel = spec["release"][release]
    if rel.get("package_manager", "apk") == "apk":
        if kit is None:
            raise RuntimeError("an apk release needs kit= (tests/standin/kit.py)")
        return _make_apk_tree(dest, target, release, spec, tree=tree, tools=tools, kit=kit)
    tgt = spec["target"][target]
    t, s = target.split("/")
    name = f"openwrt-imagebuilder-{release}-{t}-{s}.Linux-x86_64"
    top = dest / name
    if top.exists():
        shutil.rmtree(top)
    shutil.copytree(HERE / "imagebuilder", top)
    _image_machinery(top, tree, tools)
    pkgdir = top / "packages"
    pkgdir.mkdir()
    _opkg_machinery(top, tree)
    for pname, (version, size, depends, conflicts, path) in release_packages(spec, release).items():
        files = _payload(pname, size, path, release)
        abi = rel.get("abi", {}).get(pname, "")
        ctl = _control(pname, version, depends, conflicts, abi, tgt["arch_packages"])
        _ipk(top, tree, pname, ctl, files, rel["source_date_epoch"])
    package_index(top)
    shutil.rmtree(top / "tmp", ignore_errors=True)
    kdir = top / "build_dir" / f"target-{tgt['arch_packages']}_musl" / f"linux-{t}_{s}"
    kdir.mkdir(parents=True)
    info = _info(spec, release, target)
    _release_mk(top, info, kdir)
    info["profiles"] = _kernels(top, tree, target, kdir, spec)
    (top / ".standin.json").write_text(json.dumps(info, indent=1))
    return top


def _tree_infos(top: Path, tree: Path, rel: dict[str, Any], arch: str) -> dict[str, PkgInfo]:
    """_evaluate_tree_infos, kept per machine (the cache) for the same tree, target .config,
    package list and evaluation recipe: every stand-in of a run evaluates the same Makefiles."""
    from dataclasses import asdict

    from openwrt_wolf import paths
    from openwrt_wolf.files.locks import locked

    h = hashlib.sha256(str(tree.resolve()).encode())
    for part in ((top / ".config").read_bytes(), json.dumps(rel["tree_packages"]).encode(),
                 (HERE / "pkginfo.mk").read_bytes(), (HERE / "package_pack.py").read_bytes(),
                 (HERE / "make_standin.py").read_bytes(), arch.encode()):  # fmt: skip
        h.update(hashlib.sha256(part).digest())
    cache = paths.cache_dir() / "standin-pkginfo" / f"{h.hexdigest()[:16]}.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    with locked(cache.with_suffix(".lock")):
        if cache.is_file():
            return {k: PkgInfo(**v) for k, v in json.loads(cache.read_text()).items()}
        out = _evaluate_tree_infos(top, tree, rel, arch)
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps({k: asdict(v) for k, v in out.items()}))
        tmp.replace(cache)
        return out


def _evaluate_tree_infos(
    top: Path, tree: Path, rel: dict[str, Any], arch: str
) -> dict[str, PkgInfo]:
    """package-pack.mk's values for [tree_packages], evaluated twice: the first pass writes
    staging_dir/target-*/pkginfo/<name>.version as a build's package step does, so the second
    gives each dependency its ABI suffix (feeds.mk's GetABISuffix)."""
    by_dir: dict[tuple[str, str], list[str]] = {}
    for name, where in rel["tree_packages"].items():
        d, _, variant = where.partition(":")
        by_dir.setdefault((d, variant), []).append(name)
    out: dict[str, PkgInfo] = {}
    for npass in (1, 2):
        for (d, variant), names in by_dir.items():
            for i in package_pack.evaluate(top, tree, d, variant, names, arch):
                out[i.package] = i
        if npass == 1:
            pkginfo = top / "staging_dir" / f"target-{arch}_musl" / "pkginfo"
            pkginfo.mkdir(parents=True, exist_ok=True)
            abis = {**rel.get("abi", {}), **{i.package: i.abi for i in out.values() if i.abi}}
            for name, abi in abis.items():
                (pkginfo / f"{name}.version").write_text(f"{abi}\n")
    return out


def abi_suffix(name: str, abi: str) -> str:
    """include/feeds.mk's FormatABISuffix: none for kmods, "-" before it after a digit."""
    if not abi or name.startswith("kmod-"):
        return ""
    return f"-{abi}" if name[-1:].isdigit() else abi


def _make_apk_tree(
    dest: Path,
    target: str,
    release: str,
    spec: dict[str, Any],
    *,
    tree: Path,
    tools: OpenWrtTools,
    kit: Kit,
) -> Path:
    """A 25.12 ImageBuilder as target/imagebuilder/Makefile assembles it (ib_assemble), its
    packages made as package-pack.mk makes them (package_pack) with real apk-tools."""
    rel, tgt = spec["release"][release], spec["target"][target]
    t, s = target.split("/")
    arch = tgt["arch_packages"]
    top = dest / f"openwrt-imagebuilder-{release}-{t}-{s}.Linux-x86_64"
    if top.exists():
        shutil.rmtree(top)
    ib_assemble.copy_tree_parts(top, tree, t)
    apk, key, payloads = kit.apk, kit.key, kit.payloads
    ib_assemble.host_tools(top, tree, apk, {n: tools.tool(n) for n in (*IB_TOOLS, "unsquashfs4")})
    shutil.copy2(HERE / "tools" / "lzma", top / "staging_dir/host/bin/lzma")
    dirs = {w.partition(":")[0]: "" for w in rel["tree_packages"].values()}
    ib_assemble.metadata(top, tree, t, s, dirs)
    infos = _tree_infos(top, tree, rel, arch)
    pkgdir = top / "packages"
    work = top / "tmp" / "pack"
    epoch = rel["source_date_epoch"]
    versions: dict[str, str] = {}
    for pname, (version, size, depends, _conflicts, path) in release_packages(
        spec, release
    ).items():
        info = infos.get(pname)
        if info is None:
            if version == "tree":
                raise RuntimeError(f"{pname}: version from the tree, but not in tree_packages")
            abi = rel.get("abi", {}).get(pname, "")
            info = package_pack.PkgInfo(
                package=pname, name=pname + abi_suffix(pname, abi), version=version, abi=abi,
                depends=list(depends), provides=[pname] if abi else [], arch=arch,
                priority="10" if abi else "")  # fmt: skip
        files: dict[str, bytes | Path] = dict(payloads[pname]) if pname in payloads else (
            _payload(pname, size, path, release, tree))  # fmt: skip
        package_pack.mkpkg(apk, info, files, pkgdir, work, epoch)
        versions[pname] = info.version
    # a standalone ImageBuilder: every package local, no remote feed to list
    (top / "repositories").write_text("")
    (top / "keys").mkdir()
    shutil.copyfile(key.with_suffix(".pub"), top / "keys" / f"{key.stem}.pem")
    package_pack.index(apk, pkgdir, key, tree, arch)
    lk = rel["linux_kernel"]
    ib_assemble.versions(top, {
        "REVISION": rel["version_code"], "SOURCE_DATE_EPOCH": str(epoch),
        "BASE_FILES_VERSION": versions["base-files"], "LIBC_VERSION": versions["libc"],
        "KERNEL_VERSION": versions["kernel"]}, lk["vermagic"])  # fmt: skip
    kdir = top / "build_dir" / f"target-{arch}_musl" / f"linux-{t}_{s}"
    ib_assemble.kernel_config(top, kdir / f"linux-{lk['version']}")
    info = _info(spec, release, target)
    _kernel_machinery(top, tree)
    _release_mk(top, info, kdir)
    info["profiles"] = _kernels(top, tree, target, kdir, spec)
    for f in top.glob("include/standin-*.mk"):  # the kernel recipe's helpers: not shipped
        f.unlink()
    ib_assemble.cleanup(top, dirs)
    (top / ".standin.json").write_text(json.dumps(info, indent=1))
    return top


def make_sdk(
    dest: Path, target: str, release: str = RELEASE, *, tree: Path, kit: Kit
) -> Path | None:
    """A stand-in SDK for the target, assembled as target/sdk/Makefile assembles OpenWrt's
    (tests/standin/sdk_assemble.py) and named as OpenWrt names it; None for a target whose
    package architecture the stand-in has no cross compiler for (sdk.toml)."""
    spec = tomllib.loads((HERE / "targets.toml").read_text())
    tgt = spec["target"][target]
    if tgt["arch_packages"] not in sdk_assemble.spec()["toolchain"]["arch"]:
        return None
    rel = spec["release"][release]
    t, s = target.split("/")
    gcc = rel.get("sdk_gcc", "14.3.0")
    top = dest / f"openwrt-sdk-{release}-{t}-{s}_gcc-{gcc}_musl.Linux-x86_64"
    if top.exists():
        shutil.rmtree(top)
    top.mkdir(parents=True)
    return sdk_assemble.assemble(top, tree, target, arch=tgt["arch_packages"], apk=kit.apk,
                                 release={**rel, "name": release})  # fmt: skip


def make_buildroot(
    dest: Path,
    target: str,
    release: str = RELEASE,
    *,
    tree: Path,
    tools: OpenWrtTools,
    kit: Kit | None = None,
    ib_tree: Path | None = None,
) -> Path:
    """A stand-in OpenWrt source tree for the target (tests/standin/buildroot/): the stand-in
    ImageBuilder's scripts/ib.py, packages and .standin.json reused, its kernels moved out of
    $(KDIR) (make puts them there) and a `version` file as in a release source tarball.
    `ib_tree`: that ImageBuilder as make_tree made it with the same arguments (a test run's
    mirror has it), copied instead of assembled again."""
    spec = tomllib.loads((HERE / "targets.toml").read_text())
    top = dest / f"openwrt-{release}-{target.replace('/', '-')}"
    if top.exists():
        shutil.rmtree(top)
    if ib_tree is not None:
        ib = Path(shutil.copytree(ib_tree, dest / ".ib" / ib_tree.name, symlinks=True))
    else:
        ib = make_tree(dest / ".ib", target, release, tree=tree, tools=tools, kit=kit)
    shutil.copytree(HERE / "buildroot", top)
    shutil.copyfile(HERE / "imagebuilder" / "scripts" / "ib.py", top / "scripts" / "ib.py")
    shutil.move(ib / "packages", top / "packages")
    shutil.move(ib / "staging_dir", top / "staging_dir")
    if (ib / "keys").is_dir():
        shutil.move(ib / "keys", top / "keys")
    if kit is not None:  # the recipe machinery the apk ImageBuilder does not ship
        _kernel_machinery(ib, tree)
        _release_mk(ib, json.loads((ib / ".standin.json").read_text()), _kdir(ib, target))
        for pid, p in spec["target"][target]["profile"].items():
            _device_mk(ib, tree, target, pid, p)
    for mk in ib.glob("include/*.mk"):  # the image recipe machinery (make_tree)
        if mk.name.startswith("standin-") or mk.name == "image-commands.mk" or kit is None:
            shutil.move(mk, top / "include" / mk.name)
    t, _ = target.split("/")
    kernels = top / "target" / "linux" / t / "standin-kernels"
    kernels.mkdir(parents=True)
    for k in sorted(ib.glob("build_dir/target-*/linux-*/*-kernel.bin")):
        shutil.move(k, kernels / k.name)
    info = json.loads((ib / ".standin.json").read_text())
    info["version_filenames"] = False  # a tree without CONFIG_VERSION_FILENAMES
    (top / ".standin.json").write_text(json.dumps(info, indent=1))
    (top / "version").write_text(spec["release"][release]["version_code"] + "\n")
    shutil.rmtree(dest / ".ib")
    return top


def pack(tree: Path, out: Path) -> Path:
    """tar.zst of the tree with its top directory, like OpenWrt's ImageBuilder archives."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        tar.add(tree, arcname=tree.name)
    out.write_bytes(zstandard.ZstdCompressor(level=3).compress(raw.getvalue()))
    return out


def make_server(
    root: Path,
    targets: tuple[str, ...] = ("ath79/generic",),
    release: str = RELEASE,
    *,
    tree: Path,
    tools: OpenWrtTools,
    kit: Kit | None = None,
) -> Path:
    """A download-server directory: releases/<rel>/targets/<t>/<s>/{archive,sha256sums}."""
    work = root / ".trees"
    work.mkdir(parents=True, exist_ok=True)
    for target in targets:
        d = root / "releases" / release / "targets" / target
        d.mkdir(parents=True, exist_ok=True)
        lines = []
        ib = make_tree(work, target, release, tree=tree, tools=tools, kit=kit)
        sdk = make_sdk(work, target, release, tree=tree, kit=kit) if kit and release == RELEASE \
            else None  # fmt: skip
        for top in (ib, *([sdk] if sdk else [])):
            archive = pack(top, d / f"{top.name}.tar.zst")
            lines.append(f"{hashlib.sha256(archive.read_bytes()).hexdigest()} *{archive.name}\n")
        (d / "sha256sums").write_text("".join(sorted(lines, key=lambda x: x.split("*")[1])))
    return root


if __name__ == "__main__":
    from openwrt_wolf.host import openwrt_tools, upstream
    from tests.standin.kit import make_kit

    print(
        make_server(
            Path(sys.argv[1]),
            tuple(sys.argv[2:]) or ("ath79/generic",),
            tree=upstream.openwrt_tree(RELEASE),
            tools=openwrt_tools.ensure(),
            kit=make_kit(Path(sys.argv[1]) / ".kit"),
        )
    )
