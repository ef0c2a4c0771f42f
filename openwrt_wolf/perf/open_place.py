"""Opening the lab's places (perf/place.py) per `--target`: qemu-user here, a router over SSH,
the malta VM; and which of the lab's architectures and C libraries a router or VM runs."""

from __future__ import annotations

import contextlib
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import WolfError
from ..footprint.spec import Arch
from ..footprint.toolchain import Toolchain
from ..host import hosttools
from . import qemu_user
from .place import QemuPlace
from .programs import data_file
from .target_place import Platform, TargetPlace


@dataclass(frozen=True)
class VmOptions:
    image: str  # the malta kernel ELF (an OpenWrt initramfs kernel)
    initrd: str | None = None
    append: str | None = None


def qemu_place(arch: Arch, tc: Toolchain, cpu: str) -> QemuPlace:
    return QemuPlace(qemu_user.find(arch, tc, cpu))


def lab_arch(p: Platform, where: str) -> str:
    """The lab's arch (data/footprint/arch.toml) for what the place reported."""
    table = tomllib.loads(data_file("perf.toml").read_text())["place_arch"]
    for row in table:
        if row["machine"] == p.machine and row["endian"] == p.endian:
            return str(row["arch"])
    known = ", ".join(f"{r['machine']} {r['endian']}-endian" for r in table)
    raise WolfError(
        f"the {where} runs {p.machine} {p.endian}-endian ({p.libc}): the lab builds for "
        f"{known} only",
        hint="add the architecture to data/footprint/arch.toml and the [[place_arch]] table of "
        "data/perf/perf.toml",
    )


def toolchain_libc(tc: Toolchain) -> str:
    return "musl" if "musl" in tc.target else "glibc"


def check_libc(place: TargetPlace, tc: Toolchain) -> None:
    """Programs built against one C library do not load with the other's loader."""
    p = place.platform
    want = toolchain_libc(tc)
    if p.libc == want:
        return
    if p.libc == "musl":
        raise WolfError(
            f"the {place.target} runs {p.machine} {p.endian}-endian with musl ({p.loader}); the "
            f"toolchain {tc.target} ({tc.origin}) builds {want} programs, which do not load there",
            hint="pass --toolchain with an OpenWrt SDK or toolchain for this router "
            "(mips_24kc: staging_dir/toolchain-mips_24kc_gcc-*_musl)",
        )
    raise WolfError(
        f"the {place.target} runs {p.machine} with {p.libc} ({p.loader or 'no loader found'}); "
        f"the toolchain {tc.target} builds {want} programs",
        hint="use a toolchain for that C library (--toolchain)",
    )


@contextlib.contextmanager
def opened(
    target: str, *, login: object = None, vm: VmOptions | None = None,
    say: Callable[[str], None] = print,
) -> Iterator[TargetPlace | None]:  # fmt: skip
    """The router or VM place, closed (uploads removed, processes ended, the VM off) on the way
    out, whatever happens; None for qemu (opened once the toolchain is known)."""
    if target == "qemu":
        if login is not None or vm is not None:
            raise WolfError("--target qemu runs here: --host and --image are for router and vm")
        yield None
        return
    if target == "router":
        from ..targets.router.login import Login
        from ..targets.router.ssh import SSHTarget

        if not isinstance(login, Login):
            raise WolfError("--target router needs --host ADDR",
                            hint="with --key or --password as for `invoke flash`")  # fmt: skip
        if vm is not None:
            raise WolfError("--image boots the VM: it does not go with --target router")
        say(f"perf: connecting to {login.where}")
        ssh = SSHTarget(login)
        try:
            place = TargetPlace(ssh, label="router", emulated=False, address=login.host)
            _said(place, say)
            try:
                yield place
            finally:
                place.close()
        finally:
            ssh.close()
        return
    if target == "vm":
        from ..targets.vm.machine import VM, lan_host
        from ..targets.vm.qemu import spec_for

        if login is not None:
            raise WolfError("--host reaches a router: it does not go with --target vm")
        if vm is None:
            raise WolfError("--target vm needs --image PATH (an OpenWrt malta initramfs kernel)")
        spec = spec_for(Path(vm.image), initrd=Path(vm.initrd) if vm.initrd else None,
                        append=vm.append)  # fmt: skip
        hosttools.ensure(["qemu-system-mips", "qemu-system-mipsel"])
        with VM(spec) as machine:
            say(f"perf: booting {Path(vm.image).name} in QEMU")
            machine.boot("shell")
            # servers in the guest are reached through QEMU's port forwarding, not an address
            place = TargetPlace(machine, label="vm", emulated=True, address="",
                                host_address=lan_host(spec.kernel) or "")  # fmt: skip
            _said(place, say)
            try:
                yield place
            finally:
                place.close()
        return
    raise WolfError(f"unknown target {target!r}", hint="qemu, router or vm")


def _said(place: TargetPlace, say: Callable[[str], None]) -> None:
    p = place.platform
    say(f"perf: {place.target} {p.model}: {p.machine} {p.endian}-endian, {p.libc} "
        f"({p.loader or 'no dynamic loader found'})")  # fmt: skip
