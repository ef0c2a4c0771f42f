"""OpenWrt's own Kconfig on a (patched) tree: what `make defconfig` selects for a device.

`prepare` copies a tree, applies a patch series (the tree's and its feeds'), optionally installs
a LuCI feed with OpenWrt's own scripts/feeds, and runs `make defconfig` once, which builds
scripts/config/conf and scans every target and package into tmp/. That costs minutes, so the
result is cached per tree and series (their hash). `select` then seeds a `.config` for one
device and expands it with OpenWrt's conf, as `make defconfig` does, in about a second.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths, proc
from ..errors import WolfError
from ..files.locks import locked
from . import series

READY = ".wolf-kconfig-ready"
DEFCONFIG_TIMEOUT = 3600.0  # cold: every target and package Makefile is scanned
CONF_TIMEOUT = 300.0
FEEDS_TIMEOUT = 900.0


@dataclass(frozen=True)
class Device:
    """A device profile as Kconfig names it: CONFIG_TARGET_<target>_<subtarget>_DEVICE_<profile>."""

    target: str
    subtarget: str
    profile: str

    @property
    def seed(self) -> list[str]:
        t = f"CONFIG_TARGET_{self.target}"
        return [
            f"{t}=y",
            f"{t}_{self.subtarget}=y",
            f"{t}_{self.subtarget}_DEVICE_{self.profile}=y",
        ]


@dataclass
class Selection:
    device: str
    use_wolfssl: bool
    extra: list[str]
    config: dict[str, str] = field(default_factory=dict)  # CONFIG_X -> value, set symbols only

    def packages(self, value: str = "y") -> list[str]:
        pre = "CONFIG_PACKAGE_"
        return sorted(
            k[len(pre) :] for k, v in self.config.items() if k.startswith(pre) and v == value
        )

    def mbedtls(self) -> list[str]:
        return [p for p in self.packages() if "mbedtls" in p]


def _tool_path(work: Path) -> dict[str, str]:
    """PATH with gawk as `awk`: OpenWrt's scan.awk needs gawk, Debian's default awk is mawk."""
    gawk = shutil.which("gawk")
    if not gawk:
        raise WolfError("gawk not found (OpenWrt's scan needs it)", hint="apt-get install gawk")
    bindir = work / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    if not (bindir / "awk").exists():
        (bindir / "awk").symlink_to(gawk)
    return {"PATH": f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def _digest(tree: Path, patches_dir: Path | None, feed: Path | None) -> str:
    """The tree's path (snapshots are extracted once, never edited), the series' patches in
    order, and the feed's files."""
    h = hashlib.sha256(str(tree.resolve()).encode())
    for s in series.load(patches_dir) if patches_dir else []:
        for p in s.patches:
            h.update(f"{s.name}\0{p.name}\0{p.sha256()}\0".encode())
    if feed:
        for f in sorted(p for p in feed.rglob("*") if p.is_file()):
            h.update(str(f.relative_to(feed)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def prepare(
    tree: Path,
    *,
    patches_dir: Path | None = None,
    luci_feed: Path | None = None,
    feed_packages: tuple[str, ...] = ("luci-ssl",),
) -> Path:
    """A scanned copy of tree (series from patches_dir applied, LuCI feed installed), cached."""
    if not (tree / "include" / "toplevel.mk").is_file():
        raise WolfError(f"{tree} is not an OpenWrt tree (no include/toplevel.mk)", hint="--tree")
    kind = "patched" if patches_dir else "pristine"
    dest = (
        paths.cache_dir()
        / "kconfig"
        / f"{tree.name}-{kind}-{_digest(tree, patches_dir, luci_feed)}"
    )
    with locked(dest.parent / f"{dest.name}.lock"):
        if (dest / READY).is_file():
            return dest
        shutil.rmtree(dest, ignore_errors=True)
        try:
            _prepare(tree, dest, patches_dir, luci_feed, feed_packages)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        (dest / READY).write_text("")
    return dest


def _prepare(
    tree: Path,
    dest: Path,
    patches_dir: Path | None,
    luci_feed: Path | None,
    feed_packages: tuple[str, ...],
) -> None:
    shutil.copytree(tree, dest, symlinks=True)
    env = _tool_path(dest.parent / f"{dest.name}.bin")
    if luci_feed:
        # src-cpy: the feed is copied into feeds/luci, so patching it leaves luci_feed alone
        (dest / "feeds.conf").write_text(f"src-cpy luci {luci_feed}\n")
        proc.run(["./scripts/feeds", "update", "luci"], timeout=FEEDS_TIMEOUT, cwd=dest, env=env)
    if patches_dir:
        series.apply(dest, series.load(patches_dir))
    if luci_feed:
        argv = ["./scripts/feeds", "install", "-p", "luci", *feed_packages]
        proc.run(argv, timeout=FEEDS_TIMEOUT, cwd=dest, env=env)
    proc.run(["make", "defconfig"], timeout=DEFCONFIG_TIMEOUT, cwd=dest, env=env)


def parse_config(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v.strip('"')
    return out


def select(
    prepared: Path, device: Device, *, use_wolfssl: bool, extra: tuple[str, ...] = ()
) -> Selection:
    """Seed a .config for device (+ CONFIG_USE_WOLFSSL, + extra lines) and expand it with conf."""
    conf = prepared / "scripts" / "config" / "conf"
    if not conf.is_file():
        raise WolfError(f"{prepared} has no scripts/config/conf", hint="run prepare() on it first")
    seed = [*device.seed, *(["CONFIG_USE_WOLFSSL=y"] if use_wolfssl else []), *extra]
    with tempfile.TemporaryDirectory(prefix="wolf-kconfig-") as tmp:
        cfg = Path(tmp) / ".config"
        cfg.write_text("\n".join(seed) + "\n")
        # conf reads Config.in relative to the tree and writes $KCONFIG_CONFIG (else the
        # tree's .config): a private file, so selections can run side by side
        proc.run(
            [str(conf), f"--defconfig={cfg}", "Config.in"],
            timeout=CONF_TIMEOUT,
            cwd=prepared,
            env={"KCONFIG_CONFIG": str(cfg)},
        )
        text = cfg.read_text()
    config = parse_config(text)
    if (
        config.get(f"CONFIG_TARGET_{device.target}_{device.subtarget}_DEVICE_{device.profile}")
        != "y"
    ):
        raise WolfError(
            f"Kconfig did not select {device.profile} in {device.target}/{device.subtarget}",
            hint="check the profile name against `make info` / target/linux/*/image",
        )
    return Selection(device.profile, use_wolfssl, list(extra), config)
