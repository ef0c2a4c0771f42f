"""Where and how to log in to a router (``Login``), from the CLI options: host, port, user, a
key file or a password (asked on the terminal, or $OPENWRT_WOLF_ROUTER_PASSWORD)."""

from __future__ import annotations

import getpass
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ...errors import WolfError


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


def how(login: Login) -> str:
    """How we log in, for messages."""
    if login.key:
        return f"key {login.key}"
    if login.password == "":
        return "an empty password (a fresh OpenWrt's root)"
    if login.password is not None:
        return "password"
    return "ssh-agent and ~/.ssh keys"


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
