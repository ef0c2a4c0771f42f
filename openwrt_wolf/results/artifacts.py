"""What an OpenWrt build produced, for one device profile, as measured once by
firmware/artifacts.py: image files and sizes, the kernel and rootfs as the image recipe
appends them, the rootfs measured (results/rootfs.py) and the fit (results/fit_report.py).
The one model of it: a build record holds one (results/build.py), the size report reads it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import WolfError
from ..trust import untrusted
from .fit_report import FitReport
from .rootfs import RootfsInfo

SCHEMA = "openwrt-wolf/artifacts/1"


@dataclass(frozen=True)
class ImageFile:
    name: str  # file name in the output directory
    type: str  # sysupgrade, factory, kernel, initramfs-kernel, rootfs, ...
    size: int | None  # bytes; None when listed but gone (OpenWrt deleted a too-big image)
    sha256: str | None = None
    source: str = "file"  # "profiles.json" (its images[].size) or "file" (stat)


@dataclass(frozen=True)
class PackageFile:
    """An installed package as the image's .manifest lists it, and its archive's size when
    the output (packages/ beside the images, or bin/packages/) has the archive."""

    name: str
    version: str
    file: str | None = None  # path relative to the output directory
    size: int | None = None  # bytes of the .apk/.ipk


@dataclass(frozen=True)
class Artifacts:
    profile: str  # OpenWrt profile id ("tplink_tl-wr902ac-v1"), or the image file's stem
    source: str  # the directory or file measured
    layout: str  # "profiles.json 25.12", "profiles.json 24.10", "files", "image"
    release: str | None = None  # version_number from profiles.json, when known
    target: str | None = None  # "ath79/generic"
    images: list[ImageFile] = field(default_factory=list)
    file_size_limits: dict[str, int] = field(default_factory=dict)  # profiles.json (25.12+)
    kernel_size: int | None = None  # bytes of the kernel as the recipe appends it
    kernel_source: str | None = None  # "<file>" or "<image> (split: <format>)"
    metadata_size: int | None = None  # append-metadata trailer, when a split found it
    split: dict[str, Any] | None = None  # imageformats.SplitImage as a dict
    rootfs: RootfsInfo | None = None
    fit: FitReport | None = None
    flavour: str | None = None  # the TLS flavour the rootfs shows (rootfs.flavour_guess)
    manifest: list[PackageFile] = field(default_factory=list)  # from <image prefix>.manifest
    notes: list[str] = field(default_factory=list)
    schema: str = SCHEMA

    @property
    def sysupgrade(self) -> ImageFile | None:
        return next((i for i in self.images if i.type == "sysupgrade"), None)

    @property
    def upgrade_image(self) -> ImageFile | None:
        """The image the device is upgraded with: sysupgrade's, else (armsr, x86: profiles.json
        type combined-efi) the squashfs disk image, which sysupgrade writes there."""
        if self.sysupgrade is not None:
            return self.sysupgrade
        disks = [i for i in self.images if i.type == "combined-efi"]
        return next((i for i in disks if "-squashfs-" in i.name), disks[0] if disks else None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.fit is not None:
            d["fit"] = self.fit.to_dict()  # its notes as a list, as JSON reads them back
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "artifacts data") -> Artifacts:
        """Read back from a record: every field checked (untrusted.typed), the fit report's
        too."""
        schema = d.get("schema") if isinstance(d, dict) else None
        if schema != SCHEMA:
            raise WolfError(
                f"{where}: schema {str(schema)[:40]!r}, this tool reads {SCHEMA}",
                hint="re-run the build that wrote it",
            )
        return untrusted.typed(cls, d, where)

