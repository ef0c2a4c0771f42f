"""The device catalogue (data/devices.toml): loading, and resolving what a user typed to one
OpenWrt profile of one release."""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import WolfError
from ..paths import DATA_DIR
from ..units import parse_size
from . import releases

# "other": a sysupgrade pipeline none of the fit models covers (read from a tree; fit says UNKNOWN)
# Disk images of a boot and a root partition (no flash; CONFIG_TARGET_KERNEL_PARTSIZE and
# ROOTFS_PARTSIZE): "rpi-sdcard" (bcm27xx gen_rpi_sdcard_img.sh), "efi-combined" (armsr
# gen_image_generic.sh, also booted by a VM)
PARTITIONED = ("rpi-sdcard", "efi-combined")
RECIPES = ("ath79-default", "tplink-safeloader", "tplink-v2", "malta-initramfs", *PARTITIONED,
           "other")  # fmt: skip


@dataclass(frozen=True)
class Partition:
    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class Device:
    profile: str  # OpenWrt's profile id, e.g. tplink_tl-wr902ac-v1
    release: str
    target: str
    subtarget: str
    arch_packages: str
    recipe: str
    squashfs_block: int
    title: str = ""
    soc: str = ""
    aliases: tuple[str, ...] = ()
    flash_size: int | None = None
    image_size: int | None = None  # IMAGE_SIZE, bytes; what check-size compares against
    kernel_size: int | None = None  # KERNEL_SIZE when the device sets it
    blocksize: int | None = None  # BLOCKSIZE: the erase block pad-to and padjffs2 align to
    firmware_partition: Partition | None = None
    # PARTITIONED recipes: the partitions' sizes in MiB, as the .config's TARGET_KERNEL_PARTSIZE
    # and TARGET_ROOTFS_PARTSIZE give them (config/Config-images.in's defaults per target)
    kernel_partsize: int | None = None
    rootfs_partsize: int | None = None
    device_packages: tuple[str, ...] = ()
    supported_devices: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)  # recipe parameters (tplink ids, ...)

    @property
    def target_path(self) -> str:
        return f"{self.target}/{self.subtarget}"

    @property
    def has_flash(self) -> bool:
        return self.image_size is not None

    @property
    def boots_in_vm(self) -> bool:
        """QEMU boots its initramfs kernel (malta, armsr/armv8's virt machine), no flash."""
        return not self.has_flash and bool(self.extra.get("initramfs"))

    @property
    def partitioned(self) -> bool:
        """A disk image (SD card, EFI disk): the rootfs has a partition, not flash."""
        return self.recipe in PARTITIONED and self.rootfs_partsize is not None

    @property
    def make_profile(self) -> str:
        """The name OpenWrt's ImageBuilder knows the device by (`make image PROFILE=`): a
        target without device profiles (malta) has one, "Default"."""
        return str(self.extra.get("target_profile") or self.profile)

    @property
    def buildroot_config(self) -> tuple[tuple[str, str], ...]:
        """Kconfig symbols (no CONFIG_) a buildroot seed of this device sets whatever the
        flavour (armsr: its initramfs kernel, the one image a VM boots without firmware)."""
        raw: dict[str, str] = self.extra.get("buildroot_config") or {}
        return tuple(sorted((str(k), str(v)) for k, v in raw.items()))


_SIZE_FIELDS = ("flash_size", "image_size", "kernel_size", "blocksize", "squashfs_block")
_KNOWN = {
    "profile", "release", "target", "subtarget", "arch_packages", "recipe", "title",
    "soc", "aliases", "device_packages", "supported_devices", "firmware_partition",
    "kernel_partsize", "rootfs_partsize", *_SIZE_FIELDS,
}  # fmt: skip


def device_from_dict(d: dict[str, Any], where: str = "devices.toml") -> Device:
    try:
        sizes = {k: parse_size(d[k], what=k) for k in _SIZE_FIELDS if k in d}
        part = d.get("firmware_partition")
        recipe = d["recipe"]
        brc = d.get("buildroot_config", {})
        if not isinstance(brc, dict) or not all(isinstance(v, str) for v in brc.values()):
            raise WolfError(f"{where}: {d['profile']}: buildroot_config is not a table of strings")
        if recipe not in RECIPES:
            raise WolfError(f"{where}: {d['profile']}: unknown recipe {recipe!r}")
        parts = {k: d[k] for k in ("kernel_partsize", "rootfs_partsize") if k in d}
        for k, v in parts.items():
            if not isinstance(v, int) or isinstance(v, bool) or not 0 < v < 1 << 20:
                raise WolfError(f"{where}: {d['profile']}: {k} is not a size in MiB: {v!r}")
        if recipe in PARTITIONED and "rootfs_partsize" not in parts:
            raise WolfError(f"{where}: {d['profile']}: the {recipe} recipe needs rootfs_partsize")
        return Device(
            profile=d["profile"],
            release=str(d["release"]),
            target=d["target"],
            subtarget=d["subtarget"],
            arch_packages=d["arch_packages"],
            recipe=recipe,
            title=d.get("title", ""),
            soc=d.get("soc", ""),
            aliases=tuple(d.get("aliases", ())),
            device_packages=tuple(d.get("device_packages", ())),
            supported_devices=tuple(d.get("supported_devices", ())),
            firmware_partition=Partition(**part) if part else None,
            **parts,
            extra={k: v for k, v in d.items() if k not in _KNOWN},
            **sizes,
        )
    except KeyError as e:
        raise WolfError(f"{where}: a device entry lacks {e.args[0]!r}") from None


@cache
def catalogue(path: Path | None = None) -> tuple[Device, ...]:
    path = path or DATA_DIR / "devices.toml"
    raw = tomllib.loads(path.read_text())
    return tuple(device_from_dict(d, path.name) for d in raw.get("device", []))


def for_release(release: str | None = None) -> list[Device]:
    rel = releases.get(release).name
    return [d for d in catalogue() if d.release == rel]


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def resolve(name: str, release: str | None = None) -> Device:
    """Find the device a user meant: exact profile id, then an alias, in the release.

    'tl-wr902ac' -> tplink_tl-wr902ac-v1 (the ath79 device of the published comparison).
    """
    rel = releases.get(release).name
    devs = for_release(rel)
    if not devs:  # a release in data/releases.toml whose devices nobody has read in yet
        have = sorted({d.release for d in catalogue()})
        raise WolfError(
            f"the device catalogue has no devices for release {rel}",
            hint=f"releases with devices: {', '.join(have)}; add them with "
            f"`./wolf devices --tree OPENWRT_TREE --release {rel} --write`",
        )
    want = _norm(name)
    for d in devs:
        if _norm(d.profile) == want or want in (_norm(a) for a in d.aliases):
            return d
    elsewhere = [d.release for d in catalogue() if _norm(d.profile) == want]
    if elsewhere:
        raise WolfError(
            f"device {name!r} does not exist in release {rel}",
            hint=f"it is in: {', '.join(sorted(set(elsewhere)))}",
        )
    names = [d.profile for d in devs] + [a for d in devs for a in d.aliases]
    close = difflib.get_close_matches(name, names, n=4, cutoff=0.5)
    hint = f"did you mean: {', '.join(close)}" if close else "see `./wolf devices`"
    raise WolfError(f"unknown device {name!r} for release {rel}", hint=hint)


def resolve_many(names: str, release: str | None = None) -> list[Device]:
    """A comma-separated list; 'all' means every device of the release."""
    if names.strip() == "all":
        return for_release(release)
    out = [resolve(n.strip(), release) for n in names.split(",") if n.strip()]
    if not out:
        raise WolfError(f"no device in {names!r}", hint="e.g. --device tl-wr902ac; see `devices`")
    return out
