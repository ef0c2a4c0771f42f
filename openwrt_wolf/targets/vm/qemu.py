"""The QEMU command line, built from data (data/vm.toml) and a VmSpec, with no side effects, so
it can be tested and printed as the line that reproduces a run."""

from __future__ import annotations

import socket
import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ...errors import WolfError
from ...paths import DATA_DIR
from .kernel import Kernel, inspect_kernel


@cache
def config() -> dict[str, Any]:
    return tomllib.loads((DATA_DIR / "vm.toml").read_text())


@dataclass(frozen=True)
class Nic:
    role: str  # lan or wan
    mac: str
    net: str | None = None  # QEMU user network, e.g. 192.168.1.0/24
    guest: str | None = None  # the guest's address on it, where SSH is forwarded
    ssh: bool = False


def nics(kernel: Kernel | None = None) -> list[Nic]:
    """The malta guest's NICs; the pc guest (Wi-Fi) has none: its radios are mac80211_hwsim's."""
    if kernel is not None and kernel.machine == "pc":
        return []
    return [Nic(**n) for n in config()["nic"]]


@dataclass(frozen=True)
class VmSpec:
    kernel: Kernel
    memory_mb: int = 0  # 0: data/vm.toml's default
    initrd: Path | None = None  # only for a kernel without a built-in initramfs
    rootfs: Path | None = None
    append: str | None = None  # None: the kernel's own command line (OpenWrt's images)
    ssh_port: int | None = None  # host port on 127.0.0.1 forwarded to the guest's port 22
    # more (host port on 127.0.0.1, guest port) TCP forwards to the lan address, e.g. HTTPS
    forwards: tuple[tuple[int, int], ...] = ()
    extra: tuple[str, ...] = field(default=())

    def memory(self) -> int:
        mb = self.memory_mb or int(config()[_table(self.kernel)]["memory_mb"])
        if not 16 <= mb <= 2048:
            raise WolfError(
                f"--memory {mb} MB is out of range", hint="use 16..2048 (malta uses up to 256)"
            )
        return mb


def _table(kernel: Kernel) -> str:
    """data/vm.toml's table for the kernel's machine: [qemu] (malta), [pc] or [virt]."""
    return kernel.machine if kernel.machine in ("pc", "virt") else "qemu"


def binary(kernel: Kernel) -> str:
    if kernel.machine in ("pc", "virt"):
        return str(config()[kernel.machine]["binary"])
    return str(config()["qemu"]["binary"][kernel.endian])


def command(spec: VmSpec, console_socket: Path) -> list[str]:
    """argv for QEMU. The serial console is a unix socket QEMU waits on (wait=on), so no early
    byte is lost before we connect; -no-reboot turns a guest reboot or panic into QEMU's exit."""
    q = config()[_table(spec.kernel)]
    argv = [
        binary(spec.kernel),
        "-M", q["machine"],
        "-cpu", q["cpu"],
        "-m", str(spec.memory()),
        "-display", "none",
        "-vga", "none",  # malta's default Cirrus card wants a VGA BIOS file we don't need
        "-monitor", "none",
        "-no-reboot",
        "-chardev", f"socket,id=console,path={console_socket},server=on,wait=on",
        "-serial", "chardev:console",
        "-kernel", str(spec.kernel.path),
    ]  # fmt: skip
    append = spec.append
    if spec.initrd is not None:
        argv += ["-initrd", str(spec.initrd)]
    if spec.rootfs is not None and spec.kernel.machine == "pc":
        raise WolfError("the pc guest boots from its initramfs: no rootfs image")
    if spec.rootfs is not None:
        drive = f",{q['rootfs_drive']}" if "rootfs_drive" in q else ""
        argv += ["-drive", f"file={spec.rootfs},format=raw{drive}"]
        append = " ".join(a for a in (append, q["rootfs_append"]) if a)
    if append:
        argv += ["-append", append]
    if not nics(spec.kernel):
        argv += ["-nic", "none"]  # else QEMU adds its default NIC (and wants its PXE ROM)
    for n in nics(spec.kernel):
        netdev = f"user,id={n.role}"
        if n.net:
            netdev += f",net={n.net}"
        if n.ssh and spec.ssh_port is not None:
            # Only the host's loopback: a VM's SSH must never be reachable from the network.
            netdev += f",hostfwd=tcp:127.0.0.1:{spec.ssh_port}-{n.guest}:22"
        if n.ssh:  # the lan side, where the guest's services listen
            for host_port, guest_port in spec.forwards:
                netdev += f",hostfwd=tcp:127.0.0.1:{host_port}-{n.guest}:{guest_port}"
        # romfile= : the NIC's PXE ROM (efi-pcnet.rom, ...) is not installed and not needed.
        device = q.get("nic_device", "pcnet")
        argv += ["-netdev", netdev, "-device", f"{device},netdev={n.role},mac={n.mac},romfile="]
    return argv + list(spec.extra)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (QEMU then binds it; a lost race fails QEMU's start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec_for(
    image: Path,
    *,
    memory_mb: int = 0,
    rootfs: Path | None = None,
    initrd: Path | None = None,
    append: str | None = None,
) -> VmSpec:
    """The VmSpec for an image path; the ELF header is checked here, before QEMU starts.
    ``rootfs``: a disk of the caller's own (image.private_disk): the guest writes to it."""
    kernel = inspect_kernel(image)
    if initrd is not None and not initrd.is_file():
        raise WolfError(f"initrd {initrd} does not exist", hint="pass --initrd PATH to a file")
    spec = VmSpec(
        kernel=kernel,
        memory_mb=memory_mb,
        rootfs=rootfs,
        initrd=initrd,
        append=append,
    )
    spec.memory()  # range check now, not after a download or a boot
    return spec
