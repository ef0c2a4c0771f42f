"""The memory record (kind "memory"): free memory at idle after N boots of one image, on a VM
or a router (measure/free_memory.py writes it, the size report and history read it).
A record is read whole or not at all: a partial one is skipped with the store's one warning
line, as a build or footprint record of the wrong shape is."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..trust import untrusted
from . import key_policy

KIND = "memory"
SHOWN = ("MemTotal", "MemFree", "MemAvailable")  # the fields the size report shows


@dataclass(frozen=True)
class BootMemory:
    """One boot: what the guest's kernel and `free` said once it had settled."""

    boot: int  # 1-based
    meminfo_kb: dict[str, int]  # every /proc/meminfo field, kB
    free_kb: dict[str, int]  # `free`'s Mem: row by its column names, kB
    loadavg: str  # /proc/loadavg at the reading (diagnostic only)
    uptime_s: float  # the guest's /proc/uptime at the reading
    settled_state: str  # the last boot state reached before idling: network, shell (VM), ssh
    transitions: list[dict[str, Any]]  # [{state, at, took}], seconds since QEMU start / reboot
    seconds_to_measurement: float  # wall time from QEMU's start (router: `reboot`) to the reading

    @property
    def memfree_kb(self) -> int:
        return self.meminfo_kb["MemFree"]


@dataclass(frozen=True)
class Spread:
    median: float
    min: int
    max: int


@dataclass(frozen=True)
class MemoryResult:
    """The record's ``data``. Flat fields first (what size-report shows), then the details."""

    memfree_kb: float  # median MemFree over the boots: "Free memory at idle after boot, kB"
    memavailable_kb: float | None  # median MemAvailable
    memtotal_kb: int  # MemTotal of the first boot (the same on every boot of one image)
    qemu_memory_mb: int | None  # -m (None on a router)
    boots: int
    settle: str  # the settle rule, in words
    idle_s: float
    image: str | None  # the kernel image booted (None on a router: it boots its own flash)
    image_sha256: str | None
    rootfs: str | None
    arch: str | None  # mips or mipsel (from the ELF header; None on a router)
    kernel_release: str  # uname -r in the guest
    openwrt_release: str | None  # DISTRIB_RELEASE of /etc/openwrt_release, when present
    qemu: str | None  # the QEMU binary (None on a router)
    summary: dict[str, Spread] = field(default_factory=dict)  # per meminfo.KEY_FIELDS: median/min/max
    per_boot: list[BootMemory] = field(default_factory=list)
    target: str = "vm"  # "vm" (QEMU malta) or "router" (over SSH)
    host: str | None = None  # router: host:port measured
    board_name: str | None = None  # router: `ubus call system board` board_name
    model: str | None = None  # router: its model string
    # where the VM's root filesystem lives: "initramfs" (in RAM, with the kernel) or "disk"
    # (the squashfs image on QEMU's IDE disk with the overlay after it, as a router boots from
    # flash); None on a router
    root: str | None = None
    rootfs_sha256: str | None = None  # the rootfs image given (not the task's private copy)

    @classmethod
    def from_dict(cls, d: Any, where: str = "memory record", path: str = "") -> MemoryResult:
        """Read back from the store: every field checked (untrusted.typed); ``path`` names
        where ``d`` sits in the file (a record's "data")."""
        return untrusted.typed(cls, d, where, path)

    def medians(self) -> dict[str, int]:
        """The SHOWN fields as the report shows them: the median over the boots in whole kB
        (the summary's, else the flat fields)."""
        flat = {"MemTotal": self.memtotal_kb, "MemFree": self.memfree_kb,
                "MemAvailable": self.memavailable_kb}  # fmt: skip
        out = {}
        for name in SHOWN:
            spread = self.summary.get(name)
            v = spread.median if spread else flat[name]
            if v is not None:
                out[name] = round(v)
        return out

    @property
    def boot_root(self) -> str:
        """Which memory figure of an image this is: "disk" (the VM with its rootfs on a disk,
        as a router boots from flash) or "boot" (the image's own boot: an initramfs VM, or a
        router)."""
        return "disk" if self.root == "disk" else "boot"


def record_key(result: MemoryResult, device: str | None, flavour: str | None) -> str:
    """Stable per image (router: host, board and release) and settings: measuring the same
    thing again replaces the record."""
    if result.target == "router":
        what = f"router {result.host} {result.board_name} {result.openwrt_release}"
    else:
        rootfs = result.rootfs_sha256 or result.rootfs  # older records: the path
        what = f"{result.image_sha256} {rootfs} {result.qemu_memory_mb}"
    return key_policy.named("memory", device, flavour, key_policy.digest(f"{what} {result.idle_s}", 12))
