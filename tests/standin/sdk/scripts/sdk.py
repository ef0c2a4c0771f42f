#!/usr/bin/env python3
"""The work behind the stand-in SDK's Makefile (openwrt-wolf tests only).

`compile NAME`: the package must be installed from a feed (package/feeds/<feed>/<name>) and
selected in .config (CONFIG_PACKAGE_<name>=y|m, after `make defconfig`), as in OpenWrt. Its
Makefile gives the name (PKG_NAME, or luci-<LUCI_BASENAME> for LuCI packages), version
(PKG_VERSION-rPKG_RELEASE) and dependencies (DEPENDS/LUCI_DEPENDS "+name"); files/ is packed
into bin/packages/<arch>/<feed>/<name>-<version>.apk by apk-tools' `apk mkpkg`
(staging_dir/host/bin/apk) as include/package-pack.mk calls it: an APK v3 package with
lib/apk/packages/<name>.list and package-pack.mk's post-install script."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TOP = Path(os.environ.get("TOPDIR") or Path(__file__).resolve().parent.parent)
INFO = json.loads((TOP / ".standin.json").read_text())


def variables(makefile: str) -> dict[str, str]:
    text = makefile.replace("\\\n", " ")
    out = {}
    for m in re.finditer(r"^([A-Z_]+)\s*[:+]?=\s*(.*)$", text, re.M):
        out[m.group(1)] = " ".join(m.group(2).split())
    return out


def config() -> dict[str, str]:
    cfg = TOP / ".config"
    out = {}
    if cfg.exists():
        for line in cfg.read_text().splitlines():
            m = re.match(r"^CONFIG_PACKAGE_(\S+)=([ym])$", line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def defconfig() -> None:
    # keep the selections, add the target's symbols as `make defconfig` would
    cfg = TOP / ".config"
    lines = cfg.read_text().splitlines() if cfg.exists() else []
    lines = [ln for ln in lines if ln.startswith(("CONFIG_PACKAGE_", "# CONFIG_PACKAGE_"))]
    t, s = INFO["target"], INFO["subtarget"]
    head = [
        f"CONFIG_TARGET_{t}=y",
        f"CONFIG_TARGET_{t}_{s}=y",
        f'CONFIG_TARGET_ARCH_PACKAGES="{INFO["arch_packages"]}"',
    ]
    cfg.write_text("\n".join(head + sorted(set(lines))) + "\n")


def compile_pkg(name: str) -> None:
    dirs = list((TOP / "package" / "feeds").glob(f"*/{name}"))
    if not dirs:
        print(
            f"make[1]: *** No rule to make target 'package/{name}/compile'.  Stop.", file=sys.stderr
        )
        raise SystemExit(2)
    pdir = dirs[0]
    feed = pdir.parent.name
    v = variables((pdir / "Makefile").read_text())
    pkg = v.get("PKG_NAME") or f"luci-{v['LUCI_BASENAME']}"
    if pkg not in config():
        print(
            f"WARNING: package {pkg} is not selected in .config, nothing to build", file=sys.stderr
        )
        return
    version = f"{v.get('PKG_VERSION', '0')}-r{v.get('PKG_RELEASE', '1')}"
    depends = [
        d[1:]
        for d in (v.get("DEPENDS", "") + " " + v.get("LUCI_DEPENDS", "")).split()
        if d.startswith("+")
    ]
    out = TOP / "bin" / "packages" / INFO["arch_packages"] / feed
    out.mkdir(parents=True, exist_ok=True)
    apk = out / f"{pkg}-{version}.apk"
    print(f"Packaging {pkg} {version} -> {apk.relative_to(TOP)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sdk-pkg-") as tmp:
        idir = Path(tmp) / "ipkg"
        files = pdir / "files"
        if files.is_dir():
            shutil.copytree(files, idir, symlinks=True)
        meta = idir / "lib" / "apk" / "packages"
        meta.mkdir(parents=True, exist_ok=True)
        listed = sorted("/" + str(f.relative_to(idir)) for f in idir.rglob("*") if f.is_file())
        (meta / f"{pkg}.list").write_text("".join(f"{f}\n" for f in listed))
        script = Path(tmp) / "post-install"
        script.write_text(
            '#!/bin/sh\n[ "${IPKG_NO_SCRIPT}" = "1" ] && exit 0\n'
            "[ -s ${IPKG_INSTROOT}/lib/functions.sh ] || exit 0\n"
            f'. ${{IPKG_INSTROOT}}/lib/functions.sh\nexport root="${{IPKG_INSTROOT}}"\n'
            f'export pkgname="{pkg}"\nadd_group_and_user\ndefault_postinst\n'
        )
        subprocess.run(
            [str(TOP / "staging_dir" / "host" / "bin" / "apk"), "mkpkg",
             "--info", f"name:{pkg}", "--info", f"version:{version}",
             "--info", f"arch:{'noarch' if v.get('LUCI_TYPE') else INFO['arch_packages']}",
             "--info", f"description:{v.get('LUCI_TITLE', pkg)}",
             "--info", f"license:{v.get('PKG_LICENSE', '')}", "--info", f"origin:{pkg}",
             "--info", f"depends:{' '.join(depends)}", "--script", f"post-install:{script}",
             "--files", str(idir), "--output", str(apk)],
            check=True,
        )  # fmt: skip


def main() -> None:
    cmd = sys.argv[1]
    if cmd == "defconfig":
        defconfig()
    elif cmd == "compile":
        compile_pkg(sys.argv[2])
    elif cmd in ("index", "world"):
        pass
    else:
        raise SystemExit(2)


if __name__ == "__main__":
    main()
