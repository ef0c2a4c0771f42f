"""The sysupgrade image to flash: where it comes from (a path, or the newest build record of
a device and flavour), its checksum, and which boards it is for — from its own fwtool
metadata, else profiles.json beside it, else the device catalogue."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...build.sdk import package_name
from ...catalogue import flavours
from ...catalogue.devices import Device
from ...errors import WolfError
from ...files.hashing import file_sha256
from ...firmware import artifacts
from ...firmware.imageformats import fwtool
from ...results.build import BuildRecord, variant_in
from ...results.store import Record, Store


@dataclass(frozen=True)
class FlashImage:
    path: Path
    size: int
    sha256: str
    supported_devices: tuple[str, ...]  # board names (`ubus call system board` board_name)
    devices_from: str  # "fwtool metadata", "profiles.json", "devices.toml"
    compat_version: str
    version: str | None  # OpenWrt version the image carries, e.g. 25.12.5
    revision: str | None  # e.g. r32000-f0a60eee2f
    target: str | None  # e.g. ath79/generic
    flavour: str | None  # TLS flavour, when a build record says so
    # "patch-set" or "stock" (results/build.py VARIANTS) and the TLS library packages of the
    # build's manifest (name -> version), when a build record says so
    variant: str | None = None
    libraries: tuple[tuple[str, str], ...] = ()


def _supported(meta: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """fwtool.sh's choice: images with compat_version other than 1.0 list the real boards in
    new_supported_devices (supported_devices then holds a message for old routers)."""
    compat = str(meta.get("compat_version") or "1.0")
    key = "supported_devices" if compat == "1.0" else "new_supported_devices"
    devs = meta.get(key) or []
    return compat, tuple(str(d) for d in devs) if isinstance(devs, list) else ()


def _from_profiles_json(image: Path) -> dict[str, Any] | None:
    """The profiles.json entry that lists this image file, with the file's top-level fields
    (read through artifacts.load_profiles_json: bounded, typed, plain names)."""
    pj = image.parent / "profiles.json"
    if not os.path.lexists(pj):
        return None
    doc = artifacts.load_profiles_json(pj)
    for profile in doc.profiles.values():
        for img in profile.images:
            if img.name == image.name:
                return {
                    "supported_devices": profile.supported_devices,
                    "version_number": doc.version_number,
                    "version_code": doc.version_code,
                    "target": doc.target,
                    "sha256": img.sha256,
                }
    return None


def inspect(path: Path, device: Device, *, flavour: str | None = None) -> FlashImage:
    """Everything the flash needs to know about an image file, checked against ``device``."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise WolfError(f"image not found: {path}", hint="give the sysupgrade image with --image")
    size = path.stat().st_size
    meta = fwtool.read_metadata(path)  # a file no flash holds is refused here, before hashing
    digest = file_sha256(path)
    pj = _from_profiles_json(path)
    if meta is not None:
        compat, devs = _supported(meta)
        ver = meta.get("version") or {}
        img = FlashImage(
            path, size, digest, devs, "fwtool metadata", compat,
            ver.get("version"), ver.get("revision"), ver.get("target"), flavour,
        )  # fmt: skip
    elif pj is not None:
        img = FlashImage(
            path, size, digest, tuple(pj["supported_devices"]), "profiles.json", "1.0",
            pj["version_number"], pj["version_code"], pj["target"], flavour,
        )  # fmt: skip
    else:
        img = FlashImage(
            path, size, digest, device.supported_devices, "devices.toml", "1.0",
            None, None, device.target_path, flavour,
        )  # fmt: skip
    if pj and pj.get("sha256") and pj["sha256"] != digest:
        raise WolfError(
            f"{path.name}: sha256 {digest[:16]}… differs from profiles.json ({pj['sha256'][:16]}…)",
            hint="the file is damaged or not the one profiles.json describes; download it again",
        )
    if not img.supported_devices:
        raise WolfError(
            f"{path.name}: no supported devices known (no fwtool metadata, no profiles.json, "
            f"none in devices.toml for {device.profile})",
            hint="put the release's profiles.json beside the image",
        )
    if device.supported_devices and not set(device.supported_devices) & set(img.supported_devices):
        raise WolfError(
            f"{path.name} is for {', '.join(img.supported_devices)} ({img.devices_from}), "
            f"not for --device {device.profile} ({', '.join(device.supported_devices)})",
            hint="pick the image built for this device",
        )
    return img


def board_supported(image: FlashImage, board_name: str) -> bool:
    return board_name in image.supported_devices


def _artifacts(record: Record) -> list[dict[str, Any]]:
    arts = record.data.get("artifacts") or []
    if isinstance(arts, dict):  # {name: {path, sha256, ...}} or {name: path}
        arts = [
            {"name": k, **v} if isinstance(v, dict) else {"name": k, "path": v}
            for k, v in arts.items()
        ]
    return [a for a in arts if isinstance(a, dict) and a.get("path")]


def from_store(
    store: Store, root: Path, device: Device, flavour: str, variant: str | None = None
) -> FlashImage:
    """The sysupgrade image of the newest build record for this device, release, flavour and
    variant ("patch-set" or "stock"; None: any)."""
    records = store.query("build", release=device.release, device=device.profile, flavour=flavour)
    if variant is not None:
        records = [r for r in records if variant_in(r.data, flavour) == variant]
    if not records:
        what = f"{flavour} ({variant})" if variant else flavour
        stock = " --stock" if variant == "stock" else ""
        raise WolfError(
            f"no build of {device.profile} {device.release} with {what} in the store {root}",
            hint=f"build it first (./wolf build --device {device.profile} --flavour {flavour}"
            f"{stock}) or pass --image PATH",
        )
    record = records[-1]
    arts = _artifacts(record)
    sysupgrade = [
        a for a in arts if "sysupgrade" in f"{a.get('type', '')} {a.get('name', '')} {a['path']}"
    ]
    if not sysupgrade:
        raise WolfError(
            f"build record {record.key} of {device.profile} ({flavour}) has no sysupgrade image "
            "(OpenWrt may have deleted it as too big)",
            hint="see ./wolf size-report, or pass --image PATH",
        )
    art = sysupgrade[0]
    path = Path(art["path"])
    if not path.is_absolute():
        path = root / path
    if not path.is_file():
        raise WolfError(
            f"build record {record.key} names {path}, which no longer exists",
            hint="rebuild with --force, or pass --image PATH",
        )
    img = with_build(inspect(path, device, flavour=flavour), _build(record), record)
    if art.get("sha256") and art["sha256"] != img.sha256:
        raise WolfError(
            f"{path} changed since build record {record.key} was written (sha256 differs)",
            hint="rebuild with --force, or pass --image PATH",
        )
    return img


def _build(record: Record) -> BuildRecord | None:
    """The store's build record as its model; None for one that does not read as one (an
    older or foreign shape: the flash then knows no variant)."""
    try:
        return BuildRecord.from_dict(record.data, f"build record {record.key}")
    except WolfError:
        return None


def with_build(
    img: FlashImage, rec: BuildRecord | None, record: Record | None = None
) -> FlashImage:
    """The image with what its build record says: the variant and the SDK's TLS libraries
    (a record that is not a whole BuildRecord gives its variant only)."""
    if rec is None:
        if record is None or not img.flavour:
            return img
        return dataclasses.replace(img, variant=variant_in(record.data, img.flavour))
    libs = []
    for f in rec.compiled:  # the SDK's TLS library packages, by name with their ABI suffix
        name = package_name(f)
        if flavours.library_of_package(name):
            libs.append((name, f.removeprefix(f"{name}-").removesuffix(".apk")))
    return dataclasses.replace(img, variant=rec.variant, libraries=tuple(sorted(libs)))


def from_build(store: Store, img: FlashImage) -> FlashImage:
    """The image with the flavour, variant and TLS libraries of the build that produced a
    file with its checksum, if the store has one."""
    for record in reversed(store.query("build")):
        if any(a.get("sha256") == img.sha256 for a in _artifacts(record)):
            if img.flavour and record.flavour != img.flavour:
                return img  # --flavour says otherwise: the flash checks what it says
            img = dataclasses.replace(img, flavour=record.flavour)
            return with_build(img, _build(record), record)
    return img
