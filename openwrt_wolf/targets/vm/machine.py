"""The QEMU malta VM as a ``target.Target``: boot through named states (labgrid-style
``transition``), run commands on the serial console, copy files in, reboot, power off.

An explicit state machine as targets/router/flash.py's: named states, a handler per state,
each with its own timeout (data/vm.toml). States, in order: off → booting (first console byte)
→ console (procd's "Please press Enter") → shell (prompt) → network (``ubus wait_for
network.interface.lan``) → ssh (a banner on the forwarded port, when the image has an SSH
server); ``close()`` returns to off. Every transition is logged with its time; a state that
does not come within its timeout kills QEMU and raises BootError naming it, with the last 30
console lines."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import io
import ipaddress
import logging
import os
import re
import shlex
import shutil
import socket
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO, TextIO

from ... import paths, proc, signals
from ...errors import CommandError, WolfError
from ...host import hosttools
from ..target import CommandResult, Target
from .console import Console, ConsoleClosed, ConsoleTimeout, GuestFatal
from .kernel import Kernel
from .qemu import VmSpec, binary, command, config, free_port, nics
from .rundir import rundir

log = logging.getLogger("openwrt_wolf.targets.vm")

# A kernel message printed into the middle of a command's output (printk timestamps on).
_KMSG = re.compile(r"\[ *\d+\.\d{6}\] [^\n]*\n")


class State(StrEnum):
    OFF = "off"
    BOOTING = "booting"
    CONSOLE = "console"
    SHELL = "shell"
    NETWORK = "network"
    SSH = "ssh"


ORDER = list(State)
TAIL_LINES = 30
HTTP_PUT_OVER = 16 * 1024  # bytes: below this the console is quick enough
# OpenWrt's busybox cuts input lines at FEATURE_EDITING_MAX_LEN (512 in its
# Config-defaults.in; Debian's busybox takes 1024): every console line stays under it
CONSOLE_LINE_MAX = 500


def write_commands(data: bytes, remote: str) -> list[str]:
    """The shell commands that write ``data`` to ``remote`` over the console: truncate, then
    printf of octal escapes (4 characters a byte), each line under CONSOLE_LINE_MAX."""
    q = shlex.quote(remote)
    around = len(console_line(f"printf '' >> {q}", "0" * 10))
    step = (CONSOLE_LINE_MAX - around) // 4
    if step < 16:
        raise WolfError(f"the path {remote!r} is too long for the console")
    out = [f": > {q}"]
    for i in range(0, len(data), step):
        chunk = "".join(f"\\{b:03o}" for b in data[i : i + step])
        out.append(f"printf '{chunk}' >> {q}")
    return out


def console_line(command: str, tag: str) -> str:
    """One shell command as the console gets it: in eval in a subshell (a syntax error or a
    failing special builtin ends only the subshell, and the end marker still comes; like a
    command over SSH, each run starts from the same shell state), between two markers."""
    return (
        f"printf '__WS_%s\\n' {tag}; (eval {shlex.quote(command)}); printf '__WE_%s %d\\n' {tag} $?"
    )


@contextlib.contextmanager
def served(
    files: Mapping[str, bytes | Path],
    token: str,
    *,
    listed: Mapping[Path, tuple[int, int]] | None = None,
) -> Iterator[int]:
    """An HTTP server on 127.0.0.1 that serves each of ``files`` at /<token>/<name> (bytes, or
    a file read when asked for) and nothing else; its port while the block runs. The guest
    reaches it at lan_host(). A file's directory is opened when the server starts and the
    file is opened in it, not followed if a link: a directory swapped for a link to another
    one afterwards serves nothing of that other one. ``listed``: each directory's (st_dev,
    st_ino) when the caller listed it; one opened at the start that is another (swapped in
    between) is one line, nothing served."""
    dirs = _open_dirs(files, listed or {})

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            top, _, name = self.path.lstrip("/").partition("/")
            item = files.get(name) if top == token else None
            if item is None:
                self.send_error(404)
                return
            if isinstance(item, bytes):
                self._send(len(item), io.BytesIO(item))
                return
            try:  # streamed: a package may be large; a file gone or not regular is not there
                # (O_NONBLOCK: opening a FIFO does not wait for a writer)
                fd = os.open(item.name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=dirs[item.parent])  # fmt: skip
            except (OSError, KeyError):
                self.send_error(404)
                return
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                self.send_error(404)
                return
            with os.fdopen(fd, "rb") as fh:
                self._send(st.st_size, fh)

        def _send(self, size: int, src: BinaryIO) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            shutil.copyfileobj(src, self.wfile)

        def log_message(self, format: str, *args: object) -> None:
            pass

    try:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)

        def serve() -> None:
            signals.keep_off_this_thread()  # its request threads inherit the mask (signals.py)
            srv.serve_forever()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield int(srv.server_address[1])
        finally:
            srv.shutdown()
            srv.server_close()
    finally:
        for fd in dirs.values():
            os.close(fd)


def _open_dirs(
    files: Mapping[str, bytes | Path], listed: Mapping[Path, tuple[int, int]]
) -> dict[Path, int]:
    """The directories of the files served, each opened once (a missing one: its files are
    not there); one that is not the directory ``listed`` names is a WolfError."""
    dirs: dict[Path, int] = {}
    try:
        for item in files.values():
            if isinstance(item, Path) and item.parent not in dirs:
                with contextlib.suppress(OSError):
                    dirs[item.parent] = os.open(item.parent, os.O_RDONLY | os.O_DIRECTORY |
                                                os.O_CLOEXEC)  # fmt: skip
                want = listed.get(item.parent)
                if want is not None and item.parent in dirs:
                    st = os.fstat(dirs[item.parent])
                    if (st.st_dev, st.st_ino) != want:
                        raise WolfError(
                            f"{item.parent} changed since its files were listed "
                            "(another directory is there now); nothing served"
                        )
    except BaseException:
        for fd in dirs.values():
            os.close(fd)
        raise
    return dirs


def lan_host(kernel: Kernel) -> str | None:
    """The host's address as the guest sees it on its lan (QEMU's user network: .2), None
    when the guest has no lan."""
    lan = next((n for n in nics(kernel) if n.net), None)
    if lan is None or lan.net is None:
        return None
    return str(list(ipaddress.ip_network(lan.net).hosts())[1])


def state_named(name: str) -> State:
    """The state of that name; one line naming them all when there is none."""
    try:
        return State(name)
    except ValueError:
        raise WolfError(f"unknown VM state {name!r}", hint=f"one of {', '.join(ORDER)}") from None


@dataclass(frozen=True)
class Transition:
    state: State
    at: float  # seconds since QEMU was started
    took: float  # seconds since the previous state


class BootError(CommandError):
    """A state never came (or the guest died on the way). ``details()`` (what the CLI prints)
    adds the last console lines."""

    def __init__(self, state: str, reason: str, tail: list[str], log_path: Path | None) -> None:
        super().__init__(
            f"VM boot failed in state '{state}': {reason}",
            tail=tail,
            log=str(log_path) if log_path else None,
        )
        self.state = state

    def details(self) -> str:
        lines = [self.message, f"  last {len(self.tail)} console lines:"]
        lines += [f"  | {line}" for line in self.tail]
        if self.log:
            lines.append(f"  full console log: {self.log}")
        return "\n".join(lines)


class StateUnavailable(WolfError):
    """The image lacks what a state needs (no ubus, no SSH server); the VM stays where it was."""


def _prune(logdir: Path, keep_days: float = 14) -> None:
    """Console logs are for looking into a failure; old ones go."""
    cutoff = time.time() - keep_days * 86400
    for f in logdir.glob("*.log"):
        with contextlib.suppress(OSError):
            if f.stat().st_mtime < cutoff:
                f.unlink()


def state_timeouts() -> dict[State, float]:
    """Seconds each state may take to come, from entering the one before (data/vm.toml)."""
    return {state_named(k): float(s["timeout"]) for k, s in config()["states"].items()}


class VM:
    """One QEMU malta guest. Use as a context manager (or call close()): QEMU never outlives it."""

    def __init__(
        self,
        spec: VmSpec,
        *,
        name: str | None = None,
        timeouts: dict[str, float] | None = None,
        echo: Callable[[bytes], None] | None = None,
    ) -> None:
        self.spec = spec
        self.name = name or f"qemu-{spec.kernel.machine}-{spec.kernel.arch}"
        given = {state_named(k): limit for k, limit in (timeouts or {}).items()}
        self.timeouts = {**state_timeouts(), **given}
        self.state = State.OFF
        # the handler of a state reaches it from the state before, by the deadline it is given
        self.handlers: dict[State, Callable[[float], None]] = {
            State.BOOTING: self._reach_booting,
            State.CONSOLE: self._reach_console,
            State.SHELL: self._reach_shell,
            State.NETWORK: self._reach_network,
            State.SSH: self._reach_ssh,
        }
        self.transitions: list[Transition] = []
        self.started_at = 0.0
        self.ssh_port: int | None = spec.ssh_port
        self._echo = echo
        self._proc: proc.Spawned | None = None
        self._console: Console | None = None
        self._rundir: Path | None = None
        self._logfh: TextIO | None = None
        self.log_path: Path | None = None
        self._history: list[str] = []  # console lines of earlier boots (reboot keeps them)
        self.last_pid: int | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> VM:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is not None:
            self._stop()  # an error or Ctrl-C: no polite power-off, QEMU goes now
            self._enter_off()
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def console(self) -> Console:
        if self._console is None:
            raise WolfError(f"{self.name}: the VM is off", hint="boot it first")
        return self._console

    def _reached(self, s: State) -> bool:
        return ORDER.index(self.state) >= ORDER.index(s)

    def _enter(self, s: State) -> None:
        now = time.monotonic() - self.started_at
        prev = self.transitions[-1].at if self.transitions else 0.0
        self.transitions.append(Transition(s, round(now, 3), round(now - prev, 3)))
        log.info("vm %s: %s → %s at %.2f s", self.name, self.state, s, now)
        self.state = s

    def _fail(self, s: State, reason: str) -> BootError:
        tail = self.console_log()[-TAIL_LINES:]
        self._stop()
        self.state = State.OFF
        return BootError(s, reason, tail, self.log_path)

    def transition(self, goal: str) -> None:
        """Go forward through the states until ``goal`` (labgrid's transition())."""
        want = state_named(goal)
        if want is State.OFF:
            self.close()
            return
        while not self._reached(want):
            nxt = ORDER[ORDER.index(self.state) + 1]
            limit = self.timeouts[nxt]
            deadline = time.monotonic() + limit
            try:
                self.handlers[nxt](deadline)
            except ConsoleTimeout:
                raise self._fail(nxt, f"no '{nxt}' within {limit:g} s") from None
            except GuestFatal as e:
                raise self._fail(nxt, f"the guest died: {e.line.strip()}") from None
            except ConsoleClosed:
                rc = self._proc.poll() if self._proc else None
                raise self._fail(nxt, f"QEMU exited (status {rc}) before '{nxt}'") from None
            except StateUnavailable:
                raise
            except BaseException:
                self._stop()  # Ctrl-C or a bug: QEMU goes with us
                self.state = State.OFF
                raise
            self._enter(nxt)

    def boot(self, goal: str = State.SHELL) -> VM:
        self.transition(goal)
        return self

    # --- the states ---------------------------------------------------------------------------

    def _reach_booting(self, deadline: float, retry: bool = False) -> None:
        hosttools.ensure([binary(self.spec.kernel)])
        self._rundir = rundir()
        sock = self._rundir / "console.sock"
        if any(n.ssh for n in nics(self.spec.kernel)) and self.ssh_port is None:
            self.ssh_port = free_port()
        spec = VmSpec(**{**self.spec.__dict__, "ssh_port": self.ssh_port})
        argv = command(spec, sock)
        logdir = paths.cache_dir() / "vm" / "logs"
        logdir.mkdir(parents=True, exist_ok=True)
        _prune(logdir)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        self.log_path = logdir / f"{self.name}-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:6]}.log"
        self._logfh = self.log_path.open("w", encoding="utf-8")
        self.started_at = time.monotonic()
        self._proc = proc.spawn(argv, output=self._rundir / "qemu.out")  # QEMU's messages
        self._logfh.write(f"$ {self._proc.line}\n")
        self._logfh.flush()
        self.last_pid = self._proc.pid
        self.transitions = []
        try:
            self._console = Console.connect(
                sock,
                deadline=deadline,
                alive=lambda: self._proc is not None and self._proc.poll() is None,
                logfile=self._logfh,
                fatal=list(config()["fatal"]["patterns"]),
                echo=self._echo,
            )
            self._console.wait_first_byte(deadline)
        except ConsoleClosed:
            err = self._qemu_message()
            self._stop()
            if "forwarding rule" in err and not retry:
                # Another program took the free port between our check and QEMU's bind.
                self.ssh_port = None
                self._reach_booting(deadline, retry=True)
                return
            raise WolfError(f"QEMU failed to start: {err or 'no message'}") from None

    def _qemu_message(self) -> str:
        if self._rundir is None:
            return ""
        with contextlib.suppress(OSError):
            text = (self._rundir / "qemu.out").read_text(errors="replace").strip()
            return text.splitlines()[-1] if text else ""
        return ""

    def _reach_console(self, deadline: float) -> None:
        self.console.expect(config()["states"]["console"]["pattern"], start=0, deadline=deadline)

    def _reach_shell(self, deadline: float) -> None:
        start = self.console.pos
        self.console.send("\n")  # "Please press Enter"
        self.console.expect(config()["states"]["shell"]["pattern"], start=start, deadline=deadline)
        # Kernel messages on the console would land inside command output (even inside our
        # markers): lower the console log level first, then sync on a marked no-op.
        self.console.send("dmesg -n 1 2>/dev/null\n")
        self._run("true", deadline)

    def _reach_network(self, deadline: float) -> None:
        # ubus's -t counts the guest's seconds; under -icount the guest's clock can run ahead of
        # the host's (an idle guest skips time), so the host's deadline decides, over retries
        while True:
            seconds = max(1, int(deadline - time.monotonic()) - 1)
            cmd = str(config()["states"]["network"]["command"]).replace(
                "ubus ", f"ubus -t {seconds} ", 1
            )
            r = self._run(cmd, deadline)
            if r.exit_status == 127:
                raise StateUnavailable(
                    f"{self.name}: the image has no ubus; it is not an OpenWrt system"
                )
            if r.exit_status == 0:
                return
            if time.monotonic() + 2 > deadline:
                raise ConsoleTimeout(f"{cmd} exited {r.exit_status}")
            time.sleep(1)

    def _reach_ssh(self, deadline: float) -> None:
        has = self._run("[ -x /usr/sbin/dropbear ] || [ -x /usr/sbin/sshd ]", deadline)
        if has.exit_status != 0:
            raise StateUnavailable(
                f"{self.name}: the image has no SSH server (no /usr/sbin/dropbear or sshd)",
                hint="use the console, or build the image with dropbear",
            )
        assert self.ssh_port is not None
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.ssh_port), timeout=2) as s,
            ):
                s.settimeout(2)
                if s.recv(64).startswith(b"SSH-"):
                    return
            if time.monotonic() > deadline:
                raise ConsoleTimeout("no SSH banner")
            time.sleep(0.5)

    # --- Target -------------------------------------------------------------------------

    def _run(self, command: str, deadline: float) -> CommandResult:
        """Run one shell command on the console between two markers the echo can't fake."""
        tag = uuid.uuid4().hex[:10]
        c = self.console
        start = c.pos
        c.send(console_line(command, tag) + "\n")
        # The echoed input holds "__WS_%s' <tag>", never "__WS_<tag>": only the output matches.
        begin = c.expect(rf"__WS_{tag}", start=start, deadline=deadline)
        end = c.expect(rf"__WE_{tag} (\d+)\n", start=begin.end(), deadline=deadline)
        output = _KMSG.sub("", c.text[begin.end() : end.start()]).removeprefix("\n")
        return CommandResult(command, int(end.group(1)), output)

    def run(self, command: str, *, timeout: float = 30.0) -> CommandResult:
        if not self._reached(State.SHELL):
            self.transition(State.SHELL)
        if len(console_line(command, "0" * 10)) > CONSOLE_LINE_MAX or "\n" in command:
            # Busybox's line editor truncates long lines: go through a script file instead.
            script = f"/tmp/.wolf-{uuid.uuid4().hex[:8]}.sh"
            self._write_remote(command.encode() + b"\n", script, timeout)
            command = f"sh {script}; r=$?; rm -f {script}; (exit $r)"
        try:
            return self._run(command, time.monotonic() + timeout)
        except ConsoleTimeout:
            raise WolfError(
                f"{self.name}: command did not finish within {timeout:g} s: {command}",
                hint=f"console log: {self.log_path}",
            ) from None
        except (ConsoleClosed, GuestFatal) as e:
            raise self._fail(self.state, f"while running {command!r}: {e}") from None

    def _write_remote(self, data: bytes, remote: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for cmd in write_commands(data, remote):
            r = self._run(cmd, deadline)
            if r.exit_status != 0:
                raise WolfError(f"{self.name}: writing {remote} failed: {r.output.strip()}")

    def put(self, local: Path, remote: str, *, timeout: float = 300.0) -> None:
        """Copy a file in over the console (works on every image; slow for big files)."""
        if not local.is_file():
            raise WolfError(f"{local} is not a file", hint="pass an existing file to copy")
        if not self._reached(State.SHELL):
            self.transition(State.SHELL)
        data = local.read_bytes()
        if len(data) > HTTP_PUT_OVER and self._fetched_in(data, remote, timeout):
            return
        try:
            self._write_remote(data, remote, timeout)
            size = self._run(f"wc -c < {shlex.quote(remote)}", time.monotonic() + 30)
        except ConsoleTimeout:
            raise WolfError(f"{self.name}: copying {local} took over {timeout:g} s") from None
        if size.output.strip() != str(len(data)):
            raise WolfError(
                f"{self.name}: {remote} has {size.output.strip()!r} bytes, expected {len(data)}"
            )

    def _fetched_in(self, data: bytes, remote: str, timeout: float) -> bool:
        """Copy in over the lan when the guest is on it and has a fetch tool (OpenWrt's
        uclient-fetch, busybox wget): the guest fetches the bytes from a one-file HTTP server
        on the host's loopback, which QEMU's user network shows it as the lan's .2. True when
        the guest's sha256sum of the copy is ours; False: take the console."""
        host = lan_host(self.spec.kernel)
        if host is None:
            return False
        deadline = time.monotonic() + timeout
        if not self._reached(State.NETWORK):
            if not self._run("command -v ubus", deadline).output.strip():
                return False  # no netifd to wait for: not an OpenWrt image
            try:
                self.transition(State.NETWORK)
            except StateUnavailable:
                return False
        tool = self._run("command -v uclient-fetch || command -v wget", deadline).output.strip()
        if not tool or not self._run("command -v sha256sum", deadline).output.strip():
            return False
        token = uuid.uuid4().hex
        with served({"file": data}, token) as port:
            q = shlex.quote(remote)
            url = f"http://{host}:{port}/{token}/file"
            got = self._run(f"{tool.splitlines()[0]} -q -O {q} {url} && sha256sum {q}", deadline)
        return got.exit_status == 0 and hashlib.sha256(data).hexdigest() in got.output

    def reboot(self, *, timeout: float = 180.0) -> None:
        """Reboot the guest (QEMU exits on it: -no-reboot) and boot again to the same state."""
        goal = self.state if self.state is not State.OFF else State.SHELL
        if self._console is not None and self._reached(State.SHELL):
            with contextlib.suppress(ConsoleClosed):
                self.console.send("reboot\n")
            self.console.wait_closed(min(timeout, 60))
        self._stop()
        self._history += [ln for ln in self._console.lines() if ln] if self._console else []
        self._console = None
        self.state = State.OFF
        self.transition(goal)

    def console_log(self) -> list[str]:
        lines = self._console.lines() if self._console else []
        return self._history + [ln for ln in lines if ln != ""]

    def close(self) -> None:
        """Power off: `poweroff -f` from the shell, else (or if it hangs) kill QEMU."""
        if self._proc is None:
            return
        if self._console is not None and self._reached(State.SHELL):
            with contextlib.suppress(ConsoleClosed, OSError):
                self.console.send("sync; poweroff -f\n")
                self.console.wait_closed(10)
        self._stop()
        self._enter_off()

    def _enter_off(self) -> None:
        if self.state is not State.OFF:
            self._enter(State.OFF)

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.stop()
            self._proc = None
        if self._console is not None:
            self._console.close()
        if self._logfh is not None:
            self._logfh.close()
            self._logfh = None
        if self._rundir is not None:
            shutil.rmtree(self._rundir, ignore_errors=True)
            self._rundir = None


def _is_a_target(vm: VM) -> Target:
    return vm  # mypy checks here that VM implements the Target protocol
