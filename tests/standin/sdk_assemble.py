"""An OpenWrt 25.12 SDK assembled the way target/sdk/Makefile assembles the real one, from the
pinned OpenWrt tree (openwrt-wolf's stand-in; tests/standin/make_standin.py packs it).

Copied from the tree, as that Makefile's $(CP)s do: include/, scripts/, rules.mk, LICENSES,
COPYING, target/sdk/files/{Config.in,Makefile,README.md,include/prepare.mk}, package/Makefile,
package/libs/toolchain (as package/toolchain), package/kernel/linux, target/linux/generic and
the board without files*/patches*. Made with the tree's own machinery: Config-build.in by its
target/sdk/convert-config.pl from the .config a release build has (the tree's `make defconfig`
of sdk.toml's seed, in a scratch copy), feeds.conf.default as the Makefile writes it (the
base feed, then the tree's feeds.conf.default), the seds of include/version.mk and kernel.mk.

What a real SDK ships prebuilt from its buildroot is the stand-in's own (sdk.toml): the
toolchain is Debian's MIPS cross compiler under OpenWrt's names (glibc and gcc 12 instead of
musl and gcc 14), and staging_dir/host/bin runs Debian's commands for OpenWrt's host tools,
apk-tools 3.0.5 built for the host (the kit's), mkhash from the tree's scripts/mkhash.c, the
tree's own pkg-config wrapper, and sstrip from openwrt_wolf.footprint.sizes. So `make
package/<dir>/compile` runs OpenWrt's own package Makefiles (download from dl/ by hash, the
tree's patches, configure, compile, strip, `apk mkpkg`)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from openwrt_wolf import paths
from openwrt_wolf.files.locks import locked

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TIMEOUT = 900
BOARDS = {"ath79/generic": "ath79", "ramips/mt76x8": "ramips", "malta/be": "malta"}


def spec() -> dict[str, Any]:
    return tomllib.loads((HERE / "sdk.toml").read_text())


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C", "HOME": str(cwd)}
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
                       env={**base, **(env or {})})  # fmt: skip
    if p.returncode != 0:
        out = f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        raise RuntimeError(f"{' '.join(argv)} in {cwd} failed:\n{out}")
    return p.stdout


def release_config(tree: Path, target: str) -> str:
    """The .config of a release build of the target: the tree's `make defconfig` of the
    seed, in a scratch copy of the tree (the pinned tree is only read), cached per machine."""
    t, s = target.split("/")
    seed = [f"CONFIG_TARGET_{t}=y", f"CONFIG_TARGET_{t}_{s}=y", *spec()["release_seed"]]
    h = hashlib.sha256(f"{tree.resolve()}\0{target}\0{chr(10).join(seed)}".encode())
    h.update((tree / "Config.in").read_bytes() + (tree / "config/Config-build.in").read_bytes())
    cache = paths.cache_dir() / "standin-sdk" / f"release-{h.hexdigest()[:16]}.config"
    cache.parent.mkdir(parents=True, exist_ok=True)
    with locked(cache.with_suffix(".lock")):
        if cache.is_file():
            return cache.read_text()
        with tempfile.TemporaryDirectory(prefix="standin-sdk-", dir=cache.parent) as tmp:
            work = Path(tmp) / "openwrt"
            shutil.copytree(tree, work, symlinks=True)
            (work / ".config").write_text("\n".join(seed) + "\n")
            env = {"FORCE_UNSAFE_CONFIGURE": "1", "MAKEFLAGS": ""}
            _run(["make", "defconfig"], work, env)
            text = (work / ".config").read_text()
        for sym in ("CONFIG_SDK", "CONFIG_USE_APK", f"CONFIG_TARGET_{t}_{s}"):
            if f"\n{sym}=y\n" not in f"\n{text}":
                raise RuntimeError(f"the tree's make defconfig left {sym} unset")
        tmp_cache = cache.with_suffix(".tmp")
        tmp_cache.write_text(text)
        tmp_cache.replace(cache)
        return text


def _copy_parts(top: Path, tree: Path, board: str) -> None:
    """target/sdk/Makefile's $(CP)s and the rm of files*/patches*."""
    for d in ("dl", "package/kernel", "staging_dir"):
        (top / d).mkdir(parents=True, exist_ok=True)
    for part in ("include", "scripts"):
        shutil.copytree(tree / part, top / part, symlinks=False)
    shutil.copytree(tree / "LICENSES", top / "LICENSES")
    for f in ("COPYING", "rules.mk"):
        shutil.copyfile(tree / f, top / f)
    for f in ("Config.in", "Makefile", "README.md", "include/prepare.mk"):
        shutil.copyfile(tree / "target/sdk/files" / f, top / Path(f).name)
    shutil.copyfile(tree / "package/Makefile", top / "package/Makefile")
    shutil.copytree(tree / "package/libs/toolchain", top / "package/toolchain")
    _libc_extra(top / "package/toolchain/Makefile", spec()["toolchain"]["libc_extra"])
    shutil.copytree(tree / "package/kernel/linux", top / "package/kernel/linux")
    linux = top / "target" / "linux"
    linux.mkdir(parents=True)
    for d in ("generic", board):
        shutil.copytree(tree / "target/linux" / d, linux / d, symlinks=False)
    for d in [*linux.glob("*/files*"), *linux.glob("*/patches*")]:
        shutil.rmtree(d)


def _libc_extra(makefile: Path, files: str) -> None:
    """The stand-in's one edit of a tree file: musl's libc package also installs glibc's
    libm (sdk.toml libc_extra), so that what links libm passes OpenWrt's dependency check."""
    text = makefile.read_text()
    anchor = "\t\t$(TOOLCHAIN_DIR)/lib/libc.so* \\\n"
    if text.count(anchor) < 1:
        raise RuntimeError(f"{makefile}: Package/musl/install no longer copies libc.so*")
    makefile.write_text(text.replace(anchor, f"{anchor}\t\t{files} \\\n", 1))


def _wrapper(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _toolchain(top: Path, arch: str) -> None:
    """staging_dir/toolchain-*: Debian's cross compiler under OpenWrt's names (sdk.toml)."""
    tc_spec = spec()["toolchain"]
    a = tc_spec["arch"][arch]
    info = {"TARGET_CROSS": a["prefix"], **tc_spec["info"]}
    tc = top / "staging_dir" / f"toolchain-{arch}_gcc-{info['GCC_VERSION']}_{info['LIBC_TYPE']}"
    for d in ("bin", "lib", "include", "usr/include", "usr/lib"):
        (tc / d).mkdir(parents=True, exist_ok=True)
    prefix, deb = a["prefix"], a["debian_prefix"]
    drop = "|".join(tc_spec["drop_flags"])
    link = " ".join(tc_spec["link_flags"])
    for name, real in tc_spec["compilers"].items():
        exe = shutil.which(f"{deb}{real}")
        if exe is None:
            raise RuntimeError(f"{deb}{real} not found (the stand-in SDK's toolchain)")
        _wrapper(tc / "bin" / f"{prefix}{name}", (
            "#!/bin/sh\n# openwrt-wolf stand-in: OpenWrt's toolchain name over Debian's\n"
            'link=1; for a in "$@"; do shift\n'
            '  case "$a" in -c|-S|-E|-M|-MM) link= ;; esac\n'
            f'  case "$a" in {drop}) ;; *) set -- "$@" "$a" ;; esac\ndone\n'
            'st="${STAGING_DIR:+-idirafter $STAGING_DIR/usr/include}"\n'
            'lt="${STAGING_DIR:+-L$STAGING_DIR/usr/lib -Wl,-rpath-link,$STAGING_DIR/usr/lib}"\n'
            f'exec {exe} $st ${{link:+{link} $lt}} "$@"\n'))  # fmt: skip
    for name in tc_spec["binutils"]:
        exe = shutil.which(f"{deb}{name}")
        if exe is None:
            raise RuntimeError(f"{deb}{name} not found (the stand-in SDK's toolchain)")
        _wrapper(tc / "bin" / f"{prefix}{name}", f'#!/bin/sh\nexec {exe} "$@"\n')
    sysroot = Path(a["sysroot"])
    for name, debian_name in tc_spec["lib"].items():
        dest = tc / "lib" / name.replace("{ld_so}", a["ld_so"])
        shutil.copyfile((sysroot / debian_name).resolve(), dest)
    (tc / "info.mk").write_text("".join(f"{k}={v}\n" for k, v in info.items()))


def _host(top: Path, tree: Path, apk: Path) -> None:
    """staging_dir/host/bin (sdk.toml [host])."""
    bin_dir = top / "staging_dir" / "host" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    host = spec()["host"]
    for name in host["debian"]:
        exe = shutil.which(name)
        if exe is None:
            raise RuntimeError(f"{name} not found (the stand-in SDK's host tools)")
        _wrapper(bin_dir / name, f'#!/bin/sh\nexec {exe} "$@"\n')
    # OpenWrt's automake skips -I directories that do not exist (tools/automake's patch
    # 100-aclocal-skip-not-existing-directories); Debian's aclocal stops at them
    aclocal = shutil.which("aclocal")
    _wrapper(bin_dir / "aclocal", (
        "#!/bin/sh\n# openwrt-wolf stand-in: aclocal skipping -I directories that do not exist\n"
        'skip=; for a in "$@"; do shift\n'
        '  if [ -n "$skip" ]; then skip=; [ -d "$a" ] && set -- "$@" -I "$a"; continue; fi\n'
        '  case "$a" in -I) skip=1 ;; *) set -- "$@" "$a" ;; esac\n'
        f'done\nexec {aclocal} "$@"\n'))  # fmt: skip
    real = shutil.which(host["pkg_config_real"])
    if real is None:
        raise RuntimeError("pkgconf not found (the stand-in SDK's pkg-config)")
    _wrapper(bin_dir / "pkg-config.real", f'#!/bin/sh\nexec {real} "$@"\n')
    shutil.copy2(tree / "tools/pkgconf/files/pkg-config", bin_dir / "pkg-config")
    # meson.mk runs `$(PYTHON) $(STAGING_DIR_HOST)/bin/meson.py`; Debian's meson module
    _wrapper(bin_dir / "meson.py", "import sys\nsys.path.append('/usr/lib/python3/dist-packages')\n"
             "from mesonbuild.mesonmain import main\nsys.exit(main())\n")  # fmt: skip
    meson = top / "staging_dir" / "host" / "lib" / "meson"
    meson.mkdir(parents=True)
    for f in (tree / "tools/meson/files").glob("*.in"):
        shutil.copyfile(f, meson / f.name)
    shutil.copy2(apk, bin_dir / "apk")
    _run(["gcc", "-O2", "-o", str(bin_dir / "mkhash"), str(tree / "scripts/mkhash.c")], top)
    _wrapper(bin_dir / "sstrip", (
        "#!/bin/sh\n# openwrt-wolf stand-in: OpenWrt's sstrip (ELFkickers) as "
        "openwrt_wolf.footprint.sizes.sstrip\n"
        f'exec {sys.executable} -c "import sys; sys.path.insert(0, {str(ROOT)!r}); '
        'from openwrt_wolf.footprint.sizes import sstrip_files; sstrip_files(sys.argv[1:])" '
        '"$@"\n'))  # fmt: skip


def _versions(top: Path, revision: str, epoch: int, vermagic: str) -> None:
    """target/sdk/Makefile's seds of include/version.mk and include/kernel.mk."""
    mk = top / "include" / "version.mk"
    text = mk.read_text()
    for var, value in (("REVISION", revision), ("SOURCE_DATE_EPOCH", str(epoch))):
        text, n = re.subn(rf"^# {var}:=.*$", f"{var}:={value}", text, flags=re.M)
        if n != 1:
            raise RuntimeError(f"include/version.mk has no '# {var}:=' line")
    mk.write_text(text)
    kmk = top / "include" / "kernel.mk"
    text, n = re.subn(r"^(\s*LINUX_VERMAGIC:=.*)unknown(.*)$", rf"\g<1>{vermagic}\g<2>",
                      kmk.read_text(), flags=re.M)  # fmt: skip
    if n == 0:
        raise RuntimeError("include/kernel.mk has no LINUX_VERMAGIC 'unknown' to set")
    kmk.write_text(text)


def assemble(
    top: Path, tree: Path, target: str, *, arch: str, apk: Path, release: dict[str, Any]
) -> Path:
    """The SDK tree at ``top`` (its name is the archive's top folder)."""
    board = BOARDS[target]
    _copy_parts(top, tree, board)
    convert = tree / "target/sdk/convert-config.pl"
    with tempfile.NamedTemporaryFile("w", suffix=".config") as cfg:
        cfg.write(release_config(tree, target))
        cfg.flush()
        (top / "Config-build.in").write_text(_run(["perl", str(convert), cfg.name], top))
    tag = f"v{release['name']}"
    base = f"src-git --root=package base https://git.openwrt.org/openwrt/openwrt.git;{tag}\n"
    (top / "feeds.conf.default").write_text(base + (tree / "feeds.conf.default").read_text())
    _toolchain(top, arch)
    _host(top, tree, apk)
    lk = release["linux_kernel"]
    _versions(top, release["version_code"], release["source_date_epoch"], lk["vermagic"])
    return top
