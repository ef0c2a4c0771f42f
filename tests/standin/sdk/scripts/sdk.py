#!/usr/bin/env python3
"""The work behind the stand-in SDK's Makefile (openwrt-wolf tests only).

`compile NAME`: the package must be installed from a feed (package/feeds/<feed>/<name>) and
selected in .config (CONFIG_PACKAGE_<name>=y|m, after `make defconfig`), as in OpenWrt. Its
Makefile gives the name (PKG_NAME, or luci-<LUCI_BASENAME> for LuCI packages), version
(PKG_VERSION-rPKG_RELEASE) and dependencies (DEPENDS/LUCI_DEPENDS "+name"); files/ is packed
into bin/packages/<arch>/<feed>/<name>-<version>.apk with a .PKGINFO the stand-in ImageBuilder
reads."""

import io
import json
import os
import re
import sys
import tarfile
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
    meta = json.dumps(
        {"name": pkg, "version": version, "depends": depends, "conflicts": [], "provides": []}
    ).encode()
    with tarfile.open(apk, "w:gz") as tar:
        info = tarfile.TarInfo(".PKGINFO")
        info.size = len(meta)
        tar.addfile(info, io.BytesIO(meta))
        files = pdir / "files"
        if files.is_dir():
            for f in sorted(files.rglob("*")):
                if f.is_file():
                    tar.add(f, arcname=str(f.relative_to(files)))


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
