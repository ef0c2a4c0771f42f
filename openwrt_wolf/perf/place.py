"""Where the lab's programs run: one ``Place`` interface for qemu-user on this machine
(``QemuPlace``), and a router over SSH or the malta VM (``TargetPlace``, over the
targets.target.Target both implement). The benchmark tools, the Wi-Fi test and the network
tests (handshake, memory, soak: perf/netlab.py) all run through it.

A place runs a program and returns its output (or its exit status: ``check=False``), starts and
stops a server, serves one until it listens (``serve``: signal it, its output, its CPU time),
reads the files programs wrote in its ``scratch`` directories, says the addresses each side
reaches the other at, takes uploads (``put``: the path the program sees there) and removes them
all again in ``close()`` (also after a failure or Ctrl-C), and labels its figures (``where``).
A program on a Target runs in the background of the remote shell with its pid in a file of the
upload directory, so a timeout, a dropped connection or Ctrl-C can still end it: ``close()``
kills what is left before it removes the directory."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .. import proc
from ..errors import CommandError, WolfError
from ..results.perf import Where
from ..targets.target import Target
from .cputime import proc_cpu_seconds, process_cpu_clock
from .ports import listening, wait_listening
from .qemu_user import QemuUser

log = logging.getLogger("openwrt_wolf.perf.place")
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


def _name_ok(name: str) -> str:
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
        d = root / _name_ok(name)
        d.mkdir(parents=True, exist_ok=True)
        return str(d)

    def close(self) -> None:
        for s in self.servers:
            self.stop(s)
        if self._own is not None:
            shutil.rmtree(self._own, ignore_errors=True)
            self._own = None


# -- a router or the VM, through the Target interface ------------------------------------------


@dataclass(frozen=True)
class Platform:
    """What the place runs, read from the place itself."""

    machine: str  # uname -m
    endian: str  # little | big (EI_DATA of /bin/sh)
    libc: str  # musl | glibc | unknown
    loader: str  # the dynamic loader found, e.g. /lib/ld-musl-mips-sf.so.1
    model: str  # /tmp/sysinfo/model (OpenWrt's board name), else the host name
    client: str = ""  # the SSH client's address there (SSH_CLIENT): the host, as seen there


_PROBE = (
    "uname -m; uname -n; "
    "echo loaders: $(ls /lib/ld-musl-* /lib/ld-linux* /lib64/ld-linux* /lib/ld.so.1 2>/dev/null); "
    "echo model: $(cat /tmp/sysinfo/model 2>/dev/null); "
    "echo client: ${SSH_CLIENT%% *}; "
    # the first 6 bytes of an ELF file, the 6th is EI_DATA (1 little, 2 big); OpenWrt's
    # busybox has hexdump but no od (package/utils/busybox/Config-defaults.in), Debian od
    "echo elf: $( (hexdump -n 6 -e '6/1 \" %u\"' /bin/sh || od -An -N6 -tu1 /bin/sh) 2>/dev/null)"
)


def parse_probe(text: str) -> Platform:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if len(lines) < 5:
        raise WolfError(f"unexpected answer to the platform probe: {text!r}")
    tagged = {ln.split(":", 1)[0]: ln.split(":", 1)[1].strip() for ln in lines[2:] if ":" in ln}
    loaders = tagged.get("loaders", "").split()
    elf = tagged.get("elf", "").split()
    endian = {"1": "little", "2": "big"}.get(elf[5] if len(elf) >= 6 else "", "unknown")
    musl = [p for p in loaders if "/ld-musl-" in p]
    glibc = [p for p in loaders if "/ld-linux" in p or p.endswith("/ld.so.1")]
    libc, loader = ("musl", musl[0]) if musl else ("glibc", glibc[0]) if glibc else ("unknown", "")
    return Platform(machine=lines[0], endian=endian, libc=libc, loader=loader,
                    model=tagged.get("model") or lines[1],
                    client=tagged.get("client", ""))  # fmt: skip


class TargetPlace:
    """Programs on a Target (router over SSH, malta VM over its console) in an upload directory
    of their own, /tmp/wolf-perf-<id> (RAM on OpenWrt), removed by close()."""

    def __init__(
        self, target: Target, *, label: str, emulated: bool, address: str,
        host_address: str = "", run_timeout_slack: float = 30.0,
    ) -> None:  # fmt: skip
        self.t = target
        self.target = label
        self.emulated = emulated
        self.address = address
        self.slack = run_timeout_slack
        self.dir = f"/tmp/wolf-perf-{uuid.uuid4().hex[:12]}"
        self.uploaded: list[str] = []
        self.servers: list[Server] = []
        self._made = False
        self._n = 0
        self.platform = parse_probe(self._sh(_PROBE, timeout=60).output)
        # over SSH the router says where we come from; a VM's console does not (its caller
        # knows QEMU's user network)
        self.host_address = host_address or self.platform.client

    # -- helpers --------------------------------------------------------------------------------

    def _sh(self, command: str, *, timeout: float = 60.0, check: bool = True) -> Ran:
        proc.log.info("$ [%s] %s", self.t.name, command)
        r = self.t.run(command, timeout=timeout)
        if check and r.exit_status != 0:
            tail = r.output.strip().splitlines()[-5:]
            raise CommandError(f"{command!r} on {self.t.name} exited with {r.exit_status}",
                               tail=tail)  # fmt: skip
        return Ran(command, r.output, r.exit_status)

    def _ensure_dir(self) -> None:
        if not self._made:
            # mkdir fails when it exists: the directory is ours alone
            self._sh(f"mkdir -m 700 {self.dir}")
            self._made = True

    def _next(self, what: str) -> str:
        self._n += 1
        return f"{self.dir}/.{what}-{self._n}"

    # -- Place ----------------------------------------------------------------------------------

    def where(self, clock: str) -> Where:
        p = self.platform
        return Where(target=self.target, emulated=self.emulated,
                     machine=f"{p.model} ({p.machine}, {p.endian}-endian, {p.libc})",
                     clock=clock)  # fmt: skip

    def put(self, local: Path, name: str | None = None) -> str:
        self._ensure_dir()
        remote = f"{self.dir}/{name or local.name}"
        self.t.put(local, remote)
        if os.access(local, os.X_OK):
            self._sh(f"chmod 755 {shlex.quote(remote)}")
        self.uploaded.append(remote)
        return remote

    def put_dir(self, local: Path, name: str | None = None) -> str:
        self._ensure_dir()
        remote = f"{self.dir}/{name or local.name}"
        self._sh(f"mkdir {shlex.quote(remote)}")
        links = []
        for f in sorted(local.iterdir()):
            dest = f"{remote}/{f.name}"
            if f.is_symlink():
                links.append(f"ln -s {shlex.quote(os.readlink(f))} {shlex.quote(dest)}")
            elif f.is_file():
                self.t.put(f, dest)
                self.uploaded.append(dest)
        if links:
            self._sh(" && ".join(links))
        return remote

    def remove(self, path: str) -> None:
        if not path.startswith(self.dir + "/"):
            raise WolfError(f"{path} is not an upload of this run ({self.dir})")
        self._sh(f"rm -rf {shlex.quote(path)}")
        self.uploaded = [u for u in self.uploaded if u != path and not u.startswith(path + "/")]

    def find(self, program: str) -> str | None:
        r = self._sh(f"command -v {shlex.quote(program)}", check=False)
        found = r.output.strip().splitlines()
        return found[-1] if found and found[-1].startswith("/") else None

    def _line(self, program: str, args: list[str], env: dict[str, str]) -> str:
        sets = [f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())]
        return " ".join(["env", *sets, shlex.quote(program), *map(shlex.quote, args)])

    def run(
        self, program: str, args: list[str], env: dict[str, str], *, timeout: float,
        on_line: OnLine | None = None, check: bool = True,
    ) -> Ran:  # fmt: skip
        self._ensure_dir()
        pidfile = self._next("run") + ".pid"
        line = self._line(program, args, env)
        # in the background with its pid noted, so it can be ended if we cannot wait for it
        command = (f"{line} </dev/null & p=$!; echo $p > {pidfile}; wait $p; r=$?; "
                   f"rm -f {pidfile}; exit $r")  # fmt: skip
        proc.log.info("$ [%s] %s", self.t.name, line)
        try:
            r = self.t.run(command, timeout=timeout)
        except WolfError as e:  # a timeout or a lost connection: the program may still run
            self._kill(pidfile)
            raise CommandError(f"{Path(program).name} on {self.t.name}: {e.message}") from None
        except BaseException:
            self._kill(pidfile)
            raise
        if on_line:
            for text in r.output.splitlines():
                on_line(text)
        if check and r.exit_status != 0:
            raise CommandError(
                f"{Path(program).name} on {self.t.name} exited with {r.exit_status}",
                tail=r.output.strip().splitlines()[-20:],
            )
        return Ran(line, r.output, r.exit_status)

    def _kill(self, pidfile: str) -> None:
        with contextlib.suppress(WolfError):
            self._sh(f"test -f {pidfile} && kill -9 $(cat {pidfile}); rm -f {pidfile}",
                     check=False)  # fmt: skip

    def spawn(self, program: str, args: list[str], env: dict[str, str]) -> Server:
        self._ensure_dir()
        base = self._next("server")
        pidfile, logfile = base + ".pid", base + ".log"
        line = self._line(program, args, env)
        self._sh(f"{line} </dev/null >{logfile} 2>&1 & echo $! > {pidfile}")
        s = Server(Path(program).name, line, pidfile=pidfile, logfile=logfile)
        self.servers.append(s)
        return s

    def stop(self, server: Server) -> None:
        if server.stopped or not server.pidfile:
            return
        f = server.pidfile
        # TERM, up to STOP_WAIT s for it to end, then KILL
        waits = int(STOP_WAIT * 5)
        self._sh(
            f"p=$(cat {f}); kill $p 2>/dev/null; n=0; "
            f"while kill -0 $p 2>/dev/null && [ $n -lt {waits} ]; do sleep 0.2; n=$((n+1)); done; "
            f"kill -9 $p 2>/dev/null; rm -f {f}; true",
            timeout=STOP_WAIT + 30,
        )
        server.stopped = True

    @contextlib.contextmanager
    def serve(
        self, program: str, args: list[str], env: dict[str, str], port: int, timeout: float
    ) -> Iterator[Served]:
        if not self.address:
            raise WolfError(f"the {self.target}'s servers have no address the host reaches",
                            hint="QEMU forwards only the ports it was started with")  # fmt: skip
        s = self.spawn(program, args, env)
        try:
            self._wait_listening(s, port, timeout)
            yield _TargetServed(self, s)
        finally:
            self.stop(s)

    def _wait_listening(self, s: Server, port: int, timeout: float) -> None:
        """Seen from the host, as its clients will connect; the pidfile tells if it exited."""
        deadline = time.monotonic() + timeout
        while not listening(self.address, port):
            gone = self._sh(f"kill -0 $(cat {s.pidfile}) 2>/dev/null || echo gone", check=False)
            if "gone" in gone.output:
                raise WolfError(f"{s.name} on {self.t.name} exited before listening on {port}",
                                hint=f"its output: {self.read(s.logfile)[-300:]}")  # fmt: skip
            if time.monotonic() > deadline:
                raise WolfError(f"nothing listens on {self.address}:{port} after {timeout:g} s")
            time.sleep(0.1)

    def read(self, path: str) -> str:
        return self._sh(f"cat {shlex.quote(path)} 2>/dev/null; true").output

    def scratch(self, name: str) -> str:
        self._ensure_dir()
        d = f"{self.dir}/{_name_ok(name)}"
        self._sh(f"mkdir -p {shlex.quote(d)}")
        return d

    def close(self) -> None:
        """End what still runs from our directory, then remove it; checked, not assumed."""
        if not self._made:
            return
        for s in self.servers:
            with contextlib.suppress(WolfError):
                self.stop(s)
        d = self.dir
        self._sh(f"for f in {d}/.*.pid; do [ -f \"$f\" ] && kill -9 $(cat \"$f\") 2>/dev/null; "
                 f"done; rm -rf {d}; ! test -e {d}", timeout=120)  # fmt: skip
        self._made = False


@dataclass
class _TargetServed:
    """A server on a Target, reached through its pidfile by shell commands there."""

    place: TargetPlace
    server: Server

    def signal(self, sig: signal.Signals) -> None:
        f = self.server.pidfile
        r = self.place._sh(f"kill -{sig.name.removeprefix('SIG')} $(cat {f})", check=False)
        if r.status != 0:
            raise WolfError(f"{self.server.name} on {self.place.t.name} has exited: "
                            f"{self.output()[-500:]}")  # fmt: skip

    def output(self) -> str:
        return self.place.read(self.server.logfile)

    def cpu_seconds(self) -> float:
        """utime + stime from /proc there, in its ticks: no CPU clock is readable from outside
        (BusyBox has no getconf: Linux's USER_HZ, 100, where it is missing)."""
        f = self.server.pidfile
        r = self.place._sh(f"cat /proc/$(cat {f})/stat && {{ getconf CLK_TCK 2>/dev/null || "
                           "echo 100; }")  # fmt: skip
        lines = r.output.strip().splitlines()
        return proc_cpu_seconds(lines[0], int(lines[-1]))
