"""One target interface for the QEMU VM and a real router, so every measurement runs on both."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_status: int
    output: str  # stdout and stderr together, as a console shows them


class Target(Protocol):
    """What a measurement may do with a running OpenWrt system."""

    name: str

    def run(self, command: str, *, timeout: float = 30.0) -> CommandResult:
        """Run a shell command on the target and wait for it."""
        ...

    def put(self, local: Path, remote: str, *, timeout: float = 300.0) -> None:
        """Copy a file onto the target."""
        ...

    def reboot(self, *, timeout: float = 180.0) -> None:
        """Reboot and return when the target is usable again."""
        ...

    def console_log(self) -> list[str]:
        """The lines the console (serial or SSH session) showed so far, newest last."""
        ...

    def close(self) -> None:
        """Release the target: power a VM off, close connections."""
        ...
