"""The router Target over SSH (paramiko): run a command, copy a file in (SFTP, else the
legacy scp protocol dropbear speaks, else `cat`), reboot and wait, keep a console log.

Host keys are checked against a known_hosts file: an unknown key is refused unless the user
said --accept-new (then it is appended), a changed key is always refused with one line.
Every network step has a timeout; every failure is a WolfError with one line."""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import shlex
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paramiko
import paramiko.auth_strategy

from ...errors import WolfError
from ..target import CommandResult
from . import scp
from .errors import AuthFailed, CommandTimeout, ConnectionLost, CopyUnavailable
from .hostkeys import HostKeyChanged, fingerprint, load_known, remember_host

log = logging.getLogger("openwrt_wolf.targets.router")
# paramiko logs every refused probe with a traceback; our own lines say what happened
logging.getLogger("paramiko").setLevel(logging.CRITICAL)

ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class Login:
    """Where and how to log in. ``known_hosts`` defaults to ~/.ssh/known_hosts."""

    host: str
    port: int = 22
    user: str = "root"
    key: Path | None = None
    password: str | None = None
    known_hosts: Path | None = None
    accept_new: bool = False
    connect_timeout: float = 15.0

    @property
    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def host_entry(self) -> str:
        """The name known_hosts files use: bare host on port 22, else [host]:port."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def known_hosts_path(self) -> Path:
        return self.known_hosts or Path.home() / ".ssh" / "known_hosts"


class _Unknown(Exception):
    def __init__(self, key: paramiko.PKey) -> None:
        self.key = key


class _Policy(paramiko.MissingHostKeyPolicy):
    """Unknown key: remember it with accept_new, else refuse (paramiko calls this only for
    hosts absent from known_hosts; a changed key raises BadHostKeyException instead)."""

    def __init__(self, login: Login) -> None:
        self.login = login

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        if not self.login.accept_new:
            raise _Unknown(key)
        remember_host(self.login.known_hosts_path(), self.login.host_entry, key)
        log.info("added %s (%s) to %s", hostname, fingerprint(key), self.login.known_hosts_path())


class _BlankRoot(paramiko.auth_strategy.AuthStrategy):
    """A new or wiped OpenWrt: root has no password. dropbear then lets it in with the "none"
    method (OpenWrt runs it with blank passwords allowed), some setups with an empty one."""

    def __init__(self, user: str) -> None:
        super().__init__(ssh_config=paramiko.SSHConfig())
        self.user = user

    def get_sources(self) -> Iterator[paramiko.auth_strategy.AuthSource]:
        yield paramiko.auth_strategy.NoneAuth(self.user)
        yield paramiko.auth_strategy.Password(self.user, lambda: "")


def open_client(login: Login) -> paramiko.SSHClient:
    """Connect and authenticate, or raise one clear WolfError."""
    kh = login.known_hosts_path()
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(_Policy(login))
    known = load_known(kh)
    for name, keys in known.items():  # HostKeys of the client: not saved back by paramiko
        for ktype, key in keys.items():
            client.get_host_keys().add(name, ktype, key)
    t = login.connect_timeout
    blank = login.password == "" and login.key is None
    try:
        client.connect(
            login.host,
            port=login.port,
            username=login.user,
            key_filename=str(login.key) if login.key else None,
            password=login.password,
            timeout=t,
            banner_timeout=t,
            auth_timeout=t,
            channel_timeout=t,
            # an explicit key or password means exactly that; otherwise behave like ssh
            allow_agent=login.key is None and login.password is None,
            look_for_keys=login.key is None and login.password is None,
            auth_strategy=_BlankRoot(login.user) if blank else None,
        )
    except _Unknown as e:
        client.close()
        raise WolfError(
            f"host key of {login.host_entry} is not in {kh} (it offers {fingerprint(e.key)})",
            hint="check the fingerprint on the router (dropbearkey -y -f "
            "/etc/dropbear/dropbear_ed25519_host_key) and re-run with --accept-new",
        ) from None
    except paramiko.BadHostKeyException as e:
        client.close()
        raise HostKeyChanged(
            f"host key of {login.host_entry} changed: {kh} has {fingerprint(e.expected_key)}, "
            f"the router offers {fingerprint(e.key)}; refusing to connect",
            hint="if the router was reflashed or reset, remove the old key with "
            f"ssh-keygen -f {kh} -R '{login.host_entry}'",
            offered=e.key,
        ) from None
    except paramiko.AuthenticationException:
        client.close()
        raise AuthFailed(
            f"authentication failed for {login.where} with {how(login)}",
            hint="check --user, --key or --password (a fresh OpenWrt has no root password: "
            "--password and an empty answer)",
        ) from None
    except paramiko.ssh_exception.NoValidConnectionsError as e:
        client.close()
        raise WolfError(
            f"connection refused by {login.host}:{login.port}",
            hint="is the router up and is SSH (dropbear) listening on that port?",
        ) from e
    except TimeoutError:
        client.close()
        raise WolfError(
            f"no answer from {login.host}:{login.port} within {t:g} s",
            hint="check the address, the cable and that you are on the router's LAN",
        ) from None
    except paramiko.SSHException as e:
        client.close()
        if "No authentication methods available" in str(e):
            raise AuthFailed(
                f"no key or password to log in to {login.where} with",
                hint="give --key PATH or --password (an ssh-agent or ~/.ssh keys work too)",
            ) from None
        raise WolfError(f"SSH handshake with {login.host}:{login.port} failed: {e}") from None
    except OSError as e:
        client.close()
        raise WolfError(f"cannot connect to {login.host}:{login.port}: {e.strerror or e}") from None
    return client


def how(login: Login) -> str:
    """How we log in, for messages."""
    if login.key:
        return f"key {login.key}"
    if login.password == "":
        return "an empty password (a fresh OpenWrt's root)"
    if login.password is not None:
        return "password"
    return "ssh-agent and ~/.ssh keys"


def probe(host: str, port: int, timeout: float = 3.0) -> tuple[str | None, str]:
    """What the SSH port shows right now: (the server's banner line when SSH answers, else
    None; a human description of what was seen, for "last seen" in errors)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            data = b""
            while b"\n" not in data and len(data) < 256:
                chunk = s.recv(256)
                if not chunk:
                    break
                data += chunk
    except ConnectionRefusedError:
        return None, "connection refused"
    except TimeoutError:
        return None, "no answer (timed out)"
    except OSError as e:
        return None, f"network error: {e.strerror or e}"
    line = data.split(b"\n", 1)[0].decode("ascii", "replace").strip()
    if line.startswith("SSH-"):
        return line, f"SSH answering ({line})"
    return None, ("port open but no SSH banner" if not line else f"port open, not SSH: {line!r}")


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
        deadline = time.monotonic() + timeout
        buf = b""
        out: list[str] = []

        def emit(raw: bytes) -> None:
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            out.append(text)
            self._log.append(text)
            if on_line:
                on_line(text)

        eof = False
        try:
            chan.exec_command(command)
            while True:
                if not eof:
                    try:
                        chunk: bytes | None = chan.recv(32768)
                    except TimeoutError:
                        chunk = None
                    except (OSError, EOFError, paramiko.SSHException):
                        chunk = b""
                    if chunk:
                        buf += chunk
                        while b"\n" in buf:
                            line, buf = buf.split(b"\n", 1)
                            emit(line)
                        continue
                    eof = chunk == b""
                if chan.exit_status_ready():
                    # the output arrived before the status: take what is still buffered
                    while chan.recv_ready():
                        buf += chan.recv(32768)
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        emit(line)
                    break
                t = chan.get_transport()
                if chan.closed and t is not None and t.is_active():
                    # a channel closed without a status: the command was killed by a signal,
                    # or the whole connection is going down (give the transport time to tell)
                    if self._wait_status(chan, 1.0):
                        break
                    t = chan.get_transport()
                    if t is not None and t.is_active():
                        break  # killed by a signal; the status stays -1
                if t is None or not t.is_active():
                    if self._wait_status(chan, 0.5):
                        break
                    if buf:
                        emit(buf)
                        buf = b""
                    self._log.append("[connection lost]")
                    raise ConnectionLost(
                        f"connection to {self.name} closed while running {command!r}"
                    )
                if time.monotonic() > deadline:
                    if buf:
                        emit(buf)
                        buf = b""
                    raise CommandTimeout(
                        f"{command!r} on {self.name} did not finish within {timeout:g} s"
                    )
                if eof:
                    time.sleep(0.05)
        except (paramiko.SSHException, OSError, EOFError) as e:
            raise ConnectionLost(
                f"connection to {self.name} failed running {command!r}: {e or type(e).__name__}"
            ) from None
        finally:
            chan.close()
        if buf:
            emit(buf)
        status = chan.exit_status if chan.exit_status_ready() else -1
        return CommandResult(command, status, "\n".join(out) + ("\n" if out else ""))

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
        self.client.close()

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


def wait_down(
    login: Login,
    *,
    timeout: float,
    interval: float = 1.0,
    on_poll: Callable[[float, str], None] | None = None,
    after: str = "the upgrade started",
) -> str:
    """Wait until SSH stops answering; returns what was last seen. WolfError on timeout.
    ``after`` names what should have taken the router down (sysupgrade, a reboot)."""
    start = time.monotonic()
    while True:
        banner, seen = probe(login.host, login.port, timeout=min(3.0, interval * 3))
        elapsed = time.monotonic() - start
        if on_poll:
            on_poll(elapsed, seen)
        if banner is None:
            return seen
        if elapsed > timeout:
            raise WolfError(
                f"{login.host_entry} still answered SSH {timeout:g} s after {after} "
                f"(last seen: {seen})",
                hint="it may not have gone down; look at `logread` on the router",
            )
        time.sleep(interval)


def wait_up(
    login: Login,
    *,
    timeout: float,
    interval: float = 2.0,
    on_poll: Callable[[float, str], None] | None = None,
) -> str:
    """Wait until SSH answers again; returns the banner. WolfError naming what was last seen."""
    start = time.monotonic()
    while True:
        banner, seen = probe(login.host, login.port, timeout=min(3.0, max(interval, 0.5)))
        elapsed = time.monotonic() - start
        if on_poll:
            on_poll(elapsed, seen)
        if banner is not None:
            return banner
        if elapsed > timeout:
            raise WolfError(
                f"{login.host_entry} did not come back within {timeout:g} s (last seen: {seen})",
                hint="a first boot after flashing can take minutes: try --wait-up 600, or "
                "check the router's LEDs and serial console (failsafe?)",
            )
        time.sleep(interval)


def _password(ask: bool) -> str | None:
    if not ask:
        return None
    env = os.environ.get("OPENWRT_WOLF_ROUTER_PASSWORD")
    if env is not None:
        return env
    if not sys.stdin.isatty():
        raise WolfError(
            "--password needs a terminal to ask on",
            hint="set OPENWRT_WOLF_ROUTER_PASSWORD, or use --key",
        )
    return getpass.getpass("router password: ")


def login_from_cli(
    host: str,
    *,
    port: int = 22,
    user: str = "root",
    key: str | None = None,
    password: bool = False,
    accept_new: bool = False,
    known_hosts: str | None = None,
) -> Login:
    """The Login the CLI options describe (`invoke flash`, `invoke measure-memory --host`)."""
    if key and password:
        raise WolfError("give --key or --password, not both")
    keypath = Path(key).expanduser() if key else None
    if keypath and not keypath.is_file():
        raise WolfError(f"key file not found: {keypath}", hint="--key takes a private key file")
    return Login(
        host=host,
        port=int(port),
        user=user,
        key=keypath,
        password=_password(password),
        known_hosts=Path(known_hosts).expanduser() if known_hosts else None,
        accept_new=accept_new,
    )


def open_target(host: str, **options: Any) -> SSHTarget:
    """A connected router Target from CLI options (see login_from_cli), e.g. for
    `invoke measure-memory --host 192.168.1.1 --key ~/.ssh/id_ed25519`."""
    return SSHTarget(login_from_cli(host, **options))
