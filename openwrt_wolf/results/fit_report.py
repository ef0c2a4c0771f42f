"""The fit report (a build record's ``fit``, an Artifacts' ``fit``): does a sysupgrade image
fit the device's flash, to the byte, and the factory image beside it. The one model of it;
firmware/fit.py's ``evaluate`` makes it (docs/fit.md has the arithmetic)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import WolfError
from ..trust import untrusted

Verdict = Literal["FITS", "TOO_BIG", "UNKNOWN"]


@dataclass(frozen=True)
class FitReport:
    profile: str  # device profile id
    recipe: str  # devices.RECIPES kind
    kernel_size: int | None  # bytes of the kernel as the recipe appends it
    rootfs_size: int | None  # bytes of the squashfs as appended (before pad-rootfs)
    checked_size: int | None  # the size check-size compares (before append-metadata)
    limit: int | None  # the binding limit in bytes (smallest headroom)
    limit_name: str  # "IMAGE_SIZE", "safeloader firmware (kernel + padded rootfs + marker)", ...
    blocksize: int | None  # BLOCKSIZE (erase block)
    erase_blocks: int | None  # erase blocks of kernel+rootfs (the end marker not counted)
    padding: int | None  # fill bytes the recipe added (pad-to, pad-rootfs, alignment)
    margin: int | None  # limit - checked_size ("limit minus checked size"); < 0 when too big
    headroom_blocks: int | None  # whole erase blocks of margin left (floor; < 0 when too big)
    verdict: Verdict
    metadata_size: int | None  # append-metadata trailer, when known
    final_size: int | None  # file size with the trailer, when known
    notes: tuple[str, ...] = ()  # OpenWrt's own lines for a failed check, and our remarks
    # Headroom as a release engineer reads it: how many bytes the root filesystem may still
    # grow with the image kept (0 when not one more byte fits; < 0: bytes to cut to fit).
    rootfs_room: int | None = None
    factory: FactoryFit | None = None  # the factory/recovery image, for recipes that make one

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["notes"] = list(self.notes)
        if self.factory is not None:
            d["factory"]["notes"] = list(self.factory.notes)
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "fit report", path: str = "") -> FitReport:
        """A fit report read back from a record: every field checked (untrusted.typed);
        ``path`` names where ``d`` sits in the file ("data.fit")."""
        at = f"field {path} is " if path else ""
        if not isinstance(d, dict):
            raise WolfError(f"{where}: {at}{untrusted.describe(d)} where an object belongs")
        d = dict(d)
        if "headroom" in d and "margin" not in d:  # records written before rootfs_room
            d["margin"] = d.pop("headroom")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise WolfError(f"{where}: unknown fields{' in ' + path if path else ''}: "
                            f"{', '.join(sorted(unknown))[:200]}")  # fmt: skip
        return untrusted.typed(cls, d, where, path)


@dataclass(frozen=True)
class FactoryFit:
    """The image a user installs from the vendor's firmware (factory.bin, or TP-Link's
    tftp-recovery.bin): its own size check, separate from the sysupgrade image's."""

    name: str  # the IMAGES entry: "factory.bin", "tftp-recovery.bin"
    verdict: Verdict
    limit: int
    limit_name: str
    measured: int  # what that step compares with its limit
    margin: int  # limit - measured
    rootfs_room: int | None  # bytes the rootfs may grow with this image kept
    notes: tuple[str, ...] = ()
