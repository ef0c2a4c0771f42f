"""A real OpenWrt image (malta; armsr on QEMU's virt machine) booted for the lab's tests
inside it (`perf --target vm --rootfs`: perf/wifi_image.py, perf/image_heap.py): the kernel
without initramfs and the image's rootfs on a disk of its own (targets/vm/image.private_disk),
as a router boots from flash; the image's HTTPS port forwarded to the host; heaptrack built
with the image's own OpenWrt toolchain (musl: programs built with another C library do not load
there). What every record of such a run says about where it ran is here (`guest`, `machine`,
`device`)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import WolfError
from ..files.hashing import file_sha256
from ..footprint import spec, toolchain
from ..host import hosttools
from ..results import store
from ..results.perf import NetCommon, Where, record_key
from ..targets.vm.kernel import private_disk
from ..targets.vm.machine import VM
from ..targets.vm.qemu import binary, free_port, spec_for
from . import open_place, programs
from .target_place import TargetPlace

TLS = re.compile(r"^(lib(wolfssl|mbedtls|mbedcrypto|openssl)|libustream-)")  # package names


@dataclass(frozen=True)
class Image:
    kernel: Path  # a malta kernel without initramfs (for Wi-Fi: with mac80211_hwsim)
    rootfs: Path  # the flavour's …-rootfs-squashfs.img(.gz)
    toolchain: str  # the image's OpenWrt toolchain (heaptrack)
    release: str

    def check(self) -> None:
        for what, p in (("--image", self.kernel), ("--rootfs", self.rootfs)):
            if not p.is_file():
                raise WolfError(f"{what} {p}: not a file")


@dataclass
class Booted:
    vm: VM
    place: TargetPlace
    shim: Path  # heaptrack.so for the image
    machine: str  # the QEMU line, for Where
    clock: str
    https_port: int  # the host's port forwarded to the image's 443
    guest: dict[str, str]  # kernel and rootfs with their sha256, uname, release, host_load
    device: str | None  # the image's DISTRIB_TARGET, "malta/be" as "malta-be"
    tls: list[str] = field(default_factory=list)  # the image's TLS libraries (apk info)
    started: float = field(default_factory=time.monotonic)

    def common(
        self, flavour: str, *, backend: str, client: str, metrics: dict[str, dict[str, Any]],
        quick: bool, machine: str | None = None,
    ) -> NetCommon:  # fmt: skip
        """What every record of a test in this image says about the programs and where."""
        sha = self.guest["rootfs_sha256"]
        return NetCommon(
            flavour=flavour, library="the image's: " + ", ".join(self.tls), backend=backend,
            userland_key=f"image-{sha[:12]}", footprint_key="", client=client,
            where=Where("vm", True, machine or self.machine, self.clock), target="vm",
            emulated=True, quick=quick, metrics=metrics,
            seconds=round(time.monotonic() - self.started, 1),
        )  # fmt: skip

    def record(
        self, kind: str, test: str, flavour: str, release: str, data: dict[str, Any]
    ) -> store.Record:
        """The record of one test in this image: keyed by the rootfs, the image's device."""
        key = record_key(flavour, "vm", f"{test}-image-{self.guest['rootfs_sha256'][:12]}")
        return store.Record(kind, key, release, self.device, flavour, data)


def heaptrack(arch_name: str, toolchain_path: str, release: str) -> Path:
    """data/perf/heaptrack.c for the image: built with its own OpenWrt toolchain (musl) at the
    lab's flags for the arch (perf/programs.py shim, cached)."""
    arch = spec.get_arch(arch_name)
    tc = toolchain.find(arch, toolchain_path)
    bs = spec.resolve("mbedtls", release or None, "openwrt", arch.name)  # for its CPU flags
    return programs.shim("heaptrack", bs, tc)


@contextlib.contextmanager
def booted(
    img: Image, *, extra: tuple[str, ...], name: str, say: Callable[[str], None]
) -> Iterator[Booted]:
    """The image up to its network state; the VM off and its disk removed on the way out. The
    host's 1-minute load is kept before and after (the guest's clock is the host's)."""
    img.check()
    hosttools.ensure([binary(spec_for(img.kernel).kernel)])
    load = [round(os.getloadavg()[0], 2)]
    guest = {"kernel": str(img.kernel), "kernel_sha256": file_sha256(img.kernel),
             "rootfs": str(img.rootfs), "rootfs_sha256": file_sha256(img.rootfs)}  # fmt: skip
    with contextlib.ExitStack() as stack:
        disk = stack.enter_context(private_disk(img.rootfs))
        port = free_port()
        vm_spec = dataclasses.replace(spec_for(img.kernel, rootfs=disk), extra=extra,
                                      forwards=((port, 443),))  # fmt: skip
        machine = (f"{binary(vm_spec.kernel)} -M {vm_spec.kernel.machine} TCG"
                   f"{''.join(' ' + x for x in extra)}, {img.kernel.name}")  # fmt: skip
        say(f"perf: booting {img.rootfs.name} with {img.kernel.name}")
        vm = stack.enter_context(VM(vm_spec, name=name))
        vm.boot("network")
        place = TargetPlace(vm, label="vm", emulated=True, address="")
        stack.callback(place.close)
        arch = spec.get_arch(open_place.lab_arch(place.platform, "vm"))
        open_place.check_libc(place, toolchain.find(arch, img.toolchain))
        release = ". /etc/openwrt_release; echo $DISTRIB_ID $DISTRIB_RELEASE $DISTRIB_TARGET"
        guest |= {"uname": vm.run("uname -r -v").output.strip(),
                  "release": vm.run(release).output.strip(), "qemu": machine}  # fmt: skip
        target = vm.run(". /etc/openwrt_release; echo $DISTRIB_TARGET").output.strip()
        clock = "guest instructions" if "-icount" in extra else "wall (TCG: the host's clock)"
        installed = vm.run("apk info 2>/dev/null").output.split()
        b = Booted(vm, place, heaptrack(arch.name, img.toolchain, img.release), machine, clock,
                   port, guest, target.replace("/", "-") or None,
                   sorted(p for p in installed if TLS.match(p)))  # fmt: skip
        yield b
    load.append(round(os.getloadavg()[0], 2))
    guest["host_load"] = " ".join(map(str, load))  # 1-minute load average, before and after
