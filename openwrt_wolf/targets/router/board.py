"""What a running OpenWrt says it is: `ubus call system board` (board_name, model, release)."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import WolfError
from ...trust import untrusted
from ..target import Target


@dataclass(frozen=True)
class Board:
    """`ubus call system board` of a router: what the record names it by."""

    board_name: str
    model: str
    release: str | None  # its release.version (procd reads /etc/openwrt_release for it)


def board(
    target: Target, *, timeout: float = 30.0, hint: str = "is this an OpenWrt router?"
) -> Board:
    """`ubus call system board`; one clear line when the target does not answer it."""
    r = target.run("ubus call system board", timeout=timeout)
    try:  # the router's answer is untrusted: only finite 64-bit numbers, bounded nesting
        d = untrusted.loads_json(r.output, "ubus") if r.exit_status == 0 else None
    except WolfError:
        d = None
    if not isinstance(d, dict) or not d.get("board_name"):
        raise WolfError(
            f"`ubus call system board` on {target.name} failed (exit {r.exit_status}): "
            f"{' '.join(r.output.split())[:160]}",
            hint=hint,
        )
    rel = d.get("release")
    version = rel.get("version") if isinstance(rel, dict) else None
    return Board(str(d["board_name"]), str(d.get("model", "")), str(version) if version else None)
