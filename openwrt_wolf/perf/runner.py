"""Running the lab's programs on "the target": the boundary the `qemu`, `vm` and `router`
targets plug into. The network tests (handshake, memory, soak) only use this protocol: start a
server program and signal it, run a client program to its end, read a file it wrote, and the
addresses each side reaches the other at.

`QemuRunner` is the `qemu` target: qemu-user processes on this machine (perf/qemu_user.py
QemuUser.argv), so paths are the host's, the host reaches servers on 127.0.0.1 and a signal
sent to the qemu process reaches the emulated program."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .. import proc
from ..errors import WolfError
from ..results.perf import Where
from .qemu_user import QemuUser


class Served(Protocol):
    """A server program running on the target."""

    def signal(self, sig: signal.Signals) -> None: ...

    def output(self) -> str: ...

    def cpu_seconds(self) -> float:
        """CPU time the server has used so far, in seconds (its CPU clock, else /proc ticks)."""
        ...


class Runner(Protocol):
    @property
    def target(self) -> str: ...

    @property
    def address(self) -> str:
        """Where the host reaches the target's servers."""
        ...

    @property
    def host_address(self) -> str:
        """Where the target reaches the host's servers."""
        ...

    def where(self, clock: str) -> Where: ...

    def serve(
        self, exe: Path, args: list[str], env: dict[str, str], port: int, timeout: float
    ) -> contextlib.AbstractContextManager[Served]:
        """Start exe, wait until it listens on port; stopped (SIGTERM, then SIGKILL) on exit."""
        ...

    def run(
        self, exe: Path, args: list[str], env: dict[str, str], timeout: float
    ) -> proc.Completed:
        """Run exe to its end (any exit status; the caller judges it)."""
        ...

    def read(self, path: Path) -> str: ...

    def scratch(self, name: str) -> Path:
        """A fresh directory on the target for files the programs write."""
        ...


@dataclass
class _QemuServed:
    popen: subprocess.Popen[bytes]
    logfile: Path
    fine: bool | None = None  # the CPU clock is readable (decided at the first reading)

    def signal(self, sig: signal.Signals) -> None:
        if self.popen.poll() is not None:
            raise WolfError(f"the server exited ({self.popen.returncode}): {self.output()[-500:]}")
        os.kill(self.popen.pid, sig)  # qemu-user forwards it to the emulated program

    def output(self) -> str:
        return self.logfile.read_text(errors="replace") if self.logfile.exists() else ""

    def cpu_seconds(self) -> float:
        """The qemu process's: the emulated program's CPU time and qemu's translation."""
        fine = process_cpu_clock(self.popen.pid) if self.fine is not False else None
        if self.fine is None:  # decided once: the deltas of one run are read on one clock
            self.fine = fine is not None
        if fine is not None:
            return fine
        return proc_cpu_seconds(Path(f"/proc/{self.popen.pid}/stat").read_text())


def proc_cpu_seconds(stat: str) -> float:
    """utime + stime of a /proc/<pid>/stat line (proc(5): fields 14 and 15, clock ticks)."""
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_clock(pid: int) -> float | None:
    """Another process's CPU time in nanoseconds, every thread, the exited ones too: the clock
    clock_getcpuclockid(3) names, which Linux numbers ((~pid) << 3) | 2 (a process's
    CPUCLOCK_SCHED). None where it cannot be read. /proc/<pid>/stat counts 10 ms ticks: over
    a quick run's 5 handshakes 2 ms each, a third of a 7 ms handshake."""
    try:
        return time.clock_gettime(((~pid) << 3) | 2)
    except OSError:
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(
    address: str, port: int, timeout: float, server: proc.Spawned | None = None
) -> None:
    """Until something listens on address:port; a ``server`` that exits first is one line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server is not None and (status := server.poll()) is not None:
            raise WolfError(f"the server exited ({status}) before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex((address, port)) == 0:
                return
        time.sleep(0.1)
    raise WolfError(f"nothing listens on {address}:{port} after {timeout:g} s")


@dataclass(frozen=True)
class QemuRunner:
    qemu: QemuUser
    workdir: Path
    target: str = "qemu"
    address: str = "127.0.0.1"
    host_address: str = "127.0.0.1"

    def where(self, clock: str) -> Where:
        return self.qemu.where(clock)

    @contextlib.contextmanager
    def serve(
        self, exe: Path, args: list[str], env: dict[str, str], port: int, timeout: float
    ) -> Iterator[Served]:
        argv = self.qemu.argv(exe, args, env)
        logfile = self.scratch("servers") / f"server-{port}.log"
        with proc.spawn(argv, output=logfile, grace=10.0) as p:
            # the stop's SIGTERM: uhttpd ends its loop and exits (heap "exit")
            wait_listening(self.address, port, timeout, p)
            yield _QemuServed(p.popen, logfile)

    def run(
        self, exe: Path, args: list[str], env: dict[str, str], timeout: float
    ) -> proc.Completed:
        return proc.run(self.qemu.argv(exe, args, env), timeout=timeout, check=False)

    def read(self, path: Path) -> str:
        return path.read_text(errors="replace") if path.exists() else ""

    def scratch(self, name: str) -> Path:
        d = self.workdir / name
        d.mkdir(parents=True, exist_ok=True)
        return d
