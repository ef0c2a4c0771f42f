"""The place on a router over SSH or the malta VM (perf/place.py's ``Place``), through the
targets.target.Target shell; what it runs on is read from the place itself (``Platform``).

A program there runs in the background of the remote shell with its pid in a file of the
upload directory, so a timeout, a dropped connection or Ctrl-C can still end it: ``close()``
kills what is left before it removes the directory. A server's output is a file there too."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import CommandError, WolfError
from ..results.perf import Where
from ..targets.target import Target
from .cputime import proc_cpu_seconds
from .place import STOP_WAIT, OnLine, Ran, Served, Server, scratch_name
from .ports import listening


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
        d = f"{self.dir}/{scratch_name(name)}"
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
