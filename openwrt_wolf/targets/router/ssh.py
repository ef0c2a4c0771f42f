"""The router Target over SSH (paramiko): run a command, copy a file in (SFTP, else the
legacy scp protocol dropbear speaks, else `cat`), reboot and wait, keep a console log.

Logging in is connect.py (host keys: hostkeys.py; options: login.py), waiting for the SSH port
reachable.py, the scp protocol scp.py. Every network step has a timeout; every failure is a
WolfError with one line."""

from __future__ import annotations

import contextlib
import logging
import shlex
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko

from ...errors import WolfError
from ..target import CommandResult
from . import scp
from .connect import open_client
from .failures import CommandTimeout, ConnectionLost, CopyUnavailable
from .login import Login, login_from_cli
from .reachable import wait_down, wait_up

log = logging.getLogger("openwrt_wolf.targets.router")

ProgressFn = Callable[[int, int], None]


class _Lines:
    """A command's output cut into lines as it arrives: kept, logged and handed on."""

    def __init__(self, log: deque[str], on_line: Callable[[str], None] | None) -> None:
        self.log, self.on_line = log, on_line
        self.buf = b""
        self.out: list[str] = []

    def emit(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        self.out.append(text)
        self.log.append(text)
        if self.on_line:
            self.on_line(text)

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self.emit(line)

    def flush(self) -> None:
        """The last line, also without its newline (before an error, and at the end)."""
        if self.buf:
            self.emit(self.buf)
            self.buf = b""

    def text(self) -> str:
        return "\n".join(self.out) + ("\n" if self.out else "")


def _alive(t: paramiko.Transport | None) -> bool:
    return t is not None and t.is_active()


class SSHTarget:
    """A running OpenWrt router reached over SSH; implements target.Target."""

    def __init__(self, login: Login, *, console_lines: int = 2000) -> None:
        self.login = login
        self.name = login.host_entry
        self._log: deque[str] = deque(maxlen=console_lines)
        self.copy_method = ""
        self.client = open_client(login)
        # when the router became usable (connect, or back from reboot): the VM's started_at
        self.started_at = time.monotonic()

    # -- Target --------------------------------------------------------------------------

    def run(
        self,
        command: str,
        *,
        timeout: float = 30.0,
        on_line: Callable[[str], None] | None = None,
    ) -> CommandResult:
        """Run a command through the router's shell, stdout and stderr together.

        Raises CommandTimeout when it runs longer than ``timeout`` and ConnectionLost when the
        connection closes before the command's exit status arrives."""
        self._log.append(f"$ {command}")
        chan = self._session(timeout)
        chan.set_combine_stderr(True)
        chan.settimeout(0.2)
        lines = _Lines(self._log, on_line)
        try:
            chan.exec_command(command)
            self._collect(chan, lines, command, timeout)
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise ConnectionLost(
                f"connection to {self.name} failed running {command!r}: {e or type(e).__name__}"
            ) from None
        finally:
            chan.close()
        lines.flush()
        status = chan.exit_status if chan.exit_status_ready() else -1
        return CommandResult(command, status, lines.text())

    def _collect(self, chan: paramiko.Channel, lines: _Lines, command: str, timeout: float) -> None:
        """Read the command's output until its exit status (or its end without one) arrives."""
        deadline = time.monotonic() + timeout
        eof = False
        while True:
            if not eof:
                try:
                    chunk: bytes | None = chan.recv(32768)
                except TimeoutError:
                    chunk = None
                except (OSError, EOFError, paramiko.SSHException):
                    chunk = b""
                if chunk:
                    lines.feed(chunk)
                    continue
                eof = chunk == b""
            if chan.exit_status_ready():
                # the output arrived before the status: take what is still buffered
                while chan.recv_ready():
                    lines.feed(chan.recv(32768))
                return
            if self._ended(chan, lines, command):
                return
            if time.monotonic() > deadline:
                lines.flush()
                raise CommandTimeout(
                    f"{command!r} on {self.name} did not finish within {timeout:g} s"
                )
            if eof:
                time.sleep(0.05)

    def _ended(self, chan: paramiko.Channel, lines: _Lines, command: str) -> bool:
        """Whether the channel closed without more to come; ConnectionLost when the whole
        connection went down before the command's exit status arrived."""
        t = chan.get_transport()
        if chan.closed and _alive(t):
            # a channel closed without a status: the command was killed by a signal, or the
            # whole connection is going down (give the transport time to tell)
            if self._wait_status(chan, 1.0):
                return True
            t = chan.get_transport()
            if _alive(t):
                return True  # killed by a signal; the status stays -1
        if not _alive(t):
            if self._wait_status(chan, 0.5):
                return True
            lines.flush()
            self._log.append("[connection lost]")
            raise ConnectionLost(f"connection to {self.name} closed while running {command!r}")
        return False

    def put(
        self,
        local: Path,
        remote: str,
        *,
        timeout: float = 300.0,
        method: str = "auto",
        progress: ProgressFn | None = None,
    ) -> None:
        """Copy ``local`` to ``remote`` on the router; ``copy_method`` says how it went.

        auto: SFTP when the router has an sftp-server, else the scp protocol (dropbear's scp),
        else `cat` over a plain exec channel (a router built without scp)."""
        local = Path(local)
        if not local.is_file():
            raise WolfError(f"no such file to copy: {local}")
        self._log.append(f"[copy {local} -> {remote} ({method})]")
        order = ["sftp", "scp", "cat"] if method == "auto" else [method]
        last: WolfError | None = None
        for m in order:
            try:
                if m == "sftp":
                    self._put_sftp(local, remote, timeout, progress)
                elif m == "scp":
                    chan = self._session(timeout)
                    scp.send(chan, local, remote, timeout=timeout, progress=progress)
                elif m == "cat":
                    self._put_cat(local, remote, timeout, progress)
                else:
                    raise WolfError(f"unknown copy method {m!r}", hint="auto, sftp, scp or cat")
                self.copy_method = m
                return
            except CopyUnavailable as e:
                log.info("%s: %s, trying the next copy method", self.name, e)
                last = e
        assert last is not None
        raise last

    def reboot(self, *, timeout: float = 180.0) -> None:
        """`reboot`, wait for SSH to go away and come back, reconnect."""
        with contextlib.suppress(ConnectionLost, CommandTimeout):
            self.run("reboot", timeout=10)
        wait_down(self.login, timeout=min(60.0, timeout), after="the reboot command")
        self.client.close()
        wait_up(self.login, timeout=timeout)
        self.client = open_client(self.login)
        self.started_at = time.monotonic()

    def console_log(self) -> list[str]:
        return list(self._log)

    def close(self) -> None:
        """Close the connection, whatever state an interruption left paramiko in: a signal that
        lands inside open_session leaves a channel registered without its transport, and
        paramiko's close then raised AttributeError before it closed the socket."""
        t = self.client.get_transport()
        try:
            self.client.close()
        except Exception as e:  # closing must not replace the task's outcome
            log.debug("%s: closing the connection: %r; closing its socket", self.name, e)
            if t is not None:
                with contextlib.suppress(OSError):
                    t.sock.close()

    # -- helpers -------------------------------------------------------------------------

    def connected(self) -> bool:
        t = self.client.get_transport()
        return bool(t and t.is_active())

    def _session(self, timeout: float) -> paramiko.Channel:
        t = self.client.get_transport()
        if t is None or not t.is_active():
            raise ConnectionLost(f"connection to {self.name} is closed")
        try:
            return t.open_session(timeout=min(timeout, 30.0))
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise ConnectionLost(f"cannot open a channel to {self.name}: {e}") from None

    @staticmethod
    def _close_fully(chan: paramiko.Channel, seconds: float = 5.0) -> None:
        """Close a channel and wait until the server has closed it too (or the connection is
        gone), so the next channel does not race its teardown."""
        chan.close()
        t = chan.get_transport()
        end = time.monotonic() + seconds
        while t is not None and t.is_active() and time.monotonic() < end:
            # paramiko unlinks a channel once both sides sent CLOSE (no public accessor)
            if getattr(t, "_channels").get(chan.get_id()) is None:  # noqa: B009
                return
            time.sleep(0.02)

    @staticmethod
    def _wait_status(chan: paramiko.Channel, seconds: float) -> bool:
        """The exit status may trail the channel's EOF a little; a dead transport never sends it."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if chan.exit_status_ready():
                return True
            t = chan.get_transport()
            if t is None or not t.is_active():
                return False
            time.sleep(0.05)
        return chan.exit_status_ready()

    def _put_sftp(
        self, local: Path, remote: str, timeout: float, progress: ProgressFn | None
    ) -> None:
        # our own channel, so a router without sftp-server (dropbear starts the subsystem,
        # it exits 127) leaves nothing half-open: dropbear refuses the next channel otherwise
        chan = self._session(timeout)
        chan.settimeout(min(timeout, 30.0))
        try:
            chan.invoke_subsystem("sftp")
            sftp = paramiko.SFTPClient(chan)
        except (paramiko.SSHException, EOFError, OSError) as e:
            self._close_fully(chan)
            if not self.connected():
                raise ConnectionLost(f"connection to {self.name} lost opening SFTP") from None
            raise CopyUnavailable(f"no SFTP server ({e or 'subsystem refused'})") from None
        try:
            chan.settimeout(timeout)
            with local.open("rb") as fh:
                sftp.putfo(fh, remote, file_size=local.stat().st_size, callback=progress)
        except TimeoutError:
            raise CommandTimeout(f"SFTP copy to {self.name}:{remote} timed out") from None
        except OSError as e:
            if not self.connected():
                raise ConnectionLost(f"connection to {self.name} lost while copying") from None
            raise WolfError(f"SFTP copy to {self.name}:{remote} failed: {e}") from None
        except (EOFError, paramiko.SSHException):
            raise ConnectionLost(f"connection to {self.name} lost while copying") from None
        finally:
            sftp.close()

    def _put_cat(
        self, local: Path, remote: str, timeout: float, progress: ProgressFn | None
    ) -> None:
        chan = self._session(timeout)
        scp.stream_command(
            chan, f"cat > {shlex.quote(remote)}", local, timeout=timeout, progress=progress
        )


def open_target(host: str, **options: Any) -> SSHTarget:
    """A connected router Target from CLI options (see login_from_cli), e.g. for
    `invoke measure-memory --host 192.168.1.1 --key ~/.ssh/id_ed25519`."""
    return SSHTarget(login_from_cli(host, **options))
