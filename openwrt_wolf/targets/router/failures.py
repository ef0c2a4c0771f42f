"""What can go wrong talking to a router, as WolfErrors the flash state machine can tell apart."""

from __future__ import annotations

from ...errors import WolfError


class ConnectionLost(WolfError):
    """The SSH connection closed under a running command (router rebooting, cable pulled)."""


class CommandTimeout(WolfError):
    """A remote command or copy did not finish in time."""


class CopyUnavailable(WolfError):
    """This copy method does not exist on the router (no sftp-server, no scp): try the next."""


class AuthFailed(WolfError):
    """The router refused our key or password."""
