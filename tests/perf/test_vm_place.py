"""`invoke perf --target vm` on the VM test guest (Debian 12's real mipsel Malta kernel with the
stand-in busybox initramfs, tests/targets/test_vm.py). Debian 12 has no big-endian MIPS kernel,
so this guest is little-endian: the lab's mips_24kc programs (big-endian) cannot run in it, and
the lab must say so in one line after reading the guest itself, leaving no QEMU behind.

Oracles: the kernel's own ELF header (EI_DATA, read here from the file), `uname -m` typed on
the guest's console, /proc here for QEMU processes."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from openwrt_wolf.perf import open_place
from openwrt_wolf.perf.target_place import TargetPlace
from openwrt_wolf.targets.vm import qemu
from openwrt_wolf.targets.vm.kernel import inspect_kernel
from openwrt_wolf.targets.vm.machine import VM
from tests.standin import malta_guest
from tests.targets.test_vm import guest

__all__ = ["guest"]
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.vm


def _left(mark: str, seconds: float = 30) -> list[int]:
    """The processes still carrying ``mark`` in their environment after up to ``seconds``: the
    task's and its children's (not the VMs other tests boot from the same guest meanwhile; the
    task's reaper process takes a moment to end)."""
    deadline = time.monotonic() + seconds
    while True:
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    if mark.encode() in (d / "environ").read_bytes():
                        out.append(int(d.name))
                except OSError:
                    continue
        if not out or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def test_vm_place_reads_the_guest(guest: malta_guest.StandIn) -> None:
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


def test_perf_on_the_little_endian_guest_is_one_line(guest: malta_guest.StandIn) -> None:
    mark = f"WOLF_TEST_{uuid.uuid4().hex}"
    r = subprocess.run(
        [str(ROOT / "wolf"), "perf", "--flavour", "mbedtls", "--target", "vm", "--image",
         str(guest.kernel.vmlinuz), "--initrd", str(guest.initramfs), "--append", guest.cmdline],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, mark: "1"},
    )  # fmt: skip
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and r.stderr.splitlines()[-1] == errors[0]
    assert errors[0].startswith("error: the vm runs mips little-endian (unknown): the lab builds")
    assert "perf: vm OpenWrt: mips little-endian" in r.stderr
    assert _left(mark) == []  # no QEMU (nor anything else) outlived the task
