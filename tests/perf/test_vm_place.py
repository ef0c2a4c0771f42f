"""`invoke perf --target vm` on the VM test guest (Debian 12's real mipsel Malta kernel with the
stand-in busybox initramfs, tests/targets/test_vm.py). Debian 12 has no big-endian MIPS kernel,
so this guest is little-endian: the lab's mips_24kc programs (big-endian) cannot run in it, and
the lab must say so in one line after reading the guest itself, leaving no QEMU behind.

Oracles: the kernel's own ELF header (EI_DATA, read here from the file), `uname -m` typed on
the guest's console, /proc here for QEMU processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from openwrt_wolf.perf import open_place
from openwrt_wolf.perf.place import TargetPlace
from openwrt_wolf.targets.vm import qemu, standin
from openwrt_wolf.targets.vm.image import inspect_kernel
from openwrt_wolf.targets.vm.machine import VM
from tests.targets.test_vm import guest

__all__ = ["guest"]
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.vm


def _qemu_with(path: Path) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and b"qemu-system" in cmd[0] and str(path).encode() in cmd:
                out.append(int(d.name))
    return out


def test_vm_place_reads_the_guest(guest: standin.StandIn) -> None:
    kernel = guest.kernel.vmlinuz
    ei_data = kernel.read_bytes()[5]  # 1: little-endian, 2: big-endian (the ELF header)
    spec = qemu.VmSpec(kernel=inspect_kernel(kernel), initrd=guest.initramfs,
                       append=guest.cmdline)  # fmt: skip
    with VM(spec) as vm:
        vm.boot("shell")
        machine = vm.run("uname -m").output.strip()
        place = TargetPlace(vm, label="vm", emulated=True, address="")
        p = place.platform
        assert p.machine == machine == "mips"
        assert p.endian == {1: "little", 2: "big"}[ei_data] == "little"
        assert p.libc == "unknown"  # a static busybox: no dynamic loader in the guest
        w = place.where("wall")
        assert w.target == "vm" and w.emulated
        with pytest.raises(Exception, match="runs mips little-endian"):
            open_place.lab_arch(p, "vm")
        place.close()


def test_perf_on_the_little_endian_guest_is_one_line(guest: standin.StandIn) -> None:
    r = subprocess.run(
        [str(ROOT / "wolf"), "perf", "--flavour", "mbedtls", "--target", "vm", "--image",
         str(guest.kernel.vmlinuz), "--initrd", str(guest.initramfs), "--append", guest.cmdline],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and r.stderr.splitlines()[-1] == errors[0]
    assert errors[0].startswith("error: the vm runs mips little-endian (unknown): the lab builds")
    assert "perf: vm OpenWrt: mips little-endian" in r.stderr
    assert _qemu_with(guest.initramfs) == []
