"""The `qemu` target: MIPS user-mode emulation (qemu-user) on this machine. Programs run as
host processes, so servers are reached on 127.0.0.1 and signals reach the emulated program."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import WolfError
from ..footprint.spec import Arch
from ..footprint.toolchain import Toolchain
from ..results.perf import Where


@dataclass(frozen=True)
class QemuUser:
    qemu: str
    cpu: str
    sysroot: str
    version: str
    plugin: str | None = None  # "-plugin" argument: a TCG plugin and its options (instructions.py)

    def argv(
        self, exe: Path | str, args: list[str], env: dict[str, str] | None = None
    ) -> list[str]:
        """The host command line: `-E` sets the variable for the emulated program only (an
        LD_PRELOAD on qemu itself would be ignored: qemu-*-static is a static binary)."""
        sets = [a for k, v in sorted((env or {}).items()) for a in ("-E", f"{k}={v}")]
        plugin = ["-plugin", self.plugin] if self.plugin else []
        return [self.qemu, *plugin, "-cpu", self.cpu, "-L", self.sysroot, *sets, str(exe), *args]

    def where(self, clock: str) -> Where:
        return Where(target="qemu", emulated=True,
                     machine=f"{Path(self.qemu).name} {self.version} -cpu {self.cpu}",
                     clock=clock)  # fmt: skip


def find(arch: Arch, tc: Toolchain, cpu: str) -> QemuUser:
    qemu = shutil.which(arch.qemu)
    if not qemu:
        raise WolfError(f"--target qemu needs {arch.qemu}", hint="apt-get install qemu-user-static")
    first = proc.run([qemu, "--version"], timeout=30).output.splitlines()
    version = first[0].split("version")[-1].strip().split()[0] if first else "?"
    return QemuUser(qemu=qemu, cpu=cpu, sysroot=tc.sysroot, version=version)
