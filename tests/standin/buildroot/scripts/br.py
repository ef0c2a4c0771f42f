#!/usr/bin/env python3
"""The work behind the stand-in buildroot's Makefile (openwrt-wolf tests only).

Mirrors what OpenWrt's buildroot does with the parts openwrt-wolf relies on:
- `make defconfig`: Kconfig's expansion of a seed .config. Symbols the tree does not define
  are dropped (global options: `config NAME` in config/Config-build.in; targets, devices and
  packages: .standin.json and the package index); the device's default packages are selected
  (DEFAULT_PACKAGES + DEVICE_PACKAGES, "-name" removes) unless the seed says "is not set";
  with CONFIG_USE_WOLFSSL (only when the patch set defined it) the WOLFSSL_SWAP pairs of
  include/target.mk replace them; dependencies are forced on; the full .config is written
  with "# CONFIG_X is not set" lines.
- `make` (world): " make[N] <step>" progress lines, the kernel into
  $(KDIR)/<profile>-kernel.bin, a package that fails to build as OpenWrt reports it, then the
  rootfs, images, profiles.json, manifest and sha256sums in bin/targets/<t>/<s>/ through the
  stand-in ImageBuilder's ib.py (check-size's WARNING and deletion included).
Packages are not compiled: prebuilt archives in packages/ stand for package/*/compile.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ib

TOP = ib.TOP
INFO = ib.INFO
T, S = INFO["target"], INFO["subtarget"]


def err(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def options() -> set[str]:
    text = (TOP / "config" / "Config-build.in").read_text()
    return set(re.findall(r"^\s*(?:menu)?config\s+(\S+)", text, re.M))


def swap_pairs() -> dict[str, str]:
    text = (TOP / "include" / "target.mk").read_text().replace("\\\n", " ")
    m = re.search(r"^WOLFSSL_SWAP\s*:=(.*)$", text, re.M)
    if not m:
        return {}
    return dict(w.split(":", 1) for w in m.group(1).split())


def read_config() -> tuple[dict[str, str], set[str]]:
    """(symbol -> value of "CONFIG_X=v" lines, symbols of "# CONFIG_X is not set" lines)."""
    path = TOP / ".config"
    values: dict[str, str] = {}
    unset: set[str] = set()
    if path.is_file():
        for line in path.read_text().splitlines():
            if m := re.match(r"^CONFIG_(\S+?)=(.*)$", line):
                values[m.group(1)] = m.group(2)
            elif m := re.match(r"^# CONFIG_(\S+) is not set$", line):
                unset.add(m.group(1))
    return values, unset


def device_symbol(profile: str) -> str:
    return f"TARGET_{T}_{S}_DEVICE_{profile}"


def defaults(profile: str, wolfssl: bool) -> list[str]:
    pkgs = ib.build_packages(profile, [])  # DEFAULT_PACKAGES + DEVICE_PACKAGES + kernel
    if wolfssl:
        swap = swap_pairs()
        pkgs = [swap.get(p, p) for p in pkgs]
    return pkgs


def cmd_defconfig() -> None:
    values, unset = read_config()
    profiles = list(INFO["profiles"])
    # the device choice: the seed's device if this tree has it, else the choice's default
    profile = next((p for p in profiles if values.get(device_symbol(p)) == "y"), profiles[0])
    known = options()
    opts = {o: ("y" if values.get(o) == "y" else "n") for o in sorted(known)}
    idx = ib.packages_index(reload=False)
    selected = [p for p in defaults(profile, opts.get("USE_WOLFSSL") == "y")
                if f"PACKAGE_{p}" not in unset]  # fmt: skip
    selected += [
        k.removeprefix("PACKAGE_")
        for k, v in values.items()
        if k.startswith("PACKAGE_") and v == "y" and k.removeprefix("PACKAGE_") in idx
    ]
    todo, chosen = list(selected), set()
    while todo:  # `select`/`depends on`: a selected package forces its dependencies on
        p = todo.pop()
        if p in chosen or p not in idx:
            continue
        chosen.add(p)
        todo += [str(d) for d in idx[p].get("depends", [])]  # type: ignore[union-attr]
    out = ["#", "# Automatically generated file; DO NOT EDIT.", "# OpenWrt Configuration", "#"]
    out += [f"CONFIG_TARGET_{T}=y", f"CONFIG_TARGET_{T}_{S}=y"]
    for p in profiles:
        out.append(
            f"CONFIG_{device_symbol(p)}=y"
            if p == profile
            else f"# CONFIG_{device_symbol(p)} is not set"
        )
    out += [f'CONFIG_TARGET_BOARD="{T}"', f'CONFIG_TARGET_SUBTARGET="{S}"',
            f'CONFIG_TARGET_PROFILE="DEVICE_{profile}"']  # fmt: skip
    out += [f"CONFIG_{o}=y" if v == "y" else f"# CONFIG_{o} is not set" for o, v in opts.items()]
    for name in sorted(idx):
        out.append(
            f"CONFIG_PACKAGE_{name}=y" if name in chosen else f"# CONFIG_PACKAGE_{name} is not set"
        )
    (TOP / ".config").write_text("\n".join(out) + "\n")
    print("#\n# configuration written to .config\n#")


def step(level: int, what: str) -> None:
    print(f" make[{level}] {what}", flush=True)


def cmd_world() -> None:
    values, _ = read_config()
    if not values:
        err("make: *** no .config: run make menuconfig or make defconfig first.  Stop.")
        raise SystemExit(2)
    profile = values.get("TARGET_PROFILE", "").strip('"').removeprefix("DEVICE_")
    chosen = [k.removeprefix("PACKAGE_") for k, v in values.items()
              if k.startswith("PACKAGE_") and v == "y"]  # fmt: skip
    step(1, "world")
    step(2, "target/compile")
    step(3, "-C target/linux compile")
    k = ib.kdir()
    k.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TOP / "target" / "linux" / T / "standin-kernels" / f"{profile}-kernel.bin",
                    k / f"{profile}-kernel.bin")  # fmt: skip
    step(2, "package/compile")
    idx = ib.packages_index(reload=False)
    for name in sorted(chosen):
        step(3, f"package/{name}/compile")
        if not (TOP / "packages" / str(idx[name]["file"])).is_file():
            err(f"    ERROR: package/{name} failed to build.")
            err("make[2]: *** [package/Makefile:129: package/compile] Error 1")
            err("make[1]: *** [package/Makefile:123: /stamp/.package_compile] Error 2")
            raise SystemExit(2)
    step(2, "package/install")
    step(2, "target/install")
    # the rootfs is exactly the .config's packages: name the defaults that are not selected
    user = chosen + [f"-{p}" for p in ib.build_packages(profile, []) if p not in chosen]
    ib.cmd_image({"PROFILE": profile, "PACKAGES": " ".join(user),
                  "BIN_DIR": str(TOP / "bin" / "targets" / T / S)})  # fmt: skip
    step(2, "package/index")
    step(2, "checksum")


def main() -> None:
    cmd = sys.argv[1]
    if cmd == "defconfig":
        cmd_defconfig()
    elif cmd == "world":
        cmd_world()
    else:
        err(f"make: *** No rule to make target '{cmd}'.  Stop.")
        raise SystemExit(2)


if __name__ == "__main__":
    main()
