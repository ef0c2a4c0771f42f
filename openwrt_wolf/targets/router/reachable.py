"""Whether a router's SSH port answers, polled while it goes down and comes back (a reboot,
a sysupgrade): the banner when SSH answers, else what was seen, for "last seen" in errors."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from ...errors import WolfError
from .login import Login


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
