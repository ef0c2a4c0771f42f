"""The what-if record (kind "what-if"): a built image's TLS stack swapped for another
flavour's and its rootfs repacked (whatif/swap.py), the predicted rootfs and both fits. The
one model of it; whatif/cli.py writes it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

KIND = "what-if"


@dataclass(frozen=True)
class WhatIf:
    profile: str
    release: str
    source: str  # the image or directory read
    flavour_from: str
    flavour_to: str
    installed_from: str  # where the installed package list came from
    package_source: str
    removed: list[str]
    added: list[str]
    squashfs_block: int
    rootfs_from: int  # bytes of the image's squashfs
    rootfs_to: int  # bytes of the repacked squashfs (the prediction)
    fit_from: dict[str, Any]  # fit.FitReport.to_dict() of the image as it is
    fit_to: dict[str, Any]  # ... with F's rootfs
    notes: list[str] = field(default_factory=list)
    # of the repacked squashfs: a build of F by the same ImageBuilder writes these bytes
    rootfs_to_sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
