"""The flash record (kind "flash"): what one sysupgrade of a router did, state by state
(targets/router/flash.py's state machine fills it and stores it). The one model of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..trust import untrusted

KIND = "flash"


@dataclass
class StateLog:
    state: str
    started: str
    seconds: float
    note: str = ""


@dataclass
class FlashResult:
    """What one flash did; stored as a record of kind "flash"."""

    device: str
    host: str
    port: int
    image: str
    image_sha256: str
    image_size: int
    devices_from: str
    flavour: str | None
    keep_settings: bool
    board_name: str = ""
    model: str = ""
    before: dict[str, str] = field(default_factory=dict)  # /etc/openwrt_release before
    after: dict[str, str] = field(default_factory=dict)  # and after
    copy_method: str = ""
    sysupgrade_test_output: str = ""
    sysupgrade_output: str = ""  # what `sysupgrade -v` printed before the connection dropped
    package_manager: str = ""
    tls_packages: list[str] = field(default_factory=list)
    host_key_changed: bool = False
    states: list[StateLog] = field(default_factory=list)
    session_log: list[str] = field(default_factory=list)  # commands and output, both sessions
    ok: bool = False
    error: str = ""

    @classmethod
    def from_dict(cls, d: Any, where: str = "flash record") -> FlashResult:
        """Read back from the store: every field checked (untrusted.typed)."""
        return untrusted.typed(cls, d, where)
