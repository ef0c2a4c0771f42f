"""An OpenWrt 25.12 ImageBuilder tree assembled the way target/imagebuilder/Makefile assembles
the real one, from the OpenWrt tree (openwrt-wolf's stand-in; tests/standin/make_standin.py).

Copied from the tree: include/, scripts/, rules.mk, target/imagebuilder/files/Makefile as the
top Makefile, target/linux/{Makefile,generic,<board>} without files*, patches* and generic's
pending/backport/hack, packages/README.md. Made with the tree's own machinery: .targetinfo by
include/scan.mk over target/linux (the boards shipped), .packageinfo by the same scan over the
package Makefiles the stand-in evaluates, .config by the tree's scripts/config/conf from a seed
as OpenWrt's release builds set it (CONFIG_IB, all profiles, per-device rootfs, JSON image
info, signature check), then the Makefile's own seds (include/version.mk: REVISION,
SOURCE_DATE_EPOCH, BASE_FILES_VERSION, LIBC_VERSION, KERNEL_VERSION; kernel.mk: LINUX_VERMAGIC).
staging_dir/host/bin holds apk-tools 3.0.5, mkhash (the tree's scripts/mkhash.c), OpenWrt's
image tools, and Debian's openssl, fakeroot, gzip and tar where OpenWrt ships its own builds.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

TIMEOUT = 300
# what `make defconfig` starts from for a release ImageBuilder (OpenWrt's buildbot config:
# every profile, per-device root filesystems, the ImageBuilder with all packages, JSON info)
SEED = ("CONFIG_TARGET_MULTI_PROFILE=y", "CONFIG_TARGET_ALL_PROFILES=y",
        "CONFIG_TARGET_PER_DEVICE_ROOTFS=y", "CONFIG_IB=y", "CONFIG_IB_STANDALONE=y",
        "CONFIG_JSON_OVERVIEW_IMAGE_INFO=y", "CONFIG_SIGNATURE_CHECK=y", "CONFIG_IMAGEOPT=y",
        "CONFIG_VERSIONOPT=y")  # fmt: skip
# package Makefiles scanned besides the evaluated ones: base-files sources image-config.in
# (VERSIONOPT, VERSION_FILENAMES: the version in image names)
ALWAYS_SCANNED = ("package/base-files",)
# host commands OpenWrt's tools/ build into staging_dir/host/bin that the ImageBuilder's
# Makefile calls by that path; the stand-in links Debian's
DEBIAN_HOST = ("openssl", "fakeroot", "gzip", "tar")


def _run(argv: list[str], cwd: Path, path: str | None = None) -> str:
    env = {"PATH": path or "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C", "HOME": str(cwd)}
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    if p.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} in {cwd} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        )
    return p.stdout


def _gawk_path(top: Path) -> str:
    # OpenWrt's scan.awk needs gawk as `awk` (Debian's default is mawk)
    bindir = top / "tmp" / "wolf-bin"
    bindir.mkdir(parents=True, exist_ok=True)
    gawk = shutil.which("gawk")
    if not gawk:
        raise RuntimeError("gawk not found (OpenWrt's scan needs it)")
    if not (bindir / "awk").exists():
        (bindir / "awk").symlink_to(gawk)
    return f"{bindir}:/usr/local/bin:/usr/bin:/bin"


def copy_tree_parts(top: Path, tree: Path, board: str) -> None:
    """target/imagebuilder/Makefile's $(CP) -L of include/, scripts/, rules.mk, files/Makefile
    and target/linux, and its rm of files*, patches* and generic's kernel patch folders."""
    top.mkdir(parents=True)
    for part in ("include", "scripts"):
        shutil.copytree(tree / part, top / part, symlinks=False)
    shutil.copyfile(tree / "rules.mk", top / "rules.mk")
    shutil.copyfile(tree / "target/imagebuilder/files/Makefile", top / "Makefile")
    linux = top / "target" / "linux"
    linux.mkdir(parents=True)
    shutil.copyfile(tree / "target/linux/Makefile", linux / "Makefile")
    for d in ("generic", board):
        shutil.copytree(tree / "target/linux" / d, linux / d, symlinks=False)
    for d in list(linux.glob("*/files*")) + list(linux.glob("*/patches*")):
        shutil.rmtree(d)
    for d in linux.glob("generic/*"):
        if re.match(r"(pending|backport|hack)(-.*)?$", d.name):
            shutil.rmtree(d)
    (top / "packages").mkdir()
    shutil.copyfile(tree / "target/imagebuilder/files/README.apk.md", top / "packages/README.md")


def host_tools(top: Path, tree: Path, apk: Path, tools: dict[str, Path]) -> Path:
    """staging_dir/host/bin: apk, mkhash built from the tree, OpenWrt's image tools, and
    Debian's commands for the rest."""
    bin_dir = top / "staging_dir" / "host" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(apk, bin_dir / "apk")
    _run(["gcc", "-O2", "-o", str(bin_dir / "mkhash"), str(tree / "scripts/mkhash.c")], top)
    for name, path in tools.items():
        shutil.copy2(path, bin_dir / name)
    for name in DEBIAN_HOST:
        found = shutil.which(name)
        if not found:
            raise RuntimeError(f"{name} not found (the stand-in ImageBuilder links it)")
        (bin_dir / name).symlink_to(found)
    return bin_dir


def scan(top: Path, what: str) -> None:
    """include/scan.mk as prepare-tmpinfo runs it: tmp/.targetinfo or tmp/.packageinfo."""
    (top / "tmp" / "info").mkdir(parents=True, exist_ok=True)
    args = {
        "targetinfo": ["SCAN_DIR=target/linux", "SCAN_NAME=target", "SCAN_DEPTH=3",
                       "SCAN_MAKEOPTS=TARGET_BUILD=1"],
        "packageinfo": ["SCAN_DIR=package", "SCAN_NAME=package", "SCAN_DEPTH=5"],
    }[what]  # fmt: skip
    _run(["make", "-j1", "-r", "-s", "-f", "include/scan.mk", f"SCAN_TARGET={what}", *args,
          "SCAN_EXTRA=", f"TOPDIR={top}"], top, _gawk_path(top))  # fmt: skip
    if not (top / "tmp" / f".{what}").is_file():
        raise RuntimeError(f"OpenWrt's scan wrote no tmp/.{what} in {top}")


def metadata(top: Path, tree: Path, board: str, subtarget: str, packages: dict[str, str]) -> None:
    """.targetinfo, .packageinfo and .config, by the tree's scan, metadata scripts and conf.
    `packages` maps a package Makefile directory (package/libs/mbedtls) to scan."""
    for rel in dict.fromkeys([*packages, *ALWAYS_SCANNED]):
        link = top / rel
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(tree / rel)
    path = _gawk_path(top)
    scan(top, "targetinfo")
    scan(top, "packageinfo")
    for kind in ("target", "package"):
        out = _run([f"./scripts/{kind}-metadata.pl", "config", f"tmp/.{kind}info"], top, path)
        (top / "tmp" / f".config-{kind}.in").write_text(out)
    # base-files' image-config.in sources it (PER_FEED_REPO): scripts/feeds feed_config
    shutil.copyfile(tree / "feeds.conf.default", top / "feeds.conf.default")
    out = _run(["./scripts/feeds", "feed_config"], top, path)
    (top / "tmp" / ".config-feeds.in").write_text(out)
    (top / "feeds.conf.default").unlink()
    # Config.in and what it sources, from the tree
    shutil.copyfile(tree / "Config.in", top / "Config.in")
    shutil.copytree(tree / "config", top / "config")
    for f in [*tree.glob("target/*/Config.in"), tree / "target/Config.in",
              *tree.glob("toolchain/**/Config*")]:  # fmt: skip
        dest = top / f.relative_to(tree)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            shutil.copyfile(f, dest)
    _run(["make", "-s", "-C", "scripts/config", "conf"], top, path)
    seed = [f"CONFIG_TARGET_{board}=y", f"CONFIG_TARGET_{board}_{subtarget}=y", *SEED]
    (top / ".config").write_text("\n".join(seed) + "\n")
    _run(["./scripts/config/conf", "--defconfig=.config", "Config.in"], top, path)
    cfg = (top / ".config").read_text()
    for sym in ("CONFIG_IB", "CONFIG_USE_APK", f"CONFIG_TARGET_{board}_{subtarget}",
                "CONFIG_VERSION_FILENAMES"):  # fmt: skip
        if f"\n{sym}=y\n" not in f"\n{cfg}":
            raise RuntimeError(f"the tree's conf left {sym} unset: {top / '.config'}")
    # target/imagebuilder/Makefile's seds on the copied .config
    cfg = re.sub(r"^CONFIG_BINARY_FOLDER=.*$", "# CONFIG_BINARY_FOLDER is not set", cfg, flags=re.M)
    cfg = re.sub(r"^CONFIG_DOWNLOAD_FOLDER=.*$", "# CONFIG_DOWNLOAD_FOLDER is not set", cfg,
                 flags=re.M)  # fmt: skip
    (top / ".config").write_text(cfg)
    shutil.copyfile(top / "tmp/.targetinfo", top / ".targetinfo")
    shutil.copyfile(top / "tmp/.packageinfo", top / ".packageinfo")


def versions(top: Path, values: dict[str, str], vermagic: str) -> None:
    """target/imagebuilder/Makefile's seds of include/version.mk and include/kernel.mk."""
    mk = top / "include" / "version.mk"
    text = mk.read_text()
    for var, value in values.items():
        text, n = re.subn(rf"^# {var}:=.*$", f"{var}:={value}", text, flags=re.M)
        if n != 1:
            raise RuntimeError(f"include/version.mk has no '# {var}:=' line")
    mk.write_text(text)
    kmk = top / "include" / "kernel.mk"
    text = kmk.read_text()
    text, n = re.subn(r"^(\s*LINUX_VERMAGIC:=.*)unknown(.*)$", rf"\g<1>{vermagic}\g<2>", text,
                      flags=re.M)  # fmt: skip
    if n == 0:
        raise RuntimeError("include/kernel.mk has no LINUX_VERMAGIC 'unknown' to set")
    kmk.write_text(text)


def cleanup(top: Path, packages: dict[str, str]) -> None:
    """What the scans and evaluations left that an ImageBuilder does not ship."""
    shutil.rmtree(top / "tmp", ignore_errors=True)
    shutil.rmtree(top / "package", ignore_errors=True)
    for d in top.glob("staging_dir/target-*"):
        shutil.rmtree(d)


def kernel_config(top: Path, linux_dir: Path) -> None:
    """$(LINUX_DIR)/.config, which include/kernel.mk reads (CONFIG_SQUASHFS_XZ picks the
    rootfs compression): include/target.mk's LINUX_CONF_CMD (scripts/kconfig.pl over the
    target's config-* files) plus kernel-defaults.mk's CONFIG_KERNEL_* lines from .config, as
    kernel-defaults.mk writes .config.target (the kernel's own olddefconfig is not run)."""
    here = Path(__file__).resolve().parent
    cmd = _run(["make", "-s", "--no-print-directory", "-f", "Makefile", "-f",
                str(here / "pkginfo.mk"), "wolf-linux-conf-cmd"], top).strip()  # fmt: skip
    if "kconfig.pl" not in cmd:
        raise RuntimeError(f"no LINUX_CONF_CMD from include/target.mk: {cmd!r}")
    text = _run(["perl", *cmd.split()], top)
    kernel = [re.sub(r"CONFIG_KERNEL_", "CONFIG_", ln)
              for ln in (top / ".config").read_text().splitlines()
              if re.match(r"^(#\s+)?CONFIG_KERNEL", ln)]  # fmt: skip
    linux_dir.mkdir(parents=True, exist_ok=True)
    (linux_dir / ".config").write_text(text + "".join(f"{ln}\n" for ln in kernel))
