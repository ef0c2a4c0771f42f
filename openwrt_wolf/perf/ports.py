"""TCP ports on this machine: a free one for a server (targets/vm/qemu.py's, which QEMU's
forwarded ports take too), and waiting until a server listens."""

from __future__ import annotations

import socket
import time

from .. import proc
from ..errors import WolfError
from ..targets.vm.qemu import free_port as free_port  # one finder of a free port


def listening(address: str, port: int) -> bool:
    """Whether something accepts connections on address:port (seen from this machine)."""
    with socket.socket() as s:
        return s.connect_ex((address, port)) == 0


def wait_listening(
    address: str, port: int, timeout: float, server: proc.Spawned | None = None
) -> None:
    """Until something listens on address:port; a ``server`` that exits first is one line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server is not None and (status := server.poll()) is not None:
            raise WolfError(f"the server exited ({status}) before listening on {port}")
        if listening(address, port):
            return
        time.sleep(0.1)
    raise WolfError(f"nothing listens on {address}:{port} after {timeout:g} s")
