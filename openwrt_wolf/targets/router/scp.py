"""Copying a file onto a router without SFTP: the legacy scp protocol (what `scp -O` speaks,
and what dropbear's scp understands), and a plain `cat > file` for routers built without scp.

The scp "sink" side runs on the router as `scp -t <path>`; we are the source. Every step waits
for a one-byte answer: 0 = ok, 1 = warning + message line, 2 = fatal + message line."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import Path

import paramiko

from ...errors import WolfError
from .failures import CommandTimeout, ConnectionLost, CopyUnavailable

CHUNK = 32 * 1024
NOT_FOUND = 127  # the shell's exit status for a missing command


def _stderr(chan: paramiko.Channel) -> str:
    data = b""
    while chan.recv_stderr_ready():
        data += chan.recv_stderr(4096)
    return data.decode("utf-8", "replace").strip()


def _exit_status(chan: paramiko.Channel, seconds: float) -> int | None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if chan.exit_status_ready():
            return chan.exit_status
        time.sleep(0.05)
    return None


def _ack(chan: paramiko.Channel, step: str) -> None:
    """Read the sink's answer to the last step."""
    try:
        code = chan.recv(1)
    except TimeoutError:
        raise CommandTimeout(f"scp on the router did not answer ({step})") from None
    if code == b"\0":
        return
    if code == b"":
        status = _exit_status(chan, 2.0)
        err = _stderr(chan)
        if status == NOT_FOUND or "not found" in err:
            raise CopyUnavailable(f"no scp on the router ({err or 'exit 127'})")
        t = chan.get_transport()
        if status is None and (t is None or not t.is_active()):
            raise ConnectionLost(f"connection lost during scp ({step})")
        raise WolfError(f"scp on the router quit during {step} (exit {status}): {err}")
    msg = b""
    while not msg.endswith(b"\n") and len(msg) < 1024:
        c = chan.recv(1)
        if not c:
            break
        msg += c
    text = (code + msg).decode("utf-8", "replace")[1:].strip()
    raise WolfError(f"scp on the router refused the copy ({step}): {text}")


def _send_file(
    chan: paramiko.Channel, local: Path, progress: Callable[[int, int], None] | None
) -> None:
    size = local.stat().st_size
    sent = 0
    try:
        with local.open("rb") as fh:
            while chunk := fh.read(CHUNK):
                chan.sendall(chunk)
                sent += len(chunk)
                if progress:
                    progress(sent, size)
    except TimeoutError:
        raise CommandTimeout(f"copy stalled after {sent} of {size} bytes") from None
    except (OSError, EOFError, paramiko.SSHException):
        raise ConnectionLost(f"connection lost after {sent} of {size} bytes") from None


def send(
    chan: paramiko.Channel,
    local: Path,
    remote: str,
    *,
    timeout: float,
    progress: Callable[[int, int], None] | None = None,
    mode: int = 0o644,
) -> None:
    """Copy ``local`` to the file ``remote`` over an unused session channel."""
    chan.settimeout(timeout)
    try:
        chan.exec_command(f"scp -t {shlex.quote(remote)}")
        _ack(chan, "start")
        size = local.stat().st_size
        name = Path(remote).name or local.name
        chan.sendall(f"C{mode:04o} {size} {name}\n".encode())
        _ack(chan, "file header")
        _send_file(chan, local, progress)
        chan.sendall(b"\0")
        _ack(chan, "end of file")
        chan.shutdown_write()
        status = _exit_status(chan, min(timeout, 30.0))
        if status not in (0, None):
            raise WolfError(f"scp on the router exited {status}: {_stderr(chan)}")
    except paramiko.SSHException as e:
        raise ConnectionLost(f"connection lost during scp: {e}") from None
    finally:
        chan.close()


def stream_command(
    chan: paramiko.Channel,
    command: str,
    local: Path,
    *,
    timeout: float,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Feed ``local`` to ``command``'s stdin (e.g. `cat > file`) and check its exit status."""
    chan.settimeout(timeout)
    try:
        chan.exec_command(command)
        _send_file(chan, local, progress)
        chan.shutdown_write()
        status = _exit_status(chan, timeout)
        if status is None:
            t = chan.get_transport()
            if t is None or not t.is_active():
                raise ConnectionLost(f"connection lost during {command!r}")
            raise CommandTimeout(f"{command!r} did not finish within {timeout:g} s")
        if status != 0:
            raise WolfError(f"{command!r} on the router failed (exit {status}): {_stderr(chan)}")
    except paramiko.SSHException as e:
        raise ConnectionLost(f"connection lost during {command!r}: {e}") from None
    finally:
        chan.close()
