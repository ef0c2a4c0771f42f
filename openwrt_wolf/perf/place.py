"""Where the lab's programs run: one ``Place`` interface for qemu-user on this machine
(``QemuPlace``, here) and for a router over SSH or the malta VM (``TargetPlace``,
perf/target_place.py, over the targets.target.Target both implement). The benchmark tools, the
Wi-Fi test and the network tests (handshake, memory, soak: perf/netlab.py) all run through it.

A place runs a program and returns its output (or its exit status: ``check=False``), starts and
stops a server, serves one until it listens (``serve``: signal it, its output, its CPU time),
reads the files programs wrote in its ``scratch`` directories, says the addresses each side
reaches the other at, takes uploads (``put``: the path the program sees there) and removes them
all again in ``close()`` (also after a failure or Ctrl-C), and labels its figures (``where``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .. import proc
from ..errors import WolfError
from ..results.perf import Where
from .cputime import proc_cpu_seconds, process_cpu_clock
from .ports import wait_listening
from .qemu_user import QemuUser

OnLine = Callable[[str], None]
STOP_WAIT = 10.0  # seconds a server gets to end after SIGTERM before SIGKILL


@dataclass(frozen=True)
class Ran:
    command: str  # the line that reproduces the run (host argv or the remote shell command)
    output: str  # stdout and stderr together
    status: int = 0  # its exit status (not 0 only with check=False)


@dataclass
class Server:
    """A program started with ``spawn``; ``stop`` ends it."""

    name: str
    command: str
    process: proc.Spawned | None = None  # qemu: the host process
    pidfile: str = ""  # a Target: the file holding its pid there
    logfile: str = ""  # a Target: where its output goes
    stopped: bool = False


class Served(Protocol):
    """A server a place serves (``Place.serve``)."""

    def signal(self, sig: signal.Signals) -> None:
        """Send it sig; WolfError when it has exited."""
        ...

    def output(self) -> str: ...

    def cpu_seconds(self) -> float:
        """CPU time it has used so far, in seconds (its CPU clock, else /proc ticks)."""
        ...


class Place(Protocol):
    target: str  # qemu | router | vm
    address: str  # where the host reaches a server the place runs
    host_address: str  # where the place's programs reach the host's servers ("" unknown)

    def where(self, clock: str) -> Where: ...

    def put(self, local: Path, name: str | None = None) -> str:
        """Make a file available to programs there; returns its path there."""
        ...

    def put_dir(self, local: Path, name: str | None = None) -> str:
        """A directory of files (a library build: symlinks kept as symlinks); its path there."""
        ...

    def remove(self, path: str) -> None:
        """Remove an upload (put/put_dir's answer) before close() removes the rest."""
        ...

    def find(self, program: str) -> str | None:
        """The place's own copy of a program (PATH), or None."""
        ...

    def run(
        self, program: str, args: list[str], env: dict[str, str], *, timeout: float,
        on_line: OnLine | None = None, check: bool = True,
    ) -> Ran:  # fmt: skip
        """Run and wait; CommandError on a timeout (the program is ended), and on a non-zero
        exit unless ``check`` is False (then the caller judges ``status``)."""
        ...

    def spawn(self, program: str, args: list[str], env: dict[str, str]) -> Server: ...

    def stop(self, server: Server) -> None: ...

    def serve(
        self, program: str, args: list[str], env: dict[str, str], port: int, timeout: float
    ) -> contextlib.AbstractContextManager[Served]:
        """Start it, wait until it listens on port (at ``address``); stopped (SIGTERM, then
        SIGKILL) on exit. WolfError when it exits first or nothing listens in time."""
        ...

    def read(self, path: str) -> str:
        """A file there as text ("" when there is none)."""
        ...

    def scratch(self, name: str) -> str:
        """A directory there for files the programs write (made if need be); its path there."""
        ...

    def close(self) -> None:
        """Stop every server and remove every upload."""
        ...


# -- qemu-user on this machine ------------------------------------------------------------------


def scratch_name(name: str) -> str:
    """A scratch directory's name: one path component of ours."""
    if not name or "/" in name or name in (".", ".."):
        raise WolfError(f"{name!r} is not a scratch directory's name")
    return name


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


@dataclass
class QemuPlace:
    """qemu-user: programs are host processes under the emulator, files stay where they are,
    servers are reached on 127.0.0.1 and a signal to the qemu process reaches the program."""

    qemu: QemuUser
    # scratch directories and server logs; None: a temporary one, removed by close()
    workdir: Path | None = None
    target: str = "qemu"
    address: str = "127.0.0.1"
    host_address: str = "127.0.0.1"
    # not an argument: dataclasses.replace(place, qemu=...) is a place of its own
    servers: list[Server] = field(default_factory=list, init=False, repr=False)
    _own: Path | None = field(default=None, init=False, repr=False)

    def where(self, clock: str) -> Where:
        return self.qemu.where(clock)

    def put(self, local: Path, name: str | None = None) -> str:
        return str(local)

    def put_dir(self, local: Path, name: str | None = None) -> str:
        return str(local)

    def remove(self, path: str) -> None:
        pass  # nothing was copied

    def find(self, program: str) -> str | None:
        return None  # the host's programs are not MIPS programs

    def run(
        self, program: str, args: list[str], env: dict[str, str], *, timeout: float,
        on_line: OnLine | None = None, check: bool = True,
    ) -> Ran:  # fmt: skip
        argv = self.qemu.argv(program, args, env)
        r = proc.run(argv, timeout=timeout, on_line=on_line, check=check)
        return Ran(proc.command_line(argv), r.output, r.returncode)

    def _spawn(
        self, program: str, args: list[str], env: dict[str, str], output: Path | None = None
    ) -> Server:
        argv = self.qemu.argv(program, args, env)
        p = proc.spawn(argv, output=output, grace=STOP_WAIT)
        s = Server(Path(program).name, p.line, process=p, logfile=str(output or ""))
        self.servers.append(s)
        return s

    def spawn(self, program: str, args: list[str], env: dict[str, str]) -> Server:
        return self._spawn(program, args, env)

    def stop(self, server: Server) -> None:
        if server.process is None or server.stopped:
            return
        server.process.stop()
        server.stopped = True

    @contextlib.contextmanager
    def serve(
        self, program: str, args: list[str], env: dict[str, str], port: int, timeout: float
    ) -> Iterator[Served]:
        logfile = Path(self.scratch("servers")) / f"server-{port}.log"
        s = self._spawn(program, args, env, logfile)
        assert s.process is not None
        try:
            # the stop's SIGTERM: uhttpd ends its loop and exits (heap "exit")
            wait_listening(self.address, port, timeout, s.process)
            yield _QemuServed(s.process.popen, logfile)
        finally:
            self.stop(s)

    def read(self, path: str) -> str:
        f = Path(path)
        return f.read_text(errors="replace") if f.exists() else ""

    def scratch(self, name: str) -> str:
        root = self.workdir or self._own
        if root is None:
            root = self._own = Path(tempfile.mkdtemp(prefix="wolf-perf-qemu-"))
        d = root / scratch_name(name)
        d.mkdir(parents=True, exist_ok=True)
        return str(d)

    def close(self) -> None:
        for s in self.servers:
            self.stop(s)
        if self._own is not None:
            shutil.rmtree(self._own, ignore_errors=True)
            self._own = None
